//! Reconnect under real network faults (issue 5): sshd, the client and the mock provider run
//! inside a private network namespace; iptables inside it blackholes, resets or drops the
//! SSH traffic. Every scenario asserts on what the client printed and on files on the host.
//!
//! Two scenarios run at the full scale with the real default liveness (5 s heartbeat /
//! 15 s dead): a 30 s blackhole during a 20 s bash command, and 20% loss plus 200 ms latency
//! each way for 60 s. The others are scaled down (liveness 500 ms / 2 s, an 8 s blackhole over
//! a 5 s stream, a 1.5 s reset) to keep the file short: the reset during an approval, the
//! blackhole during a streaming reply, `kill -9` of the client, `kill -9` of the host daemon,
//! and a second client that is read-only until it takes over. See `docs/REMOTE.md`
//! "Fault tests".

mod reconnect_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use reasonix_forward::proto::{
    ApprovalDecision, ClientRole, ErrorCode, EventKind, OpenSession, Request, Response,
    SessionSettings, TurnOutcome, TurnState,
};
use reasonix_forward::rpc::CallError;
use reasonix_local::client::{Client, ClientEvent, ConnState};
use reasonix_testkit::mock_provider::{MockReply, MockToolCall};
use reasonix_testkit::netfault::{DelayProxy, Fault};
use reconnect_common::*;
use serde_json::{json, Value};

/// Scaled liveness (500 ms heartbeat / 2 s dead).
const SHORT: (u64, u64) = (HEARTBEAT_MS, DEAD_AFTER_MS);
/// The real default liveness (5 s heartbeat / 15 s dead), for the full-scale scenarios.
const DEFAULT_LIVENESS: (u64, u64) = (5000, 15000);
/// Scaled blackhole length (the streaming-reply scenario).
const BLACKHOLE: Duration = Duration::from_secs(8);
/// The blackhole length, over the 20 s command.
const FULL_BLACKHOLE: Duration = Duration::from_secs(30);
/// Hang guard for anything that includes the first SSH connect and install.
const SETUP_GUARD: Duration = Duration::from_secs(90);
const GUARD: Duration = Duration::from_secs(45);

/// The scripted model's step that runs `command` with the bash tool (call id `b1`).
fn bash_call(command: &str) -> MockReply {
    MockReply::tool_calls(
        vec![MockToolCall::new(
            "b1",
            "bash",
            &json!({ "command": command }).to_string(),
        )],
        8,
    )
}

fn count(values: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    values.iter().filter(|v| pred(v)).count()
}

