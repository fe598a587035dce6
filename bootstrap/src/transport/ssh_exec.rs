//! Remote commands: fenced `sh -s` scripts and the exec channel that carries the link.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use russh::ChannelMsg;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{mpsc, watch};

use crate::error::BootstrapError;
use crate::prompter::Stage;
use crate::transport::ssh::SshConnection;

/// A session channel of the SSH connection, open and not yet running anything.
pub(crate) type SessionChannel = russh::Channel<russh::client::Msg>;

/// Hang guard for one fenced script.
pub(crate) const SCRIPT_TIMEOUT: Duration = Duration::from_secs(300);
/// How much of the remote stderr of an exec stream is kept for error messages.
const STDERR_TAIL: usize = 16 * 1024;

/// What a fenced script printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptOutput {
    /// Standard output of the script only (login-shell noise removed).
    pub stdout: String,
    /// Standard error of the script only.
    pub stderr: String,
    /// Exit status of the script.
    pub exit_code: i32,
    /// Whatever the login shell and rc files printed before the script ran (for logs).
    pub noise: String,
}

/// Wrap `script` so its output can be cut out of whatever else the session prints.
pub(crate) fn fence(script: &str, marker: &str) -> String {
    // The subshell reads /dev/null, so a command that reads stdin cannot swallow the rest of
    // the script (which arrives on the same stdin).
    format!(
        "printf '%s\\n' '{marker}B'; printf '%s\\n' '{marker}B' >&2\n\
         (\n{script}\n) </dev/null\n\
         __rx_rc=$?\n\
         printf '\\n%s %s\\n' '{marker}E' \"$__rx_rc\"; printf '\\n%s\\n' '{marker}E' >&2\n\
         exit 0\n"
    )
}

pub(crate) fn cut(raw: &str, marker: &str) -> Option<(String, String, Option<i32>)> {
    let begin = format!("{marker}B\n");
    let start = raw.find(&begin)?;
    let noise = raw[..start].to_string();
    let body = &raw[start + begin.len()..];
    let end = format!("\n{marker}E");
    let stop = body.rfind(&end)?;
    let inner = body[..stop].to_string();
    let tail = &body[stop + end.len()..];
    let code = tail.split_whitespace().next().and_then(|c| c.parse().ok());
    Some((inner, noise, code))
}

impl SshConnection {
    /// Run `script` with `sh -s` on the host (whatever the login shell is) and return its
    /// fenced output. Errors are attributed to [`Stage::Probe`].
    pub async fn run_script(&self, script: &str) -> Result<ScriptOutput, BootstrapError> {
        self.run_script_at(Stage::Probe, script).await
    }

