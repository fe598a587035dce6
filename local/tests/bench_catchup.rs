//! Benchmark (ignored by default; run with `bench/catchup_bench.sh`): a client that lost its
//! link for good re-attaches and catches up a session of 100k journal events from the host.
//! Prints events/s and the time to "caught up".

mod common;

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{host_bin, LocalRig};
use reasonix_forward::proto::{OpenSession, Request, Response, SessionSettings};
use reasonix_local::client::ClientEvent;
use reasonix_testkit::mock_provider::{MockProvider, MockReply};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run bench/catchup_bench.sh"]
async fn journal_catchup_of_100k_events() {
    let n: u64 = std::env::var("CATCHUP_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let mock = MockProvider::start(vec![MockReply::text(&["seed"])]).await;
    let rig = LocalRig::new(&mock.base_url(), "RX_B_KEY", "sk-bench");
    let (home, ws) = (rig.home.clone(), rig.ws.clone());
    // One real turn creates the session and its journal.
    let out = Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .args(["run", "--json", "seed"])
        .current_dir(&ws)
        .env("REASONIX_HOME", &home)
        .env("REASONIX_REMOTE_BIN", host_bin())
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("run");
    assert!(out.status.success());
    let session = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "session")
        .and_then(|e| e["session"].as_str().map(String::from))
        .expect("session id");
    // Stop the daemon, then grow the journal to n events (a long session).
    let sessions = home.join("sessions");
    let key_dir = std::fs::read_dir(&sessions)
        .expect("sessions")
        .flatten()
        .next()
        .expect("workspace dir")
        .path();
    let marker: Value =
        serde_json::from_slice(&std::fs::read(key_dir.join("daemon.json")).expect("marker"))
            .expect("marker json");
    let pid = marker["pid"].as_u64().expect("pid") as i32;
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let journal = key_dir.join(format!("{session}.jsonl"));
    let existing = std::fs::read_to_string(&journal).expect("journal");
    let mut next = existing.lines().count() as u64 + 1;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .expect("append");
    let mut buf = Vec::new();
    while next <= n {
        let ev = json!({"seq": next, "ts": "2026-11-30T00:00:00.000Z", "turn": 1,
                        "type": "text_delta", "text": format!("token {next} ")});
        buf.extend_from_slice(ev.to_string().as_bytes());
        buf.push(b'\n');
        next += 1;
    }
    f.write_all(&buf).expect("write");
    drop(f);

    // A client with nothing catches up from event 0.
    let config = rig.config();
    let started = Instant::now();
    let (client, mut events) = rig.client(&config);
    let opened = client
        .request(Request::OpenSession(OpenSession {
            session: Some(session),
            settings: SessionSettings::default(),
            ..OpenSession::default()
        }))
        .await
        .expect("open");
    let opened_at = started.elapsed();
    let Response::SessionOpened(o) = opened else {
        panic!("not opened")
    };
    let mut last = 0;
    let mut count = 0u64;
    while last < o.last_seq {
        match tokio::time::timeout(Duration::from_secs(120), events.recv()).await {
            Ok(Some(ClientEvent::Event(e))) => {
                assert_eq!(e.seq, last + 1, "events arrive in order, none missing");
                last = e.seq;
                count += 1;
            }
            Ok(Some(_)) => {}
            _ => panic!("catch-up stalled at {last} of {}", o.last_seq),
        }
    }
    let total = started.elapsed();
    println!(
        "catch-up: {count} journal events in {:.2}s ({:.0} events/s); daemon start + attach + open {:.2}s",
        total.as_secs_f64(),
        count as f64 / total.as_secs_f64(),
        opened_at.as_secs_f64()
    );
    if let Ok(Response::Status(s)) = client.request(Request::Status).await {
        unsafe {
            libc::kill(s.pid as i32, libc::SIGTERM);
        }
    }
}
