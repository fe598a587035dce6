//! A child process that speaks one message per line on stdin/stdout (an MCP stdio server),
//! shared by the host (servers of the workspace) and the laptop (servers tunnelled over the
//! link): spawning in a process group of its own, the pumps between its pipes and two line
//! channels, and what is known about it besides its stdout (stderr tail, how it ended).

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use crate::sync::LockExt;

/// Stderr lines kept per process.
pub const STDERR_TAIL_LINES: usize = 20;
/// Characters kept of one stderr line (a process dumping a minified blob must not flood us).
const STDERR_LINE_CHARS: usize = 400;

/// What is known about a process besides its message stream: the tail of its stderr and how
/// it ended. Shared between the pumps that fill it and whoever quotes it in errors.
#[derive(Debug, Default)]
pub struct ChildDiagnostics {
    inner: Mutex<DiagnosticsInner>,
}

#[derive(Debug, Default)]
struct DiagnosticsInner {
    stderr: VecDeque<String>,
    exit: Option<String>,
}

impl ChildDiagnostics {
    /// An empty record.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DiagnosticsInner> {
        self.inner.lock_or_recover()
    }

    /// Records one stderr line (the last [`STDERR_TAIL_LINES`] are kept, each shortened).
    pub fn push_stderr(&self, line: &str) {
        let line = line.trim_end();
        if line.is_empty() {
            return;
        }
        let short: String = line.chars().take(STDERR_LINE_CHARS).collect();
        let mut g = self.lock();
        if g.stderr.len() == STDERR_TAIL_LINES {
            g.stderr.pop_front();
        }
        g.stderr.push_back(short);
    }

    /// Records how the process ended (`process exited (exit status: 3)`, or a reason given
    /// by whoever closed it).
    pub fn set_exit(&self, how: impl Into<String>) {
        self.lock().exit = Some(how.into());
    }

    /// The kept stderr lines, oldest first, joined by newlines.
    pub fn stderr_tail(&self) -> String {
        self.lock()
            .stderr
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// How the process ended, once known.
    pub fn exit(&self) -> Option<String> {
        self.lock().exit.clone()
    }

    /// One human sentence: exit status and stderr tail, as much as is known.
    pub fn summary(&self) -> String {
        let mut out = self.exit().unwrap_or_default();
        let tail = self.stderr_tail();
        if !tail.is_empty() {
            if !out.is_empty() {
                out.push_str("; ");
            }
            out.push_str("stderr tail:\n");
            out.push_str(&tail);
        }
        out
    }
}

/// Kills the child's whole process group when dropped, so wrappers (`npx`, `sh -c`, `uvx`)
/// die together with what they started.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: Option<u32>,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.pgid {
            crate::process_group::kill_tree(pid);
        }
    }
}

/// A running line child: the two channels, its diagnostics and the guard that kills it.
/// `from_child` yields `None` once the process closed its stdout (after its last line); its
/// exit status and stderr tail are in `diagnostics` by then.
pub struct LineChild {
    /// Lines to the child's stdin (one message each, without the newline).
    pub to_child: mpsc::Sender<String>,
    /// Lines from the child's stdout (empty lines skipped, line ends trimmed).
    pub from_child: mpsc::Receiver<String>,
    /// Stderr tail and exit status.
    pub diagnostics: Arc<ChildDiagnostics>,
    /// Dropping it kills the process group.
    pub guard: GroupGuard,
}

/// Spawns `cmd` with piped stdio in a process group of its own and pumps its pipes into
/// channels of `depth` lines each way. `label` names it in debug logs of its stderr.
pub fn spawn_line_child(mut cmd: Command, depth: usize, label: &str) -> std::io::Result<LineChild> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::process_group::isolate(&mut cmd);
    let mut child = cmd.spawn()?;
    let guard = GroupGuard { pgid: child.id() };
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other("child pipes missing after spawn"));
    };
    let diagnostics = ChildDiagnostics::new();
    let (to_tx, to_rx) = mpsc::channel(depth);
    let (from_tx, from_rx) = mpsc::channel(depth);
    tokio::spawn(pump_stdin(stdin, to_rx));
    let stderr_task = tokio::spawn(pump_stderr(
        stderr,
        Arc::clone(&diagnostics),
        label.to_string(),
    ));
    tokio::spawn(pump_stdout(
        stdout,
        from_tx,
        child,
        stderr_task,
        Arc::clone(&diagnostics),
    ));
    Ok(LineChild {
        to_child: to_tx,
        from_child: from_rx,
        diagnostics,
        guard,
    })
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

/// Bytes of one stderr line held while reading it; the rest of an over-long line is read and
/// dropped. Only [`STDERR_LINE_CHARS`] of a line are kept anyway, and a process printing
/// endless output without a newline must not grow our memory with it.
const STDERR_LINE_BYTES: usize = 4 * STDERR_LINE_CHARS;

