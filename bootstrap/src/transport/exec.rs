//! The exec transport: a local command whose stdin/stdout reach a shell on the host, such as
//! `podman exec -i CTR`, `docker exec -i CTR` or `kubectl exec -i POD --`. Every script and
//! the link run as `COMMAND sh -s` / `COMMAND sh -c LINE`, one process each; the host binary
//! is uploaded through the stream itself (see `install`), so the image needs only `sh`,
//! `cat`, a SHA-256 tool and (for a compressed upload) a decompressor.
//!
//! A container that stops or a `kubectl` connection that drops ends the process: the link
//! sees EOF, which the client treats like any other link drop (it reconnects by running the
//! command again).

use std::process::Stdio;
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot, watch};

use crate::error::BootstrapError;
use crate::prompter::{Prompter, Stage};
use crate::transport::ssh_exec::{
    cut, fence, ExecStream, ExitInfo, ScriptOutput, StderrTail, SCRIPT_TIMEOUT,
};
use crate::transport::Remote;

/// A host reached by running a local command (see the module docs).
pub struct ExecConnection {
    argv: Vec<String>,
    label: String,
    prompter: Arc<dyn Prompter>,
}

impl std::fmt::Debug for ExecConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecConnection")
            .field("argv", &self.argv)
            .finish_non_exhaustive()
    }
}

