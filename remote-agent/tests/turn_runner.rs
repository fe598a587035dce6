//! The turn runner in process: a real session (journal, tools, policy, compaction) driven
//! by a scripted fake gateway (`turn_support`). Model steps, tool calls, approvals, cancel,
//! the step limit, provider errors, steering, link state, compaction and journal replay,
//! each checked on the events the session journals and on the exact requests the model was
//! sent. What crosses processes (the link, the laptop's gateway, the TUI) stays with the
//! end-to-end tests.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod turn_support;

use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;

use reasonix_forward::proto::{
    ApprovalDecision, CompactionKind, CompactionTrigger, ContextSettings, Denied, EventKind,
    RetryPhase, TurnOutcome, TurnState, Usage,
};
use reasonix_remote::session::SessionError;
use serde_json::{json, Value};
use turn_support::{settings, texts, tool_result, yolo_unconfined, FakeGateway, Gate, Reply, Rig};

/// `later` starts with every message of `earlier`, byte for byte (the cache-first rule: a
/// request extends the previous one, so the provider's cached prefix holds).
fn assert_extends(earlier: &[Value], later: &[Value]) {
    let (a, b) = (texts(earlier), texts(later));
    assert!(
        b.len() > a.len() && b[..a.len()] == a[..],
        "the later request does not extend the earlier one byte for byte:\nearlier: {a:#?}\nlater: {b:#?}"
    );
}

fn usage(prompt: u64) -> Usage {
    Usage {
        prompt_tokens: prompt,
        completion_tokens: 7,
        cache_hit_tokens: 0,
        cache_miss_tokens: prompt,
        reasoning_tokens: 0,
    }
}

#[tokio::test]
async fn tool_call_then_answer_extends_each_request_byte_for_byte() {
    let rig = Rig::start(
        settings(),
        vec![
            Reply::new()
                .text("Let me look.")
                .tool("c1", "read_file", json!({"path": "notes.txt"}))
                .usage(usage(2000))
                .done(),
            Reply::answer("It lists alpha and beta."),
            Reply::answer("Still alpha and beta."),
        ],
    )
    .await;
    rig.write("notes.txt", "alpha\nbeta\n");
    rig.submit("what is in notes.txt?");
    assert_eq!(rig.finished(1).await, (TurnOutcome::Completed, None));
    assert_eq!(
        rig.outline(1),
        [
            "user_turn",
            "assistant:calls:c1",
            "usage",
            "tool_started:c1",
            "tool_finished:c1",
            "assistant",
            "turn_finished:completed",
        ]
    );
    assert_eq!(rig.session.state(), TurnState::Idle);

    let reqs = rig.gateway.requests();
    assert_eq!(reqs.len(), 2, "one request per model step");
    let (first, second) = (&reqs[0].messages, &reqs[1].messages);
    assert_eq!(
        first.len(),
        2,
        "system prompt and the user turn: {first:#?}"
    );
    assert_eq!(first[0]["role"], "system");
    assert_eq!(
        first[1],
        json!({"role": "user", "content": "what is in notes.txt?"})
    );
    assert_extends(first, second);
    // What the second step adds: the assistant's call, then its result.
    assert_eq!(second.len(), 4);
    assert_eq!(second[2]["role"], "assistant");
    assert_eq!(second[2]["content"], "Let me look.");
    assert_eq!(second[2]["tool_calls"][0]["id"], "c1");
    assert_eq!(second[2]["tool_calls"][0]["function"]["name"], "read_file");
    let result = tool_result(second, "c1").expect("the read_file result is sent back");
    assert!(
        result.contains("alpha") && result.contains("beta"),
        "{result}"
    );
    // The request is the same prefix each step: model, tools; a fresh stream id each time.
    assert_eq!(reqs[0].model.as_deref(), Some("fake-model"));
    assert_eq!(reqs[0].tools, reqs[1].tools);
    assert!(reqs[0]
        .tools
        .iter()
        .any(|t| t["function"]["name"] == "read_file"));
    assert_ne!(reqs[0].stream_id, reqs[1].stream_id);
    // The base handed to the laptop when the driver attached starts the first request.
    let bases = rig.gateway.bases();
    assert_eq!(bases.len(), 1);
    assert_extends(&bases[0], first);

    // The next turn extends the whole previous conversation too.
    rig.submit("and now?");
    assert_eq!(rig.finished(2).await.0, TurnOutcome::Completed);
    let reqs = rig.gateway.requests();
    assert_eq!(reqs.len(), 3);
    let third = &reqs[2].messages;
    assert_extends(&reqs[1].messages, third);
    assert_eq!(
        third[third.len() - 2],
        json!({"role": "assistant", "content": "It lists alpha and beta."})
    );
    assert_eq!(third[third.len() - 1]["content"], "and now?");
}

