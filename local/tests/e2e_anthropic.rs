//! End to end on the Anthropic Messages wire (`kind = "anthropic"`), local mode: the real
//! `reasonix` binary spawns the real `reasonix-remote` over pipes and the scripted mock speaks
//! the Messages API over real HTTP + SSE, with its `cache_control` prompt cache and its
//! thinking-replay check. The same turns as the OpenAI mock drives: tool use, a reply cut
//! mid-stream re-issued once, the key kept off the host; plus thinking replayed across steps
//! and across a daemon restart, `/compact`, and reasoning effort changed between turns on
//! both wires without touching the message prefix. `bench_anthropic_cache_share` (ignored,
//! `bench/anthropic_cache.sh`) reports the cache-read share of a 50-turn session.

use std::path::{Path, PathBuf};
use std::time::Duration;

mod common;

use common::{reasonix_command, LocalRig};
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall, RecordedRequest};
use serde_json::{json, Value};

const KEY_ENV: &str = "RX_ANTHROPIC_E2E_KEY";
const KEY: &str = "sk-ant-e2e-5e4d3c2b1a09";

/// A rig whose default model is `claude/claude-mock` on the mock at `base_url`; `extra` is
/// appended to the provider's table.
fn rig(base_url: &str, extra: &str) -> LocalRig {
    let rig = LocalRig::new(base_url, KEY_ENV, KEY);
    // The key comes from the laptop's environment (below), not from a file.
    std::fs::remove_file(rig.home.join(".env")).expect("no .env");
    std::fs::write(
        rig.home.join("config.toml"),
        format!(
            r#"default_model = "claude/claude-mock"
[[providers]]
name = "claude"
kind = "anthropic"
base_url = "{base_url}"
models = ["claude-mock", "claude-small"]
api_key_env = "{KEY_ENV}"
context_window = 128000
prices = {{ input = 3.0, cached = 0.3, output = 15.0 }}
{extra}
[providers.model_overrides."claude-small"]
efforts = ["low"]
"#
        ),
    )
    .expect("config");
    rig
}

fn host_bin() -> PathBuf {
    common::host_bin()
}

/// `reasonix ARGS` with the key in the laptop's environment only; the daemon it starts
/// stays 20 s after its last client (so a session spans several runs).
fn run(rig: &LocalRig, args: &[&str]) -> std::process::Output {
    reasonix_command(rig, &host_bin(), args)
        .env(KEY_ENV, KEY)
        .env("REASONIX_IDLE_TIMEOUT_SECS", "20")
        .output()
        .expect("run reasonix")
}

async fn run_async(rig: &LocalRig, args: &[&str]) -> std::process::Output {
    let mut c = tokio::process::Command::from(reasonix_command(rig, &host_bin(), args));
    c.env(KEY_ENV, KEY)
        .env("REASONIX_IDLE_TIMEOUT_SECS", "20")
        .kill_on_drop(true);
    tokio::time::timeout(Duration::from_secs(180), c.output())
        .await
        .expect("the run hung")
        .expect("run reasonix")
}

fn ok_lines(out: &std::process::Output) -> Vec<Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn daemon_pid(home: &Path) -> Option<u32> {
    let mut stack = vec![home.join("sessions")];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).ok()?.flatten().map(|e| e.path()));
        } else if p.file_name().is_some_and(|n| n == "daemon.json") {
            let v: Value = serde_json::from_slice(&std::fs::read(&p).ok()?).ok()?;
            return v["pid"].as_u64().map(|p| p as u32);
        }
    }
    None
}

fn stop_daemon(home: &Path) {
    if let Some(pid) = daemon_pid(home) {
        unsafe {
            libc::kill(pid as i32, libc::SIGTERM);
        }
        for _ in 0..100 {
            if unsafe { libc::kill(pid as i32, 0) } != 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn grep_tree(root: &Path, needle: &str) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        } else if let Ok(b) = std::fs::read(&p) {
            if b.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                hits.push(p);
            }
        }
    }
    hits
}