/// Split a command line into words the way a POSIX shell would for simple quoting
/// (`'…'`, `"…"` with `\"`/`\\`, and `\x` outside quotes); no expansion.
pub fn split_command(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return Err(format!("unterminated ' in {line:?}")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(x @ ('"' | '\\' | '$' | '`')) => cur.push(x),
                            Some(x) => {
                                cur.push('\\');
                                cur.push(x);
                            }
                            None => return Err(format!("unterminated \" in {line:?}")),
                        },
                        Some(x) => cur.push(x),
                        None => return Err(format!("unterminated \" in {line:?}")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(x) => cur.push(x),
                    None => return Err(format!("trailing \\ in {line:?}")),
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    if words.is_empty() {
        return Err("the exec command is empty".into());
    }
    Ok(words)
}

impl ExecConnection {
    /// A connection that runs `argv` followed by `sh -s` or `sh -c LINE`; `label` names the
    /// place in messages (e.g. `podman:web`).
    pub fn new(argv: Vec<String>, label: impl Into<String>, prompter: Arc<dyn Prompter>) -> Self {
        Self {
            argv,
            label: label.into(),
            prompter,
        }
    }

    /// The command words run before `sh …`.
    pub fn argv(&self) -> &[String] {
        &self.argv
    }

    /// The full argv for `sh` followed by `tail`.
    pub fn command_line(&self, tail: &[&str]) -> Vec<String> {
        let mut v = self.argv.clone();
        v.push("sh".into());
        v.extend(tail.iter().map(|s| s.to_string()));
        v
    }

    fn spawn(&self, stage: Stage, tail: &[&str]) -> Result<Child, BootstrapError> {
        let argv = self.command_line(tail);
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd.spawn().map_err(|e| {
            BootstrapError::remote(
                stage,
                &self.label,
                format!(
                    "cannot run `{}`: {e}; is it installed and on PATH?",
                    self.argv.join(" ")
                ),
            )
        })
    }

    fn no_shell(&self, stage: Stage, stderr: &str, code: Option<i32>) -> BootstrapError {
        BootstrapError::remote(
            stage,
            &self.label,
            format!(
                "`{} sh -s` did not run a shell ({}): {}. Check that the container or pod is running and has /bin/sh",
                self.argv.join(" "),
                code.map(|c| format!("exit status {c}"))
                    .unwrap_or_else(|| "killed".into()),
                stderr.trim()
            ),
        )
    }
}

#[async_trait::async_trait]
impl Remote for ExecConnection {
    fn host(&self) -> &str {
        &self.label
    }

    fn prompter(&self) -> &Arc<dyn Prompter> {
        &self.prompter
    }

    async fn run_script_at(
        &self,
        stage: Stage,
        script: &str,
    ) -> Result<ScriptOutput, BootstrapError> {
        let marker = format!("__REASONIX_{}_", hex::encode(rand::random::<[u8; 16]>()));
        let mut child = self.spawn(stage, &["-s"])?;
        let wrapped = fence(script, &marker);
        let mut stdin = child.stdin.take();
        let run = async {
            if let Some(stdin) = stdin.as_mut() {
                // A failed write shows as missing fences below (with the command's stderr).
                let _ = stdin.write_all(wrapped.as_bytes()).await;
                let _ = stdin.shutdown().await;
            }
            drop(stdin.take());
            child.wait_with_output().await
        };
        let out = tokio::time::timeout(SCRIPT_TIMEOUT, run)
            .await
            .map_err(|_| BootstrapError::Timeout {
                stage,
                host: self.label.clone(),
                secs: SCRIPT_TIMEOUT.as_secs(),
            })?
            .map_err(|e| BootstrapError::remote(stage, &self.label, e.to_string()))?;
        let stdout_raw = String::from_utf8_lossy(&out.stdout);
        let stderr_raw = String::from_utf8_lossy(&out.stderr);
        let Some((stdout, noise, code)) = cut(&stdout_raw, &marker) else {
            return Err(self.no_shell(stage, &stderr_raw, out.status.code()));
        };
        let stderr = cut(&stderr_raw, &marker)
            .map(|(s, _, _)| s)
            .unwrap_or_else(|| stderr_raw.to_string());
        Ok(ScriptOutput {
            stdout,
            stderr,
            exit_code: code.unwrap_or(-1),
            noise,
        })
    }

    async fn exec_stream(&self, command: &str) -> Result<ExecStream, BootstrapError> {
        // The attach script's `sh -s` runs as itself (the argv a user sees in `ps` and in
        // `reasonix kube --print-command`), anything else through `sh -c`.
        let tail: &[&str] = if command == "sh -s" {
            &["-s"]
        } else {
            &["-c", command]
        };
        let mut child = self.spawn(Stage::Launch, tail)?;
        let (Some(stdin), Some(mut stdout), Some(mut stderr_pipe)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(BootstrapError::remote(
                Stage::Launch,
                &self.label,
                "the exec command's pipes were not set up",
            ));
        };
        let (tx, rx) = mpsc::channel::<Bytes>(64);
        let (exit_tx, exit_rx) = watch::channel(None::<ExitInfo>);
        let (kill_tx, kill_rx) = oneshot::channel::<()>();
        let stderr = StderrTail::default();
        let stderr_pump = stderr.clone();
        let label = self.label.clone();
        let out_pump = tokio::spawn(async move {
            let mut buf = vec![0u8; 32 * 1024];
            loop {
                match stdout.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        // Nobody reading any more is fine: keep draining so the command
                        // is not blocked on a full pipe.
                        let _ = tx.send(Bytes::copy_from_slice(&buf[..n])).await;
                    }
                }
            }
        });
        let err_pump = tokio::spawn(async move {
            let mut buf = vec![0u8; 8 * 1024];
            loop {
                match stderr_pipe.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        stderr_pump.push(&buf[..n]);
                        for line in String::from_utf8_lossy(&buf[..n]).lines() {
                            tracing::info!(target: "reasonix_bootstrap::remote_stderr", host = %label, "{line}");
                        }
                    }
                }
            }
        });
        let waiter = tokio::spawn(async move {
            let status = tokio::select! {
                s = child.wait() => s.ok(),
                _ = kill_rx => {
                    // Both halves are gone and stdin is closed: give the command a moment to
                    // pass the EOF on (so the process in the container ends too), then kill
                    // the local end.
                    match tokio::time::timeout(CLOSE_GRACE, child.wait()).await {
                        Ok(s) => s.ok(),
                        Err(_) => {
                            let _ = child.start_kill();
                            child.wait().await.ok()
                        }
                    }
                }
            };
            // Output first, then the exit (like SSH's exit-status after the data).
            let _ = out_pump.await;
            let _ = err_pump.await;
            let info = match status {
                Some(s) => match s.code() {
                    Some(c) => ExitInfo::Status(c as u32),
                    None => ExitInfo::Signal(
                        crate::platform::exit_signal(&s)
                            .map(|n| n.to_string())
                            .unwrap_or_default(),
                    ),
                },
                None => ExitInfo::Closed,
            };
            let _ = exit_tx.send(Some(info));
        });
        let guard: Arc<dyn std::any::Any + Send + Sync> = Arc::new(ChildGuard {
            kill: Some(kill_tx),
            _waiter: waiter,
        });
        Ok(ExecStream::from_parts(
            rx,
            Box::pin(ClosingStdin(Some(stdin))),
            guard,
            stderr,
            exit_rx,
        ))
    }
}

/// How long a command whose stream was dropped may take to end on its own.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// The command's stdin; shutdown closes it (tokio's `ChildStdin` only closes on drop), so the
/// program on the other side sees EOF.
struct ClosingStdin(Option<tokio::process::ChildStdin>);

impl tokio::io::AsyncWrite for ClosingStdin {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.0.as_mut() {
            Some(w) => std::pin::Pin::new(w).poll_write(cx, buf),
            None => std::task::Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into())),
        }
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.0.as_mut() {
            Some(w) => std::pin::Pin::new(w).poll_flush(cx),
            None => std::task::Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if let Some(w) = self.0.as_mut() {
            std::task::ready!(std::pin::Pin::new(w).poll_flush(cx))?;
        }
        self.0 = None;
        std::task::Poll::Ready(Ok(()))
    }
}