#[tokio::test]
async fn write_waits_for_approval_allow_once_runs_it_once_and_deny_reaches_the_model() {
    let rig = Rig::start(
        settings(),
        vec![
            Reply::call(
                "c1",
                "write_file",
                json!({"path": "out.txt", "content": "one"}),
            ),
            Reply::answer("written"),
            Reply::call(
                "c2",
                "write_file",
                json!({"path": "out.txt", "content": "two"}),
            ),
            Reply::answer("not written"),
        ],
    )
    .await;
    let out = rig.workspace().join("out.txt");
    rig.submit("write one");
    let asked = rig
        .wait_for("the approval question", |e| {
            matches!(e.kind, EventKind::ApprovalRequested { .. })
        })
        .await;
    let EventKind::ApprovalRequested {
        approval_id,
        call_id,
        tool,
        ..
    } = asked.kind
    else {
        unreachable!()
    };
    assert_eq!(
        (call_id.as_deref(), tool.as_str()),
        (Some("c1"), "write_file")
    );
    rig.wait_state(TurnState::WaitingForApproval).await;
    // The turn waits: nothing runs and the model is not asked again.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!out.exists(), "the write ran before it was approved");
    assert_eq!(rig.gateway.requests().len(), 1);
    assert_eq!(rig.session.state(), TurnState::WaitingForApproval);

    let answer = rig.request_id();
    assert!(rig
        .session
        .approve(&answer, &approval_id, ApprovalDecision::AllowOnce)
        .await
        .unwrap());
    // The same answer again, and another answer to the same question, change nothing.
    assert!(!rig
        .session
        .approve(&answer, &approval_id, ApprovalDecision::AllowOnce)
        .await
        .unwrap());
    assert!(!rig
        .session
        .approve(&rig.request_id(), &approval_id, ApprovalDecision::Deny)
        .await
        .unwrap());
    assert_eq!(rig.finished(1).await.0, TurnOutcome::Completed);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "one");
    assert_eq!(
        rig.outline(1),
        [
            "user_turn",
            "assistant:calls:c1",
            "approval_requested",
            "approval_answered:AllowOnce",
            "tool_started:c1",
            "tool_finished:c1",
            "assistant",
            "turn_finished:completed",
        ],
        "the approved call ran exactly once"
    );
    assert!(matches!(
        rig.session
            .approve(&rig.request_id(), "ap-unknown", ApprovalDecision::AllowOnce)
            .await,
        Err(SessionError::NoSuchApproval(_))
    ));

    // Allow-once is not remembered: the next write asks again; denied, it never runs.
    rig.submit("write two");
    let asked = rig
        .wait_for("the second approval question", |e| {
            e.turn == 2 && matches!(e.kind, EventKind::ApprovalRequested { .. })
        })
        .await;
    let EventKind::ApprovalRequested { approval_id, .. } = asked.kind else {
        unreachable!()
    };
    assert!(rig
        .session
        .approve(&rig.request_id(), &approval_id, ApprovalDecision::Deny)
        .await
        .unwrap());
    assert_eq!(rig.finished(2).await.0, TurnOutcome::Completed);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "one");
    let denied = rig
        .events()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::ToolFinished {
                call_id,
                is_error,
                denied,
                ..
            } if call_id == "c2" => Some((is_error, denied)),
            _ => None,
        })
        .unwrap();
    assert_eq!(denied, (true, Some(Denied::User)));
    assert!(!rig.outline(2).contains(&"tool_started:c2".to_string()));
    let reqs = rig.gateway.requests();
    assert_eq!(reqs.len(), 4);
    let result = tool_result(&reqs[3].messages, "c2").unwrap();
    assert!(
        result.contains("the user denied this tool call"),
        "{result}"
    );
}

