//! The workspace's `reasonix.toml` as the host reads it at every session open, and what a
//! session enforces: the driver's [`SessionPolicy`] tightened by that file with the shared
//! [`reasonix_forward::policy::tighten`], compiled into a permission [`Policy`], a probed
//! [`Sandbox`] and the file tools' limits.
//!
//! The host reads the file itself because it is the side that sees the workspace (over SSH
//! the laptop cannot); it re-reads it per open, so an edit applies to the next session open
//! without restarting the daemon.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use reasonix_forward::policy::{
    tighten, BashSandbox, McpRunOn, PermissionMode, PermissionsLayer, ProjectLayer, SandboxLayer,
    SessionPolicy, Tightened, ToolsLayer, PROJECT_FILE,
};
use serde::Deserialize;

use crate::policy::{Mode, Policy};
use crate::sandbox::{Sandbox, SandboxConfig, SandboxMode};
use crate::tools::ToolContext;

/// Why a session's policy could not be set up. The session is then not opened: a project
/// file that cannot be read might hold deny rules, so it is never skipped silently.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// The project file exists but cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The project file is not valid TOML or has a wrong key or value.
    #[error("{}: {message}; fix the file (a project file may only tighten security) or move it away", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said, with the line.
        message: String,
    },
    /// A permission rule does not compile.
    #[error("{0}")]
    Rules(String),
}

/// The keys of a project file the host looks at. Laptop settings are accepted and ignored
/// here (the laptop reads them in local mode); anything else is an error, as on the laptop.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct HostView {
    #[serde(default)]
    permissions: PermissionsLayer,
    #[serde(default)]
    sandbox: SandboxLayer,
    #[serde(default)]
    tools: ToolsLayer,
    #[serde(default)]
    mcp: Vec<McpEntry>,
    #[serde(default, rename = "default_model")]
    _default_model: Option<toml::Value>,
    #[serde(default, rename = "providers")]
    _providers: Option<toml::Value>,
    #[serde(default, rename = "agent")]
    _agent: Option<toml::Value>,
    /// Hooks are not read from here (see `crate::hooks`); the laptop warns about them.
    #[serde(default, rename = "hooks")]
    _hooks: Option<toml::Value>,
}

/// Only where an `[[mcp]]` entry asks to run (the MCP loader reads the rest).
#[derive(Debug, Deserialize)]
struct McpEntry {
    name: String,
    #[serde(default)]
    run_on: Option<McpRunOn>,
    #[serde(flatten)]
    _rest: toml::Table,
}

/// Parse a project file's text into the layer [`tighten`] takes.
pub fn parse_layer(path: &Path, text: &str) -> Result<ProjectLayer, ProjectError> {
    let view: HostView = toml::from_str(text).map_err(|e| ProjectError::Parse {
        path: path.to_path_buf(),
        message: e.to_string().trim().replace('\n', " "),
    })?;
    Ok(ProjectLayer {
        permissions: view.permissions,
        sandbox: view.sandbox,
        tools: view.tools,
        laptop_mcp: view
            .mcp
            .into_iter()
            .filter(|m| m.run_on == Some(McpRunOn::Laptop))
            .map(|m| m.name)
            .collect(),
    })
}

/// Read `<workspace>/reasonix.toml` (missing = an empty layer).
pub fn read_layer(workspace: &Path) -> Result<ProjectLayer, ProjectError> {
    let path = workspace.join(PROJECT_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_layer(&path, &text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ProjectLayer::default()),
        Err(source) => Err(ProjectError::Read { path, source }),
    }
}

/// What one session enforces.
#[derive(Clone)]
pub struct Enforced {
    /// The policy after the project file, as sent back to clients.
    pub policy: SessionPolicy,
    /// The project settings that were refused.
    pub ignored: Vec<reasonix_forward::policy::Ignored>,
    /// The compiled permission rules.
    pub rules: Policy,
    /// Tool context (sandbox, writable roots, hidden paths, bash timeout) built from it;
    /// shared parts (jobs, plan, checkpoint hook) come from the base context.
    pub tool_ctx: ToolContext,
}