/// Ends the local command once both halves of its stream are gone.
struct ChildGuard {
    kill: Option<oneshot::Sender<()>>,
    _waiter: tokio::task::JoinHandle<()>,
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(k) = self.kill.take() {
            let _ = k.send(());
        }
    }
}

/// Upload `data` to `path` on the host through one exec stream (`cat > path`), reporting
/// progress; the caller verifies the SHA-256 on the host afterwards.
pub(crate) async fn upload_through_stream(
    conn: &dyn Remote,
    path: &str,
    data: &[u8],
    progress: &(dyn Fn(u64) + Send + Sync),
) -> Result<u64, String> {
    let line = format!(
        "umask 077 && cat > {} && echo __REASONIX_UPLOADED__",
        crate::install::sh_quote(path)
    );
    let mut stream = conn.exec_stream(&line).await.map_err(|e| e.to_string())?;
    let mut sent = 0u64;
    for chunk in data.chunks(256 * 1024) {
        stream.writer.write_all(chunk).await.map_err(|e| {
            format!(
                "writing {path}: {e} after {sent} bytes; stderr: {}",
                stream.stderr.text().trim()
            )
        })?;
        sent += chunk.len() as u64;
        progress(sent);
    }
    stream
        .writer
        .shutdown()
        .await
        .map_err(|e| format!("writing {path}: {e}"))?;
    let mut out = Vec::new();
    let _ = stream.reader.read_to_end(&mut out).await;
    let exit = stream.wait_exit().await;
    if String::from_utf8_lossy(&out).contains("__REASONIX_UPLOADED__") {
        Ok(sent)
    } else {
        Err(format!(
            "writing {path} failed ({exit:?}): {}",
            stream.stderr.text().trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_command_words() {
        assert_eq!(
            split_command("docker exec -i web").unwrap(),
            ["docker", "exec", "-i", "web"]
        );
        assert_eq!(
            split_command(r#"kubectl exec -i -n 'my ns' "pod \"x\"" -- "#).unwrap(),
            ["kubectl", "exec", "-i", "-n", "my ns", "pod \"x\"", "--"]
        );
        assert_eq!(split_command(r"a\ b ''").unwrap(), ["a b", ""]);
        assert!(split_command("  ").is_err());
        assert!(split_command("a 'b").is_err());
    }

    fn local_sh() -> ExecConnection {
        // `env` runs `sh` locally: the same pipes a container engine gives.
        ExecConnection::new(
            vec!["env".into()],
            "local",
            Arc::new(crate::NonInteractivePrompter),
        )
    }

    #[tokio::test]
    async fn scripts_and_streams_over_a_local_command() {
        let conn = local_sh();
        let out = conn
            .run_script("echo out; echo err >&2; exit 3")
            .await
            .unwrap();
        assert_eq!(out.stdout.trim(), "out");
        assert_eq!(out.stderr.trim(), "err");
        assert_eq!(out.exit_code, 3);

        let mut s = conn
            .exec_stream("cat; echo done >&2; exit 4")
            .await
            .unwrap();
        s.writer.write_all(b"ping").await.unwrap();
        s.writer.shutdown().await.unwrap();
        let mut got = Vec::new();
        s.reader.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"ping");
        assert_eq!(s.wait_exit().await, ExitInfo::Status(4));
        assert!(s.stderr.text().contains("done"));
    }

    #[tokio::test]
    async fn upload_goes_through_the_stream() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("up.bin");
        let data: Vec<u8> = (0..700_000u32).map(|i| (i % 251) as u8).collect();
        let seen = std::sync::atomic::AtomicU64::new(0);
        let sent = upload_through_stream(&local_sh(), path.to_str().unwrap(), &data, &|n| {
            seen.store(n, std::sync::atomic::Ordering::SeqCst)
        })
        .await
        .unwrap();
        assert_eq!(sent, data.len() as u64);
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), sent);
        assert_eq!(std::fs::read(&path).unwrap(), data);
        let bad = upload_through_stream(&local_sh(), "/nonexistent/dir/x", &data, &|_| {}).await;
        assert!(bad.unwrap_err().contains("/nonexistent/dir/x"));
    }

    #[tokio::test]
    async fn a_missing_command_is_named() {
        let conn = ExecConnection::new(
            vec!["/nonexistent/podman".into(), "exec".into()],
            "podman:x",
            Arc::new(crate::NonInteractivePrompter),
        );
        let e = conn.run_script("true").await.unwrap_err().to_string();
        assert!(e.contains("/nonexistent/podman exec"), "{e}");
        let conn = ExecConnection::new(
            vec![
                "sh".into(),
                "-c".into(),
                "echo 'no such container' >&2; exit 125".into(),
            ],
            "podman:x",
            Arc::new(crate::NonInteractivePrompter),
        );
        let e = conn.run_script("true").await.unwrap_err().to_string();
        assert!(
            e.contains("no such container") && e.contains("exit status 125"),
            "{e}"
        );
    }
}
