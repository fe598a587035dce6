//! Wire types shared by `reasonix` (laptop) and `reasonix-remote` (host).
//!
//! Every message that crosses the link is defined here and nowhere else, so the two binaries
//! cannot drift. Messages are serialised as JSON inside length-prefixed frames (see
//! [`crate::frame`]); the enums are internally tagged so unknown variants fail loudly.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::content::{ContentChunk, ContentRef};
pub use crate::goal::{GoalAction, GoalBudgets, GoalEvent, GoalReport, GoalStatus, GoalSummary};
pub use crate::plan::{PlanAction, PlanDecision, PlanEvent};
pub use crate::policy::{
    BashSandbox, Ignored, McpRunOn, McpServerSpec, PermissionMode, Rule, Rules, SandboxPolicy,
    SessionPolicy, Timeouts,
};
use crate::proto_serde::tagged_enum;
pub use crate::pty::{
    PtyBytes, PtyData, PtyInfo, PtyNotification, PtyOpen, PtyRequest, PtyResponse, PtySize,
};

/// Version of the link protocol. Bumped on any incompatible change to frames or messages.
pub const PROTOCOL_VERSION: u32 = 2;

/// Magic prefix of the preamble line written by the host before any frame.
pub const PREAMBLE_MAGIC: &str = "REASONIX-LINK/2";

/// First control message, sent by the client right after the preamble.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// Link protocol version the client speaks.
    pub protocol: u32,
    /// Build id of the client binary.
    pub build_id: String,
    /// Random id of the client process (stable across reconnects of that process).
    pub client_id: String,
    /// Present when the client wants to resume an existing link after a transport drop.
    pub resume: Option<ResumeRequest>,
    /// The client reads `Bytes` frames (channel bytes without JSON, [`crate::payload`]).
    /// Absent (false) from clients that predate them: the daemon then sends JSON only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bytes_frames: bool,
    /// The client takes channel data before it answered the open, and may send such data on
    /// the channels it opens ([`crate::channel::EARLY_WINDOW`]). Absent (false) from clients
    /// that predate it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub early_data: bool,
}

/// Resume part of a [`Hello`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeRequest {
    /// Link id the daemon handed out in its first [`Welcome`].
    pub link_id: String,
    /// Highest data `seq` the client has received from the daemon.
    pub received: u64,
}

/// Answer to a [`Hello`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    /// Link protocol version the daemon speaks.
    pub protocol: u32,
    /// Build id of the daemon binary.
    pub build_id: String,
    /// Id of this link (new or resumed).
    pub link_id: String,
    /// True when the requested link was found and resumed; false when a fresh link was made
    /// (the client must then re-open its session and catch up from the journal).
    pub resumed: bool,
    /// Highest data `seq` the daemon has received from the client (0 on a fresh link).
    pub received: u64,
    /// Why a requested resume was not possible, if it was not.
    pub resume_refused: Option<String>,
    /// The daemon reads `Bytes` frames ([`crate::payload`]); absent (false) from daemons
    /// that predate them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bytes_frames: bool,
    /// The daemon takes channel data before it answered the open, and may send such data on
    /// the channels it opens ([`crate::channel::EARLY_WINDOW`]); absent (false) from
    /// daemons that predate it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub early_data: bool,
}

tagged_enum! {
    EnvelopeDe, "t";
    /// The payload of every data frame: requests, responses and notifications multiplexed on
    /// the one ordered sequence.
    #[derive(Debug, Clone, PartialEq, Serialize)]
    #[serde(tag = "t", rename_all = "snake_case")]
    pub enum Envelope {
        /// A request expecting exactly one [`Envelope::Response`] with the same id.
        Request {
            /// Id unique per sender and link.
            id: u64,
            /// The request body.
            body: Request,
        },
        /// The answer to a request.
        Response {
            /// Id of the request answered.
            id: u64,
            /// Result or error.
            result: Result<Response, RpcError>,
        },
        /// A fire-and-forget message.
        Notify {
            /// The notification body.
            body: Notification,
        },
        /// A message of a channel (see [`crate::channel`]).
        Channel(crate::channel::ChannelMsg),
    }
}

/// An error answer to a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcError {
    /// Machine-readable code the receiver acts on.
    pub code: ErrorCode,
    /// Human-readable message that says what to do.
    pub message: String,
}

impl RpcError {
    /// Build an error with a code and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// The machine-readable code of an [`RpcError`]. On the wire it is the snake_case name
/// (`"not_found"`, `"read_only"`, ...); a code this build does not know decodes as
/// [`ErrorCode::Unknown`], so a peer's new code still reaches the caller with its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The request is malformed or not served by this side (bad id, bad size, wrong
    /// direction).
    BadRequest,
    /// The answer did not fit the request (laptop-side: an unexpected response variant).
    BadResponse,
    /// A turn or job runs; try again once it ends.
    Busy,
    /// A session to delete is open in a client with a live link.
    Attached,
    /// No such session, file, content, terminal or MCP server.
    NotFound,
    /// The thing to create (a restored session) exists already.
    Exists,
    /// This client is attached read-only; another client drives the session.
    ReadOnly,
    /// The request needs a session open on the link.
    NoSession,
    /// A steer arrived with no turn running.
    NotRunning,
    /// `Continue` arrived with no turn paused.
    NotPaused,
    /// A `!` command was refused by the policy.
    Denied,
    /// A workbench request that cannot be done in this state (empty steer, bad policy, no
    /// such approval, ...).
    Invalid,
    /// The session journal could not be written or read.
    Journal,
    /// File I/O on the answering side failed.
    Io,
    /// A path outside the workspace was asked for.
    OutsideWorkspace,
    /// The prompt history could not be read or written.
    History,
    /// A rewind was refused or failed (the message says why).
    Rewind,
    /// An `/mcp__…` prompt in a submitted turn could not be expanded.
    McpPrompt,
    /// A laptop MCP server could not be opened for the host.
    Mcp,
    /// The project file or the session policy cannot be applied.
    BadConfig,
    /// A terminal (PTY or its shell) could not start.
    Pty,
    /// The laptop does not hold the [`MessagesBase`] of a provider request; the host sends
    /// it again in full.
    UnknownMessagesBase,
    /// An unexpected failure on the answering side (a task that died, a listing that failed).
    Internal,
    /// A code this build does not know (sent by a newer peer).
    #[serde(other)]
    Unknown,
}

