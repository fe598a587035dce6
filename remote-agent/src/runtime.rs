//! Assembles the per-daemon runtime: tool registry, MCP servers, checkpoints and the base
//! tool context.
//!
//! Security settings are not per daemon: the driving client sends its policy with every
//! session open, and the host tightens it with the workspace's `reasonix.toml` read at that
//! open ([`crate::project`]).

use std::path::Path;
use std::sync::Arc;

use crate::checkpoint::{default_state_dir, CheckpointStore};
use crate::mcp::{load_workspace_servers, McpManager, McpSettings};
use crate::paths::HostPaths;
use crate::sandbox::{Sandbox, SandboxConfig};
use crate::session::Runtime;
use crate::tools::{ToolContext, ToolRegistry};

/// Build the runtime for `workspace`: probe the sandbox, start the workspace's MCP servers
/// (`reasonix.toml` `[[mcp]]` and `.mcp.json`) and register their tools next to the built-ins.
pub async fn build(paths: &HostPaths) -> Runtime {
    let workspace: &Path = &paths.workspace;
    // The daemon's own sandbox (defaults) only reports whether bwrap works and serves as the
    // base of every session's tool context; each session open builds its own sandbox and
    // limits from the policy it was sent (see `crate::project::enforce`).
    let sandbox = Arc::new(Sandbox::probe_async(SandboxConfig::default(), workspace).await);
    let tool_ctx = ToolContext::new(workspace, sandbox);
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