#[tokio::test]
async fn headless_driver_denies_an_ask_without_waiting() {
    let rig = Rig::start(
        settings(),
        vec![
            Reply::call(
                "c1",
                "write_file",
                json!({"path": "out.txt", "content": "x"}),
            ),
            Reply::answer("could not write"),
        ],
    )
    .await;
    rig.gateway.set_headless(true);
    rig.submit("write it");
    assert_eq!(rig.finished(1).await.0, TurnOutcome::Completed);
    assert!(!rig.workspace().join("out.txt").exists());
    let outline = rig.outline(1);
    assert!(
        !outline.contains(&"approval_requested".to_string()),
        "{outline:?}"
    );
    assert!(
        !outline.contains(&"tool_started:c1".to_string()),
        "{outline:?}"
    );
    let denied = rig.events().into_iter().find_map(|e| match e.kind {
        EventKind::ToolFinished { denied, .. } => denied,
        _ => None,
    });
    assert_eq!(denied, Some(Denied::Headless));
    let notice = rig.events().into_iter().find_map(|e| match e.kind {
        EventKind::Notice { text } => Some(text),
        _ => None,
    });
    assert!(
        notice.as_deref().is_some_and(|t| t.contains("headless")),
        "{notice:?}"
    );
    let reqs = rig.gateway.requests();
    assert_eq!(reqs.len(), 2);
    let result = tool_result(&reqs[1].messages, "c1").unwrap();
    assert!(
        result.contains("write_file needs approval") && result.contains("headless"),
        "{result}"
    );
}

#[tokio::test]
async fn step_limit_pauses_the_turn_and_continue_goes_on() {
    let mut s = settings();
    s.max_steps = Some(2);
    let read = || json!({"path": "a.txt"});
    let rig = Rig::start(
        s,
        vec![
            Reply::call("c1", "read_file", read()),
            Reply::call("c2", "read_file", read()),
            Reply::call("c3", "read_file", read()),
            Reply::answer("done reading"),
        ],
    )
    .await;
    rig.write("a.txt", "A\n");
    rig.submit("keep reading");
    let (outcome, detail) = rig.finished(1).await;
    assert_eq!(outcome, TurnOutcome::Paused);
    assert!(
        detail
            .as_deref()
            .is_some_and(|d| d.contains("limit of 2 model steps")),
        "{detail:?}"
    );
    assert_eq!(rig.session.state(), TurnState::Paused);
    assert_eq!(
        rig.gateway.requests().len(),
        2,
        "paused after max_steps requests"
    );
    assert_eq!(rig.gateway.unplayed(), 2);
    // The call of the last step ran before the pause; its result waits for the next step.
    assert!(rig.outline(1).contains(&"tool_finished:c2".to_string()));
    assert!(matches!(
        rig.session.steer(&rig.request_id(), "hurry").await,
        Err(SessionError::NotRunning)
    ));

    let go = rig.request_id();
    assert!(rig.session.continue_turn(&go).unwrap());
    assert!(!rig.session.continue_turn(&go).unwrap(), "deduplicated");
    // A continued turn gets max_steps again: one more call, then the answer.
    assert_eq!(rig.finished_nth(1, 2).await, (TurnOutcome::Completed, None));
    let reqs = rig.gateway.requests();
    assert_eq!(reqs.len(), 4);
    assert_extends(&reqs[1].messages, &reqs[2].messages);
    assert!(tool_result(&reqs[2].messages, "c2").is_some());
    assert_eq!(
        rig.events()
            .iter()
            .filter(|e| matches!(e.kind, EventKind::UserTurn { .. }))
            .count(),
        1,
        "continuing is not a new user turn"
    );
    assert!(matches!(
        rig.session.continue_turn(&rig.request_id()),
        Err(SessionError::NotPaused)
    ));
}

