//! The TUI's pure state machine: everything the screen shows, updated by client events and
//! key presses. It performs no I/O; what should happen outside (requests to the host, the
//! clipboard, quitting) comes back as [`Action`]s for the runner to execute on tasks.

mod children;
mod completion;
mod context;
mod effort;
mod events;
mod goal;
mod keys;
mod memory;
mod plan;
mod retry;
mod slash;
mod terminal;
mod workbench;

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::Range;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEvent, MouseEventKind};
use reasonix_bootstrap::{
    HostKeyAnswer, HostKeyQuestion, HostKeyStatus, KbdRound, SecretPrompt, Stage, UpgradeAnswer,
    UpgradeQuestion,
};
use reasonix_forward::proto::{
    ApprovalDecision, ClientRole, DaemonStatus, DirEntry, EventKind, McpServerInfo, RewindScope,
    SessionInfo, SessionOpened, TurnState,
};
use tokio::sync::oneshot;
use zeroize::Zeroizing;

use super::composer::Composer;
use super::transcript::{LayoutCtx, Level, Scroll, Transcript};
use crate::client::{ClientEvent, ConnState};
use crate::config::Prices;

pub(crate) use children::ChildView;
pub(crate) use completion::{CompKind, Completion};
pub use effort::ModelEfforts;
pub(crate) use keys::KEYS;
pub use memory::MemoryAction;
pub(crate) use memory::MemoryAsk;
pub(crate) use plan::ANSWERS as PLAN_ANSWERS;
pub(crate) use slash::{SlashCommand, SlashSpec};
pub(crate) use terminal::TermTab;
pub use terminal::{PtyAction, PtyEvent};
pub(crate) use workbench::HistorySearch;

/// Static facts the UI shows and needs (from the config and the command line).
#[derive(Debug, Clone, Default)]
pub struct AppSettings {
    /// Workspace label: `host:/path` or a local path.
    pub workspace: String,
    /// Model labels offered by `/model` (`provider/model`).
    pub models: Vec<String>,
    /// The model chosen at start (label), if any.
    pub model: Option<String>,
    /// Prices per 1M tokens by model name and by `provider/model` label.
    pub prices: HashMap<String, Prices>,
    /// Permission mode label (`ask`, `auto`, `yolo`).
    pub mode: String,
    /// Build id of this binary (shown by `/status` next to the host's).
    pub build: String,
    /// The user config file "always allow" rules are saved to.
    pub config_file: String,
    /// The workspace "always allow" rules are stored under (`None`: only global rules).
    pub workspace_key: Option<String>,
    /// Context windows in tokens by `provider/model` label and by model name (for the
    /// status bar's context-used %; a model without one shows no %).
    pub context_windows: HashMap<String, u64>,
    /// `[agent] prompt_confirm_ratio`: ask before sending a prompt whose estimated tokens
    /// exceed this share of the context window (0 never asks).
    pub prompt_confirm_ratio: f64,
    /// Effort levels by `provider/model` label, model name and provider name, and under
    /// `""` those of the default model (for `/effort`).
    pub efforts: HashMap<String, ModelEfforts>,
    /// The user's effort choice at start (`--effort`, `[agent] effort`), if any.
    pub effort: Option<reasonix_forward::proto::ReasoningEffort>,
}

/// What to open: the parameters of a `Request::OpenSession` the runner builds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenParams {
    /// Session id, or `None` for "new" / "most recent".
    pub session: Option<String>,
    /// Start a fresh session.
    pub new: bool,
    /// Replay events after this seq.
    pub since: u64,
    /// Take the driver role from another client.
    pub takeover: bool,
    /// Model label for the session settings.
    pub model: Option<String>,
    /// Reasoning effort for the session settings.
    pub effort: Option<reasonix_forward::proto::ReasoningEffort>,
}

