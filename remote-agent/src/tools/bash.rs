//! `bash`, `bash_output`, `kill_shell` and `wait`.

use std::sync::Arc;
use std::time::Duration;

use reasonix_forward::sync::LockExt;
use serde::Deserialize;
use serde_json::{json, Value};

use super::deny_guard::Armed;
use super::jobs::{exit_status, finish, kill_group, spawn_captured, JobStatus, Running};
use super::{parse_args, Tool, ToolContext, ToolOutput};

/// Output bytes a foreground command keeps (older bytes are dropped and reported).
pub const BASH_OUTPUT_CAP: usize = 16 * 1024 * 1024;
/// Default and maximum `wait` timeout in seconds.
pub const WAIT_DEFAULT_SECS: u64 = 30;
/// Upper bound for `wait{timeout_seconds}`.
pub const WAIT_MAX_SECS: u64 = 600;
/// How often a streamed foreground command's new output is sent.
pub const STREAM_EVERY: Duration = Duration::from_millis(100);
/// Bytes of one streamed piece (a bigger burst is cut to its first bytes).
pub const STREAM_PIECE: usize = 8 * 1024;
/// Bytes one command streams in all; past it streaming stops with a note (the result keeps
/// its own bounded view).
pub const STREAM_TOTAL: usize = 64 * 1024;

/// Receives the output of a streamed foreground command, piece by piece, as it is produced.
pub type OutputSink = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

tokio::task_local! {
    static STREAM: OutputSink;
}

/// Runs `fut` (a `bash` call) with `sink` receiving its foreground output while it runs,
/// bounded by [`STREAM_PIECE`] per piece, [`STREAM_TOTAL`] in all and one piece per
/// [`STREAM_EVERY`]. The tool's result is unchanged.
pub async fn with_output_stream<F: std::future::Future>(sink: OutputSink, fut: F) -> F::Output {
    STREAM.scope(sink, fut).await
}

/// Sends the new bytes of a running command's output to a sink, within the bounds.
struct Streamer {
    sink: OutputSink,
    /// Bytes of an incomplete UTF-8 character at the end of the last read.
    carry: Vec<u8>,
    sent: usize,
    stopped: bool,
}

impl Streamer {
    fn pump(&mut self, out: &std::sync::Mutex<super::jobs::OutBuf>) {
        if self.stopped {
            return;
        }
        let (bytes, lost) = out.lock_or_recover().take_new();
        if bytes.is_empty() && lost == 0 {
            return;
        }
        let mut buf = std::mem::take(&mut self.carry);
        buf.extend_from_slice(&bytes);
        let text = match std::str::from_utf8(&buf) {
            Ok(t) => t.to_string(),
            Err(e) if e.error_len().is_none() => {
                let (ok, rest) = buf.split_at(e.valid_up_to());
                self.carry = rest.to_vec();
                String::from_utf8_lossy(ok).into_owned()
            }
            Err(_) => String::from_utf8_lossy(&buf).into_owned(),
        };
        let mut piece = String::new();
        if lost > 0 {
            piece.push_str(&format!("[{lost} bytes not shown]\n"));
        }
        let room = STREAM_PIECE.min(STREAM_TOTAL.saturating_sub(self.sent));
        if text.len() > room {
            let mut cut = room;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            piece.push_str(&text[..cut]);
            if self.sent + cut >= STREAM_TOTAL {
                piece.push_str(
                    "\n[streaming stopped here; the output shows when the command ends]\n",
                );
                self.stopped = true;
            } else {
                piece.push_str(&format!("\n[{} bytes not shown]\n", text.len() - cut));
            }
            self.sent += cut;
        } else {
            self.sent += text.len();
            piece.push_str(&text);
        }
        if !piece.is_empty() {
            (self.sink)(&piece);
        }
    }
}

/// `bash{command, run_in_background?}`.
pub struct BashTool;

#[derive(Deserialize)]
struct BashArgs {
    command: String,
    #[serde(default)]
    run_in_background: bool,
}