impl ErrorCode {
    /// The wire name (the serde form, without quotes).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::BadResponse => "bad_response",
            ErrorCode::Busy => "busy",
            ErrorCode::Attached => "attached",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Exists => "exists",
            ErrorCode::ReadOnly => "read_only",
            ErrorCode::NoSession => "no_session",
            ErrorCode::NotRunning => "not_running",
            ErrorCode::NotPaused => "not_paused",
            ErrorCode::Denied => "denied",
            ErrorCode::Invalid => "invalid",
            ErrorCode::Journal => "journal",
            ErrorCode::Io => "io",
            ErrorCode::OutsideWorkspace => "outside_workspace",
            ErrorCode::History => "history",
            ErrorCode::Rewind => "rewind",
            ErrorCode::McpPrompt => "mcp_prompt",
            ErrorCode::Mcp => "mcp",
            ErrorCode::BadConfig => "bad_config",
            ErrorCode::Pty => "pty",
            ErrorCode::UnknownMessagesBase => "unknown_messages_base",
            ErrorCode::Internal => "internal",
            ErrorCode::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

tagged_enum! {
    RequestDe, "m";
    /// Requests in either direction.
    // A request is built once and moved into its envelope and onto the wire; boxing the one big
    // variant (`OpenSession`) would only add an allocation to it.
    #[allow(clippy::large_enum_variant)]
    #[derive(Debug, Clone, PartialEq, Serialize)]
    #[serde(tag = "m", rename_all = "snake_case")]
    pub enum Request {
        // ---- client -> daemon ----
        /// Daemon status (build, uptime, sandbox, sessions).
        Status,
        /// List the sessions of this workspace, newest first.
        ListSessions,
        /// Open (attach to) a session. Answered with [`Response::SessionOpened`]; the events
        /// after `since` follow as [`Notification::Event`]s, then live events.
        OpenSession(OpenSession),
        /// Submit a user turn to the session this link has open. Deduplicated by `request_id`.
        SubmitTurn {
            /// Client-chosen id; a repeat with the same id is answered without a second turn.
            request_id: String,
            /// The user's text.
            text: String,
        },
        /// Run one subagent as a turn of the session this link has open (`reasonix subagent run
        /// PROFILE "task"`, #33): the turn's user message names the profile and the task, the
        /// host runs the `task` tool itself (`read_only_task` when `read_only`) with a call id
        /// `sub-<request_id>` (no model step of the parent), journals the child's events as
        /// [`EventKind::Subagent`] under that call, and the child's answer is the turn's answer.
        /// Deduplicated by `request_id`; an unknown profile is refused (`invalid`) naming the
        /// known ones, before any turn starts.
        RunSubagent {
            /// Client-chosen id; a repeat with the same id is answered without a second turn.
            request_id: String,
            /// A built-in profile (`general`, `explore`) or a skill's name.
            profile: String,
            /// The task: the child's first user message.
            task: String,
            /// Run the child read-only (`reasonix subagent try`).
            #[serde(default)]
            read_only: bool,
        },
        /// Cancel one running subagent of the open session (the workbench's child view): it
        /// stops, and its parent call gets it as cancelled (the turn goes on). Only the driving
        /// client may send it. Answered [`Response::Ok`] (or [`Response::Duplicate`]); the error
        /// `not_found` names the known children, or says it already ended.
        CancelSubagent {
            /// Client-chosen id for deduplication.
            request_id: String,
            /// The child's id (`sa-N`, the `child` of its [`EventKind::Subagent`] events).
            child: String,
        },
        /// Continue a turn that paused at its step limit.
        ContinueTurn {
            /// Client-chosen id for deduplication.
            request_id: String,
        },
        /// Cancel the running turn.
        Cancel {
            /// Client-chosen id for deduplication.
            request_id: String,
        },
        /// Answer an approval request.
        Approve {
            /// Client-chosen id for deduplication.
            request_id: String,
            /// Id of the approval being answered.
            approval_id: String,
            /// The decision.
            decision: ApprovalDecision,
        },
        /// Host → laptop: a current OAuth access token for the host-side MCP server `server` at
        /// `url`, for one connection (`reasonix mcp login` stored it on the laptop; refreshed
        /// there when expired). Answered with [`Response::McpToken`]; `None` when nobody signed in
        /// to that URL.
        McpToken {
            /// The server's name (for messages).
            server: String,
            /// The server's URL, as declared (the key of the laptop's token file).
            url: String,
        },
        /// Answer an MCP server's elicitation (`EventKind::ElicitationRequested`).
        AnswerElicitation {
            /// Client-chosen id for deduplication.
            request_id: String,
            /// Id of the elicitation being answered.
            elicitation_id: String,
            /// `accept`, `decline` or `cancel`.
            action: ElicitAction,
            /// With `accept`: the form's values, keyed by field name, typed per the schema.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            content: Option<serde_json::Map<String, serde_json::Value>>,
        },
        /// Take over driving the open session (the previous driver becomes read-only).
        Takeover,
        /// This client is done with the session it has open (a `run` that finished, a TUI that
        /// quits): it stops driving it before the answer, so a client that attaches right after
        /// (`run --continue` of the next turn) drives it instead of finding it still driven by
        /// a link the daemon has not yet seen close. Answered `Ok`; nothing open is `Ok` too.
        Leave,
        /// Rewind the open session (checkpoints).
        Rewind {
            /// Client-chosen id for deduplication.
            request_id: String,
            /// Turn number; state is restored to just before this turn began.
            to_turn: u64,
            /// What to restore.
            scope: RewindScope,
            /// Only report what would change.
            dry_run: bool,
        },
        /// List one directory of the workspace (for `@path` completion).
        ListDir {
            /// Path relative to the workspace root.
            path: String,
        },
        /// The MCP servers this client can use, started first so each is `ready` (with its tools)
        /// or `failed` (with the reason). Answered with [`Response::McpServers`]. With a session
        /// open: the workspace's host servers plus the session's laptop servers. Without one:
        /// the host servers plus the laptop servers named in `laptop`, each started through this
        /// link for the answer only and stopped again.
        McpStatus {
            /// Laptop-side servers to list when no session is open (names from the laptop's
            /// config); ignored when a session is open.
            #[serde(default)]
            laptop: Vec<String>,
        },
        /// Drop the connection to MCP server `server` of the open session (or, without one, of
        /// the workspace) and connect again now: after `/mcp login` or `/mcp logout` on the
        /// laptop, so an HTTP server picks up the new sign-in token (asked again by
        /// [`Request::McpToken`]) without restarting the session. A server whose tools the
        /// session did not have yet (its start failed for want of a sign-in) adds them, with a
        /// notice (the tool list is part of the prompt prefix). Answered with
        /// [`Response::McpServers`] (every server, after the reconnect); `NotFound` for an
        /// unknown name.
        McpReconnect {
            /// The server's name.
            server: String,
        },
        /// A chunk of content stored by reference (a [`ContentRef`] in an event, or the
        /// messages of a large [`ProviderRequest`]). Answered with [`Response::Content`].
        FetchContent {
            /// The content's SHA-256 (lower-case hex).
            sha256: String,
            /// First byte wanted.
            offset: u64,
            /// Bytes wanted (the answer holds at most [`crate::content::FETCH_CHUNK_MAX`]).
            len: u32,
        },
        /// Host terminals: open, list, attach, detach, close (see [`crate::pty`]).
        Pty(PtyRequest),
        // ---- #14 long sessions: `/compact` and `/context` ----
        /// Compact the open session now (`/compact [focus]`): snip old tool results and have the
        /// model summarise the older part, `focus` steering what the summary keeps. Answered
        /// with [`Response::CompactDone`] when the rewrite is journaled (or found unnecessary).
        Compact {
            /// Client-chosen id; a repeat with the same id does not compact twice.
            request_id: String,
            /// What the summary should keep above all (the text after `/compact`).
            #[serde(default)]
            focus: Option<String>,
        },
        /// The open session's context window split (`/context`). Answered with
        /// [`Response::Context`].
        ContextReport,

        // ---- steer, `!` shell and prompt history (issue 16) ----
        /// Steer the running turn of the open session: the text is journaled at once
        /// ([`EventKind::Steer`]) and given to the model as a user message before the turn's next
        /// model step ([`EventKind::SteerInjected`]). Answered with [`Response::Ok`] once the
        /// steer is on disk, or the error `not_running` when no turn runs (send a
        /// [`Request::SubmitTurn`] instead). Deduplicated by `request_id`.
        Steer {
            /// Client-chosen id for deduplication.
            request_id: String,
            /// The steering text.
            text: String,
        },
        /// Run a shell command the user typed as `!command` in the workspace, under the
        /// session's sandbox and permission policy for `bash` (a denied command is refused with
        /// the error `denied` naming the reason). Answered with [`Response::Ok`] when it finished;
        /// the result is the journaled [`EventKind::ShellRan`]. With `add_to_context`, its output
        /// joins the next user turn's message (the tail, never the system prefix).
        Shell {
            /// Client-chosen id for deduplication.
            request_id: String,
            /// The command line (without the leading `!`).
            command: String,
            /// Give the output to the model with the next turn.
            add_to_context: bool,
        },
        /// The workspace's prompt history, oldest first (shared by every client of the
        /// workspace). Answered with [`Response::History`].
        HistoryList,
        /// Add a prompt the user sent from the composer to the workspace's prompt history.
        /// Answered with [`Response::Ok`].
        HistoryAppend {
            /// The prompt as typed.
            text: String,
        },
        // ---- session management and custom commands (issue 16) ----
        /// Give a session a title (replaces the one taken from its first prompt). Stored in the
        /// session's meta file on the host, so every client lists the same title.
        RenameSession {
            /// Session id.
            session: String,
            /// The new title (one line, at most 80 characters are kept; empty restores the
            /// title taken from the first prompt).
            title: String,
        },
        /// Move a session to the workspace's trash (restorable for [`TRASH_KEEP_DAYS`] days).
        /// Refused with `busy` while a turn runs and with `attached` while a client has the
        /// session open.
        DeleteSession {
            /// Session id.
            session: String,
        },
        /// Bring a session back from the trash.
        RestoreSession {
            /// Session id.
            session: String,
        },
        /// Remove sessions from the trash for good. Answered with [`Response::Purged`].
        PurgeSessions {
            /// One trashed session, or `None` for the whole trash.
            session: Option<String>,
        },
        /// The trashed sessions of this workspace. Answered with [`Response::Trash`].
        ListTrash,
        /// The command files of the workspace (`.reasonix/commands/**/*.md` on the host), raw;
        /// the client parses them together with the laptop's own. Answered with
        /// [`Response::CommandFiles`].
        ListCommandFiles,
        /// The prompts of the MCP servers this client can use (the open session's workspace and
        /// laptop servers; without a session, the workspace's), offered as slash commands
        /// `/mcp__<server>__<prompt>`. Answered with [`Response::McpPrompts`]. The host expands
        /// such a command itself when it arrives as a [`Request::SubmitTurn`] text.
        McpPrompts,
        /// The skills a `/<name>` may run: the built-in ones, `user` (the laptop's
        /// `~/.reasonix/skills/`, sent with the request) and the workspace's
        /// `.reasonix/skills/`, parsed by the host. Answered with [`Response::Skills`].
        ListSkills {
            /// The laptop's user skills and configured model labels.
            #[serde(default)]
            skills: crate::skills::SkillSettings,
        },
        /// The first resources (`resources/list`, first page, at most
        /// [`MCP_RESOURCES_MAX`]) of MCP server `server`, for `@server:uri` completion.
        /// Answered with [`Response::McpResources`], or the error `not_found` for an unknown
        /// server.
        McpResources {
            /// Server name.
            server: String,
        },

        /// The workspace's hooks (#34): the project hook files with their SHA-256 and trust,
        /// every hook and its last run in the open session. `hooks` is the laptop's user hooks
        /// and current trust records for this workspace; a session this link drives adopts them
        /// (so `/hooks trust` applies at once). Answered with [`Response::Hooks`].
        Hooks {
            /// The user's hooks and trusted project hook files.
            #[serde(default)]
            hooks: crate::hooks::HookSettings,
        },
        /// A person's own change to (or look at) the workspace's project memory store on the
        /// host (`/memory`, `# note`, `reasonix memory --ssh`; issue 32). The global store is
        /// the laptop's and never goes through here. Answered with [`Response::Memory`], or the
        /// error `invalid` naming what was wrong (a malformed or secret-looking fact, an unknown
        /// id).
        Memory {
            /// What to do.
            op: crate::memory::ops::MemoryOp,
        },
        // ---- plan mode (issue 38 §1) ----
        /// Plan mode of the open session: enter (optionally with a task, submitted as a turn
        /// under `request_id`), leave, or answer the pending plan. Only the driving client may
        /// send it. Answered with [`Response::Ok`] (or [`Response::Duplicate`]); an `execute`
        /// or `revise` starts a turn whose [`EventKind::UserTurn`] carries `request_id`.
        Plan {
            /// Client-chosen id for deduplication (and of the turn it starts).
            request_id: String,
            /// What to do.
            #[serde(flatten)]
            action: PlanAction,
        },
        // ---- goals (issue 38 §3) ----
        /// The open session's goal: start, pause, resume, clear. Only the driving client may
        /// send it. Answered with [`Response::Ok`] (or [`Response::Duplicate`]); a start starts
        /// a turn whose [`EventKind::UserTurn`] carries `request_id`.
        Goal {
            /// Client-chosen id for deduplication (and the goal's id on a start).
            request_id: String,
            /// What to do.
            #[serde(flatten)]
            action: GoalAction,
        },
        // #36 §1 forwarded ports.
        /// The TCP ports the workspace's processes listen on now, answered with
        /// [`Response::Ports`]; afterwards this link gets a [`Notification::Ports`] whenever
        /// the list changes (until the link closes).
        WatchPorts,
        // #36 §2 ssh-agent forwarding.
        /// This laptop forwards its ssh-agent (`ForwardAgent` for the host): the daemon serves
        /// the workspace's stable `SSH_AUTH_SOCK` (made on the first offer) and sends its
        /// requests to the driving laptop that offered one. Answered with
        /// [`Response::AgentForwarding`].
        ForwardAgent(crate::agent::AgentOffer),

        // ---- daemon -> client ----
        /// The messages the session's next provider request will start with, sent when this
        /// link starts to drive a session (answered [`Response::Ok`] once stored): the first
        /// request of the link can then go by prefix too (see `reasonix_forward::prefix`).
        ProviderBase {
            /// The name later requests give it in [`MessagesBase::stream_id`].
            stream_id: String,
            /// OpenAI-format messages (the system prompt and the conversation); shared, so the
            /// daemon keeps them as its base without a copy.
            messages: std::sync::Arc<Vec<Value>>,
        },
        /// Fetch a web page with the laptop's network (the `web_fetch` tool). Answered with
        /// [`Response::WebFetch`], or an error whose message says why the laptop refused or
        /// failed (`denied`: the address rule or a deny rule; `io`: the fetch failed).
        WebFetch(WebFetchRequest),
    }
}

/// Parameters of [`Request::WebFetch`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebFetchRequest {
    /// `http://` or `https://` URL.
    pub url: String,
    /// Most bytes of body the laptop reads (it clamps to its own cap).
    pub max_bytes: u64,
}

