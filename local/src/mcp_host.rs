//! Laptop-side MCP servers: the laptop spawns a stdio MCP server from the user's config and
//! exposes its JSON-RPC stream as two line channels, which the link tunnels to the host's MCP
//! client (there a `ChannelTransport` makes it look exactly like a local stdio server).
//!
//! Glue for the link, per MCP channel the host opens (`crate::laptop_channels`):
//! ```text
//! let ch = host.open(&server)?;                 // (re)starts the process
//! send every `ch.from_server.recv()` line on the channel; at None the server is gone
//! feed every line from the channel into `ch.to_server.send(line)`
//! ```
//! Opening a server again kills the previous instance first, so a restart is just another
//! `open`.
//!
//! This file depends only on tokio, thiserror and `reasonix_forward` (no `crate::` paths), so
//! the host crate's tests can compile it as-is to drive a real server through the channel
//! transport. Spawning and pumping a line child is `reasonix_forward::child`, shared with
//! the host's own stdio servers.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use reasonix_forward::sync::LockExt;
use tokio::sync::mpsc;

/// Lines buffered in each direction.
const CHANNEL_DEPTH: usize = 256;

/// A laptop stdio server as configured (`[[mcp]]` with `run_on = "laptop"` in the user's
/// config). `${VAR}` / `${VAR:-default}` in command, args and env values are expanded from the
/// laptop's environment when it is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpHostSpec {
    /// Server name (the key an MCP channel's open names).
    pub name: String,
    /// Program.
    pub command: String,
    /// Arguments.
    pub args: Vec<String>,
    /// Extra environment (added to the inherited one).
    pub env: BTreeMap<String, String>,
    /// Working directory; the current one when `None`.
    pub cwd: Option<PathBuf>,
}

/// Opens a laptop server that is not a process of its own (an HTTP server the laptop
/// reaches, `crate::gateway::mcp_http`): its line channels, or why not.
pub type McpOpener = Arc<dyn Fn() -> Result<McpHostChannels, String> + Send + Sync>;

/// Why a laptop server could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum McpHostError {
    /// An opener ([`McpOpener`]) failed.
    #[error("laptop MCP server `{server}`: {message}")]
    Open {
        /// Server.
        server: String,
        /// Why.
        message: String,
    },
    /// No server of that name is configured on the laptop.
    #[error("no laptop MCP server named `{0}` is configured")]
    UnknownServer(String),
    /// A `${VAR}` without default names an unset variable.
    #[error(
        "laptop MCP server `{server}`: environment variable `{var}` is not set (used in {field})"
    )]
    UnsetVar {
        /// Server.
        server: String,
        /// Variable.
        var: String,
        /// Where (`command`, `args[0]`, `env.X`).
        field: String,
    },
    /// A `${…}` reference is malformed.
    #[error("laptop MCP server `{server}`: bad variable reference in {field}")]
    BadReference {
        /// Server.
        server: String,
        /// Where.
        field: String,
    },
    /// The process could not be started.
    #[error("laptop MCP server `{server}`: could not start `{command}`: {source}")]
    Spawn {
        /// Server.
        server: String,
        /// Program.
        command: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Stderr tail and exit status of one server process (the record the host keeps too).
pub use reasonix_forward::child::ChildDiagnostics as ServerDiagnostics;
/// Kills a server's process group when dropped.
pub use reasonix_forward::child::GroupGuard as ProcessGuard;

/// The two ends the link pumps. `from_server` yields `None` once the process is gone (after
/// its last line); its exit status and stderr tail are then in `diagnostics`.
pub struct McpHostChannels {
    /// Lines to the server (one JSON-RPC message each, no newline).
    pub to_server: mpsc::Sender<String>,
    /// Lines from the server.
    pub from_server: mpsc::Receiver<String>,
    /// Stderr tail and exit status.
    pub diagnostics: Arc<ServerDiagnostics>,
}

/// The laptop's MCP servers, at most one running instance each.
pub struct McpHost {
    specs: BTreeMap<String, McpHostSpec>,
    openers: BTreeMap<String, McpOpener>,
    running: Mutex<HashMap<String, ProcessGuard>>,
}

impl McpHost {
    /// A host for these servers; nothing is started yet.
    pub fn new(specs: impl IntoIterator<Item = McpHostSpec>) -> Self {
        Self {
            specs: specs.into_iter().map(|s| (s.name.clone(), s)).collect(),
            openers: BTreeMap::new(),
            running: Mutex::new(HashMap::new()),
        }
    }

    /// Adds server `name`, opened by `opener` instead of a process.
    pub fn with_opener(mut self, name: &str, opener: McpOpener) -> Self {
        self.openers.insert(name.to_string(), opener);
        self
    }

    /// Names of the configured servers, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.specs.keys().cloned().collect();
        names.extend(self.openers.keys().cloned());
        names.sort();
        names
    }

    /// Starts `server` (killing a previous instance of it) and returns its channels. Must be
    /// called inside a tokio runtime.
    pub fn open(&self, server: &str) -> Result<McpHostChannels, McpHostError> {
        if let Some(opener) = self.openers.get(server) {
            return opener().map_err(|message| McpHostError::Open {
                server: server.to_string(),
                message,
            });
        }
        let spec = self
            .specs
            .get(server)
            .ok_or_else(|| McpHostError::UnknownServer(server.to_string()))?;
        let spec = expand(spec)?;
        // Old instance first, so two copies never run at once.
        self.close(server);
        let (channels, guard) = spawn_stdio(&spec)?;
        self.running
            .lock_or_recover()
            .insert(server.to_string(), guard);
        Ok(channels)
    }

    /// Kills `server` if running; true when it was.
    pub fn close(&self, server: &str) -> bool {
        self.running.lock_or_recover().remove(server).is_some()
    }

    /// Kills every running server.
    pub fn close_all(&self) {
        self.running.lock_or_recover().clear();
    }
}