    /// [`Self::run_script`] with errors attributed to `stage`.
    pub async fn run_script_at(
        &self,
        stage: Stage,
        script: &str,
    ) -> Result<ScriptOutput, BootstrapError> {
        let host = self.host().to_string();
        let marker = format!("__REASONIX_{}_", hex::encode(rand::random::<[u8; 16]>()));
        let wrapped = fence(script, &marker);
        let fut = async {
            let mut ch = self
                .handle
                .channel_open_session()
                .await
                .map_err(|e| BootstrapError::ssh(stage, &host, "open session channel", e))?;
            ch.exec(true, "sh -s")
                .await
                .map_err(|e| BootstrapError::ssh(stage, &host, "exec sh -s", e))?;
            ch.data(wrapped.as_bytes())
                .await
                .map_err(|e| BootstrapError::ssh(stage, &host, "send script", e))?;
            ch.eof()
                .await
                .map_err(|e| BootstrapError::ssh(stage, &host, "send eof", e))?;
            let mut out = Vec::new();
            let mut err = Vec::new();
            let mut status = None;
            while let Some(msg) = ch.wait().await {
                match msg {
                    ChannelMsg::Data { data } => out.extend_from_slice(&data),
                    ChannelMsg::ExtendedData { data, ext: 1 } => err.extend_from_slice(&data),
                    ChannelMsg::ExitStatus { exit_status } => status = Some(exit_status),
                    ChannelMsg::Failure => return Err(BootstrapError::remote(
                        stage,
                        &host,
                        "the server refused to run `sh -s` (is a shell available for this user?)",
                    )),
                    ChannelMsg::Close => break,
                    _ => {}
                }
            }
            Ok((out, err, status))
        };
        let (out, err, status) =
            tokio::time::timeout(SCRIPT_TIMEOUT, fut)
                .await
                .map_err(|_| BootstrapError::Timeout {
                    stage,
                    host: host.clone(),
                    secs: SCRIPT_TIMEOUT.as_secs(),
                })??;
        let out = String::from_utf8_lossy(&out).into_owned();
        let err = String::from_utf8_lossy(&err).into_owned();
        let Some((stdout, noise, code)) = cut(&out, &marker) else {
            return Err(BootstrapError::remote(
                stage,
                &host,
                format!(
                    "remote script did not complete (sh exit status {status:?}); stdout: {:?}; stderr: {:?}",
                    tail(&out, 400),
                    tail(&err, 400)
                ),
            ));
        };
        let stderr = cut(&err, &marker).map(|(e, _, _)| e).unwrap_or(err);
        let exit_code = code.unwrap_or(-1);
        Ok(ScriptOutput {
            stdout,
            stderr,
            exit_code,
            noise,
        })
    }

    /// Open an SFTP session on a new channel (`sftp` subsystem).
    pub async fn sftp(&self) -> Result<reasonix_sftpfs::SftpFs, BootstrapError> {
        let host = self.host().to_string();
        let ch = self
            .handle
            .channel_open_session()
            .await
            .map_err(|e| BootstrapError::ssh(Stage::Upload, &host, "open sftp channel", e))?;
        ch.request_subsystem(true, "sftp")
            .await
            .map_err(|e| BootstrapError::ssh(Stage::Upload, &host, "request sftp subsystem", e))?;
        reasonix_sftpfs::SftpFs::new(ch.into_stream())
            .await
            .map_err(|e| {
                BootstrapError::ssh(
                    Stage::Upload,
                    &host,
                    "start sftp (is `Subsystem sftp` enabled in the host's sshd_config?)",
                    e,
                )
            })
    }

    /// Start `command` on one exec channel whose stdio becomes a byte stream (the link).
    /// The remote stderr is logged (tracing target `reasonix_bootstrap::remote_stderr`) and
    /// its tail kept in [`ExecStream::stderr`]. Uses no TCP or streamlocal forwarding.
    ///
    /// The command goes through the user's login shell (that is how sshd runs exec requests),
    /// so rc files may print before the program starts: the link preamble must be searched
    /// for, not assumed at byte 0.
    pub async fn exec_stream(&self, command: &str) -> Result<ExecStream, BootstrapError> {
        let ch = self.open_session().await?;
        self.exec_stream_on(ch, command).await
    }

    /// Open a session channel for a later [`SshConnection::exec_stream_on`]. An install
    /// opens the channel of its finishing attach while the upload runs, so the exec
    /// request goes out as soon as the upload is done instead of one round trip later.
    pub(crate) async fn open_session(&self) -> Result<SessionChannel, BootstrapError> {
        self.handle
            .channel_open_session()
            .await
            .map_err(|e| BootstrapError::ssh(Stage::Launch, self.host(), "open session channel", e))
    }

