//! The servers of a session: start, restart on next use after a crash, status, tools.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::client::{McpClient, McpToolInfo};
use super::config::{McpServerSpec, RunOn};
use super::tool::{exposed_names, McpTool};
use super::transport::{lock, transport_for_spec, BrokenTransport, McpTransport};
use super::{McpError, DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT};
use crate::tools::ToolRegistry;

/// Session-wide MCP limits (overridden per server and per tool by the spec).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpSettings {
    /// `tools/call` timeout (`[tools] mcp_call_timeout_seconds`, default 300 s).
    pub call_timeout: Duration,
    /// Spawn to listed tools (default 30 s).
    pub startup_timeout: Duration,
}

impl Default for McpSettings {
    fn default() -> Self {
        Self {
            call_timeout: DEFAULT_CALL_TIMEOUT,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
        }
    }
}

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum McpServerState {
    /// Not started yet, or being (re)started.
    Starting,
    /// Initialised and its tools listed.
    Ready,
    /// Start failed or the server died; `reason` says why (with its stderr tail). A server
    /// that was ready once is restarted on the next call of one of its tools.
    Failed {
        /// Why.
        reason: String,
    },
}

/// One line of `/mcp` / `reasonix mcp list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpServerStatus {
    /// Server name.
    pub name: String,
    /// Where it runs.
    pub run_on: RunOn,
    /// How it is reached (`stdio: …`, `http: …`, `channel: …`).
    pub transport: String,
    /// Its state.
    pub state: McpServerState,
    /// Exposed names of its tools (`mcp__srv__tool`), sorted.
    pub tools: Vec<String>,
    /// How many times it was started after the first start.
    pub restarts: u32,
}

impl McpServerStatus {
    /// The wire form shown by `/mcp` and `reasonix mcp list`.
    pub fn to_info(&self) -> reasonix_forward::proto::McpServerInfo {
        let (state, reason) = match &self.state {
            McpServerState::Starting => ("starting", None),
            McpServerState::Ready => ("ready", None),
            McpServerState::Failed { reason } => ("failed", Some(reason.clone())),
        };
        reasonix_forward::proto::McpServerInfo {
            name: self.name.clone(),
            run_on: self.run_on.as_str().to_string(),
            transport: self.transport.clone(),
            state: state.to_string(),
            reason,
            tools: self.tools.clone(),
        }
    }
}

/// One configured server and its current session.
pub(crate) struct Server {
    pub(crate) spec: McpServerSpec,
    transport: Arc<dyn McpTransport>,
    state: Mutex<McpServerState>,
    slot: tokio::sync::Mutex<Option<Arc<McpClient>>>,
    tools: Mutex<Option<Vec<McpToolInfo>>>,
    starts: AtomicU32,
    startup_timeout: Duration,
    call_timeout: Duration,
}

impl Server {
    fn set_state(&self, s: McpServerState) {
        *lock(&self.state) = s;
    }

    /// The live session, starting the server when it has none or its last one died.
    pub(crate) async fn client(&self) -> Result<Arc<McpClient>, McpError> {
        let mut slot = self.slot.lock().await;
        if let Some(c) = slot.as_ref() {
            if c.is_alive() {
                return Ok(c.clone());
            }
        }
        // Drop a dead session first: its guard kills whatever is left of the process group.
        *slot = None;
        self.set_state(McpServerState::Starting);
        self.starts.fetch_add(1, Ordering::Relaxed);
        let limit = self.startup_timeout;
        let started = tokio::time::timeout(limit, async {
            let conn = self.transport.open().await?;
            let client = McpClient::connect(&self.spec.name, conn, limit).await?;
            let tools = client.list_tools(limit).await?;
            Ok::<_, McpError>((client, tools))
        })
        .await
        .unwrap_or_else(|_| {
            Err(McpError::Timeout {
                what: "server startup (initialize + tools/list)".into(),
                after: limit,
            })
        });
        match started {
            Ok((client, tools)) => {
                tracing::info!(target: "mcp", server = %self.spec.name, tools = tools.len(), "MCP server ready");
                *lock(&self.tools) = Some(tools);
                let client = Arc::new(client);
                *slot = Some(client.clone());
                self.set_state(McpServerState::Ready);
                Ok(client)
            }
            Err(e) => {
                tracing::warn!(target: "mcp", server = %self.spec.name, "MCP server failed to start: {e}");
                self.set_state(McpServerState::Failed {
                    reason: e.to_string(),
                });
                Err(e)
            }
        }
    }

    /// Records that `client` died mid-call, unless a newer session already replaced it.
    pub(crate) async fn mark_crashed(&self, client: &Arc<McpClient>, reason: &str) {
        let mut slot = self.slot.lock().await;
        if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, client)) {
            *slot = None;
            self.set_state(McpServerState::Failed {
                reason: format!("{reason} (restarts on next use)"),
            });
        }
    }

    fn tool_timeout(&self, default: Duration, tool: &str) -> Duration {
        if let Some(s) = self.spec.tool_timeouts.get(tool) {
            return Duration::from_secs(*s);
        }
        self.spec
            .timeout_seconds
            .map(Duration::from_secs)
            .unwrap_or(default)
    }
}

/// All MCP servers of a session.
pub struct McpManager {
    settings: McpSettings,
    servers: Vec<Arc<Server>>,
}

impl McpManager {
    /// No servers yet.
    pub fn new(settings: McpSettings) -> Self {
        Self {
            settings,
            servers: Vec::new(),
        }
    }

