//! `reasonix subagent run|try PROFILE "task"` end to end in local mode (#33 §3): the real
//! `reasonix` binary, the real `reasonix-remote` daemon over pipes, the scripted mock
//! provider over HTTP.
//!
//! - `try explore`: the child is the whole turn (no model step of the parent: every
//!   provider request is the child's, under the explore profile with read-only tools); its
//!   answer is printed; `--json` shows its events under the call `sub-<request id>`.
//! - `run general --auto`: a writing child changes the workspace; the next `run --continue`
//!   holds the task and the answer in the conversation (a valid replayed history).
//! - An unknown profile is refused before anything runs, listing the known ones.
//! - A child's writes (file tools and bash) belong to the parent turn's checkpoint:
//!   `reasonix rewind` undoes them, a `task` child's and a `subagent run` child's.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

const KEY: &str = "sk-test-SUBCLI-1a2b3c4d5e6f";

use common::{text, LocalRig as Env};

fn setup(base_url: &str) -> Env {
    let config = common::mock_config(base_url, "mock-model", "RX_SUBCLI_KEY", "");
    Env::with_config(&config, "RX_SUBCLI_KEY", KEY)
}

async fn reasonix(env: &Env, args: &[&str]) -> std::process::Output {
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

fn tool_names(req: &reasonix_testkit::mock_provider::RecordedRequest) -> Vec<String> {
    req.body["tools"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subagent_try_runs_a_read_only_child_as_the_turn_and_prints_its_answer() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_r",
                "read_file",
                &json!({"path": "notes.txt"}).to_string(),
            )],
            2,
        )
        .with_usage(usage(300)),
        MockReply::text(&["notes.txt ", "holds BRAVO-7"]).with_usage(usage(400)),
        // The text run (no --json): one step.
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_r2",
                "read_file",
                &json!({"path": "notes.txt"}).to_string(),
            )],
            1,
        ),
        MockReply::text(&["again: BRAVO-7"]),
    ])
    .await;
    let env = setup(&mock.base_url());
    std::fs::write(env.ws.join("notes.txt"), "BRAVO-7\n").unwrap();
    let out = reasonix(
        &env,
        &[
            "subagent",
            "try",
            "explore",
            "--json",
            "What does notes.txt hold?",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    let ls = lines(&out);
    // The turn's call is the host's own `read_only_task`, never a model's.
    let started = ls
        .iter()
        .find(|l| l["type"] == "tool_started")
        .unwrap_or_else(|| panic!("{}", text(&out)));
    assert_eq!(started["name"], "read_only_task", "{started}");
    let call_id = started["call_id"].as_str().unwrap();
    assert!(call_id.starts_with("sub-"), "{call_id}");
    let args: Value = serde_json::from_str(started["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args["profile"], "explore");
    // The child's events are under that call; its read ran once.
    let child: Vec<&Value> = ls
        .iter()
        .filter(|l| l["type"] == "subagent" && l["call_id"] == call_id)
        .collect();
    let reads = child
        .iter()
        .filter(|l| l["event"]["type"] == "tool_finished" && l["event"]["call_id"] == "call_r")
        .count();
    assert_eq!(reads, 1, "{}", text(&out));
    // The answer is the turn's text.
    let said: String = ls
        .iter()
        .filter(|l| l["type"] == "text")
        .filter_map(|l| l["text"].as_str())
        .collect();
    assert_eq!(said, "notes.txt holds BRAVO-7");
    let end = ls.iter().find(|l| l["type"] == "turn_finished").unwrap();
    assert_eq!(end["outcome"], "completed", "{end}");
    assert_eq!(end["requests"], 2, "only the child's steps: {end}");
    assert_eq!(end["usage"]["prompt_tokens"], 700, "{end}");

    // Two provider requests, both the child's: the explore profile, read-only tools only.
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2, "no model step of the parent");
    for r in &reqs {
        let sys = r.messages()[0]["content"].as_str().unwrap().to_string();
        assert!(sys.contains("<subagent profile=\"explore\">"), "{sys}");
        let tools = tool_names(r);
        assert!(tools.iter().any(|t| t == "read_file"), "{tools:?}");
        for w in ["write_file", "edit_file", "bash", "task"] {
            assert!(
                !tools.iter().any(|t| t == w),
                "{w} offered to a try: {tools:?}"
            );
        }
    }
    assert!(reqs[0].messages()[1]["content"]
        .as_str()
        .unwrap()
        .starts_with("What does notes.txt hold?"));

    // Without --json: the answer on stdout, the tool line on stderr.
    let out = reasonix(&env, &["subagent", "try", "explore", "notes again?"]).await;
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("again: BRAVO-7"), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("read_only_task"),
        "{}",
        text(&out)
    );
    assert_eq!(mock.requests().len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subagent_run_writes_with_auto_and_the_session_keeps_task_and_answer() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_w",
                "write_file",
                &json!({"path": "out.txt", "content": "CHARLIE-9\n"}).to_string(),
            )],
            2,
        ),
        MockReply::text(&["wrote out.txt"]),
        // `run --continue`: the parent's own step.
        MockReply::text(&["noted"]),
    ])
    .await;
    let env = setup(&mock.base_url());
    let out = reasonix(
        &env,
        &[
            "subagent",
            "run",
            "general",
            "--auto",
            "write CHARLIE-9 to out.txt",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("wrote out.txt"),
        "{}",
        text(&out)
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join("out.txt")).unwrap(),
        "CHARLIE-9\n"
    );
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    assert!(tool_names(&reqs[0]).iter().any(|t| t == "write_file"));

    // The session's conversation holds the run: user task, the delegated call and its
    // result, the answer; the next turn's request is a valid history with all of them.
    let out = reasonix(&env, &["run", "--continue", "--json", "thanks"]).await;
    assert!(out.status.success(), "{}", text(&out));
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3);
    let msgs = reqs[2].messages();
    assert!(
        !msgs[0]["content"].as_str().unwrap().contains("<subagent"),
        "the parent's own prefix"
    );
    let roles: Vec<&str> = msgs.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "user"],
        "{msgs:?}"
    );
    assert!(msgs[1]["content"]
        .as_str()
        .unwrap()
        .contains("[reasonix subagent run general] write CHARLIE-9 to out.txt"));
    assert_eq!(msgs[2]["tool_calls"][0]["function"]["name"], "task");
    assert!(msgs[3]["content"]
        .as_str()
        .unwrap()
        .contains("(general) completed"));
    assert_eq!(msgs[4]["content"], "wrote out.txt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_profile_is_refused_listing_the_known_ones() {
    let mock = MockProvider::start(vec![]).await;
    let env = setup(&mock.base_url());
    let out = reasonix(&env, &["subagent", "run", "reviewer", "look at it"]).await;
    assert!(!out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown subagent profile \"reviewer\""),
        "{err}"
    );
    for known in ["general (", "explore (", "review (skill:", "init (skill:"] {
        assert!(err.contains(known), "{known} not listed: {err}");
    }
    assert_eq!(mock.requests().len(), 0, "nothing ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_childs_writes_are_undone_by_rewinding_the_parent_turn() {
    let mock = MockProvider::start(vec![
        // Turn 1: the parent delegates; the child edits, creates and runs bash.
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_t",
                "task",
                &json!({"prompt": "rework the notes", "description": "rework"}).to_string(),
            )],
            2,
        ),
        MockReply::tool_calls(
            vec![
                MockToolCall::new(
                    "c_w",
                    "write_file",
                    &json!({"path": "notes.txt", "content": "rewritten by the child\n"})
                        .to_string(),
                ),
                MockToolCall::new(
                    "c_b",
                    "bash",
                    &json!({"command": "echo generated > gen.txt && rm old.txt"}).to_string(),
                ),
            ],
            3,
        ),
        MockReply::text(&["reworked"]),
        MockReply::text(&["the child reworked the notes"]),
        // Turn 2: `subagent run` writes too.
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "c_w2",
                "write_file",
                &json!({"path": "second.txt", "content": "by subagent run\n"}).to_string(),
            )],
            1,
        ),
        MockReply::text(&["wrote second.txt"]),
    ])
    .await;
    let env = setup(&mock.base_url());
    std::fs::write(env.ws.join("notes.txt"), "original notes\n").unwrap();
    std::fs::write(env.ws.join("old.txt"), "old\n").unwrap();
    let out = reasonix(&env, &["run", "--yolo", "rework the notes with a subagent"]).await;
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(env.ws.join("notes.txt")).unwrap(),
        "rewritten by the child\n"
    );
    assert!(env.ws.join("gen.txt").exists() && !env.ws.join("old.txt").exists());
    let out = reasonix(
        &env,
        &[
            "subagent",
            "run",
            "general",
            "--continue",
            "--yolo",
            "write second.txt",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(env.ws.join("second.txt").exists());

    // Rewinding to before turn 2 undoes the `subagent run` child's write only.
    let rw = reasonix(&env, &["rewind", "--to", "2", "--scope", "code"]).await;
    assert!(rw.status.success(), "{}", text(&rw));
    assert!(!env.ws.join("second.txt").exists(), "{}", text(&rw));
    assert_eq!(
        std::fs::read_to_string(env.ws.join("notes.txt")).unwrap(),
        "rewritten by the child\n"
    );
    // Rewinding to before turn 1 undoes the `task` child's writes, bash's too.
    let rw = reasonix(&env, &["rewind", "--to", "1", "--scope", "both"]).await;
    assert!(rw.status.success(), "{}", text(&rw));
    assert_eq!(
        std::fs::read_to_string(env.ws.join("notes.txt")).unwrap(),
        "original notes\n"
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join("old.txt")).unwrap(),
        "old\n"
    );
    assert!(
        !env.ws.join("gen.txt").exists(),
        "a file the child's bash made stays"
    );
    assert_eq!(mock.requests().len(), 6);
}