/// Something the runner must do outside the state machine.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Send `Request::OpenSession` built from these parameters.
    OpenSession(OpenParams),
    /// Send `Request::SubmitTurn`.
    Submit {
        /// Deduplication id.
        request_id: String,
        /// The prompt.
        text: String,
    },
    /// Send `Request::ContinueTurn`.
    ContinueTurn {
        /// Deduplication id.
        request_id: String,
    },
    /// Send `Request::Cancel`.
    Cancel {
        /// Deduplication id.
        request_id: String,
    },
    /// Send `Request::AnswerElicitation`.
    AnswerElicitation {
        /// Deduplication id.
        request_id: String,
        /// The elicitation answered.
        elicitation_id: String,
        /// What the user chose.
        action: reasonix_forward::proto::ElicitAction,
        /// With `Accept`: the values.
        content: Option<serde_json::Map<String, serde_json::Value>>,
    },
    /// Send `Request::Approve`.
    Approve {
        /// Deduplication id.
        request_id: String,
        /// The approval answered.
        approval_id: String,
        /// The answer.
        decision: ApprovalDecision,
        /// With `AllowAlways`: store the rule for every workspace instead of this one.
        everywhere: bool,
    },
    /// Send `Request::Takeover`.
    Takeover,
    /// Send `Request::Goal` (start, pause, resume, clear; a start gets `[agent]` budgets).
    Goal {
        /// Request id (the goal's id and its first turn's on a start).
        request_id: String,
        /// What to do.
        action: reasonix_forward::proto::GoalAction,
        /// The model in use (its prices count toward the cost budget).
        model: Option<String>,
        /// The open session: a start or resume starts its goal keeper ([`crate::keeper`]).
        session: Option<String>,
    },
    /// Send `Request::Plan` (plan mode: enter, leave, answer the card).
    Plan {
        /// Deduplication id (and of the turn it starts).
        request_id: String,
        /// What to do.
        action: reasonix_forward::proto::PlanAction,
    },
    /// Use this permission mode (`ask`, `auto`) in the settings of the next open.
    SetMode(String),
    /// `/ports [open N|stop N|add SPEC]`: the laptop's forwards of the host's ports.
    Ports(String),
    /// `/memory …`, a confirmed `# note`, a confirmed forget (#32).
    Memory(MemoryAction),
    /// `/memory edit ID`: open the fact in `$VISUAL`/`$EDITOR` on this laptop (the TUI
    /// gives the terminal to the editor meanwhile) and write it back through the store.
    MemoryEdit {
        /// The fact's id.
        id: String,
    },
    /// `/upload ARGS` (`upload`) or `/download ARGS`: a file copy over the link.
    Transfer {
        /// Laptop to host.
        upload: bool,
        /// The command's arguments.
        arg: String,
    },
    /// Send `Request::Rewind`.
    Rewind {
        /// Deduplication id.
        request_id: String,
        /// Restore to just before this turn.
        to_turn: u64,
        /// Files, conversation or both.
        scope: RewindScope,
        /// Only report what would change.
        dry_run: bool,
    },
    /// Send `Request::ListSessions`.
    ListSessions,
    /// Send `Request::RenameSession` (session management, issue 16).
    RenameSession {
        /// Session id.
        session: String,
        /// New title.
        title: String,
    },
    /// Send `Request::DeleteSession` (to the host's trash).
    DeleteSession {
        /// Session id.
        session: String,
    },
    /// Send `Request::ListTrash` (answered with [`AppEvent::Trash`]).
    ListTrash,
    /// Send `Request::RestoreSession` (answered with [`AppEvent::SessionRestored`]).
    RestoreSession {
        /// Session id.
        session: String,
    },
    /// Send `Request::PurgeSessions` for one session (answered with
    /// [`AppEvent::SessionsPurged`]).
    PurgeSession {
        /// Session id.
        session: String,
    },
    /// Send `Request::ListDir` (path relative to the workspace; `""` is the root).
    ListDir {
        /// Directory.
        path: String,
    },
    /// Send `Request::McpResources` (for `@server:uri` completion).
    McpResources {
        /// MCP server name.
        server: String,
    },
    /// Send `Request::Status`.
    Status,
    /// Send `Request::McpStatus`.
    McpStatus,
    /// `/mcp login NAME` / `/mcp logout NAME`: sign in to (or out of) an HTTP MCP server on
    /// this laptop, then have the host reconnect it (`Request::McpReconnect`).
    McpSignIn {
        /// Server name.
        server: String,
        /// Sign out instead.
        logout: bool,
    },
    /// Send `Request::CancelSubagent` (the child view's `x`).
    CancelSubagent {
        /// Deduplication id.
        request_id: String,
        /// The child (`sa-N`).
        child: String,
    },
    /// Send `Request::Compact` (`/compact [focus]`).
    Compact {
        /// Deduplication id.
        request_id: String,
        /// What the summary should keep above all.
        focus: Option<String>,
    },
    /// Send `Request::ContextReport` (`/context`).
    ContextReport,
    /// Put this text on the clipboard with OSC 52.
    Copy(String),
    /// Save a tool's complete output to a file (fetching it from the host if needed).
    SaveOutput(super::fullout::OutputRequest),
    /// Send `Request::Steer` (a `not_running` answer comes back as
    /// [`AppEvent::SteerRefused`]).
    Steer {
        /// Deduplication id.
        request_id: String,
        /// The steering text.
        text: String,
    },
    /// Send `Request::Shell` (a `!` line).
    Shell {
        /// Deduplication id.
        request_id: String,
        /// The command line.
        command: String,
        /// Share the output with the model in the next turn.
        add_to_context: bool,
    },
    /// Send `Request::HistoryList` (answered with [`AppEvent::History`]).
    HistoryList,
    /// Read the custom command files again (the user's here, the workspace's on the host),
    /// answered with [`AppEvent::Commands`], or with [`AppEvent::CommandsRetry`] carrying
    /// `then`: a `/name` line no known command matched, run again with the new set.
    ReloadCommands {
        /// The line to run again.
        then: Option<String>,
    },
    /// Send `Request::HistoryAppend`.
    HistoryAppend {
        /// What the user sent.
        text: String,
    },
    /// Skip the reconnect backoff.
    RetryNow,
    /// Terminal tabs: a request or traffic for a host PTY (sent in order).
    Pty(PtyAction),
    /// `/hooks [trust [PATH]]`: list the hooks, or trust the project hook files first.
    Hooks {
        /// Trust the project hook files as they are now.
        trust: bool,
        /// Only this file.
        path: Option<String>,
    },
    /// `/permissions`: list the rules in force, or remove rule N of that list first.
    Permissions {
        /// The 1-based number of the rule to remove.
        remove: Option<usize>,
    },
    /// Leave the TUI.
    Quit,
    /// The user said yes to creating the missing workspace folder (`--mkdir`).
    CreateWorkspace,
}

