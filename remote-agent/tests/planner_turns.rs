//! The planner beside the executor (issue 38 §2) in a real session (in-process rig: real
//! session, journal and tools, a scripted gateway): routed turns go to the planner first,
//! whose handoff joins the executor's conversation; direct turns go straight to the
//! executor; each model's requests extend its own previous request byte for byte across the
//! alternation, and a journal replay rebuilds the executor's conversation with the handoff.
//! A planner that does not converge hands the task over on an ordinary route and executes
//! nothing on a plan-only or approval route.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod turn_support;

use reasonix_forward::proto::{
    EventKind, PlanEvent, ProviderRequest, SessionSettings, TurnOutcome, Usage,
};
use serde_json::json;
use turn_support::{Reply, Rig};

const PLANNER: &str = "planner-model";
const EXECUTOR: &str = "fake-model";

fn with_planner() -> SessionSettings {
    let mut s = turn_support::yolo_unconfined();
    s.planner_model = Some(PLANNER.into());
    s
}

fn plan_answer(goal: &str) -> String {
    format!(
        "## Goal\n{goal}\n\n## Steps\n1. Read src/lib.rs\n2. Change it\n\n## Touch points\n- src/lib.rs (verified): the code\n- src/cli.rs: the flag\n\n## Verification\n- cargo test\n"
    )
}

fn by_model(requests: &[ProviderRequest], model: &str) -> Vec<ProviderRequest> {
    requests
        .iter()
        .filter(|r| r.model.as_deref() == Some(model))
        .cloned()
        .collect()
}

/// Each request's messages start with all of the previous request's, byte for byte, and
/// the tools never change.
fn assert_extends(reqs: &[ProviderRequest], who: &str) {
    for w in reqs.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        assert!(b.messages.len() > a.messages.len(), "{who}: {a:#?}\n{b:#?}");
        for (i, m) in a.messages.iter().enumerate() {
            assert_eq!(
                serde_json::to_string(m).unwrap(),
                serde_json::to_string(&b.messages[i]).unwrap(),
                "{who}: message {i} changed between requests {} and {}",
                a.stream_id,
                b.stream_id
            );
        }
        assert_eq!(a.tools, b.tools, "{who}: the tool schemas changed");
    }
}

