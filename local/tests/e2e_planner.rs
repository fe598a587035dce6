//! The planner beside the executor end to end (issue 38 §2), headless: the real `reasonix`
//! → the real `reasonix-remote` over pipes → the SSE mock provider with its prompt cache,
//! two models of one provider configured (`default_model` executes, `[agent] planner_model`
//! plans). The mock's log shows the planner's request, then the executor's with the handoff;
//! each model's second request extends its first byte for byte and hits that model's cache;
//! `--json` shows the route. A planner model that is unknown or has no key is refused at
//! start-up, naming it, before anything reaches the provider.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;

use std::process::Command;

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall, RecordedRequest};
use serde_json::Value;

use common::{json_lines, LocalRig as Env};

fn setup(base_url: &str, planner_model: &str) -> Env {
    let config = format!(
        "default_model = \"mock/exec\"\n\
         [agent]\nplanner_model = \"{planner_model}\"\n\
         [[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{base_url}\"\nmodels = [\"exec\", \"plan\"]\ndefault = \"exec\"\napi_key_env = \"RX_PLANNER_KEY\"\n\
         [[providers]]\nname = \"keyless\"\nkind = \"openai\"\nbase_url = \"{base_url}\"\nmodels = [\"k\"]\napi_key_env = \"RX_PLANNER_NO_SUCH_KEY\"\n"
    );
    let env = Env::with_config(&config, "RX_PLANNER_KEY", "sk-planner");
    std::fs::write(env.ws.join("README.md"), "the project\n").expect("readme");
    env
}

fn command(env: &Env, args: &[&str]) -> Command {
    let mut c = common::headless(env, args, 1);
    c.env_remove("RX_PLANNER_NO_SUCH_KEY");
    c
}

fn plan(goal: &str) -> String {
    format!(
        "## Goal\n{goal}\n\n## Steps\n1. Edit README.md\n2. Check it\n\n## Touch points\n- README.md: the text\n\n## Verification\n- cat README.md\n"
    )
}

fn model(r: &RecordedRequest) -> String {
    r.body["model"].as_str().unwrap_or("").to_string()
}

/// `b`'s messages start with all of `a`'s, byte for byte, and the tools are the same.
fn assert_extends(a: &RecordedRequest, b: &RecordedRequest, who: &str) {
    let (ma, mb) = (a.messages(), b.messages());
    assert!(mb.len() > ma.len(), "{who}: {ma:#?}\n{mb:#?}");
    for (i, m) in ma.iter().enumerate() {
        assert_eq!(
            serde_json::to_string(m).unwrap(),
            serde_json::to_string(&mb[i]).unwrap(),
            "{who}: message {i} changed"
        );
    }
    assert_eq!(a.body["tools"], b.body["tools"], "{who}: the tools changed");
}

