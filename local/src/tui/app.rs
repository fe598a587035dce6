//! The TUI's pure state machine: everything the screen shows, updated by client events and
//! key presses. It performs no I/O; what should happen outside (requests to the host, the
//! clipboard, quitting) comes back as [`Action`]s for the runner to execute on tasks.

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
    /// Send `Request::Approve`.
    Approve {
        /// Deduplication id.
        request_id: String,
        /// The approval answered.
        approval_id: String,
        /// The answer.
        decision: ApprovalDecision,
    },
    /// Send `Request::Takeover`.
    Takeover,
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
    /// Send `Request::ListDir` (path relative to the workspace; `""` is the root).
    ListDir {
        /// Directory.
        path: String,
    },
    /// Send `Request::Status`.
    Status,
    /// Send `Request::McpStatus`.
    McpStatus,
    /// Put this text on the clipboard with OSC 52.
    Copy(String),
    /// Save a tool's complete output to a file (fetching it from the host if needed).
    SaveOutput(super::fullout::OutputRequest),
    /// Skip the reconnect backoff.
    RetryNow,
    /// Leave the TUI.
    Quit,
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
    /// Answer to `ListDir`.
    DirEntries {
        /// The directory asked for.
        path: String,
        /// Its entries.
        entries: Vec<DirEntry>,
    },
    /// Answer to `Status`.
    Status(DaemonStatus),
    /// Answer to `McpStatus`.
    McpServers(Vec<McpServerInfo>),
    /// `Takeover` succeeded.
    TookOver,
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
    Models {
        sel: usize,
    },
    /// `/mcp`: `list` is `None` while the host starts and lists the servers.
    Mcp {
        list: Option<Vec<McpServerInfo>>,
        error: Option<String>,
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

/// What a completion popup completes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CompKind {
    Slash,
    Path { dir: String },
}

/// One completion candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CompItem {
    pub(crate) label: String,
    pub(crate) detail: String,
    pub(crate) is_dir: bool,
}

/// An open completion popup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Completion {
    pub(crate) kind: CompKind,
    pub(crate) items: Vec<CompItem>,
    pub(crate) sel: usize,
    /// Bytes of the composer text the choice replaces.
    pub(crate) range: Range<usize>,
    pub(crate) loading: bool,
}

/// Slash commands: name, argument hint, description. `/help` lists these.
pub(crate) const COMMANDS: &[(&str, &str, &str)] = &[
    ("help", "", "list every key and command"),
    ("new", "", "start a new session"),
    (
        "sessions",
        "",
        "pick a session of this workspace and resume it",
    ),
    ("model", "[name]", "choose the model"),
    (
        "status",
        "",
        "host, build, sandbox, uptime, session, tokens, cache",
    ),
    ("clear", "", "clear the screen (the session is kept)"),
    ("continue", "", "continue a turn paused at its step limit"),
    (
        "takeover",
        "",
        "drive this session (the other client becomes read-only)",
    ),
    (
        "copy",
        "[code]",
        "copy the last answer (or its last code block)",
    ),
    (
        "output",
        "[N]",
        "save the last (or N-th last) tool output to a file",
    ),
    ("reconnect", "", "retry the connection now"),
    (
        "rewind",
        "N [code|conversation|both] [dry]",
        "restore to just before turn N",
    ),
    (
        "compact",
        "",
        "summarise the conversation (not available yet)",
    ),
    (
        "mcp",
        "",
        "MCP servers: where each runs, its state and its tools",
    ),
    ("quit", "", "leave Reasonix (the host keeps the session)"),
];

/// Key help: key, what it does. Rendered by `/help`.
pub(crate) const KEYS: &[(&str, &str)] = &[
    (
        "Enter",
        "send the message (or pick the highlighted completion)",
    ),
    ("Shift+Enter, Alt+Enter, Ctrl-J", "new line"),
    ("Up / Down", "previous / next line, then prompt history"),
    ("Tab", "complete a /command or @path"),
    (
        "@path",
        "attach a workspace file (Tab lists one folder level)",
    ),
    ("Esc", "close a popup or overlay"),
    (
        "Ctrl-C",
        "cancel the running turn / clear input; twice quits",
    ),
    ("Ctrl-D", "quit (when the input is empty)"),
    ("PgUp / PgDn, wheel", "scroll the transcript"),
    ("Home / End", "top / bottom of the transcript (input empty)"),
    ("Ctrl-Home / Ctrl-End", "top / bottom of the transcript"),
    ("Ctrl-R", "show / hide reasoning"),
    ("Ctrl-Y", "copy the last answer to the clipboard (OSC 52)"),
    ("Ctrl-L", "redraw the screen"),
    ("F5", "reconnect now"),
    ("Ctrl-A / Ctrl-E", "start / end of line"),
    ("Ctrl-U / Ctrl-K", "delete to start / end of line"),
    ("Ctrl-W, Alt-Backspace", "delete the previous word"),
    ("Alt-Left / Alt-Right", "move by word"),
    (
        "Shift+drag",
        "select text with the mouse (the wheel scrolls)",
    ),
    (
        "1 y / 2 s / 3 a / 4 n",
        "approval: once / session / always / deny",
    ),
];

