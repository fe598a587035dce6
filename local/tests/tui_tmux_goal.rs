//! Goals in the real `reasonix` TUI under tmux (issue 38 §3): `/goal <objective>` starts a
//! goal, the status bar and the transcript show its progress, `/goal pause` during a goal
//! turn lets that turn end and starts no other, `/goal status` says it is paused,
//! `/goal resume` starts the next goal turn, and the goal completes when the scripted model
//! reports `update_goal{status: complete}`. One provider request per model step.

mod term_common;

use std::path::PathBuf;
use std::time::Duration;

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::json;
use term_common::{write_mock_config, Daemons, Tmux};

fn report(id: &str, status: &str, evidence: &str) -> MockReply {
    MockReply::tool_calls(
        vec![MockToolCall::new(
            id,
            "update_goal",
            &json!({"status": status, "evidence": evidence}).to_string(),
        )],
        3,
    )
}

/// The status bar: the screen's last line that is not blank.
fn bar(screen: &str) -> String {
    screen
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tui_goal_start_pause_status_resume_complete() {
    let mock = MockProvider::start(vec![
        // Goal turn 1: a report, then an answer slow enough to pause the goal meanwhile.
        report("g1", "continue", "first-step-done"),
        MockReply::text(&["turn-one-", "over"]).slow(Duration::from_millis(1500)),
        // Goal turn 2 (after /goal resume): complete, with evidence.
        report("g2", "complete", "notes-checked"),
        MockReply::text(&["all-done"]),
    ])
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    let rx_home = dir.path().join("rxhome");
    write_mock_config(
        &rx_home,
        &mock.base_url(),
        "RX_TUI_GOAL_KEY",
        "[permissions]\nmode = \"auto\"\n",
    );
    let _daemons = Daemons(&rx_home);
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"));
    let host = bin.parent().expect("bin dir").join("reasonix-remote");
    let cmd = format!(
        "cd {} && env HOME={} REASONIX_HOME={} REASONIX_REMOTE_BIN={} {}",
        ws.display(),
        dir.path().display(),
        rx_home.display(),
        host.display(),
        bin.display()
    );
    let t = Tmux::tui(&cmd);
    tokio::task::block_in_place(|| {
        t.wait_for("connected");
        // A goal is the session's: wait until the session is open.
        t.wait_for("new session");
        t.send_keys(&["/goal write the notes", "Enter"]);
        t.wait_for("goal started: write the notes");
        let s = t.wait_for("goal report (continue): first-step-done");
        assert!(
            bar(&s).contains("goal running"),
            "the status bar shows the goal: {s}"
        );
        // Pause while the goal's first turn still streams its (slow) answer.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while mock.request_count() < 2 {
            assert!(std::time::Instant::now() < deadline, "no second step: {s}");
            std::thread::sleep(Duration::from_millis(50));
        }
        t.send_keys(&["/goal pause", "Enter"]);
        t.wait_for("goal paused: paused by the user");
        let s = t.wait_screen(Duration::from_secs(60), "turn one over", |s| {
            s.contains("turn-one-over") && s.contains("goal paused")
        });
        assert!(!s.contains("all-done"), "{s}");
        // Paused: no next goal turn.
        std::thread::sleep(Duration::from_secs(2));
        assert_eq!(mock.request_count(), 2, "a paused goal starts no turn");
        t.send_keys(&["/goal status", "Enter"]);
        t.wait_for("goal paused: write the notes");
        // Resume: the next goal turn runs and the model reports it complete.
        t.send_keys(&["/goal resume", "Enter"]);
        t.wait_for("goal running: resumed by the user");
        t.wait_for("goal report (complete): notes-checked");
        // The status bar's segment itself, not only the transcript's notice (which can be
        // drawn a frame before the bar changes).
        t.wait_screen(Duration::from_secs(60), "complete in the status bar", |s| {
            s.contains("all-done") && bar(s).contains("goal complete")
        });
        t.send_keys(&["/goal status", "Enter"]);
        t.wait_for("goal complete: write the notes");
    });
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 4, "two goal turns, two model steps each");
    let first = reqs[0].messages();
    let text = first.last().expect("message")["content"].to_string();
    assert!(
        text.contains("[goal] write the notes"),
        "the goal's first turn: {text}"
    );
    let second = reqs[2].messages();
    let text = second.last().expect("message")["content"].to_string();
    assert!(
        text.contains("[goal, turn 2]"),
        "the goal's second turn: {text}"
    );
    t.send_keys(&["C-c"]);
    t.send_keys(&["C-c"]);
}