    /// [`SshConnection::exec_stream`] on a channel opened before.
    pub(crate) async fn exec_stream_on(
        &self,
        ch: SessionChannel,
        command: &str,
    ) -> Result<ExecStream, BootstrapError> {
        let host = self.host().to_string();
        ch.exec(true, command)
            .await
            .map_err(|e| BootstrapError::ssh(Stage::Launch, &host, "exec", e))?;
        let (mut read_half, write_half) = ch.split();
        let writer = write_half.make_writer();
        let (tx, rx) = mpsc::channel::<Bytes>(64);
        let (exit_tx, exit_rx) = watch::channel(None::<ExitInfo>);
        let stderr = StderrTail::default();
        let stderr_pump = stderr.clone();
        let pump_host = host.clone();
        let pump = tokio::spawn(async move {
            let mut line = Vec::new();
            let mut status = None;
            while let Some(msg) = read_half.wait().await {
                match msg {
                    ChannelMsg::Data { data } => {
                        // A dropped reader is not an error: keep draining so the session
                        // stays healthy until the channel closes.
                        let _ = tx.send(data).await;
                    }
                    ChannelMsg::ExtendedData { data, .. } => {
                        stderr_pump.push(&data);
                        for b in data.iter() {
                            if *b == b'\n' {
                                tracing::info!(target: "reasonix_bootstrap::remote_stderr", host = %pump_host, "{}", String::from_utf8_lossy(&line));
                                line.clear();
                            } else {
                                line.push(*b);
                            }
                        }
                    }
                    ChannelMsg::ExitStatus { exit_status } => {
                        status = Some(ExitInfo::Status(exit_status));
                    }
                    ChannelMsg::ExitSignal { signal_name, .. } => {
                        status = Some(ExitInfo::Signal(format!("{signal_name:?}")));
                    }
                    ChannelMsg::Failure => {
                        status = Some(ExitInfo::Refused);
                    }
                    ChannelMsg::Eof => {}
                    ChannelMsg::Close => break,
                    _ => {}
                }
            }
            if !line.is_empty() {
                tracing::info!(target: "reasonix_bootstrap::remote_stderr", host = %pump_host, "{}", String::from_utf8_lossy(&line));
            }
            let _ = exit_tx.send(Some(status.unwrap_or(ExitInfo::Closed)));
        });
        let guard = Arc::new(CloseGuard {
            write_half: Some(write_half),
            pump,
        });
        Ok(ExecStream::from_parts(
            rx,
            Box::pin(writer),
            guard,
            stderr,
            exit_rx,
        ))
    }
}

fn tail(s: &str, n: usize) -> &str {
    let mut start = s.len().saturating_sub(n);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// How the remote command of an [`ExecStream`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitInfo {
    /// Exited with this status.
    Status(u32),
    /// Killed by this signal.
    Signal(String),
    /// The server refused the exec request.
    Refused,
    /// The channel closed without an exit status (connection lost).
    Closed,
}

/// The last bytes the remote command wrote to stderr.
#[derive(Debug, Clone, Default)]
pub struct StderrTail {
    inner: Arc<Mutex<VecDeque<u8>>>,
}

impl StderrTail {
    pub(crate) fn push(&self, data: &[u8]) {
        if let Ok(mut q) = self.inner.lock() {
            q.extend(data.iter().copied());
            while q.len() > STDERR_TAIL {
                q.pop_front();
            }
        }
    }

    /// The kept tail as text.
    pub fn text(&self) -> String {
        match self.inner.lock() {
            Ok(q) => {
                let v: Vec<u8> = q.iter().copied().collect();
                String::from_utf8_lossy(&v).into_owned()
            }
            Err(_) => String::new(),
        }
    }
}

struct CloseGuard {
    write_half: Option<russh::ChannelWriteHalf<russh::client::Msg>>,
    pump: tokio::task::JoinHandle<()>,
}

impl Drop for CloseGuard {
    fn drop(&mut self) {
        // Both halves are gone: close the channel so the remote side sees EOF/close.
        if let Some(w) = self.write_half.take() {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = w.close().await;
                });
            }
        }
        self.pump.abort();
    }
}