#[tokio::test]
async fn cancel_during_a_stream_stops_it_and_keeps_the_partial_answer() {
    let rig = Rig::start(
        settings(),
        vec![
            Reply::new().text("Partial ans").hang(),
            Reply::answer("fresh start"),
        ],
    )
    .await;
    rig.submit("tell me a long story");
    rig.wait_for(
        "the first delta",
        |e| matches!(&e.kind, EventKind::TextDelta { text } if text == "Partial ans"),
    )
    .await;
    let cancel = rig.request_id();
    assert!(rig.session.cancel(&cancel));
    assert!(!rig.session.cancel(&cancel), "deduplicated");
    assert_eq!(rig.finished(1).await, (TurnOutcome::Cancelled, None));
    assert_eq!(rig.session.state(), TurnState::Idle);
    assert_eq!(
        rig.outline(1),
        ["user_turn", "assistant", "turn_finished:cancelled"]
    );
    let kept = rig.events().into_iter().find_map(|e| match e.kind {
        EventKind::AssistantMessage { content, .. } => Some(content),
        _ => None,
    });
    assert_eq!(kept.as_deref(), Some("Partial ans"));
    // The provider stream was let go of (the laptop is told to stop paying for tokens).
    rig.wait_until("the stream to be abandoned", || {
        rig.gateway.abandoned() == 1
    })
    .await;

    // The next turn's model sees what the user saw.
    rig.submit("shorter please");
    assert_eq!(rig.finished(2).await.0, TurnOutcome::Completed);
    let reqs = rig.gateway.requests();
    assert_eq!(reqs.len(), 2);
    let m = &reqs[1].messages;
    assert_eq!(
        texts(&m[1..]),
        texts(&[
            json!({"role": "user", "content": "tell me a long story"}),
            json!({"role": "assistant", "content": "Partial ans"}),
            json!({"role": "user", "content": "shorter please"}),
        ])
    );
    assert_eq!(
        rig.gateway.abandoned(),
        1,
        "a finished stream is not abandoned"
    );
}

#[tokio::test]
async fn provider_errors_fail_the_turn_and_retryable_ones_are_reissued_three_times() {
    let broke = "the reply broke off: stream stalled for 60 s";
    let mut script = vec![Reply::new().error("HTTP 402: insufficient balance", false)];
    // Three re-issues, then it works.
    script.extend((0..3).map(|_| Reply::new().error(broke, true)));
    script.push(Reply::answer("recovered"));
    // One original and three re-issues, all broken: the turn fails.
    script.extend((0..4).map(|_| Reply::new().error(broke, true)));
    let rig = Rig::start(settings(), script).await;

    rig.submit("one");
    let (outcome, detail) = rig.finished(1).await;
    assert_eq!(outcome, TurnOutcome::Failed);
    assert!(
        detail
            .as_deref()
            .is_some_and(|d| d.contains("HTTP 402: insufficient balance")),
        "{detail:?}"
    );
    assert_eq!(
        rig.gateway.requests().len(),
        1,
        "a non-retryable error is not re-issued"
    );

    rig.submit("two");
    assert_eq!(rig.finished(2).await, (TurnOutcome::Completed, None));
    let reqs = rig.gateway.requests();
    assert_eq!(reqs.len(), 5);
    for r in &reqs[2..5] {
        assert_eq!(
            texts(&r.messages),
            texts(&reqs[1].messages),
            "the same request again"
        );
    }
    // Turn one got no answer: its prompt and the next are sent as one user message, never
    // two in a row (DeepSeek's reasoning models refuse that with a 400).
    assert_eq!(
        texts(&reqs[1].messages[1..]),
        texts(&[json!({"role": "user", "content": "one\n\ntwo"})]),
    );
    let ids: std::collections::HashSet<&str> =
        reqs[1..5].iter().map(|r| r.stream_id.as_str()).collect();
    assert_eq!(ids.len(), 4, "each attempt is its own stream");
    let retries: Vec<(RetryPhase, u32, u32, String)> = rig
        .events()
        .into_iter()
        .filter(|e| e.turn == 2)
        .filter_map(|e| match e.kind {
            EventKind::ProviderRetry(r) => Some((r.phase, r.attempt, r.max_attempts, r.reason)),
            _ => None,
        })
        .collect();
    assert_eq!(retries.len(), 3, "{retries:?}");
    for (n, (phase, attempt, max, reason)) in retries.iter().enumerate() {
        assert_eq!(
            (*phase, *attempt, *max),
            (RetryPhase::Reask, n as u32 + 2, 4)
        );
        assert!(reason.contains(broke), "{reason}");
    }

    rig.submit("three");
    let (outcome, detail) = rig.finished(3).await;
    assert_eq!(outcome, TurnOutcome::Failed);
    assert_eq!(detail.as_deref(), Some(broke));
    assert_eq!(
        rig.gateway.requests().len(),
        9,
        "4 attempts, then it gives up"
    );
    assert_eq!(rig.gateway.unplayed(), 0);
}

