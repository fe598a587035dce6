//! Subagents end to end in local mode: the real `reasonix` binary, the real
//! `reasonix-remote` daemon over pipes, the scripted mock provider over HTTP.
//!
//! - A `task` child runs a tool and its answer comes back as the parent's tool result; its
//!   model steps reached the provider through the laptop's gateway under the child's own
//!   byte-stable prefix; `run --json` shows its events under the parent's call id and sums
//!   its usage into the turn.
//! - A fleet runs in a valid topological order with at most `[agent] max_subagents` children
//!   at once, as the session journal on disk shows.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;

use std::path::{Path, PathBuf};

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

const KEY: &str = "sk-test-DELEGATE-9f8e7d6c5b4a";

use common::{text, LocalRig as Env};

fn setup(base_url: &str, agent: &str) -> Env {
    let config = common::mock_config(base_url, "mock-model", "RX_DELEGATE_KEY", agent);
    Env::with_config(&config, "RX_DELEGATE_KEY", KEY)
}

async fn run(env: &Env, args: &[&str]) -> std::process::Output {
    common::run_async(env, args, 30).await
}

fn lines(out: &std::process::Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn usage(prompt: u64) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": 5,
           "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": prompt})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_child_runs_a_tool_through_the_laptop_gateway_and_answers_its_parent() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_t",
                "task",
                &json!({"prompt": "What does notes.txt say?", "description": "read the notes"})
                    .to_string(),
            )],
            3,
        )
        .with_usage(usage(1000)),
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_c",
                "read_file",
                &json!({"path": "notes.txt"}).to_string(),
            )],
            2,
        )
        .with_usage(usage(300)),
        MockReply::text(&["notes.txt says ", "ALPHA-42"]).with_usage(usage(400)),
        MockReply::text(&["The child found ALPHA-42."]).with_usage(usage(1100)),
    ])
    .await;
    let env = setup(&mock.base_url(), "");
    std::fs::write(env.ws.join("notes.txt"), "ALPHA-42\n").unwrap();
    let out = run(
        &env,
        &[
            "run",
            "--json",
            "--full-output",
            "ask a subagent what notes.txt says",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    let ls = lines(&out);
    // The parent's tool result is the child's answer.
    let finished = ls
        .iter()
        .find(|l| l["type"] == "tool_finished" && l["call_id"] == "call_t")
        .unwrap_or_else(|| panic!("{}", text(&out)));
    let result = finished["output"].as_str().unwrap();
    assert!(result.contains("notes.txt says ALPHA-42"), "{result}");
    assert!(
        result.contains("subagent sa-1 (general) completed; 2 model steps"),
        "{result}"
    );
    // The child's events, under the parent's call id: its read_file ran once and saw the file.
    let child: Vec<&Value> = ls
        .iter()
        .filter(|l| l["type"] == "subagent" && l["call_id"] == "call_t" && l["child"] == "sa-1")
        .collect();
    let reads: Vec<&&Value> = child
        .iter()
        .filter(|l| l["event"]["type"] == "tool_finished" && l["event"]["call_id"] == "call_c")
        .collect();
    assert_eq!(reads.len(), 1, "{}", text(&out));
    assert!(reads[0]["event"]["output"]
        .as_str()
        .unwrap()
        .contains("ALPHA-42"));
    assert!(child.iter().any(|l| l["event"]["type"] == "turn_finished"));
    // The child's usage is the turn's too: 1000 + 300 + 400 + 1100.
    let end = ls.iter().find(|l| l["type"] == "turn_finished").unwrap();
    assert_eq!(end["usage"]["prompt_tokens"], 2800, "{end}");
    assert_eq!(end["requests"], 4, "{end}");

    // Four provider requests, each through the laptop's gateway with the laptop's key.
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 4);
    for r in &reqs {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
    }
    let (c1, c2) = (reqs[1].messages(), reqs[2].messages());
    let sys = c1[0]["content"].as_str().unwrap();
    assert!(sys.contains("<subagent profile=\"general\">"), "{sys}");
    assert!(!reqs[0].messages()[0].to_string().contains("<subagent"));
    assert_eq!(c1[1]["content"], "What does notes.txt say?");
    assert_eq!(
        c2[..c1.len()],
        c1[..],
        "the child's second request extends its first"
    );
    // The parent's second request holds the child's answer, not its transcript.
    let p2 = reqs[3]
        .messages()
        .iter()
        .map(Value::to_string)
        .collect::<String>();
    assert!(p2.contains("notes.txt says ALPHA-42") && !p2.contains("call_c"));
}

