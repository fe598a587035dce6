//! Sessions: the journal, the clients watching it, request dedup, the policy and approvals,
//! the turn's state, and the link to the driving client. The conversation itself is driven by
//! a runner ([`crate::runner`]) that the session hosts; the main conversation is the one the
//! journal rebuilds.
//!
//! A session lives in the daemon, not in a client: a turn keeps running when every client
//! is gone, and parks in a visible "waiting for laptop" state when it needs the model (which
//! only a laptop gateway can reach) or an approval.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use reasonix_forward::proto::{
    ApprovalDecision, ContextSettings, ErrorCode, Event, EventKind, Notification, ProviderRequest,
    RpcError, SessionInfo, SessionSettings, ToolCall, TurnOutcome, TurnState,
};
use reasonix_forward::sync::LockExt;
use serde_json::{json, Value};
use tokio::sync::{broadcast, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::agent::{self, Prefix};
use crate::content::ContentStore;
use crate::journal::{Barrier, Journal, JournalError, JournalWriter};
use crate::policy::{Decision, Mode, Policy};
use crate::runner::Conversation;
use crate::tools::{JobTable, ToolContext, ToolRegistry};

mod approval;
mod context;
mod elicit;
mod goal;
mod history;
mod hooks;
mod host;
mod keeper;
mod lifecycle;
mod mcp_signin;
mod plan;
mod planner;
mod provider;
mod rewind;
mod skills;
mod steer;
mod subagent_run;
mod web;

pub use hooks::HOOK_PREFIX;
pub use provider::{ProviderStream, PROVIDER_CHUNK_BUFFER};
pub use rewind::RewindError;

/// Default number of model steps per turn before the turn pauses.
pub const DEFAULT_MAX_STEPS: u32 = 50;

/// The link to the session's driving client, as the turn runner uses it: provider streams
/// through the laptop's gateway, laptop MCP servers, link state, headless flag
/// (implemented by a daemon connection, `daemon::conn::ConnLink`; faked in
/// `tests/turn_support`).
pub trait DriverLink: Send + Sync {
    /// Start a provider stream; chunks arrive on the returned stream (bounded). It ends
    /// without a `Done`/`Error` chunk when the gateway's link is gone for good; dropping it
    /// early asks the laptop to stop the provider request.
    fn start_stream(&self, request: ProviderRequest) -> ProviderStream;
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
    /// Hand the laptop the messages the next provider request will start with, so that
    /// request can go by prefix (gateways without a link ignore it).
    fn provide_base(&self, _messages: Vec<serde_json::Value>) {}
    /// Fetch a web page with the laptop's network (`web_fetch`); `Err` is the text the
    /// model sees.
    fn web_fetch(
        &self,
        _request: reasonix_forward::proto::WebFetchRequest,
    ) -> crate::tools::web_fetch::FetchFuture {
        Box::pin(async { Err("this client does not fetch web pages".to_string()) })
    }
}

/// Errors of session operations.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The journal failed (the text names the file, the cause and the fix).
    #[error("{0}. To fix it: {advice}", advice = .0.advice())]
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
    /// Unknown approval (or elicitation) id.
    #[error("no pending approval or elicitation with id {0}")]
    NoSuchApproval(String),
    /// A plan answer with no plan waiting (or for another plan than the one waiting).
    #[error(
        "no plan is waiting for an answer (it was answered already, or replaced by a newer one)"
    )]
    NoPlan,
    /// A goal request that does not fit the goal's state (the text says what to do).
    #[error("{0}")]
    Goal(String),
    /// A steer arrived while no turn runs.
    #[error("no turn is running to steer; send the text as a new message")]
    NotRunning,
    /// A steer without text.
    #[error("the steer message is empty")]
    EmptySteer,
    /// A `!` command the permission policy denies for bash.
    #[error("denied by the permission policy: {0}")]
    ShellDenied(String),
    /// A `!` command that could not be run.
    #[error("{0}")]
    Shell(String),
}

impl SessionError {
    /// The wire code a client acts on (a full disk is `journal`, not `busy`).
    pub fn code(&self) -> ErrorCode {
        match self {
            SessionError::Journal(_) => ErrorCode::Journal,
            SessionError::Busy => ErrorCode::Busy,
            SessionError::NotPaused => ErrorCode::NotPaused,
            SessionError::Policy(_) => ErrorCode::BadConfig,
            SessionError::NoSuchApproval(_) | SessionError::NoPlan => ErrorCode::NotFound,
            SessionError::NotRunning => ErrorCode::NotRunning,
            SessionError::ShellDenied(_) => ErrorCode::Denied,
            SessionError::EmptySteer | SessionError::Shell(_) | SessionError::Goal(_) => {
                ErrorCode::Invalid
            }
        }
    }
}