#[tokio::test]
async fn bad_tool_calls_reach_the_model_as_errors_in_call_order() {
    let rig = Rig::start(
        settings(),
        vec![
            Reply::new()
                .tool("c1", "no_such_tool", json!({}))
                .raw_tool("c2", "read_file", "{\"path\": \"a.txt\"")
                .tool("c3", "read_file", json!({"path": "a.txt"}))
                .done(),
            Reply::answer("ok"),
        ],
    )
    .await;
    rig.write("a.txt", "contents of a\n");
    rig.submit("try things");
    assert_eq!(rig.finished(1).await.0, TurnOutcome::Completed);
    assert_eq!(
        rig.outline(1),
        [
            "user_turn",
            "assistant:calls:c1,c2,c3",
            "tool_finished:c1:error",
            "tool_finished:c2:error",
            "tool_started:c3",
            "tool_finished:c3",
            "assistant",
            "turn_finished:completed",
        ]
    );
    let reqs = rig.gateway.requests();
    let m = &reqs[1].messages;
    let results: Vec<&str> = m[3..]
        .iter()
        .map(|r| r["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        results,
        ["c1", "c2", "c3"],
        "one result per call, in call order"
    );
    assert!(tool_result(m, "c1")
        .unwrap()
        .contains("unknown tool \"no_such_tool\""));
    assert!(tool_result(m, "c2").unwrap().contains("not valid JSON"));
    assert!(tool_result(m, "c3").unwrap().contains("contents of a"));
}

#[tokio::test]
async fn a_steer_during_a_tool_is_given_to_the_model_after_the_result() {
    // bash blocks reading a fifo until the test writes to it: the steer surely arrives while
    // the tool runs. Unconfined and in yolo mode: no bubblewrap and no approval involved.
    let rig = Rig::start(yolo_unconfined(), Vec::new()).await;
    let fifo = rig.workspace().join("gate.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    rig.gateway.push(Reply::call(
        "c1",
        "bash",
        json!({"command": format!("cat {}", fifo.display())}),
    ));
    rig.gateway.push(Reply::answer("steered"));
    rig.submit("run the check");
    rig.wait_for(
        "bash to start",
        |e| matches!(&e.kind, EventKind::ToolStarted { call_id, .. } if call_id == "c1"),
    )
    .await;
    assert!(rig
        .session
        .steer(&rig.request_id(), "also check the README")
        .await
        .unwrap());
    assert!(matches!(
        rig.session.steer(&rig.request_id(), "  ").await,
        Err(SessionError::EmptySteer)
    ));
    release_fifo(&fifo, "released\n").await;
    assert_eq!(rig.finished(1).await.0, TurnOutcome::Completed);
    assert_eq!(
        rig.outline(1),
        [
            "user_turn",
            "assistant:calls:c1",
            "tool_started:c1",
            "steer",
            "tool_finished:c1",
            "steer_injected",
            "assistant",
            "turn_finished:completed",
        ]
    );
    let reqs = rig.gateway.requests();
    assert_eq!(reqs.len(), 2);
    let m = &reqs[1].messages;
    assert_extends(&reqs[0].messages, m);
    assert!(tool_result(m, "c1").unwrap().contains("released"));
    assert_eq!(m[m.len() - 2]["role"], "tool");
    assert_eq!(
        m[m.len() - 1],
        json!({"role": "user", "content": "also check the README"})
    );
}

/// Write `text` into `fifo` once a reader has it open (non-blocking opens, so a reader that
/// never comes fails the test instead of hanging it).
async fn release_fifo(fifo: &std::path::Path, text: &str) {
    use std::io::Write;
    let deadline = std::time::Instant::now() + turn_support::PATIENCE;
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
        {
            Ok(mut f) => {
                f.write_all(text.as_bytes()).unwrap();
                return;
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "nobody reads {fifo:?}"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("open {fifo:?}: {e}"),
        }
    }
}