#[async_trait::async_trait]
impl Tool for BashTool {
    fn name(&self) -> &'static str {
        "bash"
    }

    fn description(&self) -> &'static str {
        "Run a shell command (bash -c) in the workspace and return its combined stdout and \
         stderr. A non-zero exit is reported with the output and the exit code. Foreground \
         commands are killed, with every process they started, after the configured timeout \
         (default 120 s). For servers and long jobs set run_in_background=true and read the \
         output later with bash_output; stop it with kill_shell."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "Shell command line"},
                "run_in_background": {"type": "boolean", "description": "Start as a background job and return its job_id at once (default false)"}
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let a: BashArgs = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        if a.command.trim().is_empty() {
            return ToolOutput::err("command is required");
        }
        // With deny rules on file writers: the covered paths' state before the command, and
        // the read-only mounts it gets (see `deny_guard`). Without them, nothing at all.
        let armed = match &ctx.deny_guard {
            Some(g) => Some(Armed::arm(Arc::clone(g), ctx, &a.command).await),
            None => None,
        };
        let read_only = armed
            .as_ref()
            .map(Armed::read_only_paths)
            .unwrap_or_default();
        let cmd = match ctx
            .sandbox
            .command_with(&a.command, &ctx.workspace, &read_only)
        {
            Ok(c) => c,
            Err(e) => {
                if let Some(armed) = armed {
                    armed.disarm();
                }
                return ToolOutput::err(e.to_string());
            }
        };
        if a.run_in_background {
            let hook = armed.map(Armed::into_job_hook);
            return match ctx.jobs.spawn_with(cmd, &a.command, hook) {
                Ok(job) => ToolOutput::ok(format!(
                    "started background job {id}. Read its output with bash_output {{\"job_id\": \"{id}\"}}, \
                     wait for it with wait, stop it with kill_shell.",
                    id = job.id()
                )),
                Err(e) => ToolOutput::err(format!("cannot start command: {e}")),
            };
        }
        let out = run_foreground(cmd, ctx.bash_timeout).await;
        match armed {
            Some(armed) => armed.finish(out).await,
            None => out,
        }
    }
}

async fn run_foreground(cmd: tokio::process::Command, timeout: Duration) -> ToolOutput {
    let Running {
        mut child,
        pgid,
        out,
        mut reader,
    } = match spawn_captured(cmd, BASH_OUTPUT_CAP) {
        Ok(r) => r,
        Err(e) => return ToolOutput::err(format!("cannot start command: {e}")),
    };
    // If this future is dropped (the turn was cancelled), the guard kills the whole group.
    let mut guard = GroupGuard(Some(pgid));
    let mut streamer = STREAM.try_with(|s| s.clone()).ok().map(|sink| Streamer {
        sink,
        carry: Vec::new(),
        sent: 0,
        stopped: false,
    });
    let deadline = tokio::time::Instant::now() + timeout;
    let mut tick = tokio::time::interval(STREAM_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let waited = loop {
        tokio::select! {
            // `Child::wait` is cancel safe: polling it again after a tick loses nothing.
            r = child.wait() => break Ok(r),
            _ = tokio::time::sleep_until(deadline) => break Err(()),
            _ = tick.tick(), if streamer.is_some() => {
                if let Some(s) = streamer.as_mut() {
                    s.pump(&out);
                }
            }
        }
    };
    let timed_out = waited.is_err();
    if timed_out {
        kill_group(pgid);
    }
    let status = match waited {
        Ok(r) => r,
        Err(_) => child.wait().await,
    };
    // Leftover processes of the group (`sleep 100 &`) die here, on success as on timeout.
    finish(pgid, &mut reader).await;
    guard.0 = None;
    let (text, dropped) = {
        let g = out.lock_or_recover();
        let (bytes, dropped) = g.all();
        (String::from_utf8_lossy(&bytes).into_owned(), dropped)
    };
    let mut body = String::new();
    if dropped > 0 {
        body.push_str(&format!("[first {dropped} bytes of output dropped]\n"));
    }
    body.push_str(&text);
    if timed_out {
        return ToolOutput::err(format!(
            "{}{}[timed out after {} s; the command and every process it started were killed]",
            body,
            if body.is_empty() || body.ends_with('\n') {
                ""
            } else {
                "\n"
            },
            timeout.as_secs()
        ));
    }
    let status = match status {
        Ok(s) => exit_status(s),
        Err(e) => return ToolOutput::err(format!("{body}\n[waiting for the command failed: {e}]")),
    };
    let sep = if body.is_empty() || body.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    match status {
        JobStatus::Exited(0) => {
            if body.is_empty() {
                ToolOutput::ok("(no output)")
            } else {
                ToolOutput::ok(body)
            }
        }
        JobStatus::Exited(code) => {
            let body = if body.is_empty() {
                "(no output)\n".to_string()
            } else {
                format!("{body}{sep}")
            };
            ToolOutput::err(format!("{body}[exit code {code}]"))
        }
        JobStatus::Signaled(sig) => ToolOutput::err(format!("{body}{sep}[killed by signal {sig}]")),
        JobStatus::Running | JobStatus::Killed => ToolOutput::err(format!("{body}{sep}[killed]")),
    }
}

/// Kills a process group when dropped while armed.
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            kill_group(pgid);
        }
    }
}