/// Poll (hang guard `guard`) until `f` is true.
async fn until(guard: Duration, what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + guard;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn journal_has(rig: &Rig, pred: impl Fn(&Value) -> bool) -> bool {
    rig.host_journals()
        .iter()
        .any(|j| journal_events(j).iter().any(&pred))
}

/// Receive library-client events (each recorded in `seen`) until one matches `pred`; hang
/// guard [`GUARD`].
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

/// Full scale: a 30 s blackhole during a 20 s bash command, real default liveness.
#[test]
fn blackhole_during_a_long_bash_command_delivers_its_output_and_runs_it_once() {
    in_netns(|ns| async move {
        let command = "echo run >> counter; echo started; sleep 20; echo finished; exit 3";
        let rig = Rig::new(
            Arc::clone(&ns),
            vec![
                bash_call(command),
                MockReply::text(&["The command ", "ran once."]),
            ],
        )
        .await;
        let port = rig.sshd.port();
        let mut c = rig.spawn_client(port, DEFAULT_LIVENESS, &[], "run the slow command");
        let (i, _) = c
            .wait_for(0, SETUP_GUARD, "bash tool_started", |v| {
                v["type"] == "tool_started" && v["name"] == "bash"
            })
            .await;

        let fault = ns.fault(Fault::Blackhole, port).expect("blackhole");
        let (j, lost) = c
            .wait_for(i, GUARD, "a reconnecting event", |v| {
                is_conn(v, "reconnecting")
            })
            .await;
        // Silence, declared dead by the default 15 s window.
        assert!(
            lost.value["reason"]
                .as_str()
                .unwrap_or("")
                .contains("no data from the peer for 15s"),
            "{}",
            lost.value
        );
        // The command finishes on the host while the laptop cannot be reached, so its
        // output (and the next provider request) must be replayed after the drop.
        until(GUARD, "the bash result in the host journal", || {
            journal_has(&rig, |e| {
                e["type"] == "tool_finished" && e["call_id"] == "b1"
            })
        })
        .await;
        tokio::time::sleep_until((fault.since() + FULL_BLACKHOLE).into()).await;
        assert_eq!(
            rig.mock.request_count(),
            1,
            "no provider request while cut off"
        );
        fault.lift().expect("lift");

        let (k, _) = c
            .wait_for(j, GUARD, "connected (resumed)", is_resumed)
            .await;
        let status = c.wait_exit(GUARD).await;
        let out = c.values();
        let transcript = c.transcript();
        assert!(status.success(), "{transcript}");
        // Reconnecting, then resumed: the link was resumed, not re-attached.
        assert!(j < k);
        assert_eq!(
            count(&out, |v| v["type"] == "notice"
                && v["text"].as_str().unwrap_or("").contains("re-attaching")),
            0,
            "{transcript}"
        );
        // Everything arrived once, in order.
        assert_eq!(
            count(&out, |v| v["type"] == "tool_started"),
            1,
            "{transcript}"
        );
        let finished: Vec<&Value> = out
            .iter()
            .filter(|v| v["type"] == "tool_finished")
            .collect();
        assert_eq!(finished.len(), 1, "{transcript}");
        assert_eq!(
            finished[0]["is_error"], true,
            "exit 3 is an error: {transcript}"
        );
        assert_eq!(text_of(&out), "The command ran once.");
        let last = out.last().expect("output");
        assert_eq!(last["type"], "turn_finished", "{transcript}");
        assert_eq!(last["outcome"], "completed", "{transcript}");
        // The full output and the exit code reached the model.
        let reqs = rig.mock.requests();
        assert_eq!(reqs.len(), 2, "{transcript}");
        let tool_msg = reqs[1]
            .messages()
            .into_iter()
            .find(|m| m["role"] == "tool")
            .expect("tool message");
        assert_eq!(
            tool_msg["content"], "started\nfinished\n[exit code 3]",
            "{transcript}"
        );
        // The command ran exactly once on the host.
        assert_eq!(
            std::fs::read_to_string(rig.host_file("counter")).expect("counter"),
            "run\n"
        );
    });
}

#[test]
fn blackhole_during_a_streaming_reply_completes_it_without_asking_again() {
    in_netns(|ns| async move {
        let chunks: Vec<String> = (0..20).map(|i| format!("w{i:02} ")).collect();
        // 20 chunks 250 ms apart: the stream ends (on the laptop) inside the blackhole.
        let rig = Rig::new(
            Arc::clone(&ns),
            vec![MockReply::text(&chunks).slow(Duration::from_millis(250))],
        )
        .await;
        let port = rig.sshd.port();
        let mut c = rig.spawn_client(port, SHORT, &[], "say the words slowly");
        let (i, _) = c
            .wait_for(0, SETUP_GUARD, "the first text", |v| v["type"] == "text")
            .await;
        let fault = ns.fault(Fault::Blackhole, port).expect("blackhole");
        let (j, _) = c
            .wait_for(i, GUARD, "a reconnecting event", |v| {
                is_conn(v, "reconnecting")
            })
            .await;
        tokio::time::sleep_until((fault.since() + BLACKHOLE).into()).await;
        fault.lift().expect("lift");
        c.wait_for(j, GUARD, "connected (resumed)", is_resumed)
            .await;
        let status = c.wait_exit(GUARD).await;
        let out = c.values();
        let transcript = c.transcript();
        assert!(status.success(), "{transcript}");
        assert_eq!(text_of(&out), chunks.concat(), "{transcript}");
        assert_eq!(
            rig.mock.request_count(),
            1,
            "the reply must not be asked for twice: {transcript}"
        );
        assert_eq!(out.last().expect("output")["outcome"], "completed");
        // The host journal holds the complete reply once.
        let assistant: Vec<String> = rig
            .host_journals()
            .iter()
            .flat_map(|j| journal_events(j))
            .filter(|e| e["type"] == "assistant_message")
            .filter_map(|e| e["content"].as_str().map(String::from))
            .collect();
        assert_eq!(assistant, vec![chunks.concat()]);
    });
}

#[test]
fn reset_during_an_approval_keeps_it_pending_and_runs_the_tool_once() {
    in_netns(|ns| async move {
        let rig = Rig::new(
            Arc::clone(&ns),
            vec![
                MockReply::tool_calls(
                    vec![MockToolCall::new(
                        "w1",
                        "write_file",
                        &json!({"path": "approved.txt", "content": "written once\n"}).to_string(),
                    )],
                    7,
                ),
                MockReply::text(&["wrote it"]),
            ],
        )
        .await;
        let port = rig.sshd.port();
        // The library client in this process (its threads are in the namespace), over SSH.
        let (client, mut events) = rig.library_client(port, SHORT);
        let mut seen: Vec<ClientEvent> = Vec::new();
        let opened = tokio::time::timeout(
            SETUP_GUARD,
            client.request(Request::OpenSession(OpenSession {
                new: true,
                settings: SessionSettings {
                    model: Some("mock/m".into()),
                    policy: reasonix_forward::policy::SessionPolicy {
                        mode: reasonix_forward::policy::PermissionMode::Ask,
                        ..Default::default()
                    },
                    headless: false,
                    ..SessionSettings::default()
                },
                ..OpenSession::default()
            })),
        )
        .await
        .expect("open in time");
        let opened = match opened {
            Ok(o) => o,
            Err(e) => {
                let mut evs = Vec::new();
                while let Ok(ev) = events.try_recv() {
                    evs.push(ev);
                }
                panic!("open failed: {e}; client events: {evs:#?}");
            }
        };
        let Response::SessionOpened(opened) = opened else {
            panic!("unexpected {opened:?}")
        };
        let submitted = client
            .request(Request::SubmitTurn {
                request_id: "t1".into(),
                text: "write the file".into(),
            })
            .await
            .expect("submit");
        assert_eq!(submitted, Response::Ok);

        let approval = next_matching(&mut events, &mut seen, "approval request", |e| {
            matches!(e, ClientEvent::Event(ev) if matches!(ev.kind, EventKind::ApprovalRequested { .. }))
        })
        .await;
        let ClientEvent::Event(approval) = approval else {
            unreachable!()
        };
        let EventKind::ApprovalRequested {
            approval_id, tool, ..
        } = approval.kind
        else {
            unreachable!()
        };
        assert_eq!(tool, "write_file");
        assert!(!rig.host_file("approved.txt").exists());

        // Reset: every segment of the SSH connection is answered with a TCP RST, and new
        // connections are refused, until the rules are lifted.
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
            !seen
                .iter()
                .any(|e| matches!(e, ClientEvent::Reattached { .. })),
            "the link must be resumed, not re-attached: {seen:#?}"
        );

        // Still pending on the host, nothing ran.
        let Response::Sessions { sessions } =
            client.request(Request::ListSessions).await.expect("list")
        else {
            panic!("unexpected answer to ListSessions")
        };
        let info = sessions
            .iter()
            .find(|s| s.id == opened.session)
            .expect("our session");
        assert_eq!(info.state, TurnState::WaitingForApproval);
        assert!(!rig.host_file("approved.txt").exists());
        assert_eq!(rig.mock.request_count(), 1);

        // Answer once (a repeat is recognised as a duplicate): the tool runs once.
        let answer = Request::Approve {
            request_id: "a1".into(),
            approval_id,
            decision: ApprovalDecision::AllowOnce,
        };
        assert_eq!(
            client.request(answer.clone()).await.expect("approve"),
            Response::Ok
        );
        assert_eq!(
            client.request(answer).await.expect("approve again"),
            Response::Duplicate
        );
        next_matching(&mut events, &mut seen, "turn finished", |e| {
            matches!(e, ClientEvent::Event(ev) if matches!(ev.kind, EventKind::TurnFinished { .. }))
        })
        .await;
        let kinds: Vec<&EventKind> = seen
            .iter()
            .filter_map(|e| match e {
                ClientEvent::Event(ev) => Some(&ev.kind),
                _ => None,
            })
            .collect();
        assert_eq!(
            kinds
                .iter()
                .filter(|k| matches!(k, EventKind::ToolStarted { .. }))
                .count(),
            1
        );
        assert_eq!(
            kinds
                .iter()
                .filter(|k| matches!(k, EventKind::ApprovalRequested { .. }))
                .count(),
            1,
            "the approval is not asked twice"
        );
        assert!(
            matches!(kinds.last(), Some(EventKind::TurnFinished { outcome, .. }) if matches!(outcome, TurnOutcome::Completed))
        );
        assert_eq!(
            std::fs::read_to_string(rig.host_file("approved.txt")).expect("file"),
            "written once\n"
        );
        assert_eq!(rig.mock.request_count(), 2);
        let journal: Vec<Value> = rig
            .host_journals()
            .iter()
            .flat_map(|j| journal_events(j))
            .collect();
        assert_eq!(count(&journal, |e| e["type"] == "tool_started"), 1);
        assert_eq!(count(&journal, |e| e["type"] == "approval_answered"), 1);
    });
}

