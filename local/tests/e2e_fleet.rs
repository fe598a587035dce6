//! Fleets and parallel children at scale, end to end in local mode (#33 numbers): the real
//! `reasonix` binary, the real `reasonix-remote` daemon over pipes, the scripted mock
//! provider over HTTP.
//!
//! - A 64-item fleet with dependencies runs in a valid topological order with at most the
//!   configured concurrency, asserted from the session journal on disk (not timed).
//! - `bench_parallel_tasks` (ignored; `bench/parallel_tasks.sh`): `parallel_tasks` of 4
//!   writing children (disjoint `write_paths`, `max_subagent_writers = 4`) each running
//!   `sleep 3` in bash; prints the tool's time over the slowest
//!   child's, both measured from the journal of the same run.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

const KEY: &str = "sk-test-FLEET-0a9b8c7d6e5f";

use common::{text, LocalRig as Env};

fn setup(base_url: &str, agent: &str) -> Env {
    let config = common::mock_config(base_url, "mock-model", "RX_FLEET_KEY", agent);
    Env::with_config(&config, "RX_FLEET_KEY", KEY)
}

async fn reasonix(env: &Env, args: &[&str]) -> std::process::Output {
    common::run_async(env, args, 30).await
}

/// The events of the one session journal under `home` that has subagents.
fn journal_events(home: &Path) -> Vec<Value> {
    let mut found: Vec<PathBuf> = Vec::new();
    let mut dirs = vec![home.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl")
                && std::fs::read_to_string(&p).is_ok_and(|t| t.contains("\"subagent\""))
            {
                found.push(p);
            }
        }
    }
    assert_eq!(
        found.len(),
        1,
        "one session journal with subagents: {found:?}"
    );
    std::fs::read_to_string(&found[0])
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// One child's life in the journal.
#[derive(Debug, Clone)]
struct Span {
    task: String,
    start: u64,
    end: Option<u64>,
    start_ts: String,
    end_ts: Option<String>,
}

/// Every child's span (start: its `user_turn`, end: its `turn_finished`), in start order,
/// and the most children running at once by the journal's order.
fn child_spans(events: &[Value]) -> (Vec<Span>, usize) {
    let mut spans: Vec<Span> = Vec::new();
    let mut by_child: HashMap<String, usize> = HashMap::new();
    let (mut running, mut most) = (0usize, 0usize);
    for e in events {
        if e["type"] != "subagent" {
            continue;
        }
        let seq = e["seq"].as_u64().unwrap();
        let ts = e["ts"].as_str().unwrap_or_default().to_string();
        let child = e["child"].as_str().unwrap().to_string();
        let inner = &e["event"];
        match inner["type"].as_str().unwrap() {
            "user_turn" => {
                by_child.insert(child, spans.len());
                spans.push(Span {
                    task: inner["text"].as_str().unwrap().to_string(),
                    start: seq,
                    end: None,
                    start_ts: ts,
                    end_ts: None,
                });
                running += 1;
                most = most.max(running);
            }
            "turn_finished" => {
                let s = &mut spans[by_child[&child]];
                assert!(s.end.is_none(), "a child ended twice: {s:?}");
                s.end = Some(seq);
                s.end_ts = Some(ts);
                running -= 1;
            }
            _ => {}
        }
    }
    (spans, most)
}

/// The dependencies of item `i` of the 64-item fleet: a binary tree plus a chain three back.
fn deps_of(i: usize) -> Vec<usize> {
    let mut d = Vec::new();
    if i > 0 {
        d.push((i - 1) / 2);
    }
    if i >= 3 && !d.contains(&(i - 3)) {
        d.push(i - 3);
    }
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_64_item_fleet_runs_in_topological_order_within_the_configured_concurrency() {
    const N: usize = 64;
    const MAX: usize = 4;
    // Listed in reverse so the order given is not already a valid one.
    let items: Vec<Value> = (0..N)
        .rev()
        .map(|i| {
            let deps: Vec<String> = deps_of(i).iter().map(|d| format!("i{d:02}")).collect();
            json!({"id": format!("i{i:02}"), "prompt": format!("item-{i:02} work"), "depends_on": deps, "profile": "explore"})
        })
        .collect();
    let mut replies = vec![MockReply::tool_calls(
        vec![MockToolCall::new(
            "call_f",
            "fleet",
            &json!({ "items": items }).to_string(),
        )],
        3,
    )];
    for _ in 0..N {
        replies.push(MockReply::text(&["done"]).slow(std::time::Duration::from_millis(30)));
    }
    replies.push(MockReply::text(&["the fleet finished"]));
    let mock = MockProvider::start(replies).await;
    let env = setup(
        &mock.base_url(),
        &format!("[agent]\nmax_subagents = {MAX}\n"),
    );
    let out = reasonix(&env, &["run", "--json", "run the fleet"]).await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("64 of 64 fleet items completed."),
        "{}",
        text(&out)
    );
    assert_eq!(
        mock.requests().len(),
        N + 2,
        "one request per child, none repeated"
    );

    let (spans, most) = child_spans(&journal_events(&env.home));
    assert_eq!(spans.len(), N, "each item ran once");
    assert!(
        most <= MAX,
        "{most} children at once with max_subagents = {MAX}"
    );
    assert!(most >= 2, "independent items ran side by side ({most})");
    let span_of = |i: usize| -> &Span {
        let key = format!("item-{i:02} ");
        let found: Vec<&Span> = spans.iter().filter(|s| s.task.starts_with(&key)).collect();
        assert_eq!(found.len(), 1, "item {i} ran once");
        found[0]
    };
    for i in 0..N {
        let s = span_of(i);
        for d in deps_of(i) {
            let dep = span_of(d);
            assert!(
                s.start > dep.end.expect("every child ended"),
                "item {i} started (seq {}) before its dependency {d} ended ({:?})",
                s.start,
                dep.end
            );
            assert!(
                s.task.contains(&format!("### i{d:02}")),
                "item {i} got {d}'s answer"
            );
        }
    }
}

