//! The compaction ladder at every window size, driven the three ways users drive a session:
//! one long-lived client, `reasonix run --continue` once per turn (a client process per
//! turn), and the real TUI under tmux quitting and reattaching every few turns.
//!
//! Each cell is a window (8k, 16k, 32k, 128k, 1M tokens) × a tool-output size (1 KB, 6 KB,
//! 40 KB) × 32 turns of one `read_file` step and an answer, against the mock provider that
//! caches prompts like DeepSeek and refuses any request over the window. The scripted model
//! reuses one tool-call id in every turn (`call_0`, as providers that number the calls of a
//! response do), which used to freeze the session's size at every snip after the first.
//!
//! Oracles: the mock's window (no request refused), every turn's answer, and the journal:
//! each `compacted` event's `tokens_after` against the prompt tokens the mock measured for
//! the next request (within the estimator's error). Cache-hit shares are printed per cell
//! (`cargo nextest run -p reasonix --test compaction_matrix --success-output immediate`).

mod common;
mod term_common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{host_bin, LocalRig};
use reasonix_forward::proto::{
    EventKind, OpenSession, Request, Response, SessionSettings, TurnOutcome,
};
use reasonix_local::client::ClientEvent;
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall, RecordedRequest};
use serde_json::{json, Value};
use term_common::{stop_daemons, Daemons, Tmux};

const TURNS: usize = 32;
const SIZES: [usize; 3] = [1024, 6 * 1024, 40 * 1024];
const KEY_ENV: &str = "RX_MATRIX_KEY";
/// Files the turns read in rotation (their contents differ).
const FILES: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Driver {
    /// One library client for the whole session.
    LongLived,
    /// `reasonix run --json --continue` per turn.
    RunPerTurn,
    /// The TUI under tmux, quit and started again with `--continue` every few turns.
    TuiReattach,
}

fn content(m: &Value) -> &str {
    m.get("content").and_then(Value::as_str).unwrap_or("")
}

fn is_summary_request(r: &RecordedRequest) -> bool {
    r.messages()
        .last()
        .is_some_and(|m| content(m).contains("<compaction-request>"))
}

/// The turn number of the newest "turn N:" prompt of a request.
fn turn_of(msgs: &[Value]) -> usize {
    msgs.iter()
        .rev()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| {
            content(m)
                .rsplit("\n\n")
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .find_map(|p| {
            p.strip_prefix("turn ")?
                .split(':')
                .next()?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// The scripted model: a turn's first step reads a file (always as call `call_0`), the next
/// answers "turn N done"; a summary request gets a short structured summary.
fn chooser() -> impl Fn(&RecordedRequest) -> MockReply + Send + Sync + 'static {
    |r: &RecordedRequest| {
        if is_summary_request(r) {
            return MockReply::text(&[
                "## Goal\n- read the workspace files turn by turn\n## Files touched\n- f*.txt (read)\n## Pending work\n- keep reading\n",
            ]);
        }
        let msgs = r.messages();
        let turn = turn_of(&msgs);
        if msgs.last().is_some_and(|m| m["role"] == "tool") {
            return MockReply::text(&[format!("turn {turn} done")]);
        }
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_0",
                "read_file",
                &json!({"path": format!("f{}.txt", turn % FILES)}).to_string(),
            )],
            64,
        )
    }
}

fn write_files(ws: &Path, size: usize) {
    for i in 0..FILES {
        let mut text = String::new();
        let mut n = 0;
        while text.len() < size {
            text.push_str(&format!(
                "file {i} line {n}: the quick brown fox {} jumps over the lazy dog\n",
                (n * 7919 + i * 13) % 1000
            ));
            n += 1;
        }
        text.truncate(size);
        std::fs::write(ws.join(format!("f{i}.txt")), text).expect("file");
    }
}

fn write_config(home: &Path, base_url: &str, window: u64) {
    term_common::write_mock_config(
        home,
        base_url,
        KEY_ENV,
        &format!("context_window = {window}\n[permissions]\nmode = \"yolo\"\n"),
    );
}

fn journal_events(home: &Path) -> Vec<Value> {
    let mut stack = vec![home.join("sessions")];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "archive") {
                continue;
            }
            for e in std::fs::read_dir(&p).expect("read_dir").flatten() {
                stack.push(e.path());
            }
        } else if p.extension().is_some_and(|e| e == "jsonl") {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            if text.contains("\"session_started\"") {
                return text
                    .lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect();
            }
        }
    }
    panic!("no journal under {}", home.display());
}

fn prompt(turn: usize) -> String {
    format!("turn {turn}: read the next file")
}

fn answer(turn: usize) -> String {
    format!("turn {turn} done")
}

