//! The effective security policy of a session, typed once for both binaries, and the one
//! tighten-only merge that applies a project's `reasonix.toml` to it.
//!
//! The laptop builds a [`SessionPolicy`] from its trusted layers (built-in defaults, the user
//! config, command-line flags) and sends it in the session settings. A project file comes
//! with a repository and is not trusted: [`tighten`] applies it so that it can only make the
//! policy stricter, and returns one [`Ignored`] notice per setting it refused. The host calls
//! the same function with the workspace's `reasonix.toml` at every session open, so what the
//! user is told was ignored is exactly what the host ignored.
//!
//! Pure data and pure functions: no I/O, no TOML. Each binary reads the file its own way and
//! hands the parsed [`ProjectLayer`] in.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Default timeout of one foreground `bash` call, in seconds.
pub const DEFAULT_BASH_TIMEOUT_SECS: u64 = 120;
/// Default timeout of one MCP `tools/call`, in seconds.
pub const DEFAULT_MCP_CALL_TIMEOUT_SECS: u64 = 300;
/// Name of the project file, as notices name it.
pub const PROJECT_FILE: &str = "reasonix.toml";

/// Permission mode: what happens to a writer tool no rule covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PermissionMode {
    /// Prompt the user.
    #[default]
    Ask,
    /// Allow writers without a prompt; explicit ask/deny rules still apply.
    Auto,
    /// Never prompt; deny rules still hold.
    Yolo,
}

impl PermissionMode {
    /// Higher is stricter.
    pub fn strictness(self) -> u8 {
        match self {
            PermissionMode::Yolo => 0,
            PermissionMode::Auto => 1,
            PermissionMode::Ask => 2,
        }
    }

    /// The mode as written in config files (`ask`, `auto`, `yolo`).
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionMode::Ask => "ask",
            PermissionMode::Auto => "auto",
            PermissionMode::Yolo => "yolo",
        }
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A permission rule string that failed the syntax check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid permission rule `{rule}`: {why} (expected `Tool`, `Tool(glob)` or `Bash(prefix:*)`)"
)]
pub struct RuleError {
    /// The rule as written.
    pub rule: String,
    /// What is wrong with it.
    pub why: String,
}

/// One permission rule: `Tool`, `Tool(specifier)` or `Bash(prefix:*)`, syntax-checked on
/// construction and on deserialisation (so a bad rule is refused on both sides of the link).
/// The host compiles it into a matcher; the text is kept exactly as written (trimmed).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Rule(String);

impl Rule {
    /// Check the syntax of `text`.
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let bad = |why: &str| RuleError {
            rule: text.to_string(),
            why: why.to_string(),
        };
        let t = text.trim();
        let name = match t.find('(') {
            Some(i) => {
                let Some(inner) = t[i + 1..].strip_suffix(')') else {
                    return Err(bad("missing closing `)`"));
                };
                if inner.trim().is_empty() {
                    return Err(bad("empty specifier inside ()"));
                }
                t[..i].trim()
            }
            None => t,
        };
        if name.is_empty() {
            return Err(bad("empty tool name"));
        }
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*' | '?'))
        {
            return Err(bad("tool names use letters, digits, `_`, `-` and glob `*`"));
        }
        Ok(Rule(t.to_string()))
    }

    /// The rule text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Rule {
    type Error = RuleError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Rule::parse(&s)
    }
}

impl From<Rule> for String {
    fn from(r: Rule) -> String {
        r.0
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<&str> for Rule {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<str> for Rule {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

/// The allow, ask and deny rule lists (decision order: deny > ask > allow > mode).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    /// Rules that allow without a prompt.
    #[serde(default)]
    pub allow: Vec<Rule>,
    /// Rules that always prompt.
    #[serde(default)]
    pub ask: Vec<Rule>,
    /// Rules that always deny.
    #[serde(default)]
    pub deny: Vec<Rule>,
}

/// How `bash` is confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum BashSandbox {
    /// Run bash inside bubblewrap, or under Landlock when bubblewrap cannot run; refuse to
    /// run when neither works.
    #[default]
    Enforce,
    /// Run bash inside bubblewrap only; refuse to run when bubblewrap does not work.
    Bwrap,
    /// Run bash unconfined (an explicit choice in the user's own config).
    Off,
}

impl BashSandbox {
    /// `enforce`, `bwrap` or `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            BashSandbox::Enforce => "enforce",
            BashSandbox::Bwrap => "bwrap",
            BashSandbox::Off => "off",
        }
    }
}

