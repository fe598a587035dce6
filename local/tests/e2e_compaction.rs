//! The compaction ladder end to end: the real `reasonix` and `reasonix-remote` binaries in
//! local mode, the mock provider caching prompts like DeepSeek and refusing prompts over a
//! 32k window, a long scripted session of `read_file` steps with 5–20 KB results.
//!
//! Oracles: the mock's window (no request refused), its byte-prefix cache (every request
//! that is not declared a rewrite extends its predecessor byte for byte), the journal's
//! `compacted` events, the archive file, and a rewind that restores the pre-compaction
//! conversation exactly.

use std::path::{Path, PathBuf};
use std::process::Command;

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall, RecordedRequest};
use serde_json::{json, Value};

const KEY: &str = "sk-test-COMPACT-1a2b3c";
const WINDOW: u64 = 32_000;
const FILES: usize = 12;

fn host_bin() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"))
        .parent()
        .expect("bin dir")
        .join("reasonix-remote");
    assert!(
        p.is_file(),
        "{} is missing: build the workspace binaries first (`cargo build --workspace --bins`)",
        p.display()
    );
    p
}

struct Env {
    _dir: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
}

fn write_config(home: &Path, base_url: &str, window: u64) {
    std::fs::write(
        home.join("config.toml"),
        format!(
            r#"default_model = "mock/m"
[[providers]]
name = "mock"
kind = "openai"
base_url = "{base_url}"
models = ["m"]
default = "m"
api_key_env = "RX_COMPACT_KEY"
context_window = {window}
prices = {{ input = 0.14, cached = 0.0028, output = 0.28 }}
"#
        ),
    )
    .expect("config");
}

fn setup(base_url: &str) -> Env {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&ws).expect("ws");
    write_config(&home, base_url, WINDOW);
    // Files of 5–20 KB of varied text (so results differ and are not all the same size).
    for i in 0..FILES {
        let size = 5 * 1024 + (i * 15 * 1024) / (FILES - 1);
        let mut text = String::new();
        let mut n = 0;
        while text.len() < size {
            text.push_str(&format!(
                "file {i} line {n}: the quick brown fox {} jumps over the lazy dog\n",
                n * 7919 % 1000
            ));
            n += 1;
        }
        std::fs::write(ws.join(format!("f{i}.txt")), text).expect("file");
    }
    Env {
        _dir: dir,
        home,
        ws,
    }
}

fn reasonix(env: &Env, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .args(args)
        .current_dir(&env.ws)
        .env("REASONIX_HOME", &env.home)
        .env("REASONIX_REMOTE_BIN", host_bin())
        .env("RX_COMPACT_KEY", KEY)
        .env("REASONIX_IDLE_TIMEOUT_SECS", "60")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("run reasonix")
}

fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn content(m: &Value) -> &str {
    m.get("content").and_then(Value::as_str).unwrap_or("")
}

fn is_summary_request(r: &RecordedRequest) -> bool {
    r.messages()
        .last()
        .map(|m| content(m).contains("<compaction-request>"))
        .unwrap_or(false)
}

