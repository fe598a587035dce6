//! A dead or failing provider fails the turn, visibly and boundedly (#15, item 2), end to end:
//! real `reasonix run --json` → real `reasonix-remote` over pipes → the scripted SSE mock
//! provider (or a closed port). Every retry is a `provider_retry` line with its attempt
//! number; the attempt count is bounded by the configured policy; the turn fails with exit 1
//! and a message naming what is wrong.

use std::process::{Command, Stdio};
use std::time::Duration;

mod common;

use common::{host_bin, LocalRig};
use reasonix_testkit::mock_provider::{MockProvider, MockReply};
use serde_json::Value;

/// A home whose provider is `base_url`, with 3 retries in at most 30 s (the defaults, 8 in
/// 90 s, behave the same, only slower).
fn setup(base_url: &str) -> LocalRig {
    let rig = LocalRig::new(base_url, "RX_PF_KEY", "sk-provider-failures");
    let config = rig.home.join("config.toml");
    let mut text = std::fs::read_to_string(&config).expect("config");
    text.push_str("[agent]\nprovider_retries = 3\nprovider_retry_seconds = 30\n");
    std::fs::write(&config, text).expect("config");
    rig
}

/// Run one headless turn (its daemon exits on its own 5 s after the run, as in
/// `e2e_headless`); a generous hang guard (not a timing assertion) kills a run that
/// never ends.
async fn run_json(env: &LocalRig) -> (Option<i32>, Vec<Value>, String) {
    let mut c = tokio::process::Command::from(std_command(env));
    c.kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), c.output())
        .await
        .expect("the run hung instead of failing")
        .expect("run");
    let events = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let text = format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), events, text)
}

fn std_command(env: &LocalRig) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_reasonix"));
    c.args(["run", "--json", "hello"])
        .current_dir(&env.ws)
        .env("REASONIX_HOME", &env.home)
        .env("REASONIX_REMOTE_BIN", host_bin())
        .env("RX_PF_KEY", "sk-provider-failures")
        .env("REASONIX_IDLE_TIMEOUT_SECS", "5")
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn retries<'a>(events: &'a [Value], phase: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == "provider_retry" && e["phase"] == phase)
        .collect()
}

fn finished(events: &[Value]) -> &Value {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == "turn_finished")
        .expect("a turn_finished line")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_answering_500_forever_fails_the_turn_after_the_announced_retries() {
    let mock = MockProvider::start_with(|_| MockReply::status(500, None, "upstream down")).await;
    let env = setup(&mock.base_url());
    let (code, events, text) = run_json(&env).await;
    assert_eq!(code, Some(1), "a failed turn exits 1: {text}");
    // 1 attempt + 3 retries, and nothing more: the host does not re-ask spent retries.
    assert_eq!(mock.request_count(), 4, "{text}");
    let connect = retries(&events, "connect");
    let numbers: Vec<u64> = connect
        .iter()
        .map(|e| e["attempt"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(numbers, vec![2, 3, 4], "{text}");
    for r in &connect {
        assert_eq!(r["max_attempts"], 4, "{text}");
        assert!(
            r["reason"].as_str().unwrap_or("").contains("HTTP 500"),
            "{text}"
        );
        assert!(r["delay_ms"].as_u64().is_some_and(|d| d > 0), "{text}");
        let line = r["text"].as_str().unwrap_or("");
        assert!(
            line.starts_with("retrying the model request in ") && line.contains("attempt "),
            "{line}"
        );
    }
    assert!(retries(&events, "reask").is_empty(), "{text}");
    let fin = finished(&events);
    assert_eq!(fin["outcome"], "failed", "{text}");
    let detail = fin["detail"].as_str().unwrap_or("");
    assert!(
        detail.contains("HTTP 500") && detail.contains("4 attempts"),
        "{detail}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_base_url_port_fails_naming_the_url() {
    // Bind and drop: a port with nothing listening (connection refused).
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let base = format!("http://127.0.0.1:{port}");
    let env = setup(&base);
    let (code, events, text) = run_json(&env).await;
    assert_eq!(code, Some(1), "{text}");
    let connect = retries(&events, "connect");
    assert_eq!(
        connect
            .iter()
            .map(|e| e["attempt"].as_u64().unwrap_or(0))
            .collect::<Vec<_>>(),
        vec![2, 3, 4],
        "{text}"
    );
    let url = format!("{base}/chat/completions");
    assert!(connect
        .iter()
        .all(|r| r["reason"].as_str().unwrap_or("").contains(&url)));
    let fin = finished(&events);
    assert_eq!(fin["outcome"], "failed", "{text}");
    let detail = fin["detail"].as_str().unwrap_or("");
    assert!(
        detail.contains("cannot reach provider `mock`")
            && detail.contains(&url)
            && detail.contains("base_url"),
        "{detail}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_that_always_breaks_off_is_re_asked_three_times_then_fails() {
    let mock = MockProvider::start_with(|_| MockReply::Cut {
        chunks: vec!["half an ".into(), "answer".into()],
    })
    .await;
    let env = setup(&mock.base_url());
    let (code, events, text) = run_json(&env).await;
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(mock.request_count(), 4, "{text}");
    let reask = retries(&events, "reask");
    assert_eq!(
        reask
            .iter()
            .map(|e| (e["attempt"].as_u64(), e["max_attempts"].as_u64()))
            .collect::<Vec<_>>(),
        vec![(Some(2), Some(4)), (Some(3), Some(4)), (Some(4), Some(4))],
        "{text}"
    );
    assert!(retries(&events, "connect").is_empty(), "{text}");
    assert_eq!(finished(&events)["outcome"], "failed", "{text}");
}
