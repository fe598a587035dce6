//! Laptop-side MCP servers: the laptop spawns a stdio MCP server from the user's config and
//! exposes its JSON-RPC stream as two line channels, which the link tunnels to the host's MCP
//! client (there a `ChannelTransport` makes it look exactly like a local stdio server).
//!
//! Glue for the link, per `McpOpen{server}` request:
//! ```text
//! let ch = host.open(&server)?;                 // (re)starts the process
//! forward every `ch.from_server.recv()` line as McpLine{channel, line}; at None the server is gone
//! feed every incoming McpLine{channel, line} into `ch.to_server.send(line)`
//! ```
//! Opening a server again kills the previous instance first, so a restart is just another
//! `open`.
//!
//! This file depends only on tokio, thiserror, tracing and libc (no `crate::` paths), so the
//! host crate's tests can compile it as-is to drive a real server through the channel
//! transport.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// Lines buffered in each direction.
const CHANNEL_DEPTH: usize = 256;
/// Stderr lines kept per server.
const STDERR_TAIL_LINES: usize = 20;

/// A laptop stdio server as configured (`[[mcp]]` with `run_on = "laptop"` in the user's
/// config). `${VAR}` / `${VAR:-default}` in command, args and env values are expanded from the
/// laptop's environment when it is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpHostSpec {
    /// Server name (the key `McpOpen{server}` uses).
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

/// Why a laptop server could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum McpHostError {
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

/// Stderr tail and exit status of one server process.
#[derive(Debug, Default)]
pub struct ServerDiagnostics {
    inner: Mutex<(VecDeque<String>, Option<String>)>,
}

impl ServerDiagnostics {
    /// The last stderr lines, oldest first.
    pub fn stderr_tail(&self) -> String {
        let g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        g.0.iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// `exit status: 1`, once the process ended.
    pub fn exit(&self) -> Option<String> {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .clone()
    }

    fn push(&self, line: &str) {
        let line = line.trim_end();
        if line.is_empty() {
            return;
        }
        let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if g.0.len() == STDERR_TAIL_LINES {
            g.0.pop_front();
        }
        g.0.push_back(line.chars().take(400).collect());
    }

    fn set_exit(&self, s: String) {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).1 = Some(s);
    }
}

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

/// Kills a server's process group when dropped.
pub struct ProcessGuard {
    pgid: Option<u32>,
}

impl Drop for ProcessGuard {
    fn drop(&mut self) {
        let Some(Ok(pgid)) = self.pgid.map(libc::pid_t::try_from) else {
            return;
        };
        // SAFETY: kill(2) on a negative pid signals the process group created for this server
        // by `process_group(0)`; no memory is involved. ESRCH (already gone) is harmless.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// The laptop's MCP servers, at most one running instance each.
pub struct McpHost {
    specs: BTreeMap<String, McpHostSpec>,
    running: Mutex<HashMap<String, ProcessGuard>>,
}

impl McpHost {
    /// A host for these servers; nothing is started yet.
    pub fn new(specs: impl IntoIterator<Item = McpHostSpec>) -> Self {
        Self {
            specs: specs.into_iter().map(|s| (s.name.clone(), s)).collect(),
            running: Mutex::new(HashMap::new()),
        }
    }

    /// Names of the configured servers, sorted.
    pub fn names(&self) -> Vec<String> {
        self.specs.keys().cloned().collect()
    }

    /// Starts `server` (killing a previous instance of it) and returns its channels. Must be
    /// called inside a tokio runtime.
    pub fn open(&self, server: &str) -> Result<McpHostChannels, McpHostError> {
        let spec = self
            .specs
            .get(server)
            .ok_or_else(|| McpHostError::UnknownServer(server.to_string()))?;
        let spec = expand(spec)?;
        // Old instance first, so two copies never run at once.
        self.close(server);
        let (channels, guard) = spawn_stdio(&spec)?;
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(server.to_string(), guard);
        Ok(channels)
    }

    /// Kills `server` if running; true when it was.
    pub fn close(&self, server: &str) -> bool {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(server)
            .is_some()
    }

    /// Kills every running server.
    pub fn close_all(&self) {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
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
    let mut cmd = Command::new(&spec.command);
    cmd.args(&spec.args)
        .envs(&spec.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Own group: wrappers such as npx or uvx die together with what they started.
        .process_group(0);
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }
    let spawn_err = |source| McpHostError::Spawn {
        server: spec.name.clone(),
        command: spec.command.clone(),
        source,
    };
    let mut child = cmd.spawn().map_err(spawn_err)?;
    let guard = ProcessGuard { pgid: child.id() };
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(spawn_err(std::io::Error::other(
            "child pipes missing after spawn",
        )));
    };
    let diagnostics = Arc::new(ServerDiagnostics::default());
    let (to_tx, to_rx) = mpsc::channel(CHANNEL_DEPTH);
    let (from_tx, from_rx) = mpsc::channel(CHANNEL_DEPTH);
    tokio::spawn(pump_stdin(stdin, to_rx));
    let stderr_task = tokio::spawn(pump_stderr(stderr, diagnostics.clone(), spec.name.clone()));
    tokio::spawn(pump_stdout(
        stdout,
        from_tx,
        child,
        stderr_task,
        diagnostics.clone(),
    ));
    Ok((
        McpHostChannels {
            to_server: to_tx,
            from_server: from_rx,
            diagnostics,
        },
        guard,
    ))
}

async fn pump_stdin(mut stdin: ChildStdin, mut rx: mpsc::Receiver<String>) {
    while let Some(line) = rx.recv().await {
        let mut buf = line.into_bytes();
        buf.push(b'\n');
        if stdin.write_all(&buf).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
}

async fn pump_stderr(stderr: impl AsyncRead + Unpin, diag: Arc<ServerDiagnostics>, name: String) {
    let mut r = BufReader::new(stderr);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match r.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf);
                tracing::debug!(target: "mcp_host", server = %name, stderr = %line.trim_end(), "laptop mcp stderr");
                diag.push(&line);
            }
        }
    }
}

async fn pump_stdout(
    stdout: impl AsyncRead + Unpin,
    tx: mpsc::Sender<String>,
    mut child: Child,
    stderr_task: tokio::task::JoinHandle<()>,
    diag: Arc<ServerDiagnostics>,
) {
    let mut r = BufReader::new(stdout);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match r.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf)
                    .trim_end_matches(['\r', '\n'])
                    .to_string();
                if line.is_empty() {
                    continue;
                }
                if tx.send(line).await.is_err() {
                    return;
                }
            }
        }
    }
    // Exit status and the rest of stderr are recorded before the channel closes, so whoever
    // sees the end can report them.
    let _ = tokio::time::timeout(Duration::from_secs(1), stderr_task).await;
    let status = match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
        Ok(Ok(st)) => format!("process exited ({st})"),
        Ok(Err(e)) => format!("process state unknown: {e}"),
        Err(_) => "process closed its stdout but is still running".to_string(),
    };
    diag.set_exit(status);
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
