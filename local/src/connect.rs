//! Transports to a host process: how a client gets a fresh byte stream to
//! `reasonix-remote attach` (child pipes locally, an SSH exec channel remotely).

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

/// A connected byte stream to `reasonix-remote attach`.
pub struct Transport {
    /// Bytes from the host.
    pub reader: Pin<Box<dyn AsyncRead + Send>>,
    /// Bytes to the host.
    pub writer: Pin<Box<dyn AsyncWrite + Send>>,
    /// Recent diagnostic output of the host side (stderr), for error messages.
    pub diagnostics: Arc<Mutex<String>>,
}

/// Why a connection attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Worth retrying (network down, host unreachable, ...).
    #[error("{0}")]
    Transient(String),
    /// Retrying will not help (bad credentials, changed host key, missing binary, ...).
    #[error("{0}")]
    Fatal(String),
}

/// Something that can open a fresh transport on demand (used for every reconnect).
#[async_trait::async_trait]
pub trait Connector: Send + Sync {
    /// Open a new transport.
    async fn connect(&self) -> Result<Transport, ConnectError>;
    /// Human-readable place, e.g. `local:/path` or `me@host:/repo`.
    fn describe(&self) -> String;
}

/// Environment variables a host process may inherit. Everything else (API keys in
/// particular) is withheld: the key never reaches the host, even in local mode.
const ENV_ALLOW: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TMPDIR",
    "TZ",
    "XDG_RUNTIME_DIR",
    "REASONIX_HOME",
    "REASONIX_LOG",
    "REASONIX_IDLE_TIMEOUT_SECS",
    "REASONIX_LINK_GRACE_SECS",
    "REASONIX_HEARTBEAT_MS",
    "REASONIX_DEAD_AFTER_MS",
];

/// Local mode: spawns `reasonix-remote attach --workspace DIR` and speaks over its pipes.
pub struct LocalConnector {
    /// The host binary.
    pub binary: PathBuf,
    /// The workspace.
    pub workspace: PathBuf,
}

#[async_trait::async_trait]
impl Connector for LocalConnector {
    async fn connect(&self) -> Result<Transport, ConnectError> {
        let mut cmd = tokio::process::Command::new(&self.binary);
        cmd.arg("attach")
            .arg("--workspace")
            .arg(&self.workspace)
            .env_clear()
            .envs(
                std::env::vars_os()
                    .filter(|(k, _)| k.to_str().map(|k| ENV_ALLOW.contains(&k)).unwrap_or(false)),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| {
            ConnectError::Fatal(format!(
                "cannot start {}: {e}; set REASONIX_REMOTE_BIN or rebuild with `cargo build --release`",
                self.binary.display()
            ))
        })?;
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ConnectError::Fatal("child pipes unavailable".into()));
        };
        let diagnostics = Arc::new(Mutex::new(String::new()));
        let diag = Arc::clone(&diagnostics);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut d = diag.lock().unwrap_or_else(|p| p.into_inner());
                d.push_str(&String::from_utf8_lossy(&buf[..n]));
                let len = d.len();
                if len > 8192 {
                    let mut cut = len - 8192;
                    while !d.is_char_boundary(cut) {
                        cut += 1;
                    }
                    d.drain(..cut);
                }
            }
            // Keep the child handle alive (kill_on_drop) for as long as its stderr is open.
            let _ = child.wait().await;
        });
        Ok(Transport {
            reader: Box::pin(stdout),
            writer: Box::pin(stdin),
            diagnostics,
        })
    }

    fn describe(&self) -> String {
        format!("local:{}", self.workspace.display())
    }
}

/// Find the `reasonix-remote` binary for local mode: `$REASONIX_REMOTE_BIN`, else the file
/// next to the running `reasonix` executable.
pub fn locate_host_binary() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("REASONIX_REMOTE_BIN").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!(
                "REASONIX_REMOTE_BIN points to {}, which is not a file",
                p.display()
            ))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate reasonix itself: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidate = dir.join("reasonix-remote");
    if candidate.is_file() {
        return Ok(candidate);
    }
    Err(format!(
        "cannot find reasonix-remote next to reasonix (looked in {}); build both with `cargo build --release` or set REASONIX_REMOTE_BIN",
        dir.display()
    ))
}
