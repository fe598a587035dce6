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
use turn_support::{Gate, Reply, Rig};

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

/// The last user message of a request (successive user messages are sent as one).
fn last_user(r: &ProviderRequest) -> String {
    r.messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn a_steer_typed_while_the_planner_works_reaches_its_next_step_and_the_handoff() {
    // The planner's first reply waits at a gate: the steer is sent while the planner
    // certainly works, before its next step.
    let gate = Gate::new();
    let script = vec![
        Reply::new()
            .gate(&gate)
            .tool("p1", "read_file", json!({"path": "src/lib.rs"}))
            .done(),
        Reply::answer(&plan_answer("Add a quiet flag, with tabs.")),
        Reply::answer("done: quiet flag"),
    ];
    let rig = Rig::start(with_planner(), script).await;
    rig.write("src/lib.rs", "pub fn greet() -> &'static str { \"hi\" }\n");
    rig.submit("add a --quiet flag to the run command");
    rig.gateway.wait_requests(1).await;
    assert!(rig
        .session
        .steer("steer-1", "use tabs, not spaces")
        .await
        .unwrap());
    gate.open();
    assert_eq!(
        rig.finished(1).await,
        (TurnOutcome::Completed, None),
        "{}",
        rig.dump()
    );
    let all = rig.gateway.requests();
    let order: Vec<&str> = all.iter().map(|r| r.model.as_deref().unwrap()).collect();
    assert_eq!(order, [PLANNER, PLANNER, EXECUTOR]);
    let (planner, executor) = (by_model(&all, PLANNER), by_model(&all, EXECUTOR));
    // The planner's next step got the steer: after its tool result, as the last message,
    // extending its previous request byte for byte.
    assert_extends(&planner, "planner");
    let p2 = &planner[1].messages;
    assert_eq!(p2[p2.len() - 2]["role"], "tool");
    assert_eq!(p2[p2.len() - 1]["role"], "user");
    assert_eq!(p2[p2.len() - 1]["content"], "use tabs, not spaces");
    // The injection is the planner's in the journal (the executor's conversation does not
    // replay it), and the steer is handed over with the plan in the user's words.
    let outline = rig.outline(1);
    assert!(
        outline.contains(&"planner>steer_injected".to_string()),
        "{outline:?}"
    );
    assert!(
        !outline.contains(&"steer_injected".to_string()),
        "{outline:?}"
    );
    let handed = last_user(&executor[0]);
    let section = handed
        .split_once("## The user's messages while the planner worked")
        .map(|(_, s)| s)
        .unwrap_or_else(|| panic!("no steer section in the handoff: {handed}"));
    assert!(section.contains("\nuse tabs, not spaces\n"), "{handed}");
    assert_eq!(
        executor[0].messages.len(),
        2,
        "system, then the task with the handoff: no separate steer message"
    );

    // A daemon restart: both conversations are rebuilt from the journal, the planner's
    // with the steer where it was injected.
    let (copy, gw) = rig
        .load_copy(
            "s2",
            with_planner(),
            vec![
                Reply::answer(&plan_answer("Retry the fetch.")),
                Reply::answer("done: retry"),
            ],
        )
        .await;
    assert!(copy
        .submit(
            "r-after",
            "implement retry with backoff for the web fetch tool"
        )
        .unwrap());
    gw.wait_requests(2).await;
    let after = gw.requests();
    assert_eq!(after[0].model.as_deref(), Some(PLANNER));
    assert_extends(
        &[planner[1].clone(), after[0].clone()],
        "planner after replay",
    );
    assert_extends(
        &[executor[0].clone(), after[1].clone()],
        "executor after replay",
    );
}

#[tokio::test]
async fn a_steer_the_planner_read_goes_to_the_executor_when_the_planner_gives_no_plan() {
    // The planner answers without a plan while the user steers: its answer takes one more
    // step with the steer, still no plan; the executor takes the original task and the
    // steer, injected at its first step (so a replay puts it at the same place).
    let gate = Gate::new();
    let script = vec![
        Reply::new().gate(&gate).text("Not sure yet.").done(),
        Reply::answer("Still no plan."),
        Reply::answer("done anyway"),
    ];
    let rig = Rig::start(with_planner(), script).await;
    rig.submit("add a --quiet flag to the run command");
    rig.gateway.wait_requests(1).await;
    assert!(rig.session.steer("steer-1", "keep it small").await.unwrap());
    gate.open();
    assert_eq!(rig.finished(1).await, (TurnOutcome::Completed, None));
    let all = rig.gateway.requests();
    let order: Vec<&str> = all.iter().map(|r| r.model.as_deref().unwrap()).collect();
    assert_eq!(order, [PLANNER, PLANNER, EXECUTOR], "{}", rig.dump());
    assert_eq!(
        all[1].messages.last().unwrap()["content"],
        "keep it small",
        "the planner's next step had the steer"
    );
    let exec = &all[2];
    assert_eq!(
        last_user(exec),
        "add a --quiet flag to the run command\n\nkeep it small",
        "the original task, then the steer"
    );
    let outline = rig.outline(1);
    for want in ["planner>steer_injected", "steer_injected"] {
        assert!(outline.contains(&want.to_string()), "{outline:?}");
    }
    let (copy, gw) = rig
        .load_copy("s2", with_planner(), vec![Reply::answer("yes")])
        .await;
    assert!(copy.submit("r-after", "thanks").unwrap());
    gw.wait_requests(1).await;
    assert_extends(
        &[exec.clone(), gw.requests()[0].clone()],
        "executor after replay",
    );
}

#[tokio::test]
async fn hooks_fire_for_the_planners_tool_calls_naming_the_planner() {
    use reasonix_forward::hooks::{HookDecl, HookSettings};
    let decl = |event: &str, matcher: Option<&str>, command: &str| HookDecl {
        event: event.into(),
        matcher: matcher.map(str::to_string),
        command: command.into(),
        timeout_ms: None,
        fail: None,
        run_on: None,
    };
    let script = vec![
        Reply::new()
            .tool("p1", "read_file", json!({"path": "src/lib.rs"}))
            .tool("p2", "grep", json!({"pattern": "greet"}))
            .done(),
        Reply::answer(&plan_answer("Add a quiet flag.")),
        Reply::call("e1", "read_file", json!({"path": "src/lib.rs"})),
        Reply::answer("done: quiet flag"),
    ];
    let rig = Rig::start(with_planner(), script).await;
    rig.write("src/lib.rs", "pub fn greet() -> &'static str { \"hi\" }\n");
    rig.session.set_hook_settings(HookSettings {
        user: vec![
            decl(
                "PreToolUse",
                Some("read_file"),
                "cat >> hook-pre.jsonl; echo >> hook-pre.jsonl",
            ),
            decl(
                "PostToolUse",
                Some("read_file"),
                "echo 'the hook saw it' >&2; exit 2",
            ),
            decl(
                "PreToolUse",
                Some("grep"),
                "echo 'no grep here' >&2; exit 2",
            ),
            decl(
                "UserPromptSubmit",
                None,
                "echo 'hook context: the tests live in tests/'",
            ),
        ],
        trusted: Vec::new(),
    });
    // As the daemon submits a prompt: its hooks first, their context with the turn.
    let text = "add a --quiet flag to the run command";
    let (context, told) = rig.session.prompt_hooks("req-h", text).await.unwrap();
    assert!(rig
        .session
        .submit_with("req-h", text, context, told)
        .unwrap());
    assert_eq!(
        rig.finished(1).await,
        (TurnOutcome::Completed, None),
        "{}",
        rig.dump()
    );
    let all = rig.gateway.requests();
    let (planner, executor) = (by_model(&all, PLANNER), by_model(&all, EXECUTOR));
    assert_eq!((planner.len(), executor.len()), (2, 2), "{}", rig.dump());
    // The prompt's hook context rides the planner's user message too (the hook ran once).
    for (who, r) in [("planner", &planner[0]), ("executor", &executor[0])] {
        assert!(
            last_user(r).contains(
                "<hook-context event=\"UserPromptSubmit\">\nhook context: the tests live in tests/"
            ),
            "{who}: {}",
            last_user(r)
        );
    }
    // PreToolUse saw the planner's call with `agent: planner`, the executor's without.
    let pre: Vec<serde_json::Value> =
        std::fs::read_to_string(rig.workspace().join("hook-pre.jsonl"))
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    assert_eq!(pre.len(), 2, "{pre:?}");
    assert_eq!(pre[0]["hook_event_name"], "PreToolUse");
    assert_eq!(pre[0]["tool_name"], "read_file");
    assert_eq!(pre[0]["agent"], "planner");
    assert_eq!(pre[1]["tool_name"], "read_file");
    assert!(pre[1].get("agent").is_none(), "{:?}", pre[1]);
    // A PreToolUse block and a PostToolUse note reach the planner's results.
    let p2 = &planner[1].messages;
    let result = |id: &str| turn_support::tool_result(p2, id).unwrap().to_string();
    assert!(
        result("p1").ends_with("[PostToolUse hook: the hook saw it]"),
        "{}",
        result("p1")
    );
    assert_eq!(result("p2"), "blocked by a PreToolUse hook: no grep here");
    // The planner's user message with its attachments is rebuilt from the journal.
    let (copy, gw) = rig
        .load_copy(
            "s2",
            with_planner(),
            vec![
                Reply::answer(&plan_answer("Retry the fetch.")),
                Reply::answer("done: retry"),
            ],
        )
        .await;
    assert!(copy
        .submit(
            "r-after",
            "implement retry with backoff for the web fetch tool"
        )
        .unwrap());
    gw.wait_requests(1).await;
    assert_extends(
        &[planner[1].clone(), gw.requests()[0].clone()],
        "planner after replay",
    );
}

#[tokio::test]
async fn a_rewind_to_before_a_planned_turn_rebuilds_both_conversations_to_that_point() {
    use reasonix_forward::proto::RewindScope;
    let script = vec![
        // Turn 1: the planner reads, then plans; the executor.
        Reply::call("p1", "read_file", json!({"path": "src/lib.rs"})),
        Reply::answer(&plan_answer("Add a quiet flag.")),
        Reply::answer("done: quiet flag"),
        // Turn 2: planned at once.
        Reply::answer(&plan_answer("Retry the fetch.")),
        Reply::answer("done: retry"),
    ];
    let rig = Rig::start(with_planner(), script).await;
    rig.write("src/lib.rs", "pub fn greet() -> &'static str { \"hi\" }\n");
    let (one, two) = (
        "add a --quiet flag to the run command",
        "implement retry with backoff for the web fetch tool",
    );
    rig.submit(one);
    assert_eq!(rig.finished(1).await, (TurnOutcome::Completed, None));
    rig.submit(two);
    assert_eq!(rig.finished(2).await, (TurnOutcome::Completed, None));
    let before = rig.gateway.requests();
    assert_eq!(before.len(), 5);

    // Rewind to before turn 2 and ask the same again: each model's request is the one of
    // the rewound turn, byte for byte (nothing of turn 2 left in either conversation).
    rig.session
        .rewind("rw-1", 2, RewindScope::Conversation, false)
        .await
        .unwrap();
    rig.gateway
        .push(Reply::answer(&plan_answer("Retry the fetch.")));
    rig.gateway.push(Reply::answer("done: retry"));
    rig.submit(two);
    assert_eq!(
        rig.finished(2).await,
        (TurnOutcome::Completed, None),
        "{}",
        rig.dump()
    );
    let after = rig.gateway.requests();
    assert_eq!(after.len(), 7);
    for (old, new, who) in [(3, 5, "planner"), (4, 6, "executor")] {
        assert_eq!(after[new].model, before[old].model, "{who}");
        assert_eq!(
            turn_support::texts(&after[new].messages),
            turn_support::texts(&before[old].messages),
            "{who}: the request after the rewind is the rewound turn's"
        );
        assert_eq!(after[new].tools, before[old].tools, "{who}");
    }
    // (Had anything of the rewound turn stayed, each request would be longer.)

    // Rewind to before turn 1: the planner's conversation is empty again (its system
    // prompt and the new task only) and its prefix is unchanged.
    rig.session
        .rewind("rw-2", 1, RewindScope::Conversation, false)
        .await
        .unwrap();
    rig.gateway.push(Reply::answer(&plan_answer("Add a flag.")));
    rig.gateway.push(Reply::answer("done: flag"));
    rig.submit(one);
    assert_eq!(rig.finished(1).await, (TurnOutcome::Completed, None));
    let last = rig.gateway.requests();
    assert_eq!(last.len(), 9);
    assert_eq!(
        turn_support::texts(&last[7].messages),
        turn_support::texts(&before[0].messages),
        "the planner's first request again"
    );
    assert_eq!(last[7].tools, before[0].tools);
    assert_eq!(
        last[8].messages.len(),
        2,
        "the executor: its system prompt, then the task with the new handoff"
    );
    assert_eq!(last[8].messages[0], before[2].messages[0]);
    assert!(last_user(&last[8]).starts_with(one) && last_user(&last[8]).contains("Add a flag."));
    assert_eq!(last[8].tools, before[2].tools);
}

#[tokio::test]
async fn a_steer_during_the_planners_last_budget_step_gets_one_more_step() {
    // A light plan may take 6 steps: five research steps, then a plan written while the
    // user steers. The steer is not lost with a paused planner: one step more reads it.
    let gate = Gate::new();
    let mut script: Vec<Reply> = (0..5)
        .map(|i| Reply::call(&format!("p{i}"), "ls", json!({"path": "."})))
        .collect();
    script.push(
        Reply::new()
            .gate(&gate)
            .text(&plan_answer("Add a quiet flag."))
            .done(),
    );
    script.push(Reply::answer(&plan_answer("Add a quiet flag, in tabs.")));
    script.push(Reply::answer("done: quiet flag"));
    let rig = Rig::start(with_planner(), script).await;
    rig.submit("add a --quiet flag to the run command");
    rig.gateway.wait_requests(6).await;
    assert!(rig.session.steer("steer-1", "use tabs").await.unwrap());
    gate.open();
    assert_eq!(
        rig.finished(1).await,
        (TurnOutcome::Completed, None),
        "{}",
        rig.dump()
    );
    let all = rig.gateway.requests();
    let planner = by_model(&all, PLANNER);
    assert_eq!(planner.len(), 7, "{}", rig.dump());
    assert_extends(&planner, "planner");
    assert_eq!(planner[6].messages.last().unwrap()["content"], "use tabs");
    assert!(!rig.outline(1).iter().any(|o| o.contains("PlannerFailed")));
    let handed = last_user(&by_model(&all, EXECUTOR)[0]);
    assert!(
        handed.contains("Add a quiet flag, in tabs.") && handed.ends_with("\nuse tabs\n"),
        "{handed}"
    );
}