impl From<SessionError> for RpcError {
    fn from(e: SessionError) -> RpcError {
        RpcError::new(e.code(), e.to_string())
    }
}

struct Inner {
    /// Numbers events and hands their lines to the session's writer thread.
    journal: JournalWriter,
    events: Vec<Event>,
    turn: u64,
    state: TurnState,
    state_detail: Option<String>,
    seen_requests: HashSet<String>,
    approvals: HashMap<String, approval::PendingApproval>,
    /// MCP elicitations waiting for the user, by id.
    elicitations: HashMap<String, oneshot::Sender<crate::mcp::ElicitAnswer>>,
    cancel: Option<CancellationToken>,
    settings: SessionSettings,
    policy: Policy,
    /// The policy `policy` and `tool_ctx` were built from (reported to clients).
    enforced: reasonix_forward::policy::SessionPolicy,
    created: String,
    title: String,
    /// Steers and `!` outputs not yet given to the model.
    pending: steer::Pending,
    /// Plan mode as the journal says (kept current by [`Session::emit`]).
    plan: crate::plan::PlanState,
    /// The goal as the journal says (kept current by [`Session::emit`]).
    goal: crate::goal::GoalState,
    /// The routing of the submitted turn and its text, until the turn takes it (#38 §2).
    route: Option<(crate::plan::route::Decision, String)>,
    /// The skill the current turn runs (`/<name>`), until the next user turn.
    skill: Option<crate::skills::SkillTurn>,
    /// The tool call a `RunSubagent` turn runs instead of a model step, until the turn
    /// takes it ([`subagent_run`]).
    direct: Option<reasonix_forward::proto::ToolCall>,
}

/// Shared, per-daemon things a session needs to run tools.
pub struct Runtime {
    /// The built-in tools (each session adds its MCP tools to a copy).
    pub registry: ToolRegistry,
    /// Context handed to tools.
    pub tool_ctx: ToolContext,
    /// The workspace's MCP servers, re-read at every session open.
    pub mcp: crate::mcp::WorkspaceMcp,
    /// Per-turn checkpoints (None when the store could not be opened).
    pub checkpoints: Option<Arc<crate::checkpoint::CheckpointStore>>,
}

/// One session.
pub struct Session {
    /// Session id.
    pub id: String,
    inner: Mutex<Inner>,
    live: broadcast::Sender<Notification>,
    driver: watch::Sender<Option<Arc<dyn DriverLink>>>,
    /// The laptops' goal keepers (normally one), latest first: standby gateways used only
    /// while no driver with a live link is attached ([`keeper`]).
    standby: watch::Sender<Vec<Arc<dyn DriverLink>>>,
    /// The main conversation (the one the journal rebuilds), driven by the session's
    /// runner ([`Session::runner`]). Lock order: this lock before `inner`, never after.
    main: Mutex<Conversation>,
    /// The planner's conversation (#38 §2), made at its first turn ([`planner`]).
    planner: Mutex<Option<Arc<planner::Planner>>>,
    workspace: std::path::PathBuf,
    laptop_tools: Mutex<Option<Arc<ToolRegistry>>>,
    /// Tools of workspace MCP servers that joined after the session opened (a server signed
    /// in by `/mcp login` and reconnected: [`mcp_signin`]).
    late_tools: Mutex<Option<Arc<ToolRegistry>>>,
    laptop_mcp: tokio::sync::Mutex<Option<Arc<crate::mcp::McpManager>>>,
    /// Built-ins plus the workspace MCP tools as they were when the session was opened in
    /// this daemon: fixed for the session's life, since the tool list is part of its prefix.
    tools: Arc<ToolRegistry>,
    /// The workspace MCP servers of that snapshot (for `/mcp`).
    workspace_mcp: Arc<crate::mcp::McpManager>,
    /// Per server, the tool-list changes the user was already told about.
    mcp_changes_told: Mutex<HashMap<String, u64>>,
    runtime: Arc<Runtime>,
    /// Rebuilt from the driver's policy at every open and takeover.
    tool_ctx: Mutex<ToolContext>,
    journal_path: std::path::PathBuf,
    /// Where outputs too big for an event go (next to the journal).
    content: ContentStore,
    /// The hooks the driver brought and what they did (#34).
    hooks: Arc<crate::hooks::SessionHooks>,
}