    /// A manager of the laptop-side servers `names` (default settings), each reached through
    /// the tunnel channel that `opener(name)` opens on demand.
    pub fn laptop(names: &[String], opener: impl Fn(&str) -> super::ChannelOpener) -> Self {
        let mut manager = McpManager::new(McpSettings::default());
        for name in names {
            let mut spec = McpServerSpec::stdio(name, "laptop", &[]);
            spec.run_on = RunOn::Laptop;
            manager.add(
                spec,
                Arc::new(super::ChannelTransport::new("laptop", opener(name))),
            );
        }
        manager
    }

    /// Adds a server reached through `transport` (a later server of the same name replaces an
    /// earlier one). Laptop servers come in this way with a [`ChannelTransport`](super::ChannelTransport).
    pub fn add(&mut self, spec: McpServerSpec, transport: Arc<dyn McpTransport>) {
        let startup_timeout = spec
            .startup_timeout_seconds
            .map(Duration::from_secs)
            .unwrap_or(self.settings.startup_timeout);
        let server = Arc::new(Server {
            transport,
            state: Mutex::new(McpServerState::Starting),
            slot: tokio::sync::Mutex::new(None),
            tools: Mutex::new(None),
            starts: AtomicU32::new(0),
            startup_timeout,
            call_timeout: self.settings.call_timeout,
            spec,
        });
        self.servers.retain(|s| s.spec.name != server.spec.name);
        self.servers.push(server);
    }

    /// Adds a server that runs on the host: stdio in `cwd` or HTTP, per its spec. A spec that
    /// cannot be turned into a transport (unset variable, neither command nor url, laptop
    /// placement) is still listed and fails at start with the reason.
    pub fn add_host(&mut self, spec: McpServerSpec, cwd: &Path) {
        let transport = match transport_for_spec(&spec, cwd) {
            Ok(t) => t,
            Err(e) => Arc::new(BrokenTransport {
                reason: e.to_string(),
                label: match (&spec.command, &spec.url) {
                    (Some(c), _) => format!("stdio: {c}"),
                    (None, Some(u)) => format!("http: {u}"),
                    (None, None) => "none".to_string(),
                },
            }),
        };
        self.add(spec, transport);
    }

    /// Starts every server that is not running, concurrently, each within its startup timeout.
    /// Failures are recorded in [`status`](Self::status), not returned.
    pub async fn start_all(&self) {
        let mut set = tokio::task::JoinSet::new();
        for s in &self.servers {
            let s = s.clone();
            set.spawn(async move {
                let _ = s.client().await;
            });
        }
        while set.join_next().await.is_some() {}
    }

    /// Starts the servers that were never started (or are starting right now: this waits for
    /// that start to finish), concurrently. Failed servers are left failed (a crashed one
    /// restarts on its next tool call, not because someone looked at the list).
    pub async fn start_pending(&self) {
        let mut set = tokio::task::JoinSet::new();
        for s in &self.servers {
            if *lock(&s.state) != McpServerState::Starting {
                continue;
            }
            let s = s.clone();
            set.spawn(async move {
                // The slot lock is held by a start in progress; waiting on it waits for that
                // start. A server that became ready meanwhile is returned as it is.
                let _ = s.client().await;
            });
        }
        while set.join_next().await.is_some() {}
    }

    /// Every server, sorted by name.
    pub fn status(&self) -> Vec<McpServerStatus> {
        let tools = self.tools();
        let mut out: Vec<McpServerStatus> = self
            .servers
            .iter()
            .map(|s| {
                let mut names: Vec<String> = tools
                    .iter()
                    .filter(|t| t.server_name() == s.spec.name)
                    .map(|t| crate::tools::Tool::name(t.as_ref()).to_string())
                    .collect();
                names.sort();
                McpServerStatus {
                    name: s.spec.name.clone(),
                    run_on: s.spec.run_on,
                    transport: s.transport.describe(),
                    state: lock(&s.state).clone(),
                    tools: names,
                    restarts: s.starts.load(Ordering::Relaxed).saturating_sub(1),
                }
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The tools of every server that listed its tools at least once (a crashed server keeps
    /// its tools: calling one restarts it), with their exposed names.
    pub fn tools(&self) -> Vec<Arc<McpTool>> {
        let mut entries: Vec<(Arc<Server>, McpToolInfo)> = Vec::new();
        for s in &self.servers {
            if let Some(list) = lock(&s.tools).as_ref() {
                for t in list {
                    entries.push((s.clone(), t.clone()));
                }
            }
        }
        let pairs: Vec<(String, String)> = entries
            .iter()
            .map(|(s, t)| (s.spec.name.clone(), t.name.clone()))
            .collect();
        let names = exposed_names(&pairs);
        entries
            .into_iter()
            .zip(names)
            .map(|((server, info), name)| {
                let timeout = server.tool_timeout(server.call_timeout, &info.name);
                Arc::new(McpTool::new(&name, &info, timeout, server))
            })
            .collect()
    }

    /// Registers [`tools`](Self::tools) in `registry`; returns how many.
    pub fn register_tools(&self, registry: &mut ToolRegistry) -> usize {
        let tools = self.tools();
        let n = tools.len();
        for t in tools {
            registry.register(t);
        }
        n
    }

    /// Ends every session (stdio servers are killed). Tools called later start them again.
    pub async fn shutdown(&self) {
        for s in &self.servers {
            *s.slot.lock().await = None;
        }
    }
}
