//! A plan waiting for approval survives a link drop (issue 38 §1): sshd, the library client
//! and the mock provider in a private network namespace; while the proposed plan waits, the
//! SSH connection is reset (every segment answered with a TCP RST, new connections refused)
//! for 1.5 s; the client resumes the link, the same plan still waits (the driver executes it
//! by its id), and its write runs once. Daemon restarts, takeovers and rewinds of a plan are
//! in `e2e_plan` and `e2e_plan_roles`.

mod reconnect_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use reasonix_forward::proto::{
    EventKind, OpenSession, PlanAction, PlanDecision, PlanEvent, Request, Response, SessionSettings,
};
use reasonix_local::client::{ClientEvent, ConnState};
use reasonix_testkit::mock_provider::{MockReply, MockToolCall};
use reasonix_testkit::netfault::Fault;
use reconnect_common::*;
use serde_json::{json, Value};

const GUARD: Duration = Duration::from_secs(60);
const PLAN: &str = "## Steps\n1. Write done.txt\n\n## Verification\n1. cat done.txt\n";

async fn next_matching(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<ClientEvent>,
    seen: &mut Vec<ClientEvent>,
    what: &str,
    pred: impl Fn(&ClientEvent) -> bool,
) -> ClientEvent {
    let deadline = Instant::now() + GUARD;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ev = tokio::time::timeout(left, events.recv())
            .await
            .unwrap_or_else(|_| panic!("no {what} within {GUARD:?}; saw {seen:#?}"))
            .expect("client alive");
        seen.push(ev.clone());
        if pred(&ev) {
            return ev;
        }
    }
}

#[test]
fn a_waiting_plan_survives_a_link_reset_and_executes_once() {
    in_netns(|ns| async move {
        let rig = Rig::new(
            Arc::clone(&ns),
            vec![
                MockReply::tool_calls(
                    vec![MockToolCall::new(
                        "p1",
                        "exit_plan_mode",
                        &json!({ "plan": PLAN }).to_string(),
                    )],
                    7,
                ),
                MockReply::text(&["planned"]),
                MockReply::tool_calls(
                    vec![MockToolCall::new(
                        "x1",
                        "write_file",
                        &json!({"path": "done.txt", "content": "written once\n"}).to_string(),
                    )],
                    7,
                ),
                MockReply::text(&["done"]),
            ],
        )
        .await;
        let port = rig.sshd.port();
        let (client, mut events) = rig.library_client(port, (HEARTBEAT_MS, DEAD_AFTER_MS));
        let mut seen: Vec<ClientEvent> = Vec::new();
        let opened = tokio::time::timeout(
            Duration::from_secs(90),
            client.request(Request::OpenSession(OpenSession {
                new: true,
                settings: SessionSettings {
                    model: Some("mock/m".into()),
                    policy: reasonix_forward::policy::SessionPolicy {
                        mode: reasonix_forward::policy::PermissionMode::Yolo,
                        ..Default::default()
                    },
                    headless: false,
                    ..SessionSettings::default()
                },
                ..OpenSession::default()
            })),
        )
        .await
        .expect("open in time")
        .expect("open");
        assert!(matches!(opened, Response::SessionOpened(_)), "{opened:?}");
        client
            .plan_request(
                "p-enter",
                PlanAction::Enter {
                    task: Some("add done.txt".into()),
                },
            )
            .await
            .expect("plan mode on with the task");
        let proposed = next_matching(&mut events, &mut seen, "a proposed plan", |e| {
            matches!(e, ClientEvent::Event(ev) if matches!(ev.kind, EventKind::Plan(PlanEvent::Proposed { .. })))
        })
        .await;
        let ClientEvent::Event(proposed) = proposed else {
            unreachable!()
        };
        let EventKind::Plan(PlanEvent::Proposed { plan_id, .. }) = proposed.kind else {
            unreachable!()
        };
        next_matching(&mut events, &mut seen, "the planning turn's end", |e| {
            matches!(e, ClientEvent::Event(ev) if matches!(ev.kind, EventKind::TurnFinished { .. }))
        })
        .await;

        // Reset the link while the plan waits.
        let fault = ns.fault(Fault::Reset, port).expect("reset");
        next_matching(&mut events, &mut seen, "reconnecting", |e| {
            matches!(e, ClientEvent::Connection(ConnState::Reconnecting { .. }))
        })
        .await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        fault.lift().expect("lift");
        next_matching(&mut events, &mut seen, "connected (resumed)", |e| {
            matches!(
                e,
                ClientEvent::Connection(ConnState::Connected { resumed: true })
            )
        })
        .await;
        assert!(
            !rig.host_file("done.txt").exists(),
            "nothing ran unapproved"
        );
        assert_eq!(rig.mock.request_count(), 2);

        // The same plan still waits: executing it by its id runs it, once.
        let r = client
            .plan_request(
                "p-exec",
                PlanAction::Decide {
                    plan_id: Some(plan_id.clone()),
                    decision: PlanDecision::Execute,
                    comment: None,
                },
            )
            .await
            .expect("the plan still waits after the link drop");
        assert_eq!(r, Response::Ok);
        let deadline = Instant::now() + GUARD;
        while rig.mock.request_count() < 4 || !rig.host_file("done.txt").exists() {
            assert!(Instant::now() < deadline, "the plan never ran: {seen:#?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(
            std::fs::read_to_string(rig.host_file("done.txt")).expect("file"),
            "written once\n"
        );
        let journal: Vec<Value> = rig
            .host_journals()
            .iter()
            .flat_map(|j| journal_events(j))
            .collect();
        let count = |pred: &dyn Fn(&Value) -> bool| journal.iter().filter(|e| pred(e)).count();
        assert_eq!(
            count(&|e| e["type"] == "plan" && e["event"] == "proposed"),
            1,
            "one plan, proposed once: {journal:#?}"
        );
        assert_eq!(
            count(&|e| e["type"] == "tool_started" && e["call_id"] == "x1"),
            1,
            "the write ran once"
        );
        assert_eq!(rig.mock.request_count(), 4);
    });
}
