//! Assembles the per-daemon runtime: tool registry, MCP servers, checkpoints and the base
//! tool context.
//!
//! Security settings are not per daemon: the driving client sends its policy with every
//! session open, and the host tightens it with the workspace's `reasonix.toml` read at that
//! open ([`crate::project`]).

use std::path::Path;
use std::sync::Arc;

use crate::checkpoint::{default_state_dir, CheckpointStore};
use crate::mcp::{McpSettings, WorkspaceMcp};
use crate::paths::HostPaths;
use crate::sandbox::{Sandbox, SandboxConfig};
use crate::session::Runtime;
use crate::tools::{ToolContext, ToolRegistry};

/// Build the runtime for `workspace`: probe the sandbox and start the workspace's MCP servers
/// (`reasonix.toml` `[[mcp]]` and `.mcp.json`) so the first session finds them ready. Each
/// session open re-reads that declaration ([`WorkspaceMcp::refresh`]).
pub async fn build(paths: &HostPaths) -> Runtime {
    let workspace: &Path = &paths.workspace;
    // The daemon's own sandbox (defaults) only reports whether bwrap works and serves as the
    // base of every session's tool context; each session open builds its own sandbox and
    // limits from the policy it was sent (see `crate::project::enforce`).
    let sandbox = Arc::new(Sandbox::probe_async(SandboxConfig::default(), workspace).await);
    let mut tool_ctx = ToolContext::new(workspace, sandbox);
    tool_ctx.memory = Some(Arc::new(crate::memory::Memory::open(
        reasonix_forward::memory::project_dir(&paths.home, &paths.key),
        workspace,
    )));
    let registry = ToolRegistry::builtin();
    let mcp = WorkspaceMcp::new(workspace.to_path_buf(), McpSettings::default());
    mcp.refresh().await;
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
        mcp,
        checkpoints,
    }
}
