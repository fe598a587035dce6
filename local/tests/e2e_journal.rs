//! The session journal and per-session state against the real binaries: a tool whose start
//! cannot be saved (the state directory is a full tmpfs) does not run, the user is told
//! where and why and what to do, and once space is back the session goes on with nothing
//! lost; two sessions in one daemon cannot see or kill each other's background jobs.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use common::{host_bin, LocalRig};
use reasonix_forward::proto::{Request, Response, TurnState};
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

/// A tmpfs of `size` mounted on `dir` (needs root, as in CI); unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).expect("mount point");
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "this test needs root to mount a tmpfs: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Write zeros to `file` until the file system says it is full.
fn fill(file: &Path) {
    let mut f = std::fs::File::create(file).expect("filler");
    let chunk = vec![0u8; 64 * 1024];
    loop {
        if f.write_all(&chunk).is_err() {
            break;
        }
    }
    // Whole pages only are left to the journal file's last partial page, if any.
    let page = vec![0u8; 4096];
    while f.write_all(&page).is_ok() {}
}

fn run(home: &Path, ws: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .arg("run")
        .args(args)
        .current_dir(ws)
        .env("REASONIX_HOME", home)
        .env("REASONIX_REMOTE_BIN", host_bin())
        .env("REASONIX_IDLE_TIMEOUT_SECS", "60")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("run")
}

