//! Steering a running turn, `!` shell commands and the workspace's prompt history against
//! the real binaries (library client -> real `reasonix-remote` over pipes -> scripted mock
//! provider). What the provider received proves where a steer or a `!` output went.

mod common;

use std::path::Path;
use std::time::Duration;

use common::LocalRig;
use reasonix_forward::policy::{PermissionMode, SessionPolicy};
use reasonix_forward::proto::{
    ErrorCode, EventKind, OpenSession, Request, Response, SessionSettings, TurnOutcome,
};
use reasonix_forward::rpc::CallError;
use reasonix_local::client::{Client, ClientEvent};
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

type Events = tokio::sync::mpsc::UnboundedReceiver<ClientEvent>;

async fn open(rig: &LocalRig, new: bool) -> (Client, Events) {
    let config = rig.config();
    let (client, events) = rig.client(&config);
    let opened = client
        .request(Request::OpenSession(OpenSession {
            new,
            settings: SessionSettings {
                model: Some("mock/m".into()),
                policy: SessionPolicy {
                    mode: PermissionMode::Yolo,
                    ..Default::default()
                },
                headless: false,
                ..SessionSettings::default()
            },
            ..OpenSession::default()
        }))
        .await
        .expect("open");
    assert!(matches!(opened, Response::SessionOpened(_)), "{opened:?}");
    (client, events)
}

/// Events until one matches `want` (returned with everything before it).
async fn until(events: &mut Events, want: impl Fn(&EventKind) -> bool) -> Vec<EventKind> {
    until_in(events, |k, _| want(k)).await
}

/// Events until one of the given turn matches `want`.
async fn until_in(events: &mut Events, want: impl Fn(&EventKind, u64) -> bool) -> Vec<EventKind> {
    let mut seen = Vec::new();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .expect("the event within 60 s")
            .expect("client alive");
        if let ClientEvent::Event(e) = ev {
            let hit = want(&e.kind, e.turn);
            seen.push(e.kind);
            if hit {
                return seen;
            }
        }
    }
}

fn finished(k: &EventKind) -> bool {
    matches!(k, EventKind::TurnFinished { .. })
}

