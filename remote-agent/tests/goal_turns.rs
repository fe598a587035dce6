//! Goals in real sessions (in-process rig: real session, journal, tools, a scripted
//! gateway): the host starts turn after turn toward the objective until the model reports it
//! complete; the same blocker three times in a row ends it; a budget pauses it and a resume
//! continues; a daemon restart resumes it from the journal without running a tool again; with
//! no client attached a tool that needs approval waits for one.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod turn_support;

use std::sync::Arc;

use reasonix_forward::proto::{
    EventKind, GoalAction, GoalBudgets, GoalEvent, GoalStatus, TurnState, Usage,
};
use reasonix_remote::session::{DriverLink, Session};
use serde_json::json;
use turn_support::{yolo_unconfined, FakeGateway, Reply, Rig};

fn report(id: &str, status: &str, evidence: &str) -> Reply {
    Reply::call(
        id,
        "update_goal",
        json!({"status": status, "evidence": evidence}),
    )
}

/// A report whose model request used `tokens` prompt tokens.
fn report_used(id: &str, status: &str, evidence: &str, tokens: u64) -> Reply {
    Reply::new()
        .tool(
            id,
            "update_goal",
            json!({"status": status, "evidence": evidence}),
        )
        .usage(used(tokens))
        .done()
}

fn used(tokens: u64) -> Usage {
    Usage {
        prompt_tokens: tokens,
        ..Default::default()
    }
}

fn start(objective: &str) -> GoalAction {
    GoalAction::Start {
        objective: objective.into(),
        budgets: GoalBudgets::default(),
    }
}

async fn goal_ended(rig: &Rig, session: &Session) -> GoalStatus {
    rig.wait_until("the goal to stop running", || {
        session
            .goal_summary()
            .is_some_and(|g| g.status != GoalStatus::Running)
            && session.state() == TurnState::Idle
    })
    .await;
    session.goal_summary().unwrap().status
}

fn user_turns(rig: &Rig) -> Vec<String> {
    rig.events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::UserTurn { request_id, .. } => Some(request_id),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn turns_follow_each_other_until_the_model_reports_complete() {
    let rig = Rig::start(
        yolo_unconfined(),
        vec![
            Reply::call("b1", "bash", json!({"command": "echo run >> runs.txt"})),
            report("u1", "continue", "wrote runs.txt"),
            Reply::answer("turn one done"),
            report("u2", "complete", "runs.txt has one line"),
            Reply::answer("all done"),
        ],
    )
    .await;
    assert!(rig
        .session
        .goal_request("g1", start("write runs.txt"))
        .await
        .unwrap());
    // A repeat of the request is a no-op.
    assert!(!rig
        .session
        .goal_request("g1", start("write runs.txt"))
        .await
        .unwrap());
    assert_eq!(
        goal_ended(&rig, &rig.session).await,
        GoalStatus::Complete,
        "{}",
        rig.dump()
    );
    assert_eq!(user_turns(&rig), ["g1", "g1#2"]);
    // One provider request per step, each tool once.
    assert_eq!(rig.gateway.requests().len(), 5);
    assert_eq!(rig.gateway.unplayed(), 0);
    let runs = std::fs::read_to_string(rig.workspace().join("runs.txt")).unwrap();
    assert_eq!(runs, "run\n");
    let sum = rig.session.goal_summary().unwrap();
    assert_eq!(sum.turns, 2);
    assert_eq!(sum.progress.as_deref(), Some("runs.txt has one line"));
    assert_eq!(rig.session.info().goal, Some(sum));
    // The second turn's message names the objective.
    let second = &rig.gateway.requests()[3];
    assert!(second.messages.iter().any(|m| m["content"]
        .as_str()
        .is_some_and(|t| t.contains("Continue toward the goal: write runs.txt"))));
}

#[tokio::test]
async fn the_same_blocker_three_times_in_a_row_ends_the_goal() {
    let mut script = Vec::new();
    for i in 0..3 {
        script.push(report(&format!("u{i}"), "blocked", "the network is down"));
        script.push(Reply::answer("blocked"));
    }
    // Never played: the goal ends before a fourth turn.
    script.push(Reply::answer("a fourth turn"));
    let rig = Rig::start(yolo_unconfined(), script).await;
    rig.session
        .goal_request("g1", start("fetch the data"))
        .await
        .unwrap();
    assert_eq!(goal_ended(&rig, &rig.session).await, GoalStatus::Blocked);
    assert_eq!(rig.gateway.requests().len(), 6);
    assert_eq!(rig.gateway.unplayed(), 1);
    let why = rig.session.goal_summary().unwrap().progress.unwrap();
    assert!(why.contains("3 times in a row"), "{why}");
}

#[tokio::test]
async fn a_budget_pauses_and_resume_continues_with_the_same_budget() {
    let rig = Rig::start(
        yolo_unconfined(),
        vec![
            report_used("u1", "continue", "step one", 60),
            Reply::new().text("one").usage(used(10)).done(),
            report_used("u2", "continue", "step two", 40),
            Reply::new().text("two").usage(used(10)).done(),
            report_used("u3", "complete", "done", 10),
            Reply::answer("three"),
        ],
    )
    .await;
    rig.session
        .goal_request(
            "g1",
            GoalAction::Start {
                objective: "three steps".into(),
                budgets: GoalBudgets {
                    tokens: Some(100),
                    ..Default::default()
                },
            },
        )
        .await
        .unwrap();
    assert_eq!(
        goal_ended(&rig, &rig.session).await,
        GoalStatus::BudgetPaused
    );
    assert_eq!(rig.gateway.requests().len(), 4);
    let why = rig.session.goal_summary().unwrap().progress.unwrap();
    assert!(why.contains("token budget reached: 120 of 100"), "{why}");
    // Pause of a paused goal is refused; resume continues.
    assert!(rig
        .session
        .goal_request("p", GoalAction::Pause)
        .await
        .is_err());
    rig.session
        .goal_request("r", GoalAction::Resume)
        .await
        .unwrap();
    assert_eq!(goal_ended(&rig, &rig.session).await, GoalStatus::Complete);
    assert_eq!(user_turns(&rig), ["g1", "g1#2", "g1#3"]);
    assert_eq!(rig.gateway.unplayed(), 0);
}

#[tokio::test]
async fn a_daemon_restart_resumes_the_goal_without_running_a_tool_again() {
    let rig = Rig::start(
        yolo_unconfined(),
        vec![
            Reply::call("b1", "bash", json!({"command": "echo run >> runs.txt"})),
            // The daemon "dies" while the model thinks about the next step.
            Reply::new().hang(),
        ],
    )
    .await;
    rig.session
        .goal_request("g1", start("count runs"))
        .await
        .unwrap();
    rig.gateway.wait_requests(2).await;
    rig.session.flush_journal().await.unwrap();
    let journal = rig.paths.sessions_dir.join("s2.jsonl");
    std::fs::copy(rig.paths.sessions_dir.join("s1.jsonl"), &journal).unwrap();
    let snapshot = rig.runtime.mcp.refresh().await;
    let (copy, notice) = Session::open(
        "s2",
        &journal,
        Arc::clone(&rig.runtime),
        &rig.paths.workspace,
        snapshot.manager,
    )
    .unwrap();
    assert!(notice.unwrap().contains("interrupted"));
    // The goal goes on by itself, waiting for a laptop to reach the model.
    rig.wait_until("the goal's next turn to wait for a laptop", || {
        copy.state() == TurnState::WaitingForLaptop
    })
    .await;
    // Whoever attaches (or lists the sessions) is told why, and that it goes on by itself.
    let (_, _, state, detail) = copy.subscribe(0);
    assert_eq!(state, TurnState::WaitingForLaptop);
    assert_eq!(
        detail.as_deref(),
        Some(reasonix_forward::goal::WAITING_FOR_LAPTOP)
    );
    let gateway = FakeGateway::new(
        7,
        vec![
            report("u1", "complete", "runs.txt has one line"),
            Reply::answer("done"),
        ],
    );
    let settings = yolo_unconfined();
    let enforced = reasonix_remote::project::enforce(
        &settings.policy,
        &rig.paths.workspace,
        &rig.runtime.tool_ctx,
    )
    .unwrap();
    copy.set_driver(
        Some(Arc::clone(&gateway) as Arc<dyn DriverLink>),
        Some((settings, enforced)),
    );
    assert_eq!(goal_ended(&rig, &copy).await, GoalStatus::Complete);
    assert_eq!(gateway.requests().len(), 2);
    let runs = std::fs::read_to_string(rig.workspace().join("runs.txt")).unwrap();
    assert_eq!(runs, "run\n", "the bash call ran once");
    let ids: Vec<String> = copy
        .events_since(0)
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::UserTurn { request_id, .. } => Some(request_id),
            _ => None,
        })
        .collect();
    assert_eq!(ids, ["g1", "g1#2"]);
    // The model saw the first turn's bash result in the resumed turn's request.
    let req = &gateway.requests()[0];
    assert!(req
        .messages
        .iter()
        .any(|m| m["role"] == "tool" && m["tool_call_id"] == "b1"));
}

