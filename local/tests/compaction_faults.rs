//! `/compact` over SSH under faults (issue 14): a real sshd, the real client and host binary,
//! the scripted mock provider, iptables inside a private network namespace (the rig of
//! `reconnect_faults`). A link blackhole during the summary request: the summary is asked
//! for once and journaled once. `kill -9` of the client during the summary: the host finishes
//! the compaction once through the next client, which then works on the compacted state.

mod reconnect_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use reasonix_testkit::mock_provider::{MockReply, RecordedRequest};
use reasonix_testkit::netfault::Fault;
use reconnect_common::*;
use serde_json::Value;

/// Scaled liveness (500 ms heartbeat / 2 s dead).
const SHORT: (u64, u64) = (HEARTBEAT_MS, DEAD_AFTER_MS);
/// Blackhole length: longer than the 5 s summary stream, so it ends inside the blackhole.
const BLACKHOLE: Duration = Duration::from_secs(8);
/// Hang guard for anything that includes the first SSH connect and install.
const SETUP_GUARD: Duration = Duration::from_secs(90);
const GUARD: Duration = Duration::from_secs(45);
const FOCUS: &str = "the retry design";

fn is_summary_request(r: &RecordedRequest) -> bool {
    r.messages().last().is_some_and(|m| {
        m["content"]
            .as_str()
            .unwrap_or("")
            .contains("<compaction-request>")
    })
}

fn summary_chunks() -> Vec<String> {
    let mut c = vec!["## Goal\n- ".to_string()];
    c.extend((0..19).map(|i| format!("s{i:02} ")));
    c
}

async fn until(guard: Duration, what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + guard;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn session_events(rig: &Rig) -> Vec<Value> {
    rig.host_journals()
        .iter()
        .flat_map(|j| journal_events(j))
        .collect()
}

/// Two short turns through one client each, so the session has an older part to summarise.
async fn two_turns(rig: &Rig, port: u16) {
    for (n, extra) in [(1, &[][..]), (2, &["--continue"][..])] {
        let mut c = rig.spawn_client(port, SHORT, extra, &format!("turn {n}"));
        let status = c.wait_exit(SETUP_GUARD).await;
        assert!(status.success(), "turn {n}: {}", c.transcript());
    }
}

#[test]
fn blackhole_during_the_summary_request_asks_once_and_compacts_once() {
    in_netns(|ns| async move {
        let chunks = summary_chunks();
        let rig = Rig::new(
            Arc::clone(&ns),
            vec![
                MockReply::text(&["first answer"]),
                MockReply::text(&["second answer"]),
                // 20 chunks 250 ms apart: the summary ends (on the laptop) in the blackhole.
                MockReply::text(&chunks).slow(Duration::from_millis(250)),
            ],
        )
        .await;
        let port = rig.sshd.port();
        two_turns(&rig, port).await;
        let mut c = rig.spawn_client(port, SHORT, &["--continue"], &format!("/compact {FOCUS}"));
        until(SETUP_GUARD, "the summary request", || {
            rig.mock.requests().iter().any(is_summary_request)
        })
        .await;
        let fault = ns.fault(Fault::Blackhole, port).expect("blackhole");
        let (j, _) = c
            .wait_for(0, GUARD, "a reconnecting event", |v| {
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
        let summaries: Vec<RecordedRequest> = rig
            .mock
            .requests()
            .into_iter()
            .filter(is_summary_request)
            .collect();
        assert_eq!(summaries.len(), 1, "asked once: {transcript}");
        assert_eq!(rig.mock.request_count(), 3, "{transcript}");
        assert!(summaries[0]
            .messages()
            .last()
            .is_some_and(|m| m["content"].as_str().unwrap_or("").contains(FOCUS)));
        let printed = out
            .iter()
            .filter(|v| v["type"] == "compacted" && v["kind"] == "summary")
            .count();
        assert_eq!(printed, 1, "{transcript}");
        assert!(
            out.iter().any(|v| v["type"] == "compact_finished"),
            "{transcript}"
        );
        // The host journal holds one summary, with the whole streamed text in it.
        let events = session_events(&rig);
        let journaled: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "compacted" && e["kind"] == "summary")
            .collect();
        assert_eq!(journaled.len(), 1, "{events:?}");
        assert!(journaled[0]["summary"]
            .as_str()
            .unwrap_or("")
            .contains(chunks.concat().trim_end()));
    });
}

#[test]
fn kill_9_of_the_client_during_compaction_finishes_it_once_through_the_next_client() {
    in_netns(|ns| async move {
        let chunks = summary_chunks();
        let rig = Rig::new(
            Arc::clone(&ns),
            vec![
                MockReply::text(&["first answer"]),
                MockReply::text(&["second answer"]),
                // The summary the killed client never delivers (long enough to be cut).
                MockReply::text(&chunks).slow(Duration::from_millis(500)),
                // Re-issued through the next client.
                MockReply::text(&chunks),
                MockReply::text(&["third answer"]),
            ],
        )
        .await;
        let port = rig.sshd.port();
        two_turns(&rig, port).await;
        let mut c1 = rig.spawn_client(port, SHORT, &["--continue"], "/compact");
        until(SETUP_GUARD, "the summary request", || {
            rig.mock.requests().iter().any(is_summary_request)
        })
        .await;
        c1.kill9();
        // Nothing is compacted while no laptop can reach the model.
        assert!(!session_events(&rig)
            .iter()
            .any(|e| e["type"] == "compacted" && e["kind"] == "summary"));

        // The next client's turn waits for the compaction (the host is busy), which the
        // host re-issues through this client's gateway; then the turn runs on the result.
        let mut c2 = rig.spawn_client(port, SHORT, &["--continue"], "turn 3");
        let status = c2.wait_exit(Duration::from_secs(60)).await;
        let transcript = c2.transcript();
        assert!(status.success(), "{transcript}");
        assert_eq!(text_of(&c2.values()), "third answer", "{transcript}");
        let reqs = rig.mock.requests();
        assert_eq!(
            reqs.iter().filter(|r| is_summary_request(r)).count(),
            2,
            "the cut summary and its one re-issue: {transcript}"
        );
        let events = session_events(&rig);
        let journaled: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "compacted" && e["kind"] == "summary")
            .collect();
        assert_eq!(journaled.len(), 1, "compacted once: {events:?}");
        assert_eq!(journaled[0]["trigger"], "user");
        // The new client's request is built on the compacted state.
        let last = reqs.last().expect("requests").messages();
        assert!(
            last.iter().any(|m| m["content"]
                .as_str()
                .unwrap_or("")
                .starts_with("<compaction-summary>")),
            "{last:?}"
        );
        assert!(!is_summary_request(reqs.last().expect("requests")));
    });
}