/// A question from the SSH/bootstrap code ([`super::TuiPrompter`]) with its answer channel.
#[derive(Debug)]
pub enum PromptRequest {
    /// Decide about a host key.
    HostKey {
        /// The question.
        question: HostKeyQuestion,
        /// Where the answer goes.
        reply: oneshot::Sender<HostKeyAnswer>,
    },
    /// Ask for one secret.
    Secret {
        /// The prompt.
        prompt: SecretPrompt,
        /// Where the answer goes (`None` = cancelled).
        reply: oneshot::Sender<Option<Zeroizing<String>>>,
    },
    /// One keyboard-interactive round.
    Keyboard {
        /// The round.
        round: KbdRound,
        /// Where the answers go (`None` = cancelled).
        reply: oneshot::Sender<Option<Vec<Zeroizing<String>>>>,
    },
    /// A daemon of another build runs a turn: upgrade, attach read-only or wait.
    Upgrade {
        /// The question.
        question: UpgradeQuestion,
        /// Where the answer goes.
        reply: oneshot::Sender<UpgradeAnswer>,
    },
}

/// Everything that can happen to the UI besides input.
#[derive(Debug)]
pub enum AppEvent {
    /// From the link supervisor.
    Client(ClientEvent),
    /// Answer to an `OpenSession`.
    SessionOpened(SessionOpened),
    /// Answer to `ListSessions`.
    Sessions(Vec<SessionInfo>),
    /// A session was renamed (answer to `RenameSession`).
    SessionRenamed {
        /// Session id.
        session: String,
        /// The new title.
        title: String,
    },
    /// A session was moved to the trash (answer to `DeleteSession`).
    SessionDeleted(String),
    /// Answer to `ListTrash`.
    Trash(Vec<reasonix_forward::proto::TrashedSession>),
    /// A session came back from the trash (answer to `RestoreSession`).
    SessionRestored(String),
    /// Sessions removed for good (answer to `PurgeSessions`).
    SessionsPurged(Vec<String>),
    /// The custom commands (user and workspace files) and the files skipped.
    Commands(crate::commands::CommandSet),
    /// Answer to `ReloadCommands{then: Some(line)}`: the new set, then `line` runs again.
    CommandsRetry {
        /// The commands read again.
        set: crate::commands::CommandSet,
        /// The `/name args` line (without the `/`).
        line: String,
    },
    /// Answer to `ListDir`.
    DirEntries {
        /// The directory asked for.
        path: String,
        /// Its entries.
        entries: Vec<DirEntry>,
    },
    /// Answer to `McpResources`.
    McpResources {
        /// The server asked about.
        server: String,
        /// Its first resources.
        resources: Vec<reasonix_forward::proto::McpResourceEntry>,
    },
    /// Answer to `Status`.
    Status(DaemonStatus),
    /// Answer to `McpStatus`.
    McpServers(Vec<McpServerInfo>),
    /// `Takeover` succeeded.
    TookOver,
    /// Answer to `Compact`.
    CompactDone(String),
    /// What became of the goal keeper a `/goal` start or resume asked for (its line).
    GoalKeeper(String),
    /// Answer to `ContextReport`.
    Context(reasonix_forward::proto::ContextReport),
    /// Answer to `Rewind`.
    Rewound {
        /// What was (or would be) restored.
        summary: String,
        /// Paths restored or removed.
        paths: Vec<String>,
        /// The scope asked for.
        scope: RewindScope,
        /// True for a dry run.
        dry_run: bool,
    },
    /// A tool output was saved by [`Action::SaveOutput`].
    OutputSaved {
        /// Tool name.
        tool: String,
        /// The file.
        path: std::path::PathBuf,
        /// Its size.
        bytes: u64,
        /// True when it was fetched from the host and its SHA-256 checked.
        fetched: bool,
    },
    /// Terminal tabs: an answer or traffic from a host PTY.
    Pty(PtyEvent),
    /// The workspace's prompt history (answer to `HistoryList`).
    History(Vec<String>),
    /// A steer found no running turn on the host.
    SteerRefused {
        /// Its text (sent as a message instead).
        text: String,
    },
    /// The `/permissions` listing (or the outcome of a removal), or the `/hooks` report,
    /// shown in the transcript.
    Permissions {
        /// The text.
        text: String,
        /// A removal failed or was refused.
        error: bool,
    },
    /// A request failed.
    RequestFailed {
        /// Which request (`submit`, `open`, `list_dir:PATH`, ...).
        what: String,
        /// The error, as the user should read it.
        message: String,
    },
    /// A question for the user.
    Prompt(PromptRequest),
    /// A host key the connection refused (changed or revoked): shown, nothing to accept.
    HostKeyRefused(HostKeyQuestion),
    /// The SSH server's banner.
    Banner(String),
    /// Bootstrap progress.
    Progress {
        /// Stage.
        stage: Stage,
        /// Detail text.
        detail: String,
        /// `(done, total)` for uploads.
        amount: Option<(u64, u64)>,
    },
}