/// Sandbox part of the policy. Relative paths are taken from the workspace root on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxPolicy {
    /// Bash confinement.
    pub bash: BashSandbox,
    /// Whether sandboxed bash has network access.
    pub network: bool,
    /// Writable roots besides the workspace (file tools and bash).
    #[serde(default)]
    pub allow_write: Vec<PathBuf>,
    /// Paths hidden from the file tools and bash, added to the host's built-in list
    /// (`~/.ssh`, `~/.aws`, `~/.gnupg`, `~/.reasonix/.env`).
    #[serde(default)]
    pub forbid_read: Vec<PathBuf>,
    /// Whether the bash tool gets the forwarded ssh-agent (`SSH_AUTH_SOCK`, #36 §2) when
    /// the laptop forwards one. Off by default; the user's own terminals always get it.
    #[serde(default)]
    pub ssh_agent: bool,
}

impl Default for SandboxPolicy {
    fn default() -> Self {
        Self {
            bash: BashSandbox::Enforce,
            network: true,
            allow_write: Vec::new(),
            forbid_read: Vec::new(),
            ssh_agent: false,
        }
    }
}

/// Time limits of tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    /// One foreground `bash` call, seconds (at least 1).
    pub bash_seconds: u64,
    /// One MCP `tools/call`, seconds (at least 1). A server's or tool's own timeout in a
    /// workspace file can only be shorter: the host takes the smaller of the two.
    #[serde(default = "default_mcp_call_seconds")]
    pub mcp_call_seconds: u64,
}

fn default_mcp_call_seconds() -> u64 {
    DEFAULT_MCP_CALL_TIMEOUT_SECS
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            bash_seconds: DEFAULT_BASH_TIMEOUT_SECS,
            mcp_call_seconds: DEFAULT_MCP_CALL_TIMEOUT_SECS,
        }
    }
}

/// The security policy of one session: everything the host enforces on tool calls.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionPolicy {
    /// Fallback for writer tools no rule covers.
    pub mode: PermissionMode,
    /// Allow, ask and deny rules.
    pub rules: Rules,
    /// Bash confinement, writable roots, hidden paths, network.
    pub sandbox: SandboxPolicy,
    /// Tool time limits.
    pub timeouts: Timeouts,
}

/// Where an MCP server process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum McpRunOn {
    /// On the laptop, next to the gateway; its lines are tunnelled over the link.
    Laptop,
    /// On the host, next to the workspace.
    Host,
}

impl McpRunOn {
    /// `laptop` or `host`.
    pub fn as_str(self) -> &'static str {
        match self {
            McpRunOn::Laptop => "laptop",
            McpRunOn::Host => "host",
        }
    }
}

/// How an MCP server is spoken to (`type` in `[[mcp]]` and `.mcp.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum McpTransportKind {
    /// A process's stdin/stdout (`command`).
    Stdio,
    /// Streamable HTTP (2025-03-26): every message is a POST to `url` (the default).
    #[serde(alias = "streamable-http", alias = "streamableHttp")]
    Http,
    /// The older HTTP+SSE transport (2024-11-05): a GET stream on `url` announces the endpoint
    /// that takes POSTs; answers come on the stream.
    Sse,
}

