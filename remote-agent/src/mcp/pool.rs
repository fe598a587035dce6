//! The workspace's MCP servers across the sessions of one daemon: the declaration is re-read
//! at every session open, so an edited `[[mcp]]` (or `.mcp.json`) applies to the next session
//! without restarting the daemon.
//!
//! A session's tool list is part of its cached prompt prefix, so it never changes while the
//! session lives: each open takes a *snapshot* (a [`McpManager`] of its own). Servers whose
//! declaration is unchanged are shared between snapshots (same process, same tools); a
//! changed or new declaration gets a new server; a removed one stops once the last session
//! that uses it is gone.

use std::path::PathBuf;
use std::sync::Arc;

use super::config::load_workspace_servers;
use super::manager::{McpManager, McpSettings};

/// What a session open gets: its servers and the notes about the configuration.
pub struct McpSnapshot {
    /// The session's workspace servers (their tools join its registry).
    pub manager: Arc<McpManager>,
    /// Adjusted or skipped entries, or why the configuration could not be read.
    pub warnings: Vec<String>,
}

/// The workspace servers of a daemon, refreshed per session open.
pub struct WorkspaceMcp {
    workspace: PathBuf,
    settings: McpSettings,
    /// The laptops that hold sign-in tokens of HTTP servers.
    tokens: Arc<super::LaptopTokens>,
    /// The latest snapshot. The async lock also serialises refreshes, so two opens never
    /// start the same new server twice.
    current: tokio::sync::Mutex<Arc<McpManager>>,
}

impl WorkspaceMcp {
    /// No servers until the first [`refresh`](Self::refresh).
    pub fn new(workspace: PathBuf, settings: McpSettings) -> Self {
        Self {
            workspace,
            settings,
            tokens: Arc::default(),
            current: tokio::sync::Mutex::new(Arc::new(McpManager::new(settings))),
        }
    }

    /// Re-read the workspace's declarations and return the servers a session opened now
    /// uses: unchanged ones shared with the previous snapshot, new or changed ones started
    /// (within their startup timeout; a failure is a listed state, not an error). Servers
    /// whose first start failed are tried again, so fixing a command applies to the next
    /// session too.
    pub async fn refresh(&self) -> McpSnapshot {
        let mut current = self.current.lock().await;
        let mut warnings = Vec::new();
        let specs = match load_workspace_servers(&self.workspace) {
            Ok(cfg) => {
                warnings.extend(cfg.warnings);
                cfg.servers
            }
            Err(e) => {
                warnings.push(format!("ignoring the workspace MCP configuration: {e}"));
                Vec::new()
            }
        };
        for w in &warnings {
            tracing::warn!("mcp config: {w}");
        }
        let mut next = McpManager::new(self.settings);
        let mut shared = 0usize;
        for spec in specs {
            match current.server_with_spec(&spec) {
                Some(server) => {
                    shared += 1;
                    next.add_shared(server);
                }
                None => {
                    next.add_host_signed_in(spec, &self.workspace, Some(Arc::clone(&self.tokens)))
                }
            }
        }
        next.start_needed().await;
        // A shared server that announced a new tool list: the new session gets the new list.
        next.relist_changed().await;
        let next = Arc::new(next);
        for s in next.status() {
            tracing::info!(server = %s.name, state = ?s.state, tools = s.tools.len(), "mcp server");
        }
        tracing::info!(shared, "workspace MCP servers refreshed");
        *current = Arc::clone(&next);
        McpSnapshot {
            manager: next,
            warnings,
        }
    }

    /// The laptops attached to the daemon, asked for the sign-in tokens of HTTP servers.
    pub fn laptop_tokens(&self) -> &Arc<super::LaptopTokens> {
        &self.tokens
    }

    /// The latest snapshot (for `/mcp` when no session is open).
    pub async fn current(&self) -> Arc<McpManager> {
        Arc::clone(&*self.current.lock().await)
    }
}