fn last_user(r: &RecordedRequest) -> String {
    r.messages()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_planner_plans_the_executor_executes_each_on_its_own_cached_prefix() {
    let mock = MockProvider::start(vec![
        MockReply::text(&[plan("Say hello in the README.")]).with_model("plan"),
        MockReply::text(&["done: hello"]).with_model("exec"),
        MockReply::text(&[plan("Say goodbye in the README.")]).with_model("plan"),
        MockReply::text(&["done: goodbye"]).with_model("exec"),
    ])
    .await;
    mock.enable_prompt_cache(None);
    let env = setup(&mock.base_url(), "mock/plan");

    let out = command(
        &env,
        &["run", "--json", "add a hello section to the readme file"],
    )
    .output()
    .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let route = json_lines(&out.stdout)
        .into_iter()
        .find(|v| v["type"] == "route")
        .unwrap_or_else(|| panic!("no route record: {stdout}"));
    assert_eq!(route["route"], "plan");
    assert_eq!(route["depth"], "light");
    assert_eq!(route["reason"], "bounded_work");
    assert!(
        !route.to_string().contains("hello section"),
        "the route never carries the user's text"
    );
    assert!(json_lines(&out.stdout)
        .iter()
        .any(|v| v["type"] == "handoff" && v["model"] == "mock/plan"));

    let out = command(
        &env,
        &[
            "run",
            "--continue",
            "--json",
            "add a goodbye section to the readme file",
        ],
    )
    .output()
    .expect("run --continue");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let reqs = mock.requests();
    let models: Vec<String> = reqs.iter().map(model).collect();
    assert_eq!(
        models,
        ["plan", "exec", "plan", "exec"],
        "planner first, then executor"
    );
    // The executor's request carries the task and the planner's handoff.
    let handed = last_user(&reqs[1]);
    assert!(
        handed.starts_with("add a hello section") && handed.contains("[planner handoff]"),
        "{handed}"
    );
    assert!(
        handed.contains("## Steps\n1. Edit README.md\n2. Check it\n"),
        "{handed}"
    );
    assert!(!last_user(&reqs[0]).contains("[planner handoff]"));
    // The executor's second request extends its first, whether or not the daemon exited
    // between the runs (its conversation is rebuilt from the journal, handoff included); the
    // planner's prefix (system prompt and tools) is the same (its messages live in the
    // daemon's memory, so they are checked in bench_planner_cache_share and planner_turns).
    assert_extends(&reqs[1], &reqs[3], "executor");
    let (p0, p2) = (reqs[0].messages(), reqs[2].messages());
    assert_eq!(p0[0], p2[0], "the planner's system prompt is stable");
    assert_eq!(reqs[0].body["tools"], reqs[2].body["tools"]);
    assert_ne!(
        reqs[0].body["tools"], reqs[1].body["tools"],
        "the planner has fewer tools"
    );
    // The cache: each model's second request hits its own cache for its prefix.
    let acc = mock.prompt_accounting();
    assert_eq!(acc.len(), 4);
    for (first, second, who) in [(0, 2, "planner"), (1, 3, "executor")] {
        assert!(
            acc[second].hit_tokens > 0 && acc[second].hit_tokens >= acc[first].prompt_tokens / 2,
            "{who}: {:?} then {:?}",
            acc[first],
            acc[second]
        );
    }
}

/// The daemon's pid from its marker in the sessions directory.
fn daemon_pid(env: &Env) -> Option<i32> {
    for e in std::fs::read_dir(env.home.join("sessions")).ok()?.flatten() {
        if let Ok(b) = std::fs::read(e.path().join("daemon.json")) {
            let v: Value = serde_json::from_slice(&b).ok()?;
            return v["pid"].as_i64().map(|p| p as i32);
        }
    }
    None
}

/// True while `pid` runs (a zombie waiting for its reaper counts as gone).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let state = s.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        })
        .unwrap_or(false)
}

