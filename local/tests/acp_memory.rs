//! Memory writes over ACP (#32), driven by the client side of the `agent-client-protocol`
//! crate against the real `reasonix acp` and host: the model's global `remember` becomes an
//! ACP permission request even in `yolo` mode; a rejected one writes nothing, an allowed one
//! is written by the laptop into the user's global store.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, NewSessionRequest, PermissionOptionKind, PromptRequest,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, StopReason, TextContent,
};
use agent_client_protocol::{Agent, ByteStreams, Client};
use common::LocalRig;
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::json;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

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
    let cfg = rig.home.join("config.toml");
    let mut text = std::fs::read_to_string(&cfg).expect("config");
    text.push_str("[permissions]\nmode = \"yolo\"\n");
    std::fs::write(&cfg, text).expect("config");
    let mut child = common::spawn_acp(&rig);
    let stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
    let asked: Arc<Mutex<Vec<RequestPermissionRequest>>> = Arc::default();
    let a = Arc::clone(&asked);
    let ws = rig.ws.clone();
    let stop = tokio::time::timeout(
        Duration::from_secs(120),
        Client
            .v1()
            .on_receive_request(
                async move |req: RequestPermissionRequest, responder, _cx| {
                    // The first memory write is rejected, the second allowed once.
                    let want = if a.lock().expect("asked").is_empty() {
                        PermissionOptionKind::RejectOnce
                    } else {
                        PermissionOptionKind::AllowOnce
                    };
                    let pick = req
                        .options
                        .iter()
                        .find(|o| o.kind == want)
                        .map(|o| o.option_id.clone())
                        .expect("the option");
                    a.lock().expect("asked").push(req);
                    responder.respond(RequestPermissionResponse::new(
                        RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(pick)),
                    ))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(
                transport,
                async move |cx: agent_client_protocol::v1::ConnectionTo<Agent>| {
                    cx.send_request(InitializeRequest::new(
                        agent_client_protocol::schema::ProtocolVersion::V1,
                    ))
                    .block_task()
                    .await?;
                    let session = cx
                        .send_request(NewSessionRequest::new(ws))
                        .block_task()
                        .await?;
                    let r = cx
                        .send_request(PromptRequest::new(
                            session.session_id,
                            vec![ContentBlock::Text(TextContent::new("remember my style"))],
                        ))
                        .block_task()
                        .await?;
                    Ok(r.stop_reason)
                },
            ),
    )
    .await
    .expect("the prompt ends within 120 s")
    .expect("ACP exchange");
    assert_eq!(stop, StopReason::EndTurn);
    let asked = asked.lock().expect("asked");
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
