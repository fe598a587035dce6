//! Goals end to end, headless (real `reasonix` → real `reasonix-remote` over pipes → the
//! scripted SSE mock provider): `run --goal` runs turn after turn until the model reports the
//! goal complete, with exactly one provider request per step and each tool run once, and
//! returns; `reasonix sessions` shows the goal and its progress; a `[agent]` token budget
//! pauses the goal (exit 3) and `run --continue --goal resume` carries it to completion.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;

use std::process::Command;

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

use common::{json_lines, LocalRig as Env};

fn setup(base_url: &str, agent: &str) -> Env {
    let config = common::mock_config(base_url, "m", "RX_GOAL_KEY", agent);
    Env::with_config(&config, "RX_GOAL_KEY", "sk-goal")
}

fn command(env: &Env, args: &[&str]) -> Command {
    common::headless(env, args, 2)
}

fn call(id: &str, name: &str, args: Value) -> MockToolCall {
    MockToolCall::new(id, name, &args.to_string())
}

fn report(id: &str, status: &str, evidence: &str) -> MockReply {
    MockReply::tool_calls(
        vec![call(
            id,
            "update_goal",
            json!({"status": status, "evidence": evidence}),
        )],
        3,
    )
}

fn output(out: &std::process::Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The goal of the only session, as `reasonix sessions --json` lists it.
fn listed_goal(env: &Env) -> Value {
    let out = command(env, &["sessions", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", output(&out));
    let sessions = json_lines(&out.stdout);
    assert_eq!(sessions.len(), 1, "{}", output(&out));
    sessions[0]["goal"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_goal_runs_turns_until_complete_with_one_request_per_step() {
    let mock = MockProvider::start(vec![
        // Turn 1: a tool, the report, the answer.
        MockReply::tool_calls(
            vec![call(
                "b1",
                "bash",
                json!({"command": "echo run >> runs.txt"}),
            )],
            3,
        ),
        report("u1", "continue", "wrote runs.txt once"),
        MockReply::text(&["Turn one done."]),
        // Turn 2 (started by the host): another tool, then complete.
        MockReply::tool_calls(
            vec![call("r1", "read_file", json!({"path": "runs.txt"}))],
            2,
        ),
        report("u2", "complete", "runs.txt holds exactly one line"),
        MockReply::text(&["All done."]),
    ])
    .await;
    let env = setup(&mock.base_url(), "");
    let out = command(
        &env,
        &["run", "--yolo", "--json", "--goal", "write runs.txt once"],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output(&out));
    // Exactly one provider request per step, each tool run once.
    assert_eq!(mock.request_count(), 6, "{}", output(&out));
    assert_eq!(
        std::fs::read_to_string(env.ws.join("runs.txt")).unwrap(),
        "run\n"
    );
    let events = json_lines(&out.stdout);
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_finished")
        .collect();
    let ids: Vec<&str> = finished
        .iter()
        .map(|e| e["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["b1", "u1", "r1", "u2"], "{}", output(&out));
    let goal: Vec<&Value> = events.iter().filter(|e| e["type"] == "goal").collect();
    assert!(
        goal.iter().any(|g| g["goal"]["event"] == "started"),
        "{}",
        output(&out)
    );
    let last = goal.last().unwrap();
    assert_eq!(last["goal"]["event"], "status");
    assert_eq!(last["goal"]["status"], "complete");
    assert_eq!(last["goal"]["detail"], "runs.txt holds exactly one line");
    // Two turns, each with its own turn_finished record.
    let ends = events
        .iter()
        .filter(|e| e["type"] == "turn_finished")
        .count();
    assert_eq!(ends, 2, "{}", output(&out));
    // The second turn's message was made by the host from the objective.
    let reqs = mock.requests();
    assert!(reqs[3].body["messages"]
        .to_string()
        .contains("Continue toward the goal: write runs.txt once"));

    // `reasonix sessions` shows the goal and its progress.
    let g = listed_goal(&env);
    assert_eq!(g["status"], "complete", "{g}");
    assert_eq!(g["turns"], 2);
    assert_eq!(g["progress"], "runs.txt holds exactly one line");
    let table = command(&env, &["sessions"]).output().unwrap();
    let table = String::from_utf8_lossy(&table.stdout).to_string();
    assert!(
        table.contains("goal complete (2 turns") && table.contains("write runs.txt once"),
        "{table}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_budget_pauses_the_goal_and_resume_completes_it() {
    let used = |n: u64| json!({"prompt_tokens": n, "completion_tokens": 0});
    let mock = MockProvider::start(vec![
        report("u1", "continue", "step one").with_usage(used(500)),
        MockReply::text(&["one"]).with_usage(used(600)),
    ])
    .await;
    let env = setup(&mock.base_url(), "[agent]\ngoal_token_budget = 1000\n");
    let out = command(&env, &["run", "--yolo", "--json", "--goal", "two steps"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "paused: {}", output(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("token budget reached: 1100 of 1000") || {
            let s = String::from_utf8_lossy(&out.stdout);
            s.contains("token budget reached: 1100 of 1000")
        },
        "{}",
        output(&out)
    );
    assert_eq!(mock.request_count(), 2);
    let g = listed_goal(&env);
    assert_eq!(g["status"], "budget_paused", "{g}");

    // Resume: the same budget again, counted from the resume.
    mock.push(vec![
        report("u2", "complete", "both steps done").with_usage(used(10)),
        MockReply::text(&["two"]).with_usage(used(10)),
    ]);
    let out = command(
        &env,
        &["run", "--yolo", "--json", "--continue", "--goal", "resume"],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output(&out));
    assert_eq!(mock.request_count(), 4);
    let g = listed_goal(&env);
    assert_eq!(g["status"], "complete", "{g}");
    assert_eq!(g["turns"], 2);

    // Resuming an ended goal is refused with a clear message.
    let out = command(&env, &["run", "--continue", "--goal", "resume"])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no paused goal to resume"),
        "{}",
        output(&out)
    );
}