/// Connection state as displayed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ConnView {
    Connecting,
    Connected,
    Reconnecting {
        attempt: u32,
        /// Monotonic ms at which the next attempt starts.
        next_at: i64,
        /// Last contact age when reported, and when (monotonic ms).
        last_contact_secs: u64,
        reported_at: i64,
        reason: String,
    },
    Failed {
        reason: String,
        /// The workspace folder is missing and the client waits for a yes to create it.
        can_create: bool,
    },
}

/// An approval waiting for the user.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PendingApproval {
    pub(crate) approval_id: String,
    pub(crate) tool: String,
    pub(crate) arguments: String,
    pub(crate) reason: String,
    pub(crate) preview: Option<String>,
    /// The rule "always allow" stores (`None`: this session only).
    pub(crate) always_rule: Option<String>,
}

/// Informational overlays (closed with Esc; they hide the composer).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Overlay {
    Help {
        scroll: usize,
    },
    Status,
    Sessions {
        list: Option<Vec<SessionInfo>>,
        sel: usize,
    },
    /// `/sessions trash`: the trashed sessions; `confirm` while a purge waits for `y`.
    Trash {
        list: Option<Vec<reasonix_forward::proto::TrashedSession>>,
        sel: usize,
        confirm: bool,
    },
    Models {
        sel: usize,
    },
    /// The composer's prompt is over `prompt_confirm_ratio` of the context window: Enter
    /// sends it, Esc goes back to editing (#15 item 6).
    ConfirmSend {
        tokens: u64,
        window: u64,
    },
    /// `/context`: `report` is `None` until the host answers.
    Context {
        report: Option<reasonix_forward::proto::ContextReport>,
        error: Option<String>,
    },
    /// `/mcp`: `list` is `None` while the host starts and lists the servers.
    Mcp {
        list: Option<Vec<McpServerInfo>>,
        error: Option<String>,
        scroll: usize,
    },
    /// A memory write waiting for the user (`# note`, forget).
    Memory(MemoryAsk),
    /// `Ctrl-G`: one subagent's transcript (Tab: the next child, `x`: cancel it).
    Child {
        id: String,
        scroll: usize,
    },
}