/// Drive `TURNS` turns through one library client.
async fn drive_long_lived(rig: &LocalRig) {
    let config = rig.config();
    let (client, mut events) = rig.client(&config);
    let opened = client
        .request(Request::OpenSession(OpenSession {
            new: true,
            // As the TUI opens it: the window and ladder from the config.
            settings: SessionSettings {
                model: Some("mock/m".into()),
                context: config.context_settings(None),
                policy: config.session_policy(),
                headless: false,
                ..SessionSettings::default()
            },
            ..OpenSession::default()
        }))
        .await
        .expect("open");
    assert!(matches!(opened, Response::SessionOpened(_)), "{opened:?}");
    for t in 0..TURNS {
        client
            .submit_turn(&format!("t{t}"), &prompt(t))
            .await
            .expect("submit");
        let mut text = String::new();
        loop {
            let ev = tokio::time::timeout(Duration::from_secs(120), events.recv())
                .await
                .expect("an event within 120 s")
                .expect("client alive");
            let ClientEvent::Event(e) = ev else { continue };
            match e.kind {
                EventKind::AssistantMessage { content, .. } => text.push_str(&content),
                EventKind::TurnFinished { outcome, detail } => {
                    assert!(
                        matches!(outcome, TurnOutcome::Completed),
                        "turn {t} ended {outcome:?}: {detail:?}"
                    );
                    break;
                }
                _ => {}
            }
        }
        assert!(text.contains(&answer(t)), "turn {t} answered {text:?}");
    }
}

/// Drive `TURNS` turns with one `reasonix run --continue` process each.
fn drive_run_per_turn(rig: &LocalRig) {
    for t in 0..TURNS {
        let p = prompt(t);
        let mut args = vec!["run", "--json", "--yolo"];
        if t > 0 {
            args.push("--continue");
        }
        args.push(&p);
        let out = common::reasonix_command(rig, &host_bin(), &args)
            .env(KEY_ENV, "sk-test")
            .env("REASONIX_IDLE_TIMEOUT_SECS", "60")
            .output()
            .expect("run reasonix");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "turn {t} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains(&answer(t)), "turn {t} answered:\n{stdout}");
    }
}

/// Drive `TURNS` turns in the real TUI, quitting it and starting it again with `--continue`
/// every `EVERY` turns.
fn drive_tui(rig: &LocalRig) {
    const EVERY: usize = 4;
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"));
    let cmd = format!(
        "cd {} && env HOME={} REASONIX_HOME={} REASONIX_REMOTE_BIN={} REASONIX_IDLE_TIMEOUT_SECS=60 {}",
        rig.ws.display(),
        rig.dir.path().display(),
        rig.home.display(),
        host_bin().display(),
        bin.display()
    );
    let mut tui: Option<Tmux> = None;
    for t in 0..TURNS {
        if t % EVERY == 0 {
            if let Some(old) = tui.take() {
                old.send_keys(&["C-c"]);
                old.send_keys(&["C-c"]);
                drop(old);
            }
            let next = if t == 0 {
                Tmux::tui(&cmd)
            } else {
                Tmux::tui(&format!("{cmd} --continue"))
            };
            next.wait_for("connected");
            tui = Some(next);
        }
        let Some(ui) = tui.as_ref() else {
            unreachable!("started above")
        };
        ui.send_keys(&[&prompt(t), "Enter"]);
        ui.wait_screen(Duration::from_secs(120), &answer(t), |s| {
            s.contains(&answer(t)) || s.contains("over the context window")
        });
        let s = ui.screen();
        assert!(
            !s.contains("over the context window"),
            "turn {t} failed:\n{s}"
        );
    }
    if let Some(ui) = tui {
        ui.send_keys(&["C-c"]);
        ui.send_keys(&["C-c"]);
    }
}

/// What one cell measured.
struct CellReport {
    requests: usize,
    snips: usize,
    summaries: usize,
    max_prompt: u64,
    hit_share: f64,
}

