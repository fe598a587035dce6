//! Memory writes over ACP (#32), driven by the client side of the `agent-client-protocol`
//! crate against the real `reasonix acp` and host: the model's global `remember` becomes an
//! ACP permission request even in `yolo` mode; a rejected one writes nothing, an allowed one
//! is written by the laptop into the user's global store.

mod acp_common;
mod common;

use agent_client_protocol::v1::schema::{PermissionOptionKind, StopReason};
use common::LocalRig;
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::json;

fn remember(id: &str, content: &str) -> MockReply {
    MockReply::tool_calls(
        vec![MockToolCall::new(
            id,
            "remember",
            &json!({"content": content, "type": "user", "scope": "global"}).to_string(),
        )],
        9,
    )
}

fn global_files_with(home: &std::path::Path, needle: &str) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(home.join("memory"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains(needle)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acp_memory_write_asks_even_in_yolo_reject_then_allow() {
    let mock = MockProvider::start(vec![
        remember(
            "r1",
            "The user writes commit messages in heron-mood-41 style.",
        ),
        remember("r2", "The user prefers the lark-tabs-58 indentation."),
        MockReply::text(&["remembered-one"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_ACP_MEM_KEY", "sk-acp-mem");
    acp_common::add_config(&rig, "[permissions]\nmode = \"yolo\"\n");
    // The first memory write is rejected, the second allowed once.
    let reject_then_allow = |n: usize| {
        if n == 0 {
            PermissionOptionKind::RejectOnce
        } else {
            PermissionOptionKind::AllowOnce
        }
    };
    let done = acp_common::session(&rig, reject_then_allow, async |cx, o| {
        acp_common::prompt(&cx, &o.session.session_id, "remember my style").await
    })
    .await;
    let stop = done.out;
    assert_eq!(stop, StopReason::EndTurn);
    let asked = &done.asked;
    assert_eq!(
        asked.len(),
        2,
        "both memory writes asked, yolo answered neither"
    );
    assert!(
        format!("{:?}", asked[0]).contains("heron-mood-41"),
        "{:?}",
        asked[0]
    );
    assert!(
        format!("{:?}", asked[1]).contains("lark-tabs-58"),
        "{:?}",
        asked[1]
    );
    assert!(global_files_with(&rig.home, "heron-mood-41").is_empty());
    assert_eq!(global_files_with(&rig.home, "lark-tabs-58").len(), 1);
    // Nothing of either went to the host's project store.
    let project = rig.home.join("project-memory");
    let any_project = std::fs::read_dir(&project)
        .into_iter()
        .flatten()
        .flatten()
        .any(|d| std::fs::read_dir(d.path()).into_iter().flatten().count() > 0);
    assert!(
        !any_project,
        "a global fact was written to the project store"
    );
}