/// The scripted model: turn `T` (from its prompt "turn T") reads one file per step for
/// `steps` steps, then answers; a summary request gets a structured summary.
fn chooser(steps: usize) -> impl Fn(&RecordedRequest) -> MockReply + Send + Sync + 'static {
    move |r: &RecordedRequest| {
        let msgs = r.messages();
        // A probe turn: load the first snipped result by the id its placeholder names.
        let last_user = msgs.iter().rev().find(|m| m["role"] == "user").map(content);
        // (Its last paragraph: a request may join it to the user messages before it.)
        let last_prompt = last_user.and_then(|u| u.rsplit("\n\n").next());
        if last_prompt.is_some_and(|u| u.starts_with("probe")) {
            if msgs.last().map(|m| m["role"] == "tool").unwrap_or(false) {
                return MockReply::text(&["loaded"]);
            }
            let id = msgs
                .iter()
                .find_map(|m| {
                    let c = content(m);
                    c.strip_prefix("[snipped tool result:")?;
                    let rest = &c[c.find("{\"load\":\"")? + 9..];
                    Some(rest[..rest.find('"')?].to_string())
                })
                .unwrap_or_default();
            return MockReply::tool_calls(
                vec![MockToolCall::new(
                    "probe-1",
                    "history",
                    &json!({"load": id}).to_string(),
                )],
                64,
            );
        }
        if is_summary_request(r) {
            return MockReply::text(&[
                "## Goal\n- read the workspace files turn by turn\n## Files touched\n- f*.txt (read)\n",
                "## Pending work\n- keep reading\n",
            ]);
        }
        // The current turn: the last turn prompt.
        let turn = last_turn_prompt(&msgs).unwrap_or(0);
        // The step: from the id of the last tool result of this turn ("tT-sS").
        let step = match msgs.last() {
            Some(m) if m["role"] == "tool" => m["tool_call_id"]
                .as_str()
                .and_then(|id| id.strip_prefix(&format!("t{turn}-s")))
                .and_then(|s| s.parse::<usize>().ok())
                .map(|s| s + 1)
                .unwrap_or(0),
            _ => 0,
        };
        if step >= steps {
            return MockReply::text(&[format!("turn {turn} done")]);
        }
        let file = (turn * steps + step) % FILES;
        MockReply::tool_calls(
            vec![MockToolCall::new(
                &format!("t{turn}-s{step}"),
                "read_file",
                &json!({"path": format!("f{file}.txt")}).to_string(),
            )],
            64,
        )
    }
}

fn journal_of(home: &Path) -> PathBuf {
    let mut stack = vec![home.join("sessions")];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            if p.file_name().map(|n| n == "archive").unwrap_or(false) {
                continue;
            }
            for e in std::fs::read_dir(&p).expect("read_dir").flatten() {
                stack.push(e.path());
            }
        } else if p.extension().map(|e| e == "jsonl").unwrap_or(false) {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            if text.contains("\"session_started\"") {
                return p;
            }
        }
    }
    panic!("no journal under {}", home.display());
}

fn events(journal: &Path) -> Vec<Value> {
    std::fs::read_to_string(journal)
        .expect("journal")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// One `reasonix run --json` turn; returns its JSON lines.
fn run_turn(env: &Env, turn: usize, first: bool) -> Vec<Value> {
    let prompt = format!("turn {turn}: read the next files");
    let mut args = vec!["run", "--json", "--yolo"];
    if !first {
        args.push("--continue");
    }
    args.push(&prompt);
    let out = reasonix(env, &args);
    assert!(
        out.status.success(),
        "turn {turn} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    json_lines(&out.stdout)
}

/// The JSON lines of the daemon logs under `home` whose message is `message`, in order.
fn daemon_log_lines(home: &Path, message: &str) -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(home.join("logs"))
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .collect::<Vec<_>>()
        })
        .filter(|v| v["fields"]["message"] == message)
        .collect()
}

/// True when `cur` sends the same tools and every message of `prev` byte for byte first.
#[allow(clippy::cmp_owned)] // the serialised bytes are what the cache sees
fn extends(prev: &RecordedRequest, cur: &RecordedRequest) -> bool {
    let (p, c) = (prev.messages(), cur.messages());
    prev.body.get("tools").map(Value::to_string) == cur.body.get("tools").map(Value::to_string)
        && c.len() >= p.len()
        && p.iter()
            .zip(&c)
            .all(|(a, b)| a.to_string() == b.to_string())
}

