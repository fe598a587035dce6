//! The goal keeper beside a driver (issue 38 §3; real host daemon in local mode, the mock
//! provider): the keeper ([`reasonix_local::keeper::run`], in this process with its own key
//! so the mock can tell its requests from the driver's) attaches while a driver runs a goal;
//! the driver keeps its role and serves the model requests; the keeper can neither take
//! over, submit nor answer an approval (nor does a second keeper's link, whose leaving keeps
//! the first); once the driver leaves, the keeper serves the rest of
//! the goal's requests (exactly one per step) and exits when the goal completes.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::LocalRig;
use reasonix_forward::proto::{
    ApprovalDecision, ClientRole, GoalAction, OpenSession, Request, Response, SessionInfo,
    SessionSettings,
};
use reasonix_local::client::{Client, ClientEvent};
use reasonix_local::connect::LocalConnector;
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::json;

fn call(id: &str, name: &str, args: serde_json::Value) -> MockToolCall {
    MockToolCall::new(id, name, &args.to_string())
}

async fn row(client: &Client, session: &str) -> SessionInfo {
    match client.request(Request::ListSessions).await.expect("list") {
        Response::Sessions { sessions } => sessions
            .into_iter()
            .find(|s| s.id == session)
            .expect("the session is listed"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_keeps_its_role_beside_the_keeper_which_serves_the_goal_once_it_leaves() {
    let mock = MockProvider::start(vec![
        // The first step (through the driver, before the keeper is there): a command that
        // waits for the test's first go.
        MockReply::tool_calls(
            vec![call(
                "b1",
                "bash",
                json!({"command": "while [ ! -f go1 ]; do sleep 0.1; done; echo first"}),
            )],
            2,
        ),
        // The second step, asked while both driver and keeper are attached: the driver's.
        MockReply::tool_calls(
            vec![call(
                "b2",
                "bash",
                json!({"command": "while [ ! -f go2 ]; do sleep 0.1; done; echo run >> runs.txt; echo finished"}),
            )],
            2,
        ),
        MockReply::tool_calls(
            vec![call(
                "u1",
                "update_goal",
                json!({"status": "continue", "evidence": "runs.txt written"}),
            )],
            2,
        ),
        MockReply::text(&["Turn one done."]),
        MockReply::tool_calls(
            vec![call(
                "u2",
                "update_goal",
                json!({"status": "complete", "evidence": "runs.txt has one line"}),
            )],
            2,
        ),
        MockReply::text(&["All done."]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_KEEPER_DRIVER_KEY", "sk-driver");
    let config = rig.config();

    // The driver opens a session and starts the goal.
    let (driver, mut driver_events) = rig.client(&config);
    let opened = driver
        .open_session(OpenSession {
            settings: SessionSettings {
                policy: reasonix_forward::policy::SessionPolicy {
                    mode: reasonix_forward::policy::PermissionMode::Yolo,
                    ..Default::default()
                },
                ..SessionSettings::default()
            },
            new: true,
            ..OpenSession::default()
        })
        .await
        .expect("open");
    assert_eq!(opened.role, ClientRole::Driver);
    let session = opened.session.clone();
    driver
        .goal_request(
            "g1",
            GoalAction::Start {
                objective: "write runs.txt once".into(),
                budgets: Default::default(),
            },
        )
        .await
        .expect("goal");

    // The keeper, with a key of its own (the same laptop would have the same key; a second
    // one lets the mock say who asked).
    std::env::set_var("RX_KEEPER_OWN_KEY", "sk-keeper");
    let mut keeper_config = config.clone();
    for p in &mut keeper_config.providers {
        p.api_key_env = "RX_KEEPER_OWN_KEY".into();
    }
    let connector = Arc::new(LocalConnector::new(common::host_bin(), rig.ws.clone()));
    let keeper_session = session.clone();
    let keeper = tokio::spawn(async move {
        reasonix_local::keeper::run(&keeper_config, connector, &keeper_session).await
    });
    let t = Instant::now();
    loop {
        let r = row(&driver, &session).await;
        if r.keeper_attached {
            assert!(r.driver_attached, "{r:?}");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the keeper never attached"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        reasonix_local::keeper::running(&rig.home, &session).is_some(),
        "the keeper's pid file"
    );

    // Another keeper link (as from a second laptop) comes and goes: it can neither take
    // over, submit nor answer an approval, and the first keeper stays.
    let (probe, _probe_events) = rig.client(&config);
    let o = probe
        .open_session(OpenSession {
            session: Some(session.clone()),
            keeper: true,
            ..OpenSession::default()
        })
        .await
        .expect("keeper open");
    assert_eq!(o.role, ClientRole::Spectator, "a keeper never drives");
    let err = probe
        .request(Request::Takeover)
        .await
        .expect_err("takeover");
    assert!(err.to_string().contains("never drives"), "{err}");
    let err = probe
        .request(Request::Approve {
            request_id: "a1".into(),
            approval_id: "any".into(),
            decision: ApprovalDecision::AllowOnce,
        })
        .await
        .expect_err("approve");
    assert!(err.to_string().contains("read-only"), "{err}");
    let err = probe
        .request(Request::SubmitTurn {
            request_id: "s1".into(),
            text: "may I?".into(),
        })
        .await
        .expect_err("submit");
    assert!(err.to_string().contains("read-only"), "{err}");
    probe.leave().await;

    // The next step is asked with both attached: the driver serves it.
    std::fs::write(rig.ws.join("go1"), "").expect("go1");
    let t = Instant::now();
    while mock.request_count() < 2 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the second step never asked"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The driver still drives: it was never told otherwise.
    while let Ok(ev) = driver_events.try_recv() {
        assert!(!matches!(ev, ClientEvent::Role { .. }), "{ev:?}");
    }
    assert!(row(&driver, &session).await.driver_attached);

    // The driver leaves; the command ends; the keeper carries the goal to its end.
    driver.leave().await;
    std::fs::write(rig.ws.join("go2"), "").expect("go2");
    let why = tokio::time::timeout(Duration::from_secs(120), keeper)
        .await
        .expect("the keeper ends with the goal")
        .expect("keeper task")
        .expect("the keeper ended normally");
    assert!(why.contains("complete"), "{why}");
    assert!(reasonix_local::keeper::running(&rig.home, &session).is_none());

    // One request per step: the first two through the driver (the second with the keeper
    // attached too), the rest through the keeper.
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 6);
    let keys: Vec<&str> = reqs
        .iter()
        .map(|r| r.header("authorization").unwrap_or_default())
        .collect();
    assert_eq!(keys[0], "Bearer sk-driver", "{keys:?}");
    assert_eq!(keys[1], "Bearer sk-driver", "{keys:?}");
    for k in &keys[2..] {
        assert_eq!(*k, "Bearer sk-keeper", "{keys:?}");
    }
    assert_eq!(
        std::fs::read_to_string(rig.ws.join("runs.txt")).expect("runs"),
        "run\n"
    );
    let (lister, _e) = rig.client(&config);
    let r = row(&lister, &session).await;
    assert_eq!(
        r.goal.as_ref().map(|g| g.status.as_str()),
        Some("complete"),
        "{r:?}"
    );
    assert!(!r.keeper_attached, "{r:?}");
}