impl Drop for McpHost {
    fn drop(&mut self) {
        self.close_all();
    }
}

/// Spawns `spec` (variables already expanded) and pumps its stdio into line channels. The
/// process lives until the guard is dropped or it exits by itself.
pub fn spawn_stdio(spec: &McpHostSpec) -> Result<(McpHostChannels, ProcessGuard), McpHostError> {
    let mut cmd = reasonix_forward::process_group::command(&spec.command);
    cmd.args(&spec.args).envs(&spec.env);
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }
    let child = reasonix_forward::child::spawn_line_child(cmd, CHANNEL_DEPTH, &spec.name).map_err(
        |source| McpHostError::Spawn {
            server: spec.name.clone(),
            command: spec.command.clone(),
            source,
        },
    )?;
    Ok((
        McpHostChannels {
            to_server: child.to_child,
            from_server: child.from_child,
            diagnostics: child.diagnostics,
        },
        child.guard,
    ))
}

/// `spec` with `${VAR}` / `${VAR:-default}` expanded from the laptop environment.
fn expand(spec: &McpHostSpec) -> Result<McpHostSpec, McpHostError> {
    let one = |s: &str, field: String| expand_str(&spec.name, s, field, &|k| std::env::var(k).ok());
    Ok(McpHostSpec {
        name: spec.name.clone(),
        command: one(&spec.command, "command".into())?,
        args: spec
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| one(a, format!("args[{i}]")))
            .collect::<Result<_, _>>()?,
        env: spec
            .env
            .iter()
            .map(|(k, v)| Ok((k.clone(), one(v, format!("env.{k}"))?)))
            .collect::<Result<_, McpHostError>>()?,
        cwd: spec.cwd.clone(),
    })
}

/// Shell-style `${VAR}` / `${VAR:-default}` (default when unset or empty).
pub fn expand_str(
    server: &str,
    input: &str,
    field: String,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, McpHostError> {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(McpHostError::BadReference {
                server: server.to_string(),
                field,
            });
        };
        let inner = &after[..end];
        let (var, default) = match inner.split_once(":-") {
            Some((v, d)) => (v, Some(d)),
            None => (inner, None),
        };
        if var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(McpHostError::BadReference {
                server: server.to_string(),
                field,
            });
        }
        let value = match (lookup(var), default) {
            (Some(v), Some(d)) if v.is_empty() => d.to_string(),
            (Some(v), _) => v,
            (None, Some(d)) => d.to_string(),
            (None, None) => {
                return Err(McpHostError::UnsetVar {
                    server: server.to_string(),
                    var: var.to_string(),
                    field,
                })
            }
        };
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}