fn stop_daemon(home: &Path) {
    for dir in std::fs::read_dir(home.join("sessions"))
        .expect("sessions")
        .flatten()
    {
        if let Ok(b) = std::fs::read(dir.path().join("daemon.json")) {
            if let Ok(v) = serde_json::from_slice::<Value>(&b) {
                if let Some(pid) = v["pid"].as_i64() {
                    // SAFETY: plain kill(2) of the daemon this test started.
                    unsafe {
                        libc::kill(pid as i32, libc::SIGTERM);
                    }
                    for _ in 0..200 {
                        // SAFETY: signal 0 only probes.
                        if unsafe { libc::kill(pid as i32, 0) } != 0 {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        }
    }
}

fn journal_lines(home: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for dir in std::fs::read_dir(home.join("sessions"))
        .expect("sessions")
        .flatten()
    {
        for f in std::fs::read_dir(dir.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = f.file_name().to_string_lossy().to_string();
            if name.ends_with(".jsonl") && name != "prompt-history.ndjson" {
                for l in std::fs::read_to_string(f.path()).expect("journal").lines() {
                    out.push(serde_json::from_str(l).expect("whole line"));
                }
            }
        }
    }
    out
}

/// Index of the first message with `role` whose content contains `needle`.
fn find(messages: &[Value], role: &str, needle: &str) -> Option<usize> {
    messages
        .iter()
        .position(|m| m["role"] == role && m["content"].as_str().unwrap_or("").contains(needle))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_reaches_the_next_step_of_the_same_turn_and_survives_a_restart() {
    // The tool holds the turn until the test opens the gate (a file in the workspace, where
    // the sandboxed bash runs): the steer is sent while the turn certainly runs, with no
    // timing involved.
    let hold = "while [ ! -e go ]; do sleep 0.05; done; echo tool-done";
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "c1",
                "bash",
                &json!({ "command": hold }).to_string(),
            )],
            16,
        ),
        MockReply::text(&["ok, using tabs"]),
        // Turn 2 (after a daemon restart).
        MockReply::text(&["still tabs"]),
        // Turn 3: cancelled mid-stream.
        MockReply::Hang {
            chunks: vec!["partial ans".into(), "wer so far".into()],
        },
        // Turn 4.
        MockReply::text(&["noted"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_STEER_KEY", "sk-steer");
    let (client, mut events) = open(&rig, true).await;

    // Steering an idle session is refused with a code the client acts on.
    match client
        .request(Request::Steer {
            request_id: "s0".into(),
            text: "too early".into(),
        })
        .await
    {
        Err(CallError::Remote(e)) => assert_eq!(e.code, ErrorCode::NotRunning, "{e}"),
        other => panic!("steer while idle: {other:?}"),
    }

    assert_eq!(
        client
            .submit_turn("t1", "indent the file")
            .await
            .expect("submit"),
        Response::Ok
    );
    until(&mut events, |k| matches!(k, EventKind::ToolStarted { .. })).await;
    let steer = Request::Steer {
        request_id: "s1".into(),
        text: "use tabs, not spaces".into(),
    };
    assert_eq!(
        client.request(steer.clone()).await.expect("steer"),
        Response::Ok
    );
    // Journaled at once: on disk before the tool even finished.
    assert!(journal_lines(&rig.home)
        .iter()
        .any(|l| l["type"] == "steer" && l["text"] == "use tabs, not spaces"));
    assert_eq!(
        client.request(steer).await.expect("steer again"),
        Response::Duplicate
    );
    assert_eq!(mock.request_count(), 1, "the model was not asked again yet");
    std::fs::write(rig.ws.join("go"), "").expect("open the gate");
    let seen = until(&mut events, finished).await;
    assert!(seen.iter().any(|k| matches!(k,
        EventKind::SteerInjected { request_ids, est_tokens } if request_ids == &["s1".to_string()] && *est_tokens > 0)));
    assert!(seen.iter().any(|k| matches!(k,
        EventKind::TurnFinished { outcome, .. } if matches!(outcome, TurnOutcome::Completed))));

    // The provider got the steer in the second step of the same turn, as a user message
    // after the tool result: the request extends the first one (cached prefix kept).
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    let first = reqs[0].messages();
    let second = reqs[1].messages();
    assert_eq!(
        &second[..first.len()],
        &first[..],
        "the prefix is unchanged"
    );
    let tool = find(&second, "tool", "tool-done").expect("tool result");
    let steer_at = find(&second, "user", "use tabs, not spaces").expect("steer");
    assert_eq!(steer_at, tool + 1);
    assert_eq!(steer_at, second.len() - 1);
    let journal = journal_lines(&rig.home);
    let turn_of = |ty: &str| {
        journal
            .iter()
            .find(|l| l["type"] == ty)
            .and_then(|l| l["turn"].as_u64())
    };
    assert_eq!(turn_of("steer"), Some(1));
    assert_eq!(turn_of("steer_injected"), Some(1));
    drop(client);

    // Restart the daemon: the journal replay puts the steer back at the same place, and a
    // client catching up from nothing sees it.
    stop_daemon(&rig.home);
    let (client, mut events) = open(&rig, false).await;
    client
        .submit_turn("t2", "and now?")
        .await
        .expect("submit 2");
    let replayed = until_in(&mut events, |k, turn| finished(k) && turn == 2).await;
    assert!(
        replayed
            .iter()
            .any(|k| matches!(k, EventKind::Steer { text, .. } if text == "use tabs, not spaces")),
        "the catch-up shows the steer"
    );
    let third = mock.requests()[2].messages();
    assert_eq!(
        &third[..second.len()],
        &second[..],
        "replayed byte for byte"
    );

    // Esc (cancel) mid-stream: the partial answer stays in the journal and the context.
    client.submit_turn("t3", "explain").await.expect("submit 3");
    until(
        &mut events,
        |k| matches!(k, EventKind::TextDelta { text } if text.contains("wer so far")),
    )
    .await;
    client
        .request(Request::Cancel {
            request_id: "x3".into(),
        })
        .await
        .expect("cancel");
    let seen = until_in(&mut events, |k, turn| finished(k) && turn == 3).await;
    assert!(seen.iter().any(|k| matches!(k,
        EventKind::AssistantMessage { content, .. } if content == "partial answer so far")));
    client.submit_turn("t4", "go on").await.expect("submit 4");
    until_in(&mut events, |k, turn| finished(k) && turn == 4).await;
    let fifth = mock.requests()[4].messages();
    let partial = find(&fifth, "assistant", "partial answer so far").expect("partial kept");
    assert!(find(&fifth, "user", "explain") == Some(partial - 1));
    drop(client);
    stop_daemon(&rig.home);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bang_command_runs_sandboxed_and_its_output_reaches_the_next_turn_when_chosen() {
    let mock = MockProvider::start(vec![
        MockReply::text(&["seen"]),
        MockReply::text(&["seen again"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_SHELL_KEY", "sk-shell");
    // Outside the workspace and outside /tmp (which the sandbox replaces by a tmpfs).
    let outside = std::path::PathBuf::from(format!("/var/tmp/rx-shell-{}", std::process::id()));
    std::fs::create_dir_all(&outside).expect("outside dir");
    let (client, mut events) = open(&rig, true).await;

    // Allowed by the policy (yolo), confined by bwrap: the workspace is writable, the rest
    // of the file system is not.
    let cmd = format!(
        "echo shared-marker > inside.txt && cat inside.txt; touch {}/escaped",
        outside.display()
    );
    assert_eq!(
        client
            .request(Request::Shell {
                request_id: "sh1".into(),
                command: cmd.clone(),
                add_to_context: true,
            })
            .await
            .expect("shell"),
        Response::Ok
    );
    let seen = until(&mut events, |k| matches!(k, EventKind::ShellRan { .. })).await;
    let Some(EventKind::ShellRan {
        output,
        is_error,
        added_to_context,
        ..
    }) = seen.last()
    else {
        panic!("no ShellRan");
    };
    assert!(output.contains("shared-marker"), "{output}");
    assert!(output.contains("Read-only file system"), "{output}");
    assert!(*is_error, "touch failed, so the command failed: {output}");
    assert!(*added_to_context);
    assert!(rig.ws.join("inside.txt").exists());
    assert!(
        !outside.join("escaped").exists(),
        "the sandbox let ! write outside the workspace"
    );

    // Streamed while it runs: the command prints a line, then waits for a file this test
    // creates only once it has seen that line as `ToolProgress`, so the command cannot end
    // (nor `ShellRan` arrive) without the output having streamed first.
    {
        let streaming = client.request(Request::Shell {
        request_id: "sh-stream".into(),
        command: "echo stream-one; while [ ! -e go ]; do sleep 0.05; done; echo stream-two; touch /var/tmp/rx-stream-escaped-$PPID".into(),
        add_to_context: false,
    });
        tokio::pin!(streaming);
        let mut streamed = String::new();
        let mut answered = None;
        let mut order = Vec::new();
        let final_output = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            tokio::select! {
                r = &mut streaming, if answered.is_none() => {
                    order.push("answered");
                    answered = Some(r);
                }
                ev = events.recv() => match ev.expect("client alive") {
                    ClientEvent::ToolProgress { call_id, message } if call_id == "sh-stream" => {
                        streamed.push_str(&message);
                        if streamed.contains("stream-one") && !rig.ws.join("go").exists() {
                            order.push("streamed");
                            std::fs::write(rig.ws.join("go"), "").expect("go");
                        }
                    }
                    ClientEvent::Event(e) => {
                        if let EventKind::ShellRan { request_id, output, .. } = e.kind {
                            if request_id == "sh-stream" {
                                order.push("ran");
                                return output;
                            }
                        }
                    }
                    _ => {}
                },
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the ! output did not stream (seen: {streamed:?})"));
        assert_eq!(order[0], "streamed", "{order:?}");
        assert!(!order[..order.len() - 1].contains(&"ran"), "{order:?}");
        assert!(
            final_output.contains("stream-one") && final_output.contains("stream-two"),
            "{final_output}"
        );
        assert!(
            final_output.contains("Read-only file system"),
            "{final_output}"
        );
        let answer = match answered {
            Some(r) => r,
            None => streaming.await,
        };
        assert_eq!(answer.expect("shell streamed"), Response::Ok);
    }

    // Not shared: `!!` output stays out of the model's context.
    client
        .request(Request::Shell {
            request_id: "sh2".into(),
            command: "echo private-marker".into(),
            add_to_context: false,
        })
        .await
        .expect("shell 2");
    assert_eq!(mock.request_count(), 0, "! alone asks the model nothing");

    client
        .submit_turn("t1", "what did you see?")
        .await
        .expect("submit");
    until(&mut events, finished).await;
    let msgs = mock.requests()[0].messages();
    let user = msgs.last().expect("user message");
    assert_eq!(user["role"], "user");
    let content = user["content"].as_str().unwrap_or("");
    assert!(content.contains("shared-marker"), "{content}");
    assert!(content.ends_with("what did you see?"), "{content}");
    assert!(!content.contains("private-marker"), "{content}");
    // Never the system prefix.
    assert!(!msgs[0]["content"]
        .as_str()
        .unwrap_or("")
        .contains("shared-marker"));
    // Given once: the next turn does not repeat it.
    client.submit_turn("t2", "again").await.expect("submit 2");
    until_in(&mut events, |k, turn| finished(k) && turn == 2).await;
    let msgs = mock.requests()[1].messages();
    assert_eq!(msgs.last().expect("user")["content"], "again");

    // A command the policy denies for bash is refused with the reason.
    drop(client);
    let config = rig.config();
    let (client, _events) = rig.client(&config);
    let opened = client
        .request(Request::OpenSession(OpenSession {
            settings: SessionSettings {
                model: Some("mock/m".into()),
                policy: SessionPolicy {
                    mode: PermissionMode::Yolo,
                    rules: reasonix_forward::policy::Rules {
                        deny: vec![
                            reasonix_forward::policy::Rule::parse("Bash(rm:*)").expect("rule")
                        ],
                        ..Default::default()
                    },
                    ..Default::default()
                },
                ..SessionSettings::default()
            },
            takeover: true,
            ..OpenSession::default()
        }))
        .await
        .expect("open");
    assert!(matches!(opened, Response::SessionOpened(_)), "{opened:?}");
    match client
        .request(Request::Shell {
            request_id: "sh3".into(),
            command: "rm -f inside.txt".into(),
            add_to_context: true,
        })
        .await
    {
        Err(CallError::Remote(e)) => {
            assert_eq!(e.code, ErrorCode::Denied, "{e}");
            assert!(e.message.contains("rm"), "{e}");
        }
        other => panic!("a denied ! ran: {other:?}"),
    }
    assert!(rig.ws.join("inside.txt").exists());
    drop(client);
    stop_daemon(&rig.home);
    let _ = std::fs::remove_dir_all(&outside);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_history_is_the_workspaces_shared_by_clients_and_private() {
    let mock = MockProvider::start(vec![]).await;
    let rig = LocalRig::new(&mock.base_url(), "RX_HIST_KEY", "sk-hist");
    let (a, _ea) = open(&rig, true).await;
    let (b, _eb) = open(&rig, false).await;
    for (c, t) in [
        (&a, "from laptop a"),
        (&b, "from laptop b"),
        (&a, "from laptop a"),
    ] {
        assert_eq!(
            c.request(Request::HistoryAppend { text: t.into() })
                .await
                .expect("append"),
            Response::Ok
        );
    }
    for c in [&a, &b] {
        assert_eq!(
            c.request(Request::HistoryList).await.expect("list"),
            Response::History {
                entries: vec![
                    "from laptop a".into(),
                    "from laptop b".into(),
                    "from laptop a".into()
                ]
            }
        );
    }
    let file = std::fs::read_dir(rig.home.join("sessions"))
        .expect("sessions")
        .flatten()
        .map(|d| d.path().join("prompt-history.ndjson"))
        .find(|p| p.exists())
        .expect("history file");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    drop((a, b));
    stop_daemon(&rig.home);
}
