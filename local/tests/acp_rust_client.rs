//! `reasonix acp` driven by the client side of the `agent-client-protocol` crate, and by raw
//! bytes for what no well-behaved client sends (malformed lines must not kill the agent).

mod acp_common;
mod common;

use std::time::Duration;

use agent_client_protocol::v1::schema::{
    SessionUpdate, StopReason, ToolCallContent, ToolCallStatus,
};
use common::LocalRig;
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crate_client_writes_a_file_after_allowing_it() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "w1",
                "write_file",
                &json!({"path": "new.txt", "content": "hello from acp\n"}).to_string(),
            )],
            4,
        ),
        MockReply::text(&["written"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_ACP_RS_KEY", "sk-acp-rs");
    let done = acp_common::session(&rig, acp_common::allow_once, async |cx, o| {
        assert!(o.init.agent_capabilities.load_session);
        acp_common::prompt(&cx, &o.session.session_id, "create new.txt").await
    })
    .await;
    let stop = done.out;
    assert_eq!(stop, StopReason::EndTurn);
    assert_eq!(
        std::fs::read_to_string(rig.ws.join("new.txt")).expect("new.txt"),
        "hello from acp\n"
    );
    let asked = &done.asked;
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].tool_call.tool_call_id.0.as_ref(), "w1");
    let updates = &done.updates;
    let call = updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::ToolCall(c) if c.tool_call_id.0.as_ref() == "w1" => Some(c),
            _ => None,
        })
        .expect("the tool call was announced");
    match &call.content[..] {
        [ToolCallContent::Diff(d)] => {
            assert_eq!(d.new_text, "hello from acp\n");
            assert_eq!(d.old_text, None);
            assert!(d.path.is_absolute() && d.path.ends_with("new.txt"));
        }
        other => panic!("a diff, not {other:?}"),
    }
    assert!(updates.iter().any(|u| matches!(u,
        SessionUpdate::ToolCallUpdate(t) if t.tool_call_id.0.as_ref() == "w1"
            && t.fields.status == Some(ToolCallStatus::Completed))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_input_gets_json_rpc_errors_and_the_agent_lives_on() {
    let mock = MockProvider::start(Vec::new()).await;
    let rig = LocalRig::new(&mock.base_url(), "RX_ACP_RS_KEY", "sk-acp-rs");
    let mut child = common::spawn_acp(&rig);
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let input = [
        "this is not json".to_string(),
        "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}]".into(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"nope": 1}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 3, "method": "no/such_method", "params": {}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 4, "method": "session/new", "params": {"cwd": "relative/dir", "mcpServers": []}}).to_string(),
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "none"}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {"protocolVersion": 1}}).to_string(),
    ];
    for l in &input {
        stdin.write_all(l.as_bytes()).await.expect("write");
        stdin.write_all(b"\n").await.expect("write");
    }
    let mut answers = Vec::new();
    while answers.len() < 6 {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("an answer within 30 s")
            .expect("read")
            .expect("the agent is still there");
        answers.push(serde_json::from_str::<Value>(&line).expect("each answer is JSON"));
    }
    let code = |i: usize| answers[i]["error"]["code"].as_i64();
    assert_eq!(code(0), Some(-32700), "{answers:#?}");
    assert_eq!(code(1), Some(-32600));
    assert_eq!(
        (answers[2]["id"].clone(), code(2)),
        (json!(2), Some(-32602))
    );
    assert_eq!(
        (answers[3]["id"].clone(), code(3)),
        (json!(3), Some(-32601))
    );
    assert_eq!(
        (answers[4]["id"].clone(), code(4)),
        (json!(4), Some(-32602))
    );
    // The notification got no answer; the last initialize worked.
    assert_eq!(answers[5]["id"], 5);
    assert_eq!(answers[5]["result"]["protocolVersion"], 1);
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the agent exits when its input ends")
        .expect("wait");
    assert!(status.success());
}