#[tokio::test]
async fn detached_a_tool_that_needs_approval_waits_for_a_client() {
    // Permission mode `ask`, headless driver: a plain headless turn would deny the write.
    let mut settings = turn_support::settings();
    settings.headless = true;
    settings.policy.sandbox.bash = reasonix_forward::policy::BashSandbox::Off;
    let gate = turn_support::Gate::new();
    let rig = Rig::start(
        settings.clone(),
        vec![Reply::new()
            .gate(&gate)
            .tool("w1", "write_file", json!({"path": "a.txt", "content": "x"}))
            .done()],
    )
    .await;
    rig.session
        .goal_request("g1", start("write a.txt"))
        .await
        .unwrap();
    rig.gateway.wait_requests(1).await;
    // The client goes away: the question waits instead of being denied.
    rig.session.release_driver(1);
    gate.open();
    rig.wait_state(TurnState::WaitingForApproval).await;
    let asked = rig
        .wait_for("the approval question", |e| {
            matches!(e.kind, EventKind::ApprovalRequested { .. })
        })
        .await;
    let EventKind::ApprovalRequested { approval_id, .. } = asked.kind else {
        unreachable!()
    };
    assert!(!rig.workspace().join("a.txt").exists());
    // A client comes back and answers; the goal goes on and completes.
    let gateway = FakeGateway::new(
        2,
        vec![
            report("u1", "complete", "a.txt written"),
            Reply::answer("done"),
        ],
    );
    rig.drive(Arc::clone(&gateway), turn_support::settings());
    rig.session
        .approve(
            "a1",
            &approval_id,
            reasonix_forward::proto::ApprovalDecision::AllowOnce,
        )
        .await
        .unwrap();
    assert_eq!(goal_ended(&rig, &rig.session).await, GoalStatus::Complete);
    assert_eq!(
        std::fs::read_to_string(rig.workspace().join("a.txt")).unwrap(),
        "x"
    );
    assert!(rig.events().iter().any(|e| matches!(
        &e.kind,
        EventKind::Goal(GoalEvent::Status {
            status: GoalStatus::Complete,
            ..
        })
    )));
}
