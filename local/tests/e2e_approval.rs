//! Approval round trip through the real link: the host asks, the client answers, the tool
//! runs (or is denied) exactly once. Uses the library client against the real host binary.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::LocalRig;
use reasonix_forward::proto::{
    ApprovalDecision, EventKind, OpenSession, Request, Response, SessionSettings, TurnOutcome,
};
use reasonix_local::client::{Client, ClientEvent};
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::json;

struct Fixture {
    _rig: LocalRig,
    ws: PathBuf,
    home: PathBuf,
    client: Client,
    events: tokio::sync::mpsc::UnboundedReceiver<ClientEvent>,
}

async fn fixture(mock: &MockProvider) -> Fixture {
    let rig = LocalRig::new(&mock.base_url(), "RX_APPROVAL_KEY", "sk-approval-test");
    let config = rig.config();
    let (client, events) = rig.client(&config);
    let opened = client
        .request(Request::OpenSession(OpenSession {
            new: true,
            settings: SessionSettings {
                model: Some("mock/m".into()),
                policy: reasonix_forward::policy::SessionPolicy {
                    mode: reasonix_forward::policy::PermissionMode::Ask,
                    ..Default::default()
                },
                headless: false,
                ..SessionSettings::default()
            },
            ..OpenSession::default()
        }))
        .await
        .expect("open");
    assert!(matches!(opened, Response::SessionOpened(_)));
    Fixture {
        ws: rig.ws.clone(),
        home: rig.home.clone(),
        _rig: rig,
        client,
        events,
    }
}

async fn next_approval(f: &mut Fixture) -> (String, String) {
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(30), f.events.recv())
            .await
            .expect("an approval request within 30 s")
            .expect("client alive");
        if let ClientEvent::Event(e) = ev {
            if let EventKind::ApprovalRequested {
                approval_id, tool, ..
            } = e.kind
            {
                return (approval_id, tool);
            }
        }
    }
}

async fn turn_outcome(f: &mut Fixture) -> Vec<EventKind> {
    let mut seen = Vec::new();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(30), f.events.recv())
            .await
            .expect("turn end within 30 s")
            .expect("client alive");
        if let ClientEvent::Event(e) = ev {
            let done = matches!(e.kind, EventKind::TurnFinished { .. });
            seen.push(e.kind);
            if done {
                return seen;
            }
        }
    }
}