/// One MCP server as declared by an `[[mcp]]` entry, in the user config or a workspace's
/// `reasonix.toml` (the same keys in both; unknown keys are refused). Exactly one of `command`
/// (stdio) and `url` (Streamable HTTP) is set. Values may contain `${VAR}` /
/// `${VAR:-default}`, expanded on the host when the server starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerSpec {
    /// Server name; its tools appear as `mcp__<name>__<tool>`.
    pub name: String,
    /// Program of a stdio server.
    #[serde(default)]
    pub command: Option<String>,
    /// Arguments of `command`.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment of `command` (added to the inherited one).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// URL of a Streamable HTTP server (instead of `command`).
    #[serde(default)]
    pub url: Option<String>,
    /// Extra HTTP request headers for `url` (e.g. `Authorization = "Bearer ${TOKEN}"`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The transport of a `url` server: `"http"` (Streamable HTTP, the default) or `"sse"`
    /// (the 2024-11-05 HTTP+SSE transport); `"stdio"` for a `command` server. Unset: `stdio`
    /// with `command`, `http` with `url`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub transport: Option<McpTransportKind>,
    /// Where the server runs. Unset means: on the laptop for an entry of the user config (it
    /// lives on the laptop), on the host for an entry of a workspace file (it comes with the
    /// workspace). The loaders set it; [`McpServerSpec::runs_on`] reads it.
    #[serde(default)]
    pub run_on: Option<McpRunOn>,
    /// `tools/call` timeout of this server in seconds (default: the session's, 300). The
    /// session's `[tools] mcp_call_timeout_seconds` caps it: it can only shorten a call's limit.
    #[serde(default, alias = "call_timeout_seconds")]
    pub timeout_seconds: Option<u64>,
    /// Startup (`initialize` + `tools/list`) timeout in seconds (default 30).
    #[serde(default)]
    pub startup_timeout_seconds: Option<u64>,
    /// Per-tool call timeouts in seconds, keyed by the server's own tool name (capped like
    /// `timeout_seconds`).
    #[serde(default)]
    pub tool_timeouts: BTreeMap<String, u64>,
}

impl McpServerSpec {
    /// A stdio server running `command args…` on the host.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>, args: &[&str]) -> Self {
        Self {
            command: Some(command.into()),
            args: args.iter().map(|s| s.to_string()).collect(),
            ..Self::named(name)
        }
    }

    /// A Streamable HTTP server at `url`, reached from the host.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            url: Some(url.into()),
            ..Self::named(name)
        }
    }

    /// A server called `name` running on the host, with neither `command` nor `url` set yet
    /// (for a loader that fills it in field by field).
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
            transport: None,
            run_on: Some(McpRunOn::Host),
            timeout_seconds: None,
            startup_timeout_seconds: None,
            tool_timeouts: BTreeMap::new(),
        }
    }

    /// Where the server runs: `run_on`, or the host if unset (every loader sets it).
    pub fn runs_on(&self) -> McpRunOn {
        self.run_on.unwrap_or(McpRunOn::Host)
    }
}

/// `[permissions]` of one config file as written (every key optional).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionsLayer {
    /// `mode`.
    pub mode: Option<PermissionMode>,
    /// `allow`.
    pub allow: Option<Vec<Rule>>,
    /// `ask`.
    pub ask: Option<Vec<Rule>>,
    /// `deny`.
    pub deny: Option<Vec<Rule>>,
}

/// `[sandbox]` of one config file as written (every key optional).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxLayer {
    /// `workspace_root` (a laptop setting; not part of the session policy).
    pub workspace_root: Option<PathBuf>,
    /// `allow_write`.
    pub allow_write: Option<Vec<PathBuf>>,
    /// `forbid_read`.
    pub forbid_read: Option<Vec<PathBuf>>,
    /// `bash`.
    pub bash: Option<BashSandbox>,
    /// `network`.
    pub network: Option<bool>,
    /// `ssh_agent` (`true`, `false` or `"confirm"`).
    #[serde(default)]
    pub ssh_agent: Option<crate::agent::AgentSetting>,
    /// `ssh_agent_approved`: key fingerprints that sign without a question in `confirm`
    /// mode (a laptop setting of the user's; a project file cannot set it).
    #[serde(default)]
    pub ssh_agent_approved: Option<Vec<String>>,
}