/// Every journal line of the session, as JSON.
fn journal_lines(env: &Env) -> Vec<Value> {
    let mut lines = Vec::new();
    let mut stack = vec![env.home.join("sessions")];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
        } else if p.extension().is_some_and(|e| e == "jsonl") {
            lines.extend(json_lines(&std::fs::read(&p).unwrap()));
        }
    }
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_planners_conversation_survives_a_daemon_restart_byte_for_byte() {
    // Turn 1: the planner reads README.md, then plans; the executor does it. The daemon is
    // killed. Turn 2 (a new daemon): the planner's request extends its last one byte for
    // byte (its conversation rebuilt from the journal) and hits its cache; nothing of turn
    // 1 is planned or run again.
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_read",
                "read_file",
                &serde_json::json!({"path": "README.md"}).to_string(),
            )],
            3,
        )
        .with_model("plan"),
        MockReply::text(&[plan("Say hello in the README.")]).with_model("plan"),
        MockReply::text(&["done: hello"]).with_model("exec"),
        MockReply::text(&[plan("Say goodbye in the README.")]).with_model("plan"),
        MockReply::text(&["done: goodbye"]).with_model("exec"),
    ])
    .await;
    mock.enable_prompt_cache(None);
    let env = setup(&mock.base_url(), "mock/plan");
    let run = |args: &[&str]| {
        let out = command(&env, args)
            .env("REASONIX_IDLE_TIMEOUT_SECS", "60")
            .output()
            .expect("run");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&["run", "--json", "add a hello section to the readme file"]);
    let pid = daemon_pid(&env).expect("daemon pid");
    assert!(
        alive(pid),
        "the daemon outlives the client (idle timeout 60 s)"
    );
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while alive(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "daemon {pid} still runs"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    run(&[
        "run",
        "--continue",
        "--json",
        "add a goodbye section to the readme file",
    ]);
    let new_pid = daemon_pid(&env).expect("daemon pid");
    assert_ne!(new_pid, pid, "a new daemon served the second turn");

    let reqs = mock.requests();
    let models: Vec<String> = reqs.iter().map(model).collect();
    assert_eq!(
        models,
        ["plan", "plan", "exec", "plan", "exec"],
        "one planner step per reply, nothing planned twice"
    );
    // The planner's turn-2 request is its turn-1 request, the tool result, its plan and
    // the new task: its last request extended byte for byte, across the restart.
    assert_extends(&reqs[0], &reqs[1], "planner within turn 1");
    assert_extends(&reqs[1], &reqs[3], "planner across the restart");
    let p3 = reqs[3].messages();
    assert_eq!(
        p3[reqs[1].messages().len()]["role"],
        "assistant",
        "the planner's plan of turn 1 is in its conversation"
    );
    assert!(last_user(&reqs[3]).contains("add a goodbye section"));
    assert_extends(&reqs[2], &reqs[4], "executor across the restart");
    // Its cache keeps hitting: at least the whole previous request.
    let acc = mock.prompt_accounting();
    assert!(
        acc[3].hit_tokens >= acc[1].prompt_tokens / 2,
        "planner: {:?} then {:?}",
        acc[1],
        acc[3]
    );
    // The journal holds the planner's conversation apart from the executor's: its read
    // ran once, and the executor's messages never carry the planner's.
    let journal = journal_lines(&env);
    let planner_reads = journal
        .iter()
        .filter(|l| {
            l["type"] == "planner"
                && l["event"]["type"] == "tool_finished"
                && l["event"]["call_id"] == "call_read"
        })
        .count();
    assert_eq!(planner_reads, 1, "the planner's read ran once");
    for r in [&reqs[2], &reqs[4]] {
        assert!(
            !serde_json::to_string(&r.messages())
                .unwrap()
                .contains("call_read"),
            "the executor never sees the planner's calls"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planner_request_cut_by_a_daemon_kill_leaves_the_turn_interrupted_and_nothing_run_twice()
{
    // Turn 1: the planner reads README.md, then its second request is held in flight by the
    // mock (it streams the start of a plan and goes silent) and the daemon is SIGKILLed.
    // The client reconnects to a new daemon and reports the turn interrupted. Turn 2: the
    // planner's request extends the last request it made (the one cut) byte for byte and
    // hits its cache; the executor never ran for turn 1's plan, which was never handed
    // over; the planner's read ran once.
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_read",
                "read_file",
                &serde_json::json!({"path": "README.md"}).to_string(),
            )],
            3,
        )
        .with_model("plan"),
        MockReply::Hang {
            chunks: vec!["## Goal\nSay hello".into()],
        }
        .with_model("plan"),
        MockReply::text(&[plan("Say goodbye in the README.")]).with_model("plan"),
        MockReply::text(&["done: goodbye"]).with_model("exec"),
    ])
    .await;
    mock.enable_prompt_cache(None);
    let env = setup(&mock.base_url(), "mock/plan");
    let first = command(
        &env,
        &["run", "--json", "add a hello section to the readme file"],
    )
    .env("REASONIX_IDLE_TIMEOUT_SECS", "60")
    .spawn()
    .expect("run");
    let first = std::thread::spawn(move || first.wait_with_output().expect("wait"));
    // The planner's second request is in flight: kill the daemon hard.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while mock.request_count() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the planner's second request never came: {:?}",
            mock.requests().iter().map(model).collect::<Vec<_>>()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let pid = daemon_pid(&env).expect("daemon pid");
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let first = first.join().expect("join");
    let first_out = String::from_utf8_lossy(&first.stdout).to_string();
    assert!(
        !first.status.success(),
        "an interrupted turn is not a success:\n{first_out}\n{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(
        json_lines(&first.stdout)
            .iter()
            .any(|v| v["type"] == "turn_finished" && v["outcome"] == "interrupted"),
        "{first_out}"
    );
    assert_eq!(mock.request_count(), 2, "nothing was asked again");

    let out = command(
        &env,
        &[
            "run",
            "--continue",
            "--json",
            "add a goodbye section to the readme file",
        ],
    )
    .env("REASONIX_IDLE_TIMEOUT_SECS", "5")
    .output()
    .expect("run --continue");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let new_pid = daemon_pid(&env).expect("daemon pid");
    assert_ne!(new_pid, pid, "a new daemon served the second turn");

    let reqs = mock.requests();
    let models: Vec<String> = reqs.iter().map(model).collect();
    assert_eq!(
        models,
        ["plan", "plan", "plan", "exec"],
        "the cut request was not re-issued; the executor ran only for turn 2"
    );
    // The planner's turn-2 request extends the request that was cut, byte for byte: the
    // half-streamed plan is in neither (its deltas are not the planner's conversation).
    assert_extends(&reqs[0], &reqs[1], "planner within turn 1");
    assert_extends(&reqs[1], &reqs[2], "planner across the kill");
    let p2 = reqs[2].messages();
    assert_eq!(p2.len(), reqs[1].messages().len() + 1, "only the new task");
    assert!(last_user(&reqs[2]).contains("add a goodbye section"));
    assert!(!serde_json::to_string(&p2).unwrap().contains("Say hello"));
    let acc = mock.prompt_accounting();
    assert!(
        acc[2].hit_tokens >= acc[1].prompt_tokens / 2,
        "planner: {:?} then {:?}",
        acc[1],
        acc[2]
    );
    // The executor's only request carries turn 2's handoff and no handoff of turn 1.
    let exec = serde_json::to_string(&reqs[3].messages()).unwrap();
    assert_eq!(exec.matches("[planner handoff]").count(), 1, "{exec}");
    assert!(exec.contains("Say goodbye in the README."), "{exec}");

    // The journal: turn 1 is interrupted, with no handoff and no executor step or tool
    // call; the planner's read started and finished once.
    let journal = journal_lines(&env);
    let turn1: Vec<&Value> = journal.iter().filter(|l| l["turn"] == 1).collect();
    assert!(
        turn1
            .iter()
            .any(|l| l["type"] == "turn_finished" && l["outcome"] == "interrupted"),
        "{turn1:#?}"
    );
    for l in &turn1 {
        assert!(
            !matches!(
                l["type"].as_str(),
                Some("assistant_message" | "tool_started" | "tool_finished")
            ),
            "the executor did nothing in turn 1: {l}"
        );
        assert!(
            !(l["type"] == "plan" && l["event"] == "handoff"),
            "no handoff in turn 1: {l}"
        );
    }
    for ty in ["tool_started", "tool_finished"] {
        let n = journal
            .iter()
            .filter(|l| {
                l["type"] == "planner"
                    && l["event"]["type"] == ty
                    && l["event"]["call_id"] == "call_read"
            })
            .count();
        assert_eq!(n, 1, "the planner's read: one {ty}");
    }
    assert!(
        !journal.iter().any(|l| l["type"] == "planner"
            && l["event"]["type"] == "assistant_message"
            && l["event"]["content"]
                .as_str()
                .is_some_and(|c| c.contains("Say hello"))),
        "the cut answer was not journaled"
    );
}

