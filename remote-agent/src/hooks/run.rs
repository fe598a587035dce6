//! Running one hook: its command through the session's bash sandbox (the same
//! [`crate::sandbox::Sandbox::command_with`] and deny-rule mounts the `bash` tool uses), the
//! event as JSON on stdin, stdout and stderr captured apart, killed with its whole process
//! group at the timeout.

use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::tools::deny_guard::Armed;
use crate::tools::{ToolContext, ToolOutput};

/// Bytes of stdout and of stderr kept from one hook run.
pub const OUTPUT_CAP: usize = 64 * 1024;

/// How one run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The command exited with `code`.
    Exited {
        /// Exit code.
        code: i32,
        /// Its stdout (lossy UTF-8, capped).
        stdout: String,
        /// Its stderr (lossy UTF-8, capped).
        stderr: String,
    },
    /// Killed at the timeout.
    TimedOut {
        /// What it wrote to stderr before.
        stderr: String,
    },
    /// Did not start, or ended by a signal: why.
    Crashed(String),
    /// The session's permission policy denies this command for bash.
    Denied(String),
}

impl Outcome {
    /// A short text for "last run" and notices: `exit 0`, `timed out`, ...
    pub fn summary(&self) -> String {
        match self {
            Outcome::Exited { code, .. } => format!("exit {code}"),
            Outcome::TimedOut { .. } => "timed out".into(),
            Outcome::Crashed(why) => format!("failed: {why}"),
            Outcome::Denied(why) => format!("denied by the permission policy: {why}"),
        }
    }
}

/// Run `command` in the workspace under `ctx`'s sandbox with `stdin` and `env`, for at most
/// `timeout`. Returns how it ended and how long it took.
pub async fn run(
    command: &str,
    stdin: Vec<u8>,
    env: &[(&str, String)],
    timeout: Duration,
    ctx: &ToolContext,
) -> (Outcome, Duration) {
    let started = Instant::now();
    // Deny rules on file writers hold for hooks as for bash: read-only mounts, then the
    // after-run check (which tells the user what it undid).
    let armed = match &ctx.deny_guard {
        Some(g) => Some(Armed::arm(std::sync::Arc::clone(g), ctx, command).await),
        None => None,
    };
    let read_only = armed
        .as_ref()
        .map(Armed::read_only_paths)
        .unwrap_or_default();
    let mut cmd = match ctx
        .sandbox
        .command_with(command, &ctx.workspace, &read_only)
    {
        Ok(c) => c,
        Err(e) => {
            if let Some(a) = armed {
                a.disarm();
            }
            return (Outcome::Crashed(e.to_string()), started.elapsed());
        }
    };
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let outcome = spawn_and_wait(cmd, stdin, timeout).await;
    if let Some(a) = armed {
        a.finish(ToolOutput::ok(String::new())).await;
    }
    (outcome, started.elapsed())
}

async fn spawn_and_wait(
    mut cmd: tokio::process::Command,
    stdin: Vec<u8>,
    timeout: Duration,
) -> Outcome {
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Outcome::Crashed(format!("cannot start the command: {e}")),
    };
    drop(cmd);
    let pgid = child.id().map(|p| p as i32).unwrap_or(0);
    if let Some(mut input) = child.stdin.take() {
        // A hook that does not read its stdin closes the pipe: that is fine.
        tokio::spawn(async move {
            let _ = input.write_all(&stdin).await;
            let _ = input.shutdown().await;
        });
    }
    let out = tokio::spawn(read_capped(child.stdout.take()));
    let err = tokio::spawn(read_capped(child.stderr.take()));
    let waited = tokio::time::timeout(timeout, child.wait()).await;
    // Leftover processes of the group (`sleep 100 &`) die with it, on success as on timeout.
    kill_group(pgid);
    let status = match waited {
        Ok(s) => Some(s),
        Err(_) => {
            let _ = child.wait().await;
            None
        }
    };
    let grace = Duration::from_millis(500);
    let stdout = tokio::time::timeout(grace, out)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let stderr = tokio::time::timeout(grace, err)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    match status {
        None => Outcome::TimedOut { stderr },
        Some(Err(e)) => Outcome::Crashed(format!("waiting for the command failed: {e}")),
        Some(Ok(s)) => match s.code() {
            Some(code) => Outcome::Exited {
                code,
                stdout,
                stderr,
            },
            None => {
                use std::os::unix::process::ExitStatusExt;
                Outcome::Crashed(format!(
                    "killed by signal {}",
                    s.signal().unwrap_or_default()
                ))
            }
        },
    }
}

async fn read_capped<R: AsyncRead + Unpin>(r: Option<R>) -> String {
    let Some(mut r) = r else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = OUTPUT_CAP.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

fn kill_group(pgid: i32) {
    // Guard against 0/1/negative: killpg(0) would hit our own group.
    if pgid > 1 {
        // SAFETY: killpg has no memory-safety preconditions.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}
