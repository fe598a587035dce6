//! A child's approval answered in the real `reasonix` workbench under tmux (#33 §1, "Done
//! means"): in `ask` mode the parent delegates with `task`, the child's step calls bash,
//! and the approval card names the child (its id, profile and task). Approved, the command
//! runs once and the child's answer reaches the parent; denied, the child gets a tool error
//! (not a crash), answers anyway, and the parent's turn finishes. And `/<name> args` of a
//! `run-as: subagent` skill typed in the workbench runs one child of that profile (#33 §3).

mod term_common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};
use term_common::{stop_daemons, write_mock_config, Tmux};

/// The parent delegates to a child "scribe" whose one tool call appends a line to
/// `ran.txt`; the child then answers `child_answer`, the parent `parent_answer`.
fn script(child_answer: &str, parent_answer: &str) -> Vec<MockReply> {
    vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_t",
                "task",
                &json!({"prompt": "record that the scribe ran", "description": "scribe"})
                    .to_string(),
            )],
            4,
        ),
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_w",
                "bash",
                &json!({"command": "echo scribe-ran >> ran.txt"}).to_string(),
            )],
            4,
        ),
        MockReply::text(&[child_answer]),
        MockReply::text(&[parent_answer]),
    ]
}

struct Rig {
    mock: MockProvider,
    _dir: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
    tmux: Tmux,
}

async fn start(child_answer: &str, parent_answer: &str) -> Rig {
    let mock = MockProvider::start(script(child_answer, parent_answer)).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    let home = dir.path().join("rxhome");
    // No permissions table: the default mode asks before bash.
    write_mock_config(&home, &mock.base_url(), "RX_TUI_KEY", "");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"));
    let host = bin.parent().expect("bin dir").join("reasonix-remote");
    let cmd = format!(
        "cd {} && env -u XDG_RUNTIME_DIR HOME={} REASONIX_HOME={} REASONIX_REMOTE_BIN={} {}",
        ws.display(),
        dir.path().display(),
        home.display(),
        host.display(),
        bin.display()
    );
    let tmux = Tmux::tui(&cmd);
    Rig {
        mock,
        _dir: dir,
        ws,
        home,
        tmux,
    }
}

/// Delegate, wait for the child's approval card and check it names the child; returns it.
fn child_card(t: &Tmux) -> String {
    t.wait_for("connected");
    t.send_keys(&["let the scribe record it", "Enter"]);
    let card = t.wait_for("Approval needed");
    assert!(
        card.contains("echo scribe-ran >> ran.txt"),
        "the card shows the child's command:\n{card}"
    );
    assert!(
        card.contains("subagent sa-1 (general: scribe)"),
        "the card names the child, its profile and its task:\n{card}"
    );
    card
}

fn wait_requests(
    mock: &MockProvider,
    n: usize,
) -> Vec<reasonix_testkit::mock_provider::RecordedRequest> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while mock.request_count() < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    mock.requests()
}

/// The content of the tool message answering `call_id` in a request's messages.
fn tool_result(messages: &[Value], call_id: &str) -> String {
    messages
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no result for {call_id} in {messages:?}"))
        .to_string()
}

fn quit(t: &Tmux, home: &Path) {
    t.send_keys(&["C-c"]);
    t.send_keys(&["C-c"]);
    stop_daemons(home);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_childs_approval_is_answered_in_the_workbench_and_its_command_runs_once() {
    let rig = start("scribe says it is recorded", "parent-saw-the-scribe").await;
    let t = &rig.tmux;
    tokio::task::block_in_place(|| {
        child_card(t);
        t.send_keys(&["y"]);
        let s = t.wait_for("parent-saw-the-scribe");
        assert!(!s.contains("Approval needed"), "{s}");
    });
    assert_eq!(
        std::fs::read_to_string(rig.ws.join("ran.txt")).expect("the child's command ran"),
        "scribe-ran\n",
        "the approved command ran exactly once"
    );
    // Four requests: parent, the child's two steps, the parent with the child's answer.
    let reqs = wait_requests(&rig.mock, 4);
    assert_eq!(reqs.len(), 4, "one request per step, none repeated");
    let out = tool_result(&reqs[2].messages(), "call_w");
    assert!(
        !out.to_lowercase().contains("denied"),
        "the child's bash ran: {out}"
    );
    let answer = tool_result(&reqs[3].messages(), "call_t");
    assert!(
        answer.contains("completed") && answer.contains("scribe says it is recorded"),
        "the child's answer reached the parent: {answer}"
    );
    quit(t, &rig.home);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_child_tool_is_a_tool_error_for_the_child_and_the_parent_finishes() {
    let rig = start("scribe could not record it", "parent-finished-anyway").await;
    let t = &rig.tmux;
    tokio::task::block_in_place(|| {
        child_card(t);
        t.send_keys(&["n"]);
        t.wait_for("parent-finished-anyway");
    });
    assert!(
        !rig.ws.join("ran.txt").exists(),
        "the denied command did not run"
    );
    let reqs = wait_requests(&rig.mock, 4);
    assert_eq!(reqs.len(), 4, "the child went on after the denial");
    // The child's next step saw the denial as its tool's result.
    let denied = tool_result(&reqs[2].messages(), "call_w");
    assert!(denied.to_lowercase().contains("denied"), "{denied}");
    // The child completed (a denial is no crash) and its answer reached the parent.
    let answer = tool_result(&reqs[3].messages(), "call_t");
    assert!(
        answer.contains("completed") && answer.contains("scribe could not record it"),
        "{answer}"
    );
    quit(t, &rig.home);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_skill_typed_as_a_slash_command_runs_as_a_child() {
    let mock =
        MockProvider::start(vec![MockReply::text(&["the kid found ", "KID-ANSWER-7"])]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    let skill = ws.join(".reasonix/skills/kid");
    std::fs::create_dir_all(&skill).expect("skill dir");
    std::fs::write(
        skill.join("SKILL.md"),
        "---\ndescription: Map things\nrun-as: subagent\nread-only: true\n---\nKID-SKILL-BODY: map what you are asked about.\n",
    )
    .expect("SKILL.md");
    let home = dir.path().join("rxhome");
    write_mock_config(&home, &mock.base_url(), "RX_TUI_KEY", "");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"));
    let host = bin.parent().expect("bin dir").join("reasonix-remote");
    let cmd = format!(
        "cd {} && env -u XDG_RUNTIME_DIR HOME={} REASONIX_HOME={} REASONIX_REMOTE_BIN={} {}",
        ws.display(),
        dir.path().display(),
        home.display(),
        host.display(),
        bin.display()
    );
    let t = Tmux::tui(&cmd);
    tokio::task::block_in_place(|| {
        t.wait_for("connected");
        t.type_text("/kid the parser");
        t.send_keys(&["Enter"]);
        t.wait_for("KID-ANSWER-7");
    });
    let reqs = wait_requests(&mock, 1);
    assert_eq!(
        reqs.len(),
        1,
        "one step, the child's; no step of the parent"
    );
    let msgs = reqs[0].messages();
    let system = msgs[0]["content"].to_string();
    assert!(
        system.contains("KID-SKILL-BODY"),
        "the skill is the child's profile: {system}"
    );
    let user = msgs.last().expect("a message")["content"].to_string();
    assert!(
        user.contains("the parser"),
        "the arguments are its task: {user}"
    );
    assert!(
        !reqs[0].body["tools"].to_string().contains("\"write_file\""),
        "its read-only profile gives it no writer"
    );
    quit(&t, &home);
}