/// A library client of `env`'s workspace, opening a session driven with the planner set
/// and `hooks` (the user's), in `yolo`.
async fn open_client(
    env: &Env,
    new: bool,
    hooks: reasonix_forward::hooks::HookSettings,
) -> (
    reasonix_local::client::Client,
    tokio::sync::mpsc::UnboundedReceiver<reasonix_local::client::ClientEvent>,
) {
    use reasonix_forward::policy::{PermissionMode, SessionPolicy};
    use reasonix_forward::proto::{OpenSession, Request, Response, SessionSettings};
    let config = env.config();
    let (client, events) = env.client(&config);
    let opened = client
        .request(Request::OpenSession(OpenSession {
            new,
            settings: SessionSettings {
                model: Some("mock/exec".into()),
                planner_model: Some("mock/plan".into()),
                policy: SessionPolicy {
                    mode: PermissionMode::Yolo,
                    ..Default::default()
                },
                headless: false,
                ..SessionSettings::default()
            },
            hooks,
            ..OpenSession::default()
        }))
        .await
        .expect("open");
    assert!(matches!(opened, Response::SessionOpened(_)), "{opened:?}");
    (client, events)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_and_the_hooks_reach_the_planner_through_the_daemon() {
    use reasonix_forward::hooks::{HookDecl, HookSettings};
    use reasonix_forward::proto::{EventKind, Request, Response};
    use reasonix_local::client::ClientEvent;
    // The user's PreToolUse hook on `read_file` holds the planner's call until the test
    // creates `go`, and records its stdin: the steer is sent while the planner certainly
    // works, before its next step.
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_read",
                "read_file",
                &serde_json::json!({"path": "README.md"}).to_string(),
            )],
            3,
        )
        .with_model("plan"),
        MockReply::text(&[plan("Say hello in the README, with tabs.")]).with_model("plan"),
        MockReply::text(&["done: hello"]).with_model("exec"),
        MockReply::text(&[plan("Say goodbye in the README.")]).with_model("plan"),
        MockReply::text(&["done: goodbye"]).with_model("exec"),
    ])
    .await;
    let env = setup(&mock.base_url(), "mock/plan");
    let hooks = HookSettings {
        user: vec![HookDecl {
            event: "PreToolUse".into(),
            matcher: Some("read_file".into()),
            command: "while [ ! -e go ]; do sleep 0.05; done; cat >> hook-pre.jsonl; echo >> hook-pre.jsonl".into(),
            timeout_ms: Some(60_000),
            fail: None,
            run_on: None,
        }],
        trusted: Vec::new(),
    };
    let (client, mut events) = open_client(&env, true, hooks.clone()).await;
    assert_eq!(
        client
            .submit_turn("t1", "add a hello section to the readme file")
            .await
            .expect("submit"),
        Response::Ok
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while mock.request_count() < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the planner never asked"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        client
            .request(Request::Steer {
                request_id: "s1".into(),
                text: "use tabs, not spaces".into(),
            })
            .await
            .expect("steer"),
        Response::Ok
    );
    std::fs::write(env.ws.join("go"), "").expect("open the gate");
    let mut planner_took_it = false;
    loop {
        let ev = tokio::time::timeout(std::time::Duration::from_secs(60), events.recv())
            .await
            .expect("an event within 60 s")
            .expect("client alive");
        if let ClientEvent::Event(e) = ev {
            match e.kind {
                EventKind::Planner { event } => {
                    planner_took_it |= matches!(*event, EventKind::SteerInjected { ref request_ids, .. } if request_ids == &["s1".to_string()]);
                }
                EventKind::SteerInjected { .. } => panic!("the steer was the planner's"),
                EventKind::TurnFinished { .. } => break,
                _ => {}
            }
        }
    }
    assert!(planner_took_it, "the client saw the planner take the steer");
    let reqs = mock.requests();
    let models: Vec<String> = reqs.iter().map(model).collect();
    assert_eq!(models, ["plan", "plan", "exec"]);
    // The planner's next step had the steer, after its tool result; the executor got it in
    // the handoff.
    assert_extends(&reqs[0], &reqs[1], "planner");
    let p1 = reqs[1].messages();
    assert_eq!(p1[p1.len() - 2]["role"], "tool");
    assert_eq!(p1[p1.len() - 1]["content"], "use tabs, not spaces");
    let handed = last_user(&reqs[2]);
    assert!(
        handed.contains("[planner handoff]")
            && handed.contains("while the planner worked")
            && handed.ends_with("\nuse tabs, not spaces\n"),
        "{handed}"
    );
    // The hook saw the planner's call, named.
    let pre = std::fs::read_to_string(env.ws.join("hook-pre.jsonl")).expect("hook ran");
    let pre: Vec<Value> = json_lines(pre.as_bytes());
    assert_eq!(pre.len(), 1, "{pre:?}");
    assert_eq!(pre[0]["agent"], "planner");
    assert_eq!(pre[0]["tool_name"], "read_file");
    assert_eq!(pre[0]["tool_input"]["path"], "README.md");
    drop(client);

    // A new daemon: the planner's conversation is rebuilt with the steer where it was.
    let pid = daemon_pid(&env).expect("daemon pid");
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    while alive(pid) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (client, mut events) = open_client(&env, false, HookSettings::default()).await;
    client
        .submit_turn("t2", "add a goodbye section to the readme file")
        .await
        .expect("submit 2");
    loop {
        let ev = tokio::time::timeout(std::time::Duration::from_secs(60), events.recv())
            .await
            .expect("an event within 60 s")
            .expect("client alive");
        if let ClientEvent::Event(e) = ev {
            if e.turn == 2 && matches!(e.kind, EventKind::TurnFinished { .. }) {
                break;
            }
        }
    }
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 5);
    assert_extends(&reqs[1], &reqs[3], "planner across the restart");
    assert_extends(&reqs[2], &reqs[4], "executor across the restart");
    drop(client);
    if let Some(pid) = daemon_pid(&env) {
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_or_keyless_planner_model_is_refused_at_start_up_naming_it() {
    let mock = MockProvider::start(vec![]).await;
    for (label, says) in [
        ("nosuch/m", "nosuch"),
        ("keyless/k", "RX_PLANNER_NO_SUCH_KEY"),
    ] {
        let env = setup(&mock.base_url(), label);
        let out = command(&env, &["run", "just answer: hi"])
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert_ne!(out.status.code(), Some(0), "{label}: {stderr}");
        assert!(
            stderr.contains(&format!("[agent] planner_model `{label}`")) && stderr.contains(says),
            "{label}: {stderr}"
        );
    }
    assert_eq!(mock.request_count(), 0, "nothing reached the provider");
}

/// `bench/planner_cache.sh`: a two-model session of `BENCH_TURNS` turns (default 50; even
/// turns planned, odd ones direct questions), one `reasonix run --continue` per turn through
/// the caching mock. Checks each model's requests extend its own previous request byte for
/// byte and prints the share of prompt tokens served from cache per model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: bench/planner_cache.sh"]
async fn bench_planner_cache_share() {
    let turns: usize = std::env::var("BENCH_TURNS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(50);
    let mock = MockProvider::start_with(|r| {
        if r.body["model"] == "plan" {
            MockReply::text(&[plan("Extend the README.")]).with_model("plan")
        } else {
            MockReply::text(&["done"]).with_model("exec")
        }
    })
    .await;
    mock.enable_prompt_cache(None);
    let env = setup(&mock.base_url(), "mock/plan");
    for t in 0..turns {
        let text = if t % 2 == 0 {
            format!("add a section {t} to the readme file")
        } else {
            format!("what does section {} say?", t - 1)
        };
        let mut args = vec!["run"];
        if t > 0 {
            args.push("--continue");
        }
        args.push(&text);
        // One daemon for the session: the planner's conversation lives in its memory.
        let out = command(&env, &args)
            .env("REASONIX_IDLE_TIMEOUT_SECS", "10")
            .output()
            .expect("run");
        assert_eq!(
            out.status.code(),
            Some(0),
            "turn {t}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let reqs = mock.requests();
    let acc = mock.prompt_accounting();
    for who in ["plan", "exec"] {
        let mine: Vec<usize> = (0..reqs.len())
            .filter(|&i| model(&reqs[i]) == who)
            .collect();
        for w in mine.windows(2) {
            assert_extends(&reqs[w[0]], &reqs[w[1]], who);
        }
        let (hit, prompt) = mine.iter().fold((0u64, 0u64), |(h, p), &i| {
            (h + acc[i].hit_tokens, p + acc[i].prompt_tokens)
        });
        let share = hit as f64 / prompt.max(1) as f64;
        println!(
            "planner cache: model {who}: {} requests, {prompt} prompt tokens, {:.1} % from cache",
            mine.len(),
            share * 100.0
        );
        assert!(share >= 0.9, "{who}: {:.1} % from cache", share * 100.0);
    }
}