/// `[tools]` of one config file as written (every key optional).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsLayer {
    /// `enabled` (a laptop setting; not part of the session policy).
    pub enabled: Option<Vec<String>>,
    /// `bash_timeout_seconds`.
    pub bash_timeout_seconds: Option<u64>,
    /// `mcp_call_timeout_seconds`.
    pub mcp_call_timeout_seconds: Option<u64>,
}

/// What a project file says about the session policy.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProjectLayer {
    /// `[permissions]`.
    pub permissions: PermissionsLayer,
    /// `[sandbox]`.
    pub sandbox: SandboxLayer,
    /// `[tools]`.
    pub tools: ToolsLayer,
    /// Names of `[[mcp]]` entries that ask for `run_on = "laptop"`.
    pub laptop_mcp: Vec<String>,
}

/// One project setting [`tighten`] refused, with the reason and what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ignored {
    /// Dotted key as written in the file (`sandbox.allow_write`, `[[mcp]] docs`).
    pub key: String,
    /// The refused value as written.
    pub value: String,
    /// Why, and where the setting belongs instead.
    pub why: String,
}

impl fmt::Display for Ignored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{PROJECT_FILE}: ignored {} = {}: {}",
            self.key, self.value, self.why
        )
    }
}

/// The result of [`tighten`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tightened {
    /// The policy to enforce.
    pub policy: SessionPolicy,
    /// What the project file tried and was refused, in file order.
    pub ignored: Vec<Ignored>,
}

/// Apply an untrusted project layer to `base` (the trusted policy from defaults, user config
/// and flags). The project may pick a stricter mode, add ask and deny rules, enforce the bash
/// sandbox, turn the network off, hide more paths and shorten timeouts. Everything else it
/// tries (allow rules, a looser mode, `bash = "off"`, `network = true`, any `allow_write`
/// entry, longer timeouts, laptop MCP servers) is refused and reported.
///
/// Idempotent: applying the same layer twice gives the same policy and the same notices, so a
/// host re-applying a file the laptop already applied changes nothing.
pub fn tighten(base: &SessionPolicy, project: &ProjectLayer) -> Tightened {
    let mut p = base.clone();
    let mut ignored = Vec::new();
    let mut refuse = |key: &str, value: String, why: String| {
        ignored.push(Ignored {
            key: key.to_string(),
            value,
            why,
        })
    };

    let perms = &project.permissions;
    if let Some(mode) = perms.mode {
        if mode.strictness() >= p.mode.strictness() {
            p.mode = mode;
        } else {
            refuse(
                "permissions.mode",
                format!("\"{mode}\""),
                format!(
                    "a project file may only tighten the mode (yours is \"{}\")",
                    p.mode
                ),
            );
        }
    }
    for r in perms.allow.iter().flatten() {
        refuse(
            "permissions.allow",
            format!("\"{r}\""),
            "a project file cannot allow anything; add allow rules to your user config".into(),
        );
    }
    union_into(&mut p.rules.ask, perms.ask.iter().flatten());
    union_into(&mut p.rules.deny, perms.deny.iter().flatten());

    let sb = &project.sandbox;
    match sb.bash {
        // Tightness: off < enforce (bwrap or Landlock) < bwrap.
        Some(BashSandbox::Bwrap) => p.sandbox.bash = BashSandbox::Bwrap,
        Some(BashSandbox::Enforce) => {
            if p.sandbox.bash == BashSandbox::Off {
                p.sandbox.bash = BashSandbox::Enforce;
            }
        }
        Some(BashSandbox::Off) if p.sandbox.bash != BashSandbox::Off => refuse(
            "sandbox.bash",
            "\"off\"".into(),
            "a project file cannot turn the bash sandbox off".into(),
        ),
        Some(BashSandbox::Off) | None => {}
    }
    match sb.network {
        Some(false) => p.sandbox.network = false,
        Some(true) if !p.sandbox.network => refuse(
            "sandbox.network",
            "true".into(),
            "a project file cannot turn network access on".into(),
        ),
        Some(true) | None => {}
    }
    match sb.ssh_agent {
        Some(crate::agent::AgentSetting::Off) => p.sandbox.ssh_agent = false,
        Some(s) if !p.sandbox.ssh_agent => refuse(
            "sandbox.ssh_agent",
            if s == crate::agent::AgentSetting::Confirm {
                "\"confirm\"".into()
            } else {
                "true".into()
            },
            "a project file cannot give the bash tool the forwarded ssh-agent".into(),
        ),
        Some(_) | None => {}
    }
    if sb.ssh_agent_approved.is_some() {
        refuse(
            "sandbox.ssh_agent_approved",
            "[…]".into(),
            "a project file cannot pre-approve ssh-agent keys".into(),
        );
    }
    for w in sb.allow_write.iter().flatten() {
        // Inside the workspace an entry adds nothing (it is writable already) except
        // unprotecting what the sandbox re-protects (`.git` internals); outside it is the
        // loosening itself. So a project file never adds writable roots.
        refuse(
            "sandbox.allow_write",
            format!("\"{}\"", w.display()),
            "a project file cannot make paths writable; add writable roots to your user config"
                .into(),
        );
    }
    for f in sb.forbid_read.iter().flatten() {
        if !p.sandbox.forbid_read.contains(f) {
            p.sandbox.forbid_read.push(f.clone());
        }
    }

    for (key, wanted, slot) in [
        (
            "tools.bash_timeout_seconds",
            project.tools.bash_timeout_seconds,
            &mut p.timeouts.bash_seconds,
        ),
        (
            "tools.mcp_call_timeout_seconds",
            project.tools.mcp_call_timeout_seconds,
            &mut p.timeouts.mcp_call_seconds,
        ),
    ] {
        match wanted {
            Some(0) => refuse(key, "0".into(), "must be at least 1 second".into()),
            Some(v) if v <= *slot => *slot = v,
            Some(v) => refuse(
                key,
                v.to_string(),
                format!("a project file may only shorten a timeout (yours is {slot} s)"),
            ),
            None => {}
        }
    }

    for name in &project.laptop_mcp {
        refuse(
            &format!("[[mcp]] `{name}` run_on"),
            "\"laptop\"".into(),
            "a project file cannot start programs on the laptop; it runs on the host like every workspace server".into(),
        );
    }
    Tightened { policy: p, ignored }
}

