//! Sessions: the conversation, its journal, its turn machine and the clients watching it.
//!
//! A session lives in the daemon, not in a client: a turn keeps running when every client
//! is gone, and parks in a visible "waiting for laptop" state when it needs the model (which
//! only a laptop gateway can reach) or an approval.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use reasonix_forward::proto::{
    ApprovalDecision, Event, EventKind, Notification, ProviderChunk, ProviderRequest, SessionInfo,
    SessionSettings, ToolCall, TurnState, Usage,
};
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::agent::{self, Prefix};
use crate::journal::{Journal, JournalError};
use crate::policy::{Decision, Mode, Policy};
use crate::tools::{ToolContext, ToolRegistry};

/// Default number of model steps per turn before the turn pauses.
pub const DEFAULT_MAX_STEPS: u32 = 50;

/// How many times a provider error marked retryable is re-issued within one step.
const PROVIDER_REISSUES: u32 = 3;

/// A laptop gateway able to run provider streams (implemented by a daemon connection).
pub trait Gateway: Send + Sync {
    /// Start a provider stream; chunks arrive on the receiver. The receiver ends without a
    /// `Done`/`Error` chunk when the gateway's link is gone for good.
    fn start_stream(&self, request: ProviderRequest) -> mpsc::UnboundedReceiver<ProviderChunk>;
    /// Open a tunnelled laptop-side MCP server on this gateway's link.
    fn open_mcp(
        &self,
        server: &str,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<crate::mcp::LineChannels, String>> + Send>,
    >;
    /// Stable id of the connection (to tell drivers apart).
    fn conn_id(&self) -> u64;
    /// Whether the gateway's link currently has a transport (false while the laptop is
    /// unreachable but the link is kept for a resume).
    fn link_state(&self) -> watch::Receiver<bool>;
    /// True when the driving client is headless (asks are answered with a denial).
    fn headless(&self) -> bool;
}

/// Errors of session operations.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The journal failed.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// A turn is already running.
    #[error("a turn is already running in this session; wait for it or cancel it")]
    Busy,
    /// Nothing to continue.
    #[error("no paused turn to continue")]
    NotPaused,
    /// The permission rules are invalid.
    #[error("invalid permission rules: {0}")]
    Policy(String),
    /// Unknown approval id.
    #[error("no pending approval with id {0}")]
    NoSuchApproval(String),
}

struct PendingApproval {
    answer: oneshot::Sender<ApprovalDecision>,
    tool: String,
    args: Value,
}

struct Inner {
    journal: Journal,
    events: Vec<Event>,
    messages: Vec<Value>,
    turn: u64,
    state: TurnState,
    state_detail: Option<String>,
    seen_requests: HashSet<String>,
    approvals: HashMap<String, PendingApproval>,
    cancel: Option<CancellationToken>,
    settings: SessionSettings,
    policy: Policy,
    prev_prefix: Option<(String, String, u64)>,
    created: String,
    title: String,
}

/// Shared, per-daemon things a session needs to run tools.
pub struct Runtime {
    /// Registered tools.
    pub registry: ToolRegistry,
    /// Context handed to tools.
    pub tool_ctx: ToolContext,
    /// The workspace's MCP servers (their tools are in `registry`).
    pub mcp: Arc<crate::mcp::McpManager>,
    /// Per-turn checkpoints (None when the store could not be opened).
    pub checkpoints: Option<Arc<crate::checkpoint::CheckpointStore>>,
}

/// One session.
pub struct Session {
    /// Session id.
    pub id: String,
    inner: Mutex<Inner>,
    live: broadcast::Sender<Notification>,
    driver: watch::Sender<Option<Arc<dyn Gateway>>>,
    prefix: Mutex<Arc<Prefix>>,
    workspace: std::path::PathBuf,
    laptop_tools: Mutex<Option<Arc<ToolRegistry>>>,
    laptop_mcp: tokio::sync::Mutex<Option<Arc<crate::mcp::McpManager>>>,
    runtime: Arc<Runtime>,
    tool_ctx: ToolContext,
    journal_path: std::path::PathBuf,
}

