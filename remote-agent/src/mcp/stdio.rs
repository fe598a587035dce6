//! Stdio transport: the server is a child process speaking one JSON-RPC message per line on
//! stdin/stdout; stderr is kept as a tail for error messages.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::transport::{Diagnostics, McpConnection, McpTransport};
use super::McpError;

/// Lines buffered between the pumps and the client.
const CHANNEL_DEPTH: usize = 256;

/// Spawns `command args…` with `env` added to the inherited environment.
#[derive(Debug, Clone)]
pub struct StdioTransport {
    command: String,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
}

impl StdioTransport {
    /// A transport for this program; variables must already be expanded.
    pub fn new(
        command: impl Into<String>,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    ) -> Self {
        Self {
            command: command.into(),
            args,
            env,
            cwd,
        }
    }
}

#[async_trait::async_trait]
impl McpTransport for StdioTransport {
    async fn open(&self) -> Result<McpConnection, McpError> {
        let mut cmd = Command::new(&self.command);
        cmd.args(&self.args)
            .envs(&self.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Own process group, so that wrappers (`npx`, `sh -c`, `uvx`) die with their
            // children when the connection is dropped.
            .process_group(0);
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        let mut child = cmd.spawn().map_err(|source| McpError::Spawn {
            command: self.command.clone(),
            source,
        })?;
        let pid = child.id();
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(McpError::Connect("child pipes missing after spawn".into()));
        };
        let diag = Diagnostics::new();
        let (to_tx, to_rx) = mpsc::channel::<String>(CHANNEL_DEPTH);
        let (from_tx, from_rx) = mpsc::channel::<String>(CHANNEL_DEPTH);

        tokio::spawn(pump_stdin(stdin, to_rx));
        let stderr_task = tokio::spawn(pump_stderr(stderr, diag.clone()));
        tokio::spawn(pump_stdout(
            stdout,
            from_tx,
            child,
            stderr_task,
            diag.clone(),
        ));

        let conn = McpConnection::new(to_tx, from_rx).with_diagnostics(diag);
        Ok(match pid {
            Some(pid) => conn.with_keepalive(Box::new(GroupKiller { pgid: pid })),
            None => conn,
        })
    }

    fn describe(&self) -> String {
        let mut s = format!("stdio: {}", self.command);
        for a in &self.args {
            s.push(' ');
            s.push_str(a);
        }
        s
    }
}

/// Kills the server's process group when the connection is dropped.
struct GroupKiller {
    pgid: u32,
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        let Ok(pgid) = libc::pid_t::try_from(self.pgid) else {
            return;
        };
        // SAFETY: kill(2) with a negative pid signals a process group; it touches no memory.
        // The group was created for this server by `process_group(0)`, so no other program
        // is hit; if the group is already gone the call fails with ESRCH, which is fine.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

async fn pump_stdin(mut stdin: tokio::process::ChildStdin, mut rx: mpsc::Receiver<String>) {
    while let Some(line) = rx.recv().await {
        let mut buf = line.into_bytes();
        buf.push(b'\n');
        if stdin.write_all(&buf).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
}

async fn pump_stderr(stderr: impl AsyncRead + Unpin, diag: Arc<Diagnostics>) {
    let mut r = BufReader::new(stderr);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match r.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf);
                tracing::debug!(target: "mcp", stderr = %line.trim_end(), "mcp server stderr");
                diag.push_stderr(&line);
            }
        }
    }
}

/// Forwards stdout lines; at EOF records the exit status (and lets stderr drain first) before
/// closing the channel, so the client's "server exited" error can quote both.
async fn pump_stdout(
    stdout: impl AsyncRead + Unpin,
    tx: mpsc::Sender<String>,
    mut child: Child,
    stderr_task: tokio::task::JoinHandle<()>,
    diag: Arc<Diagnostics>,
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
                    // The client is gone; the keep-alive guard kills the group.
                    return;
                }
            }
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), stderr_task).await;
    let status = match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
        Ok(Ok(st)) => format!("process exited ({st})"),
        Ok(Err(e)) => format!("process state unknown: {e}"),
        Err(_) => "process closed its stdout but is still running".to_string(),
    };
    diag.set_exit(status);
}
