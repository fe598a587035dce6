//! bash (unsandboxed here; the sandbox has its own tests), background jobs, group kill.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use reasonix_remote::sandbox::Sandbox;
use reasonix_remote::tools::{ToolContext, ToolOutput, ToolRegistry};
use serde_json::{json, Value};

fn ctx(dir: &Path) -> ToolContext {
    ToolContext::new(dir, Arc::new(Sandbox::off(dir)))
}

async fn call(ctx: &ToolContext, tool: &str, args: Value) -> ToolOutput {
    ToolRegistry::builtin()
        .get(tool)
        .expect("registered")
        .run(args, ctx)
        .await
}

fn alive(pid: i32) -> bool {
    // A zombie still answers kill(0); look at /proc state too.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .trim_start()
        .chars()
        .next();
    let exists = unsafe { libc::kill(pid, 0) == 0 };
    exists && state.is_some_and(|s| s != 'Z')
}

async fn wait_dead(pid: i32) -> bool {
    for _ in 0..200 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

#[tokio::test]
async fn bash_output_exit_codes_and_cwd() {
    let d = tempfile::tempdir().unwrap();
    let c = ctx(d.path());
    let o = call(
        &c,
        "bash",
        json!({"command": "echo out; echo err >&2; pwd"}),
    )
    .await;
    assert!(!o.is_error, "{}", o.text);
    assert_eq!(o.text, format!("out\nerr\n{}\n", c.workspace.display()));
    let o = call(&c, "bash", json!({"command": "true"})).await;
    assert_eq!((o.is_error, o.text.as_str()), (false, "(no output)"));
    let o = call(&c, "bash", json!({"command": "echo partial; exit 3"})).await;
    assert_eq!(
        (o.is_error, o.text.as_str()),
        (true, "partial\n[exit code 3]")
    );
    let o = call(&c, "bash", json!({"command": "exit 1"})).await;
    assert_eq!(o.text, "(no output)\n[exit code 1]");
    let o = call(&c, "bash", json!({"command": "kill -9 $$"})).await;
    assert!(
        o.is_error && o.text.ends_with("[killed by signal 9]"),
        "{}",
        o.text
    );
    let o = call(&c, "bash", json!({"command": "  "})).await;
    assert_eq!(o.text, "command is required");
}

#[tokio::test]
async fn bash_binary_output_does_not_crash() {
    let d = tempfile::tempdir().unwrap();
    let c = ctx(d.path());
    let o = call(
        &c,
        "bash",
        json!({"command": "printf 'a\\000b\\377\\376c'; head -c 100000 /dev/urandom"}),
    )
    .await;
    assert!(!o.is_error, "{}", o.text);
    assert!(
        o.text.starts_with("a\0b\u{FFFD}\u{FFFD}c"),
        "{:?}",
        &o.text[..10]
    );
}

#[tokio::test]
async fn bash_kills_leftover_group_after_completion() {
    let d = tempfile::tempdir().unwrap();
    let c = ctx(d.path());
    // The shell exits at once; its background grandchild must not survive it.
    let o = call(&c, "bash", json!({"command": "sleep 300 & echo $!"})).await;
    assert!(!o.is_error, "{}", o.text);
    let pid: i32 = o.text.trim().parse().expect("pid printed");
    assert!(wait_dead(pid).await, "sleep grandchild {pid} still alive");
}

#[tokio::test]
async fn bash_timeout_kills_the_whole_group() {
    let d = tempfile::tempdir().unwrap();
    let mut c = ctx(d.path());
    c.bash_timeout = Duration::from_secs(1);
    let pidfile = d.path().join("pid");
    let cmd = format!(
        "sleep 300 & echo $! > {}; echo started; wait",
        pidfile.display()
    );
    let o = call(&c, "bash", json!({"command": cmd})).await;
    assert!(o.is_error);
    assert_eq!(
        o.text,
        "started\n[timed out after 1 s; the command and every process it started were killed]"
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        wait_dead(pid).await,
        "sleep grandchild {pid} survived the timeout"
    );
}

#[tokio::test]
async fn background_job_output_in_pieces_wait_and_kill() {
    let d = tempfile::tempdir().unwrap();
    let c = ctx(d.path());
    let gate = d.path().join("gate");
    let cmd = format!(
        "echo first; echo noise; while [ ! -e {g} ]; do sleep 0.05; done; echo second; echo noise2",
        g = gate.display()
    );
    let o = call(
        &c,
        "bash",
        json!({"command": cmd, "run_in_background": true}),
    )
    .await;
    assert!(!o.is_error, "{}", o.text);
    assert!(
        o.text.starts_with("started background job job_1."),
        "{}",
        o.text
    );
    // First piece: wait until the first lines are there.
    let mut seen = String::new();
    for _ in 0..200 {
        let o = call(&c, "bash_output", json!({"job_id": "job_1"})).await;
        assert!(o.text.starts_with("job_1: running\n"), "{}", o.text);
        if o.text != "job_1: running\n(no new output)" {
            seen.push_str(o.text.trim_start_matches("job_1: running\n"));
        }
        if seen.contains("noise") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(seen, "first\nnoise\n");
    let o = call(&c, "bash_output", json!({"job_id": "job_1"})).await;
    assert_eq!(o.text, "job_1: running\n(no new output)");
    std::fs::write(&gate, "").unwrap();
    let o = call(
        &c,
        "wait",
        json!({"job_ids": ["job_1"], "timeout_seconds": 30}),
    )
    .await;
    assert_eq!(o.text, "job_1: exited with code 0");
    // Second piece: only what is new, filtered.
    let o = call(
        &c,
        "bash_output",
        json!({"job_id": "job_1", "filter": "^sec"}),
    )
    .await;
    assert_eq!(o.text, "job_1: exited with code 0\nsecond");
    let o = call(&c, "bash_output", json!({"job_id": "job_1"})).await;
    assert_eq!(o.text, "job_1: exited with code 0\n(no new output)");

    // A long job: wait times out, kill_shell kills its whole group.
    let pidfile = d.path().join("bgpid");
    let cmd = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
    let o = call(
        &c,
        "bash",
        json!({"command": cmd, "run_in_background": true}),
    )
    .await;
    assert!(
        o.text.starts_with("started background job job_2."),
        "{}",
        o.text
    );
    let o = call(
        &c,
        "wait",
        json!({"job_ids": ["job_2"], "timeout_seconds": 1}),
    )
    .await;
    assert_eq!(o.text, "job_2: running\n[still running after 1 s]");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let o = call(&c, "kill_shell", json!({"job_id": "job_2"})).await;
    assert_eq!(o.text, "killed job_2 (killed)");
    assert!(
        wait_dead(pid).await,
        "grandchild {pid} of killed job survived"
    );
    let o = call(&c, "kill_shell", json!({"job_id": "job_2"})).await;
    assert_eq!(o.text, "job_2 had already finished (killed)");
    let o = call(&c, "bash_output", json!({"job_id": "job_9"})).await;
    assert_eq!(
        (o.is_error, o.text.as_str()),
        (true, "no background job job_9 (known jobs: job_1, job_2)")
    );
    let o = call(&c, "bash_output", json!({"job_id": "job_1", "filter": "("})).await;
    assert!(
        o.is_error && o.text.starts_with("invalid filter regex"),
        "{}",
        o.text
    );
}

#[tokio::test]
async fn background_jobs_outlive_the_call_and_die_with_the_table() {
    let d = tempfile::tempdir().unwrap();
    let c = ctx(d.path());
    let pidfile = d.path().join("p");
    let cmd = format!("echo $$ > {}; sleep 300", pidfile.display());
    call(
        &c,
        "bash",
        json!({"command": cmd, "run_in_background": true}),
    )
    .await;
    let mut pid = None;
    for _ in 0..200 {
        if let Ok(s) = std::fs::read_to_string(&pidfile) {
            if let Ok(p) = s.trim().parse::<i32>() {
                pid = Some(p);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = pid.expect("job wrote its pid");
    assert!(alive(pid));
    let jobs = c.jobs.clone();
    drop(c);
    assert!(
        alive(pid),
        "the job belongs to the table, not the call or the context"
    );
    drop(jobs);
    assert!(
        wait_dead(pid).await,
        "dropping the job table kills its jobs"
    );
}

#[tokio::test]
async fn cancelling_a_foreground_call_kills_its_group() {
    let d = tempfile::tempdir().unwrap();
    let c = ctx(d.path());
    let pidfile = d.path().join("pid");
    let cmd = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
    let call_fut = call(&c, "bash", json!({ "command": cmd }));
    // The turn is cancelled while the command runs: the future is dropped.
    let cancelled = tokio::time::timeout(Duration::from_millis(500), call_fut).await;
    assert!(
        cancelled.is_err(),
        "the command should still have been running"
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        wait_dead(pid).await,
        "grandchild {pid} survived the cancelled call"
    );
}

#[tokio::test]
async fn a_streamed_foreground_command_sends_its_output_bounded_and_keeps_its_result() {
    use reasonix_remote::tools::{with_output_stream, OutputSink, STREAM_PIECE, STREAM_TOTAL};
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path());
    let pieces = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    // The command prints 4 KB lines until the sink has seen streaming stop at its bound
    // (the sink opens the gate), so it cannot end before the stream was cut.
    let gate = dir.path().join("go");
    let sink: OutputSink = {
        let (pieces, gate) = (pieces.clone(), gate.clone());
        Arc::new(move |p: &str| {
            pieces.lock().unwrap().push(p.to_string());
            if p.contains("streaming stopped") {
                std::fs::write(&gate, "").unwrap();
            }
        })
    };
    let out = with_output_stream(
        sink,
        call(
            &c,
            "bash",
            json!({"command": "s=$(head -c 4000 /dev/zero | tr '\\0' y); while [ ! -e go ]; do echo \"$s\"; sleep 0.01; done; echo tail-marker"}),
        ),
    )
    .await;
    assert!(!out.is_error, "failed ({} bytes)", out.text.len());
    assert!(out.text.ends_with("tail-marker\n"), "the result is whole");
    let got = std::mem::take(&mut *pieces.lock().unwrap());
    let bytes: usize = got.iter().map(String::len).sum();
    assert!(got.len() >= 2, "{} pieces", got.len());
    assert!(bytes <= STREAM_TOTAL + 4096, "{bytes} bytes streamed");
    assert!(
        got.iter().all(|p| p.len() <= STREAM_PIECE + 256),
        "a piece over the bound"
    );
    assert!(got.last().unwrap().contains("streaming stopped"));
    // Without a sink nothing streams and the result is the same.
    let plain = call(&c, "bash", json!({"command": "echo quiet"})).await;
    assert_eq!(plain.text, "quiet\n");
    assert!(pieces.lock().unwrap().is_empty());
}