/// The request's messages without `cache_control` (breakpoints move from request to
/// request; the content they mark does not).
fn content_of(r: &RecordedRequest) -> Vec<Value> {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(o) => {
                o.remove("cache_control");
                o.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut m = r.body["messages"].clone();
    strip(&mut m);
    m.as_array().cloned().unwrap_or_default()
}

fn thinking_block(m: &Value) -> Option<(&str, &str)> {
    let b = m["content"].as_array()?.first()?;
    (b["type"] == "thinking").then(|| {
        (
            b["thinking"].as_str().unwrap_or(""),
            b["signature"].as_str().unwrap_or(""),
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_turn_with_thinking_replays_it_caches_and_keeps_the_key_on_the_laptop() {
    let mock = MockProvider::start_anthropic(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "toolu_w",
                "write_file",
                &json!({"path": "notes/hello.txt", "content": "hello from the agent\n"})
                    .to_string(),
            )],
            4,
        )
        .with_thinking(&["I will write ", "the file."]),
        MockReply::tool_calls(
            vec![
                MockToolCall::new(
                    "toolu_r",
                    "read_file",
                    &json!({"path": "notes/hello.txt"}).to_string(),
                ),
                MockToolCall::new(
                    "toolu_b",
                    "bash",
                    &json!({"command": "wc -c notes/hello.txt; env"}).to_string(),
                ),
            ],
            5,
        )
        .with_thinking(&["Now check ", "it."]),
        MockReply::text(&["The file ", "says hello."]),
        MockReply::text(&["Still hello."]),
    ])
    .await;
    mock.enable_prompt_cache(None);
    let env = rig(&mock.base_url(), "");
    let lines = ok_lines(
        &run_async(
            &env,
            &[
                "run",
                "--json",
                "--yolo",
                "--effort",
                "high",
                "write a greeting, then check it",
            ],
        )
        .await,
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join("notes/hello.txt")).expect("written"),
        "hello from the agent\n"
    );
    let started: Vec<&str> = lines
        .iter()
        .filter(|e| e["type"] == "tool_started")
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(started, ["write_file", "read_file", "bash"]);
    let text: String = lines
        .iter()
        .filter(|e| e["type"] == "text")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(text, "The file says hello.");

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3);
    for r in &reqs {
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(r.header("x-api-key"), Some(KEY));
        assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(
            r.body["thinking"],
            json!({"type": "enabled", "budget_tokens": 12288})
        );
    }
    // Each step's assistant turn went back starting with the thinking it came with (the mock
    // refuses it otherwise), the signature intact.
    let third = content_of(&reqs[2]);
    let (t1, s1) = thinking_block(&third[1]).expect("first step's thinking");
    assert_eq!(t1, "I will write the file.");
    assert!(s1.starts_with("mocksig-"));
    assert_eq!(
        thinking_block(&third[3]).map(|t| t.0),
        Some("Now check it.")
    );
    // The stable prefix is the same bytes in every request.
    assert!(reqs
        .windows(2)
        .all(|w| w[0].body["system"] == w[1].body["system"]));
    assert!(reqs
        .windows(2)
        .all(|w| w[0].body["tools"] == w[1].body["tools"]));
    // Each request read the whole previous request from the cache, and the turn's figures are
    // the provider's.
    let acc = mock.prompt_accounting();
    assert_eq!(acc[0].hit_tokens, 0);
    assert_eq!(acc[1].hit_tokens, acc[0].prompt_tokens, "{acc:?}");
    assert_eq!(acc[2].hit_tokens, acc[1].prompt_tokens, "{acc:?}");
    let done = lines
        .iter()
        .rev()
        .find(|e| e["type"] == "turn_finished")
        .expect("turn_finished");
    assert_eq!(done["outcome"], "completed");
    assert_eq!(
        done["usage"]["cache_hit_tokens"].as_u64(),
        Some(acc.iter().map(|a| a.hit_tokens).sum::<u64>()),
        "{done}"
    );
    assert_eq!(
        done["usage"]["prompt_tokens"].as_u64(),
        Some(acc.iter().map(|a| a.prompt_tokens).sum::<u64>())
    );

    // The key is nowhere on the host side; the signatures are in the journal.
    let pid = daemon_pid(&env.home).expect("daemon");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("environ");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("cmdline");
    assert!(!environ.windows(KEY.len()).any(|w| w == KEY.as_bytes()));
    assert!(!cmdline.windows(KEY.len()).any(|w| w == KEY.as_bytes()));
    assert!(grep_tree(&env.home.join("sessions"), KEY).is_empty());
    assert!(grep_tree(&env.home.join("logs"), KEY).is_empty());
    assert!(grep_tree(&env.ws, KEY).is_empty());
    assert!(!grep_tree(&env.home.join("sessions"), "mocksig-").is_empty());

    // A new daemon rebuilds the conversation from the journal, thinking and signatures
    // included: the mock accepts the next turn's request.
    stop_daemon(&env.home);
    let lines = ok_lines(
        &run_async(
            &env,
            &[
                "run",
                "--json",
                "--continue",
                "--effort",
                "high",
                "still there?",
            ],
        )
        .await,
    );
    assert!(lines
        .iter()
        .any(|e| e["type"] == "text" && e["text"] == "Still hello."));
    let last = content_of(&mock.requests()[3]);
    assert_eq!(
        thinking_block(&last[1]).map(|t| t.0),
        Some("I will write the file.")
    );
    assert_eq!(thinking_block(&last[3]).map(|t| t.0), Some("Now check it."));
    stop_daemon(&env.home);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_cut_mid_stream_is_re_issued_once() {
    let mock = MockProvider::start_anthropic(vec![
        MockReply::Cut {
            chunks: vec!["half an ".into(), "answer".into()],
        },
        MockReply::text(&["a whole answer"]),
    ])
    .await;
    let env = rig(&mock.base_url(), "");
    let lines = ok_lines(&run_async(&env, &["run", "--json", "hello"]).await);
    assert_eq!(mock.request_count(), 2);
    let reask: Vec<&Value> = lines
        .iter()
        .filter(|e| e["type"] == "provider_retry" && e["phase"] == "reask")
        .collect();
    assert_eq!(reask.len(), 1, "{lines:?}");
    assert!(
        reask[0]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("ended early"),
        "{}",
        reask[0]
    );
    let reqs = mock.requests();
    assert_eq!(reqs[0].body, reqs[1].body, "the same request again");
    let done = lines
        .iter()
        .rev()
        .find(|e| e["type"] == "turn_finished")
        .expect("finished");
    assert_eq!(done["outcome"], "completed");
    stop_daemon(&env.home);
}

