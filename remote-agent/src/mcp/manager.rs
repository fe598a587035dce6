//! The servers of a session: start, restart on next use after a crash, status, tools.

use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reasonix_forward::policy::{McpRunOn, McpServerSpec};
use reasonix_forward::sync::LockExt;
use serde::{Deserialize, Serialize};

use super::client::{McpClient, McpToolInfo};
use super::tool::{exposed_names, McpTool};
use super::transport::{BrokenTransport, McpTransport};
use super::{McpError, DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT};
use crate::tools::ToolRegistry;

/// Session-wide MCP limits (overridden per server and per tool by the spec).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpSettings {
    /// `tools/call` timeout of direct [`McpTool::call`]s (default 300 s). Calls made as a
    /// session's tool take the session policy's limit instead
    /// ([`ToolContext::mcp_call_timeout`](crate::tools::ToolContext::mcp_call_timeout)).
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
    pub run_on: McpRunOn,
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
    /// Directories answered to the server's `roots/list` (the workspace, for host servers).
    roots: Option<Vec<std::path::PathBuf>>,
    /// How many `notifications/tools/list_changed` were seen, and how many of them the
    /// current `tools` already reflect.
    changes: AtomicU64,
    listed_at: AtomicU64,
}

impl Server {
    /// The number of tool-list changes the server announced so far.
    pub(crate) fn poll_changes(&self) -> u64 {
        if let Ok(slot) = self.slot.try_lock() {
            if slot.as_ref().is_some_and(|c| c.take_tools_changed()) {
                self.changes.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.changes.load(Ordering::Relaxed)
    }

    /// Lists the tools again when the server announced a change since the last listing (for
    /// sessions opened from now on; a session already open keeps its own tool objects).
    async fn relist_if_changed(&self) {
        let changes = self.poll_changes();
        if changes == self.listed_at.load(Ordering::Relaxed) {
            return;
        }
        let client = self.slot.lock().await.clone();
        let Some(client) = client.filter(|c| c.is_alive()) else {
            return;
        };
        match client.list_tools(self.startup_timeout).await {
            Ok(tools) => {
                tracing::info!(target: "mcp", server = %self.spec.name, tools = tools.len(), "MCP tools listed again after a change");
                *self.tools.lock_or_recover() = Some(tools);
                self.listed_at.store(changes, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::warn!(target: "mcp", server = %self.spec.name, "listing the changed tools failed: {e}");
            }
        }
    }

    fn set_state(&self, s: McpServerState) {
        *self.state.lock_or_recover() = s;
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
            let client =
                McpClient::connect_with_roots(&self.spec.name, conn, limit, self.roots.as_deref())
                    .await?;
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
                *self.tools.lock_or_recover() = Some(tools);
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

    /// The server's or tool's own call timeout, when its spec sets one.
    fn tool_timeout(&self, tool: &str) -> Option<Duration> {
        if let Some(s) = self.spec.tool_timeouts.get(tool) {
            return Some(Duration::from_secs(*s));
        }
        self.spec.timeout_seconds.map(Duration::from_secs)
    }

    /// True when a new session should (re)try starting it: never started, or its start
    /// failed before it ever listed tools (a server that was ready once restarts on its next
    /// call instead).
    fn needs_start(&self) -> bool {
        match &*self.state.lock_or_recover() {
            McpServerState::Starting => true,
            McpServerState::Failed { .. } => self.tools.lock_or_recover().is_none(),
            McpServerState::Ready => false,
        }
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
            spec.run_on = Some(McpRunOn::Laptop);
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
        self.add_with_roots(spec, transport, None);
    }

    /// [`add`](Self::add), answering the server's `roots/list` with `roots`.
    pub fn add_with_roots(
        &mut self,
        spec: McpServerSpec,
        transport: Arc<dyn McpTransport>,
        roots: Option<Vec<std::path::PathBuf>>,
    ) {
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
            roots,
            changes: AtomicU64::new(0),
            listed_at: AtomicU64::new(0),
            spec,
        });
        self.servers.retain(|s| s.spec.name != server.spec.name);
        self.servers.push(server);
    }

    /// Adds a server that runs on the host: stdio in `cwd` or HTTP, per its spec. A spec that
    /// cannot be turned into a transport (unset variable, neither command nor url, laptop
    /// placement) is still listed and fails at start with the reason.
    pub fn add_host(&mut self, spec: McpServerSpec, cwd: &Path) {
        self.add_host_signed_in(spec, cwd, None);
    }

    /// [`add_host`](Self::add_host); an HTTP server asks `tokens` (the attached laptop) for
    /// its sign-in token at every connection.
    pub fn add_host_signed_in(
        &mut self,
        spec: McpServerSpec,
        cwd: &Path,
        tokens: Option<Arc<super::LaptopTokens>>,
    ) {
        let transport = match super::transport::transport_signed_in(&spec, cwd, tokens) {
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
        // Host servers run in the workspace: it is their one root.
        let root = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
        self.add_with_roots(spec, transport, Some(vec![root]));
    }

    /// Per server, how many tool-list changes it announced so far (`notifications/tools/
    /// list_changed`). A session compares this with what it saw to tell the user.
    pub fn tool_list_changes(&self) -> Vec<(String, u64)> {
        self.servers
            .iter()
            .map(|s| (s.spec.name.clone(), s.poll_changes()))
            .collect()
    }

    /// Lists again the tools of servers that announced a change (a new session gets them).
    pub(crate) async fn relist_changed(&self) {
        for s in &self.servers {
            s.relist_if_changed().await;
        }
    }

    /// The server of this exact spec, to share with another manager (a session opened
    /// after a config edit keeps the servers whose declaration did not change).
    pub(crate) fn server_with_spec(&self, spec: &McpServerSpec) -> Option<Arc<Server>> {
        self.servers.iter().find(|s| s.spec == *spec).cloned()
    }

    /// Adds a server another manager already runs (same process, same tools).
    pub(crate) fn add_shared(&mut self, server: Arc<Server>) {
        self.servers.retain(|s| s.spec.name != server.spec.name);
        self.servers.push(server);
    }

    /// Starts, concurrently, the servers never started and those whose start failed before
    /// they listed any tools. Used when a session opens.
    pub(crate) async fn start_needed(&self) {
        let mut set = tokio::task::JoinSet::new();
        for s in &self.servers {
            if !s.needs_start() {
                continue;
            }
            let s = s.clone();
            set.spawn(async move {
                let _ = s.client().await;
            });
        }
        while set.join_next().await.is_some() {}
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
            if *s.state.lock_or_recover() != McpServerState::Starting {
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

    /// The names of the servers, in declaration order.
    pub fn server_names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.spec.name.clone()).collect()
    }

    /// The live session with server `name` (started when it has none); `None` when no
    /// server has that name.
    pub async fn client_of(&self, name: &str) -> Option<Result<Arc<McpClient>, McpError>> {
        let server = self.servers.iter().find(|s| s.spec.name == name)?.clone();
        Some(server.client().await)
    }

    /// Drops the live connection to server `name` and connects again now (an HTTP server
    /// asks the laptop for its sign-in token anew). `false` when no server has that name; a
    /// failed connect is the server's listed state.
    pub async fn reconnect(&self, name: &str) -> bool {
        let Some(server) = self.servers.iter().find(|s| s.spec.name == name).cloned() else {
            return false;
        };
        *server.slot.lock().await = None;
        server.set_state(McpServerState::Starting);
        let _ = server.client().await;
        true
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
                reasonix_forward::sort::sort(&mut names);
                McpServerStatus {
                    name: s.spec.name.clone(),
                    run_on: s.spec.runs_on(),
                    transport: s.transport.describe(),
                    state: s.state.lock_or_recover().clone(),
                    tools: names,
                    restarts: s.starts.load(Ordering::Relaxed).saturating_sub(1),
                }
            })
            .collect();
        reasonix_forward::sort::sort_by(&mut out, |a, b| a.name.cmp(&b.name));
        out
    }

    /// The tools of every server that listed its tools at least once (a crashed server keeps
    /// its tools: calling one restarts it), with their exposed names.
    pub fn tools(&self) -> Vec<Arc<McpTool>> {
        let mut entries: Vec<(Arc<Server>, McpToolInfo)> = Vec::new();
        for s in &self.servers {
            if let Some(list) = s.tools.lock_or_recover().as_ref() {
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
                let own = server.tool_timeout(&info.name);
                Arc::new(McpTool::new(&name, &info, own, server.call_timeout, server))
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