/// Full scale: 20% loss plus 200 ms latency each way held for 60 s while a reply streams,
/// real default liveness.
#[test]
fn loss_and_delay_cause_no_false_disconnect_and_no_duplicates() {
    in_netns(|ns| async move {
        // 130 chunks 500 ms apart: the reply streams for about 65 s, so it is still going
        // when the 60 s of loss end.
        let chunks: Vec<String> = (0..130).map(|i| format!("c{i:03} ")).collect();
        let rig = Rig::new(
            Arc::clone(&ns),
            vec![MockReply::text(&chunks).slow(Duration::from_millis(500))],
        )
        .await;
        // No delay while connecting and installing the host binary; 200 ms each way for
        // the turn under test.
        let proxy = DelayProxy::start(([127, 0, 0, 1], rig.sshd.port()).into(), Duration::ZERO)
            .await
            .expect("delay proxy");
        rig.trust_port(proxy.port());
        let mut c = rig.spawn_client(proxy.port(), DEFAULT_LIVENESS, &[], "stream through loss");
        let (i, _) = c
            .wait_for(0, SETUP_GUARD, "the first text", |v| v["type"] == "text")
            .await;
        proxy.set_delay(Duration::from_millis(200));
        let fault = ns.fault(Fault::Loss(0.2), proxy.port()).expect("loss");
        let lossy_from = fault.since();
        tokio::time::sleep_until((lossy_from + Duration::from_secs(60)).into()).await;
        let during = c.lines();
        fault.lift().expect("lift");
        let status = c.wait_exit(GUARD).await;
        let out = c.values();
        let transcript = c.transcript();
        assert!(status.success(), "{transcript}");
        // The whole 60 s were spent mid-reply: text kept arriving through the loss and the
        // turn had not finished when it was lifted.
        assert!(
            during[i + 1..]
                .iter()
                .any(|l| l.value["type"] == "text" && l.at > lossy_from),
            "no text arrived during the loss: {transcript}"
        );
        assert_eq!(
            count(
                &during.iter().map(|l| l.value.clone()).collect::<Vec<_>>(),
                |v| v["type"] == "turn_finished"
            ),
            0,
            "the reply ended before the loss did: {transcript}"
        );
        assert_eq!(
            count(&out, |v| is_conn(v, "reconnecting")),
            0,
            "false disconnect: {transcript}"
        );
        // Every chunk once, in order; one request, one turn end.
        assert_eq!(text_of(&out), chunks.concat(), "{transcript}");
        assert_eq!(rig.mock.request_count(), 1);
        assert_eq!(count(&out, |v| v["type"] == "turn_finished"), 1);
        assert_eq!(out.last().expect("output")["outcome"], "completed");
    });
}