#[tokio::test]
async fn link_down_shows_waiting_and_a_cut_stream_is_reissued_through_the_next_driver() {
    let gate = Gate::new();
    let rig = Rig::start(
        settings(),
        vec![
            Reply::new().text("Hel").gate(&gate).text("lo").done(),
            // Ends without `done`: the gateway's link is gone for good.
            Reply::new().text("lost"),
        ],
    )
    .await;
    rig.submit("hi");
    rig.wait_for("the first delta", |e| {
        matches!(e.kind, EventKind::TextDelta { .. })
    })
    .await;
    assert_eq!(rig.session.state(), TurnState::Running);
    rig.gateway.set_link(false);
    rig.wait_state(TurnState::WaitingForLaptop).await;
    rig.gateway.set_link(true);
    rig.wait_state(TurnState::Running).await;
    gate.open();
    assert_eq!(rig.finished(1).await.0, TurnOutcome::Completed);
    let answer = rig.events().into_iter().find_map(|e| match e.kind {
        EventKind::AssistantMessage { content, .. } => Some(content),
        _ => None,
    });
    assert_eq!(answer.as_deref(), Some("Hello"));

    rig.submit("again");
    rig.wait_for(
        "the disconnect notice",
        |e| matches!(&e.kind, EventKind::Notice { text } if text.contains("laptop disconnected")),
    )
    .await;
    rig.wait_state(TurnState::WaitingForLaptop).await;
    assert_eq!(rig.session.driver_id(), None, "the gone driver is released");
    let next = FakeGateway::new(2, vec![Reply::answer("here again")]);
    rig.drive(std::sync::Arc::clone(&next), settings());
    assert_eq!(rig.finished(2).await.0, TurnOutcome::Completed);
    assert_eq!(rig.session.driver_id(), Some(2));
    let cut = rig.gateway.requests().swap_remove(1);
    let reissued = next.requests().swap_remove(0);
    assert_eq!(texts(&reissued.messages), texts(&cut.messages));
    assert_ne!(reissued.stream_id, cut.stream_id);
    let answers: Vec<String> = rig
        .events()
        .into_iter()
        .filter(|e| e.turn == 2)
        .filter_map(|e| match e.kind {
            EventKind::AssistantMessage { content, .. } => Some(content),
            _ => None,
        })
        .collect();
    assert_eq!(answers, ["here again"], "nothing of the cut stream is kept");
}

#[tokio::test]
async fn a_large_old_result_is_snipped_at_the_turn_start_that_crosses_the_snip_ratio() {
    let rig = Rig::start(settings(), Vec::new()).await;
    // Size the window from the real prefix: the system prompt and tool schemas (`base`)
    // plus a result of about half that reach 70 % of it; the prefix alone stays well under
    // the snip ratio (60 %) and nothing reaches the force ratio (90 %) mid-turn.
    let report = rig.session.context_report();
    let base = report.system_tokens + report.instructions_tokens + report.tools_tokens;
    let window = (base + base / 2) * 10 / 7;
    let mut s = settings();
    s.context = ContextSettings {
        window,
        tail_tokens: 64,
        ..ContextSettings::default()
    };
    let line = "x".repeat(63);
    let lines = (base * 2 / 64) as usize * 9 / 10;
    rig.write("big.txt", &format!("{line}\n").repeat(lines));
    // Longer than the tail: the recent tail at the next turn starts after the big result.
    let long_answer = "The file holds many identical lines. ".repeat(12);
    rig.gateway
        .push(Reply::call("c1", "read_file", json!({"path": "big.txt"})));
    rig.gateway.push(Reply::answer(&long_answer));
    rig.gateway.push(Reply::answer("short answer"));
    rig.drive(std::sync::Arc::clone(&rig.gateway), s);

    rig.submit("read big.txt");
    assert_eq!(rig.finished(1).await.0, TurnOutcome::Completed);
    assert!(
        !rig.outline(1).iter().any(|k| k.starts_with("compacted")),
        "no request of turn 1 crossed a ratio: {:?}",
        rig.outline(1)
    );
    let reqs = rig.gateway.requests();
    let original = tool_result(&reqs[1].messages, "c1").unwrap().to_string();
    assert!(
        original.contains(&line),
        "the model saw the full result first"
    );
    let total = rig.session.context_report().total();
    assert!(
        total >= window * 6 / 10 && total < window * 8 / 10,
        "test arithmetic: {total} tokens should be between the snip and compact ratios of {window}"
    );

    rig.submit("anything else?");
    assert_eq!(rig.finished(2).await.0, TurnOutcome::Completed);
    assert_eq!(
        rig.outline(2),
        [
            "user_turn",
            "compacted:Snip",
            "assistant",
            "turn_finished:completed"
        ]
    );
    let compacted = rig
        .events()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::Compacted {
                kind,
                trigger,
                tokens_before,
                tokens_after,
                snipped,
                ..
            } => Some((kind, trigger, tokens_before, tokens_after, snipped)),
            _ => None,
        })
        .unwrap();
    let (kind, trigger, before, after, snipped) = compacted;
    assert_eq!(
        (kind, trigger),
        (CompactionKind::Snip, CompactionTrigger::Threshold)
    );
    assert!(
        before >= window * 6 / 10,
        "{before} < the snip ratio of {window}"
    );
    assert!(
        after < window * 6 / 10,
        "{after}: the snip brought it under the ratio"
    );
    assert_eq!(snipped.len(), 1);
    assert_eq!(snipped[0].call_id, "c1");

    let reqs = rig.gateway.requests();
    assert_eq!(reqs.len(), 3, "a snip needs no model call");
    let m = &reqs[2].messages;
    let placeholder = tool_result(m, "c1").unwrap();
    assert!(
        placeholder.starts_with(reasonix_remote::compaction::SNIP_MARK)
            && placeholder.contains(&snipped[0].archive_id),
        "{placeholder}"
    );
    // Everything else of the conversation is sent as before.
    assert_eq!(m[m.len() - 2]["content"], long_answer.as_str());
    assert_eq!(m[m.len() - 1]["content"], "anything else?");
    // The original is in the session's archive under the id the placeholder names.
    let archive = reasonix_remote::compaction::archive::archive_path(&rig.paths.sessions_dir, "s1");
    let records = reasonix_remote::compaction::archive::read_all(&archive).unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].id, snipped[0].archive_id);
    assert_eq!(records[0].message["content"], original.as_str());
}