/// The compaction summary request goes through the Anthropic wire too, and the turn after it
/// is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_works_on_the_anthropic_wire() {
    let mock = MockProvider::start_anthropic_with(|r| {
        if r.body.to_string().contains("<compaction-request>") {
            MockReply::text(&["<compaction-summary>the user said one and two</compaction-summary>"])
        } else {
            MockReply::text(&["noted"])
        }
    })
    .await;
    let env = rig(&mock.base_url(), "");
    ok_lines(&run_async(&env, &["run", "--json", "one"]).await);
    ok_lines(&run_async(&env, &["run", "--json", "--continue", "two"]).await);
    let lines = ok_lines(&run_async(&env, &["run", "--json", "--continue", "/compact"]).await);
    assert!(lines.iter().any(|e| e["type"] == "compacted"), "{lines:?}");
    ok_lines(&run_async(&env, &["run", "--json", "--continue", "three"]).await);
    let reqs = mock.requests();
    let summary = reqs
        .iter()
        .filter(|r| r.body.to_string().contains("<compaction-request>"))
        .count();
    assert_eq!(summary, 1);
    let last = reqs.last().expect("a request").body.to_string();
    assert!(last.contains("the user said one and two"), "{last}");
    stop_daemon(&env.home);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn effort_changes_between_turns_change_request_parameters_only() {
    // Anthropic: a thinking budget per level.
    let mock = MockProvider::start_anthropic(vec![]).await;
    let env = rig(&mock.base_url(), "");
    ok_lines(&run_async(&env, &["run", "--json", "--effort", "low", "one"]).await);
    ok_lines(
        &run_async(
            &env,
            &["run", "--json", "--continue", "--effort", "max", "two"],
        )
        .await,
    );
    ok_lines(&run_async(&env, &["run", "--json", "--continue", "three"]).await);
    let reqs = mock.requests();
    let budgets: Vec<Value> = reqs.iter().map(|r| r.body["thinking"].clone()).collect();
    assert_eq!(
        budgets,
        [
            json!({"type": "enabled", "budget_tokens": 2048}),
            json!({"type": "enabled", "budget_tokens": 24576}),
            Value::Null,
        ]
    );
    for w in reqs.windows(2) {
        assert_eq!(w[0].body["system"], w[1].body["system"]);
        assert_eq!(w[0].body["tools"], w[1].body["tools"]);
        assert!(
            content_of(&w[1]).starts_with(&content_of(&w[0])),
            "the conversation only grew"
        );
    }
    // A level the model does not take is refused before anything starts, naming the ones it does.
    let out = run(
        &env,
        &[
            "run",
            "--json",
            "--continue",
            "--model",
            "claude-small",
            "--effort",
            "high",
            "four",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("claude/claude-small") && err.contains("it supports: low"),
        "{err}"
    );
    assert_eq!(mock.request_count(), 3);
    stop_daemon(&env.home);

    // OpenAI wire: `reasoning_effort` changes, the cached prefix is read whole.
    let oa = MockProvider::start(vec![]).await;
    oa.enable_prompt_cache(None);
    let env = LocalRig::new(&oa.base_url(), KEY_ENV, KEY);
    ok_lines(&run_async(&env, &["run", "--json", "--effort", "low", "one"]).await);
    ok_lines(
        &run_async(
            &env,
            &["run", "--json", "--continue", "--effort", "high", "two"],
        )
        .await,
    );
    let reqs = oa.requests();
    assert_eq!(reqs[0].body["reasoning_effort"], "low");
    assert_eq!(reqs[1].body["reasoning_effort"], "high");
    assert!(reqs[1].messages().starts_with(&reqs[0].messages()));
    let acc = oa.prompt_accounting();
    assert!(acc[1].hit_tokens + 64 > acc[0].prompt_tokens, "{acc:?}");
    stop_daemon(&env.home);
}

/// Files of 5–20 KB of varied text for the benchmark.
fn bench_files(ws: &Path, n: usize) {
    for i in 0..n {
        let size = 5 * 1024 + (i * 15 * 1024) / (n - 1);
        let mut text = String::new();
        let mut line = 0;
        while text.len() < size {
            text.push_str(&format!(
                "file {i} line {line}: the quick brown fox {} jumps over the lazy dog\n",
                line * 7919 % 1000
            ));
            line += 1;
        }
        std::fs::write(ws.join(format!("f{i}.txt")), text).expect("file");
    }
}

/// The share of prompt tokens read from the cache over a 50-turn session (`BENCH_TURNS`),
/// each turn one `read_file` of a 5–20 KB file then an answer, through the real binaries and
/// the Anthropic mock's explicit cache. Run by `bench/anthropic_cache.sh`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run bench/anthropic_cache.sh"]
async fn bench_anthropic_cache_share() {
    const FILES: usize = 16;
    let turns: usize = std::env::var("BENCH_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let mock = MockProvider::start_anthropic_with(|r| {
        if r.body.to_string().contains("<compaction-request>") {
            return MockReply::text(&["<compaction-summary>files were read</compaction-summary>"]);
        }
        let msgs = r.body["messages"].as_array().cloned().unwrap_or_default();
        let last = msgs.last().cloned().unwrap_or(Value::Null);
        let after_tool = last["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"));
        if after_tool {
            return MockReply::text(&["Read it."]);
        }
        let n = msgs.len() % FILES;
        MockReply::tool_calls(
            vec![MockToolCall {
                id: None,
                name: "read_file".into(),
                arguments: json!({"path": format!("f{n}.txt")}).to_string(),
            }],
            64,
        )
    })
    .await;
    mock.enable_prompt_cache(Some(128_000));
    let env = rig(&mock.base_url(), "");
    bench_files(&env.ws, FILES);
    let mut compactions = 0;
    for t in 0..turns {
        let prompt = format!("turn {t}: read the next file");
        let mut args = vec!["run", "--json", "--yolo"];
        if t > 0 {
            args.push("--continue");
        }
        args.push(&prompt);
        compactions += ok_lines(&run(&env, &args))
            .iter()
            .filter(|l| l["type"] == "compacted")
            .count();
    }
    stop_daemon(&env.home);
    let acc = mock.prompt_accounting();
    assert!(acc.iter().all(|a| !a.rejected), "a request over the window");
    let prompt: u64 = acc.iter().map(|a| a.prompt_tokens).sum();
    let read: u64 = acc.iter().map(|a| a.hit_tokens).sum();
    let written: u64 = acc.iter().map(|a| a.cache_write_tokens).sum();
    let input = prompt - read - written;
    let summaries = mock
        .requests()
        .iter()
        .filter(|r| r.body.to_string().contains("<compaction-request>"))
        .count();
    println!(
        "anthropic cache: {turns} turns, {} requests, {compactions} compactions ({summaries} summary requests), prompt tokens {prompt}: cache read {:.1} %, cache write {:.1} %, uncached input {:.1} %",
        acc.len(),
        100.0 * read as f64 / prompt as f64,
        100.0 * written as f64 / prompt as f64,
        100.0 * input as f64 / prompt as f64,
    );
    // At Anthropic's list ratios (write 1.25x, read 0.1x of the input price) against sending
    // every prompt uncached.
    let cost = input as f64 + 1.25 * written as f64 + 0.1 * read as f64;
    println!(
        "anthropic cache: input cost {:.1} % of an uncached session's",
        100.0 * cost / prompt as f64
    );
}