fn stop_daemon(home: &Path) {
    let sessions = home.join("sessions");
    let mut stack = vec![sessions];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            for e in std::fs::read_dir(&p).into_iter().flatten().flatten() {
                stack.push(e.path());
            }
        } else if p.file_name().map(|n| n == "daemon.json").unwrap_or(false) {
            let v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap_or_default())
                .unwrap_or(Value::Null);
            if let Some(pid) = v["pid"].as_u64() {
                unsafe {
                    libc::kill(pid as i32, libc::SIGTERM);
                }
                for _ in 0..100 {
                    if unsafe { libc::kill(pid as i32, 0) } != 0 {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_300_step_session_stays_in_a_32k_window_and_only_declared_rewrites_miss() {
    const TURNS: usize = 20;
    const STEPS: usize = 15;
    let mock = MockProvider::start_with(chooser(STEPS)).await;
    mock.enable_prompt_cache(Some(WINDOW));
    let env = setup(&mock.base_url());
    let mut compacted_lines = Vec::new();
    let mut finals = Vec::new();
    for t in 0..TURNS {
        // Halfway, the daemon is stopped: the next turn's daemon rebuilds the compacted
        // conversation from the journal, which must give the same bytes.
        if t == TURNS / 2 {
            stop_daemon(&env.home);
        }
        let lines = run_turn(&env, t, t == 0);
        compacted_lines.extend(lines.iter().filter(|l| l["type"] == "compacted").cloned());
        finals.extend(
            lines
                .iter()
                .filter(|l| l["type"] == "turn_finished")
                .cloned(),
        );
    }
    stop_daemon(&env.home);

    let acc = mock.prompt_accounting();
    let refused: Vec<_> = acc.iter().filter(|a| a.rejected).collect();
    assert!(refused.is_empty(), "requests over the window: {refused:?}");
    let max = acc.iter().map(|a| a.prompt_tokens).max().unwrap_or(0);
    assert!(max <= WINDOW, "largest prompt {max} tokens");

    let reqs = mock.requests();
    let main: Vec<&RecordedRequest> = reqs.iter().filter(|r| !is_summary_request(r)).collect();
    let summaries = reqs.len() - main.len();
    // Model steps: STEPS tool steps and one answer per turn.
    assert_eq!(main.len(), TURNS * (STEPS + 1), "main requests");

    // Which main requests follow a declared rewrite, from the journal.
    let evs = events(&journal_of(&env.home));
    let mut declared = Vec::new();
    let mut rewrite = false;
    let (mut snips, mut sums, mut forced) = (0, 0, 0);
    for e in &evs {
        match e["type"].as_str() {
            Some("compacted") => {
                rewrite = true;
                match e["kind"].as_str() {
                    Some("snip") => snips += 1,
                    Some("summary") => sums += 1,
                    other => panic!("unknown compaction kind {other:?}"),
                }
                if e["trigger"] == "forced" {
                    forced += 1;
                }
            }
            Some("usage") if e["cache_note"] != "summary request of a compaction" => {
                declared.push(rewrite);
                rewrite = false;
            }
            _ => {}
        }
    }
    assert_eq!(declared.len(), main.len(), "one usage per main request");
    assert!(snips > 0 && sums > 0, "snips {snips}, summaries {sums}");
    assert!(
        forced > 0,
        "a 15-step turn overflows mid-turn: forced compactions expected"
    );
    assert_eq!(
        summaries, sums,
        "one summary request per summary compaction"
    );
    assert_eq!(
        compacted_lines.len(),
        snips + sums,
        "run --json reports every compaction"
    );
    let mut breaks = 0;
    for i in 1..main.len() {
        let ext = extends(main[i - 1], main[i]);
        assert_eq!(
            ext, !declared[i],
            "request {i}: extension {ext} but declared rewrite {}",
            declared[i]
        );
        if !ext {
            breaks += 1;
        }
    }
    assert!(breaks > 0);

    // A summary request is the history the provider has cached plus the instruction: up to
    // where they both go, it agrees with the main request before it message for message (a
    // snip before the summary would have rewritten old results in between).
    for (j, r) in reqs
        .iter()
        .enumerate()
        .filter(|(_, r)| is_summary_request(r))
    {
        let prev = reqs[..j]
            .iter()
            .rev()
            .find(|p| !is_summary_request(p))
            .expect("a main request before every summary request");
        let (p, c) = (prev.messages(), r.messages());
        let asked = &c[..c.len() - 1];
        let shared = p.len().min(asked.len());
        assert!(
            shared > 1 && p[..shared] == asked[..shared],
            "summary request {j} rewrites the cached history"
        );
        let a = acc
            .iter()
            .find(|a| a.index == j)
            .expect("the mock accounted every request");
        assert!(
            a.hit_tokens * 2 > a.prompt_tokens,
            "summary request {j}: most of it from cache ({} of {})",
            a.hit_tokens,
            a.prompt_tokens
        );
    }

    // On the link, every request after the first of a link (the same `reasonix run`) is
    // sent as what follows the messages it shares with the one before it: its new messages
    // when it extends that one, those from the first rewritten message on after a snip or
    // a summary (the system message, at least, is always shared). So is the first request
    // of a link when the base the daemon handed the laptop as the link opened the session
    // arrived first (a race with the turn's first request, so counted as a range). The
    // laptop rebuilt every one of them exactly (the mock's bytes above).
    let mut same_link = 0;
    let mut rewritten_same_link = 0;
    let mut first_of_link = 0;
    for j in 1..reqs.len() {
        if turn_of(&reqs[j - 1]) == turn_of(&reqs[j]) {
            same_link += 1;
            rewritten_same_link += usize::from(!extends(&reqs[j - 1], &reqs[j]));
        } else {
            first_of_link += 1;
        }
    }
    let accepted = daemon_log_lines(&env.home, "provider request accepted");
    assert_eq!(accepted.len(), reqs.len(), "one accepted line per request");
    let by_prefix: Vec<&Value> = accepted
        .iter()
        .filter(|l| l["fields"]["by_prefix"] == true)
        .collect();
    println!(
        "by prefix: {} requests (after the first of their link: {same_link}, of which after a rewrite: {rewritten_same_link}; first of a link: {first_of_link})",
        by_prefix.len()
    );
    assert!(
        by_prefix.len() >= same_link && by_prefix.len() <= same_link + first_of_link + 1,
        "requests sent by prefix: {} (after the first of their link: {same_link}, first of a link: {first_of_link})",
        by_prefix.len()
    );
    assert!(
        by_prefix.len() > same_link,
        "some first requests of a link went by prefix against the base the daemon sent: {} of {same_link}+{first_of_link}",
        by_prefix.len()
    );
    assert!(
        rewritten_same_link > 0,
        "the session rewrote its history within a link (a summary request, a forced rewrite)"
    );
    assert!(same_link > main.len() / 2, "{same_link}");
    for l in &by_prefix {
        let f = &l["fields"];
        assert!(
            f["sent"].as_u64() < f["messages"].as_u64(),
            "by prefix, fewer messages cross the link: {l}"
        );
    }

    // Every snipped original is in the archive, byte for byte.
    let archive = journal_of(&env.home).parent().expect("dir").join("archive");
    let archived: Vec<Value> = std::fs::read_dir(&archive)
        .expect("archive dir")
        .flatten()
        .flat_map(|e| {
            std::fs::read_to_string(e.path())
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .collect::<Vec<_>>()
        })
        .collect();
    for e in evs.iter().filter(|e| e["kind"] == "snip") {
        for s in e["snipped"].as_array().expect("snipped") {
            let rec = archived
                .iter()
                .find(|a| a["id"] == s["archive_id"])
                .unwrap_or_else(|| panic!("{s} not archived"));
            assert_eq!(rec["message"]["tool_call_id"], s["call_id"]);
            assert_eq!(
                content(&rec["message"]).len() as u64,
                s["bytes"].as_u64().expect("bytes")
            );
        }
    }

    // Cache economics: the share of prompt tokens served from cache, and the headless
    // usage/cost record of each turn.
    let prompt: u64 = acc.iter().map(|a| a.prompt_tokens).sum();
    let hit: u64 = acc.iter().map(|a| a.hit_tokens).sum();
    let ratio = hit as f64 / prompt as f64;
    eprintln!(
        "requests {} (summaries {summaries}), snips {snips}, summaries {sums}, forced {forced}, cache-hit ratio {:.3}",
        reqs.len(),
        ratio
    );
    assert!(ratio > 0.5, "cache-hit ratio {ratio}");
    for f in &finals {
        assert!(f["cost_usd"].as_f64().is_some(), "{f}");
        assert!(
            f["requests"].as_u64().unwrap_or(0) >= (STEPS + 1) as u64,
            "{f}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_to_before_a_compaction_restores_the_conversation_exactly() {
    const STEPS: usize = 6;
    let mock = MockProvider::start_with(chooser(STEPS)).await;
    mock.enable_prompt_cache(Some(WINDOW));
    let env = setup(&mock.base_url());
    // Run turns until one compacts.
    let mut compacted_turn = None;
    for t in 0..12 {
        let before = mock.request_count();
        let lines = run_turn(&env, t, t == 0);
        if lines.iter().any(|l| l["type"] == "compacted") {
            compacted_turn = Some((t, before));
            break;
        }
    }
    let (t, first_req_of_turn) = compacted_turn.expect("a compaction within 12 turns");
    assert!(t > 0, "the first turn cannot compact");
    let reqs_before_probe = mock.request_count();
    // The last main request before turn t: what the conversation was before the rewrite.
    let reqs = mock.requests();
    let before = reqs[..first_req_of_turn]
        .iter()
        .rfind(|r| !is_summary_request(r))
        .expect("a request before")
        .clone();

    // The history tool loads a snipped original in full by the id its placeholder names.
    let out = reasonix(
        &env,
        &[
            "run",
            "--json",
            "--full-output",
            "--yolo",
            "--continue",
            "probe: load it",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out.stdout);
    let probe = lines
        .iter()
        .find(|l| l["type"] == "tool_finished" && l["name"] == "history")
        .expect("history ran");
    assert_eq!(probe["is_error"], false, "{probe}");
    let loaded = probe["output"].as_str().expect("full output");
    assert!(loaded.contains("archived snip"), "{loaded}");
    assert!(
        loaded.contains("the quick brown fox"),
        "the original content: {loaded}"
    );
    assert!(
        loaded.len() > 5 * 1024,
        "the whole original ({} bytes)",
        loaded.len()
    );
    assert!(mock.request_count() > reqs_before_probe);

    // Rewind the conversation to before turn t (journal turns count from 1).
    let out = reasonix(
        &env,
        &[
            "rewind",
            "--to",
            &(t + 1).to_string(),
            "--scope",
            "conversation",
        ],
    );
    assert!(
        out.status.success(),
        "rewind: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Run the turn again with compaction off (window 0): its first request must extend the
    // pre-compaction conversation byte for byte.
    write_config(&env.home, &mock.base_url(), 0);
    stop_daemon(&env.home);
    let n = mock.request_count();
    // Without compaction the re-run turn overflows the mock's window later on (and fails);
    // only its first request matters here.
    let prompt = format!("turn {t}: read the next files");
    let out = reasonix(&env, &["run", "--json", "--yolo", "--continue", &prompt]);
    let lines = json_lines(&out.stdout);
    assert!(!lines.iter().any(|l| l["type"] == "compacted"));
    let reqs = mock.requests();
    let again = &reqs[n];
    assert!(
        extends(&before, again),
        "after the rewind the conversation is the one before the compaction"
    );
    assert!(again
        .messages()
        .iter()
        .all(|m| !content(m).contains("<compaction-summary>")
            && !content(m).starts_with("[snipped tool result:")));
    stop_daemon(&env.home);
}

/// A session whose model explains every step (1.5 KB of text beside each tool call, a 64k
/// window): each snip leaves the placeholders and those assistant steps behind, which no
/// snip can shorten. Once they fill a third of the snip rung, the snip rung summarises
/// instead of snipping again (a summary at a turn start, below the compact rung), and that
/// summary frees what the snips before it could not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_snip_rung_summarises_once_snips_cannot_free_enough() {
    const WIDE: u64 = 64_000;
    let base = chooser(3);
    let mock = MockProvider::start_with(move |r: &RecordedRequest| match base(r) {
        MockReply::ToolCalls {
            calls,
            split,
            interleave,
            ..
        } => MockReply::ToolCalls {
            text: vec!["I read the next file to see how the fox line continues. ".repeat(27)],
            calls,
            split,
            interleave,
        },
        other => other,
    })
    .await;
    mock.enable_prompt_cache(Some(WIDE));
    let env = setup(&mock.base_url());
    write_config(&env.home, &mock.base_url(), WIDE);
    let compact_rung = WIDE * 8 / 10;
    let mut compactions: Vec<Value> = Vec::new();
    let mut found = None;
    for t in 0..80 {
        let lines = run_turn(&env, t, t == 0);
        for l in lines.into_iter().filter(|l| l["type"] == "compacted") {
            let at_snip_rung = l["kind"] == "summary"
                && l["trigger"] == "threshold"
                && l["tokens_before"]
                    .as_u64()
                    .is_some_and(|b| b < compact_rung);
            compactions.push(l);
            if at_snip_rung {
                found = Some(compactions.len() - 1);
            }
        }
        if found.is_some() {
            break;
        }
    }
    stop_daemon(&env.home);
    assert!(
        mock.prompt_accounting().iter().all(|a| !a.rejected),
        "a request over the window"
    );
    let at = found.unwrap_or_else(|| panic!("no summary at the snip rung: {compactions:#?}"));
    let snips: Vec<&Value> = compactions[..at]
        .iter()
        .filter(|c| c["kind"] == "snip")
        .collect();
    assert!(snips.len() >= 3, "snips came first: {compactions:#?}");
    // What the snips left grew (their placeholders and the assistant steps stay)...
    let left = |c: &Value| c["tokens_after"].as_u64().expect("tokens_after");
    assert!(
        left(snips[snips.len() - 1]) > left(snips[0]),
        "{compactions:#?}"
    );
    // ...and the summary folds it: it leaves less than the last snip did.
    assert!(
        left(&compactions[at]) < left(snips[snips.len() - 1]),
        "{compactions:#?}"
    );
}

/// The turn a recorded request belongs to (from its last "turn T:" prompt).
fn turn_of(r: &RecordedRequest) -> Option<usize> {
    last_turn_prompt(&r.messages())
}

/// The number of the last "turn T:" prompt in `msgs`. A prompt may share its user message
/// with others (a request joins successive user messages: a summary, the prompts it keeps,
/// the current one), so every paragraph of a user message counts.
fn last_turn_prompt(msgs: &[Value]) -> Option<usize> {
    msgs.iter()
        .rev()
        .filter(|m| m["role"] == "user")
        .find_map(|m| {
            content(m).rsplit("\n\n").find_map(|p| {
                p.strip_prefix("turn ")
                    .and_then(|s| s.split(':').next())
                    .and_then(|n| n.parse().ok())
            })
        })
}

/// DeepSeek's list prices per 1M input tokens for `deepseek-v4-flash` (what `deepseek-chat`
/// maps to), from api-docs.deepseek.com/quick_start/pricing: a cache hit costs a fiftieth of
/// a miss. (miss, hit)
const V4_FLASH_PRICES: (f64, f64) = (0.14, 0.0028);
/// The older V3.2 list prices (hit = a tenth of a miss), reported alongside for comparison
/// with the figures of earlier runs.
const V3_2_PRICES: (f64, f64) = (0.28, 0.028);

fn input_cost(acc: &[reasonix_testkit::prompt_cache::PromptAccounting], prices: (f64, f64)) -> f64 {
    acc.iter()
        .map(|a| (a.miss_tokens as f64 * prices.0 + a.hit_tokens as f64 * prices.1) / 1e6)
        .sum()
}

/// Replays `reqs` as a naive agent would send them: the prefix and history rebuilt at each
/// turn (a line naming the turn and its time at the head of the system prompt, as agents
/// that render the date or a workspace listing into it do), each request otherwise as sent.
/// Sent over HTTP to a fresh caching mock, whose accounting is returned.
async fn replay_naive(
    reqs: &[RecordedRequest],
) -> Vec<reasonix_testkit::prompt_cache::PromptAccounting> {
    let mock = MockProvider::start_with(|_r: &RecordedRequest| MockReply::text(&["ok"])).await;
    mock.enable_prompt_cache(None);
    let http = reqwest::Client::new();
    let url = format!("{}/chat/completions", mock.base_url());
    for r in reqs {
        let turn = turn_of(r).unwrap_or(0);
        let mut body = r.body.clone();
        let system = &mut body["messages"][0];
        assert_eq!(
            system["role"], "system",
            "the first message is the system prompt"
        );
        let rebuilt = format!(
            "Turn {turn}, rendered at 2026-12-02T{:02}:{:02}:00Z.\n{}",
            turn / 60 % 24,
            turn % 60,
            content(system)
        );
        system["content"] = Value::String(rebuilt);
        let resp = http
            .post(&url)
            .header("content-type", "application/json")
            .header("authorization", format!("Bearer {KEY}"))
            .body(body.to_string())
            .send()
            .await
            .expect("naive replay request");
        assert!(
            resp.status().is_success(),
            "naive replay: {}",
            resp.status()
        );
        let _ = resp.text().await.expect("naive replay reply");
    }
    let acc = mock.prompt_accounting();
    assert_eq!(
        acc.len(),
        reqs.len(),
        "the mock accounted every replayed request"
    );
    acc
}

/// `bench/long_session.sh`: a long scripted session (LONG_TURNS turns of LONG_STEPS
/// `read_file` steps, window LONG_WINDOW) through the real binaries and the caching mock,
/// priced at DeepSeek's list prices, against a naive baseline: the same requests replayed
/// to a second caching mock with the prefix rebuilt at each turn ([`replay_naive`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run bench/long_session.sh"]
async fn bench_long_session() {
    let env_num = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let turns = env_num("LONG_TURNS", 100) as usize;
    let steps = env_num("LONG_STEPS", 3) as usize;
    let window = env_num("LONG_WINDOW", 128_000);
    let mock = MockProvider::start_with(chooser(steps)).await;
    mock.enable_prompt_cache(Some(window));
    let env = setup(&mock.base_url());
    write_config(&env.home, &mock.base_url(), window);
    let mut compactions = 0;
    for t in 0..turns {
        let lines = run_turn(&env, t, t == 0);
        for l in lines.iter().filter(|l| l["type"] == "compacted") {
            compactions += 1;
            if std::env::var_os("LONG_VERBOSE").is_some() {
                println!("long session turn {t}: {l}");
            }
        }
    }
    stop_daemon(&env.home);
    let acc = mock.prompt_accounting();
    let reqs = mock.requests();
    assert!(acc.iter().all(|a| !a.rejected), "a request over the window");
    let naive = replay_naive(&reqs).await;
    let prompt: u64 = acc.iter().map(|a| a.prompt_tokens).sum();
    let hit: u64 = acc.iter().map(|a| a.hit_tokens).sum();
    let naive_hit: u64 = naive.iter().map(|a| a.hit_tokens).sum();
    let naive_prompt: u64 = naive.iter().map(|a| a.prompt_tokens).sum();
    println!(
        "long session: {turns} turns x {steps} steps, window {window}: requests {}, compactions {compactions}, prompt tokens {prompt}, from cache {:.1} % (naive replay {:.1} %)",
        reqs.len(),
        100.0 * hit as f64 / prompt as f64,
        100.0 * naive_hit as f64 / naive_prompt as f64,
    );
    // Where the missed tokens went: requests that extend their predecessor byte for byte
    // (new messages only), requests after a rewrite, and the summary requests themselves.
    let (mut growth, mut rewrite, mut summary) = ((0u64, 0usize), (0u64, 0usize), (0u64, 0usize));
    let mut prev: Option<&RecordedRequest> = None;
    for (r, a) in reqs.iter().zip(&acc) {
        if is_summary_request(r) {
            summary.0 += a.miss_tokens;
            summary.1 += 1;
            continue;
        }
        let extends = prev
            .map(|p| r.messages().starts_with(&p.messages()))
            .unwrap_or(true);
        let bucket = if extends { &mut growth } else { &mut rewrite };
        bucket.0 += a.miss_tokens;
        bucket.1 += 1;
        prev = Some(r);
    }
    println!(
        "long session misses: extensions {} tokens in {} requests, after a rewrite {} in {}, summary requests {} in {}",
        growth.0, growth.1, rewrite.0, rewrite.1, summary.0, summary.1
    );
    for (name, prices) in [
        (
            "deepseek-v4-flash list prices (hit = miss/50)",
            V4_FLASH_PRICES,
        ),
        ("V3.2 list prices (hit = miss/10)", V3_2_PRICES),
    ] {
        let (ours, base) = (input_cost(&acc, prices), input_cost(&naive, prices));
        println!(
            "long session cost at {name}: input ${ours:.4} vs naive ${base:.4} (saving {:.1} %)",
            100.0 * (1.0 - ours / base)
        );
    }
}

/// `reasonix run --continue "/compact <focus>"`: the host snips and asks the model for a
/// summary through this client's gateway; the focus text reaches the provider inside the
/// summary request, exactly one summary request is made, one `compacted` (summary, user)
/// event is printed and journaled, and the next turn's requests start with the summary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_with_a_focus_sends_it_in_the_one_summary_request() {
    const FOCUS: &str = "keep the fox line numbers of f3.txt";
    let mock = MockProvider::start_with(chooser(2)).await;
    mock.enable_prompt_cache(Some(WINDOW));
    let env = setup(&mock.base_url());
    // Two short turns: well under every threshold, so only `/compact` rewrites.
    for t in 0..2 {
        let lines = run_turn(&env, t, t == 0);
        assert!(lines.iter().all(|l| l["type"] != "compacted"), "{lines:?}");
    }
    assert!(!mock.requests().iter().any(is_summary_request));
    let out = reasonix(
        &env,
        &["run", "--json", "--continue", &format!("/compact {FOCUS}")],
    );
    assert!(
        out.status.success(),
        "/compact failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out.stdout);
    let summaries: Vec<RecordedRequest> = mock
        .requests()
        .into_iter()
        .filter(is_summary_request)
        .collect();
    assert_eq!(summaries.len(), 1, "one summary request");
    let asked = content(summaries[0].messages().last().expect("a message")).to_string();
    assert!(
        asked.contains(&format!("focus on: {FOCUS}")),
        "the focus is in the summary request: {asked}"
    );
    let compacted: Vec<&Value> = lines.iter().filter(|l| l["type"] == "compacted").collect();
    assert!(
        compacted
            .iter()
            .any(|l| l["kind"] == "summary" && l["trigger"] == "user"),
        "{lines:?}"
    );
    assert_eq!(
        compacted.iter().filter(|l| l["kind"] == "summary").count(),
        1,
        "{lines:?}"
    );
    let done = lines
        .iter()
        .find(|l| l["type"] == "compact_finished")
        .unwrap_or_else(|| panic!("no compact_finished line: {lines:?}"));
    assert!(
        done["summary"]
            .as_str()
            .unwrap_or("")
            .starts_with("compacted: about"),
        "{done}"
    );
    assert_eq!(done["requests"], 1, "{done}");
    let journal = events(&journal_of(&env.home));
    assert_eq!(
        journal
            .iter()
            .filter(|e| e["type"] == "compacted" && e["kind"] == "summary")
            .count(),
        1
    );
    // The next turn's first request carries the summary in place of the old middle.
    let before = mock.requests().len();
    run_turn(&env, 2, false);
    let next = &mock.requests()[before];
    assert!(next
        .messages()
        .iter()
        .any(|m| content(m).starts_with("<compaction-summary>")));
    // Turn 0's tool results were summarised away (its normal-sized prompt stays verbatim).
    assert!(!next
        .messages()
        .iter()
        .any(|m| m["tool_call_id"].as_str().unwrap_or("").starts_with("t0-")));
    // Without a session to compact, the command is refused as bad input (exit 2).
    let fresh = setup(&mock.base_url());
    let out = reasonix(&fresh, &["run", "/compact"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--continue"));
    stop_daemon(&env.home);
}
