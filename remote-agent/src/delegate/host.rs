//! What a child conversation's runner gets from its session ([`crate::runner::Host`]): the
//! session's journal (events wrapped as the child's), gateway, policy (narrowed: read-only,
//! the tool subset, the write paths) and approvals (naming the child), and tools that carry
//! the child's scope. Steers go to the parent, never to a child.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use reasonix_forward::proto::{
    ApprovalDecision, ContextSettings, Event, EventKind, ReasoningEffort, ToolCall, TurnState,
};
use reasonix_forward::sync::LockExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{wrap, Scope, UsageSum};
use crate::content::ContentStore;
use crate::journal::{Barrier, JournalError};
use crate::policy::Decision;
use crate::runner::Host;
use crate::session::{DriverLink, Session};
use crate::tools::{Tool, ToolContext, ToolRegistry};

/// The host of one child's runner.
pub(crate) struct ChildHost {
    pub(super) session: Arc<Session>,
    pub(super) id: String,
    /// The profile it runs as (`general`, `explore` or a skill's name).
    pub(super) profile: String,
    pub(super) description: String,
    /// `(parent call, child)` layers its events are wrapped in, this child's last.
    pub(super) route: Vec<(String, String)>,
    pub(super) tools: ToolRegistry,
    pub(super) read_only: bool,
    pub(super) write_paths: Option<Arc<Vec<PathBuf>>>,
    pub(super) model: Option<String>,
    pub(super) effort: Option<ReasoningEffort>,
    pub(super) max_steps: u32,
    /// The scope the child's own tools run in (its children are one level deeper).
    pub(super) scope: Scope,
    /// Its token use (its own children add theirs when they end).
    pub(super) usage: Arc<Mutex<UsageSum>>,
}

impl ChildHost {
    fn wrapped(&self, kind: EventKind) -> EventKind {
        if let EventKind::Usage { usage, .. } = &kind {
            self.usage.lock_or_recover().add(usage);
        }
        wrap(&self.route, kind)
    }

    /// Journal `kind` as this child's event.
    pub(super) fn record(&self, kind: EventKind) -> Event {
        Host::record(&*self.session, self.wrapped(kind))
    }
}

impl Host for ChildHost {
    fn turn(&self) -> u64 {
        Host::turn(&*self.session)
    }

    fn model(&self) -> Option<String> {
        self.model.clone().or_else(|| Host::model(&*self.session))
    }

    fn max_steps(&self) -> u32 {
        self.max_steps
    }

    fn context_settings(&self) -> ContextSettings {
        Host::context_settings(&*self.session)
    }

    fn effort(&self) -> Option<ReasoningEffort> {
        self.effort.or_else(|| Host::effort(&*self.session))
    }

    fn record(&self, kind: EventKind) -> Event {
        ChildHost::record(self, kind)
    }

    fn record_durable(&self, kind: EventKind) -> Barrier {
        Host::record_durable(&*self.session, self.wrapped(kind))
    }

    fn record_delta(&self, kind: EventKind) -> Option<Barrier> {
        Host::record_delta(&*self.session, self.wrapped(kind))
    }

    fn last_seq(&self) -> u64 {
        Host::last_seq(&*self.session)
    }

    fn journal_failure(&self, what: &str, e: &JournalError) -> String {
        Host::journal_failure(&*self.session, what, e)
    }

    fn set_state(&self, _state: TurnState, _detail: Option<String>) {
        // The session's state is the parent's: a child neither runs nor parks it.
    }

    fn wait_gateway<'a>(
        &'a self,
        cancel: &'a CancellationToken,
    ) -> crate::runner::HostFuture<'a, Option<Arc<dyn DriverLink>>> {
        Box::pin(async move { Host::wait_gateway(&*self.session, cancel).await })
    }

    fn release_driver(&self, conn_id: u64) {
        Host::release_driver(&*self.session, conn_id)
    }

    fn inject_steers(&self, _estimator: &crate::compaction::Estimator) -> Option<Value> {
        // Steering text typed while children run goes to the parent.
        None
    }

    fn steers_pending(&self) -> bool {
        false
    }

    fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.get(name)
    }

    fn decide(&self, tool: &str, args: &Value, read_only: bool) -> Decision {
        if self.tools.get(tool).is_none() {
            return Decision::Deny {
                reason: format!("{tool} is not among this subagent's tools"),
            };
        }
        if self.read_only && !read_only {
            return Decision::Deny {
                reason: format!("this subagent is read-only and {tool} may change things"),
            };
        }
        if tool == "bash" && self.write_paths.is_some() {
            let ctx = Host::tool_ctx(&*self.session);
            if !ctx.sandbox.is_active() {
                return Decision::Deny {
                    reason: format!(
                        "bash cannot be confined to this subagent's write_paths: the sandbox is {}; use the file tools",
                        ctx.sandbox.status()
                    ),
                };
            }
        }
        // The session's policy (and plan mode) decide the rest: a child only narrows it.
        Host::decide(&*self.session, tool, args, read_only)
    }

    fn headless(&self) -> bool {
        Host::headless(&*self.session)
    }

    fn ask_approval<'a>(
        &'a self,
        call: &'a ToolCall,
        args: &'a Value,
        reason: String,
        cancel: &'a CancellationToken,
    ) -> crate::runner::HostFuture<'a, Result<Option<ApprovalDecision>, JournalError>> {
        Box::pin(async move {
            // The question reaches the user at the top level, naming the child and its task; the
            // call id is made unique in the session (a child's ids may repeat the parent's).
            let mut named = call.clone();
            named.id = format!("{}/{}", self.id, call.id);
            let reason = format!(
                "subagent {} ({}: {}): {reason}",
                self.id, self.profile, self.description
            );
            Host::ask_approval(&*self.session, &named, args, reason, cancel).await
        })
    }

    fn tool_ctx(&self) -> ToolContext {
        let mut ctx = Host::tool_ctx(&*self.session);
        if self.read_only {
            ctx.sandbox = Arc::new(ctx.sandbox.read_only());
        } else if let Some(paths) = &self.write_paths {
            ctx.sandbox = Arc::new(ctx.sandbox.with_write_paths(paths));
            ctx.write_only = Some(Arc::clone(paths));
        }
        ctx.delegate = Some(self.scope.clone());
        ctx
    }

    fn tool_progress(&self, call_id: &str) -> crate::mcp::ProgressSink {
        Host::tool_progress(&*self.session, &format!("{}/{call_id}", self.id))
    }

    fn content_store(&self) -> ContentStore {
        Host::content_store(&*self.session)
    }

    fn hooks<'a>(
        &'a self,
        input: crate::hooks::Input,
    ) -> crate::runner::HostFuture<'a, crate::hooks::Verdict> {
        Box::pin(async move { Host::hooks(&*self.session, input).await })
    }
}
