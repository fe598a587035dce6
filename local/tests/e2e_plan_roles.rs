//! Plan mode and client roles (real `reasonix-remote`, two real clients, the mock provider):
//! a spectator can neither approve, cancel nor leave a plan; the plan survives a takeover, and
//! the new driver executes it.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;

use std::time::Duration;

use common::LocalRig;
use reasonix_forward::proto::{
    ClientRole, EventKind, OpenSession, PlanAction, PlanDecision, PlanEvent, Request, Response,
    SessionSettings,
};
use reasonix_local::client::ClientEvent;
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::json;

fn open(session: Option<String>, takeover: bool) -> Request {
    Request::OpenSession(OpenSession {
        session,
        new: false,
        takeover,
        settings: SessionSettings {
            policy: reasonix_forward::policy::SessionPolicy {
                mode: reasonix_forward::policy::PermissionMode::Yolo,
                ..Default::default()
            },
            ..SessionSettings::default()
        },
        ..OpenSession::default()
    })
}

const PLAN: &str = "## Steps\n1. Write done.txt\n\n## Verification\n1. cat done.txt\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spectator_cannot_answer_a_plan_and_it_survives_a_takeover() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "p1",
                "exit_plan_mode",
                &json!({ "plan": PLAN }).to_string(),
            )],
            9,
        ),
        MockReply::text(&["planned"]),
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "x1",
                "write_file",
                &json!({"path": "done.txt", "content": "ok"}).to_string(),
            )],
            9,
        ),
        MockReply::text(&["done"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_PLAN_ROLE_KEY", "sk-plan-roles");
    let config = rig.config();
    let (first, _first_events) = rig.client(&config);
    let Response::SessionOpened(o1) = first.request(open(None, false)).await.expect("open 1")
    else {
        panic!("not opened");
    };
    let (second, mut second_events) = rig.client(&config);
    let Response::SessionOpened(o2) = second
        .request(open(Some(o1.session.clone()), false))
        .await
        .expect("open 2")
    else {
        panic!("not opened");
    };
    assert_eq!(o2.role, ClientRole::Spectator);
    // The spectator cannot start planning either.
    assert!(second
        .request(Request::Plan {
            request_id: "s0".into(),
            action: PlanAction::Enter { task: None },
        })
        .await
        .is_err());
    first
        .plan_request(
            "f1",
            PlanAction::Enter {
                task: Some("add done.txt".into()),
            },
        )
        .await
        .expect("driver enters plan mode");
    // The spectator sees the proposed plan.
    let plan_id = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(ev) = second_events.recv().await {
            if let ClientEvent::Event(e) = ev {
                if let EventKind::Plan(PlanEvent::Proposed { plan_id, .. }) = e.kind {
                    return Some(plan_id);
                }
            }
        }
        None
    })
    .await
    .expect("a plan within 60 s")
    .expect("client alive");
    for (rid, action) in [
        (
            "s1",
            PlanAction::Decide {
                plan_id: Some(plan_id.clone()),
                decision: PlanDecision::Execute,
                comment: None,
            },
        ),
        (
            "s2",
            PlanAction::Decide {
                plan_id: None,
                decision: PlanDecision::Cancel,
                comment: None,
            },
        ),
        ("s3", PlanAction::Leave),
    ] {
        let err = second
            .request(Request::Plan {
                request_id: rid.into(),
                action,
            })
            .await
            .expect_err("a spectator cannot answer a plan");
        assert!(err.to_string().contains("read-only"), "{err}");
    }
    assert!(!rig.ws.join("done.txt").exists());
    // Take over: the plan still waits, and the new driver executes it.
    let Response::SessionOpened(o3) = second
        .request(open(Some(o1.session.clone()), true))
        .await
        .expect("takeover")
    else {
        panic!("not opened");
    };
    assert_eq!(o3.role, ClientRole::Driver);
    let r = second
        .plan_request(
            "s4",
            PlanAction::Decide {
                plan_id: Some(plan_id),
                decision: PlanDecision::Execute,
                comment: None,
            },
        )
        .await
        .expect("the driver executes the plan");
    assert_eq!(r, Response::Ok);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !rig.ws.join("done.txt").exists() {
        assert!(std::time::Instant::now() < deadline, "the plan never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The old driver is a spectator now: it cannot answer anything either.
    assert!(first
        .request(Request::Plan {
            request_id: "f2".into(),
            action: PlanAction::Leave,
        })
        .await
        .is_err());
    if let Ok(Response::Status(s)) = second.request(Request::Status).await {
        // SAFETY: kill(2) of the daemon this test started.
        unsafe {
            libc::kill(s.pid as i32, libc::SIGTERM);
        }
    }
}