/// A question put to the user by the SSH code.
#[derive(Debug)]
pub(crate) enum PromptModal {
    HostKey {
        question: HostKeyQuestion,
        reply: Option<oneshot::Sender<HostKeyAnswer>>,
    },
    Secret {
        prompt: SecretPrompt,
        input: Zeroizing<String>,
        reply: Option<oneshot::Sender<Option<Zeroizing<String>>>>,
    },
    Keyboard {
        round: KbdRound,
        answers: Vec<Zeroizing<String>>,
        input: Zeroizing<String>,
        reply: Option<oneshot::Sender<Option<Vec<Zeroizing<String>>>>>,
    },
    Upgrade {
        question: UpgradeQuestion,
        reply: Option<oneshot::Sender<UpgradeAnswer>>,
    },
    /// An MCP server's form (`elicitation/create`), answered with
    /// [`Action::AnswerElicitation`].
    Elicit {
        elicitation_id: String,
        server: String,
        message: String,
        form: crate::tui::elicit::ElicitForm,
        input: Zeroizing<String>,
        /// Why the last answer was not taken.
        error: Option<String>,
    },
    /// A host process asks the forwarded ssh-agent to sign (`[sandbox] ssh_agent =
    /// "confirm"`); dropped unanswered, it refuses.
    AgentSign {
        ask: crate::agent_confirm::AgentSignAsk,
    },
}

/// Connection/bootstrap progress shown until the first connection.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ProgressView {
    pub(crate) active: bool,
    pub(crate) current: Option<Stage>,
    pub(crate) detail: String,
    pub(crate) amount: Option<(u64, u64)>,
    pub(crate) banner: Option<String>,
}

/// Running token and cost figures of the session as seen by this client.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Totals {
    pub(crate) prompt: u64,
    pub(crate) completion: u64,
    pub(crate) cache_hit: u64,
    pub(crate) cache_miss: u64,
    pub(crate) cost: Option<f64>,
    pub(crate) requests: u64,
    /// Prompt tokens of the conversation as of the last request (or compaction).
    pub(crate) context: Option<u64>,
}

impl Totals {
    /// Cache-hit share of prompt tokens, when known.
    pub(crate) fn cache_pct(&self) -> Option<f64> {
        let denom = self.cache_hit + self.cache_miss;
        (denom > 0).then(|| self.cache_hit as f64 * 100.0 / denom as f64)
    }
}

