//! Subagents in process: a real session (journal, tools, policy) whose `task`,
//! `read_only_task`, `parallel_tasks`, `fleet`, `read_subagent_result` and `list_subagents`
//! calls run child conversations as further runners of the same session, driven by the
//! scripted fake gateway (`turn_support`, routing a child's requests by its task text).
//! Checked on the journal (children's events wrapped under the parent's call id) and on the
//! exact requests each conversation sent.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod turn_support;

use reasonix_forward::proto::{Denied, Event, EventKind, ProviderRequest, TurnOutcome, Usage};
use serde_json::{json, Value};
use turn_support::{settings, texts, yolo_unconfined, FakeGateway, Gate, Reply, Rig};

fn usage(prompt: u64) -> Usage {
    Usage {
        prompt_tokens: prompt,
        completion_tokens: 10,
        cache_hit_tokens: 0,
        cache_miss_tokens: prompt,
        reasoning_tokens: 0,
    }
}

/// `(is_error, output)` of the top-level call `call_id`.
fn result_of(rig: &Rig, call_id: &str) -> (bool, String) {
    rig.events()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::ToolFinished {
                call_id: c,
                is_error,
                output,
                ..
            } if c == call_id => Some((is_error, output)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result of {call_id}:\n{}", rig.dump()))
}

/// The events of child `child` (unwrapped once), with their journal seq.
fn child_events(events: &[Event], child: &str) -> Vec<(u64, EventKind)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Subagent {
                child: c, event, ..
            } if c == child => Some((e.seq, (**event).clone())),
            _ => None,
        })
        .collect()
}

/// The requests of the conversation whose first user message contains `key`.
fn requests_of(rig: &Rig, key: &str) -> Vec<ProviderRequest> {
    rig.gateway
        .requests()
        .into_iter()
        .filter(|r| {
            r.messages
                .iter()
                .find(|m| m["role"] == "user")
                .is_some_and(|m| m["content"].to_string().contains(key))
        })
        .collect()
}

