//! Runners: a runner drives one conversation of a session (its model steps, tool calls,
//! approvals and compaction) until the turn's part of it ends.
//!
//! The session ([`crate::session`]) owns what all its conversations share: the journal and
//! the clients watching it, request dedup, the policy and pending approvals, and the link to
//! the driving client ([`DriverLink`]). A runner owns none of that. It holds a
//! [`Conversation`] (messages, byte-stable prefix, context accounting) and asks its
//! [`Host`] for everything else. The main conversation is one runner of a session; a
//! subagent or a planner is another runner with a conversation of its own, never a copy of
//! the step loop.
//!
//! Lock order: a runner may hold its conversation's lock while the host takes the session's
//! (an event is journaled under the same conversation lock that changes the messages, so a
//! reader that takes both, conversation first, sees them agree); the session never takes a
//! conversation's lock while holding its own.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};

use reasonix_forward::proto::{
    ApprovalDecision, ContextSettings, Event, EventKind, ToolCall, TurnState,
};
use reasonix_forward::sync::LockExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::content::ContentStore;
use crate::journal::{Barrier, JournalError};
use crate::policy::Decision;
use crate::session::DriverLink;
use crate::tools::{Tool, ToolContext};

mod compact;
mod conversation;
mod direct;
mod tool_call;
mod turn;

#[cfg(test)]
mod tests;

pub(crate) use compact::CompactEnd;
pub(crate) use conversation::{request_bytes_of, Conversation};

/// What a [`Host`]'s waiting methods return: a boxed future, so that `Host` is object safe
/// and the runner is compiled once for every host (the host binary's size, issue 17).
pub(crate) type HostFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a runner needs from the session it runs in: the journal and the state clients see,
/// the driving client's gateway, steers, the policy and approvals, and the tools. The session
/// implements it for its main conversation; a child conversation's host would narrow the
/// policy and name the child in what it journals, over the same session.
pub(crate) trait Host: Send + Sync {
    /// The session's current turn (provider stream ids and archive records carry it).
    fn turn(&self) -> u64;
    /// The model the driving client chose (`None`: the gateway's default).
    fn model(&self) -> Option<String>;
    /// Model steps a turn may take before it pauses (at least 1).
    fn max_steps(&self) -> u32;
    /// The context window and compaction thresholds.
    fn context_settings(&self) -> ContextSettings;
    /// How hard the model should reason (a request parameter, never part of the prefix).
    fn effort(&self) -> Option<reasonix_forward::proto::ReasoningEffort>;

    /// Journal an event and send it to the clients watching. No I/O happens here.
    fn record(&self, kind: EventKind) -> Event;
    /// [`record`](Self::record) and a durability point covering it.
    fn record_durable(&self, kind: EventKind) -> Barrier;
    /// Record a streamed delta; returns a durability point to wait for when the journal
    /// writer is far behind (a slow or failing disk), so deltas do not queue without bound.
    fn record_delta(&self, kind: EventKind) -> Option<Barrier>;
    /// Seq of the last journaled event.
    fn last_seq(&self) -> u64;
    /// The text the user sees when the journal refused a write at a durability point:
    /// `what` did not happen, the journal path and cause, and what to do.
    fn journal_failure(&self, what: &str, e: &JournalError) -> String;
    /// Show `state` (with `detail`) to the clients watching.
    fn set_state(&self, state: TurnState, detail: Option<String>);

    /// Wait for a driving client's gateway, showing "waiting for laptop" meanwhile; `None`
    /// when `cancel` fired first.
    fn wait_gateway<'a>(
        &'a self,
        cancel: &'a CancellationToken,
    ) -> HostFuture<'a, Option<Arc<dyn DriverLink>>>;
    /// The gateway of connection `conn_id` is gone for good: stop using it.
    fn release_driver(&self, conn_id: u64);

    /// Steers the user sent for this conversation and no model step took yet, taken and
    /// journaled as injected (their size estimated with `estimator`); returns the user
    /// message that carries them, to append after the last message.
    fn inject_steers(&self, estimator: &crate::compaction::Estimator) -> Option<Value>;
    /// True while steers wait for this conversation's next model step.
    fn steers_pending(&self) -> bool;

    /// The tool the model calls `name`, if this conversation has it.
    fn tool(&self, name: &str) -> Option<Arc<dyn Tool>>;
    /// What the permission policy says about calling `tool` with `args`.
    fn decide(&self, tool: &str, args: &Value, read_only: bool) -> Decision;
    /// Nobody can answer an approval question (the driving client is headless).
    fn headless(&self) -> bool;
    /// Ask the user to approve `call` (journaled durably before anyone is asked). `Ok(None)`
    /// when nobody answered: headless, or cancelled meanwhile.
    fn ask_approval<'a>(
        &'a self,
        call: &'a ToolCall,
        args: &'a Value,
        reason: String,
        cancel: &'a CancellationToken,
    ) -> HostFuture<'a, Result<Option<ApprovalDecision>, JournalError>>;
    /// The context tools run with (workspace, sandbox, limits of the current policy).
    fn tool_ctx(&self) -> ToolContext;
    /// Where a running tool's progress goes (to the clients watching, not journaled).
    fn tool_progress(&self, call_id: &str) -> crate::mcp::ProgressSink;
    /// Where outputs too big for an event go.
    fn content_store(&self) -> ContentStore;
    /// Run the hooks of an event (#34) and return what they decided; none by default.
    fn hooks(&self, _input: crate::hooks::Input) -> HostFuture<'_, crate::hooks::Verdict> {
        Box::pin(async { crate::hooks::Verdict::default() })
    }
}

/// Drives one conversation through its [`Host`] (a trait object: one compiled runner serves
/// the session, its subagents and its planner).
pub(crate) struct Runner<'a> {
    host: &'a dyn Host,
    conversation: &'a Mutex<Conversation>,
}

impl<'a> Runner<'a> {
    /// A runner of `conversation` in `host`.
    pub(crate) fn new(host: &'a dyn Host, conversation: &'a Mutex<Conversation>) -> Runner<'a> {
        Runner { host, conversation }
    }

    fn conversation(&self) -> MutexGuard<'a, Conversation> {
        // A poisoned lock means a panic while the messages changed; each change is one push
        // or one rewrite, so the conversation is still whole.
        self.conversation.lock_or_recover()
    }
}