/// Seconds since midnight of an RFC 3339 UTC timestamp (`…THH:MM:SS[.fff]Z`).
fn secs_of(ts: &str) -> f64 {
    let t = ts.split('T').nth(1).unwrap_or_default();
    let t = t.trim_end_matches('Z');
    let t = t.split(['+', '-']).next().unwrap_or_default();
    let mut parts = t.split(':');
    let h: f64 = parts.next().unwrap().parse().unwrap();
    let m: f64 = parts.next().unwrap().parse().unwrap();
    let s: f64 = parts.next().unwrap().parse().unwrap();
    h * 3600.0 + m * 60.0 + s
}

fn elapsed(from: &str, to: &str) -> f64 {
    let d = secs_of(to) - secs_of(from);
    if d < 0.0 {
        d + 86_400.0
    } else {
        d
    }
}

/// `bench/parallel_tasks.sh`: 4 children each running `sleep 3` at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: bench/parallel_tasks.sh"]
async fn bench_parallel_tasks() {
    let tasks: Vec<Value> = (1..=4)
        .map(|i| {
            json!({"prompt": format!("sleeper {i}"), "description": format!("sleeper {i}"),
            "write_paths": [format!("w{i}")]})
        })
        .collect();
    let mut replies = vec![MockReply::tool_calls(
        vec![MockToolCall::new(
            "call_p",
            "parallel_tasks",
            &json!({ "tasks": tasks }).to_string(),
        )],
        2,
    )];
    // Each child's first request gets a bash call (the four arrive before any second one).
    for i in 1..=4 {
        replies.push(MockReply::tool_calls(
            vec![MockToolCall::new(
                &format!("call_b{i}"),
                "bash",
                &json!({"command": format!("sleep 3; echo slept-{i}")}).to_string(),
            )],
            1,
        ));
    }
    for _ in 1..=4 {
        replies.push(MockReply::text(&["slept"]));
    }
    replies.push(MockReply::text(&["all four slept"]));
    let mock = MockProvider::start(replies).await;
    // Four writers with disjoint write paths may run together once the writer limit allows.
    let env = setup(&mock.base_url(), "[agent]\nmax_subagent_writers = 4\n");
    for i in 1..=4 {
        std::fs::create_dir_all(env.ws.join(format!("w{i}"))).unwrap();
    }
    let out = reasonix(&env, &["run", "--json", "--yolo", "sleep four times"]).await;
    assert!(out.status.success(), "{}", text(&out));
    let events = journal_events(&env.home);
    let (spans, most) = child_spans(&events);
    assert_eq!(spans.len(), 4);
    assert_eq!(most, 4, "the four children ran at once");
    let slowest = spans
        .iter()
        .map(|s| elapsed(&s.start_ts, s.end_ts.as_deref().unwrap()))
        .fold(0.0f64, f64::max);
    let ts_of = |kind: &str| -> String {
        events
            .iter()
            .find(|e| e["type"] == kind && e["call_id"] == "call_p")
            .unwrap_or_else(|| panic!("no {kind} of call_p"))["ts"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let whole = elapsed(&ts_of("tool_started"), &ts_of("tool_finished"));
    let ratio = whole / slowest;
    println!(
        "parallel_tasks: 4 children x sleep 3: tool {whole:.3} s, slowest child {slowest:.3} s, ratio {ratio:.3} (target <= 1.5)"
    );
    assert!(slowest >= 3.0, "each child slept 3 s ({slowest})");
}