fn tool_names(req: &ProviderRequest) -> Vec<String> {
    req.tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn system(req: &ProviderRequest) -> String {
    req.messages[0]["content"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_task_child_runs_a_tool_and_its_answer_is_the_tool_result() {
    let rig = Rig::start(
        yolo_unconfined(),
        vec![
            Reply::call(
                "t1",
                "task",
                json!({"prompt": "[A] what is in notes.txt?", "description": "read the notes"}),
            ),
            Reply::answer("The child says alpha."),
        ],
    )
    .await;
    rig.gateway.route(
        "[A]",
        vec![
            Reply::new()
                .tool("c1", "read_file", json!({"path": "notes.txt"}))
                .usage(usage(100))
                .done(),
            Reply::new()
                .text("notes.txt holds alpha")
                .usage(usage(150))
                .done(),
        ],
    );
    rig.write("notes.txt", "alpha\n");
    rig.submit("delegate it");
    assert_eq!(rig.finished(1).await, (TurnOutcome::Completed, None));
    assert_eq!(
        rig.outline(1),
        [
            "user_turn",
            "assistant:calls:t1",
            "tool_started:t1",
            "sa-1>user_turn",
            "sa-1>assistant:calls:c1",
            "sa-1>usage",
            "sa-1>tool_started:c1",
            "sa-1>tool_finished:c1",
            "sa-1>assistant",
            "sa-1>usage",
            "sa-1>turn_finished:completed",
            "tool_finished:t1",
            "assistant",
            "turn_finished:completed",
        ]
    );
    let (is_error, out) = result_of(&rig, "t1");
    assert!(!is_error, "{out}");
    assert!(out.contains("notes.txt holds alpha"), "{out}");
    assert!(
        out.contains("sa-1 (general) completed; 2 model steps, 250 prompt + 20 completion tokens"),
        "the child's usage is summed into its result: {out}"
    );
    // The child read the file itself: its tool result holds the content.
    let child = child_events(&rig.events(), "sa-1");
    assert!(child.iter().any(|(_, k)| matches!(k,
        EventKind::ToolFinished { call_id, output, is_error: false, .. } if call_id == "c1" && output.contains("alpha"))));

    // Each child step was one provider request, under the child's own prefix; the second
    // extends the first byte for byte.
    let reqs = rig.gateway.requests();
    assert_eq!(reqs.len(), 4, "2 main steps + 2 child steps");
    let kids = requests_of(&rig, "[A]");
    assert_eq!(kids.len(), 2);
    assert!(
        kids[0].stream_id.starts_with("s1-sa-1-"),
        "{}",
        kids[0].stream_id
    );
    let (a, b) = (texts(&kids[0].messages), texts(&kids[1].messages));
    assert_eq!(
        b[..a.len()],
        a[..],
        "the child's requests extend each other"
    );
    assert_eq!(kids[0].tools, kids[1].tools);
    assert!(system(&kids[0]).contains("<subagent profile=\"general\">"));
    assert!(
        !system(&reqs[0]).contains("<subagent"),
        "the main prompt is not the child's"
    );
    let names = tool_names(&kids[0]);
    for absent in ["todo_write", "exit_plan_mode", "remember", "forget"] {
        assert!(
            !names.contains(&absent.to_string()),
            "{absent} in {names:?}"
        );
    }
    for present in ["read_file", "write_file", "bash", "task"] {
        assert!(
            names.contains(&present.to_string()),
            "{present} missing: {names:?}"
        );
    }
    // The parent saw the child's answer as the tool result, not its transcript.
    let last = reqs.last().unwrap();
    let parent_tool = turn_support::tool_result(&last.messages, "t1").unwrap();
    assert!(parent_tool.contains("notes.txt holds alpha"));
    assert!(!last
        .messages
        .iter()
        .any(|m| m.to_string().contains("\"c1\"")));
}

#[tokio::test]
async fn a_read_only_child_has_no_writers_and_a_denied_child_tool_is_its_error() {
    let rig = Rig::start(
        settings(),
        vec![
            Reply::call(
                "t1",
                "read_only_task",
                json!({"prompt": "[R] write a file", "description": "try to write"}),
            ),
            Reply::call(
                "t2",
                "task",
                json!({"prompt": "[W] write a file", "description": "write headless"}),
            ),
            Reply::answer("both reported"),
        ],
    )
    .await;
    rig.gateway.set_headless(true);
    rig.gateway.route(
        "[R]",
        vec![
            Reply::call(
                "r1",
                "write_file",
                json!({"path": "ro.txt", "content": "x"}),
            ),
            Reply::answer("I cannot write"),
        ],
    );
    rig.gateway.route(
        "[W]",
        vec![
            Reply::call("w1", "write_file", json!({"path": "w.txt", "content": "x"})),
            Reply::answer("the write was denied"),
        ],
    );
    rig.submit("go");
    assert_eq!(rig.finished(1).await, (TurnOutcome::Completed, None));
    let events = rig.events();
    let ro = child_events(&events, "sa-1");
    assert!(ro.iter().any(|(_, k)| matches!(k,
        EventKind::ToolFinished { call_id, is_error: true, output, .. } if call_id == "r1" && output.contains("unknown tool"))),
        "{ro:?}");
    let ro_tools = tool_names(&requests_of(&rig, "[R]")[0]);
    for w in ["write_file", "edit_file", "bash", "task"] {
        assert!(
            !ro_tools.contains(&w.to_string()),
            "{w} given to a read-only child"
        );
    }
    assert!(
        ro_tools.contains(&"read_file".to_string())
            && ro_tools.contains(&"read_only_task".to_string())
    );
    // The session's policy (ask, headless) applies inside the child: denied, as a tool error
    // the child reads and answers about.
    let w = child_events(&events, "sa-2");
    assert!(w.iter().any(|(_, k)| matches!(k,
        EventKind::ToolFinished { call_id, is_error: true, denied: Some(Denied::Headless), .. } if call_id == "w1")),
        "{w:?}");
    assert!(!rig.workspace().join("ro.txt").exists() && !rig.workspace().join("w.txt").exists());
    let (err, out) = result_of(&rig, "t2");
    assert!(!err && out.contains("the write was denied"), "{out}");
}

#[tokio::test]
async fn children_nest_two_deep_and_the_third_level_is_refused() {
    let rig = Rig::start(
        yolo_unconfined(),
        vec![
            Reply::call(
                "t1",
                "task",
                json!({"prompt": "[D1] delegate", "description": "level 1"}),
            ),
            Reply::answer("done"),
        ],
    )
    .await;
    rig.gateway.route(
        "[D1]",
        vec![
            Reply::call(
                "g1",
                "task",
                json!({"prompt": "[D2] delegate again", "description": "level 2"}),
            ),
            Reply::answer("level 1 done"),
        ],
    );
    rig.gateway.route(
        "[D2]",
        vec![
            Reply::call(
                "g2",
                "task",
                json!({"prompt": "[D3] and again", "description": "level 3"}),
            ),
            Reply::answer("level 2 done"),
        ],
    );
    rig.submit("go");
    assert_eq!(rig.finished(1).await, (TurnOutcome::Completed, None));
    let outline = rig.outline(1);
    assert!(
        outline.contains(&"sa-1>sa-2>tool_finished:g2:error".to_string()),
        "{outline:?}"
    );
    let nested = rig.events().into_iter().find_map(|e| match e.kind {
        EventKind::Subagent {
            call_id,
            child,
            event,
        } if call_id == "t1" && child == "sa-1" => match *event {
            EventKind::Subagent {
                call_id,
                child,
                event,
            } if call_id == "g1" && child == "sa-2" => match *event {
                EventKind::ToolFinished {
                    call_id,
                    is_error,
                    output,
                    ..
                } if call_id == "g2" => Some((is_error, output)),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    });
    let (is_error, out) = nested.unwrap();
    assert!(
        is_error && out.contains("depth 3, past the limit of 2"),
        "{out}"
    );
    assert!(
        requests_of(&rig, "[D3]").is_empty(),
        "nothing ran at depth 3"
    );
    let (_, out) = result_of(&rig, "t1");
    assert!(out.contains("level 1 done"), "{out}");
}

#[tokio::test]
async fn a_child_at_its_step_limit_returns_its_partial_answer() {
    let rig = Rig::start(
        yolo_unconfined(),
        vec![
            Reply::call(
                "t1",
                "task",
                json!({"prompt": "[S] loop", "description": "never ends", "max_steps": 2}),
            ),
            Reply::answer("ok"),
        ],
    )
    .await;
    rig.write("n.txt", "n");
    rig.gateway.route(
        "[S]",
        vec![
            Reply::new()
                .text("looking")
                .tool("s1", "read_file", json!({"path": "n.txt"}))
                .done(),
            Reply::new()
                .text("half way there")
                .tool("s2", "read_file", json!({"path": "n.txt"}))
                .done(),
            Reply::answer("never asked"),
        ],
    );
    rig.submit("go");
    assert_eq!(rig.finished(1).await, (TurnOutcome::Completed, None));
    let (is_error, out) = result_of(&rig, "t1");
    assert!(!is_error, "{out}");
    assert!(
        out.contains("stopped at its limit of 2 model steps"),
        "{out}"
    );
    assert!(out.contains("half way there"), "{out}");
    assert_eq!(
        requests_of(&rig, "[S]").len(),
        2,
        "one request per step, then it stopped"
    );
}

#[tokio::test]
async fn parallel_tasks_run_together_but_overlapping_writers_never_do() {
    let (ga, gc) = (Gate::new(), Gate::new());
    let rig = Rig::start(
        yolo_unconfined(),
        vec![
            Reply::call(
                "p1",
                "parallel_tasks",
                json!({"tasks": [
                    {"prompt": "[PA] write src", "description": "a", "write_paths": ["src"]},
                    {"prompt": "[PB] write src/x", "description": "b", "write_paths": ["src/x"]},
                    {"prompt": "[PC] look around", "description": "c", "profile": "explore"},
                ]}),
            ),
            Reply::answer("all three done"),
        ],
    )
    .await;
    std::fs::create_dir_all(rig.workspace().join("src/x")).unwrap();
    rig.gateway
        .route("[PA]", vec![Reply::new().gate(&ga).text("A done").done()]);
    rig.gateway.route("[PB]", vec![Reply::answer("B done")]);
    rig.gateway
        .route("[PC]", vec![Reply::new().gate(&gc).text("C done").done()]);
    rig.submit("go");
    // A and C run at the same time (both asked the model before either answered).
    rig.wait_until("A and C to ask", || {
        requests_of(&rig, "[PA]").len() == 1 && requests_of(&rig, "[PC]").len() == 1
    })
    .await;
    gc.open();
    rig.wait_until("C to finish", || {
        child_events(&rig.events(), "sa-3")
            .iter()
            .any(|(_, k)| matches!(k, EventKind::TurnFinished { .. }))
    })
    .await;
    assert!(
        requests_of(&rig, "[PB]").is_empty(),
        "B writes inside A's write path: it must wait for A"
    );
    ga.open();
    assert_eq!(rig.finished(1).await, (TurnOutcome::Completed, None));
    let events = rig.events();
    let a_end = child_events(&events, "sa-1")
        .into_iter()
        .find(|(_, k)| matches!(k, EventKind::TurnFinished { .. }))
        .unwrap()
        .0;
    let b_start = child_events(&events, "sa-2").first().unwrap().0;
    assert!(
        b_start > a_end,
        "B started (seq {b_start}) before A ended (seq {a_end})"
    );
    let (is_error, out) = result_of(&rig, "p1");
    assert!(!is_error, "{out}");
    assert!(out.starts_with("3 of 3 tasks completed."), "{out}");
    assert!(out.contains("A done") && out.contains("B done") && out.contains("C done"));
    // Two children of one profile share their prefix byte for byte (the provider's cache).
    let (a, b) = (&requests_of(&rig, "[PA]")[0], &requests_of(&rig, "[PB]")[0]);
    assert_eq!(system(a), system(b));
    assert_eq!(
        serde_json::to_string(&a.tools).unwrap(),
        serde_json::to_string(&b.tools).unwrap()
    );
    let c = &requests_of(&rig, "[PC]")[0];
    assert!(system(c).contains("<subagent profile=\"explore\">"));
}

#[tokio::test]
async fn a_fleet_with_a_cycle_is_refused_before_anything_runs() {
    let rig = Rig::start(
        yolo_unconfined(),
        vec![
            Reply::call(
                "f1",
                "fleet",
                json!({"items": [
                    {"id": "a", "prompt": "[Xa]", "depends_on": ["c"]},
                    {"id": "b", "prompt": "[Xb]", "depends_on": ["a"]},
                    {"id": "c", "prompt": "[Xc]", "depends_on": ["b"]},
                ]}),
            ),
            Reply::call(
                "f2",
                "fleet",
                json!({"items": [{"id": "a", "prompt": "[Xa]", "depends_on": ["nope"]}]}),
            ),
            Reply::call(
                "f3",
                "task",
                json!({"prompt": "[Xa]", "description": "x", "profile": "reviewer"}),
            ),
            Reply::answer("refused"),
        ],
    )
    .await;
    rig.submit("go");
    assert_eq!(rig.finished(1).await, (TurnOutcome::Completed, None));
    let (err, out) = result_of(&rig, "f1");
    assert!(err && out.contains("cycle: a -> c -> b -> a"), "{out}");
    let (err, out) = result_of(&rig, "f2");
    assert!(err && out.contains("unknown id \"nope\""), "{out}");
    let (err, out) = result_of(&rig, "f3");
    assert!(
        err && out.contains("unknown subagent profile \"reviewer\"") && out.contains("explore"),
        "{out}"
    );
    assert_eq!(rig.gateway.requests().len(), 4, "no child asked the model");
    assert!(!rig.outline(1).iter().any(|l| l.starts_with("sa-")));
}

#[tokio::test]
async fn a_fleet_starts_each_item_after_its_dependencies_with_their_answers() {
    let rig = Rig::start(
        yolo_unconfined(),
        vec![
            Reply::call(
                "f1",
                "fleet",
                json!({"items": [
                    {"id": "d", "prompt": "[Fd] join", "depends_on": ["b", "c"]},
                    {"id": "b", "prompt": "[Fb] left", "depends_on": ["a"]},
                    {"id": "a", "prompt": "[Fa] root"},
                    {"id": "c", "prompt": "[Fc] right", "depends_on": ["a"], "profile": "explore"},
                ]}),
            ),
            Reply::answer("fleet done"),
        ],
    )
    .await;
    for k in ["a", "b", "c", "d"] {
        rig.gateway.route(
            &format!("[F{k}]"),
            vec![Reply::answer(&format!("answer of {k}"))],
        );
    }
    rig.submit("go");
    assert_eq!(rig.finished(1).await, (TurnOutcome::Completed, None));
    let (err, out) = result_of(&rig, "f1");
    assert!(
        !err && out.starts_with("4 of 4 fleet items completed."),
        "{out}"
    );
    // Item → child, from the journal.
    let events = rig.events();
    let span = |key: &str| -> (u64, u64) {
        let child = events
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::Subagent { child, event, .. } => match event.as_ref() {
                    EventKind::UserTurn { text, .. } if text.contains(key) => Some(child.clone()),
                    _ => None,
                },
                _ => None,
            })
            .unwrap();
        let evs = child_events(&events, &child);
        let end = evs
            .iter()
            .find(|(_, k)| matches!(k, EventKind::TurnFinished { .. }))
            .unwrap()
            .0;
        (evs[0].0, end)
    };
    let (a, b, c, d) = (span("[Fa]"), span("[Fb]"), span("[Fc]"), span("[Fd]"));
    assert!(b.0 > a.1 && c.0 > a.1, "b and c start after a ended");
    assert!(d.0 > b.1 && d.0 > c.1, "d starts after b and c ended");
    let d_prompt = requests_of(&rig, "[Fd]")[0].messages[1].to_string();
    assert!(
        d_prompt.contains("answer of b") && d_prompt.contains("answer of c"),
        "{d_prompt}"
    );
}

#[tokio::test]
async fn a_background_child_is_listed_and_its_result_read_later() {
    let gate = Gate::new();
    let rig = Rig::start(
        yolo_unconfined(),
        vec![
            Reply::call(
                "b1",
                "task",
                json!({"prompt": "[BG] slow work", "description": "slow", "run_in_background": true}),
            ),
            Reply::call("l1", "list_subagents", json!({})),
            Reply::call("r1", "read_subagent_result", json!({"id": "sa-1"})),
            Reply::call("r2", "read_subagent_result", json!({"id": "sa-1", "transcript": true})),
            Reply::call("r3", "read_subagent_result", json!({"id": "sa-9"})),
            Reply::answer("read it"),
        ],
    )
    .await;
    rig.gateway.route(
        "[BG]",
        vec![Reply::new().gate(&gate).text("background answer").done()],
    );
    rig.submit("go");
    rig.wait_for("the listing", |e| {
        matches!(&e.kind, EventKind::ToolFinished { call_id, .. } if call_id == "r1")
            || matches!(&e.kind, EventKind::ToolStarted { call_id, .. } if call_id == "r1")
    })
    .await;
    let (_, started) = result_of(&rig, "b1");
    assert!(
        started.contains("started subagent sa-1 in the background"),
        "{started}"
    );
    let (_, listing) = result_of(&rig, "l1");
    assert!(
        listing.contains("sa-1\trunning\tgeneral") && listing.contains("slow"),
        "{listing}"
    );
    gate.open();
    assert_eq!(rig.finished(1).await, (TurnOutcome::Completed, None));
    let (err, out) = result_of(&rig, "r1");
    assert!(
        !err && out.contains("background answer") && out.contains("completed"),
        "{out}"
    );
    let (_, out) = result_of(&rig, "r2");
    assert!(
        out.contains("[transcript of subagent sa-1") && out.contains("--- user\n[BG] slow work"),
        "{out}"
    );
    let (err, out) = result_of(&rig, "r3");
    assert!(err && out.contains("no subagent \"sa-9\""), "{out}");
}

/// A link drop in the middle of a child's model reply: the step is asked again once a
/// client drives the session, the tool call the child made before the drop ran once.
#[tokio::test]
async fn a_link_drop_in_a_child_repeats_nothing() {
    let rig = Rig::start(
        yolo_unconfined(),
        vec![Reply::call(
            "t1",
            "task",
            json!({"prompt": "[L] count", "description": "count once"}),
        )],
    )
    .await;
    rig.gateway.route(
        "[L]",
        vec![
            Reply::call("k1", "bash", json!({"command": "echo run >> count.txt"})),
            // The gateway's link goes for good mid-reply: no done, the stream just ends.
            Reply::new().text("partial"),
        ],
    );
    rig.submit("go");
    rig.wait_until("the driver to be released", || {
        rig.session.driver_id().is_none()
    })
    .await;
    let gw2 = FakeGateway::new(2, vec![Reply::answer("parent done")]);
    gw2.route("[L]", vec![Reply::answer("counted once")]);
    rig.drive(std::sync::Arc::clone(&gw2), yolo_unconfined());
    assert_eq!(rig.finished(1).await, (TurnOutcome::Completed, None));
    assert_eq!(
        std::fs::read_to_string(rig.workspace().join("count.txt")).unwrap(),
        "run\n",
        "the child's bash ran exactly once"
    );
    let started: Vec<_> = child_events(&rig.events(), "sa-1")
        .into_iter()
        .filter(|(_, k)| matches!(k, EventKind::ToolStarted { .. }))
        .collect();
    assert_eq!(started.len(), 1);
    // The dropped step was asked again on the new gateway, extending the same messages.
    let again: Vec<Value> = gw2
        .requests()
        .into_iter()
        .filter(|r| r.messages[0].to_string().contains("<subagent"))
        .map(|r| Value::Array(r.messages))
        .collect();
    assert_eq!(again.len(), 1);
    let dropped = requests_of(&rig, "[L]").pop().unwrap();
    assert_eq!(
        Value::Array(dropped.messages),
        again[0],
        "the same step, asked again"
    );
    let (_, out) = result_of(&rig, "t1");
    assert!(out.contains("counted once"), "{out}");
}