impl Session {
    /// Create a new session or load one from its journal. Loading repairs what a crash left
    /// behind: tool calls that started are reported as interrupted (never run again), calls
    /// that never started are reported as not run, and an open turn is closed as interrupted.
    pub fn open(
        id: &str,
        journal_path: &std::path::Path,
        runtime: Arc<Runtime>,
        workspace: &std::path::Path,
    ) -> Result<(Arc<Session>, Option<String>), SessionError> {
        let (mut journal, mut events) = Journal::open(journal_path)?;
        let prefix = Prefix::build(workspace, runtime.registry.schemas());
        let mut notice = None;
        if events.is_empty() {
            let ev = journal.append(
                0,
                EventKind::SessionStarted {
                    workspace: workspace.display().to_string(),
                    system_hash: prefix.system_hash.clone(),
                    tools_hash: prefix.tools_hash.clone(),
                },
            )?;
            journal.sync()?;
            events.push(ev);
        } else {
            let turn = events.iter().map(|e| e.turn).max().unwrap_or(0);
            let open_turn = turn > 0
                && !events
                    .iter()
                    .rev()
                    .any(|e| e.turn == turn && matches!(e.kind, EventKind::TurnFinished { .. }));
            if open_turn {
                for (call, started) in agent::unfinished_calls(&events) {
                    let output = if started {
                        "interrupted: the host daemon stopped while this tool was running; it was not run again. Check its effects before retrying."
                    } else {
                        "not run: the host daemon stopped before this tool started."
                    };
                    events.push(journal.append(
                        turn,
                        EventKind::ToolFinished {
                            call_id: call.id,
                            name: call.name,
                            is_error: true,
                            output: output.into(),
                        },
                    )?);
                }
                let text = format!(
                    "turn {turn} was interrupted because the host daemon stopped (killed or crashed); send a new message to continue"
                );
                events.push(journal.append(
                    turn,
                    EventKind::TurnFinished {
                        outcome: "interrupted".into(),
                        detail: Some(text.clone()),
                    },
                )?);
                journal.sync()?;
                notice = Some(text);
            }
        }
        let messages = agent::messages_from_events(&events);
        let turn = events.iter().map(|e| e.turn).max().unwrap_or(0);
        let mut seen_requests = HashSet::new();
        let mut title = String::new();
        for e in &events {
            if let EventKind::UserTurn {
                request_id, text, ..
            } = &e.kind
            {
                seen_requests.insert(request_id.clone());
                if title.is_empty() {
                    title = text.lines().next().unwrap_or("").chars().take(80).collect();
                }
            }
        }
        let created = events.first().map(|e| e.ts.clone()).unwrap_or_default();
        let policy = Policy::new(Mode::Ask, &[], &[], &[])
            .map_err(|e| SessionError::Policy(e.to_string()))?;
        let mut tool_ctx = runtime.tool_ctx.clone();
        if let Some(store) = &runtime.checkpoints {
            tool_ctx.mutation_hook = store.hook_for(id);
        }
        let (live, _) = broadcast::channel(4096);
        let (driver, _) = watch::channel(None);
        let session = Arc::new(Session {
            id: id.to_string(),
            inner: Mutex::new(Inner {
                journal,
                events,
                messages,
                turn,
                state: TurnState::Idle,
                state_detail: None,
                seen_requests,
                approvals: HashMap::new(),
                cancel: None,
                settings: SessionSettings::default(),
                policy,
                prev_prefix: None,
                created,
                title,
            }),
            live,
            driver,
            prefix: Mutex::new(Arc::new(prefix)),
            workspace: workspace.to_path_buf(),
            laptop_tools: Mutex::new(None),
            laptop_mcp: tokio::sync::Mutex::new(None),
            runtime,
            tool_ctx,
            journal_path: journal_path.to_path_buf(),
        });
        Ok((session, notice))
    }