/// Tighten `received` with the workspace's project file and build what the session
/// enforces. `base` supplies the shared parts of the tool context.
pub fn enforce(
    received: &SessionPolicy,
    workspace: &Path,
    base: &ToolContext,
) -> Result<Enforced, ProjectError> {
    let layer = read_layer(workspace)?;
    let Tightened { policy, ignored } = tighten(received, &layer);
    for i in &ignored {
        tracing::warn!("{i}");
    }
    let strings = |v: &[reasonix_forward::policy::Rule]| -> Vec<String> {
        v.iter().map(|r| r.as_str().to_string()).collect()
    };
    let mode = match policy.mode {
        PermissionMode::Ask => Mode::Ask,
        PermissionMode::Auto => Mode::Auto,
        PermissionMode::Yolo => Mode::Yolo,
    };
    let rules = Policy::new(
        mode,
        &strings(&policy.rules.allow),
        &strings(&policy.rules.ask),
        &strings(&policy.rules.deny),
    )
    .map_err(|e| ProjectError::Rules(e.to_string()))?
    // Path rules match canonical workspace-relative paths.
    .with_workspace(&base.workspace);

    let home = std::env::var_os("HOME").map(PathBuf::from);
    let resolve = |p: &Path| resolve_path(p, workspace, home.as_deref());
    let mut sandbox_config = SandboxConfig::defaults_for_home(home.as_deref());
    sandbox_config.bash = match policy.sandbox.bash {
        BashSandbox::Enforce => SandboxMode::Enforce,
        BashSandbox::Bwrap => SandboxMode::Bwrap,
        BashSandbox::Off => SandboxMode::Off,
    };
    sandbox_config.network = policy.sandbox.network;
    sandbox_config.ssh_agent = policy.sandbox.ssh_agent;
    sandbox_config.allow_write = policy
        .sandbox
        .allow_write
        .iter()
        .map(|p| resolve(p))
        .collect();
    for f in &policy.sandbox.forbid_read {
        let f = resolve(f);
        if !sandbox_config.forbid_read.contains(&f) {
            sandbox_config.forbid_read.push(f);
        }
    }
    // A directory denied to every reader is hidden from bash too.
    for d in rules.denied_read_dirs() {
        if !sandbox_config.forbid_read.contains(&d) {
            sandbox_config.forbid_read.push(d);
        }
    }
    // Keep the injected bwrap of the daemon's own sandbox (tests point it elsewhere).
    sandbox_config.bwrap_path = base.sandbox.config().bwrap_path.clone();
    let sandbox = Arc::new(Sandbox::probe(sandbox_config.clone(), workspace));
    let mut tool_ctx = base.clone();
    tool_ctx.allow_write = sandbox_config.allow_write.clone();
    tool_ctx.forbid_read = sandbox_config.forbid_read.clone();
    tool_ctx.bash_timeout = Duration::from_secs(policy.timeouts.bash_seconds.max(1));
    tool_ctx.mcp_call_timeout = Duration::from_secs(policy.timeouts.mcp_call_seconds.max(1));
    tool_ctx.sandbox = sandbox;
    tool_ctx.read_filter = Arc::new(rules.read_filter());
    // Deny rules on file writers hold for bash too: read-only mounts and the after-call
    // check (none when there is no such rule).
    tool_ctx.deny_guard =
        crate::tools::DenyGuard::for_workspace(rules.write_deny_rules(), &base.workspace);
    Ok(Enforced {
        policy,
        ignored,
        rules,
        tool_ctx,
    })
}

/// `~/x` from the host user's home, relative paths from the workspace, `.`/`..` removed.
fn resolve_path(p: &Path, workspace: &Path, home: Option<&Path>) -> PathBuf {
    let joined = match (p.strip_prefix("~"), home) {
        (Ok(rest), Some(h)) => h.join(rest),
        _ if p.is_absolute() => p.to_path_buf(),
        _ => workspace.join(p),
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    #[test]
    fn laptop_keys_are_accepted_unknown_keys_refused() {
        let p = Path::new("/w/reasonix.toml");
        let layer = parse_layer(
            p,
            "default_model = \"x\"\n[agent]\nmax_steps = 3\n[[providers]]\nname = \"a\"\nbase_url = \"http://evil\"\n[[mcp]]\nname = \"l\"\ncommand = \"sh\"\nrun_on = \"laptop\"\n[[mcp]]\nname = \"h\"\ncommand = \"sh\"\n",
        )
        .unwrap();
        assert_eq!(layer.laptop_mcp, ["l"]);
        let e = parse_layer(p, "[sandbox]\nallow_writes = [\"/\"]\n").unwrap_err();
        assert!(e.to_string().contains("allow_writes"), "{e}");
        let e = parse_layer(p, "[permissions]\nallow = [\"Bash(\"]\n").unwrap_err();
        assert!(e.to_string().contains("invalid permission rule"), "{e}");
    }

    #[test]
    fn paths_resolve_against_workspace_and_home() {
        let ws = Path::new("/w/ws");
        let home = Some(Path::new("/home/u"));
        assert_eq!(
            resolve_path(Path::new("a/../b"), ws, home),
            PathBuf::from("/w/ws/b")
        );
        assert_eq!(
            resolve_path(Path::new("~/.cache"), ws, home),
            PathBuf::from("/home/u/.cache")
        );
        assert_eq!(
            resolve_path(Path::new("/opt/x"), ws, home),
            PathBuf::from("/opt/x")
        );
    }
}