/// Running token and cost figures of the session as seen by this client.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Totals {
    pub(crate) prompt: u64,
    pub(crate) completion: u64,
    pub(crate) cache_hit: u64,
    pub(crate) cache_miss: u64,
    pub(crate) cost: Option<f64>,
    pub(crate) requests: u64,
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
    dir_cache: HashMap<String, Vec<DirEntry>>,
    dir_pending: HashSet<String>,
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
    pub(crate) approvals: VecDeque<PendingApproval>,
    answered: HashSet<String>,
    pub(crate) approval_sel: usize,
    pub(crate) prompts: VecDeque<PromptModal>,
    pub(crate) overlay: Option<Overlay>,
    pub(crate) progress: ProgressView,
    pub(crate) daemon_status: Option<DaemonStatus>,
    pub(crate) show_reasoning: bool,
    pub(crate) hint: Option<(String, i64)>,
    pub(crate) queued: Option<String>,
    pub(crate) sending: Option<String>,
    our_requests: HashSet<String>,
    last_ctrl_c: Option<i64>,
    pub(crate) mono_ms: i64,
    pub(crate) wall_ms: i64,
    quit: bool,
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
        App {
            settings,
            transcript: Transcript::default(),
            scroll: Scroll::Follow,
            view: std::cell::Cell::new((80, 20)),
            overlay_max_scroll: std::cell::Cell::new(usize::MAX),
            composer: Composer::default(),
            completion: None,
            completion_dismissed: None,
            dir_cache: HashMap::new(),
            dir_pending: HashSet::new(),
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
            approvals: VecDeque::new(),
            answered: HashSet::new(),
            approval_sel: 0,
            prompts: VecDeque::new(),
            overlay: None,
            progress: ProgressView::default(),
            daemon_status: None,
            show_reasoning: false,
            hint: None,
            queued: None,
            sending: None,
            our_requests: HashSet::new(),
            last_ctrl_c: None,
            mono_ms: 0,
            wall_ms: 0,
            quit: false,
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
        };
        self.open_pending = Some(p.clone());
        vec![Action::OpenSession(p)]
    }

    /// True once the user asked to leave.
    pub fn should_quit(&self) -> bool {
        self.quit
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
            || self.active_approval().is_some()
            || self.overlay.is_some()
            || self.progress.active
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

    // ------------------------------------------------------------------ events

    /// Apply a client event.
    pub fn handle_event(&mut self, ev: ClientEvent) -> Vec<Action> {
        self.handle(AppEvent::Client(ev))
    }

    /// Apply any non-input event.
    pub fn handle(&mut self, ev: AppEvent) -> Vec<Action> {
        match ev {
            AppEvent::Client(c) => self.client_event(c),
            AppEvent::SessionOpened(o) => {
                let changed = self.session.as_deref() != Some(o.session.as_str());
                if changed {
                    let what = if o.created {
                        "new session"
                    } else {
                        "resumed session"
                    };
                    self.transcript
                        .notice(format!("{what} {}", o.session), Level::Info);
                }
                self.session = Some(o.session);
                self.open_pending = None;
                self.role = Some(o.role);
                self.turn_state = o.state;
                if !o.sandbox.is_empty() {
                    self.sandbox = Some(o.sandbox);
                }
                if let Some(n) = o.notice {
                    self.transcript.notice(n, Level::Warn);
                }
                // What the host refused from the workspace's project file (it reads the file
                // at every open; each distinct entry is shown once).
                for i in o.ignored {
                    let line = format!("host: {i}");
                    if !self.reported_ignored.contains(&line) {
                        self.transcript.notice(line.clone(), Level::Warn);
                        self.reported_ignored.push(line);
                    }
                }
                if o.role == ClientRole::Driver {
                    self.settings.mode = o.policy.mode.as_str().to_string();
                }
                if o.role == ClientRole::Spectator {
                    self.transcript.notice(
                        "attached read-only: another client drives this session (/takeover to drive)",
                        Level::Warn,
                    );
                    return Vec::new();
                }
                if self.turn_busy() || self.sending.is_some() {
                    return Vec::new();
                }
                self.flush_queue()
            }
            AppEvent::Sessions(list) => {
                if let Some(Overlay::Sessions { list: l, sel }) = &mut self.overlay {
                    *l = Some(list);
                    *sel = 0;
                }
                Vec::new()
            }
            AppEvent::DirEntries { path, entries } => {
                self.dir_pending.remove(&path);
                self.dir_cache.insert(path, entries);
                self.refresh_completion()
            }
            AppEvent::McpServers(servers) => {
                if let Some(Overlay::Mcp { list, error, .. }) = &mut self.overlay {
                    *list = Some(servers);
                    *error = None;
                }
                Vec::new()
            }
            AppEvent::OutputSaved {
                tool,
                path,
                bytes,
                fetched,
            } => {
                self.transcript.notice(
                    format!(
                        "full output of {tool} ({}{}) saved to {}",
                        super::fullout::human_bytes(bytes),
                        if fetched {
                            ", fetched from the host, SHA-256 checked"
                        } else {
                            ""
                        },
                        path.display()
                    ),
                    Level::Info,
                );
                Vec::new()
            }
            AppEvent::Status(s) => {
                if !s.sandbox.is_empty() {
                    self.sandbox = Some(s.sandbox.clone());
                }
                self.daemon_status = Some(s);
                Vec::new()
            }
            AppEvent::Rewound {
                summary,
                paths,
                scope,
                dry_run,
            } => {
                let mut text = summary;
                if !paths.is_empty() {
                    let shown: Vec<&str> = paths.iter().take(10).map(String::as_str).collect();
                    text.push_str(&format!("\nfiles: {}", shown.join(", ")));
                    if paths.len() > 10 {
                        text.push_str(&format!(" and {} more", paths.len() - 10));
                    }
                }
                let conversation = matches!(scope, RewindScope::Conversation | RewindScope::Both);
                if conversation && !dry_run {
                    // The host cut its journal: reload the transcript from the start.
                    let session = self.session.clone();
                    let mut actions = self.switch_session(session, false);
                    self.set_hint(text.lines().next().unwrap_or("").to_string());
                    self.transcript.notice(text, Level::Info);
                    actions.retain(|a| matches!(a, Action::OpenSession(_)));
                    return actions;
                }
                self.transcript.notice(text, Level::Info);
                Vec::new()
            }
            AppEvent::TookOver => {
                self.role = Some(ClientRole::Driver);
                self.transcript
                    .notice("you now drive this session", Level::Info);
                Vec::new()
            }
            AppEvent::RequestFailed { what, message } => {
                if let Some(path) = what.strip_prefix("list_dir:") {
                    self.dir_pending.remove(path);
                    self.dir_cache.insert(path.to_string(), Vec::new());
                    return self.refresh_completion();
                }
                if what == "submit" {
                    self.sending = None;
                }
                if what == "mcp" {
                    if let Some(Overlay::Mcp { error, .. }) = &mut self.overlay {
                        *error = Some(message);
                        return Vec::new();
                    }
                }
                self.transcript
                    .notice(format!("{what} failed: {message}"), Level::Error);
                Vec::new()
            }
            AppEvent::Prompt(p) => {
                self.prompts.push_back(match p {
                    PromptRequest::HostKey { question, reply } => PromptModal::HostKey {
                        question,
                        reply: Some(reply),
                    },
                    PromptRequest::Secret { prompt, reply } => PromptModal::Secret {
                        prompt,
                        input: Zeroizing::new(String::new()),
                        reply: Some(reply),
                    },
                    PromptRequest::Keyboard { round, reply } => PromptModal::Keyboard {
                        round,
                        answers: Vec::new(),
                        input: Zeroizing::new(String::new()),
                        reply: Some(reply),
                    },
                    PromptRequest::Upgrade { question, reply } => PromptModal::Upgrade {
                        question,
                        reply: Some(reply),
                    },
                });
                Vec::new()
            }
            AppEvent::HostKeyRefused(q) => {
                self.show_host_key_refusal(q);
                Vec::new()
            }
            AppEvent::Banner(text) => {
                self.progress.banner = Some(text.clone());
                self.transcript
                    .notice(text.trim_end().to_string(), Level::Info);
                Vec::new()
            }
            AppEvent::Progress {
                stage,
                detail,
                amount,
            } => {
                if !self.was_connected {
                    self.progress.active = true;
                }
                self.progress.current = Some(stage);
                self.progress.detail = detail;
                self.progress.amount = amount;
                Vec::new()
            }
        }
    }

    /// Show a refused host key (changed or revoked) that the connection stopped on. There is
    /// nothing to accept; the modal only explains.
    pub fn show_host_key_refusal(&mut self, question: HostKeyQuestion) {
        self.prompts.push_back(PromptModal::HostKey {
            question,
            reply: None,
        });
    }

    fn client_event(&mut self, ev: ClientEvent) -> Vec<Action> {
        match ev {
            ClientEvent::Connection(state) => {
                match state {
                    ConnState::Connecting => self.conn = ConnView::Connecting,
                    ConnState::Connected { resumed } => {
                        if matches!(self.conn, ConnView::Reconnecting { .. }) && resumed {
                            self.transcript.notice(
                                "reconnected; the session resumed where it was",
                                Level::Info,
                            );
                        }
                        self.conn = ConnView::Connected;
                        self.was_connected = true;
                        self.progress.active = false;
                    }
                    ConnState::Reconnecting {
                        attempt,
                        next_in,
                        last_contact_secs,
                        reason,
                    } => {
                        if !matches!(self.conn, ConnView::Reconnecting { .. }) && self.was_connected
                        {
                            self.transcript.notice(
                                format!("connection lost ({reason}); reconnecting"),
                                Level::Warn,
                            );
                        }
                        self.conn = ConnView::Reconnecting {
                            attempt,
                            next_at: self.mono_ms + next_in.as_millis() as i64,
                            last_contact_secs,
                            reported_at: self.mono_ms,
                            reason,
                        };
                    }
                    ConnState::Failed { reason } => {
                        self.transcript.notice(
                            format!("cannot connect: {reason} (Ctrl-C twice to quit)"),
                            Level::Error,
                        );
                        self.conn = ConnView::Failed { reason };
                        self.progress.active = false;
                    }
                }
                Vec::new()
            }
            ClientEvent::Reattached { reason } => {
                self.transcript.notice(
                    format!(
                        "the link could not be resumed ({reason}); re-attaching and catching up"
                    ),
                    Level::Warn,
                );
                let p = match (&self.session, &self.open_pending) {
                    (Some(s), _) => OpenParams {
                        session: Some(s.clone()),
                        new: false,
                        since: self.last_seq,
                        takeover: false,
                        model: self.model.clone(),
                    },
                    (None, Some(p)) => p.clone(),
                    (None, None) => OpenParams {
                        session: None,
                        new: false,
                        since: self.last_seq,
                        takeover: false,
                        model: self.model.clone(),
                    },
                };
                vec![Action::OpenSession(p)]
            }
            ClientEvent::State { state, detail } => {
                let was_busy = self.turn_busy();
                self.turn_state = state;
                self.turn_detail = detail;
                if self.turn_busy() && self.turn_started.is_none() {
                    self.turn_started = Some(self.mono_ms);
                }
                if !self.turn_busy() {
                    self.turn_started = None;
                    if was_busy {
                        return self.flush_queue();
                    }
                }
                Vec::new()
            }
            ClientEvent::Role { role, reason } => {
                self.role = Some(role);
                let level = match role {
                    ClientRole::Driver => Level::Info,
                    ClientRole::Spectator => Level::Warn,
                };
                self.transcript.notice(reason, level);
                Vec::new()
            }
            ClientEvent::ToolProgress { call_id, message } => {
                self.transcript.tool_progress(&call_id, &message);
                Vec::new()
            }
            ClientEvent::Event(e) => {
                if e.seq > 0 {
                    if e.seq <= self.last_seq {
                        return Vec::new();
                    }
                    self.last_seq = e.seq;
                }
                let mut actions = Vec::new();
                match &e.kind {
                    EventKind::Usage {
                        usage,
                        model,
                        cache_note,
                        ..
                    } => {
                        let t = &mut self.totals;
                        t.prompt += usage.prompt_tokens;
                        t.completion += usage.completion_tokens;
                        t.cache_hit += usage.cache_hit_tokens;
                        t.cache_miss += usage.cache_miss_tokens;
                        t.requests += 1;
                        if let Some(p) = self.settings.prices.get(model) {
                            let uncached = if usage.cache_hit_tokens + usage.cache_miss_tokens > 0 {
                                usage.cache_miss_tokens
                            } else {
                                usage.prompt_tokens
                            };
                            let c = (uncached as f64 * p.input
                                + usage.cache_hit_tokens as f64 * p.cached
                                + usage.completion_tokens as f64 * p.output)
                                / 1_000_000.0;
                            t.cost = Some(t.cost.unwrap_or(0.0) + c);
                        }
                        self.last_model = Some(model.clone());
                        if let Some(n) = cache_note {
                            self.transcript
                                .notice(format!("cache miss: {n}"), Level::Warn);
                        }
                    }
                    EventKind::UserTurn { request_id, .. } => {
                        if self.our_requests.remove(request_id) {
                            self.sending = None;
                        }
                        self.turn_started.get_or_insert(self.mono_ms);
                    }
                    EventKind::ApprovalRequested {
                        approval_id,
                        tool,
                        arguments,
                        reason,
                        preview,
                    } => {
                        if !self.answered.contains(approval_id)
                            && !self.approvals.iter().any(|a| a.approval_id == *approval_id)
                        {
                            self.approvals.push_back(PendingApproval {
                                approval_id: approval_id.clone(),
                                tool: tool.clone(),
                                arguments: arguments.clone(),
                                reason: reason.clone(),
                                preview: preview.clone(),
                            });
                            if self.approvals.len() == 1 {
                                self.approval_sel = 0;
                            }
                        }
                    }
                    EventKind::ApprovalAnswered { approval_id, .. } => {
                        self.answered.insert(approval_id.clone());
                        self.approvals.retain(|a| a.approval_id != *approval_id);
                    }
                    EventKind::TurnFinished { .. } => {
                        // Approvals of a finished turn can no longer be answered.
                        for a in self.approvals.drain(..) {
                            self.answered.insert(a.approval_id);
                        }
                        self.turn_started = None;
                        if self.turn_state != TurnState::Idle
                            && self.turn_state != TurnState::Paused
                        {
                            self.turn_state = TurnState::Idle;
                        }
                        actions.extend(self.flush_queue());
                    }
                    EventKind::SessionStarted { .. }
                    | EventKind::TextDelta { .. }
                    | EventKind::ReasoningDelta { .. }
                    | EventKind::AssistantMessage { .. }
                    | EventKind::ToolStarted { .. }
                    | EventKind::ToolFinished { .. }
                    | EventKind::Notice { .. }
                    | EventKind::Checkpoint { .. } => {}
                }
                self.transcript.apply(&e.kind, parse_ts(&e.ts), e.turn);
                actions
            }
        }
    }

    fn flush_queue(&mut self) -> Vec<Action> {
        match self.queued.take() {
            Some(text) => self.submit(text),
            None => Vec::new(),
        }
    }

    fn submit(&mut self, text: String) -> Vec<Action> {
        let request_id = rid("tui");
        self.our_requests.insert(request_id.clone());
        self.sending = Some(text.clone());
        self.scroll = Scroll::Follow;
        vec![Action::Submit { request_id, text }]
    }

    // ------------------------------------------------------------------ input

    /// Handle a bracketed paste.
    pub fn handle_paste(&mut self, text: &str) -> Vec<Action> {
        if let Some(p) = self.prompts.front_mut() {
            match p {
                PromptModal::Secret { input, .. } | PromptModal::Keyboard { input, .. } => {
                    input.push_str(text.trim_end_matches(['\r', '\n']));
                }
                PromptModal::HostKey { .. } | PromptModal::Upgrade { .. } => {}
            }
            return Vec::new();
        }
        if self.modal_open() {
            return Vec::new();
        }
        self.composer.insert(text);
        self.refresh_completion()
    }

    /// Handle the mouse (wheel scrolling).
    pub fn handle_mouse(&mut self, ev: MouseEvent) -> Vec<Action> {
        match ev.kind {
            MouseEventKind::ScrollUp => self.scroll_by(-3),
            MouseEventKind::ScrollDown => self.scroll_by(3),
            _ => {}
        }
        Vec::new()
    }

    fn scroll_by(&mut self, rows: isize) {
        let (w, h) = self.view.get();
        let ctx = self.layout_ctx(w as usize);
        self.scroll = if rows < 0 {
            self.transcript
                .scroll_up(&ctx, h as usize, self.scroll, rows.unsigned_abs())
        } else {
            self.transcript
                .scroll_down(&ctx, h as usize, self.scroll, rows as usize)
        };
    }

    /// Handle a key press.
    pub fn handle_key(&mut self, key: KeyEvent) -> Vec<Action> {
        if key.kind == KeyEventKind::Release {
            return Vec::new();
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if !self.prompts.is_empty() {
            return self.prompt_key(key);
        }
        if ctrl && key.code == KeyCode::Char('c') {
            return self.ctrl_c();
        }
        let max_scroll = self.overlay_max_scroll.get();
        if let Some(Overlay::Help { scroll } | Overlay::Mcp { scroll, .. }) = self.overlay.as_mut()
        {
            match key.code {
                KeyCode::PageUp => {
                    *scroll = (*scroll).min(max_scroll).saturating_sub(10);
                    return Vec::new();
                }
                KeyCode::PageDown => {
                    *scroll = (*scroll + 10).min(max_scroll);
                    return Vec::new();
                }
                _ => {}
            }
        }
        // Transcript and global keys that work under overlays too.
        let (_, h) = self.view.get();
        let page = (h as isize - 2).max(1);
        match key.code {
            KeyCode::PageUp => {
                self.scroll_by(-page);
                return Vec::new();
            }
            KeyCode::PageDown => {
                self.scroll_by(page);
                return Vec::new();
            }
            KeyCode::Home if ctrl || (self.composer.is_empty() && !self.modal_open()) => {
                self.scroll = Scroll::Anchor { entry: 0, line: 0 };
                return Vec::new();
            }
            KeyCode::End if ctrl || (self.composer.is_empty() && !self.modal_open()) => {
                self.scroll = Scroll::Follow;
                return Vec::new();
            }
            KeyCode::F(5) => {
                self.set_hint("reconnecting now");
                return vec![Action::RetryNow];
            }
            KeyCode::Char('r') if ctrl => {
                self.show_reasoning = !self.show_reasoning;
                return Vec::new();
            }
            KeyCode::Char('y') if ctrl => return self.copy(false),
            _ => {}
        }
        if self.active_approval().is_some() {
            return self.approval_key(key);
        }
        if self.overlay.is_some() {
            return self.overlay_key(key);
        }
        if self.progress.active {
            return Vec::new();
        }
        self.composer_key(key)
    }

    fn ctrl_c(&mut self) -> Vec<Action> {
        let now = self.mono_ms;
        let double = self.last_ctrl_c.map(|t| now - t <= 2000).unwrap_or(false);
        self.last_ctrl_c = Some(now);
        if double {
            self.quit = true;
            return vec![Action::Quit];
        }
        if self.completion.is_some() {
            self.dismiss_completion();
            self.set_hint("Ctrl-C again to quit");
            return Vec::new();
        }
        if self.overlay.is_some() {
            self.overlay = None;
            self.set_hint("Ctrl-C again to quit");
            return Vec::new();
        }
        if self.turn_busy() && self.role != Some(ClientRole::Spectator) {
            self.set_hint("cancelling the turn… (Ctrl-C again to quit)");
            return vec![Action::Cancel {
                request_id: rid("cancel"),
            }];
        }
        if !self.composer.is_empty() {
            self.composer.clear();
            self.set_hint("input cleared (Ctrl-C again to quit)");
            return Vec::new();
        }
        self.set_hint("press Ctrl-C again to quit");
        Vec::new()
    }

    fn prompt_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let Some(p) = self.prompts.front_mut() else {
            return Vec::new();
        };
        let mut done = false;
        match p {
            PromptModal::HostKey { question, reply } => {
                let can_accept = question.status == HostKeyStatus::Unknown && reply.is_some();
                let answer = match key.code {
                    KeyCode::Char('y') | KeyCode::Char('1') if can_accept => {
                        Some(HostKeyAnswer::AcceptAndSave)
                    }
                    KeyCode::Char('o') | KeyCode::Char('2') if can_accept => {
                        Some(HostKeyAnswer::AcceptOnce)
                    }
                    KeyCode::Char('n') | KeyCode::Char('3') | KeyCode::Esc => {
                        Some(HostKeyAnswer::Reject)
                    }
                    KeyCode::Char('c') if ctrl => Some(HostKeyAnswer::Reject),
                    KeyCode::Enter if !can_accept => Some(HostKeyAnswer::Reject),
                    _ => None,
                };
                if let Some(a) = answer {
                    if let Some(r) = reply.take() {
                        let _ = r.send(a);
                    }
                    done = true;
                }
            }
            PromptModal::Secret { input, reply, .. } => match key.code {
                KeyCode::Enter => {
                    if let Some(r) = reply.take() {
                        let _ = r.send(Some(Zeroizing::new(std::mem::take(&mut **input))));
                    }
                    done = true;
                }
                KeyCode::Esc => {
                    if let Some(r) = reply.take() {
                        let _ = r.send(None);
                    }
                    done = true;
                }
                KeyCode::Char('c') if ctrl => {
                    if let Some(r) = reply.take() {
                        let _ = r.send(None);
                    }
                    done = true;
                }
                KeyCode::Char('u') if ctrl => input.clear(),
                KeyCode::Backspace => {
                    input.pop();
                }
                KeyCode::Char(c) if !ctrl => input.push(c),
                _ => {}
            },
            PromptModal::Keyboard {
                round,
                answers,
                input,
                reply,
            } => match key.code {
                KeyCode::Enter => {
                    answers.push(Zeroizing::new(std::mem::take(&mut **input)));
                    if answers.len() >= round.prompts.len() {
                        if let Some(r) = reply.take() {
                            let _ = r.send(Some(std::mem::take(answers)));
                        }
                        done = true;
                    }
                }
                KeyCode::Esc => {
                    if let Some(r) = reply.take() {
                        let _ = r.send(None);
                    }
                    done = true;
                }
                KeyCode::Char('c') if ctrl => {
                    if let Some(r) = reply.take() {
                        let _ = r.send(None);
                    }
                    done = true;
                }
                KeyCode::Char('u') if ctrl => input.clear(),
                KeyCode::Backspace => {
                    input.pop();
                }
                KeyCode::Char(c) if !ctrl => input.push(c),
                _ => {}
            },
            PromptModal::Upgrade { reply, .. } => {
                let answer = match key.code {
                    KeyCode::Char('1') | KeyCode::Char('u') => Some(UpgradeAnswer::UpgradeNow),
                    KeyCode::Char('2') | KeyCode::Char('r') => Some(UpgradeAnswer::AttachReadOnly),
                    KeyCode::Char('3') | KeyCode::Char('w') => Some(UpgradeAnswer::Wait),
                    KeyCode::Char('q') | KeyCode::Esc => Some(UpgradeAnswer::Refuse),
                    KeyCode::Char('c') if ctrl => Some(UpgradeAnswer::Refuse),
                    _ => None,
                };
                if let Some(a) = answer {
                    if let Some(r) = reply.take() {
                        let _ = r.send(a);
                    }
                    done = true;
                }
            }
        }
        if done {
            self.prompts.pop_front();
        }
        Vec::new()
    }

    fn approval_key(&mut self, key: KeyEvent) -> Vec<Action> {
        const ORDER: [ApprovalDecision; 4] = [
            ApprovalDecision::AllowOnce,
            ApprovalDecision::AllowSession,
            ApprovalDecision::AllowAlways,
            ApprovalDecision::Deny,
        ];
        let decision = match key.code {
            KeyCode::Char('1') | KeyCode::Char('y') => Some(ApprovalDecision::AllowOnce),
            KeyCode::Char('2') | KeyCode::Char('s') => Some(ApprovalDecision::AllowSession),
            KeyCode::Char('3') | KeyCode::Char('a') => Some(ApprovalDecision::AllowAlways),
            KeyCode::Char('4') | KeyCode::Char('n') => Some(ApprovalDecision::Deny),
            KeyCode::Up => {
                self.approval_sel = self.approval_sel.saturating_sub(1);
                None
            }
            KeyCode::Down | KeyCode::Tab => {
                self.approval_sel = (self.approval_sel + 1).min(ORDER.len() - 1);
                None
            }
            KeyCode::Enter => ORDER.get(self.approval_sel).copied(),
            _ => None,
        };
        let Some(decision) = decision else {
            return Vec::new();
        };
        let Some(a) = self.approvals.pop_front() else {
            return Vec::new();
        };
        self.answered.insert(a.approval_id.clone());
        self.approval_sel = 0;
        vec![Action::Approve {
            request_id: rid("approve"),
            approval_id: a.approval_id,
            decision,
        }]
    }

    fn overlay_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let max_scroll = self.overlay_max_scroll.get();
        let Some(ov) = self.overlay.as_mut() else {
            return Vec::new();
        };
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => {
                self.overlay = None;
                return Vec::new();
            }
            _ => {}
        }
        match ov {
            Overlay::Help { scroll } => {
                match key.code {
                    KeyCode::Up | KeyCode::Char('k') => {
                        *scroll = (*scroll).min(max_scroll).saturating_sub(1)
                    }
                    KeyCode::Down | KeyCode::Char('j') => *scroll = (*scroll + 1).min(max_scroll),
                    KeyCode::Enter => self.overlay = None,
                    _ => {}
                }
                Vec::new()
            }
            Overlay::Status => {
                if key.code == KeyCode::Enter {
                    self.overlay = None;
                }
                Vec::new()
            }
            Overlay::Mcp { scroll, .. } => {
                match key.code {
                    KeyCode::Up | KeyCode::Char('k') => {
                        *scroll = (*scroll).min(max_scroll).saturating_sub(1)
                    }
                    KeyCode::Down | KeyCode::Char('j') => *scroll = (*scroll + 1).min(max_scroll),
                    KeyCode::Enter => self.overlay = None,
                    KeyCode::Char('r') => {
                        self.overlay_max_scroll.set(usize::MAX);
                        self.overlay = Some(Overlay::Mcp {
                            list: None,
                            error: None,
                            scroll: 0,
                        });
                        return vec![Action::McpStatus];
                    }
                    _ => {}
                }
                Vec::new()
            }
            Overlay::Sessions { list, sel } => {
                let n = list.as_ref().map(Vec::len).unwrap_or(0);
                match key.code {
                    KeyCode::Up => *sel = sel.saturating_sub(1),
                    KeyCode::Down => *sel = (*sel + 1).min(n.saturating_sub(1)),
                    KeyCode::Enter => {
                        let id = list
                            .as_ref()
                            .and_then(|l| l.get(*sel))
                            .map(|s| s.id.clone());
                        self.overlay = None;
                        if let Some(id) = id {
                            return self.switch_session(Some(id), false);
                        }
                    }
                    _ => {}
                }
                Vec::new()
            }
            Overlay::Models { sel } => {
                let n = self.settings.models.len();
                match key.code {
                    KeyCode::Up => *sel = sel.saturating_sub(1),
                    KeyCode::Down => *sel = (*sel + 1).min(n.saturating_sub(1)),
                    KeyCode::Enter => {
                        let m = self.settings.models.get(*sel).cloned();
                        self.overlay = None;
                        if let Some(m) = m {
                            return self.set_model(m);
                        }
                    }
                    _ => {}
                }
                Vec::new()
            }
        }
    }

    fn switch_session(&mut self, session: Option<String>, new: bool) -> Vec<Action> {
        self.transcript.clear();
        self.scroll = Scroll::Follow;
        self.session = None;
        self.last_seq = 0;
        self.totals = Totals::default();
        self.approvals.clear();
        self.turn_state = TurnState::Idle;
        self.turn_started = None;
        let p = OpenParams {
            session,
            new,
            since: 0,
            takeover: false,
            model: self.model.clone(),
        };
        self.open_pending = Some(p.clone());
        vec![Action::OpenSession(p)]
    }

    fn rewind_command(&mut self, arg: &str) -> Vec<Action> {
        let mut to_turn = None;
        let mut scope = RewindScope::Both;
        let mut dry_run = false;
        let mut bad = None;
        for word in arg.split_whitespace() {
            match word {
                "code" | "files" => scope = RewindScope::Code,
                "conversation" | "conv" | "chat" => scope = RewindScope::Conversation,
                "both" | "all" => scope = RewindScope::Both,
                "dry" | "dry-run" | "--dry-run" => dry_run = true,
                n => match n.parse::<u64>() {
                    Ok(n) if n > 0 => to_turn = Some(n),
                    _ => bad = Some(n.to_string()),
                },
            }
        }
        if self.role == Some(ClientRole::Spectator) {
            self.set_hint("read-only spectator: /takeover to drive this session");
            return Vec::new();
        }
        match (to_turn, bad) {
            (Some(to_turn), None) => vec![Action::Rewind {
                request_id: rid("rewind"),
                to_turn,
                scope,
                dry_run,
            }],
            (_, bad) => {
                let turns = self.transcript.user_turns();
                let mut text = String::new();
                if let Some(b) = bad {
                    text.push_str(&format!("/rewind: `{b}` is not a turn number or scope\n"));
                }
                text.push_str(
                    "usage: /rewind N [code|conversation|both] [dry] — restore to just before turn N",
                );
                let start = turns.len().saturating_sub(10);
                for (n, first) in &turns[start..] {
                    text.push_str(&format!("\n  turn {n}: {first}"));
                }
                self.transcript.notice(text, Level::Info);
                Vec::new()
            }
        }
    }

    fn set_model(&mut self, model: String) -> Vec<Action> {
        self.model = Some(model.clone());
        self.transcript.notice(
            format!("model: {model} (from the next request)"),
            Level::Info,
        );
        // Re-opening the same session hands the daemon the new settings.
        match &self.session {
            Some(s) => vec![Action::OpenSession(OpenParams {
                session: Some(s.clone()),
                new: false,
                since: self.last_seq,
                takeover: false,
                model: Some(model),
            })],
            None => Vec::new(),
        }
    }

    fn copy(&mut self, code: bool) -> Vec<Action> {
        let text = if code {
            self.transcript.last_code_block()
        } else {
            self.transcript.last_answer()
        };
        match text {
            Some(t) => {
                self.set_hint(format!(
                    "copied {} {} to the clipboard (OSC 52)",
                    t.chars().count(),
                    if code { "chars of code" } else { "chars" }
                ));
                vec![Action::Copy(t)]
            }
            None => {
                self.set_hint(if code {
                    "no code block to copy"
                } else {
                    "no answer to copy yet"
                });
                Vec::new()
            }
        }
    }

    fn composer_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        // Keys the completion popup takes.
        if self.completion.is_some() {
            match key.code {
                KeyCode::Up => {
                    if let Some(c) = self.completion.as_mut() {
                        c.sel = c.sel.saturating_sub(1);
                    }
                    return Vec::new();
                }
                KeyCode::Down => {
                    if let Some(c) = self.completion.as_mut() {
                        c.sel = (c.sel + 1).min(c.items.len().saturating_sub(1));
                    }
                    return Vec::new();
                }
                KeyCode::Tab => return self.accept_completion(false),
                KeyCode::Enter if !shift && !alt => return self.accept_completion(true),
                KeyCode::Esc => {
                    self.dismiss_completion();
                    return Vec::new();
                }
                _ => {}
            }
        }
        match key.code {
            KeyCode::Enter if shift || alt => self.composer.insert("\n"),
            KeyCode::Char('j') if ctrl => self.composer.insert("\n"),
            KeyCode::Enter => return self.send(),
            KeyCode::Char('d') if ctrl => {
                if self.composer.is_empty() {
                    self.quit = true;
                    return vec![Action::Quit];
                }
                self.composer.delete();
            }
            KeyCode::Char('a') if ctrl => self.composer.home(),
            KeyCode::Char('e') if ctrl => self.composer.end(),
            KeyCode::Char('u') if ctrl => self.composer.kill_to_start(),
            KeyCode::Char('k') if ctrl => self.composer.kill_to_end(),
            KeyCode::Char('w') if ctrl => self.composer.delete_word(),
            KeyCode::Char('l') if ctrl => return Vec::new(),
            KeyCode::Char('b') if alt => self.composer.word_left(),
            KeyCode::Char('f') if alt => self.composer.word_right(),
            KeyCode::Backspace if alt || ctrl => self.composer.delete_word(),
            KeyCode::Left if alt || ctrl => self.composer.word_left(),
            KeyCode::Right if alt || ctrl => self.composer.word_right(),
            KeyCode::Char(c) if !ctrl => {
                let mut buf = [0u8; 4];
                self.composer.insert(c.encode_utf8(&mut buf));
            }
            KeyCode::Backspace => self.composer.backspace(),
            KeyCode::Delete => self.composer.delete(),
            KeyCode::Left => self.composer.left(),
            KeyCode::Right => self.composer.right(),
            KeyCode::Home => self.composer.home(),
            KeyCode::End => self.composer.end(),
            KeyCode::Up => self.composer.up(),
            KeyCode::Down => self.composer.down(),
            KeyCode::Tab => {}
            KeyCode::Esc => self.scroll = Scroll::Follow,
            _ => {}
        }
        self.refresh_completion()
    }

    fn send(&mut self) -> Vec<Action> {
        let mut text = self.composer.text().trim_end().to_string();
        if text.trim().is_empty() {
            return Vec::new();
        }
        if let Some(cmd) = text.strip_prefix('/') {
            let name = cmd.split_whitespace().next().unwrap_or("");
            // `//text` sends `/text`; a first word like `/usr/bin/env` is a path, not a
            // command.
            if let Some(rest) = cmd.strip_prefix('/') {
                text = format!("/{rest}");
            } else if !name.contains('/') {
                self.composer.take();
                self.completion = None;
                return self.command(cmd.trim());
            }
        }
        if self.role == Some(ClientRole::Spectator) {
            self.set_hint("read-only spectator: /takeover to drive this session");
            return Vec::new();
        }
        self.composer.take();
        self.completion = None;
        let no_session = self.session.is_none() || self.open_pending.is_some();
        if no_session || self.turn_busy() || self.sending.is_some() {
            let q = match self.queued.take() {
                Some(prev) => format!("{prev}\n\n{text}"),
                None => text,
            };
            self.queued = Some(q);
            self.set_hint(if no_session {
                "queued: sent as soon as the session is open"
            } else {
                "queued: sent when the current turn finishes"
            });
            return Vec::new();
        }
        self.submit(text)
    }

    /// Run a slash command (without the leading `/`).
    fn command(&mut self, line: &str) -> Vec<Action> {
        let (name, arg) = match line.split_once(char::is_whitespace) {
            Some((n, a)) => (n, a.trim()),
            None => (line, ""),
        };
        match name {
            "help" | "?" => {
                self.overlay_max_scroll.set(usize::MAX);
                self.overlay = Some(Overlay::Help { scroll: 0 });
                Vec::new()
            }
            "new" => self.switch_session(None, true),
            "sessions" | "resume" => {
                self.overlay = Some(Overlay::Sessions { list: None, sel: 0 });
                vec![Action::ListSessions]
            }
            "model" => {
                if !arg.is_empty() {
                    return self.set_model(arg.to_string());
                }
                let sel = self
                    .model
                    .as_ref()
                    .and_then(|m| self.settings.models.iter().position(|x| x == m))
                    .unwrap_or(0);
                self.overlay = Some(Overlay::Models { sel });
                Vec::new()
            }
            "status" => {
                self.overlay = Some(Overlay::Status);
                vec![Action::Status]
            }
            "clear" => {
                self.transcript.clear();
                self.scroll = Scroll::Follow;
                Vec::new()
            }
            "continue" => {
                if self.turn_state != TurnState::Paused {
                    self.set_hint("nothing to continue: no turn is paused");
                    return Vec::new();
                }
                vec![Action::ContinueTurn {
                    request_id: rid("continue"),
                }]
            }
            "takeover" => {
                if self.role == Some(ClientRole::Driver) {
                    self.set_hint("you already drive this session");
                    return Vec::new();
                }
                vec![Action::Takeover]
            }
            "copy" => self.copy(arg == "code"),
            "output" => {
                let n = match super::fullout::parse_nth(arg) {
                    Ok(n) => n,
                    Err(e) => {
                        self.set_hint(e);
                        return Vec::new();
                    }
                };
                match self.transcript.nth_tool_output(n) {
                    Some((tool, inline, full)) => {
                        self.set_hint(format!("saving the output of {tool}…"));
                        vec![Action::SaveOutput(super::fullout::OutputRequest {
                            tool,
                            inline,
                            full,
                        })]
                    }
                    None => {
                        self.set_hint("no finished tool call to save the output of");
                        Vec::new()
                    }
                }
            }
            "reconnect" => {
                self.set_hint("reconnecting now");
                vec![Action::RetryNow]
            }
            "quit" | "exit" | "q" => {
                self.quit = true;
                vec![Action::Quit]
            }
            "rewind" => self.rewind_command(arg),
            "mcp" => {
                self.overlay_max_scroll.set(usize::MAX);
                self.overlay = Some(Overlay::Mcp {
                    list: None,
                    error: None,
                    scroll: 0,
                });
                vec![Action::McpStatus]
            }
            "compact" => {
                self.transcript.notice(
                    format!("/{name} is not available yet in this build"),
                    Level::Warn,
                );
                Vec::new()
            }
            other => {
                self.set_hint(format!("unknown command /{other}; /help lists them"));
                Vec::new()
            }
        }
    }

    // ------------------------------------------------------------------ completion

    fn dismiss_completion(&mut self) {
        self.completion = None;
        self.completion_dismissed = Some(self.composer.text().to_string());
    }

    /// The `@path` token around the cursor: (byte range of the token, text after `@` up to the
    /// cursor).
    fn path_token(&self) -> Option<(Range<usize>, String)> {
        let text = self.composer.text();
        let cur = self.composer.cursor();
        let start = text[..cur]
            .rfind(char::is_whitespace)
            .map(|i| i + 1)
            .unwrap_or(0);
        let tok = &text[start..cur];
        let partial = tok.strip_prefix('@')?;
        let end = text[cur..]
            .find(char::is_whitespace)
            .map(|i| cur + i)
            .unwrap_or(text.len());
        Some((start..end, partial.to_string()))
    }

    /// Recompute the popup after the composer changed; may ask for a directory listing.
    fn refresh_completion(&mut self) -> Vec<Action> {
        if self.completion_dismissed.as_deref() == Some(self.composer.text()) {
            self.completion = None;
            return Vec::new();
        }
        self.completion_dismissed = None;
        let text = self.composer.text().to_string();
        let cur = self.composer.cursor();
        let prev_sel = self.completion.as_ref().map(|c| c.sel).unwrap_or(0);
        // Slash commands: only while the cursor is in the first word.
        if let Some(rest) = text.strip_prefix('/') {
            if !text[..cur].contains(char::is_whitespace) {
                let prefix = &rest[..cur.saturating_sub(1).min(rest.len())];
                let items: Vec<CompItem> = COMMANDS
                    .iter()
                    .filter(|(n, _, _)| n.starts_with(prefix))
                    .map(|(n, a, d)| CompItem {
                        label: if a.is_empty() {
                            format!("/{n}")
                        } else {
                            format!("/{n} {a}")
                        },
                        detail: d.to_string(),
                        is_dir: false,
                    })
                    .collect();
                let end = text.find(char::is_whitespace).unwrap_or(text.len());
                self.completion = (!items.is_empty()).then(|| Completion {
                    kind: CompKind::Slash,
                    sel: prev_sel.min(items.len().saturating_sub(1)),
                    items,
                    range: 0..end,
                    loading: false,
                });
                return Vec::new();
            }
        }
        let Some((range, partial)) = self.path_token() else {
            self.completion = None;
            return Vec::new();
        };
        let (dir, prefix) = match partial.rfind('/') {
            Some(i) => (partial[..i].to_string(), partial[i + 1..].to_string()),
            None => (String::new(), partial.clone()),
        };
        let mut actions = Vec::new();
        let (items, loading) = match self.dir_cache.get(&dir) {
            Some(entries) => {
                let lower = prefix.to_lowercase();
                let mut items: Vec<CompItem> = entries
                    .iter()
                    .filter(|e| prefix.starts_with('.') || !e.name.starts_with('.'))
                    .filter(|e| e.name.to_lowercase().starts_with(&lower))
                    .map(|e| CompItem {
                        label: if e.is_dir {
                            format!("{}/", e.name)
                        } else {
                            e.name.clone()
                        },
                        detail: if e.is_dir {
                            "dir".into()
                        } else {
                            String::new()
                        },
                        is_dir: e.is_dir,
                    })
                    .collect();
                // Folders first, like a file picker.
                items.sort_by(|a, b| b.is_dir.cmp(&a.is_dir).then(a.label.cmp(&b.label)));
                items.truncate(200);
                (items, false)
            }
            None => {
                if self.dir_pending.insert(dir.clone()) {
                    actions.push(Action::ListDir { path: dir.clone() });
                }
                (Vec::new(), true)
            }
        };
        if items.is_empty() && !loading {
            self.completion = None;
            return actions;
        }
        let same_dir = matches!(&self.completion, Some(Completion { kind: CompKind::Path { dir: d }, .. }) if *d == dir);
        self.completion = Some(Completion {
            kind: CompKind::Path { dir },
            sel: if same_dir {
                prev_sel.min(items.len().saturating_sub(1))
            } else {
                0
            },
            items,
            range,
            loading,
        });
        actions
    }

    fn accept_completion(&mut self, enter: bool) -> Vec<Action> {
        let Some(c) = self.completion.clone() else {
            return Vec::new();
        };
        let Some(item) = c.items.get(c.sel).cloned() else {
            // Still loading: Enter sends as typed.
            self.completion = None;
            return if enter { self.send() } else { Vec::new() };
        };
        match &c.kind {
            CompKind::Slash => {
                let name = item
                    .label
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .to_string();
                if enter {
                    self.composer.take();
                    self.completion = None;
                    return self.command(name.trim_start_matches('/'));
                }
                self.composer
                    .replace_range(c.range.clone(), &format!("{name} "));
                self.completion = None;
                self.completion_dismissed = Some(self.composer.text().to_string());
                Vec::new()
            }
            CompKind::Path { dir } => {
                let path = if dir.is_empty() {
                    item.label.clone()
                } else {
                    format!("{dir}/{}", item.label)
                };
                let insert = if item.is_dir {
                    format!("@{path}")
                } else {
                    format!("@{path} ")
                };
                self.composer.replace_range(c.range.clone(), &insert);
                self.completion = None;
                // A folder lists its own entries next (one level per keystroke).
                self.refresh_completion()
            }
        }
    }
}