fn unknown_job(ctx: &ToolContext, id: &str) -> ToolOutput {
    let ids = ctx.jobs.ids();
    ToolOutput::err(if ids.is_empty() {
        format!("no background job {id} (no jobs have been started)")
    } else {
        format!("no background job {id} (known jobs: {})", ids.join(", "))
    })
}

/// `bash_output{job_id, filter?}`.
pub struct BashOutputTool;

#[derive(Deserialize)]
struct OutputArgs {
    job_id: String,
    #[serde(default)]
    filter: Option<String>,
}

#[async_trait::async_trait]
impl Tool for BashOutputTool {
    fn name(&self) -> &'static str {
        "bash_output"
    }

    fn description(&self) -> &'static str {
        "Read the output a background job produced since the last bash_output call for it, \
         with its status. `filter` (a regular expression) keeps only matching lines; the \
         others are consumed all the same."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "job_id": {"type": "string", "description": "Job id returned by bash with run_in_background"},
                "filter": {"type": "string", "description": "Regular expression; only matching lines are shown"}
            },
            "required": ["job_id"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let a: OutputArgs = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        if let Some(msg) = a
            .filter
            .as_deref()
            .and_then(super::search::unsupported_class)
        {
            return ToolOutput::err(format!("invalid filter regex: {msg}"));
        }
        let filter = match a.filter.as_deref().map(regex::Regex::new).transpose() {
            Ok(f) => f,
            Err(e) => return ToolOutput::err(format!("invalid filter regex: {e}")),
        };
        let Some(job) = ctx.jobs.get(&a.job_id) else {
            return unknown_job(ctx, &a.job_id);
        };
        // Read the status first: output read afterwards is then complete for a finished job.
        let status = job.status();
        let (mut text, lost) = job.take_new_output();
        if let Some(re) = filter {
            let kept: Vec<&str> = text.lines().filter(|l| re.is_match(l)).collect();
            text = kept.join("\n");
        }
        let mut out = format!("{}: {status}\n", job.id());
        if lost > 0 {
            out.push_str(&format!(
                "[{lost} bytes of output were dropped before this read]\n"
            ));
        }
        if text.is_empty() {
            out.push_str("(no new output)");
        } else {
            out.push_str(&text);
        }
        ToolOutput::ok(out)
    }
}

/// `kill_shell{job_id}`.
pub struct KillShellTool;

#[derive(Deserialize)]
struct KillArgs {
    job_id: String,
}

#[async_trait::async_trait]
impl Tool for KillShellTool {
    fn name(&self) -> &'static str {
        "kill_shell"
    }

    fn description(&self) -> &'static str {
        "Stop a background job and every process it started."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "job_id": {"type": "string", "description": "Job id to stop"}
            },
            "required": ["job_id"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        // Only ever affects processes this session started itself.
        true
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let a: KillArgs = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        let Some(job) = ctx.jobs.get(&a.job_id) else {
            return unknown_job(ctx, &a.job_id);
        };
        if !job.kill() {
            return ToolOutput::ok(format!(
                "{} had already finished ({})",
                job.id(),
                job.status()
            ));
        }
        let status = job.wait(Duration::from_secs(5)).await;
        ToolOutput::ok(format!("killed {} ({status})", job.id()))
    }
}

/// `wait{job_ids, timeout_seconds}`.
pub struct WaitTool;

#[derive(Deserialize)]
struct WaitArgs {
    job_ids: Vec<String>,
    #[serde(default)]
    timeout_seconds: Option<u64>,
}

#[async_trait::async_trait]
impl Tool for WaitTool {
    fn name(&self) -> &'static str {
        "wait"
    }

    fn description(&self) -> &'static str {
        "Wait until all the given background jobs have finished, or until timeout_seconds \
         (default 30, at most 600) have passed, and report each job's status. Read their \
         output with bash_output."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "job_ids": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "Jobs to wait for"},
                "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 600, "description": "Give up waiting after this many seconds (default 30)"}
            },
            "required": ["job_ids"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let a: WaitArgs = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        if a.job_ids.is_empty() {
            return ToolOutput::err("job_ids must name at least one job");
        }
        let mut jobs = Vec::new();
        for id in &a.job_ids {
            match ctx.jobs.get(id) {
                Some(j) => jobs.push(j),
                None => return unknown_job(ctx, id),
            }
        }
        let secs = a
            .timeout_seconds
            .unwrap_or(WAIT_DEFAULT_SECS)
            .clamp(1, WAIT_MAX_SECS);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        let mut lines = Vec::new();
        let mut all_done = true;
        for job in &jobs {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let st = job.wait(left).await;
            all_done &= st.is_finished();
            lines.push(format!("{}: {st}", job.id()));
        }
        if !all_done {
            lines.push(format!("[still running after {secs} s]"));
        }
        ToolOutput::ok(lines.join("\n"))
    }
}