/// The whole UI state.
pub struct App {
    pub(crate) settings: AppSettings,
    pub(crate) transcript: Transcript,
    pub(crate) scroll: Scroll,
    /// Size of the transcript view at the last render (for key-driven scrolling).
    pub(crate) view: std::cell::Cell<(u16, u16)>,
    /// Largest scroll offset of the open scrollable overlay at the last render (keys clamp
    /// to it so scrolling back up starts moving at once); unbounded until it is drawn.
    pub(crate) overlay_max_scroll: std::cell::Cell<usize>,
    pub(crate) composer: Composer,
    pub(crate) completion: Option<Completion>,
    completion_dismissed: Option<String>,
    /// The command files were re-read for the slash completion now open (once per opening).
    commands_reloaded: bool,
    dir_cache: HashMap<String, Vec<DirEntry>>,
    /// Custom slash commands from command files (see [`crate::commands`]).
    pub(crate) custom_commands: crate::commands::CommandSet,
    dir_pending: HashSet<String>,
    /// First resources of each MCP server asked about (`@server:` completion).
    mcp_resources: HashMap<String, Vec<reasonix_forward::proto::McpResourceEntry>>,
    mcp_resources_pending: HashSet<String>,
    pub(crate) conn: ConnView,
    was_connected: bool,
    pub(crate) session: Option<String>,
    open_pending: Option<OpenParams>,
    /// Ignored-project-setting notices already shown.
    reported_ignored: Vec<String>,
    last_seq: u64,
    pub(crate) role: Option<ClientRole>,
    pub(crate) turn_state: TurnState,
    pub(crate) turn_detail: Option<String>,
    pub(crate) turn_started: Option<i64>,
    pub(crate) sandbox: Option<String>,
    pub(crate) totals: Totals,
    pub(crate) last_model: Option<String>,
    pub(crate) model: Option<String>,
    /// The effort the session's requests carry (shown in the status bar).
    pub(crate) effort: Option<reasonix_forward::proto::ReasoningEffort>,
    /// The level the user chose (`None`: each model's default).
    effort_choice: Option<reasonix_forward::proto::ReasoningEffort>,
    pub(crate) approvals: VecDeque<PendingApproval>,
    /// Plan mode of the open session (issue 38 §1).
    pub(crate) plan: plan::PlanView,
    /// The open session's goal (issue 38 §3).
    pub(crate) goal: crate::goal::GoalView,
    answered: HashSet<String>,
    pub(crate) approval_sel: usize,
    pub(crate) prompts: VecDeque<PromptModal>,
    pub(crate) overlay: Option<Overlay>,
    pub(crate) progress: ProgressView,
    pub(crate) daemon_status: Option<DaemonStatus>,
    pub(crate) show_reasoning: bool,
    pub(crate) hint: Option<(String, i64)>,
    pub(crate) queued: Option<String>,
    /// Ctrl-R history search in progress.
    pub(crate) search: Option<HistorySearch>,
    pub(crate) sending: Option<String>,
    our_requests: HashSet<String>,
    last_ctrl_c: Option<i64>,
    pub(crate) mono_ms: i64,
    pub(crate) wall_ms: i64,
    quit: bool,
    /// The user confirmed sending the big prompt in the composer (the next send goes).
    pub(crate) big_confirmed: bool,
    /// Terminal tabs beside the conversation.
    pub(crate) terms: terminal::Terms,
    /// The model-request retry in progress (#15), for the status line.
    pub(crate) retry: Option<retry::RetryView>,
    /// Facts the turns of the rewind in flight remembered (offered to forget after it).
    rewind_remembered: Vec<String>,
    /// The session's subagents (#33 §2), from their events.
    pub(crate) children: children::Children,
}

fn rid(prefix: &str) -> String {
    format!("{prefix}-{:016x}", rand::random::<u64>())
}

/// Milliseconds since the epoch of an RFC 3339 UTC timestamp (`YYYY-MM-DDTHH:MM:SS[.fff]Z`).
pub(crate) fn parse_ts(ts: &str) -> Option<i64> {
    let b = ts.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: Range<usize>| ts.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut millis = 0i64;
    if b.get(19) == Some(&b'.') {
        let frac: String = ts[20..].chars().take_while(char::is_ascii_digit).collect();
        let f3: String = frac.chars().chain("000".chars()).take(3).collect();
        millis = f3.parse().ok()?;
    }
    // Days from civil (proleptic Gregorian).
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400) + hh * 3600 + mm * 60 + ss) * 1000 + millis)
}