/// A fetched page, as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebFetchReply {
    /// URL of the last request (after the redirects followed).
    pub final_url: String,
    /// HTTP status of the last response.
    pub status: u16,
    /// Its `Content-Type` (empty when it had none).
    pub content_type: String,
    /// The body as text: HTML converted to Markdown-like text, other text as is.
    pub text: String,
    /// True when the body was cut at the byte cap.
    pub truncated: bool,
    /// Redirects followed, in order (each `status URL`).
    #[serde(default)]
    pub redirects: Vec<String>,
    /// A redirect to another host that was not followed (no allow rule names that host):
    /// the model may fetch it with a new call, which the policy decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfollowed_redirect: Option<String>,
}

/// Parameters of [`Request::OpenSession`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct OpenSession {
    /// Session to attach to; `None` with `new == false` means "most recent, or a new one".
    pub session: Option<String>,
    /// Start a fresh session.
    pub new: bool,
    /// Replay journal events with `seq > since` (0 = everything).
    pub since: u64,
    /// Attach read-only even if nobody drives the session.
    pub read_only: bool,
    /// Take the driver role from another client.
    pub takeover: bool,
    /// Session settings chosen by the client (model, permission mode, ...).
    pub settings: SessionSettings,
    /// The user's hooks and the project hook files the user trusted (#34); the laptop's
    /// client fills it in for every open.
    #[serde(default, skip_serializing_if = "crate::hooks::HookSettings::is_empty")]
    pub hooks: crate::hooks::HookSettings,
    /// Attach as the laptop's goal keeper (a standby gateway, issue 38 §3): never the driver,
    /// never answers approvals, and serves the session's model requests only while no
    /// driver with a live link is attached. The host answers with the spectator role and
    /// lists the session with `keeper_attached`; a host that predates keepers ignores the
    /// field and lists `keeper_attached: false`, which tells the keeper to give up.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keeper: bool,
}

/// Settings a driving client hands to its session. Every open (and every takeover) replaces
/// the previous driver's settings as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SessionSettings {
    /// Model label as the user chose it (the gateway resolves it).
    pub model: Option<String>,
    /// Headless client: an `ask` decision is answered with a denial the model can read.
    pub headless: bool,
    /// Maximum model steps per turn before the turn pauses.
    pub max_steps: Option<u32>,
    /// The security policy from the laptop's trusted layers (defaults, user config, flags,
    /// and in local mode the project file already tightened in). The host applies the
    /// workspace's `reasonix.toml` on top with [`crate::policy::tighten`] and enforces the
    /// result.
    pub policy: SessionPolicy,
    /// MCP servers that run on the laptop and are tunnelled over the link (names).
    #[serde(default)]
    pub laptop_mcp: Vec<String>,
    /// The model's context window and the compaction ladder (from the laptop's provider
    /// config); absent or `window = 0`: the host never rewrites the history.
    #[serde(default)]
    pub context: ContextSettings,
    /// How hard the model reasons (`/effort`, `--effort`, `[agent] effort`, the model's
    /// default), already checked against what the model supports; `None` leaves it to the
    /// provider. Copied into every [`ProviderRequest`]: a request parameter, never part of
    /// the conversation, so changing it keeps the message prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<ReasoningEffort>,
    /// Memory of this session (`docs/MEMORY.md`): the laptop's global facts, for recall only
    /// (the host keeps them in memory and never writes them to its disk), and whether a
    /// headless run may write memory without asking.
    #[serde(default, skip_serializing_if = "MemorySettings::is_empty")]
    pub memory: MemorySettings,
    /// `[agent] planner_model` (issue 38 §2): the model label of the planner beside the
    /// executor (`model`), already checked on the laptop (it resolves and has a key). With
    /// it, the host routes every user turn (`docs/SPEC.md`, "Planner and executor").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planner_model: Option<String>,
    /// Skills of this session (`docs/SPEC.md`, "Skills"): the user's skills from the laptop
    /// (kept in the host's memory, never on its disk) and the model labels the user
    /// configured. Boxed: most messages carry none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<Box<crate::skills::SkillSettings>>,
    /// Subagent limits (`[agent] max_subagent_depth`, `max_subagents`,
    /// `max_subagent_writers`); absent: the defaults (2, 6, 3).
    #[serde(default, skip_serializing_if = "DelegationSettings::is_default")]
    pub delegation: DelegationSettings,
}

/// Limits on subagents (#33): how deep children nest, how many of one conversation run at
/// once, and how many of those may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DelegationSettings {
    /// Deepest child (the main conversation is depth 0; its children depth 1).
    pub max_depth: u32,
    /// Children of one conversation running at once.
    pub max_children: u32,
    /// Writing children of one conversation running at once.
    pub max_writers: u32,
}