#[tokio::test]
async fn a_session_loaded_from_its_journal_sends_the_same_bytes_as_the_live_one() {
    // A restarted daemon rebuilds the conversation from the journal; its next request must be
    // byte for byte what the live session would send, or the provider's cache is lost (and
    // the model sees a different history). Steers, a stored-by-reference tool output, a
    // cancelled partial answer and a re-issued broken reply each journal differently.
    let rig = Rig::start(yolo_unconfined(), Vec::new()).await;
    let fifo = rig.workspace().join("gate.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let line = "y".repeat(59);
    rig.write("big.txt", &format!("{line}\n").repeat(1900));
    let g = &rig.gateway;
    g.push(Reply::call(
        "c1",
        "bash",
        json!({"command": format!("cat {}", fifo.display())}),
    ));
    g.push(Reply::answer("one"));
    g.push(Reply::call("c2", "read_file", json!({"path": "big.txt"})));
    g.push(Reply::answer("two"));
    g.push(Reply::new().text("Partial").hang());
    g.push(Reply::new().text("broken").error("stream stalled", true));
    g.push(Reply::answer("four"));
    g.push(Reply::answer("five"));

    rig.submit("first");
    rig.wait_for("bash to start", |e| {
        matches!(e.kind, EventKind::ToolStarted { .. })
    })
    .await;
    assert!(rig
        .session
        .steer(&rig.request_id(), "steer text")
        .await
        .unwrap());
    release_fifo(&fifo, "out\n").await;
    assert_eq!(rig.finished(1).await.0, TurnOutcome::Completed);
    rig.submit("second");
    assert_eq!(rig.finished(2).await.0, TurnOutcome::Completed);
    let by_ref = rig.events().into_iter().any(|e| {
        matches!(e.kind, EventKind::ToolFinished { call_id, output_ref: Some(_), .. } if call_id == "c2")
    });
    assert!(by_ref, "the big output is stored by reference");
    rig.submit("third");
    rig.wait_for("the partial answer", |e| {
        matches!(e.kind, EventKind::TextDelta { .. }) && e.turn == 3
    })
    .await;
    assert!(rig.session.cancel(&rig.request_id()));
    assert_eq!(rig.finished(3).await.0, TurnOutcome::Cancelled);
    rig.submit("fourth");
    assert_eq!(rig.finished(4).await.0, TurnOutcome::Completed);

    let (copy, copy_gateway) = rig
        .load_copy("s1-copy", yolo_unconfined(), vec![Reply::answer("five")])
        .await;
    assert!(copy.submit("copy-req", "fifth").unwrap());
    rig.submit("fifth");
    assert_eq!(rig.finished(5).await.0, TurnOutcome::Completed);
    copy_gateway.wait_requests(1).await;
    let live = rig.gateway.requests().pop().unwrap();
    let loaded = copy_gateway.requests().pop().unwrap();
    assert_eq!(texts(&loaded.messages), texts(&live.messages));
    assert_eq!(loaded.tools, live.tools);
    // And the history really holds all of it.
    let m = &live.messages;
    assert!(m.iter().any(|m| m["content"] == "steer text"));
    assert!(m.iter().any(|m| m["content"] == "Partial"));
    assert!(!m.iter().any(|m| m["content"] == "broken"));
}

#[tokio::test]
async fn cancel_while_an_approval_waits_or_a_tool_runs_ends_the_turn_cleanly() {
    let rig = Rig::start(
        settings(),
        vec![Reply::call(
            "c1",
            "write_file",
            json!({"path": "out.txt", "content": "x"}),
        )],
    )
    .await;
    rig.submit("write");
    let asked = rig
        .wait_for("the approval question", |e| {
            matches!(e.kind, EventKind::ApprovalRequested { .. })
        })
        .await;
    let EventKind::ApprovalRequested { approval_id, .. } = asked.kind else {
        unreachable!()
    };
    assert!(rig.session.cancel(&rig.request_id()));
    assert_eq!(rig.finished(1).await, (TurnOutcome::Cancelled, None));
    assert_eq!(rig.session.state(), TurnState::Idle);
    let denied = rig.events().into_iter().find_map(|e| match e.kind {
        EventKind::ToolFinished { denied, .. } => denied,
        _ => None,
    });
    assert_eq!(denied, Some(Denied::Cancelled));
    assert!(!rig.workspace().join("out.txt").exists());
    assert!(matches!(
        rig.session
            .approve(&rig.request_id(), &approval_id, ApprovalDecision::AllowOnce)
            .await,
        Err(SessionError::NoSuchApproval(_))
    ));

    // A running tool is stopped: `cat` waits on a fifo nobody writes, and the cancel kills
    // it (its pid is written first; `exec` makes the shell the `cat`).
    let fifo = rig.workspace().join("never.fifo");
    let pid_file = rig.workspace().join("cat.pid");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let command = format!(
        "echo $$ > {}; exec cat {}",
        pid_file.display(),
        fifo.display()
    );
    rig.gateway
        .push(Reply::call("c2", "bash", json!({ "command": command })));
    rig.gateway.push(Reply::answer("after"));
    rig.drive(std::sync::Arc::clone(&rig.gateway), yolo_unconfined());
    rig.submit("wait forever");
    rig.wait_for(
        "bash to start",
        |e| matches!(&e.kind, EventKind::ToolStarted { call_id, .. } if call_id == "c2"),
    )
    .await;
    rig.wait_until("the pid file", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|p| p.ends_with('\n'))
    })
    .await;
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_string();
    assert!(alive(&pid), "cat {pid} runs until the cancel");
    assert!(rig.session.cancel(&rig.request_id()));
    assert_eq!(rig.finished(2).await, (TurnOutcome::Cancelled, None));
    let output = rig.events().into_iter().find_map(|e| match e.kind {
        EventKind::ToolFinished {
            call_id,
            is_error: true,
            output,
            ..
        } if call_id == "c2" => Some(output),
        _ => None,
    });
    assert_eq!(
        output.as_deref(),
        Some("cancelled by the user while running")
    );
    rig.wait_until("cat to be killed", || !alive(&pid)).await;

    // Every call of the cancelled turns has its result: the next request is well formed.
    rig.submit("go on");
    assert_eq!(rig.finished(3).await.0, TurnOutcome::Completed);
    let reqs = rig.gateway.requests();
    let m = &reqs.last().unwrap().messages;
    assert!(tool_result(m, "c1")
        .unwrap()
        .contains("cancelled before approval"));
    assert!(tool_result(m, "c2")
        .unwrap()
        .contains("cancelled by the user while running"));
}

/// Whether process `pid` exists and is not a zombie.
fn alive(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}