impl App {
    /// A fresh UI.
    pub fn new(settings: AppSettings) -> Self {
        let model = settings.model.clone();
        let effort_choice = settings.effort;
        let effort = effort_choice.or_else(|| {
            settings
                .efforts
                .get(model.as_deref().unwrap_or(""))
                .and_then(|l| l.default)
        });
        App {
            settings,
            transcript: Transcript::default(),
            scroll: Scroll::Follow,
            view: std::cell::Cell::new((80, 20)),
            overlay_max_scroll: std::cell::Cell::new(usize::MAX),
            composer: Composer::default(),
            completion: None,
            completion_dismissed: None,
            commands_reloaded: false,
            dir_cache: HashMap::new(),
            custom_commands: crate::commands::CommandSet::default(),
            dir_pending: HashSet::new(),
            mcp_resources: HashMap::new(),
            mcp_resources_pending: HashSet::new(),
            conn: ConnView::Connecting,
            was_connected: false,
            session: None,
            open_pending: None,
            reported_ignored: Vec::new(),
            last_seq: 0,
            role: None,
            turn_state: TurnState::Idle,
            turn_detail: None,
            turn_started: None,
            sandbox: None,
            totals: Totals::default(),
            last_model: None,
            model,
            effort,
            effort_choice,
            approvals: VecDeque::new(),
            plan: plan::PlanView::default(),
            goal: crate::goal::GoalView::default(),
            answered: HashSet::new(),
            approval_sel: 0,
            prompts: VecDeque::new(),
            overlay: None,
            progress: ProgressView::default(),
            daemon_status: None,
            show_reasoning: false,
            hint: None,
            queued: None,
            search: None,
            sending: None,
            our_requests: HashSet::new(),
            last_ctrl_c: None,
            mono_ms: 0,
            wall_ms: 0,
            quit: false,
            big_confirmed: false,
            terms: terminal::Terms::default(),
            retry: None,
            rewind_remembered: Vec::new(),
            children: children::Children::default(),
        }
    }

    /// The first action: open (or create) the session.
    pub fn open(&mut self, session: Option<String>, new: bool, takeover: bool) -> Vec<Action> {
        let p = OpenParams {
            session,
            new,
            since: 0,
            takeover,
            model: self.model.clone(),
            effort: self.effort,
        };
        self.open_pending = Some(p.clone());
        vec![Action::OpenSession(p)]
    }

    /// True once the user asked to leave.
    pub fn should_quit(&self) -> bool {
        self.quit
    }

    /// The composer's text.
    pub fn composer_text(&self) -> &str {
        self.composer.text()
    }

    /// Highest journal seq seen (for re-opening after a reattach).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The open session id.
    pub fn session_id(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// The model label in use (for session settings).
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// The reasoning effort the session's requests carry (`None`: the provider's default).
    pub fn effort(&self) -> Option<reasonix_forward::proto::ReasoningEffort> {
        self.effort
    }

    /// Advance the clocks: `mono_ms` since the UI started (spinners, countdowns) and `wall_ms`
    /// since the epoch (elapsed times measured against event timestamps).
    pub fn tick(&mut self, mono_ms: i64, wall_ms: i64) {
        self.mono_ms = mono_ms;
        self.wall_ms = wall_ms;
        if let Some((_, at)) = &self.hint {
            if mono_ms - at > 5000 {
                self.hint = None;
            }
        }
    }

    fn set_hint(&mut self, text: impl Into<String>) {
        self.hint = Some((text.into(), self.mono_ms));
    }

    /// Layout parameters for the transcript at the current view width.
    pub(crate) fn layout_ctx(&self, width: usize) -> LayoutCtx {
        LayoutCtx {
            width,
            show_reasoning: self.show_reasoning,
            now_ms: self.wall_ms,
            frame: (self.mono_ms.max(0) / 100) as u64,
        }
    }

    /// The approval shown, if any (only a driver can answer).
    pub(crate) fn active_approval(&self) -> Option<&PendingApproval> {
        if self.role == Some(ClientRole::Spectator) {
            return None;
        }
        self.approvals.front()
    }

    /// True when a modal hides the composer.
    pub(crate) fn modal_open(&self) -> bool {
        !self.prompts.is_empty()
            || self.fatal_open()
            || self.active_approval().is_some()
            || self.plan_card().is_some()
            || self.overlay.is_some()
            || self.progress.active
    }

    /// A connection failed for good: the fatal-error modal stays until dismissed.
    pub(crate) fn fatal_open(&self) -> bool {
        matches!(self.conn, ConnView::Failed { .. })
    }

    /// True while a turn is in progress on the host.
    pub(crate) fn turn_busy(&self) -> bool {
        match self.turn_state {
            TurnState::Running | TurnState::WaitingForLaptop | TurnState::WaitingForApproval => {
                true
            }
            TurnState::Idle | TurnState::Paused => false,
        }
    }
}