impl Default for DelegationSettings {
    fn default() -> Self {
        DelegationSettings {
            max_depth: 2,
            max_children: 6,
            max_writers: 3,
        }
    }
}

impl DelegationSettings {
    /// True for the defaults (not sent).
    pub fn is_default(&self) -> bool {
        *self == DelegationSettings::default()
    }
}

/// What a driving client sends about memory with every session open.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct MemorySettings {
    /// The user's global fact files (`~/.reasonix/memory/*.md`) as read on the laptop; the
    /// host parses them with the same hostile-file rules as its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub global: Vec<MemoryFile>,
    /// `reasonix run --allow-memory-writes`: a headless run may write memory that would
    /// otherwise need the user's approval.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_writes: bool,
}

impl MemorySettings {
    /// True when there is nothing to send.
    pub fn is_empty(&self) -> bool {
        self.global.is_empty() && !self.allow_writes
    }
}

// Debug without the facts' text: settings are logged, global facts must not reach host logs.
impl std::fmt::Debug for MemorySettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemorySettings")
            .field("global_files", &self.global.len())
            .field("allow_writes", &self.allow_writes)
            .finish()
    }
}

/// One fact file sent over the link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryFile {
    /// The file name (`<id>.md`).
    pub name: String,
    /// Its text.
    pub text: String,
}

/// A reasoning-effort level. The gateway maps it per wire format: `reasoning_effort` on
/// OpenAI-compatible chat completions, a thinking budget on the Anthropic Messages API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    /// Think briefly.
    Low,
    /// The middle level.
    Medium,
    /// Think hard.
    High,
    /// The most the model offers.
    Max,
}

impl ReasoningEffort {
    /// Every level, lowest first.
    pub const ALL: [ReasoningEffort; 4] = [Self::Low, Self::Medium, Self::High, Self::Max];

    /// The name as typed and shown (`low`, `medium`, `high`, `max`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Max => "max",
        }
    }

    /// Parse a level name (case-insensitive).
    pub fn parse(s: &str) -> Option<ReasoningEffort> {
        Self::ALL
            .into_iter()
            .find(|e| e.as_str().eq_ignore_ascii_case(s.trim()))
    }
}

impl std::fmt::Display for ReasoningEffort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The context window of the session's model and the thresholds of the compaction ladder.
/// Ratios are fractions of the window in thousandths (integers keep the settings `Eq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContextSettings {
    /// Context window in tokens; 0 disables compaction.
    pub window: u64,
    /// From this fraction (‰) old tool results outside the tail are snipped (default 600).
    pub snip_permille: u32,
    /// From this fraction (‰) the old middle is summarised at a turn start (default 800).
    pub compact_permille: u32,
    /// From this fraction (‰) compaction is forced before any request (default 900).
    pub force_permille: u32,
    /// Recent tokens kept verbatim by every rewrite (absolute, default 16,384).
    pub tail_tokens: u64,
}

impl Default for ContextSettings {
    fn default() -> Self {
        ContextSettings {
            window: 0,
            snip_permille: 600,
            compact_permille: 800,
            force_permille: 900,
            tail_tokens: 16_384,
        }
    }
}

/// What a compaction did to the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionKind {
    /// Old tool results were replaced by placeholders naming their archived originals.
    Snip,
    /// The old middle of the conversation was replaced by a model-written summary.
    Summary,
}

/// Why a compaction ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionTrigger {
    /// The context crossed the snip or compact ratio at a turn start.
    Threshold,
    /// The next request would have crossed the force ratio (may be mid-turn).
    Forced,
    /// The user asked for it (`/compact`).
    User,
}

/// One tool result replaced by a placeholder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnippedResult {
    /// The tool call whose result was snipped.
    pub call_id: String,
    /// Id of the original in the session's archive.
    pub archive_id: String,
    /// Bytes of the original content.
    pub bytes: u64,
    /// Index of the result's message in the conversation when it was snipped. Providers may
    /// reuse tool-call ids across turns (and a scripted or restarted client may too), so the
    /// call id alone does not name one message; `None` in journals written before this field
    /// existed (then the first unsnipped result with the call id is meant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
}

/// The user's choice on an MCP elicitation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElicitAction {
    /// Submit the form.
    Accept,
    /// Refuse.
    Decline,
    /// Dismiss without choosing.
    Cancel,
}

impl ElicitAction {
    /// `accept`, `decline` or `cancel`.
    pub fn as_str(self) -> &'static str {
        match self {
            ElicitAction::Accept => "accept",
            ElicitAction::Decline => "decline",
            ElicitAction::Cancel => "cancel",
        }
    }
}

/// The answer to an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// Run this once.
    AllowOnce,
    /// Allow matching calls for the rest of this session.
    AllowSession,
    /// Allow and persist a rule to the user's config.
    AllowAlways,
    /// Do not run.
    Deny,
}

/// What a rewind restores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RewindScope {
    /// Files only.
    Code,
    /// Conversation only.
    Conversation,
    /// Both.
    Both,
}

/// An OAuth access token crossing the link (laptop → host, one connection's worth). Its
/// `Debug` shows no secret, so a logged response never carries it.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BearerToken(pub String);

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BearerToken(<{} bytes>)", self.0.len())
    }
}

tagged_enum! {
    ResponseDe, "r";
    /// Responses to [`Request`]s.
    #[derive(Debug, Clone, PartialEq, Serialize)]
    #[serde(tag = "r", rename_all = "snake_case")]
    pub enum Response {
        /// Generic success.
        Ok,
        /// A duplicate request id: the original was already applied.
        Duplicate,
        /// Answer to [`Request::Status`].
        Status(DaemonStatus),
        /// Answer to [`Request::ListSessions`].
        Sessions {
            /// Sessions, newest first.
            sessions: Vec<SessionInfo>,
        },
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Answer to [`Request::OpenSession`].
        SessionOpened(SessionOpened),
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Answer to [`Request::ListDir`].
        DirEntries {
            /// Entries of that directory.
            entries: Vec<DirEntry>,
        },
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Answer to [`Request::Rewind`].
        Rewound {
            /// Human-readable summary of what changed (or would change).
            summary: String,
            /// Paths restored or removed.
            paths: Vec<String>,
        },
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Answer to [`Request::Hooks`].
        Hooks(crate::hooks::HooksReport),
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Answer to [`Request::Memory`].
        Memory(crate::memory::ops::MemoryReply),
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Answer to [`Request::McpStatus`].
        McpServers {
            /// Every server, host ones first, each group sorted by name.
            servers: Vec<McpServerInfo>,
        },
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Answer to [`Request::FetchContent`].
        Content(ContentChunk),
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Answer to [`Request::Pty`].
        Pty(PtyResponse),

        // ---- prompt history (issue 16) ----
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// The workspace's prompt history, oldest first.
        History {
            /// The entries.
            entries: Vec<String>,
        },
        // ---- session management and custom commands (issue 16) ----
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Answer to [`Request::PurgeSessions`].
        Purged {
            /// Ids removed for good.
            sessions: Vec<String>,
        },
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Answer to [`Request::ListTrash`].
        Trash {
            /// Trashed sessions, most recently deleted first.
            sessions: Vec<TrashedSession>,
        },
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Answer to [`Request::ListCommandFiles`].
        CommandFiles {
            /// Files read, sorted by name.
            files: Vec<CommandFile>,
            /// Files that could not be read (too big, not UTF-8, unreadable), with the problem.
            skipped: Vec<CommandFileProblem>,
        },
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Answer to [`Request::ListSkills`].
        Skills {
            /// Skills sorted by name.
            skills: Vec<crate::skills::SkillInfo>,
            /// One line per skipped or shadowed skill, naming the file (and line) and problem.
            notices: Vec<String>,
        },
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Answer to [`Request::McpPrompts`].
        McpPrompts {
            /// Prompts sorted by command name.
            prompts: Vec<McpPromptEntry>,
            /// Servers whose prompts could not be listed, with the reason.
            #[serde(default)]
            problems: Vec<String>,
        },
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Answer to [`Request::McpResources`].
        McpResources {
            /// Resources in the server's order.
            resources: Vec<McpResourceEntry>,
        },
        // ---- #14 long sessions: `/compact` and `/context` ----
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Answer to [`Request::Compact`].
        CompactDone {
            /// What happened, as the user should read it.
            summary: String,
            /// Seq of the session's last event when it ended: the `compacted` events are at or
            /// before it (they may reach the client after this answer).
            #[serde(default)]
            last_seq: u64,
        },
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Answer to [`Request::ContextReport`].
        Context(ContextReport),
        /// Answer to [`Request::WebFetch`].
        WebFetch(WebFetchReply),
        /// Answer to [`Request::McpToken`].
        McpToken {
            /// The bearer token, `None` when the laptop has no sign-in for that URL.
            access_token: Option<BearerToken>,
        },
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Answer to [`Request::WatchPorts`]: the ports listened on now.
        Ports {
            /// Ports, by number.
            ports: Vec<crate::ports::HostPort>,
        },
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Answer to [`Request::ForwardAgent`].
        AgentForwarding(crate::agent::AgentForwarding),
    }
}