async fn pump_stderr(stderr: impl AsyncRead + Unpin, diag: Arc<ChildDiagnostics>, label: String) {
    let mut r = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        let (used, end_of_line) = match r.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(chunk) => {
                let (used, end) = match chunk.iter().position(|&b| b == b'\n') {
                    Some(i) => (i + 1, true),
                    None => (chunk.len(), false),
                };
                let room = STDERR_LINE_BYTES.saturating_sub(line.len());
                line.extend_from_slice(&chunk[..used.min(room)]);
                (used, end)
            }
        };
        r.consume(used);
        if end_of_line {
            emit_stderr(&diag, &label, &line);
            line.clear();
        }
    }
    // A last line without a newline.
    emit_stderr(&diag, &label, &line);
}

fn emit_stderr(diag: &ChildDiagnostics, label: &str, line: &[u8]) {
    if line.is_empty() {
        return;
    }
    let line = String::from_utf8_lossy(line);
    tracing::debug!(child = %label, stderr = %line.trim_end(), "child stderr");
    diag.push_stderr(&line);
}

/// The longest stdout line (one JSON-RPC message) accepted from a child. MCP results of tens
/// of MiB are legitimate; a process that writes more than this without a newline is stopped,
/// so it cannot grow our memory without bound.
pub const STDOUT_LINE_MAX: usize = 64 * 1024 * 1024;

/// How [`read_bounded_line`] ended.
#[derive(Debug, PartialEq)]
enum Line {
    /// A line (with its newline, unless it was the last one) is in the buffer.
    Whole,
    /// End of stream with nothing read.
    End,
    /// More than `max` bytes came without a newline; the buffer holds the first `max`.
    TooLong,
}

/// `read_until(b'\n')` that holds at most `max` bytes.
async fn read_bounded_line(
    r: &mut (impl tokio::io::AsyncBufRead + Unpin),
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(if buf.is_empty() {
                Line::End
            } else {
                Line::Whole
            });
        }
        let (used, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if buf.len() + used > max {
            let room = max - buf.len();
            buf.extend_from_slice(&chunk[..room]);
            r.consume(room);
            return Ok(Line::TooLong);
        }
        buf.extend_from_slice(&chunk[..used]);
        r.consume(used);
        if done {
            return Ok(Line::Whole);
        }
    }
}