#[test]
fn kill_9_of_the_client_mid_turn_then_continue_finishes_the_turn_in_the_same_session() {
    in_netns(|ns| async move {
        let command = "echo run >> counter; sleep 3; echo finished > done.txt";
        let rig = Rig::new(
            Arc::clone(&ns),
            vec![
                bash_call(command),
                MockReply::text(&["first turn ", "done."]),
                MockReply::text(&["second turn ", "done."]),
            ],
        )
        .await;
        let port = rig.sshd.port();
        let mut c1 = rig.spawn_client(port, SHORT, &[], "first");
        let (_, session) = c1
            .wait_for(0, SETUP_GUARD, "the session", |v| v["type"] == "session")
            .await;
        let session = session.value["session"].as_str().expect("id").to_string();
        c1.wait_for(0, GUARD, "bash tool_started", |v| {
            v["type"] == "tool_started" && v["name"] == "bash"
        })
        .await;
        c1.kill9();

        // The command keeps running on the host with no client attached and finishes.
        until(GUARD, "done.txt on the host", || {
            rig.host_file("done.txt").exists()
        })
        .await;
        until(GUARD, "the bash result in the journal", || {
            journal_has(&rig, |e| {
                e["type"] == "tool_finished" && e["call_id"] == "b1"
            })
        })
        .await;
        // The next step needs the model, which only a laptop can reach: nothing was asked.
        assert_eq!(rig.mock.request_count(), 1);

        // A new client on the same host and path continues the same session: the parked
        // turn completes through its gateway, then its own prompt runs.
        let mut c2 = rig.spawn_client(port, SHORT, &["--continue"], "second");
        let status = c2.wait_exit(Duration::from_secs(60)).await;
        let out = c2.values();
        let transcript = c2.transcript();
        assert!(status.success(), "{transcript}");
        let s2 = out
            .iter()
            .find(|v| v["type"] == "session")
            .expect("session event");
        assert_eq!(s2["session"], session.as_str(), "{transcript}");
        assert_eq!(text_of(&out), "second turn done.", "{transcript}");
        assert_eq!(out.last().expect("output")["outcome"], "completed");
        assert_eq!(rig.mock.request_count(), 3, "{transcript}");

        // The host journal holds both turns completely, the command once.
        let journals = rig.host_journals();
        let path = journals
            .iter()
            .find(|p| p.file_stem().is_some_and(|s| s == session.as_str()))
            .expect("journal of the session");
        let events = journal_events(path);
        let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(count(&events, |e| e["type"] == "user_turn"), 2, "{kinds:?}");
        assert_eq!(
            count(&events, |e| e["type"] == "tool_started"),
            1,
            "{kinds:?}"
        );
        let finished: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "turn_finished")
            .collect();
        assert_eq!(finished.len(), 2, "{kinds:?}");
        assert!(
            finished.iter().all(|e| e["outcome"] == "completed"),
            "{finished:?}"
        );
        let replies: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == "assistant_message")
            .filter_map(|e| e["content"].as_str())
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(replies, vec!["first turn done.", "second turn done."]);
        assert_eq!(
            std::fs::read_to_string(rig.host_file("counter")).expect("counter"),
            "run\n"
        );
    });
}

