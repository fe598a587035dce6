//! Subagents over ACP (#33 §2), driven by the client side of the `agent-client-protocol`
//! crate against the real `reasonix acp` and host: a `task` child is a tool call of its own
//! (`<parent call>/<child>`), in progress from its first event, whose `tool_call_update`
//! content names its steps (its read and the result, its answer) and whose end completes it;
//! the parent's `task` call completes with the child's answer. `_reasonix/cancel_subagent`
//! names a child by that tool call and cancels it alone: its bash is killed, the parent's
//! call gets it as cancelled and the prompt ends normally.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod acp_common;
mod common;

use std::time::Duration;

use agent_client_protocol::v1::schema::{
    ContentBlock, PromptRequest, SessionUpdate, StopReason, TextContent, ToolCallStatus,
};
use common::LocalRig;
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acp_shows_a_child_as_a_tool_call_with_its_steps() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_t",
                "task",
                &json!({"prompt": "What does notes.txt say?", "description": "read the notes"})
                    .to_string(),
            )],
            5,
        ),
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_c",
                "read_file",
                &json!({"path": "notes.txt"}).to_string(),
            )],
            3,
        ),
        MockReply::text(&["notes.txt says ", "ALPHA-42"]),
        MockReply::text(&["The child found ALPHA-42."]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_ACP_SUB_KEY", "sk-acp-sub");
    std::fs::write(rig.ws.join("notes.txt"), "ALPHA-42\n").expect("notes");
    let done = acp_common::session(&rig, acp_common::allow_once, async |cx, o| {
        acp_common::prompt(&cx, &o.session.session_id, "ask a subagent").await
    })
    .await;
    let stop = done.out;
    assert!(done.asked.is_empty(), "{:?}", done.asked);
    assert_eq!(stop, StopReason::EndTurn);
    assert_eq!(mock.request_count(), 4);
    let updates = &done.updates;
    let id_of = |u: &SessionUpdate| -> Option<String> {
        match u {
            SessionUpdate::ToolCall(t) => Some(t.tool_call_id.0.to_string()),
            SessionUpdate::ToolCallUpdate(t) => Some(t.tool_call_id.0.to_string()),
            _ => None,
        }
    };
    let pos = |pred: &dyn Fn(&SessionUpdate) -> bool| updates.iter().position(pred);
    // The child's own tool call, opened once, after the parent's `task` call.
    let opened: Vec<_> = updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCall(t) if t.tool_call_id.0.as_ref() == "call_t/sa-1" => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(opened.len(), 1, "{updates:#?}");
    assert_eq!(opened[0].title, "Subagent sa-1: What does notes.txt say?");
    assert_eq!(opened[0].status, ToolCallStatus::InProgress);
    let parent_open =
        pos(&|u| matches!(u, SessionUpdate::ToolCall(t) if t.tool_call_id.0.as_ref() == "call_t"))
            .expect("the task call");
    let child_open = pos(
        &|u| matches!(u, SessionUpdate::ToolCall(t) if t.tool_call_id.0.as_ref() == "call_t/sa-1"),
    )
    .unwrap();
    assert!(parent_open < child_open);
    // Its updates name its steps, in order, and the last completes it.
    let child_updates: Vec<String> = updates
        .iter()
        .filter(|u| {
            matches!(u, SessionUpdate::ToolCallUpdate(_))
                && id_of(u).as_deref() == Some("call_t/sa-1")
        })
        .map(|u| serde_json::to_string(u).expect("json"))
        .collect();
    assert!(child_updates.len() >= 3, "{child_updates:#?}");
    let last = child_updates.last().unwrap();
    for step in [
        "→ read_file notes.txt",
        "← read_file ok: 1→ALPHA-42",
        "answer: notes.txt says ALPHA-42",
        "■ completed",
    ] {
        assert!(last.contains(step), "{step} missing: {last}");
    }
    assert!(last.contains("\"status\":\"completed\""), "{last}");
    // The child's calls are not shown as calls of the parent.
    assert!(
        !updates
            .iter()
            .any(|u| id_of(u).as_deref() == Some("call_c")),
        "the child's read leaked into the parent's calls"
    );
    // The parent's `task` call completes with the child's answer, after the child did.
    let parent_done = updates
        .iter()
        .rposition(|u| {
            matches!(u, SessionUpdate::ToolCallUpdate(t) if t.tool_call_id.0.as_ref() == "call_t"
                && t.fields.status == Some(ToolCallStatus::Completed))
        })
        .expect("the task call completed");
    let child_done = updates
        .iter()
        .rposition(|u| id_of(u).as_deref() == Some("call_t/sa-1"))
        .unwrap();
    assert!(child_done < parent_done);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acp_cancels_one_child_by_its_tool_call() {
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
        ),
        MockReply::text(&["parent-after-cancel"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_ACP_SUB_KEY", "sk-acp-sub");
    acp_common::add_config(&rig, "[permissions]\nmode = \"yolo\"\n");
    let done = acp_common::session(&rig, acp_common::allow_once, async |cx, o| {
        let seen = o.updates;
        let sid = o.session.session_id.0.to_string();
        let prompt = cx.send_request(PromptRequest::new(
            o.session.session_id,
            vec![ContentBlock::Text(TextContent::new(
                "delegate the gatekeeper",
            ))],
        ));
        // Wait until the child's tool call shows it running its bash.
        loop {
            let running = seen.lock().expect("updates").iter().any(|u| {
                matches!(u, SessionUpdate::ToolCallUpdate(t)
                    if t.tool_call_id.0.as_ref() == "call_t/sa-1")
                    && serde_json::to_string(u).is_ok_and(|s| s.contains("→ bash"))
            });
            if running {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The parent's own call is not a child's: refused, naming the form.
        let refused = cx
            .send_request(agent_client_protocol::UntypedMessage::new(
                "_reasonix/cancel_subagent",
                json!({"sessionId": sid, "toolCallId": "call_t"}),
            )?)
            .block_task()
            .await
            .expect_err("not a child's call");
        cx.send_request(agent_client_protocol::UntypedMessage::new(
            "_reasonix/cancel_subagent",
            json!({"sessionId": sid, "toolCallId": "call_t/sa-1"}),
        )?)
        .block_task()
        .await?;
        let r = prompt.block_task().await?;
        Ok((r.stop_reason, format!("{refused:?}")))
    })
    .await;
    let (stop, refused) = done.out;
    assert!(done.asked.is_empty(), "{:?}", done.asked);
    assert_eq!(stop, StopReason::EndTurn, "the parent's turn went on");
    assert!(refused.contains("sa-N"), "{refused}");
    // The child's bash was killed: opening the gate now finishes nothing.
    std::fs::write(rig.ws.join("go"), "").expect("gate");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !rig.ws.join("finished").exists(),
        "the cancelled child's bash ran on"
    );
    // Its tool call ended cancelled; the parent's call got it as cancelled.
    let updates = &done.updates;
    let last_child = updates
        .iter()
        .rev()
        .filter(|u| {
            matches!(u, SessionUpdate::ToolCallUpdate(t) if t.tool_call_id.0.as_ref() == "call_t/sa-1")
        })
        .map(|u| serde_json::to_string(u).expect("json"))
        .next()
        .expect("the child's updates");
    assert!(last_child.contains("■ cancelled"), "{last_child}");
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3, "parent, the child's one step, parent again");
    let out = reqs[2]
        .messages()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_t")
        .and_then(|m| m["content"].as_str().map(String::from))
        .expect("the task's result");
    assert!(out.contains("cancelled"), "{out}");
}