fn text(out: &std::process::Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The one session journal under `sessions`.
fn journal_file(sessions: &Path) -> PathBuf {
    for dir in std::fs::read_dir(sessions).expect("sessions").flatten() {
        if !dir.path().is_dir() {
            continue;
        }
        for f in std::fs::read_dir(dir.path()).expect("key dir").flatten() {
            if f.file_name().to_string_lossy().ends_with(".jsonl") {
                return f.path();
            }
        }
    }
    panic!("no journal under {}", sessions.display());
}

fn daemon_pid(sessions: &Path) -> Option<i32> {
    for dir in std::fs::read_dir(sessions).ok()?.flatten() {
        if let Ok(b) = std::fs::read(dir.path().join("daemon.json")) {
            if let Ok(v) = serde_json::from_slice::<Value>(&b) {
                return v["pid"].as_i64().map(|p| p as i32);
            }
        }
    }
    None
}

/// The tool result texts of the last request the mock got.
fn tool_results(req: &reasonix_testkit::mock_provider::RecordedRequest) -> Vec<String> {
    req.messages()
        .iter()
        .rev()
        .take_while(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect()
}

fn bash(id: &str, args: Value) -> MockReply {
    MockReply::tool_calls(vec![MockToolCall::new(id, "bash", &args.to_string())], 64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_state_dir_refuses_the_tool_and_the_session_recovers_when_space_is_back() {
    let slot: Arc<Mutex<Option<PathBuf>>> = Arc::new(Mutex::new(None));
    let filler_slot = Arc::clone(&slot);
    let ws_slot: Arc<Mutex<Option<PathBuf>>> = Arc::new(Mutex::new(None));
    let ws_for_mock = Arc::clone(&ws_slot);
    let mock = MockProvider::start_with(move |req| {
        let ws = ws_for_mock.lock().expect("ws").clone().expect("ws set");
        match req.index {
            0 => MockReply::text(&["ready"]),
            1 => {
                // The turn is saved (its UserTurn is fsynced before the model is asked);
                // now the disk fills up before the model answers with a tool call.
                let filler = filler_slot.lock().expect("slot").clone().expect("filler");
                fill(&filler);
                // Arguments bigger than a page, so the line cannot hide in the journal
                // file's last partial page.
                let pad = "x".repeat(6000);
                bash(
                    "c-full",
                    json!({"command": format!("touch {}/ran-while-full # {pad}", ws.display())}),
                )
            }
            2 => bash(
                "c-after",
                json!({"command": format!("touch {}/ran-after", ws.display())}),
            ),
            _ => MockReply::text(&["done"]),
        }
    })
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_J_KEY", "sk-journal");
    let (home, ws) = (rig.home.clone(), rig.ws.clone());
    *ws_slot.lock().expect("ws") = Some(ws.clone());
    let sessions = home.join("sessions");
    let _tmpfs = Tmpfs::mount(&sessions, "2m");
    *slot.lock().expect("slot") = Some(sessions.join("filler"));

    let first = tokio::task::block_in_place(|| run(&home, &ws, &["--yolo", "hello"]));
    assert!(first.status.success(), "{}", text(&first));
    let journal = journal_file(&sessions);

    // Turn 2: the model asks for a tool while the state directory is full.
    let second =
        tokio::task::block_in_place(|| run(&home, &ws, &["--continue", "--yolo", "touch it"]));
    let out = text(&second);
    assert!(!second.status.success(), "the turn must fail: {out}");
    assert!(
        !ws.join("ran-while-full").exists(),
        "the tool ran although its start was not journaled"
    );
    assert!(out.contains("bash was not run"), "{out}");
    assert!(
        out.contains(&journal.display().to_string()),
        "the message names the journal: {out}"
    );
    assert!(
        out.contains("No space left on device"),
        "the message names the cause: {out}"
    );
    assert!(
        out.contains("df -h") && out.contains("send a new message"),
        "the message says what to do: {out}"
    );
    assert_eq!(
        mock.request_count(),
        2,
        "the failed turn asked nothing more"
    );

    // Space is back: the same session goes on, and runs its tool.
    std::fs::remove_file(sessions.join("filler")).expect("free space");
    let third =
        tokio::task::block_in_place(|| run(&home, &ws, &["--continue", "--yolo", "try again"]));
    assert!(third.status.success(), "{}", text(&third));
    assert!(ws.join("ran-after").exists(), "the next turn's tool ran");
    assert!(!ws.join("ran-while-full").exists());
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 4);
    // The model saw the refused call's result in its history, then the new one.
    let history: String = reqs[2]
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(history.contains("not run:"), "{history}");
    assert_eq!(tool_results(&reqs[3]).len(), 1);

    // Nothing was lost: the refused turn's events were written once space was back, in
    // order, numbered without gaps or repeats.
    let lines: Vec<Value> = std::fs::read_to_string(&journal)
        .expect("journal")
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is whole"))
        .collect();
    let seqs: Vec<u64> = lines
        .iter()
        .map(|l| l["seq"].as_u64().expect("seq"))
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    let refused = lines
        .iter()
        .find(|l| l["type"] == "tool_finished" && l["call_id"] == "c-full")
        .expect("the refused call's result is journaled");
    assert!(refused["output"]
        .as_str()
        .unwrap_or("")
        .starts_with("not run:"));
    // Its start may be in the journal (queued before the refusal), but only before the
    // result that says it did not run.
    let pos = |ty: &str| {
        lines
            .iter()
            .position(|l| l["type"] == ty && l["call_id"] == "c-full")
    };
    if let Some(started) = pos("tool_started") {
        assert!(Some(started) < pos("tool_finished"));
    }
    assert!(lines
        .iter()
        .any(|l| l["type"] == "turn_finished" && l["turn"] == 2 && l["outcome"] == "failed"));

    // A turn that cannot even be saved fails at once, naming the journal and the cause, and
    // nothing is asked of the model (its prompt is larger than a page, so it cannot hide in
    // the journal file's last partial page).
    fill(&sessions.join("filler"));
    let big = format!("save me {}", "y".repeat(3 * 4096));
    let mut child = Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .args(["run", "--continue", "--yolo", &big])
        .current_dir(&ws)
        .env("REASONIX_HOME", &home)
        .env("REASONIX_REMOTE_BIN", host_bin())
        .env("REASONIX_IDLE_TIMEOUT_SECS", "60")
        .env_remove("XDG_RUNTIME_DIR")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("a submit that cannot be journaled still waits after 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let fourth = child.wait_with_output().expect("output");
    let out = text(&fourth);
    assert!(!fourth.status.success(), "{out}");
    assert!(out.contains("No space left on device"), "{out}");
    assert!(out.contains(&journal.display().to_string()), "{out}");
    assert_eq!(mock.request_count(), 4, "nothing was asked of the model");
    std::fs::remove_file(sessions.join("filler")).expect("free space");

    if let Some(pid) = daemon_pid(&sessions) {
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
}

fn session_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "session")
        .and_then(|v| v["session"].as_str().map(String::from))
        .unwrap_or_else(|| panic!("no session line: {}", text(out)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_in_one_daemon_cannot_see_or_kill_each_others_jobs() {
    let mock = MockProvider::start_with(|req| match req.index {
        // Session A starts a background job.
        0 => bash(
            "a1",
            json!({"command": "sleep 60", "run_in_background": true}),
        ),
        // Session B tries to read and kill it by id.
        2 => MockReply::tool_calls(
            vec![
                MockToolCall::new("b1", "bash_output", &json!({"job_id": "job_1"}).to_string()),
                MockToolCall::new("b2", "kill_shell", &json!({"job_id": "job_1"}).to_string()),
            ],
            64,
        ),
        // Session A still owns it, running.
        4 => MockReply::tool_calls(
            vec![
                MockToolCall::new("a2", "bash_output", &json!({"job_id": "job_1"}).to_string()),
                MockToolCall::new("a3", "kill_shell", &json!({"job_id": "job_1"}).to_string()),
            ],
            64,
        ),
        _ => MockReply::text(&["ok"]),
    })
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_J2_KEY", "sk-jobs");
    let (home, ws) = (rig.home.clone(), rig.ws.clone());

    let a = tokio::task::block_in_place(|| run(&home, &ws, &["--json", "--yolo", "start"]));
    assert!(a.status.success(), "{}", text(&a));
    let session_a = session_of(&a);
    let b = tokio::task::block_in_place(|| run(&home, &ws, &["--json", "--yolo", "peek"]));
    assert!(b.status.success(), "{}", text(&b));
    assert_ne!(session_of(&b), session_a, "B is a session of its own");
    let again = tokio::task::block_in_place(|| {
        run(
            &home,
            &ws,
            &["--json", "--yolo", "--session", &session_a, "check"],
        )
    });
    assert!(again.status.success(), "{}", text(&again));

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 6, "{reqs:?}");
    let started = tool_results(&reqs[1]);
    assert!(
        started[0].starts_with("started background job job_1."),
        "{started:?}"
    );
    let from_b = tool_results(&reqs[3]);
    assert_eq!(
        from_b,
        vec![
            "no background job job_1 (no jobs have been started)".to_string(),
            "no background job job_1 (no jobs have been started)".to_string(),
        ],
        "session B must not see or kill A's job"
    );
    let from_a = tool_results(&reqs[5]);
    assert!(from_a[0].starts_with("job_1: running"), "{from_a:?}");
    assert_eq!(from_a[1], "killed job_1 (killed)", "{from_a:?}");

    // A fresh daemon lists both sessions from their journals' head and tail, without
    // opening them.
    let sessions_dir = home.join("sessions");
    let pid = daemon_pid(&sessions_dir).expect("daemon pid");
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    while Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
    {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let config = rig.config();
    let (client, _events) = rig.client(&config);
    let Response::Sessions { sessions } =
        client.request(Request::ListSessions).await.expect("list")
    else {
        panic!("unexpected answer to ListSessions")
    };
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    let a_info = sessions
        .iter()
        .find(|s| s.id == session_a)
        .expect("session A listed");
    let a_journal = std::fs::read_to_string(
        std::fs::read_dir(&sessions_dir)
            .expect("sessions")
            .flatten()
            .map(|d| d.path().join(format!("{session_a}.jsonl")))
            .find(|p| p.exists())
            .expect("A's journal"),
    )
    .expect("read A's journal");
    let last: Value =
        serde_json::from_str(a_journal.lines().last().expect("a line")).expect("last line");
    assert_eq!(a_info.title, "start");
    assert_eq!(a_info.turns, 2);
    assert_eq!(Some(a_info.last_seq), last["seq"].as_u64());
    assert_eq!(a_info.state, TurnState::Idle);
    assert!(!a_info.created.is_empty());
    let b_info = sessions.iter().find(|s| s.id != session_a).expect("B");
    assert_eq!((b_info.title.as_str(), b_info.turns), ("peek", 1));
    drop(client);

    if let Some(pid) = daemon_pid(&sessions_dir) {
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
}
