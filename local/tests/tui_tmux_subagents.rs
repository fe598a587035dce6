//! Subagents in the real `reasonix` workbench under tmux (#33 §2): while a `task` child
//! runs a slow bash command, the panel beside the conversation shows it (id, task, step,
//! tokens, the tool it runs, elapsed); Ctrl-G opens its transcript; `x` cancels it — its
//! bash is killed, the parent's call gets it as cancelled and the parent's turn goes on.

mod term_common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::json;
use term_common::{stop_daemons, write_mock_config, Tmux};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workbench_shows_a_running_child_opens_its_transcript_and_cancels_it() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_t",
                "task",
                &json!({"prompt": "wait for the gate then touch finished", "description": "gatekeeper"})
                    .to_string(),
            )],
            4,
        ),
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_slow",
                "bash",
                &json!({"command": "while [ ! -e go ]; do sleep 0.05; done; touch finished"})
                    .to_string(),
            )],
            4,
        )
        .with_usage(json!({"prompt_tokens": 1200, "completion_tokens": 34,
            "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 1200})),
        MockReply::text(&["parent-after-cancel"]),
    ])
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    let rx_home = dir.path().join("rxhome");
    write_mock_config(
        &rx_home,
        &mock.base_url(),
        "RX_TUI_KEY",
        "[permissions]\nmode = \"yolo\"\n",
    );
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
        t.send_keys(&["delegate the gatekeeper", "Enter"]);
        // The panel: the child, its task, its second step, its tokens and the tool it runs.
        let s = t.wait_screen(Duration::from_secs(60), "the child's panel row", |s| {
            s.lines().any(|l| {
                l.contains("sa-1")
                    && l.contains("wait for the gate")
                    && l.contains("step 2")
                    && l.contains("1.2k tok")
                    && l.contains("bash")
            })
        });
        assert!(s.contains("Ctrl-G view"), "{s}");
        // Ctrl-G: its transcript.
        t.send_keys(&["C-g"]);
        let s = t.wait_for("Subagent sa-1");
        assert!(s.contains("▶ task: wait for the gate"), "{s}");
        assert!(s.contains("→ bash"), "{s}");
        assert!(s.contains("x cancel it"), "{s}");
        // x: cancel it. Its end shows in the overlay; the panel row goes.
        t.send_keys(&["x"]);
        let s = t.wait_for("■ cancelled");
        assert!(!s.contains("x cancel it"), "{s}");
        t.send_keys(&["Escape"]);
        let s = t.wait_for("parent-after-cancel");
        assert!(
            !s.lines()
                .any(|l| l.contains("sa-1") && l.contains("step 2")),
            "the panel row is gone: {s}"
        );
    });
    // The child's bash was killed: opening the gate now finishes nothing.
    std::fs::write(ws.join("go"), "").expect("gate");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !ws.join("finished").exists(),
        "the cancelled child's bash ran on"
    );
    // Three provider requests: the parent, the child's one step, the parent again with the
    // child's result as cancelled.
    let deadline = Instant::now() + Duration::from_secs(10);
    while mock.request_count() < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3);
    let last = reqs[2].messages();
    let tool = last
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_t")
        .expect("the task's result");
    let out = tool["content"].as_str().unwrap_or_default();
    assert!(out.contains("(general) cancelled"), "{out}");
    t.send_keys(&["C-c"]);
    t.send_keys(&["C-c"]);
    stop_daemons(&rx_home);
}