impl Session {
    /// The workspace's content store (outputs and events too big for the wire go there).
    pub(crate) fn content_store(&self) -> ContentStore {
        self.content.clone()
    }

    /// Create a new session or load one from its journal. Loading repairs what a crash left
    /// behind: tool calls that started are reported as interrupted (never run again), calls
    /// that never started are reported as not run, and an open turn is closed as interrupted.
    pub fn open(
        id: &str,
        journal_path: &std::path::Path,
        runtime: Arc<Runtime>,
        workspace: &std::path::Path,
        workspace_mcp: Arc<crate::mcp::McpManager>,
    ) -> Result<(Arc<Session>, Option<String>), SessionError> {
        let (mut journal, mut events) = Journal::open(journal_path)?;
        let mut tools = runtime.registry.clone();
        workspace_mcp.register_tools(&mut tools);
        let tools = Arc::new(tools);
        let mut prefix = Prefix::build(workspace, tools.schemas());
        crate::memory::pin(&mut prefix, runtime.tool_ctx.memory.as_deref());
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
                // Children that were running end first, as their own events (#33 §1).
                for kind in crate::delegate::close_interrupted_children(
                    &events,
                    turn,
                    lifecycle::interrupted_output,
                ) {
                    events.push(journal.append(turn, kind)?);
                }
                // The planner's calls first (its conversation is journaled apart, #38 §2).
                for (call, started) in agent::unfinished_calls(&planner::planner_events(&events)) {
                    events.push(journal.append(
                        turn,
                        EventKind::Planner {
                            event: Box::new(EventKind::ToolFinished {
                                call_id: call.id,
                                name: call.name,
                                is_error: true,
                                output: lifecycle::interrupted_output(started).into(),
                                output_ref: None,
                                denied: None,
                                context_bytes: None,
                            }),
                        },
                    )?);
                }
                for (call, started) in agent::unfinished_calls(&events) {
                    let output = lifecycle::interrupted_output(started);
                    events.push(journal.append(
                        turn,
                        EventKind::ToolFinished {
                            call_id: call.id,
                            name: call.name,
                            is_error: true,
                            output: output.into(),
                            output_ref: None,
                            denied: None,
                            context_bytes: None,
                        },
                    )?);
                }
                let text = format!(
                    "turn {turn} was interrupted because the host daemon stopped (killed or crashed); send a new message to continue"
                );
                events.push(journal.append(
                    turn,
                    EventKind::TurnFinished {
                        outcome: TurnOutcome::Interrupted,
                        detail: Some(text.clone()),
                    },
                )?);
                journal.sync()?;
                notice = Some(text);
            }
        }
        let main = Conversation::new(
            id,
            prefix,
            agent::messages_from_events(&events),
            journal_path.parent().unwrap_or(std::path::Path::new(".")),
        );
        let pending = steer::Pending::from_events(&events);
        let plan_state = crate::plan::PlanState::from_events(&events);
        let goal_state = crate::goal::GoalState::from_events(&events);
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
                    title = crate::journal::title_of(text);
                }
            }
        }
        let created = events.first().map(|e| e.ts.clone()).unwrap_or_default();
        let last_seq = journal.last_seq();
        let journal = JournalWriter::start(journal_path, last_seq, Box::new(journal))?;
        let policy = Policy::new(Mode::Ask, &[], &[], &[])
            .map_err(|e| SessionError::Policy(e.to_string()))?;
        let mut tool_ctx = runtime.tool_ctx.clone();
        // Background jobs and the plan belong to this session: another session in the same
        // daemon can neither see nor kill them.
        tool_ctx.jobs = Arc::new(JobTable::new());
        tool_ctx.todos = Arc::new(Mutex::new(Vec::new()));
        if let Some(store) = &runtime.checkpoints {
            tool_ctx.mutation_hook = store.hook_for(id);
        }
        let (live, _) = broadcast::channel(4096);
        let (driver, _) = watch::channel(None);
        let (standby, _) = watch::channel(Vec::new());
        let session = Arc::new(Session {
            id: id.to_string(),
            inner: Mutex::new(Inner {
                journal,
                events,
                turn,
                state: TurnState::Idle,
                state_detail: None,
                seen_requests,
                approvals: HashMap::new(),
                elicitations: HashMap::new(),
                cancel: None,
                settings: SessionSettings::default(),
                policy,
                enforced: reasonix_forward::policy::SessionPolicy::default(),
                created,
                title,
                pending,
                plan: plan_state,
                goal: goal_state,
                route: None,
                skill: None,
                direct: None,
            }),
            live,
            driver,
            standby,
            main: Mutex::new(main),
            planner: Mutex::new(None),
            workspace: workspace.to_path_buf(),
            laptop_tools: Mutex::new(None),
            late_tools: Mutex::new(None),
            laptop_mcp: tokio::sync::Mutex::new(None),
            tools,
            workspace_mcp,
            mcp_changes_told: Mutex::new(HashMap::new()),
            runtime,
            tool_ctx: Mutex::new(tool_ctx),
            journal_path: journal_path.to_path_buf(),
            content: ContentStore::for_sessions(
                journal_path.parent().unwrap_or(std::path::Path::new(".")),
            ),
            hooks: Arc::new(crate::hooks::SessionHooks::new(workspace)),
        });
        {
            let mut ctx = session.tool_ctx.lock_or_recover();
            ctx.history = Arc::new(history::SessionHistory::of(&session));
            ctx.notices = Arc::new(SessionNotices(Arc::downgrade(&session)));
            ctx.web = Arc::new(web::SessionWeb(session.driver.subscribe()));
            ctx.plan = Arc::new(plan::SessionPlan(Arc::downgrade(&session)));
            ctx.goal = Arc::new(goal::SessionGoal(Arc::downgrade(&session)));
            ctx.elicit = Arc::new(elicit::SessionElicitor(Arc::downgrade(&session)));
            ctx.delegate = Some(crate::delegate::Scope::root(Arc::downgrade(&session)));
        }
        session.goal_after_open();
        Ok((session, notice))
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
        let mut tools = self.tools.schemas();
        tools.extend(registry.schemas());
        reasonix_forward::sort::sort_by(&mut tools, |a, b| {
            a["function"]["name"]
                .as_str()
                .unwrap_or("")
                .cmp(b["function"]["name"].as_str().unwrap_or(""))
        });
        let mut prefix = Prefix::build(&self.workspace, tools);
        crate::memory::pin(&mut prefix, self.tool_ctx().memory.as_deref());
        self.main.lock_or_recover().prefix = Arc::new(prefix);
        *self.laptop_tools.lock_or_recover() = Some(Arc::new(registry));
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

    /// The workspace MCP servers this session was opened with (its tools are in its
    /// prefix), started where needed.
    pub async fn workspace_mcp_status(&self) -> Vec<crate::mcp::McpServerStatus> {
        self.workspace_mcp.start_pending().await;
        self.workspace_mcp.status()
    }

    /// The session's MCP servers: the workspace's, then the laptop's (when configured).
    pub async fn mcp_managers(&self) -> Vec<Arc<crate::mcp::McpManager>> {
        let mut out = vec![Arc::clone(&self.workspace_mcp)];
        if let Some(l) = self.laptop_mcp.lock().await.clone() {
            out.push(l);
        }
        out
    }

    /// Tells the user, once per announcement, that a workspace MCP server changed its tool
    /// list (`notifications/tools/list_changed`). The session's tool list is part of its
    /// cached prefix and does not change; the new tools join at the next session.
    pub(crate) fn notice_mcp_tool_changes(&self) {
        let changes = self.workspace_mcp.tool_list_changes();
        let mut fresh = Vec::new();
        {
            let mut told = self.mcp_changes_told.lock_or_recover();
            for (server, n) in changes {
                let seen = told.entry(server.clone()).or_insert(0);
                if n > *seen {
                    *seen = n;
                    fresh.push(server);
                }
            }
        }
        for server in fresh {
            self.record(EventKind::Notice {
                text: format!(
                    "MCP server `{server}` changed its tool list; this session keeps the tools it started with (its prompt prefix stays cached), the new list applies to the next session"
                ),
            });
        }
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
        self.inner.lock_or_recover()
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
            last_activity: inner
                .events
                .last()
                .map(|e| e.ts.clone())
                .unwrap_or_default(),
            // The daemon knows the links; it fills these in.
            driver_attached: false,
            clients: 0,
            goal: inner.goal.summary(),
            keeper_attached: false,
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

    /// True while one of this session's background jobs still runs.
    pub fn jobs_running(&self) -> bool {
        let jobs = self.tool_ctx().jobs;
        jobs.ids()
            .iter()
            .filter_map(|id| jobs.get(id))
            .any(|j| !j.status().is_finished())
    }

    /// Write and fsync everything journaled so far (daemon shutdown).
    pub async fn flush_journal(&self) -> Result<(), JournalError> {
        let barrier = self.lock().journal.barrier();
        barrier.wait().await
    }

    /// The text the user sees when the journal refused a write at a durability point:
    /// what did not happen, the journal path and cause, and what to do.
    fn journal_failure(&self, what: &str, e: &JournalError) -> String {
        format!(
            "{what}: the session journal could not be saved ({e}). To fix it: {}. Then send a new message; the session continues, and this turn's events are written as soon as the journal is writable again.",
            e.advice()
        )
    }

    /// Install (or clear) the driving client's gateway. With `settings`, the driver's
    /// settings and what they enforce ([`crate::project::enforce`]) replace the previous
    /// driver's as a whole: headless flag, model, mode, rules, sandbox and tool limits.
    pub fn set_driver(
        &self,
        gateway: Option<Arc<dyn DriverLink>>,
        settings: Option<(SessionSettings, crate::project::Enforced)>,
    ) {
        if let Some((settings, enforced)) = settings {
            let mut ctx = enforced.tool_ctx;
            {
                let mut slot = self.tool_ctx.lock_or_recover();
                // The checkpoint hook, background jobs and plan are the session's own; keep
                // them.
                ctx.mutation_hook = Arc::clone(&slot.mutation_hook);
                ctx.jobs = Arc::clone(&slot.jobs);
                ctx.todos = Arc::clone(&slot.todos);
                ctx.history = Arc::clone(&slot.history);
                ctx.notices = Arc::clone(&slot.notices);
                ctx.web = Arc::clone(&slot.web);
                ctx.plan = Arc::clone(&slot.plan);
                ctx.goal = Arc::clone(&slot.goal);
                ctx.elicit = Arc::clone(&slot.elicit);
                ctx.delegate = slot.delegate.clone();
                // This driver's global facts and write permission over the workspace's store.
                ctx.memory = ctx
                    .memory
                    .as_ref()
                    .map(|m| Arc::new(m.for_driver(&self.id, &settings.memory)));
                *slot = ctx;
            }
            self.memory_attached();
            let mut inner = self.lock();
            inner.policy = enforced.rules;
            inner.enforced = enforced.policy;
            inner.settings = settings;
        }
        if let Some(g) = &gateway {
            // A long conversation is not handed ahead of any request (`PROVIDED_BASE_MAX`):
            // measured before it is copied.
            let messages = {
                let conv = self.main.lock_or_recover();
                let size = crate::compaction::estimate::request_bytes(
                    &conv.prefix.system,
                    &[],
                    &conv.messages,
                );
                (size <= reasonix_forward::prefix::PROVIDED_BASE_MAX)
                    .then(|| conv.request_messages())
            };
            if let Some(messages) = messages {
                g.provide_base(messages);
            }
        }
        self.driver.send_replace(gateway);
    }

    /// The policy the session enforces now.
    pub fn enforced_policy(&self) -> reasonix_forward::policy::SessionPolicy {
        self.lock().enforced.clone()
    }

    /// State of the sandbox the session's bash runs in (`bwrap`, `off`, `unavailable (why)`).
    pub fn sandbox_status(&self) -> String {
        self.tool_ctx().sandbox.status()
    }

    /// The tool context of the current policy.
    fn tool_ctx(&self) -> ToolContext {
        self.tool_ctx.lock_or_recover().clone()
    }

    /// The directory of the session's journal (children archive next to it).
    pub(crate) fn sessions_dir(&self) -> std::path::PathBuf {
        self.journal_path
            .parent()
            .unwrap_or(std::path::Path::new("."))
            .to_path_buf()
    }

    /// The workspace the session works in.
    pub(crate) fn workspace_dir(&self) -> &std::path::Path {
        &self.workspace
    }

    /// The driver's subagent limits.
    pub(crate) fn delegation(&self) -> reasonix_forward::proto::DelegationSettings {
        self.lock().settings.delegation
    }

    /// Names of every tool the session has (built-ins, workspace and laptop MCP), sorted.
    pub(crate) fn tool_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tools.names().iter().map(|s| s.to_string()).collect();
        if let Some(laptop) = self.laptop_tools.lock_or_recover().clone() {
            names.extend(laptop.names().iter().map(|s| s.to_string()));
        }
        if let Some(late) = self.late_tools.lock_or_recover().clone() {
            names.extend(late.names().iter().map(|s| s.to_string()));
        }
        reasonix_forward::sort::sort(&mut names);
        names.dedup();
        names
    }

    /// The current driver's connection id.
    pub fn driver_id(&self) -> Option<u64> {
        self.driver.borrow().as_ref().map(|g| g.conn_id())
    }

    /// Drop the driver (or a goal keeper) if it is `conn_id` (its link is gone).
    pub fn release_driver(&self, conn_id: u64) {
        self.driver.send_if_modified(|d| {
            if d.as_ref().map(|g| g.conn_id()) == Some(conn_id) {
                *d = None;
                true
            } else {
                false
            }
        });
        self.release_standby(conn_id);
    }

    /// Number, keep and broadcast an event and queue it for the journal writer. No I/O
    /// happens here; durability is asked for with [`JournalWriter::barrier`] where needed.
    fn emit(&self, inner: &mut Inner, kind: EventKind) -> Event {
        let turn = inner.turn;
        inner.plan.observe(&kind);
        inner.goal.observe(&kind, crate::clock::now_ms());
        let ev = inner.journal.append(turn, kind);
        inner.events.push(ev.clone());
        let _ = self.live.send(Notification::Event(ev.clone()));
        ev
    }

    fn record(&self, kind: EventKind) -> Event {
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
        self.submit_with(request_id, text, Vec::new(), Vec::new())
    }

    /// [`Session::submit`] with more attachments after the `@path` files (the terminal
    /// screens of `@term:N`, which the daemon owns, and `@server:uri` MCP resources) and
    /// notices journaled right after the user turn (mentions that could not be attached).
    pub fn submit_with(
        self: &Arc<Self>,
        request_id: &str,
        text: &str,
        extra: Vec<reasonix_forward::proto::Attachment>,
        notices: Vec<String>,
    ) -> Result<bool, SessionError> {
        self.submit_inner(request_id, text, extra, notices, Vec::new(), None, None)
    }

    /// [`Session::submit_with`] for a skill's turn: `skill` narrows what the turn may do
    /// (tools, read-only, model) until the next user turn.
    pub fn submit_skill(
        self: &Arc<Self>,
        request_id: &str,
        text: &str,
        extra: Vec<reasonix_forward::proto::Attachment>,
        notices: Vec<String>,
        skill: crate::skills::SkillTurn,
    ) -> Result<bool, SessionError> {
        self.submit_inner(
            request_id,
            text,
            extra,
            notices,
            Vec::new(),
            Some(skill),
            None,
        )
    }

    /// [`Session::submit_with`], journaling `plan` events first, in the new turn (so a rewind
    /// to before this turn takes them back too).
    #[allow(clippy::too_many_arguments)] // the parts of one user turn; skill and direct are its kind
    fn submit_inner(
        self: &Arc<Self>,
        request_id: &str,
        text: &str,
        extra: Vec<reasonix_forward::proto::Attachment>,
        notices: Vec<String>,
        plan: Vec<reasonix_forward::proto::PlanEvent>,
        skill: Option<crate::skills::SkillTurn>,
        direct: Option<reasonix_forward::proto::ToolCall>,
    ) -> Result<bool, SessionError> {
        let cancel = CancellationToken::new();
        let admitted;
        // Reading the mentioned files is file I/O: done before taking the session lock.
        let mut attachments = agent::resolve_mentions(&self.workspace, text);
        attachments.extend(extra);
        // Recall rides the user's message, never the system prompt (the prefix stays
        // byte-identical); journaled with the turn, so a replay builds the same bytes.
        if let Some(mem) = self.tool_ctx().memory {
            attachments.extend(mem.recall_attachment(text));
        }
        {
            // Lock order: the conversation before the session.
            let mut conv = self.main.lock_or_recover();
            let mut inner = self.lock();
            if inner.seen_requests.contains(request_id) {
                return Ok(false);
            }
            if !matches!(inner.state, TurnState::Idle | TurnState::Paused) {
                return Err(SessionError::Busy);
            }
            inner.seen_requests.insert(request_id.to_string());
            // A subagent run is never planned: the child is the whole turn.
            let route = match direct {
                Some(_) => None,
                None => Self::route_turn(&inner, text, attachments.len(), &plan),
            };
            inner.turn += 1;
            inner.skill = skill;
            inner.direct = direct;
            if inner.title.is_empty() {
                inner.title = crate::journal::title_of(text);
            }
            let shell = std::mem::take(&mut inner.pending.shell);
            let mut plan = plan;
            if plan.is_empty() {
                // A message while a plan waits for its answer revises it.
                if let Some(p) = &inner.plan.pending {
                    plan.push(reasonix_forward::proto::PlanEvent::Decided {
                        plan_id: p.plan_id.clone(),
                        decision: reasonix_forward::proto::PlanDecision::Revise,
                        comment: Some(text.to_string()),
                    });
                }
            }
            for ev in plan {
                self.emit(&mut inner, EventKind::Plan(ev));
            }
            conv.messages.push(crate::steer::user_message_with_shell(
                &crate::plan::turn_text(text, inner.plan.on),
                &attachments,
                &shell,
            ));
            self.emit(
                &mut inner,
                EventKind::UserTurn {
                    request_id: request_id.to_string(),
                    text: text.to_string(),
                    attachments,
                },
            );
            if let Some(d) = &route {
                self.emit(&mut inner, Self::routed_event(d));
            }
            inner.route = route.map(|d| (d, text.to_string()));
            for text in notices {
                self.emit(&mut inner, EventKind::Notice { text });
            }
            // Durability point: the turn is saved before the model is asked (awaited by the
            // turn runner, off this lock).
            admitted = inner.journal.barrier();
            inner.cancel = Some(cancel.clone());
        }
        self.set_state(TurnState::Running, None);
        let me = Arc::clone(self);
        tokio::spawn(async move { me.run_turn(cancel, Some(admitted)).await });
        Ok(true)
    }

    /// Continue a turn paused at its step limit.
    pub fn continue_turn(self: &Arc<Self>, request_id: &str) -> Result<bool, SessionError> {
        let cancel = CancellationToken::new();
        // A skill's turn continued after a daemon restart keeps its gate (file I/O: before
        // the lock).
        let restored = self.restored_skill_turn();
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
            if inner.skill.is_none() {
                inner.skill = restored;
            }
        }
        self.set_state(TurnState::Running, None);
        let me = Arc::clone(self);
        tokio::spawn(async move { me.run_turn(cancel, None).await });
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
                    outcome: TurnOutcome::Cancelled,
                    detail: None,
                },
            );
            let _ = self.live.send(Notification::State {
                state: TurnState::Idle,
                detail: None,
            });
            // Durability point (turn end), awaited off the lock; a failure is logged and the
            // event stays queued for the next barrier.
            let barrier = inner.journal.barrier();
            tokio::spawn(async move {
                if let Err(e) = barrier.wait().await {
                    tracing::error!("the end of a cancelled turn is not saved yet: {e}");
                }
            });
        }
        true
    }
}

/// Tool notices (`ToolContext::notices`) journaled as session notices.
struct SessionNotices(std::sync::Weak<Session>);

impl crate::tools::NoticeSink for SessionNotices {
    fn notice(&self, text: String) {
        if let Some(s) = self.0.upgrade() {
            s.record(EventKind::Notice { text });
        }
    }
}

impl Session {
    /// A driver attached with its memory settings: tell the user about fact files that were
    /// skipped, and, before the first model request, let the pinned facts (now including the
    /// laptop's global ones) into the standing instructions.
    fn memory_attached(&self) {
        let Some(mem) = self.tool_ctx().memory else {
            return;
        };
        for text in mem.snapshot().notices.iter().cloned() {
            self.record(EventKind::Notice { text });
        }
        let mut conv = self.main.lock_or_recover();
        if conv.messages.is_empty() {
            let mut prefix = Prefix::build(&self.workspace, conv.prefix.tools.clone());
            let notice = crate::memory::pin(&mut prefix, Some(&mem));
            conv.prefix = Arc::new(prefix);
            drop(conv);
            if let Some(text) = notice {
                self.record(EventKind::Notice { text });
            }
        }
    }
}