    /// The session's stable prefix.
    fn prefix(&self) -> Arc<Prefix> {
        Arc::clone(&self.prefix.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Start the laptop-side MCP servers `names` (tunnelled through whichever client drives
    /// the session) and add their tools. Done once per session; the prefix then includes the
    /// laptop tools from the first model request on.
    pub async fn setup_laptop_mcp(self: &Arc<Self>, names: &[String]) {
        if names.is_empty() {
            return;
        }
        let mut slot = self.laptop_mcp.lock().await;
        if slot.is_some() {
            return;
        }
        let weak = Arc::downgrade(self);
        let manager = crate::mcp::McpManager::laptop(names, |name| {
            let weak = weak.clone();
            let server = name.to_string();
            Arc::new(move || {
                let weak = weak.clone();
                let server = server.clone();
                Box::pin(async move {
                    let session = weak.upgrade().ok_or("the session is gone")?;
                    let mut rx = session.driver.subscribe();
                    let gateway = tokio::time::timeout(std::time::Duration::from_secs(60), async {
                        loop {
                            if let Some(g) = rx.borrow_and_update().clone() {
                                return Some(g);
                            }
                            if rx.changed().await.is_err() {
                                return None;
                            }
                        }
                    })
                    .await
                    .ok()
                    .flatten()
                    .ok_or("no laptop is attached to run this MCP server")?;
                    gateway.open_mcp(&server).await
                })
            })
        });
        manager.start_all().await;
        let mut registry = ToolRegistry::new();
        manager.register_tools(&mut registry);
        let mut tools = self.runtime.registry.schemas();
        tools.extend(registry.schemas());
        tools.sort_by(|a, b| {
            a["function"]["name"]
                .as_str()
                .unwrap_or("")
                .cmp(b["function"]["name"].as_str().unwrap_or(""))
        });
        let prefix = Prefix::build(&self.workspace, tools);
        *self.prefix.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(prefix);
        *self.laptop_tools.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(registry));
        for st in manager.status() {
            self.record(EventKind::Notice {
                text: format!(
                    "laptop MCP server {}: {:?}, {} tool(s)",
                    st.name,
                    st.state,
                    st.tools.len()
                ),
            });
        }
        *slot = Some(Arc::new(manager));
    }

    /// The session's laptop-side MCP servers (empty when the driver configured none). Waits
    /// for a start in progress ([`setup_laptop_mcp`](Self::setup_laptop_mcp)) to finish, so
    /// each is reported ready or failed.
    pub async fn laptop_mcp_status(&self) -> Vec<crate::mcp::McpServerStatus> {
        let manager = self.laptop_mcp.lock().await.clone();
        match manager {
            Some(m) => m.status(),
            None => Vec::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock means a panic while journaling; the data is still consistent
        // enough to keep serving (each append is one write).
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Summary for listings.
    pub fn info(&self) -> SessionInfo {
        let inner = self.lock();
        SessionInfo {
            id: self.id.clone(),
            created: inner.created.clone(),
            turns: inner.turn,
            last_seq: inner.journal.last_seq(),
            title: inner.title.clone(),
            state: inner.state,
        }
    }

    /// Current state.
    pub fn state(&self) -> TurnState {
        self.lock().state
    }

    /// True when a turn is running or parked (so the daemon must not exit idle).
    pub fn busy(&self) -> bool {
        !matches!(self.lock().state, TurnState::Idle)
    }

    /// Events after `since` plus a live subscription, taken atomically so nothing is missed.
    pub fn subscribe(
        &self,
        since: u64,
    ) -> (
        Vec<Event>,
        broadcast::Receiver<Notification>,
        TurnState,
        Option<String>,
    ) {
        let inner = self.lock();
        let start = inner.events.partition_point(|e| e.seq <= since);
        (
            inner.events[start..].to_vec(),
            self.live.subscribe(),
            inner.state,
            inner.state_detail.clone(),
        )
    }

    /// Events after `since` (used when a live subscriber lagged).
    pub fn events_since(&self, since: u64) -> Vec<Event> {
        let inner = self.lock();
        let start = inner.events.partition_point(|e| e.seq <= since);
        inner.events[start..].to_vec()
    }

    /// Highest event seq.
    pub fn last_seq(&self) -> u64 {
        self.lock().journal.last_seq()
    }

    /// Install (or clear) the driving client's gateway and its settings.
    pub fn set_driver(&self, gateway: Option<Arc<dyn Gateway>>, settings: Option<SessionSettings>) {
        if let Some(settings) = settings {
            let mut inner = self.lock();
            let mode = match settings.mode.as_deref() {
                Some("auto") => Mode::Auto,
                Some("yolo") => Mode::Yolo,
                _ => Mode::Ask,
            };
            let rules = |k: &str| -> Vec<String> {
                settings
                    .rules
                    .as_ref()
                    .and_then(|r| r.get(k))
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            match Policy::new(mode, &rules("allow"), &rules("ask"), &rules("deny")) {
                // Path rules match canonical workspace-relative paths.
                Ok(p) => inner.policy = p.with_workspace(&self.tool_ctx.workspace),
                Err(e) => tracing::warn!("bad permission rules from client: {e}"),
            }
            inner.settings = settings;
        }
        self.driver.send_replace(gateway);
    }

    /// The current driver's connection id.
    pub fn driver_id(&self) -> Option<u64> {
        self.driver.borrow().as_ref().map(|g| g.conn_id())
    }

    /// Drop the driver if it is `conn_id` (its link is gone).
    pub fn release_driver(&self, conn_id: u64) {
        self.driver.send_if_modified(|d| {
            if d.as_ref().map(|g| g.conn_id()) == Some(conn_id) {
                *d = None;
                true
            } else {
                false
            }
        });
    }

    fn emit(&self, inner: &mut Inner, kind: EventKind) -> Option<Event> {
        let turn = inner.turn;
        match inner.journal.append(turn, kind) {
            Ok(ev) => {
                inner.events.push(ev.clone());
                let _ = self.live.send(Notification::Event(ev.clone()));
                Some(ev)
            }
            Err(e) => {
                tracing::error!("journal write failed: {e}");
                None
            }
        }
    }

    fn record(&self, kind: EventKind) -> Option<Event> {
        let mut inner = self.lock();
        self.emit(&mut inner, kind)
    }

    fn set_state(&self, state: TurnState, detail: Option<String>) {
        let mut inner = self.lock();
        self.set_state_locked(&mut inner, state, detail);
    }

    fn set_state_locked(&self, inner: &mut Inner, state: TurnState, detail: Option<String>) {
        if inner.state == state && inner.state_detail == detail {
            return;
        }
        inner.state = state;
        inner.state_detail = detail.clone();
        let _ = self.live.send(Notification::State { state, detail });
    }

    /// Submit a user turn. A repeated `request_id` is a no-op answered with `Ok(false)`.
    pub fn submit(self: &Arc<Self>, request_id: &str, text: &str) -> Result<bool, SessionError> {
        let cancel = CancellationToken::new();
        {
            let mut inner = self.lock();
            if inner.seen_requests.contains(request_id) {
                return Ok(false);
            }
            if !matches!(inner.state, TurnState::Idle | TurnState::Paused) {
                return Err(SessionError::Busy);
            }
            inner.seen_requests.insert(request_id.to_string());
            inner.turn += 1;
            if inner.title.is_empty() {
                inner.title = text.lines().next().unwrap_or("").chars().take(80).collect();
            }
            let attachments = agent::resolve_mentions(&self.workspace, text);
            inner.messages.push(agent::user_message(text, &attachments));
            self.emit(
                &mut inner,
                EventKind::UserTurn {
                    request_id: request_id.to_string(),
                    text: text.to_string(),
                    attachments,
                },
            );
            inner.journal.sync()?;
            inner.cancel = Some(cancel.clone());
        }
        self.set_state(TurnState::Running, None);
        let me = Arc::clone(self);
        tokio::spawn(async move { me.run_turn(cancel, true).await });
        Ok(true)
    }

    /// Continue a turn paused at its step limit.
    pub fn continue_turn(self: &Arc<Self>, request_id: &str) -> Result<bool, SessionError> {
        let cancel = CancellationToken::new();
        {
            let mut inner = self.lock();
            if inner.seen_requests.contains(request_id) {
                return Ok(false);
            }
            if inner.state != TurnState::Paused {
                return Err(SessionError::NotPaused);
            }
            inner.seen_requests.insert(request_id.to_string());
            inner.cancel = Some(cancel.clone());
        }
        self.set_state(TurnState::Running, None);
        let me = Arc::clone(self);
        tokio::spawn(async move { me.run_turn(cancel, false).await });
        Ok(true)
    }

    /// Cancel the running turn. Deduplicated by `request_id`.
    pub fn cancel(&self, request_id: &str) -> bool {
        let mut inner = self.lock();
        if !inner.seen_requests.insert(request_id.to_string()) {
            return false;
        }
        if let Some(c) = inner.cancel.take() {
            c.cancel();
        }
        if inner.state == TurnState::Paused {
            inner.state = TurnState::Idle;
            self.emit(
                &mut inner,
                EventKind::TurnFinished {
                    outcome: "cancelled".into(),
                    detail: None,
                },
            );
            let _ = self.live.send(Notification::State {
                state: TurnState::Idle,
                detail: None,
            });
        }
        true
    }

    /// Answer a pending approval. Deduplicated by `request_id`; answering an approval that
    /// was already answered is reported as `Ok(false)`.
    pub fn approve(
        &self,
        request_id: &str,
        approval_id: &str,
        decision: ApprovalDecision,
    ) -> Result<bool, SessionError> {
        let mut inner = self.lock();
        if inner.seen_requests.contains(request_id) {
            return Ok(false);
        }
        let Some(pending) = inner.approvals.remove(approval_id) else {
            let answered = inner.events.iter().any(|e| {
                matches!(&e.kind, EventKind::ApprovalAnswered { approval_id: a, .. } if a == approval_id)
            });
            if answered {
                return Ok(false);
            }
            return Err(SessionError::NoSuchApproval(approval_id.to_string()));
        };
        inner.seen_requests.insert(request_id.to_string());
        if matches!(
            decision,
            ApprovalDecision::AllowSession | ApprovalDecision::AllowAlways
        ) {
            inner.policy.allow_for_session(&pending.tool, &pending.args);
        }
        let rule = match decision {
            ApprovalDecision::AllowAlways => Policy::always_rule(&pending.tool, &pending.args),
            ApprovalDecision::AllowOnce
            | ApprovalDecision::AllowSession
            | ApprovalDecision::Deny => None,
        };
        if decision == ApprovalDecision::AllowAlways && rule.is_none() {
            self.emit(
                &mut inner,
                EventKind::Notice {
                    text: format!(
                        "{} is too dangerous to allow forever; it is allowed for this session only",
                        pending.tool
                    ),
                },
            );
        }
        self.emit(
            &mut inner,
            EventKind::ApprovalAnswered {
                approval_id: approval_id.to_string(),
                decision,
                rule,
            },
        );
        let _ = inner.journal.sync();
        let _ = pending.answer.send(decision);
        Ok(true)
    }

    /// Take the checkpoint of the current turn (before its first mutation).
    async fn checkpoint_turn(&self) {
        let Some(store) = self.runtime.checkpoints.clone() else {
            return;
        };
        let turn = self.lock().turn;
        let id = self.id.clone();
        let taken = tokio::task::spawn_blocking(move || store.begin_turn(&id, turn)).await;
        match taken {
            Ok(Ok(info)) => {
                let mut notes = info.notes.clone();
                notes.extend(
                    info.not_covered
                        .iter()
                        .map(|n| format!("{}: {}", n.path, n.reason)),
                );
                self.record(EventKind::Checkpoint {
                    id: info.id,
                    paths: notes,
                });
            }
            Ok(Err(e)) => {
                self.record(EventKind::Notice {
                    text: format!(
                        "checkpoint failed ({e}); changes made in this turn cannot be rewound"
                    ),
                });
            }
            Err(e) => tracing::error!("checkpoint task failed: {e}"),
        }
    }

    /// Rewind the session to just before turn `to_turn`: files (`code`), the conversation,
    /// or both. Refused while a turn runs. Deduplicated by `request_id`.
    pub async fn rewind(
        &self,
        request_id: &str,
        to_turn: u64,
        scope: reasonix_forward::proto::RewindScope,
        dry_run: bool,
    ) -> Result<(String, Vec<String>), String> {
        use reasonix_forward::proto::RewindScope;
        {
            let mut inner = self.lock();
            if !matches!(inner.state, TurnState::Idle | TurnState::Paused) {
                return Err("a turn is running; cancel it before rewinding".into());
            }
            if to_turn == 0 || to_turn > inner.turn {
                return Err(format!(
                    "no turn {to_turn} in this session (turns 1..={})",
                    inner.turn
                ));
            }
            if !dry_run && !inner.seen_requests.insert(request_id.to_string()) {
                return Ok(("duplicate rewind request ignored".into(), Vec::new()));
            }
        }
        let mut summary = Vec::new();
        let mut paths = Vec::new();
        if matches!(scope, RewindScope::Code | RewindScope::Both) {
            let Some(store) = self.runtime.checkpoints.clone() else {
                return Err("checkpoints are unavailable on this host (see the daemon log)".into());
            };
            let id = self.id.clone();
            let report = tokio::task::spawn_blocking(move || store.rewind(&id, to_turn, dry_run))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            summary.push(report.summary());
            paths = report.paths();
        }
        if matches!(scope, RewindScope::Conversation | RewindScope::Both) {
            if dry_run {
                summary.push(format!(
                    "dry run: the conversation would be cut back to before turn {to_turn}"
                ));
            } else {
                self.rewind_conversation(to_turn)?;
                summary.push(format!(
                    "conversation rewound to before turn {to_turn} (the removed part is archived next to the journal)"
                ));
            }
        }
        let text = summary.join("; ");
        if !dry_run {
            self.record(EventKind::Notice { text: text.clone() });
        }
        Ok((text, paths))
    }

    fn rewind_conversation(&self, to_turn: u64) -> Result<(), String> {
        let mut inner = self.lock();
        let _ = inner.journal.sync();
        crate::checkpoint::truncate_journal(&self.journal_path, to_turn)
            .map_err(|e| e.to_string())?;
        let last_seq = inner.journal.last_seq();
        let (mut journal, events) = Journal::open(&self.journal_path).map_err(|e| e.to_string())?;
        // Keep numbering monotonic so clients never mistake new events for ones they saw.
        journal.continue_after(last_seq);
        inner.messages = agent::messages_from_events(&events);
        inner.turn = events.iter().map(|e| e.turn).max().unwrap_or(0);
        inner.events = events;
        inner.journal = journal;
        inner.state = TurnState::Idle;
        inner.cancel = None;
        Ok(())
    }

    async fn run_turn(self: Arc<Self>, cancel: CancellationToken, fresh_turn: bool) {
        if fresh_turn {
            self.checkpoint_turn().await;
        }
        let max_steps = {
            let inner = self.lock();
            inner.settings.max_steps.unwrap_or(DEFAULT_MAX_STEPS).max(1)
        };
        let mut step = 0u32;
        let outcome = loop {
            if step >= max_steps {
                break ("paused", Some(format!("the turn reached its limit of {max_steps} model steps; continue to let it go on")));
            }
            step += 1;
            let collected = match self.model_step(&cancel).await {
                Ok(c) => c,
                Err(StepEnd::Cancelled) => break ("cancelled", None),
                Err(StepEnd::Failed(msg)) => break ("failed", Some(msg)),
            };
            {
                let mut inner = self.lock();
                self.emit(
                    &mut inner,
                    EventKind::AssistantMessage {
                        content: collected.text.clone(),
                        reasoning: collected.reasoning.clone(),
                        tool_calls: collected.calls.clone(),
                    },
                );
                let msg = agent::assistant_message(
                    &collected.text,
                    collected.reasoning.as_deref(),
                    &collected.calls,
                );
                inner.messages.push(msg);
                if let Some(usage) = collected.usage {
                    let note = agent::cache_note(
                        inner
                            .prev_prefix
                            .as_ref()
                            .map(|(s, t, h)| (s.as_str(), t.as_str(), *h)),
                        &self.prefix().system_hash,
                        &self.prefix().tools_hash,
                        usage.cache_hit_tokens,
                    );
                    inner.prev_prefix = Some((
                        self.prefix().system_hash.clone(),
                        self.prefix().tools_hash.clone(),
                        usage.cache_hit_tokens,
                    ));
                    self.emit(
                        &mut inner,
                        EventKind::Usage {
                            usage,
                            model: collected.model.clone(),
                            system_hash: self.prefix().system_hash.clone(),
                            tools_hash: self.prefix().tools_hash.clone(),
                            cache_note: note,
                        },
                    );
                }
            }
            if collected.calls.is_empty() {
                break ("completed", None);
            }
            for call in &collected.calls {
                if cancel.is_cancelled() {
                    self.finish_tool(call, true, "cancelled by the user before it ran".into());
                    continue;
                }
                self.run_tool(call, &cancel).await;
            }
            if cancel.is_cancelled() {
                break ("cancelled", None);
            }
        };
        let (outcome, detail) = outcome;
        let new_state = if outcome == "paused" {
            TurnState::Paused
        } else {
            TurnState::Idle
        };
        {
            let mut inner = self.lock();
            self.emit(
                &mut inner,
                EventKind::TurnFinished {
                    outcome: outcome.to_string(),
                    detail,
                },
            );
            let _ = inner.journal.sync();
            if new_state == TurnState::Idle {
                inner.cancel = None;
            }
            // Under the same lock as the TurnFinished event: a client that submits the next
            // turn as soon as it sees this one finish must find the session idle, not busy.
            self.set_state_locked(&mut inner, new_state, None);
        }
    }

    /// Wait for a driving gateway, showing "waiting for laptop" meanwhile.
    async fn wait_gateway(&self, cancel: &CancellationToken) -> Option<Arc<dyn Gateway>> {
        let mut rx = self.driver.subscribe();
        loop {
            if let Some(g) = rx.borrow_and_update().clone() {
                return Some(g);
            }
            self.set_state(
                TurnState::WaitingForLaptop,
                Some("waiting for laptop: the model is reached through a client's gateway".into()),
            );
            tokio::select! {
                _ = cancel.cancelled() => return None,
                r = rx.changed() => if r.is_err() { return None; },
            }
        }
    }

    /// While a model reply is awaited: `running` when the driving client's link is up,
    /// "waiting for laptop" while it is down (the laptop keeps reading the stream and the
    /// link replays it on resume, so the turn is not lost, but nothing moves until then).
    fn show_model_link(&self, up: bool) {
        if up {
            self.set_state(TurnState::Running, None);
        } else {
            self.set_state(
                TurnState::WaitingForLaptop,
                Some("waiting for laptop: the link to the driving client is down; the model reply continues when it reconnects".into()),
            );
        }
    }

    async fn model_step(&self, cancel: &CancellationToken) -> Result<Collected, StepEnd> {
        let (stream_base, request) = {
            let inner = self.lock();
            let mut messages = Vec::with_capacity(inner.messages.len() + 1);
            messages.push(json!({"role": "system", "content": self.prefix().system}));
            messages.extend(inner.messages.iter().cloned());
            (
                format!("{}-{}-{}", self.id, inner.turn, inner.messages.len()),
                ProviderRequest {
                    stream_id: String::new(),
                    model: inner.settings.model.clone(),
                    messages,
                    tools: self.prefix().tools.clone(),
                    temperature: None,
                },
            )
        };
        let mut attempt = 0u32;
        let mut provider_errors = 0u32;
        loop {
            attempt += 1;
            let Some(gateway) = self.wait_gateway(cancel).await else {
                return Err(StepEnd::Cancelled);
            };
            let mut link_up = gateway.link_state();
            let mut link_watch = true;
            self.show_model_link(*link_up.borrow_and_update());
            let mut req = request.clone();
            req.stream_id = format!("{stream_base}-{attempt}");
            let mut rx = gateway.start_stream(req);
            let mut c = Collected::default();
            let end = loop {
                let chunk = tokio::select! {
                    _ = cancel.cancelled() => return Err(StepEnd::Cancelled),
                    changed = link_up.changed(), if link_watch => {
                        match changed {
                            Ok(()) => self.show_model_link(*link_up.borrow_and_update()),
                            Err(_) => link_watch = false,
                        }
                        continue;
                    }
                    chunk = rx.recv() => chunk,
                };
                match chunk {
                    None => break Err(None),
                    Some(ProviderChunk::Text { text }) => {
                        c.text.push_str(&text);
                        self.record(EventKind::TextDelta { text });
                    }
                    Some(ProviderChunk::Reasoning { text }) => {
                        c.reasoning.get_or_insert_with(String::new).push_str(&text);
                        self.record(EventKind::ReasoningDelta { text });
                    }
                    Some(ProviderChunk::ToolCall(call)) => c.calls.push(call),
                    Some(ProviderChunk::Usage(u)) => c.usage = Some(u),
                    Some(ProviderChunk::Done { model, .. }) => {
                        c.model = model;
                        break Ok(());
                    }
                    Some(ProviderChunk::Error { message, retryable }) => {
                        break Err(Some((message, retryable)))
                    }
                }
            };
            match end {
                Ok(()) => return Ok(c),
                // The gateway's link is gone for good: nothing of this stream was acted
                // on (tool calls only count once the stream completed), so ask again.
                Err(None) => {
                    self.record(EventKind::Notice {
                        text: "the laptop disconnected during a model reply; the request will be re-issued when a client attaches".into(),
                    });
                    self.release_driver(gateway.conn_id());
                }
                Err(Some((message, true))) if provider_errors < PROVIDER_REISSUES => {
                    provider_errors += 1;
                    self.record(EventKind::Notice {
                        text: format!("model stream failed ({message}); asking again ({provider_errors}/{PROVIDER_REISSUES})"),
                    });
                }
                Err(Some((message, _))) => return Err(StepEnd::Failed(message)),
            }
        }
    }

    fn finish_tool(&self, call: &ToolCall, is_error: bool, output: String) {
        let mut inner = self.lock();
        self.emit(
            &mut inner,
            EventKind::ToolFinished {
                call_id: call.id.clone(),
                name: call.name.clone(),
                is_error,
                output: output.clone(),
            },
        );
        inner.messages.push(agent::tool_message(&call.id, &output));
    }

    async fn run_tool(&self, call: &ToolCall, cancel: &CancellationToken) {
        let laptop = self
            .laptop_tools
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let tool = self
            .runtime
            .registry
            .get(&call.name)
            .or_else(|| laptop.and_then(|r| r.get(&call.name)));
        let Some(tool) = tool else {
            self.finish_tool(
                call,
                true,
                format!(
                    "unknown tool {:?}; the available tools are listed in your tool definitions",
                    call.name
                ),
            );
            return;
        };
        let args: Value = match serde_json::from_str(if call.arguments.trim().is_empty() {
            "{}"
        } else {
            &call.arguments
        }) {
            Ok(v) => v,
            Err(e) => {
                self.finish_tool(
                    call,
                    true,
                    format!("the arguments are not valid JSON ({e}); send a JSON object matching the tool's schema"),
                );
                return;
            }
        };
        let decision = self
            .lock()
            .policy
            .decide(&call.name, &args, tool.read_only());
        match decision {
            Decision::Allow => {}
            Decision::Deny { reason } => {
                self.finish_tool(
                    call,
                    true,
                    format!("denied by the permission policy: {reason}"),
                );
                return;
            }
            Decision::Ask { reason } => {
                match self.ask_approval(call, &args, reason, cancel).await {
                    Some(ApprovalDecision::AllowOnce)
                    | Some(ApprovalDecision::AllowSession)
                    | Some(ApprovalDecision::AllowAlways) => {}
                    Some(ApprovalDecision::Deny) => {
                        self.finish_tool(call, true, "the user denied this tool call; do not retry it unchanged — ask the user or take another approach".into());
                        return;
                    }
                    None => {
                        self.finish_tool(call, true, "cancelled before approval".into());
                        return;
                    }
                }
            }
        }
        {
            let mut inner = self.lock();
            self.emit(
                &mut inner,
                EventKind::ToolStarted {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                },
            );
            // Durable before the tool runs: after a crash we know it may have run, and never
            // run it again.
            let _ = inner.journal.sync();
        }
        let live = self.live.clone();
        let call_id = call.id.clone();
        let sink: crate::mcp::ProgressSink = Arc::new(move |p: crate::mcp::McpProgress| {
            let _ = live.send(Notification::ToolProgress {
                call_id: call_id.clone(),
                message: p.render(),
            });
        });
        let out = tokio::select! {
            out = crate::mcp::with_progress(sink, tool.run(args, &self.tool_ctx)) => out,
            _ = cancel.cancelled() => {
                self.finish_tool(call, true, "cancelled by the user while running".into());
                return;
            }
        };
        self.finish_tool(call, out.is_error, out.text);
    }

    async fn ask_approval(
        &self,
        call: &ToolCall,
        args: &Value,
        reason: String,
        cancel: &CancellationToken,
    ) -> Option<ApprovalDecision> {
        let headless = self
            .driver
            .borrow()
            .as_ref()
            .map(|g| g.headless())
            .unwrap_or(false)
            || self.lock().settings.headless;
        if headless {
            self.record(EventKind::Notice {
                text: format!("{} needs approval ({reason}); headless run denies it (use --auto or --yolo to allow)", call.name),
            });
            return Some(ApprovalDecision::Deny);
        }
        let approval_id = format!("ap-{}", call.id);
        let (tx, rx) = oneshot::channel();
        {
            let mut inner = self.lock();
            let Some(_requested) = self.emit(
                &mut inner,
                EventKind::ApprovalRequested {
                    approval_id: approval_id.clone(),
                    tool: call.name.clone(),
                    arguments: call.arguments.clone(),
                    reason,
                    preview: None,
                },
            ) else {
                return Some(ApprovalDecision::Deny);
            };
            let _ = inner.journal.sync();
            inner.approvals.insert(
                approval_id.clone(),
                PendingApproval {
                    answer: tx,
                    tool: call.name.clone(),
                    args: args.clone(),
                },
            );
        }
        self.set_state(
            TurnState::WaitingForApproval,
            Some(format!("waiting for approval of {}", call.name)),
        );
        let answer = tokio::select! {
            a = rx => a.ok(),
            _ = cancel.cancelled() => None,
        };
        self.lock().approvals.remove(&approval_id);
        self.set_state(TurnState::Running, None);
        answer
    }
}

#[derive(Default)]
struct Collected {
    text: String,
    reasoning: Option<String>,
    calls: Vec<ToolCall>,
    usage: Option<Usage>,
    model: String,
}

enum StepEnd {
    Cancelled,
    Failed(String),
}
