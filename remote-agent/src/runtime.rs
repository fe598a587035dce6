//! Assembles the per-daemon runtime: tool registry, sandbox probe and tool context.
//!
//! Host-side settings come from the workspace's `reasonix.toml` (`[sandbox]`, `[tools]`);
//! the laptop's settings (model, permission mode and rules) arrive per session over the link.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::checkpoint::{default_state_dir, CheckpointStore};
use crate::mcp::{load_workspace_servers, McpManager, McpSettings};
use crate::paths::HostPaths;
use crate::sandbox::{Sandbox, SandboxConfig, SandboxMode};
use crate::session::Runtime;
use crate::tools::{ToolContext, ToolRegistry};

/// Build the runtime for `workspace`: probe the sandbox, start the workspace's MCP servers
/// (`reasonix.toml` `[[mcp]]` and `.mcp.json`) and register their tools next to the built-ins.
pub async fn build(paths: &HostPaths) -> Runtime {
    let workspace: &Path = &paths.workspace;
    let project = read_project_config(workspace);
    let mut sandbox_config = SandboxConfig::default();
    if let Some(sb) = project.as_ref().and_then(|p| p.get("sandbox")) {
        if sb.get("bash").and_then(|v| v.as_str()) == Some("enforce") {
            sandbox_config.bash = SandboxMode::Enforce;
        }
        if sb.get("network").and_then(|v| v.as_bool()) == Some(false) {
            sandbox_config.network = false;
        }
        for (key, list) in [
            ("allow_write", &mut sandbox_config.allow_write),
            ("forbid_read", &mut sandbox_config.forbid_read),
        ] {
            if let Some(items) = sb.get(key).and_then(|v| v.as_array()) {
                for item in items.iter().filter_map(|v| v.as_str()) {
                    list.push(workspace.join(item));
                }
            }
        }
    }
    let sandbox = Arc::new(Sandbox::probe_async(sandbox_config.clone(), workspace).await);
    let mut tool_ctx = ToolContext::new(workspace, sandbox);
    tool_ctx.allow_write = sandbox_config.allow_write.clone();
    if let Some(secs) = project
        .as_ref()
        .and_then(|p| p.get("tools"))
        .and_then(|t| t.get("bash_timeout_seconds"))
        .and_then(|v| v.as_integer())
        .filter(|s| *s > 0)
    {
        tool_ctx.bash_timeout = Duration::from_secs(secs as u64);
    }
    let mut registry = ToolRegistry::builtin();
    let mut mcp = McpManager::new(McpSettings::default());
    match load_workspace_servers(workspace) {
        Ok(cfg) => {
            for w in &cfg.warnings {
                tracing::warn!("mcp config: {w}");
            }
            for spec in cfg.servers {
                mcp.add_host(spec, workspace);
            }
        }
        Err(e) => tracing::warn!("ignoring the workspace MCP configuration: {e}"),
    }
    mcp.start_all().await;
    let registered = mcp.register_tools(&mut registry);
    for s in mcp.status() {
        tracing::info!(server = %s.name, state = ?s.state, tools = s.tools.len(), "mcp server");
    }
    tracing::info!(registered, "mcp tools registered");
    let checkpoints =
        match CheckpointStore::open(workspace, &default_state_dir(&paths.home, &paths.key)) {
            Ok(store) => {
                tracing::info!(coverage = %store.coverage(), "checkpoints ready");
                Some(Arc::new(store))
            }
            Err(e) => {
                tracing::warn!("checkpoints unavailable: {e}");
                None
            }
        };
    Runtime {
        registry,
        tool_ctx,
        mcp: Arc::new(mcp),
        checkpoints,
    }
}

fn read_project_config(workspace: &Path) -> Option<toml::Table> {
    let path = workspace.join("reasonix.toml");
    let text = std::fs::read_to_string(&path).ok()?;
    match text.parse::<toml::Table>() {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!("ignoring {}: {e}", path.display());
            None
        }
    }
}