fn write_call(id: &str, path: &str) -> MockReply {
    MockReply::tool_calls(
        vec![MockToolCall::new(
            id,
            "write_file",
            &json!({"path": path, "content": "approved content\n"}).to_string(),
        )],
        7,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_round_trip_allows_then_denies() {
    let mock = MockProvider::start(vec![
        write_call("c1", "a.txt"),
        MockReply::text(&["wrote it"]),
        write_call("c2", "b.txt"),
        MockReply::text(&["fine, not writing"]),
        write_call("c3", "c.txt"),
        MockReply::text(&["saved"]),
    ])
    .await;
    let mut f = fixture(&mock).await;

    // Allow once: the write happens exactly once.
    let r = f
        .client
        .request(Request::SubmitTurn {
            request_id: "t1".into(),
            text: "write a".into(),
        })
        .await
        .expect("submit");
    assert_eq!(r, Response::Ok);
    let (approval_id, tool) = next_approval(&mut f).await;
    assert_eq!(tool, "write_file");
    assert!(
        !f.ws.join("a.txt").exists(),
        "nothing runs before the answer"
    );
    let answer = Request::Approve {
        request_id: "a1".into(),
        approval_id: approval_id.clone(),
        decision: ApprovalDecision::AllowOnce,
    };
    assert_eq!(
        f.client.request(answer.clone()).await.expect("approve"),
        Response::Ok
    );
    // A repeated answer (e.g. re-sent after a reconnect) is recognised and changes nothing.
    assert_eq!(
        f.client.request(answer).await.expect("approve again"),
        Response::Duplicate
    );
    let events = turn_outcome(&mut f).await;
    let started = events
        .iter()
        .filter(|k| matches!(k, EventKind::ToolStarted { .. }))
        .count();
    assert_eq!(started, 1);
    assert_eq!(
        std::fs::read_to_string(f.ws.join("a.txt")).expect("a.txt"),
        "approved content\n"
    );

    // Deny: the tool does not run and the model is told.
    f.client
        .request(Request::SubmitTurn {
            request_id: "t2".into(),
            text: "write b".into(),
        })
        .await
        .expect("submit 2");
    let (approval_id, _) = next_approval(&mut f).await;
    f.client
        .request(Request::Approve {
            request_id: "a2".into(),
            approval_id,
            decision: ApprovalDecision::Deny,
        })
        .await
        .expect("deny");
    let events = turn_outcome(&mut f).await;
    assert!(events.iter().any(|k| matches!(k,
        EventKind::ToolFinished { is_error: true, output, .. } if output.contains("denied"))));
    assert!(!f.ws.join("b.txt").exists());
    let last = mock.requests().last().expect("requests").messages();
    assert!(last
        .iter()
        .any(|m| m["role"] == "tool" && m["content"].as_str().unwrap_or("").contains("denied")));

    // A duplicate submit is not a second turn.
    assert_eq!(
        f.client
            .request(Request::SubmitTurn {
                request_id: "t2".into(),
                text: "write b".into(),
            })
            .await
            .expect("dup submit"),
        Response::Duplicate
    );
    assert_eq!(mock.request_count(), 4);

    // "Always": the tool runs and the rule is saved to the laptop's user config.
    f.client
        .request(Request::SubmitTurn {
            request_id: "t3".into(),
            text: "write c".into(),
        })
        .await
        .expect("submit 3");
    let (approval_id, _) = next_approval(&mut f).await;
    f.client
        .request(Request::Approve {
            request_id: "a3".into(),
            approval_id,
            decision: ApprovalDecision::AllowAlways,
        })
        .await
        .expect("always");
    turn_outcome(&mut f).await;
    assert!(f.ws.join("c.txt").exists());
    let cfg = std::fs::read_to_string(f.home.join("config.toml")).expect("config");
    let parsed: toml::Table = cfg.parse().expect("config still parses");
    let allow = parsed["permissions"]["allow"]
        .as_array()
        .expect("allow list");
    assert!(allow.iter().any(|v| v.as_str() == Some("Edit")), "{cfg}");
    assert!(
        cfg.contains("[[providers]]"),
        "the rest of the file is kept:\n{cfg}"
    );
    if let Ok(Response::Status(s)) = f.client.request(Request::Status).await {
        unsafe {
            libc::kill(s.pid as i32, libc::SIGTERM);
        }
    }
}

/// Several OpenAI-compatible servers reuse tool-call ids across turns. Each approval must
/// still get an id of its own (a client that remembers answered ids would otherwise never
/// show the later question), in one session and across sessions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_ids_are_unique_when_the_provider_reuses_tool_call_ids() {
    let mut script = Vec::new();
    for i in 0..4 {
        script.push(write_call("call_0", &format!("f{i}.txt")));
        script.push(MockReply::text(&["ok"]));
    }
    let mock = MockProvider::start(script).await;
    let mut f = fixture(&mock).await;
    let mut ids = std::collections::HashSet::new();
    for i in 0..4 {
        if i == 2 {
            // A second session on the same daemon: ids stay unique there too.
            let opened = f
                .client
                .request(Request::OpenSession(OpenSession {
                    new: true,
                    settings: SessionSettings {
                        model: Some("mock/m".into()),
                        policy: reasonix_forward::policy::SessionPolicy {
                            mode: reasonix_forward::policy::PermissionMode::Ask,
                            ..Default::default()
                        },
                        headless: false,
                        ..SessionSettings::default()
                    },
                    ..OpenSession::default()
                }))
                .await
                .expect("open second session");
            assert!(matches!(opened, Response::SessionOpened(_)));
        }
        let r = f
            .client
            .request(Request::SubmitTurn {
                request_id: format!("same-id-{i}"),
                text: format!("write f{i}"),
            })
            .await
            .expect("submit");
        assert_eq!(r, Response::Ok);
        let (approval_id, _) = next_approval(&mut f).await;
        assert!(
            ids.insert(approval_id.clone()),
            "turn {i}: approval id {approval_id} was already used"
        );
        f.client
            .request(Request::Approve {
                request_id: format!("ans-{i}"),
                approval_id,
                decision: ApprovalDecision::AllowOnce,
            })
            .await
            .expect("approve");
        let seen = turn_outcome(&mut f).await;
        assert!(
            seen.iter().any(|k| matches!(
                k,
                EventKind::TurnFinished { outcome, .. } if matches!(outcome, TurnOutcome::Completed)
            )),
            "turn {i}: {seen:?}"
        );
        assert!(f.ws.join(format!("f{i}.txt")).is_file(), "turn {i} wrote");
    }
}