async fn run_cell(driver: Driver, window: u64, size: usize) -> CellReport {
    let mock = MockProvider::start_with(chooser()).await;
    mock.enable_prompt_cache(Some(window));
    let rig = LocalRig::new(&mock.base_url(), KEY_ENV, "sk-test");
    write_config(&rig.home, &mock.base_url(), window);
    write_files(&rig.ws, size);
    let _daemons = Daemons(&rig.home);
    match driver {
        Driver::LongLived => drive_long_lived(&rig).await,
        Driver::RunPerTurn => tokio::task::block_in_place(|| drive_run_per_turn(&rig)),
        Driver::TuiReattach => tokio::task::block_in_place(|| drive_tui(&rig)),
    }
    stop_daemons(&rig.home);
    let cell = format!("{driver:?} window {window} output {size} B");

    let acc = mock.prompt_accounting();
    let refused: Vec<_> = acc.iter().filter(|a| a.rejected).collect();
    assert!(
        refused.is_empty(),
        "{cell}: requests over the window: {refused:?}"
    );
    let max_prompt = acc.iter().map(|a| a.prompt_tokens).max().unwrap_or(0);
    assert!(max_prompt <= window, "{cell}: largest prompt {max_prompt}");
    let reqs = mock.requests();
    let main = reqs.iter().filter(|r| !is_summary_request(r)).count();
    assert_eq!(main, TURNS * 2, "{cell}: two model steps per turn");

    // Each compaction's `tokens_after` against what the next request measured: the journal
    // orders a compaction before the usage of the request that followed it.
    let evs = journal_events(&rig.home);
    let (mut snips, mut summaries) = (0, 0);
    let mut pending: Option<(u64, String)> = None;
    let mut checked = 0;
    for e in &evs {
        match e["type"].as_str() {
            Some("compacted") => {
                match e["kind"].as_str() {
                    Some("snip") => snips += 1,
                    Some("summary") => summaries += 1,
                    other => panic!("{cell}: compaction kind {other:?}"),
                }
                let (before, after) = (
                    e["tokens_before"].as_u64().unwrap_or(0),
                    e["tokens_after"].as_u64().unwrap_or(0),
                );
                assert!(
                    after < before,
                    "{cell}: a compaction that freed nothing: {e}"
                );
                pending = Some((after, e.to_string()));
            }
            Some("usage") => {
                let note = e["cache_note"].as_str().unwrap_or("");
                if note.contains("summary request") {
                    continue;
                }
                if let Some((after, what)) = pending.take() {
                    let measured = e["usage"]["prompt_tokens"].as_u64().unwrap_or(0);
                    // The estimator calibrates bytes → tokens from the provider's last
                    // report; between two requests it is off by a few per cent at most.
                    let err = (after as f64 - measured as f64).abs() / measured.max(1) as f64;
                    assert!(
                        err <= 0.15,
                        "{cell}: tokens_after {after} but the next request measured {measured} ({:.0} % off): {what}",
                        err * 100.0
                    );
                    checked += 1;
                }
            }
            _ => {}
        }
    }
    assert!(
        pending.is_none(),
        "{cell}: a compaction no request followed"
    );
    if window <= 32_000 && size >= 6 * 1024 {
        assert!(
            snips + summaries > 0 && checked > 0,
            "{cell}: a window this small must have been compacted"
        );
    }
    let prompt: u64 = acc.iter().map(|a| a.prompt_tokens).sum();
    let hit: u64 = acc.iter().map(|a| a.hit_tokens).sum();
    let report = CellReport {
        requests: reqs.len(),
        snips,
        summaries,
        max_prompt,
        hit_share: 100.0 * hit as f64 / prompt.max(1) as f64,
    };
    println!(
        "compaction matrix: {cell}: {TURNS} turns, {} requests, {} snips, {} summaries, largest prompt {} tokens, {:.1} % of prompt tokens from cache",
        report.requests, report.snips, report.summaries, report.max_prompt, report.hit_share
    );
    report
}

async fn row(driver: Driver, window: u64) {
    for size in SIZES {
        run_cell(driver, window, size).await;
    }
}

macro_rules! cells {
    ($($name:ident: $driver:expr, $window:expr;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            row($driver, $window).await;
        }
    )*};
}

cells! {
    long_lived_8k: Driver::LongLived, 8_000;
    long_lived_16k: Driver::LongLived, 16_000;
    long_lived_32k: Driver::LongLived, 32_000;
    long_lived_128k: Driver::LongLived, 128_000;
    long_lived_1m: Driver::LongLived, 1_000_000;
    run_per_turn_8k: Driver::RunPerTurn, 8_000;
    run_per_turn_16k: Driver::RunPerTurn, 16_000;
    run_per_turn_32k: Driver::RunPerTurn, 32_000;
    run_per_turn_128k: Driver::RunPerTurn, 128_000;
    run_per_turn_1m: Driver::RunPerTurn, 1_000_000;
    tui_reattach_8k: Driver::TuiReattach, 8_000;
    tui_reattach_16k: Driver::TuiReattach, 16_000;
    tui_reattach_32k: Driver::TuiReattach, 32_000;
    tui_reattach_128k: Driver::TuiReattach, 128_000;
    tui_reattach_1m: Driver::TuiReattach, 1_000_000;
}