/// A remote command's stdio as a byte stream.
pub struct ExecStream {
    /// The command's stdout.
    pub reader: ExecReader,
    /// The command's stdin (shutdown sends EOF).
    pub writer: ExecWriter,
    /// Tail of the command's stderr.
    pub stderr: StderrTail,
    /// Becomes `Some` when the command ended.
    pub exit: watch::Receiver<Option<ExitInfo>>,
}

impl std::fmt::Debug for ExecStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecStream").finish_non_exhaustive()
    }
}

impl ExecStream {
    /// A stream from its parts: `rx` carries stdout, `guard` is dropped (ending the remote
    /// command) once both halves are gone.
    pub(crate) fn from_parts(
        rx: mpsc::Receiver<Bytes>,
        writer: Pin<Box<dyn AsyncWrite + Send + Sync>>,
        guard: Arc<dyn std::any::Any + Send + Sync>,
        stderr: StderrTail,
        exit: watch::Receiver<Option<ExitInfo>>,
    ) -> ExecStream {
        ExecStream {
            reader: ExecReader {
                rx,
                buf: Bytes::new(),
                _guard: guard.clone(),
            },
            writer: ExecWriter {
                inner: writer,
                _guard: guard,
            },
            stderr,
            exit,
        }
    }

    /// Split into the read and write halves (the stderr tail and exit watch stay available
    /// through clones taken before).
    pub fn into_split(self) -> (ExecReader, ExecWriter) {
        (self.reader, self.writer)
    }

    /// Wait until the remote command ended.
    pub async fn wait_exit(&mut self) -> ExitInfo {
        loop {
            if let Some(e) = self.exit.borrow().clone() {
                return e;
            }
            if self.exit.changed().await.is_err() {
                return ExitInfo::Closed;
            }
        }
    }
}

/// Read half of an [`ExecStream`].
pub struct ExecReader {
    rx: mpsc::Receiver<Bytes>,
    buf: Bytes,
    _guard: Arc<dyn std::any::Any + Send + Sync>,
}

impl AsyncRead for ExecReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            if !self.buf.is_empty() {
                let n = self.buf.len().min(out.remaining());
                let chunk = self.buf.split_to(n);
                out.put_slice(&chunk);
                return Poll::Ready(Ok(()));
            }
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(b)) => self.buf = b,
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// Write half of an [`ExecStream`].
pub struct ExecWriter {
    inner: Pin<Box<dyn AsyncWrite + Send + Sync>>,
    _guard: Arc<dyn std::any::Any + Send + Sync>,
}

impl AsyncWrite for ExecWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.inner.as_mut().poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.inner.as_mut().poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.inner.as_mut().poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fence_and_cut_roundtrip() {
        let m = "__REASONIX_abc_";
        let raw = format!("Welcome banner\n{m}B\nhello\nno newline{m}x\n{m}E 3\n");
        let (out, noise, code) = cut(&raw, m).unwrap();
        assert_eq!(out, format!("hello\nno newline{m}x"));
        assert_eq!(noise, "Welcome banner\n");
        assert_eq!(code, Some(3));
        assert!(cut("no markers", m).is_none());
        let f = fence("echo hi", m);
        assert!(f.contains("echo hi"));
        assert!(f.contains("</dev/null"));
    }

    #[tokio::test]
    async fn fenced_script_runs_under_local_sh() {
        // The wrapper is plain POSIX sh: run it locally and cut it the same way.
        let m = "__REASONIX_test_";
        let script = fence("echo out; echo err >&2; printf 'x'; exit 7", m);
        let mut child = tokio::process::Command::new("sh")
            .arg("-s")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(script.as_bytes()).await.unwrap();
        drop(stdin);
        let out = child.wait_with_output().await.unwrap();
        let (stdout, _, code) = cut(&String::from_utf8_lossy(&out.stdout), m).unwrap();
        let (stderr, _, _) = cut(&String::from_utf8_lossy(&out.stderr), m).unwrap();
        assert_eq!(stdout, "out\nx");
        assert_eq!(stderr, "err\n");
        assert_eq!(code, Some(7));
    }
}