#[test]
fn kill_9_of_the_daemon_mid_tool_restarts_it_and_reports_the_interrupted_turn() {
    in_netns(|ns| async move {
        let command = "echo run >> counter; sleep 4; echo finished > done.txt";
        let rig = Rig::new(
            Arc::clone(&ns),
            vec![
                bash_call(command),
                MockReply::text(&["carrying on ", "after the crash."]),
            ],
        )
        .await;
        let port = rig.sshd.port();
        let mut c = rig.spawn_client(port, SHORT, &[], "run it, then the daemon dies");
        let (_, session) = c
            .wait_for(0, SETUP_GUARD, "the session", |v| v["type"] == "session")
            .await;
        let session = session.value["session"].as_str().expect("id").to_string();
        let (i, started) = c
            .wait_for(0, GUARD, "bash tool_started", |v| {
                v["type"] == "tool_started" && v["name"] == "bash"
            })
            .await;
        until(GUARD, "the command started on the host", || {
            rig.host_file("counter").exists()
        })
        .await;

        // kill -9 the host daemon (the attach bridge loses its socket and exits with it).
        let old = rig.daemon_pids();
        assert_eq!(old.len(), 1, "one daemon: {old:?}");
        let marker = rig.daemon_marker().expect("daemon marker");
        assert_eq!(marker["pid"].as_i64(), Some(i64::from(old[0])), "{marker}");
        for pid in &old {
            // SAFETY: kill(2) of the test user's daemon, found by uid and command line.
            unsafe {
                libc::kill(*pid, libc::SIGKILL);
            }
        }

        // The client notices at once, reconnects, the attach starts a new daemon, the link
        // cannot be resumed, so it re-attaches and catches up from the journal: the turn was
        // interrupted (the tool is reported, never run again).
        let status = c.wait_exit(GUARD).await;
        let out = c.values();
        let transcript = c.transcript();
        assert_eq!(status.code(), Some(1), "an interrupted turn: {transcript}");
        let after = &out[i..];
        let reattach = after
            .iter()
            .position(|v| {
                v["type"] == "notice" && v["text"].as_str().unwrap_or("").contains("re-attaching")
            })
            .unwrap_or_else(|| panic!("no re-attach notice: {transcript}"));
        assert!(
            after[..reattach].iter().any(|v| is_conn(v, "reconnecting")),
            "{transcript}"
        );
        assert!(
            after[reattach..]
                .iter()
                .any(|v| is_conn(v, "connected") && v["resumed"] == false),
            "{transcript}"
        );
        let notices: String = after
            .iter()
            .filter(|v| v["type"] == "notice")
            .filter_map(|v| v["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            notices.contains("did not shut down cleanly")
                && notices.contains("loginctl enable-linger"),
            "the unclean shutdown is explained: {transcript}"
        );
        assert!(
            notices.contains("was interrupted because the host daemon stopped"),
            "{transcript}"
        );
        assert_eq!(
            count(&out, |v| v["type"] == "tool_started"),
            1,
            "{transcript}"
        );
        let finished: Vec<&Value> = out
            .iter()
            .filter(|v| v["type"] == "tool_finished")
            .collect();
        assert_eq!(finished.len(), 1, "{transcript}");
        assert_eq!(finished[0]["call_id"], "b1");
        assert_eq!(finished[0]["is_error"], true);
        assert!(
            finished[0]["summary"]
                .as_str()
                .unwrap_or("")
                .starts_with("interrupted"),
            "{transcript}"
        );
        let last = out.last().expect("output");
        assert_eq!(last["type"], "turn_finished", "{transcript}");
        assert_eq!(last["outcome"], "interrupted", "{transcript}");
        assert_eq!(rig.mock.request_count(), 1, "{transcript}");

        // A new daemon runs; the marker is its own.
        let new = rig.daemon_pids();
        assert_eq!(new.len(), 1, "{new:?}");
        assert!(!old.contains(&new[0]), "old {old:?}, new {new:?}");
        assert_eq!(
            rig.daemon_marker().expect("marker")["pid"].as_i64(),
            Some(i64::from(new[0]))
        );

        // The session resumes from the journal: a new turn in it sees the whole history,
        // including the interrupted tool result.
        let mut c2 = rig.spawn_client(port, SHORT, &["--continue"], "carry on");
        let status = c2.wait_exit(GUARD).await;
        let out2 = c2.values();
        let transcript2 = c2.transcript();
        assert!(status.success(), "{transcript2}");
        let s2 = out2
            .iter()
            .find(|v| v["type"] == "session")
            .expect("session event");
        assert_eq!(s2["session"], session.as_str(), "{transcript2}");
        assert_eq!(text_of(&out2), "carrying on after the crash.");
        assert_eq!(rig.mock.request_count(), 2, "{transcript2}");
        let reqs = rig.mock.requests();
        let messages = reqs[1].messages();
        let tool = messages
            .iter()
            .find(|m| m["role"] == "tool")
            .expect("the tool result is in the history");
        assert!(
            tool["content"]
                .as_str()
                .unwrap_or("")
                .starts_with("interrupted"),
            "{tool}"
        );
        let users: Vec<&str> = messages
            .iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str())
            .collect();
        assert_eq!(users, vec!["run it, then the daemon dies", "carry on"]);

        // The journal: one start of the command, its interrupted result, the first turn
        // interrupted, the second completed.
        let journals = rig.host_journals();
        let path = journals
            .iter()
            .find(|p| p.file_stem().is_some_and(|s| s == session.as_str()))
            .expect("journal of the session");
        let events = journal_events(path);
        let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(count(&events, |e| e["type"] == "user_turn"), 2, "{kinds:?}");
        assert_eq!(
            count(&events, |e| e["type"] == "tool_started"),
            1,
            "{kinds:?}"
        );
        let results: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "tool_finished")
            .collect();
        assert_eq!(results.len(), 1, "{kinds:?}");
        assert!(results[0]["output"]
            .as_str()
            .unwrap_or("")
            .contains("it was not run again"));
        let outcomes: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == "turn_finished")
            .filter_map(|e| e["outcome"].as_str())
            .collect();
        assert_eq!(outcomes, vec!["interrupted", "completed"]);

        // Never run twice: past the command's own duration, the counter still shows one run.
        tokio::time::sleep_until((started.at + Duration::from_secs(6)).into()).await;
        assert_eq!(
            std::fs::read_to_string(rig.host_file("counter")).expect("counter"),
            "run\n"
        );
    });
}