/// The events of the newest journal under `home` (the session's).
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_runs_in_topological_order_within_the_configured_concurrency() {
    // root → four independent items → join; at most 2 children at once by config.
    let mut replies = vec![MockReply::tool_calls(
        vec![MockToolCall::new(
            "call_f",
            "fleet",
            &json!({"items": [
                {"id": "join", "prompt": "join them", "depends_on": ["w1", "w2", "w3", "w4"]},
                {"id": "w1", "prompt": "part 1", "depends_on": ["root"]},
                {"id": "w2", "prompt": "part 2", "depends_on": ["root"]},
                {"id": "root", "prompt": "start"},
                {"id": "w3", "prompt": "part 3", "depends_on": ["root"]},
                {"id": "w4", "prompt": "part 4", "depends_on": ["root"], "profile": "explore"},
            ]})
            .to_string(),
        )],
        3,
    )];
    for _ in 0..6 {
        replies
            .push(MockReply::text(&["item ", "done"]).slow(std::time::Duration::from_millis(100)));
    }
    replies.push(MockReply::text(&["fleet finished"]));
    let mock = MockProvider::start(replies).await;
    let env = setup(&mock.base_url(), "[agent]\nmax_subagents = 2\n");
    let out = run(&env, &["run", "--json", "--full-output", "run the fleet"]).await;
    assert!(out.status.success(), "{}", text(&out));
    let ls = lines(&out);
    let f = ls
        .iter()
        .find(|l| l["type"] == "tool_finished" && l["call_id"] == "call_f")
        .unwrap();
    assert!(
        f["output"]
            .as_str()
            .unwrap()
            .starts_with("6 of 6 fleet items completed."),
        "{f}"
    );
    assert_eq!(
        mock.requests().len(),
        8,
        "one request per child, none repeated"
    );

    // From the journal: each child's start and end, by item (its task text).
    let events = journal_events(&env.home);
    let mut spans: Vec<(String, u64, Option<u64>)> = Vec::new(); // (task, start seq, end seq)
    let mut child_task: std::collections::HashMap<String, usize> = Default::default();
    let mut running = 0i32;
    let mut most = 0i32;
    for e in &events {
        if e["type"] != "subagent" {
            continue;
        }
        let seq = e["seq"].as_u64().unwrap();
        let child = e["child"].as_str().unwrap().to_string();
        let inner = &e["event"];
        match inner["type"].as_str().unwrap() {
            "user_turn" => {
                let task = inner["text"].as_str().unwrap().to_string();
                child_task.insert(child, spans.len());
                spans.push((task, seq, None));
                running += 1;
                most = most.max(running);
            }
            "turn_finished" => {
                let i = child_task[&child];
                spans[i].2 = Some(seq);
                running -= 1;
            }
            _ => {}
        }
    }
    assert_eq!(spans.len(), 6, "{spans:?}");
    assert!(
        most <= 2,
        "{most} children ran at once with max_subagents = 2"
    );
    assert_eq!(most, 2, "independent items did run side by side");
    let span = |key: &str| spans.iter().find(|s| s.0.starts_with(key)).unwrap().clone();
    let root = span("start");
    let join = span("join them");
    for p in ["part 1", "part 2", "part 3", "part 4"] {
        let s = span(p);
        assert!(s.1 > root.2.unwrap(), "{p} started before root ended");
        assert!(join.1 > s.2.unwrap(), "join started before {p} ended");
    }
    assert!(
        join.0.contains("### w1\nitem done"),
        "the join got its inputs: {}",
        join.0
    );
}
