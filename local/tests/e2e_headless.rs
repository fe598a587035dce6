//! `reasonix run` is scriptable, end to end (real `reasonix` → real `reasonix-remote` over
//! pipes → the scripted SSE mock provider): exit codes per outcome, a denied call's
//! `tool_started`/`tool_finished` pair with its reason, Ctrl-C cancelling the turn on the
//! host before exiting, the prompt from stdin, and model text stripped of terminal control
//! sequences.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

use common::{json_lines, LocalRig as Env};

fn setup(base_url: &str) -> Env {
    let config = common::mock_config(base_url, "m", "RX_HL_KEY", "");
    Env::with_config(&config, "RX_HL_KEY", "sk-headless")
}

fn command(env: &Env, args: &[&str]) -> Command {
    common::headless(env, args, 5)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_denied_headless_exits_4_with_a_started_finished_pair() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "w1",
                "write_file",
                &json!({"path": "x.txt", "content": "hi"}).to_string(),
            )],
            5,
        ),
        MockReply::text(&["could not write"]),
    ])
    .await;
    let env = setup(&mock.base_url());
    let out = command(&env, &["run", "--json", "write x"])
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(4), "needs approval: {stdout}");
    assert!(!env.ws.join("x.txt").exists());
    let events = json_lines(&out.stdout);
    let started: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_started" && e["call_id"] == "w1")
        .collect();
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_finished" && e["call_id"] == "w1")
        .collect();
    assert_eq!(started.len(), 1, "one tool_started: {stdout}");
    assert_eq!(finished.len(), 1, "one tool_finished: {stdout}");
    assert_eq!(started[0]["name"], "write_file");
    assert_eq!(started[0]["run"], false);
    assert!(started[0]["arguments"]
        .as_str()
        .unwrap_or("")
        .contains("x.txt"));
    assert_eq!(finished[0]["denied"], "headless", "{stdout}");
    assert!(
        finished[0]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("headless"),
        "{stdout}"
    );
    let pos = |v: &Value| events.iter().position(|e| e == v);
    assert!(
        pos(started[0]) < pos(finished[0]),
        "started before finished"
    );

    // Without --json: the reason once on stderr, same code.
    mock.push(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "w2",
                "write_file",
                &json!({"path": "y.txt", "content": "hi"}).to_string(),
            )],
            5,
        ),
        MockReply::text(&["no"]),
    ]);
    let out = command(&env, &["run", "write y"]).output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert_eq!(
        stderr.matches("needed approval and was denied").count(),
        1,
        "{stderr}"
    );
    // With --auto it runs and exits 0.
    mock.push(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "w3",
                "write_file",
                &json!({"path": "z.txt", "content": "hi"}).to_string(),
            )],
            5,
        ),
        MockReply::text(&["done"]),
    ]);
    let out = command(&env, &["run", "--auto", "write z"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0));
    assert!(env.ws.join("z.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cancels_the_turn_on_the_host_before_exiting() {
    // The first reply never comes in time: the turn is in its model request when Ctrl-C hits.
    let mock = MockProvider::start(vec![
        MockReply::Hang {
            chunks: vec!["thinking".into()],
        },
        MockReply::text(&["second turn"]),
    ])
    .await;
    let env = setup(&mock.base_url());
    let child = command(&env, &["run", "--json", "slow one"])
        .spawn()
        .expect("spawn");
    let pid = child.id() as i32;
    // Wait (bounded by a count of polls, not a timing assertion) for the model request.
    let mut polls = 0;
    while mock.request_count() == 0 {
        polls += 1;
        assert!(polls < 1200, "the model request never arrived");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // SAFETY: signalling the child we spawned.
    unsafe {
        libc::kill(pid, libc::SIGINT);
    }
    let started = Instant::now();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(130), "cancelled: {stdout}");
    let done: Vec<Value> = json_lines(&out.stdout)
        .into_iter()
        .filter(|e| e["type"] == "turn_finished")
        .collect();
    assert_eq!(done.len(), 1, "the host confirmed the end: {stdout}");
    assert_eq!(done[0]["outcome"], "cancelled");
    mock.wait_closed_early(0).await;
    eprintln!("exited {:?} after SIGINT", started.elapsed());

    // The next --continue runs its own turn only: the abandoned one is not finished first.
    let out = command(&env, &["run", "--json", "--continue", "next"])
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("second turn"), "{stdout}");
    assert_eq!(mock.request_count(), 2, "one request per turn: {stdout}");
    let last = &mock.requests()[1];
    let users: Vec<Value> = last
        .messages()
        .into_iter()
        .filter(|m| m["role"] == "user")
        .collect();
    assert!(
        users
            .last()
            .and_then(|m| m["content"].as_str())
            .unwrap_or("")
            .contains("next"),
        "{users:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_from_stdin_and_control_sequences_stripped() {
    let mock = MockProvider::start(vec![MockReply::text(&[
        "plain \u{1b}[31mred\u{1b}[0m ",
        "title\u{1b}]0;pwned\u{7} bell\u{7}\nline two\r\n",
    ])])
    .await;
    let env = setup(&mock.base_url());
    let mut child = command(&env, &["run", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"the prompt from a pipe\nwith two lines\n")
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.stdout
            .iter()
            .any(|b| *b == 0x1b || *b == 0x07 || *b == b'\r'),
        "no control bytes reach the terminal: {stdout:?}"
    );
    assert!(stdout.contains("plain ?[31mred?[0m"), "{stdout:?}");
    assert!(stdout.contains("\nline two\n"), "{stdout:?}");
    let user = mock.requests()[0]
        .messages()
        .into_iter()
        .find(|m| m["role"] == "user")
        .expect("user message");
    assert!(
        user["content"]
            .as_str()
            .unwrap_or("")
            .contains("the prompt from a pipe\nwith two lines"),
        "{user}"
    );
}
