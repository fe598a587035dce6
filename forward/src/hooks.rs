//! Wire types of hooks (#34): the user's `[[hooks]]` declarations and the trust records the
//! laptop sends with every session open ([`HookSettings`]), and what `/hooks` and
//! `reasonix hooks list` show ([`HooksReport`]). The host parses project hook files and runs
//! hooks (`reasonix_remote::hooks`); these are only the shapes both sides share.

use serde::{Deserialize, Serialize};

/// The moments a hook can run at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum HookEvent {
    /// The first turn of a session in this daemon (stdout joins that turn as context).
    SessionStart,
    /// A user prompt before it becomes a turn (exit 2 refuses it; stdout joins it).
    UserPromptSubmit,
    /// A tool call before it runs (exit 2 makes it an error carrying the hook's stderr).
    PreToolUse,
    /// A tool call after it ran (with its result).
    PostToolUse,
    /// The end of a turn.
    Stop,
    /// Before the conversation is compacted.
    PreCompact,
    /// The user's attention is needed: an approval waits, or a turn finished.
    Notification,
}

impl HookEvent {
    /// Every event, in the order they are listed.
    pub const ALL: [HookEvent; 7] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::Stop,
        HookEvent::PreCompact,
        HookEvent::Notification,
    ];

    /// The name as written in config files (`PreToolUse`).
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::Stop => "Stop",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::Notification => "Notification",
        }
    }

    /// Parse an event name (exact spelling, as Claude Code writes them).
    pub fn parse(s: &str) -> Option<HookEvent> {
        Self::ALL.into_iter().find(|e| e.as_str() == s)
    }

    /// Events whose hook can stop what happens next; their default timeout is short.
    pub fn is_blocking(self) -> bool {
        matches!(self, HookEvent::PreToolUse | HookEvent::UserPromptSubmit)
    }
}

impl std::fmt::Display for HookEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Default timeout of a hook of a blocking event (`PreToolUse`, `UserPromptSubmit`).
pub const BLOCKING_TIMEOUT_MS: u64 = 5_000;
/// Default timeout of every other hook.
pub const OTHER_TIMEOUT_MS: u64 = 30_000;

/// What a `PreToolUse` hook that timed out or crashed means for the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookFail {
    /// The call goes ahead (reported).
    #[default]
    Open,
    /// The call is refused.
    Closed,
}

/// Where a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookRunOn {
    /// On the host, in the workspace, inside the bash sandbox.
    #[default]
    Host,
    /// On the laptop that is attached when the event happens (only `Notification`, and only
    /// from the user's own config; the host sends the event, the laptop runs the command).
    Laptop,
}

/// One `[[hooks]]` entry, as the user config and `.reasonix/hooks.toml` write it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookDecl {
    /// When it runs (`PreToolUse`, ...), as written (checked by the host).
    pub event: String,
    /// Anchored regular expression on the tool name (`PreToolUse`, `PostToolUse`) or the
    /// prompt (`UserPromptSubmit`); absent = every one.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// Shell command line (`bash -c`), run in the workspace.
    pub command: String,
    /// Milliseconds before it is killed (default 5,000 for blocking events, else 30,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// `PreToolUse` only: `closed` refuses the call when the hook times out or crashes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail: Option<HookFail>,
    /// `host` (default) or `laptop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_on: Option<HookRunOn>,
}

/// A project hook file the user trusted: its exact content, by SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TrustedHookFile {
    /// Workspace-relative path (`.reasonix/hooks.toml`, `.claude/settings.json`).
    pub path: String,
    /// SHA-256 of the file's bytes (lower-case hex).
    pub sha256: String,
}

/// What a client brings to a session about hooks: the user's own hooks (trusted, from the
/// laptop's config) and the project hook files the user trusted for this workspace (the
/// records live on the laptop, where nothing on the host can write them).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HookSettings {
    /// `[[hooks]]` of the user config.
    #[serde(default)]
    pub user: Vec<HookDecl>,
    /// Trusted project hook files of this workspace.
    #[serde(default)]
    pub trusted: Vec<TrustedHookFile>,
}

impl HookSettings {
    /// True when it carries nothing (not sent).
    pub fn is_empty(&self) -> bool {
        self.user.is_empty() && self.trusted.is_empty()
    }
}

/// One project hook file as the host found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookFileInfo {
    /// Workspace-relative path.
    pub path: String,
    /// SHA-256 of its bytes (what `trust` records).
    pub sha256: String,
    /// True when a trust record matches this exact content.
    pub trusted: bool,
    /// The file's text (at most [`HOOK_FILE_SHOWN`] bytes), so the user trusts what they saw.
    pub content: String,
    /// Why (part of) the file could not be read, if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Bytes of a hook file's text a report carries.
pub const HOOK_FILE_SHOWN: usize = 16 * 1024;

/// One hook as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookInfo {
    /// `user config` or the project file's workspace-relative path.
    pub source: String,
    /// The event.
    pub event: HookEvent,
    /// The matcher, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// The command line.
    pub command: String,
    /// Effective timeout.
    pub timeout_ms: u64,
    /// Effective failure mode.
    pub fail: HookFail,
    /// Whether it may run (user hooks always; project hooks when their file is trusted).
    pub trusted: bool,
    /// Its last run in the open session, e.g. `12:03:01 exit 0 (40 ms)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<String>,
}

/// Answer to `Request::Hooks`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HooksReport {
    /// The project hook files found.
    pub files: Vec<HookFileInfo>,
    /// Every hook, user ones first.
    pub hooks: Vec<HookInfo>,
    /// Problems found while reading hook declarations (file and what is wrong).
    pub problems: Vec<String>,
}