/// Days a deleted session stays restorable in the trash before the host purges it.
pub const TRASH_KEEP_DAYS: u64 = 7;

/// One session in the trash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrashedSession {
    /// The session as it was listed.
    pub info: SessionInfo,
    /// RFC 3339 time of the delete.
    pub deleted: String,
    /// RFC 3339 time after which the host purges it.
    pub purge_after: String,
}

/// A custom command file as read on the host (raw Markdown; parsed by the client).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandFile {
    /// Command name: the path below the commands folder without `.md`, folders joined by
    /// `:` (`git/commit.md` is `git:commit`).
    pub name: String,
    /// Path shown in notices (`.reasonix/commands/git/commit.md`).
    pub path: String,
    /// The file's text.
    pub text: String,
}

/// A command file that was skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandFileProblem {
    /// Path shown in notices.
    pub path: String,
    /// What is wrong and what to do.
    pub problem: String,
}

/// The next request's prompt as the host would send it, split by part (estimated tokens:
/// bytes × the session's calibrated ratio).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ContextReport {
    /// The session's context settings (window 0: compaction disabled).
    pub settings: ContextSettings,
    /// The base system prompt (without standing instructions).
    pub system_tokens: u64,
    /// Standing instructions (`REASONIX.md`, `AGENTS.md`, `CLAUDE.md`) in the system prompt.
    pub instructions_tokens: u64,
    /// Tool schemas.
    pub tools_tokens: u64,
    /// User and assistant messages (including compaction summaries).
    pub conversation_tokens: u64,
    /// Tool results (snipped ones count as their placeholders).
    pub tool_result_tokens: u64,
    /// Messages in the conversation.
    pub messages: u64,
    /// Compactions journaled in this session (snips, summaries).
    pub compactions: (u64, u64),
    /// Tokens per byte the estimate uses (calibrated from the provider's reports).
    pub tokens_per_byte: f64,
    /// The planner's conversation (issue 38 §2), when a planner model is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planner: Option<PlannerContext>,
    /// Usage of the session so far, per model (from its usage events), in first-use order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usage_by_model: Vec<ModelUsage>,
    /// What memory recall added to the last user message (#32), when it added anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recall: Option<RecallReport>,
}

/// The recalled-memory block of the last user message in a [`ContextReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RecallReport {
    /// The ids of the facts recalled, in the block's order.
    pub facts: Vec<String>,
    /// Estimated tokens of the block.
    pub tokens: u64,
}

/// The planner's conversation in a [`ContextReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PlannerContext {
    /// The planner's model label.
    pub model: String,
    /// Messages in its conversation (0 before its first plan, and after a daemon restart).
    pub messages: u64,
    /// Estimated tokens of its next request (prefix and messages).
    pub tokens: u64,
}

/// One model's usage summed over a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ModelUsage {
    /// The model as the provider reported it.
    pub model: String,
    /// Requests.
    pub requests: u64,
    /// The tokens, summed.
    pub usage: Usage,
}

impl ContextReport {
    /// Estimated tokens of the whole next request.
    pub fn total(&self) -> u64 {
        self.system_tokens
            + self.instructions_tokens
            + self.tools_tokens
            + self.conversation_tokens
            + self.tool_result_tokens
    }
}

/// Most resources one [`Request::McpResources`] answer lists.
pub const MCP_RESOURCES_MAX: usize = 50;

/// One MCP prompt, offered as the slash command [`McpPromptEntry::command`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpPromptEntry {
    /// The command name without `/`: `mcp__<server>__<prompt>`, sanitised like tool names.
    pub command: String,
    /// Server name.
    pub server: String,
    /// The server's name of the prompt.
    pub name: String,
    /// Its description (may be empty).
    #[serde(default)]
    pub description: String,
    /// Its arguments in declared order (positional arguments map in this order).
    #[serde(default)]
    pub arguments: Vec<McpPromptArgument>,
}

/// One declared argument of an [`McpPromptEntry`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpPromptArgument {
    /// Name (`key=value` uses it).
    pub name: String,
    /// Description (may be empty).
    #[serde(default)]
    pub description: String,
    /// The prompt cannot be got without it.
    #[serde(default)]
    pub required: bool,
}

/// One MCP resource, attachable as `@<server>:<uri>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpResourceEntry {
    /// Its URI.
    pub uri: String,
    /// Its name (may be empty).
    #[serde(default)]
    pub name: String,
    /// Its description (may be empty).
    #[serde(default)]
    pub description: String,
}

/// One MCP server as `/mcp` and `reasonix mcp list` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpServerInfo {
    /// Server name (its tools are exposed as `mcp__<name>__<tool>`).
    pub name: String,
    /// Where the server process runs: `host` or `laptop`.
    pub run_on: String,
    /// How the host reaches it (`stdio: …`, `http: …`, `channel: laptop`).
    #[serde(default)]
    pub transport: String,
    /// `starting`, `ready` or `failed`.
    pub state: String,
    /// Why it failed (set with `state == "failed"`).
    #[serde(default)]
    pub reason: Option<String>,
    /// Exposed names of its tools (`mcp__<name>__<tool>`), sorted.
    #[serde(default)]
    pub tools: Vec<String>,
}

/// Daemon status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DaemonStatus {
    /// Build id of the daemon.
    pub build_id: String,
    /// Process id of the daemon.
    pub pid: u32,
    /// Seconds since the daemon started.
    pub uptime_secs: u64,
    /// Absolute workspace path.
    pub workspace: String,
    /// Sandbox state, e.g. `bwrap` or `unavailable (why)`.
    pub sandbox: String,
    /// Number of clients attached.
    pub clients: u32,
    /// Links the daemon keeps: connected ones and those waiting in their grace for a
    /// resume.
    #[serde(default)]
    pub links: u32,
    /// Sessions known.
    pub sessions: u32,
    /// Set when the previous daemon did not shut down cleanly.
    pub unclean_previous_shutdown: Option<String>,
}

/// Summary of one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// Session id.
    pub id: String,
    /// RFC 3339 creation time.
    pub created: String,
    /// Number of user turns.
    pub turns: u64,
    /// Highest journal event seq.
    pub last_seq: u64,
    /// First line of the first prompt.
    pub title: String,
    /// Current state.
    pub state: TurnState,
    /// RFC 3339 time of the last journal event (empty from daemons that predate it).
    #[serde(default)]
    pub last_activity: String,
    /// True when a client drives the session right now (its link is up).
    #[serde(default)]
    pub driver_attached: bool,
    /// Clients that have the session open (driver and spectators) with their link up.
    #[serde(default)]
    pub clients: u32,
    /// The session's goal, if it has had one (issue 38 §3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<GoalSummary>,
    /// True when a laptop's goal keeper (a standby gateway, [`OpenSession::keeper`]) is
    /// attached with its link up: the goal's model requests go through it while no driver is.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keeper_attached: bool,
}

/// Answer to [`Request::OpenSession`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionOpened {
    /// Session id.
    pub session: String,
    /// True when the session was created by this request.
    pub created: bool,
    /// This client's role.
    pub role: ClientRole,
    /// Highest event seq at the time of opening; catch-up events up to it follow.
    pub last_seq: u64,
    /// Current state.
    pub state: TurnState,
    /// A notice for the user (e.g. "the previous daemon was killed; turn 3 was interrupted").
    pub notice: Option<String>,
    /// Sandbox state of the daemon.
    pub sandbox: String,
    /// The policy the host enforces for this session (the driver's, tightened by the
    /// workspace's project file as the host read it at this open).
    pub policy: SessionPolicy,
    /// Project settings the host refused while computing `policy`; clients show each.
    #[serde(default)]
    pub ignored: Vec<Ignored>,
}

/// Role of a client on a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientRole {
    /// May submit turns and answer approvals.
    Driver,
    /// Sees the live transcript only.
    Spectator,
}

/// State of a session's turn machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnState {
    /// Nothing running.
    Idle,
    /// A turn is running.
    Running,
    /// The turn needs the model but no gateway is attached.
    WaitingForLaptop,
    /// The turn waits for an approval answer.
    WaitingForApproval,
    /// The turn hit its step limit; `ContinueTurn` resumes it.
    Paused,
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    /// File name.
    pub name: String,
    /// True for directories.
    pub is_dir: bool,
}

