//! Plan mode in the real `reasonix` TUI under tmux: Shift+Tab cycles ask → auto → plan, the
//! model's write attempt is refused while planning, the approval card shows the proposed
//! plan, "revise" sends a comment and a new card comes, "execute" runs the plan in `auto`
//! (the mode chosen before planning: the write needs no approval), and the status bar shows
//! the step in progress.

mod term_common;

use std::path::PathBuf;
use std::time::Duration;

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::json;
use term_common::{write_mock_config, Daemons, Tmux};

const PLAN_A: &str = "## Goal\nNotes.\n\n## Steps\n1. Write notes.txt\n2. Check it\n\n## Files to touch\n- notes.txt\n\n## Verification\n1. cat notes.txt\n";
const PLAN_B: &str = "## Goal\nNotes.\n\n## Steps\n1. Write done.txt\n2. Check it\n3. Tell the user\n\n## Files to touch\n- done.txt\n\n## Verification\n1. cat done.txt\n";

fn call(id: &str, name: &str, args: serde_json::Value) -> MockToolCall {
    MockToolCall::new(id, name, &args.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tui_plan_card_revise_then_execute_in_auto() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![call(
                "w1",
                "write_file",
                json!({"path": "early.txt", "content": "x"}),
            )],
            9,
        ),
        MockReply::tool_calls(
            vec![call("p1", "exit_plan_mode", json!({"plan": PLAN_A}))],
            9,
        ),
        MockReply::text(&["first-plan-ready"]),
        MockReply::tool_calls(
            vec![call("p2", "exit_plan_mode", json!({"plan": PLAN_B}))],
            9,
        ),
        MockReply::text(&["second-plan-ready"]),
        MockReply::tool_calls(
            vec![call(
                "x1",
                "write_file",
                json!({"path": "done.txt", "content": "ok"}),
            )],
            9,
        ),
        MockReply::text(&["executed-it"]),
    ])
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    let rx_home = dir.path().join("rxhome");
    write_mock_config(
        &rx_home,
        &mock.base_url(),
        "RX_TUI_PLAN_KEY",
        "[permissions]\nmode = \"ask\"\n",
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
        t.send_keys(&["BTab"]);
        t.wait_for("mode: auto");
        t.send_keys(&["BTab"]);
        t.wait_for("plan mode");
        t.send_keys(&["add notes", "Enter"]);
        let s = t.wait_for("Plan (2 steps): approve?");
        assert!(s.contains("execute it"), "{s}");
        assert!(!ws.join("early.txt").exists(), "a write ran in plan mode");
        // Revise: the card closes, the comment goes to the model, a new card comes.
        t.send_keys(&["r"]);
        t.wait_for("revise: type what to change");
        t.send_keys(&["add a step to tell me", "Enter"]);
        t.wait_for("Plan (3 steps): approve?");
        // Execute: in auto, the write runs without an approval.
        t.send_keys(&["1"]);
        let s = t.wait_screen(Duration::from_secs(60), "executed", |s| {
            s.contains("executed-it") && s.contains("step 1/3: Write done.txt")
        });
        assert!(!s.contains("Approval needed"), "{s}");
    });
    assert_eq!(
        std::fs::read_to_string(ws.join("done.txt")).expect("done.txt"),
        "ok"
    );
    assert!(!ws.join("early.txt").exists());
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 7, "three turns, seven model steps");
    let revise = reqs[3].messages();
    let last = revise.last().expect("message");
    let text = last["content"].to_string();
    assert!(
        text.contains("[plan mode]") && text.contains("add a step to tell me"),
        "{text}"
    );
    t.send_keys(&["C-c"]);
    t.send_keys(&["C-c"]);
}