fn routes(rig: &Rig) -> Vec<(String, String, String)> {
    rig.events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Plan(PlanEvent::Routed {
                route,
                depth,
                reason,
            }) => Some((route, depth, reason)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn planner_and_executor_keep_their_own_byte_stable_prefixes_across_alternation() {
    let usage = Usage {
        prompt_tokens: 100,
        completion_tokens: 10,
        ..Usage::default()
    };
    let planner = |r: Reply| r.usage(usage).done_as("planner-v1");
    let executor = |r: Reply| r.usage(usage).done_as("executor-v1");
    let script = vec![
        // Turn 1 (bounded work → light plan): the planner reads, then plans; the executor.
        planner(Reply::new().tool("p1", "read_file", json!({"path": "src/lib.rs"}))),
        planner(Reply::new().text(&plan_answer("Add a quiet flag."))),
        executor(Reply::new().text("done: quiet flag")),
        // Turn 2 (a question → direct).
        executor(Reply::new().text("it greets")),
        // Turn 3 (implementation → light plan): the planner plans at once.
        planner(Reply::new().text(&plan_answer("Retry the fetch."))),
        executor(Reply::new().text("done: retry")),
        // Turn 4 (explicit "just do it" → direct).
        executor(Reply::new().text("done: test")),
    ];
    let rig = Rig::start(with_planner(), script).await;
    rig.write("src/lib.rs", "pub fn greet() -> &'static str { \"hi\" }\n");
    for (turn, text) in [
        "add a --quiet flag to the run command",
        "what does src/lib.rs do?",
        "implement retry with backoff for the web fetch tool",
        "write a test for greet, just do it",
    ]
    .iter()
    .enumerate()
    {
        rig.submit(text);
        assert_eq!(
            rig.finished(turn as u64 + 1).await,
            (TurnOutcome::Completed, None),
            "{}",
            rig.dump()
        );
    }
    assert_eq!(
        routes(&rig),
        vec![
            ("plan".into(), "light".into(), "bounded_work".into()),
            ("direct".into(), "none".into(), "question".into()),
            ("plan".into(), "light".into(), "bounded_work".into()),
            ("direct".into(), "none".into(), "explicit_direct".into()),
        ]
    );
    let all = rig.gateway.requests();
    let order: Vec<&str> = all.iter().map(|r| r.model.as_deref().unwrap()).collect();
    assert_eq!(
        order,
        [PLANNER, PLANNER, EXECUTOR, EXECUTOR, PLANNER, EXECUTOR, EXECUTOR],
        "the planner's requests come before the executor's in planned turns"
    );
    let (planner, executor) = (by_model(&all, PLANNER), by_model(&all, EXECUTOR));
    assert_extends(&planner, "planner");
    assert_extends(&executor, "executor");

    // Two prefixes: the planner's system prompt is its role before the executor's, and its
    // tools are the read-only set.
    let sys = |r: &ProviderRequest| r.messages[0]["content"].as_str().unwrap().to_string();
    assert!(sys(&planner[0]).starts_with("You are the PLANNER"));
    assert!(sys(&planner[0]).ends_with(&sys(&executor[0])));
    let names = |r: &ProviderRequest| -> Vec<String> {
        r.tools
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(names(&planner[0]).contains(&"read_file".to_string()));
    assert!(!names(&planner[0]).contains(&"write_file".to_string()));
    assert!(names(&executor[0]).contains(&"write_file".to_string()));

    // The executor's first request carries the task and the handoff (one user message, as
    // successive user messages are sent), with the file the planner read as verified.
    let first = executor[0].messages.last().unwrap()["content"]
        .as_str()
        .unwrap();
    assert!(first.starts_with("add a --quiet flag"), "{first}");
    assert!(first.contains("[planner handoff]"), "{first}");
    assert!(
        first.contains("(verified: the planner read them)\n- src/lib.rs\n"),
        "{first}"
    );
    assert!(
        first.contains("(candidates: check before relying on them)\n- src/cli.rs\n"),
        "{first}"
    );
    // The planner never saw the executor's conversation, nor the executor the planner's
    // research.
    assert!(!executor.iter().any(|r| serde_json::to_string(&r.messages)
        .unwrap()
        .contains("\"p1\"")));
    assert!(!planner.iter().any(|r| serde_json::to_string(&r.messages)
        .unwrap()
        .contains("done: quiet flag")));

    // `/context` shows both conversations and the usage per model, summed.
    let report = rig.session.context_report();
    let p = report.planner.expect("the planner's part");
    assert_eq!(p.model, PLANNER);
    assert_eq!(
        p.messages, 6,
        "two planning turns: user, call, result, plan; user, plan"
    );
    assert!(p.tokens > 0);
    assert_eq!(
        report.messages, 10,
        "the executor: four turns and two handoffs"
    );
    let usage: Vec<(String, u64, u64)> = report
        .usage_by_model
        .iter()
        .map(|m| (m.model.clone(), m.requests, m.usage.prompt_tokens))
        .collect();
    assert_eq!(
        usage,
        vec![
            ("planner-v1".into(), 3, 300),
            ("executor-v1".into(), 4, 400)
        ]
    );

    // A replay of the journal (a daemon restart) rebuilds the executor's conversation with
    // the handoffs: its next request extends the last one byte for byte.
    let (copy, gw) = rig
        .load_copy("s2", with_planner(), vec![Reply::answer("still here")])
        .await;
    assert!(copy.submit("r-after", "thanks").unwrap());
    gw.wait_requests(1).await;
    let mut after = executor.clone();
    after.push(gw.requests()[0].clone());
    assert_extends(&after[after.len() - 2..], "executor after replay");
}

#[tokio::test]
async fn a_planner_without_a_plan_hands_an_ordinary_turn_to_the_executor() {
    let script = vec![
        Reply::answer("I looked around but I am not sure."),
        Reply::answer("done anyway"),
    ];
    let rig = Rig::start(with_planner(), script).await;
    rig.submit("add a --quiet flag to the run command");
    assert_eq!(rig.finished(1).await, (TurnOutcome::Completed, None));
    let failed = rig.events().into_iter().find_map(|e| match e.kind {
        EventKind::Plan(PlanEvent::PlannerFailed { handed_over, .. }) => Some(handed_over),
        _ => None,
    });
    assert_eq!(failed, Some(true), "{}", rig.dump());
    let reqs = rig.gateway.requests();
    assert_eq!(reqs.len(), 2);
    let last = reqs[1].messages.last().unwrap()["content"]
        .as_str()
        .unwrap();
    assert_eq!(
        last, "add a --quiet flag to the run command",
        "the original task, no handoff"
    );
}

#[tokio::test]
async fn plan_only_and_approval_turns_fail_closed() {
    // The planner uses its whole budget (6 steps of a light plan) without a plan.
    let script: Vec<Reply> = (0..6)
        .map(|i| Reply::call(&format!("p{i}"), "ls", json!({"path": "."})))
        .collect();
    let rig = Rig::start(with_planner(), script).await;
    rig.submit("add a --quiet flag. plan only, don't execute");
    let (outcome, detail) = rig.finished(1).await;
    assert_eq!(outcome, TurnOutcome::Failed, "{}", rig.dump());
    assert!(detail.unwrap().contains("nothing was executed"));
    let reqs = rig.gateway.requests();
    assert_eq!(reqs.len(), 6);
    assert!(
        reqs.iter().all(|r| r.model.as_deref() == Some(PLANNER)),
        "the executor was never asked"
    );

    // With a plan, an approval turn puts it on the plan card and stops: nothing executes.
    rig.gateway.push(Reply::answer(&plan_answer("Quiet flag.")));
    rig.submit("add a --quiet flag, wait for my approval");
    assert_eq!(rig.finished(2).await, (TurnOutcome::Completed, None));
    assert_eq!(rig.gateway.requests().len(), 7);
    let pending = rig
        .session
        .pending_plan()
        .expect("a plan waits for approval");
    assert_eq!(pending.steps, vec!["Read src/lib.rs", "Change it"]);
    assert!(
        rig.session.plan_mode(),
        "plan mode holds the writers meanwhile"
    );
}