tagged_enum! {
    NotificationDe, "n";
    /// Notifications in either direction. Without the `client` feature (the host binary)
    /// only [`Notification::Dropped`] decodes: the daemon reads no notification from a client
    /// (it ignores one) and the laptop sends none, so the host carries no decoder for the others
    /// (issue 17's size goal); a client's other notification is refused as an unknown variant.
    #[derive(Debug, Clone, PartialEq, Serialize)]
    #[serde(tag = "n", rename_all = "snake_case")]
    pub enum Notification {
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// A journal event of the open session (daemon -> client).
        Event(Event),
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// The turn state changed (daemon -> client), not journaled.
        State {
            /// New state.
            state: TurnState,
            /// Optional detail (e.g. "waiting for laptop").
            detail: Option<String>,
        },
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// This client's role changed (daemon -> client).
        Role {
            /// New role.
            role: ClientRole,
            /// Why.
            reason: String,
        },
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// Progress of a running tool (daemon -> client).
        ToolProgress {
            /// Tool call id.
            call_id: String,
            /// Progress text or streamed output.
            message: String,
        },
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// A journal event too big for one frame (daemon -> client): the encoded [`Event`] is in
        /// the workspace's content store and the client fetches it with
        /// [`Request::FetchContent`] (checking the SHA-256) and handles it in the place of this
        /// notification, so an event of any size arrives whole and in order. Never journaled.
        EventByRef {
            /// The event's seq.
            seq: u64,
            /// Its timestamp.
            ts: String,
            /// Its turn.
            turn: u64,
            /// The event's type (its wire name), for messages when it cannot be fetched.
            kind: String,
            /// The JSON encoding of the whole event.
            event_ref: ContentRef,
        },
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// The workspace's listening TCP ports changed (daemon -> client, to links that sent
        /// [`Request::WatchPorts`]): the whole list, not journaled.
        Ports {
            /// Ports, by number.
            ports: Vec<crate::ports::HostPort>,
        },
        #[cfg_attr(not(feature = "client"), serde(skip_deserializing))]
        /// A `Notification` hook event for the laptop's own `run_on = "laptop"` hooks (#34;
        /// daemon -> client, live only, never journaled, so a catch-up never repeats it): the
        /// JSON such a hook reads on stdin (`hook_event_name`, `session_id`, `cwd`, `message`,
        /// ...). The laptop runs only hooks from its own config; the host chooses no command.
        HookNotice {
            /// The event, as a hook reads it on stdin.
            input: Value,
        },
        /// A marker that frames were dropped because a replay window was exceeded.
        Dropped {
            /// How many frames.
            frames: u64,
            /// How many bytes.
            bytes: u64,
        },
    }
}

/// A chat completion the daemon asks the gateway to run: the parameters of a provider
/// channel ([`crate::channel::ChannelOpen::Provider`]), whose data are [`ProviderChunk`]s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderRequest {
    /// Id of the stream: later requests name it as their base ([`MessagesBase`]), and logs
    /// name the stream by it. Stable across re-issues of the same step.
    pub stream_id: String,
    /// Model label (`provider/model`, provider name or bare model); `None` = default.
    pub model: Option<String>,
    /// OpenAI-format messages (empty when `messages_ref` is set).
    pub messages: Vec<Value>,
    /// Set when the messages are too big for one frame: the JSON array of the messages is
    /// fetched from the host with [`Request::FetchContent`] (and checked against the hash).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages_ref: Option<ContentRef>,
    /// Set when this request's messages start with all the messages of an earlier request
    /// on the same link (a session's requests extend each other byte for byte): `messages`
    /// (or `messages_ref`) then holds only the messages after those, and the laptop puts
    /// the earlier ones in front. A laptop that no longer has them refuses the request with
    /// the error code [`ErrorCode::UnknownMessagesBase`] and the host sends it again in full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages_base: Option<MessagesBase>,
    /// OpenAI-format tool definitions, already canonicalised and sorted.
    pub tools: Vec<Value>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Reasoning effort of this request (the session's [`SessionSettings::effort`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<ReasoningEffort>,
}

/// The earlier request whose messages a [`ProviderRequest`] starts with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessagesBase {
    /// That request's stream id.
    pub stream_id: String,
    /// How many of its first messages this request starts with (all of them when this one
    /// extends it; fewer after a rewrite of the history).
    pub count: usize,
}

tagged_enum! {
    ProviderChunkDe, "k";
    /// One typed piece of a provider stream, as produced by the gateway's SSE parser.
    #[derive(Debug, Clone, PartialEq, Serialize)]
    #[serde(tag = "k", rename_all = "snake_case")]
    pub enum ProviderChunk {
        /// Visible assistant text.
        Text {
            /// The delta.
            text: String,
        },
        /// Reasoning text (`reasoning_content` or `<think>`).
        Reasoning {
            /// The delta.
            text: String,
        },
        /// A complete tool call (deltas already aggregated by index).
        ToolCall(ToolCall),
        /// Data the provider needs back, unchanged, when this assistant message is sent again
        /// (the Anthropic wire: each thinking block's signature). Opaque to the host: it keeps
        /// it on the assistant message ([`EventKind::AssistantMessage`], `provider_replay`) and
        /// returns it as that message's `provider_replay` key; only the gateway of the wire
        /// format that produced it reads it. At most one per stream, before `Done`.
        Replay {
            /// The wire format's data.
            data: Value,
        },
        /// Token usage.
        Usage(Usage),
        /// The stream finished.
        Done {
            /// The provider's finish reason.
            finish_reason: Option<String>,
            /// Resolved model name actually used.
            model: String,
        },
        /// The stream failed.
        Error {
            /// What went wrong and what to do.
            message: String,
            /// True when re-issuing the same request may succeed: the failure came after the
            /// provider accepted the request (a broken or stalled stream). An error after the
            /// gateway spent its own retries is `false`: asking again would only repeat them.
            retryable: bool,
        },
        // #15 provider failures visible and bounded.
        /// The gateway's request failed before the stream began and is tried again after
        /// `delay_ms`; more chunks follow (this is not the end of the stream).
        Retrying(ProviderRetry),
    }
}

// #15 provider failures visible and bounded.
/// One retry of a model request, as the user sees it: "retrying the model request in N s
/// (attempt k/M, reason)".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderRetry {
    /// Which bound this retry counts against.
    pub phase: RetryPhase,
    /// Number (from 1) of the attempt that comes next.
    pub attempt: u32,
    /// Most attempts this phase makes.
    pub max_attempts: u32,
    /// Wait before the next attempt, in milliseconds.
    pub delay_ms: u64,
    /// Why the last attempt failed (HTTP status, connection error, broken stream).
    pub reason: String,
}

/// Where a model request is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryPhase {
    /// The laptop's gateway, before the provider accepted the request (connection errors,
    /// HTTP 408/429/5xx), within its attempt count and time budget.
    Connect,
    /// The host's turn runner re-asks after a reply broke off mid-stream.
    Reask,
}

impl ProviderRetry {
    /// The status-line text, with the wait given in whole seconds (`secs`).
    pub fn describe(&self, secs: u64) -> String {
        let when = if secs == 0 {
            "now".to_string()
        } else {
            format!("in {secs} s")
        };
        format!(
            "retrying the model request {when} (attempt {}/{}, {})",
            self.attempt, self.max_attempts, self.reason
        )
    }
}

/// A workspace file attached to a user turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// Workspace-relative path.
    pub path: String,
    /// The content (at most 64 KiB, UTF-8).
    pub content: String,
    /// True when the file was longer and was cut.
    pub truncated: bool,
}

/// A complete tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Call id (generated when the provider sent none).
    pub id: String,
    /// Tool name.
    pub name: String,
    /// JSON arguments as a string, exactly as the model produced them.
    pub arguments: String,
}

/// Token usage of one model request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    pub cache_hit_tokens: u64,
    /// Prompt tokens not served from cache.
    pub cache_miss_tokens: u64,
    /// Reasoning tokens.
    pub reasoning_tokens: u64,
}

/// A numbered journal event of a session; what clients render.
// Decoded by hand (below): serde's decoder for a `flatten`ed field buffers the object in its
// `Content` tree, see `crate::proto_serde`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// Monotonic number within the session, starting at 1.
    pub seq: u64,
    /// RFC 3339 timestamp.
    pub ts: String,
    /// Turn number (from 1) the event belongs to; 0 for session-level events.
    pub turn: u64,
    /// The event itself.
    #[serde(flatten)]
    pub kind: EventKind,
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use crate::proto_serde::{from_tagged_map, read_object, take_field};
        let mut map = read_object(d, "struct Event")?;
        let decode = |map: &mut serde_json::Map<String, Value>| {
            Ok::<_, serde_json::Error>(Event {
                seq: take_field(map, "seq")?,
                ts: take_field(map, "ts")?,
                turn: take_field(map, "turn")?,
                kind: from_tagged_map::<EventKindDe>(std::mem::take(map), "type")?.into(),
            })
        };
        decode(&mut map).map_err(serde::de::Error::custom)
    }
}