fn union_into<'a>(list: &mut Vec<Rule>, more: impl Iterator<Item = &'a Rule>) {
    for r in more {
        if !list.contains(r) {
            list.push(r.clone());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    fn rules(v: &[&str]) -> Vec<Rule> {
        v.iter().map(|r| Rule::parse(r).unwrap()).collect()
    }

    fn every_loosening() -> ProjectLayer {
        ProjectLayer {
            permissions: PermissionsLayer {
                mode: Some(PermissionMode::Yolo),
                allow: Some(rules(&["Bash", "Edit"])),
                ask: Some(rules(&["Read(secret/**)"])),
                deny: Some(rules(&["Bash(curl:*)"])),
            },
            sandbox: SandboxLayer {
                workspace_root: None,
                allow_write: Some(vec!["/etc".into(), "../sibling".into(), "build".into()]),
                forbid_read: Some(vec!["secrets".into()]),
                bash: Some(BashSandbox::Off),
                network: Some(true),
                ssh_agent: Some(crate::agent::AgentSetting::On),
                ssh_agent_approved: None,
            },
            tools: ToolsLayer {
                enabled: None,
                bash_timeout_seconds: Some(100_000),
                mcp_call_timeout_seconds: Some(100_000),
            },
            laptop_mcp: vec!["evil".into()],
        }
    }

    #[test]
    fn every_loosening_is_refused_and_every_tightening_taken() {
        let base = SessionPolicy {
            sandbox: SandboxPolicy {
                network: false,
                ..SandboxPolicy::default()
            },
            ..SessionPolicy::default()
        };
        let out = tighten(&base, &every_loosening());
        assert_eq!(out.policy.mode, PermissionMode::Ask);
        assert!(out.policy.rules.allow.is_empty());
        assert_eq!(out.policy.rules.ask, ["Read(secret/**)"]);
        assert_eq!(out.policy.rules.deny, ["Bash(curl:*)"]);
        assert_eq!(out.policy.sandbox.bash, BashSandbox::Enforce);
        assert!(!out.policy.sandbox.network);
        assert!(!out.policy.sandbox.ssh_agent);
        assert!(out.policy.sandbox.allow_write.is_empty());
        assert_eq!(out.policy.sandbox.forbid_read, [PathBuf::from("secrets")]);
        assert_eq!(out.policy.timeouts.bash_seconds, DEFAULT_BASH_TIMEOUT_SECS);
        assert_eq!(
            out.policy.timeouts.mcp_call_seconds,
            DEFAULT_MCP_CALL_TIMEOUT_SECS
        );
        let keys: Vec<&str> = out.ignored.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "permissions.mode",
                "permissions.allow",
                "permissions.allow",
                "sandbox.bash",
                "sandbox.network",
                "sandbox.ssh_agent",
                "sandbox.allow_write",
                "sandbox.allow_write",
                "sandbox.allow_write",
                "tools.bash_timeout_seconds",
                "tools.mcp_call_timeout_seconds",
                "[[mcp]] `evil` run_on",
            ]
        );
        assert!(out.ignored[0]
            .to_string()
            .starts_with("reasonix.toml: ignored permissions.mode = \"yolo\""));
    }

    #[test]
    fn a_project_may_insist_on_bwrap_but_not_relax_it() {
        let mut base = SessionPolicy::default();
        let layer = |b| ProjectLayer {
            sandbox: SandboxLayer {
                bash: Some(b),
                ..SandboxLayer::default()
            },
            ..ProjectLayer::default()
        };
        assert_eq!(
            tighten(&base, &layer(BashSandbox::Bwrap))
                .policy
                .sandbox
                .bash,
            BashSandbox::Bwrap
        );
        base.sandbox.bash = BashSandbox::Bwrap;
        assert_eq!(
            tighten(&base, &layer(BashSandbox::Enforce))
                .policy
                .sandbox
                .bash,
            BashSandbox::Bwrap
        );
        let out = tighten(&base, &layer(BashSandbox::Off));
        assert_eq!(out.policy.sandbox.bash, BashSandbox::Bwrap);
        assert_eq!(out.ignored.len(), 1);
    }

    #[test]
    fn idempotent_and_never_looser_than_the_base() {
        for mode in [
            PermissionMode::Ask,
            PermissionMode::Auto,
            PermissionMode::Yolo,
        ] {
            for bash in [BashSandbox::Enforce, BashSandbox::Bwrap, BashSandbox::Off] {
                for network in [true, false] {
                    let base = SessionPolicy {
                        mode,
                        rules: Rules {
                            allow: rules(&["Bash(ls:*)"]),
                            ..Rules::default()
                        },
                        sandbox: SandboxPolicy {
                            bash,
                            network,
                            allow_write: vec!["/opt/cache".into()],
                            forbid_read: Vec::new(),
                            ssh_agent: false,
                        },
                        timeouts: Timeouts::default(),
                    };
                    for layer in [every_loosening(), ProjectLayer::default()] {
                        let once = tighten(&base, &layer);
                        let twice = tighten(&once.policy, &layer);
                        assert_eq!(once.policy, twice.policy);
                        assert_eq!(once.ignored, twice.ignored);
                        let p = &once.policy;
                        assert!(p.mode.strictness() >= base.mode.strictness());
                        assert_eq!(p.rules.allow, base.rules.allow);
                        assert_eq!(p.sandbox.allow_write, base.sandbox.allow_write);
                        assert!(base.sandbox.network || !p.sandbox.network);
                        let rank = |b: BashSandbox| match b {
                            BashSandbox::Off => 0,
                            BashSandbox::Enforce => 1,
                            BashSandbox::Bwrap => 2,
                        };
                        assert!(rank(p.sandbox.bash) >= rank(base.sandbox.bash));
                        assert!(p.timeouts.bash_seconds <= base.timeouts.bash_seconds);
                        assert!(p.timeouts.mcp_call_seconds <= base.timeouts.mcp_call_seconds);
                    }
                }
            }
        }
    }

    #[test]
    fn a_stricter_project_is_taken() {
        let base = SessionPolicy {
            mode: PermissionMode::Yolo,
            sandbox: SandboxPolicy {
                bash: BashSandbox::Off,
                ssh_agent: true,
                ..SandboxPolicy::default()
            },
            ..SessionPolicy::default()
        };
        let layer = ProjectLayer {
            permissions: PermissionsLayer {
                mode: Some(PermissionMode::Auto),
                ..PermissionsLayer::default()
            },
            sandbox: SandboxLayer {
                bash: Some(BashSandbox::Enforce),
                network: Some(false),
                ssh_agent: Some(crate::agent::AgentSetting::Off),
                ..SandboxLayer::default()
            },
            tools: ToolsLayer {
                bash_timeout_seconds: Some(5),
                mcp_call_timeout_seconds: Some(7),
                ..ToolsLayer::default()
            },
            laptop_mcp: Vec::new(),
        };
        let out = tighten(&base, &layer);
        assert!(out.ignored.is_empty(), "{:?}", out.ignored);
        assert_eq!(out.policy.mode, PermissionMode::Auto);
        assert_eq!(out.policy.sandbox.bash, BashSandbox::Enforce);
        assert!(!out.policy.sandbox.network);
        assert!(
            !out.policy.sandbox.ssh_agent,
            "a project may take the agent away"
        );
        assert_eq!(out.policy.timeouts.bash_seconds, 5);
        assert_eq!(out.policy.timeouts.mcp_call_seconds, 7);
    }

    #[test]
    fn rules_are_checked_on_deserialisation() {
        let ok: Rules =
            serde_json::from_str(r#"{"allow":["Bash(git status:*)"," Edit "]}"#).unwrap();
        assert_eq!(ok.allow, ["Bash(git status:*)", "Edit"]);
        for bad in ["\"\"", "\"Bash(\"", "\"Bash()\"", "\"rm -rf /\""] {
            let e = serde_json::from_str::<Rule>(bad).unwrap_err().to_string();
            assert!(e.contains("invalid permission rule"), "{bad}: {e}");
        }
        let wire = serde_json::to_string(&SessionPolicy::default()).unwrap();
        let back: SessionPolicy = serde_json::from_str(&wire).unwrap();
        assert_eq!(back, SessionPolicy::default());
        assert!(
            serde_json::from_str::<SessionPolicy>(&wire.replace("\"ask\"", "\"loose\"")).is_err(),
            "an unknown mode is refused, never read as a default"
        );
    }

    #[test]
    fn mcp_server_spec_defaults_aliases_and_unknown_keys() {
        let s: McpServerSpec =
            serde_json::from_str(r#"{"name":"t","command":"c","call_timeout_seconds":9}"#).unwrap();
        assert_eq!(s.run_on, None, "left for the loader to set");
        assert_eq!(s.runs_on(), McpRunOn::Host);
        assert_eq!(s.timeout_seconds, Some(9));
        assert_eq!(
            McpServerSpec::stdio("t", "c", &[]).run_on,
            Some(McpRunOn::Host)
        );
        assert_eq!(
            McpServerSpec::http("h", "http://x/").runs_on(),
            McpRunOn::Host
        );
        let laptop: McpServerSpec =
            serde_json::from_str(r#"{"name":"t","command":"c","run_on":"laptop"}"#).unwrap();
        assert_eq!(laptop.runs_on(), McpRunOn::Laptop);
        let e = serde_json::from_str::<McpServerSpec>(r#"{"name":"t","command":"c","colour":1}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `colour`"), "{e}");
        assert_eq!(serde_json::to_string(&McpRunOn::Host).unwrap(), "\"host\"");
    }
}