/// Open `session` (a new one when `None`) on `client` in yolo mode.
async fn open_on(client: &Client, session: Option<String>, takeover: bool) -> OpenSessionAnswer {
    let req = Request::OpenSession(OpenSession {
        new: session.is_none(),
        session,
        takeover,
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
    });
    match tokio::time::timeout(SETUP_GUARD, client.request(req))
        .await
        .expect("open in time")
        .expect("open")
    {
        Response::SessionOpened(o) => o,
        other => panic!("unexpected {other:?}"),
    }
}

type OpenSessionAnswer = reasonix_forward::proto::SessionOpened;

fn is_turn_finished(e: &ClientEvent, turn: u64) -> bool {
    matches!(e, ClientEvent::Event(ev) if ev.turn == turn && matches!(ev.kind, EventKind::TurnFinished { .. }))
}

fn submit(id: &str, text: &str) -> Request {
    Request::SubmitTurn {
        request_id: id.into(),
        text: text.into(),
    }
}

fn assert_read_only(r: Result<Response, CallError>) {
    match r {
        Err(CallError::Remote(e)) => assert_eq!(e.code, ErrorCode::ReadOnly, "{}", e.message),
        other => panic!("a read-only client submitted a turn: {other:?}"),
    }
}

#[test]
fn second_client_over_ssh_is_read_only_until_it_takes_over() {
    in_netns(|ns| async move {
        // 30 chunks 300 ms apart: A's reply is still streaming when B attaches.
        let chunks: Vec<String> = (0..30).map(|i| format!("a{i:02} ")).collect();
        let rig = Rig::new(
            Arc::clone(&ns),
            vec![
                MockReply::text(&chunks).slow(Duration::from_millis(300)),
                MockReply::text(&["from ", "the new driver"]),
            ],
        )
        .await;
        let port = rig.sshd.port();
        let (a, mut a_events) = rig.library_client(port, SHORT);
        let (b, mut b_events) = rig.library_client(port, SHORT);
        let (mut a_seen, mut b_seen) = (Vec::new(), Vec::new());

        let o1 = open_on(&a, None, false).await;
        assert_eq!(o1.role, ClientRole::Driver);
        assert_eq!(
            a.request(submit("a1", "stream slowly"))
                .await
                .expect("submit"),
            Response::Ok
        );
        next_matching(&mut a_events, &mut a_seen, "A's first text", |e| {
            matches!(e, ClientEvent::Event(ev) if matches!(ev.kind, EventKind::TextDelta { .. }))
        })
        .await;

        // B attaches to the same session while A's turn streams: read-only.
        let o2 = open_on(&b, Some(o1.session.clone()), false).await;
        assert_eq!(o2.session, o1.session);
        assert_eq!(
            o2.role,
            ClientRole::Spectator,
            "a live driver keeps the session"
        );
        assert_read_only(b.request(submit("b1", "may I?")).await);
        // B still sees A's turn live (events numbered after its catch-up point).
        let live = o2.last_seq;
        next_matching(&mut b_events, &mut b_seen, "a live text event of A's turn", |e| {
            matches!(e, ClientEvent::Event(ev) if ev.seq > live && matches!(ev.kind, EventKind::TextDelta { .. }))
        })
        .await;
        next_matching(
            &mut b_events,
            &mut b_seen,
            "A's turn finished (seen by B)",
            |e| is_turn_finished(e, 1),
        )
        .await;
        let b_text: String = b_seen
            .iter()
            .filter_map(|e| match e {
                ClientEvent::Event(ev) if ev.turn == 1 => match &ev.kind {
                    EventKind::TextDelta { text } => Some(text.as_str()),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        assert_eq!(
            b_text,
            chunks.concat(),
            "catch-up plus live, each event once"
        );
        next_matching(&mut a_events, &mut a_seen, "A's turn finished", |e| {
            is_turn_finished(e, 1)
        })
        .await;

        // B re-opens with takeover: it drives, A is told it is read-only now.
        let o3 = open_on(&b, Some(o1.session.clone()), true).await;
        assert_eq!(o3.role, ClientRole::Driver);
        let told = next_matching(&mut a_events, &mut a_seen, "A's role notice", |e| {
            matches!(e, ClientEvent::Role { .. })
        })
        .await;
        let ClientEvent::Role { role, reason } = told else {
            unreachable!()
        };
        assert_eq!(role, ClientRole::Spectator);
        assert!(reason.contains("took over"), "{reason}");
        assert_read_only(a.request(submit("a2", "still mine?")).await);

        // The new driver's turn completes; the old one watches it.
        assert_eq!(
            b.request(submit("b2", "my turn")).await.expect("submit"),
            Response::Ok
        );
        next_matching(&mut b_events, &mut b_seen, "B's turn finished", |e| {
            is_turn_finished(e, 2)
        })
        .await;
        next_matching(
            &mut a_events,
            &mut a_seen,
            "B's turn finished (seen by A)",
            |e| is_turn_finished(e, 2),
        )
        .await;
        assert!(
            b_seen.iter().any(|e| matches!(e, ClientEvent::Event(ev) if ev.turn == 2
                && matches!(&ev.kind, EventKind::TurnFinished { outcome, .. } if matches!(outcome, TurnOutcome::Completed)))),
            "{b_seen:#?}"
        );
        assert_eq!(rig.mock.request_count(), 2);

        // The host journal: two turns, one per driver, both complete, nothing from the
        // refused submissions.
        let events: Vec<Value> = rig
            .host_journals()
            .iter()
            .flat_map(|j| journal_events(j))
            .collect();
        let users: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == "user_turn")
            .filter_map(|e| e["text"].as_str())
            .collect();
        assert_eq!(users, vec!["stream slowly", "my turn"]);
        let outcomes: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == "turn_finished")
            .filter_map(|e| e["outcome"].as_str())
            .collect();
        assert_eq!(outcomes, vec!["completed", "completed"]);
        let replies: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == "assistant_message")
            .filter_map(|e| e["content"].as_str())
            .collect();
        assert_eq!(
            replies,
            vec![chunks.concat(), "from the new driver".to_string()]
        );
    });
}
