//! A child running when the host daemon is SIGKILLed (#33 §1: "after a daemon restart a
//! running child resumes from the journal or is reported failed; it is never run twice"):
//! the real `reasonix` → the real `reasonix-remote` daemon over pipes → the scripted mock.
//!
//! The parent delegates with `task`; the child's bash is running when the daemon is killed.
//! The client reconnects (a new daemon reopens the session from the journal), and the turn
//! is reported interrupted, the parent's `task` call closed with an "interrupted" tool
//! result. A `--continue` turn carries that result to the model. From the mock's log and
//! the journal: the child's command ran once, its one step was asked once, nothing of the
//! child was asked again after the restart.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{headless, json_lines, text, LocalRig};
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

const CHILD_SYSTEM: &str = "You are a general-purpose subagent.";

fn daemon_pid(home: &Path) -> Option<i32> {
    for e in std::fs::read_dir(home.join("sessions")).ok()?.flatten() {
        if let Ok(b) = std::fs::read(e.path().join("daemon.json")) {
            let v: Value = serde_json::from_slice(&b).ok()?;
            return v["pid"].as_i64().map(|p| p as i32);
        }
    }
    None
}

/// True while `pid` runs (a zombie counts as gone).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let state = s.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        })
        .unwrap_or(false)
}

/// Every journal line under `home`'s sessions.
fn journal_lines(home: &Path) -> Vec<Value> {
    let mut lines = Vec::new();
    let mut stack = vec![home.join("sessions")];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
        } else if p.extension().is_some_and(|e| e == "jsonl") {
            lines.extend(json_lines(&std::fs::read(&p).unwrap()));
        }
    }
    lines
}

fn is_childs(r: &reasonix_testkit::mock_provider::RecordedRequest) -> bool {
    r.messages()[0]["content"]
        .as_str()
        .is_some_and(|s| s.contains(CHILD_SYSTEM))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_running_when_the_daemon_is_killed_is_reported_interrupted_and_never_rerun() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_t",
                "task",
                &json!({"prompt": "count once then wait", "description": "counter"}).to_string(),
            )],
            4,
        ),
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_b",
                "bash",
                &json!({"command": "echo ran >> counter.txt; while [ ! -e stop ]; do sleep 0.1; done"})
                    .to_string(),
            )],
            4,
        ),
        MockReply::text(&["parent carried on"]),
    ])
    .await;
    let env = LocalRig::new(&mock.base_url(), "RX_SARESTART_KEY", "sk-sarestart");
    let counter = env.ws.join("counter.txt");
    let mut first = headless(
        &env,
        &["run", "--json", "--yolo", "delegate the counter"],
        60,
    );
    let first = std::thread::spawn(move || first.output().expect("run reasonix"));
    // The child's command is running on the host: kill the daemon hard.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !counter.exists() {
        assert!(Instant::now() < deadline, "the child's bash never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = daemon_pid(&env.home).expect("daemon pid");
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while alive(pid) {
        assert!(Instant::now() < deadline, "daemon {pid} still runs");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The client reconnects to a new daemon, which reopened the session from the journal:
    // the turn is reported interrupted, not resumed and not a success.
    let first = tokio::task::spawn_blocking(move || first.join().expect("join"))
        .await
        .expect("join");
    let first_out = String::from_utf8_lossy(&first.stdout).to_string();
    assert!(!first.status.success(), "{}", text(&first));
    assert!(first_out.contains("interrupted"), "{}", text(&first));
    let new_pid = daemon_pid(&env.home).expect("a new daemon");
    assert_ne!(new_pid, pid);

    // The next turn of the session: the parent's `task` call is in its history, closed as
    // interrupted; the child is not asked again.
    let out = tokio::task::spawn_blocking({
        let mut c = headless(
            &env,
            &["run", "--json", "--yolo", "--continue", "carry on"],
            5,
        );
        move || c.output().expect("run reasonix")
    })
    .await
    .expect("join");
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("parent carried on"),
        "{}",
        text(&out)
    );
    // Let an orphaned command (if the kill left one) end before counting.
    std::fs::write(env.ws.join("stop"), "").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        std::fs::read_to_string(&counter).unwrap(),
        "ran\n",
        "the child's command ran exactly once"
    );

    // The mock's log: the parent's step, the child's one step, then the parent's next turn;
    // the child's step was asked once (before the kill), never again.
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3, "no provider request repeated");
    let child_steps: Vec<usize> = (0..reqs.len()).filter(|&i| is_childs(&reqs[i])).collect();
    assert_eq!(child_steps, [1], "one child step, asked once");
    let last = reqs[2].messages();
    let result = last
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_t")
        .expect("the task call's result in the parent's history");
    let result = result["content"].as_str().unwrap_or_default();
    assert!(result.contains("interrupted"), "{result}");
    assert!(
        last.iter().any(|m| m["role"] == "user"
            && m["content"]
                .as_str()
                .is_some_and(|c| c.contains("carry on"))),
        "{last:?}"
    );

    // The journal: the child's bash started once; the parent's call finished once, as an
    // interrupted error; the turn finished interrupted.
    let journal = journal_lines(&env.home);
    let child_starts = journal
        .iter()
        .filter(|l| {
            l["type"] == "subagent"
                && l["event"]["type"] == "tool_started"
                && l["event"]["call_id"] == "call_b"
        })
        .count();
    assert_eq!(child_starts, 1, "the child's call started once");
    let task_ends: Vec<&Value> = journal
        .iter()
        .filter(|l| l["type"] == "tool_finished" && l["call_id"] == "call_t")
        .collect();
    assert_eq!(task_ends.len(), 1, "{task_ends:?}");
    assert_eq!(task_ends[0]["is_error"], true);
    assert!(
        task_ends[0]["output"]
            .as_str()
            .is_some_and(|o| o.contains("interrupted")),
        "{:?}",
        task_ends[0]
    );
    // The child itself is closed in the journal (replays show it ended, not running): its
    // bash finished as interrupted, then its own turn.
    let child_ends: Vec<&Value> = journal
        .iter()
        .filter(|l| l["type"] == "subagent" && l["child"] == "sa-1")
        .filter(|l| {
            matches!(
                l["event"]["type"].as_str(),
                Some("tool_finished" | "turn_finished")
            )
        })
        .collect();
    assert_eq!(child_ends.len(), 2, "{child_ends:#?}");
    assert_eq!(child_ends[0]["event"]["call_id"], "call_b");
    assert_eq!(child_ends[0]["event"]["is_error"], true);
    assert!(child_ends[0]["event"]["output"]
        .as_str()
        .is_some_and(|o| o.contains("interrupted") && o.contains("not run again")));
    assert_eq!(child_ends[1]["event"]["outcome"], "interrupted");
    assert!(
        child_ends[1]["seq"].as_u64() < task_ends[0]["seq"].as_u64(),
        "the child ends before its parent's call"
    );
    assert!(
        journal.iter().any(|l| l["type"] == "turn_finished"
            && l["outcome"] == "interrupted"
            && l["turn"] == 1),
        "the first turn finished interrupted"
    );
    if let Some(pid) = daemon_pid(&env.home) {
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
}