/// Why a tool call was not run (in [`EventKind::ToolFinished`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Denied {
    /// A `deny` rule of the permission policy matched.
    Policy,
    /// The user answered "deny" to the approval question.
    User,
    /// It needed approval and the run is headless (nobody to ask): `reasonix run` exits 4.
    Headless,
    /// The turn was cancelled while the question was open.
    Cancelled,
}

/// How a turn ended ([`EventKind::TurnFinished`]). On the wire (and in journals) it is the
/// snake_case name; an outcome this build does not know decodes as [`TurnOutcome::Unknown`],
/// so a journal written by a newer build still loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnOutcome {
    /// The model answered without further tool calls.
    Completed,
    /// The user cancelled it (or the partial step was dropped by a cancel).
    Cancelled,
    /// It reached its step limit (or waits otherwise); `Continue` goes on with it.
    Paused,
    /// The host daemon stopped while it ran (found when the journal was loaded again).
    Interrupted,
    /// A model request or the journal failed; the detail says why.
    Failed,
    /// An outcome this build does not know (written by a newer build).
    #[serde(other)]
    Unknown,
}

impl TurnOutcome {
    /// The wire name (the serde form, without quotes).
    pub fn as_str(self) -> &'static str {
        match self {
            TurnOutcome::Completed => "completed",
            TurnOutcome::Cancelled => "cancelled",
            TurnOutcome::Paused => "paused",
            TurnOutcome::Interrupted => "interrupted",
            TurnOutcome::Failed => "failed",
            TurnOutcome::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for TurnOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

tagged_enum! {
    EventKindDe, "type";
    /// What happened.
    #[derive(Debug, Clone, PartialEq, Serialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    pub enum EventKind {
        /// Session created.
        SessionStarted {
            /// Workspace path.
            workspace: String,
            /// Hash of the system prompt.
            system_hash: String,
            /// Hash of the tool schemas.
            tools_hash: String,
        },
        /// A user turn began.
        UserTurn {
            /// The request id that submitted it.
            request_id: String,
            /// The text.
            text: String,
            /// Workspace files mentioned as `@path` and attached to the turn (contents as read
            /// when the turn was submitted, so the conversation stays byte-stable).
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            attachments: Vec<Attachment>,
        },
        /// Streaming text delta (journaled so a catch-up shows partial answers too).
        TextDelta {
            /// The delta.
            text: String,
        },
        /// Streaming reasoning delta.
        ReasoningDelta {
            /// The delta.
            text: String,
        },
        /// A complete assistant message (one model step).
        AssistantMessage {
            /// Visible text.
            content: String,
            /// Reasoning, if any.
            reasoning: Option<String>,
            /// Tool calls requested.
            tool_calls: Vec<ToolCall>,
            /// What the provider needs back with this message ([`ProviderChunk::Replay`]);
            /// absent in journals written before it existed.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            provider_replay: Option<Value>,
        },
        /// A tool call is about to run (permission granted).
        ToolStarted {
            /// Call id.
            call_id: String,
            /// Tool name.
            name: String,
            /// JSON arguments.
            arguments: String,
        },
        /// A tool call finished.
        ToolFinished {
            /// Call id.
            call_id: String,
            /// Tool name.
            name: String,
            /// True when the tool reported an error.
            is_error: bool,
            /// The output in full, or, when `output_ref` is set, the bounded view the model saw
            /// (head and tail with a marker saying how much was cut).
            output: String,
            /// Set when the output was longer than [`crate::content::EXTERNALIZE_OVER`]: the
            /// full output is stored on the host and fetched with [`Request::FetchContent`].
            #[serde(default, skip_serializing_if = "Option::is_none")]
            output_ref: Option<ContentRef>,
            /// Set when the call was not run because it was denied, and by whom.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            denied: Option<Denied>,
            /// Bytes of the output the model saw, when the session's context window made that
            /// bound smaller than the usual 32 KiB (a small window cannot hold one result of that
            /// size); replaying the journal bounds the output the same way.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            context_bytes: Option<u64>,
        },
        /// An approval is needed.
        ApprovalRequested {
            /// Approval id.
            approval_id: String,
            /// The tool call this approval is about (its `ToolStarted`/`ToolFinished` id), so a
            /// client ties the question to the call it shows. `None` in journals written before
            /// this field existed (clients then match the queued call by tool and arguments).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            call_id: Option<String>,
            /// Tool name.
            tool: String,
            /// JSON arguments.
            arguments: String,
            /// Why it is asked (the matching rule or fallback).
            reason: String,
            /// Unified diff preview for file edits.
            preview: Option<String>,
            // #15 "always allow" scope.
            /// The rule an "always allow" answer would store (`None`: too dangerous to allow
            /// forever; "always" then allows for this session only), so the dialog can say it.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            always_rule: Option<String>,
        },
        /// An approval was answered.
        ApprovalAnswered {
            /// Approval id.
            approval_id: String,
            /// The decision.
            decision: ApprovalDecision,
            /// For "always": the rule the laptop persists to the user's config (`None` when the
            /// call is too dangerous to allow forever; it is then allowed for this session only).
            #[serde(default)]
            rule: Option<String>,
        },
        /// An MCP server asks the user to fill a form during a tool call (`elicitation/create`).
        /// Answered with `Request::AnswerElicitation`.
        ElicitationRequested {
            /// Elicitation id.
            elicitation_id: String,
            /// The server asking.
            server: String,
            /// Its message.
            message: String,
            /// `requestedSchema` as JSON text: a flat object of string, number, integer and
            /// boolean fields (with `title`, `description`, `enum`, `default`) and `required`.
            schema: String,
        },
        /// An elicitation was answered (the values themselves are not journaled).
        ElicitationAnswered {
            /// Elicitation id.
            elicitation_id: String,
            /// What the user chose.
            action: ElicitAction,
        },
        /// Usage of one model request, with prefix-stability diagnostics.
        Usage {
            /// Token figures.
            usage: Usage,
            /// Model actually used.
            model: String,
            /// Hash of the system prompt of this request.
            system_hash: String,
            /// Hash of the tool schemas of this request.
            tools_hash: String,
            /// Set when cache-hit tokens dropped: which part of the prefix changed.
            cache_note: Option<String>,
        },
        /// The turn finished.
        TurnFinished {
            /// How it ended.
            outcome: TurnOutcome,
            /// Detail, e.g. the error.
            detail: Option<String>,
        },
        /// A notice for the user.
        Notice {
            /// The text.
            text: String,
        },
        // #15 provider failures visible and bounded.
        /// A model request failed and is tried again (journaled, so a replay shows it too).
        ProviderRetry(ProviderRetry),
        /// Plan mode: on/off, a proposed plan, the user's answer (see [`PlanEvent`]).
        Plan(PlanEvent),
        /// The session's goal: started, reported on, paused, resumed, ended (see [`GoalEvent`]).
        Goal(GoalEvent),
        /// A checkpoint was taken.
        Checkpoint {
            /// Checkpoint id.
            id: String,
            /// Paths captured.
            paths: Vec<String>,
        },
        /// The history was rewritten to stay inside the context window: a declared cache reset
        /// (the next request misses the provider's cache once, from the rewrite on). The
        /// originals are in the session's archive; replaying the journal applies the rewrite
        /// again, and a rewind to before it restores the conversation as it was.
        Compacted {
            /// Snip or summary.
            kind: CompactionKind,
            /// Why it ran.
            trigger: CompactionTrigger,
            /// Estimated prompt tokens of the next request before the rewrite.
            tokens_before: u64,
            /// Estimated prompt tokens after it.
            tokens_after: u64,
            /// Snip: the tool results replaced by placeholders.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            snipped: Vec<SnippedResult>,
            /// Summary: conversation messages `[start, end)` (0 = first message after the
            /// system prompt) replaced by one summary message.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            replaced: Option<(u64, u64)>,
            /// Summary: the summary message's content (`<compaction-summary>…`).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            summary: Option<String>,
            /// Archive ids of the summarised messages, in order.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            archived: Vec<String>,
            /// Archive file (name, relative to the sessions directory).
            archive: String,
            /// Summary: the most bytes of the range's normal-sized user messages kept verbatim
            /// after the summary (the newest that fit), when the window made that bound necessary;
            /// `None` keeps them all (and in journals from before this field existed).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            kept_user_bytes: Option<u64>,
        },

        // ---- steer and `!` shell (issue 16) ----
        /// The user steered the running turn (journaled when it arrived; not yet seen by the
        /// model).
        Steer {
            /// The request id that sent it.
            request_id: String,
            /// The text.
            text: String,
        },
        /// Steers were given to the model as one user message appended after the last message,
        /// before this model step. Appending extends the previous request, so the cached prefix
        /// is kept; the step's uncached cost is the new tail, of which the steer is `est_tokens`.
        SteerInjected {
            /// The [`EventKind::Steer`] request ids, in order.
            request_ids: Vec<String>,
            /// Estimated prompt tokens the steer text adds.
            est_tokens: u64,
        },
        /// A `!command` the user ran in the workspace.
        ShellRan {
            /// The request id that ran it.
            request_id: String,
            /// The command line.
            command: String,
            /// True when it failed (non-zero exit, signal, timeout, sandbox error).
            is_error: bool,
            /// Combined stdout and stderr (bounded like a tool result, with the exit status).
            output: String,
            /// The output joins the next user turn's message.
            added_to_context: bool,
        },

        // ---- delegation (issue 33) ----
        /// An event of a child conversation (`task`, `parallel_tasks`, `fleet`), journaled in the
        /// session's journal: `event` is what the child's runner recorded, `call_id` the parent's
        /// tool call that runs the child, `child` the child's id. A grandchild's events are
        /// wrapped twice. The parent conversation never replays these.
        Subagent {
            /// The parent's tool call that runs this child.
            call_id: String,
            /// The child's id (`sa-…`).
            child: String,
            /// What the child recorded.
            event: Box<EventKind>,
        },

        // ---- the planner beside the executor (issue 38 §2) ----
        /// An event of the planner's conversation (its turn's user message, its assistant
        /// messages, its tool calls and results), journaled in the session's journal so the
        /// planner's conversation is rebuilt byte for byte after a daemon restart or a rewind.
        /// The executor's conversation never replays these; the planner's streamed deltas are
        /// not journaled.
        Planner {
            /// What the planner's runner recorded.
            event: Box<EventKind>,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_requested_names_its_call_and_old_journal_lines_still_parse() {
        // A journal line written before `call_id` existed.
        let old = r#"{"type":"approval_requested","approval_id":"ap-1-c1","tool":"bash","arguments":"{}","reason":"ask","preview":null}"#;
        let kind: EventKind = serde_json::from_str(old).expect("old line parses");
        assert!(matches!(
            &kind,
            EventKind::ApprovalRequested { call_id: None, approval_id, .. } if approval_id == "ap-1-c1"
        ));
        assert!(!serde_json::to_string(&kind)
            .expect("json")
            .contains("call_id"));
        let new = EventKind::ApprovalRequested {
            approval_id: "ap-2-c2".into(),
            call_id: Some("c2".into()),
            tool: "bash".into(),
            arguments: "{}".into(),
            reason: "ask".into(),
            preview: None,
            always_rule: None,
        };
        let line = serde_json::to_string(&new).expect("json");
        assert!(line.contains(r#""call_id":"c2""#), "{line}");
        assert_eq!(
            serde_json::from_str::<EventKind>(&line).expect("parses"),
            new
        );
    }

    /// Every error code with its exact wire string: journals, fixtures and peers of earlier
    /// builds used these strings, so they must never change.
    const CODES: [(ErrorCode, &str); 24] = [
        (ErrorCode::BadRequest, "bad_request"),
        (ErrorCode::BadResponse, "bad_response"),
        (ErrorCode::Busy, "busy"),
        (ErrorCode::Attached, "attached"),
        (ErrorCode::NotFound, "not_found"),
        (ErrorCode::Exists, "exists"),
        (ErrorCode::ReadOnly, "read_only"),
        (ErrorCode::NoSession, "no_session"),
        (ErrorCode::NotRunning, "not_running"),
        (ErrorCode::NotPaused, "not_paused"),
        (ErrorCode::Denied, "denied"),
        (ErrorCode::Invalid, "invalid"),
        (ErrorCode::Journal, "journal"),
        (ErrorCode::Io, "io"),
        (ErrorCode::OutsideWorkspace, "outside_workspace"),
        (ErrorCode::History, "history"),
        (ErrorCode::Rewind, "rewind"),
        (ErrorCode::McpPrompt, "mcp_prompt"),
        (ErrorCode::Mcp, "mcp"),
        (ErrorCode::BadConfig, "bad_config"),
        (ErrorCode::Pty, "pty"),
        (ErrorCode::UnknownMessagesBase, "unknown_messages_base"),
        (ErrorCode::Internal, "internal"),
        (ErrorCode::Unknown, "unknown"),
    ];

    const OUTCOMES: [(TurnOutcome, &str); 6] = [
        (TurnOutcome::Completed, "completed"),
        (TurnOutcome::Cancelled, "cancelled"),
        (TurnOutcome::Paused, "paused"),
        (TurnOutcome::Interrupted, "interrupted"),
        (TurnOutcome::Failed, "failed"),
        (TurnOutcome::Unknown, "unknown"),
    ];

    #[test]
    fn error_codes_keep_their_wire_strings() {
        for (code, wire) in CODES {
            let json = serde_json::to_string(&code).expect("json");
            assert_eq!(json, format!("\"{wire}\""), "{code:?}");
            assert_eq!(code.as_str(), wire);
            assert_eq!(code.to_string(), wire);
            assert_eq!(
                serde_json::from_str::<ErrorCode>(&json).expect("parses"),
                code
            );
        }
        // A code added here must be added to the table too (the match is exhaustive).
        for (code, _) in CODES {
            match code {
                ErrorCode::BadRequest
                | ErrorCode::BadResponse
                | ErrorCode::Busy
                | ErrorCode::Attached
                | ErrorCode::NotFound
                | ErrorCode::Exists
                | ErrorCode::ReadOnly
                | ErrorCode::NoSession
                | ErrorCode::NotRunning
                | ErrorCode::NotPaused
                | ErrorCode::Denied
                | ErrorCode::Invalid
                | ErrorCode::Journal
                | ErrorCode::Io
                | ErrorCode::OutsideWorkspace
                | ErrorCode::History
                | ErrorCode::Rewind
                | ErrorCode::McpPrompt
                | ErrorCode::Mcp
                | ErrorCode::BadConfig
                | ErrorCode::Pty
                | ErrorCode::UnknownMessagesBase
                | ErrorCode::Internal
                | ErrorCode::Unknown => {}
            }
        }
        let codes: std::collections::HashSet<_> = CODES.iter().map(|(c, _)| *c).collect();
        assert_eq!(codes.len(), CODES.len(), "a code is listed twice");
    }

    #[test]
    fn rpc_errors_keep_their_wire_form_and_unknown_codes_still_parse() {
        let e = RpcError::new(ErrorCode::ReadOnly, "someone else drives");
        let json = serde_json::to_string(&e).expect("json");
        assert_eq!(
            json,
            r#"{"code":"read_only","message":"someone else drives"}"#
        );
        assert_eq!(e.to_string(), "someone else drives (read_only)");
        // An answer as earlier builds wrote it.
        let old: Envelope = serde_json::from_str(
            r#"{"t":"response","id":9,"result":{"Err":{"code":"bad_request","message":"no"}}}"#,
        )
        .expect("parses");
        assert_eq!(
            old,
            Envelope::Response {
                id: 9,
                result: Err(RpcError::new(ErrorCode::BadRequest, "no")),
            }
        );
        // A code of a newer peer: the error still arrives, with its message.
        let newer: RpcError =
            serde_json::from_str(r#"{"code":"quota_exceeded","message":"later"}"#).expect("parses");
        assert_eq!(newer, RpcError::new(ErrorCode::Unknown, "later"));
    }

    #[test]
    fn turn_outcomes_keep_their_wire_strings() {
        for (outcome, wire) in OUTCOMES {
            let json = serde_json::to_string(&outcome).expect("json");
            assert_eq!(json, format!("\"{wire}\""), "{outcome:?}");
            assert_eq!(outcome.as_str(), wire);
            assert_eq!(outcome.to_string(), wire);
            assert_eq!(
                serde_json::from_str::<TurnOutcome>(&json).expect("parses"),
                outcome
            );
        }
        for (outcome, _) in OUTCOMES {
            match outcome {
                TurnOutcome::Completed
                | TurnOutcome::Cancelled
                | TurnOutcome::Paused
                | TurnOutcome::Interrupted
                | TurnOutcome::Failed
                | TurnOutcome::Unknown => {}
            }
        }
        // A journal line as earlier builds wrote it, and one of a newer build.
        let line = r#"{"type":"turn_finished","outcome":"interrupted","detail":"daemon stopped"}"#;
        let kind: EventKind = serde_json::from_str(line).expect("parses");
        assert_eq!(
            kind,
            EventKind::TurnFinished {
                outcome: TurnOutcome::Interrupted,
                detail: Some("daemon stopped".into()),
            }
        );
        assert_eq!(serde_json::to_string(&kind).expect("json"), line);
        let newer: EventKind = serde_json::from_str(
            r#"{"type":"turn_finished","outcome":"handed_off","detail":null}"#,
        )
        .expect("parses");
        assert_eq!(
            newer,
            EventKind::TurnFinished {
                outcome: TurnOutcome::Unknown,
                detail: None,
            }
        );
    }
}