/// Forwards stdout lines; at EOF records the exit status (letting stderr drain first) before
/// closing the channel, so whoever sees the end can quote both.
async fn pump_stdout(
    stdout: impl AsyncRead + Unpin,
    tx: mpsc::Sender<String>,
    mut child: Child,
    stderr_task: tokio::task::JoinHandle<()>,
    diag: Arc<ChildDiagnostics>,
) {
    let mut r = BufReader::new(stdout);
    let mut buf = Vec::new();
    let mut too_long = None;
    loop {
        buf.clear();
        match read_bounded_line(&mut r, &mut buf, STDOUT_LINE_MAX).await {
            Ok(Line::End) | Err(_) => break,
            Ok(Line::TooLong) => {
                too_long = Some(buf.len());
                break;
            }
            Ok(Line::Whole) => {
                let line = String::from_utf8_lossy(&buf)
                    .trim_end_matches(['\r', '\n'])
                    .to_string();
                if line.is_empty() {
                    continue;
                }
                if tx.send(line).await.is_err() {
                    // The reader is gone; the guard kills the group.
                    return;
                }
            }
        }
    }
    if let Some(held) = too_long {
        // A message this big is a broken or hostile server: closing the channel ends it (the
        // guard kills its group) and its users get this reason instead of waiting forever.
        tracing::warn!(
            held,
            "child stdout line over {STDOUT_LINE_MAX} bytes: stopping it"
        );
        diag.set_exit(format!(
            "stopped: it wrote a line over {} MiB without a newline (a message that big is not accepted)",
            STDOUT_LINE_MAX / (1024 * 1024)
        ));
        return;
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), stderr_task).await;
    let status = match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
        Ok(Ok(st)) => format!("process exited ({st})"),
        Ok(Err(e)) => format!("process state unknown: {e}"),
        Err(_) => "process closed its stdout but is still running".to_string(),
    };
    diag.set_exit(status);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bounded_lines_match_read_until_below_the_bound_and_stop_above_it() {
        // Oracle: tokio's unbounded `read_until` on the same bytes, through a reader that
        // hands out tiny chunks so lines straddle buffer refills.
        let inputs: [&[u8]; 6] = [
            b"",
            b"one\ntwo\n",
            b"no newline at the end",
            b"\n\n\nx\n",
            b"0123456789\nabc",
            b"exactly-16-bytes\nnext\n",
        ];
        for input in inputs {
            let mut ours = Vec::new();
            let mut r = BufReader::with_capacity(3, input);
            loop {
                let mut buf = Vec::new();
                match read_bounded_line(&mut r, &mut buf, 64)
                    .await
                    .expect("in-memory read")
                {
                    Line::End => break,
                    Line::Whole => ours.push(buf),
                    Line::TooLong => panic!("no line here is over 64 bytes"),
                }
            }
            let mut theirs = Vec::new();
            let mut r = BufReader::with_capacity(3, input);
            loop {
                let mut buf = Vec::new();
                if r.read_until(b'\n', &mut buf).await.expect("in-memory read") == 0 {
                    break;
                }
                theirs.push(buf);
            }
            assert_eq!(ours, theirs, "{:?}", String::from_utf8_lossy(input));
        }
        let mut r = BufReader::with_capacity(3, &b"0123456789abcdef-and-more\nok\n"[..]);
        let mut buf = Vec::new();
        assert_eq!(
            read_bounded_line(&mut r, &mut buf, 16)
                .await
                .expect("in-memory read"),
            Line::TooLong
        );
        assert_eq!(buf, b"0123456789abcdef");
        // A line of exactly the bound (newline included) is accepted.
        let mut r = BufReader::with_capacity(3, &b"0123456789abcde\n"[..]);
        let mut buf = Vec::new();
        assert_eq!(
            read_bounded_line(&mut r, &mut buf, 16)
                .await
                .expect("in-memory read"),
            Line::Whole
        );
    }

    // The child is an `sh` script (no `sh` on Windows; the pumps are the same code there).
    #[cfg(unix)]
    #[tokio::test]
    async fn lines_flow_both_ways_and_the_end_is_recorded() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "read l; echo \"got $l\"; echo oops >&2; exit 3"]);
        let mut c = spawn_line_child(cmd, 8, "test").expect("spawn");
        c.to_child.send("ping".into()).await.expect("send");
        assert_eq!(c.from_child.recv().await.as_deref(), Some("got ping"));
        assert_eq!(c.from_child.recv().await, None);
        assert_eq!(c.diagnostics.stderr_tail(), "oops");
        let exit = c.diagnostics.exit().expect("exit recorded");
        assert!(exit.contains("exit status: 3"), "{exit}");
    }

    // The child is an `sh` script (no `sh` on Windows; the pumps are the same code there).
    #[cfg(unix)]
    #[tokio::test]
    async fn a_child_writing_an_endless_line_is_stopped_with_the_reason() {
        // A real process writing past the bound without a newline, after one good line.
        let mut cmd = Command::new("sh");
        let over = STDOUT_LINE_MAX + 4096;
        cmd.args([
            "-c",
            &format!("echo ready; head -c {over} /dev/zero; echo never"),
        ]);
        let mut c = spawn_line_child(cmd, 8, "test").expect("spawn");
        assert_eq!(c.from_child.recv().await.as_deref(), Some("ready"));
        assert_eq!(
            c.from_child.recv().await,
            None,
            "the endless line is not delivered"
        );
        let exit = c.diagnostics.exit().expect("the reason is recorded");
        assert!(exit.contains("without a newline"), "{exit}");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn dropping_the_guard_kills_the_whole_group() {
        let mut cmd = Command::new("sh");
        // A wrapper whose child would outlive it if only the wrapper were killed.
        cmd.args(["-c", "sleep 600 & echo $!; wait"]);
        let mut c = spawn_line_child(cmd, 8, "test").expect("spawn");
        let pid: i32 = c
            .from_child
            .recv()
            .await
            .and_then(|l| l.parse().ok())
            .expect("grandchild pid");
        drop(c.guard);
        let gone = async {
            // SAFETY: kill(pid, 0) only checks for existence.
            while unsafe { libc::kill(pid, 0) } == 0
                && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s.contains(") Z "))
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), gone)
            .await
            .expect("the grandchild died with its group");
    }

    // The child is an `sh` script (no `sh` on Windows; the pumps are the same code there).
    #[cfg(unix)]
    #[tokio::test]
    async fn endless_stderr_without_a_newline_is_bounded_and_the_tail_still_recorded() {
        let mut cmd = Command::new("sh");
        // 8 MiB on stderr in one line, then a normal line; stdout closes after both.
        cmd.args([
            "-c",
            "head -c 8388608 /dev/zero | tr '\\0' x >&2; echo ' end' >&2; echo last >&2",
        ]);
        let mut c = spawn_line_child(cmd, 8, "test").expect("spawn");
        assert_eq!(c.from_child.recv().await, None);
        let tail = c.diagnostics.stderr_tail();
        let lines: Vec<&str> = tail.lines().collect();
        assert_eq!(lines.len(), 2, "{}", &tail[..tail.len().min(200)]);
        assert_eq!(
            lines[0].len(),
            STDERR_LINE_CHARS,
            "the long line is shortened"
        );
        assert!(lines[0].bytes().all(|b| b == b'x'));
        assert_eq!(lines[1], "last");
    }

    #[test]
    fn the_stderr_tail_keeps_the_last_lines_shortened() {
        let d = ChildDiagnostics::new();
        for i in 0..(STDERR_TAIL_LINES + 5) {
            d.push_stderr(&format!("line {i}\n"));
        }
        d.push_stderr(&"x".repeat(1000));
        let tail = d.stderr_tail();
        assert!(!tail.contains("line 5\n") && tail.contains("line 24"));
        assert_eq!(tail.lines().count(), STDERR_TAIL_LINES);
        assert_eq!(tail.lines().last().map(str::len), Some(STDERR_LINE_CHARS));
    }
}
