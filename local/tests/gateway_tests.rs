//! The provider gateway against the scripted mock provider over real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use reasonix_forward::proto::{
    ProviderChunk, ProviderRequest, ProviderRetry, RetryPhase, ToolCall, Usage,
};
use reasonix_local::config::{Config, LoadOptions};
use reasonix_local::gateway::retry::RetryPolicy;
use reasonix_local::gateway::{fix_reasoning_replay, Gateway, GatewaySettings};
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

const KEY: &str = "sk-test-0123456789abcdef";

/// A home with a config pointing at `base_url` and the key in `.env` under a variable name no
/// real environment has.
fn setup(base_url: &str) -> (tempfile::TempDir, Config) {
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), base_url, true);
    let cfg = load(home.path());
    (home, cfg)
}

fn write_config(home: &Path, base_url: &str, with_key: bool) {
    std::fs::write(
        home.join("config.toml"),
        format!(
            r#"
default_model = "mock/mock-model"
[[providers]]
name = "mock"
base_url = "{base_url}"
models = ["mock-model", "other-model"]
api_key_env = "REASONIX_GATEWAY_TEST_KEY"
"#
        ),
    )
    .unwrap();
    if with_key {
        std::fs::write(
            home.join(".env"),
            format!("# test key\nREASONIX_GATEWAY_TEST_KEY=\"{KEY}\"\n"),
        )
        .unwrap();
    }
}

fn load(home: &Path) -> Config {
    Config::load(&LoadOptions {
        home: Some(home.to_path_buf()),
        ignore_project: true,
        ..Default::default()
    })
    .unwrap()
}

fn fast() -> GatewaySettings {
    GatewaySettings {
        idle_timeout: Duration::from_secs(20),
        retry: RetryPolicy {
            max_retries: 10,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_secs(15),
            ..RetryPolicy::default()
        },
        ..Default::default()
    }
}

fn request(messages: Vec<Value>) -> ProviderRequest {
    ProviderRequest {
        stream_id: "s1".into(),
        model: None,
        messages,
        tools: Vec::new(),
        temperature: None,
        messages_ref: None,
        messages_base: None,
        effort: None,
    }
}

fn user(text: &str) -> Vec<Value> {
    vec![json!({"role": "user", "content": text})]
}

/// Drain the stream; the hang guard only fires when the gateway never finishes.
async fn collect(gw: &Gateway, req: ProviderRequest) -> Vec<ProviderChunk> {
    let mut rx = gw.stream(req);
    let mut out = Vec::new();
    let guard = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(c) = rx.recv().await {
            out.push(c);
        }
    });
    guard.await.expect("gateway stream never ended");
    out
}

fn text_of(chunks: &[ProviderChunk]) -> String {
    chunks
        .iter()
        .filter_map(|c| match c {
            ProviderChunk::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn reasoning_of(chunks: &[ProviderChunk]) -> String {
    chunks
        .iter()
        .filter_map(|c| match c {
            ProviderChunk::Reasoning { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn calls_of(chunks: &[ProviderChunk]) -> Vec<ToolCall> {
    chunks
        .iter()
        .filter_map(|c| match c {
            ProviderChunk::ToolCall(tc) => Some(tc.clone()),
            _ => None,
        })
        .collect()
}

fn retries_of(chunks: &[ProviderChunk]) -> Vec<ProviderRetry> {
    chunks
        .iter()
        .filter_map(|c| match c {
            ProviderChunk::Retrying(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

fn last_error(chunks: &[ProviderChunk]) -> (String, bool) {
    match chunks.last() {
        Some(ProviderChunk::Error { message, retryable }) => (message.clone(), *retryable),
        other => panic!("expected a final Error, got {other:?} in {chunks:?}"),
    }
}

fn assert_done(chunks: &[ProviderChunk], reason: &str) {
    match chunks.last() {
        Some(ProviderChunk::Done {
            finish_reason,
            model,
        }) => {
            assert_eq!(finish_reason.as_deref(), Some(reason));
            assert_eq!(model, "mock-model");
        }
        other => panic!("expected a final Done, got {other:?} in {chunks:?}"),
    }
    let ends = chunks
        .iter()
        .filter(|c| matches!(c, ProviderChunk::Done { .. } | ProviderChunk::Error { .. }))
        .count();
    assert_eq!(ends, 1, "exactly one terminal chunk: {chunks:?}");
}

#[tokio::test]
async fn text_stream_and_request_shape() {
    let mock = MockProvider::start(vec![MockReply::text(&["Hel", "lo ", "world"])]).await;
    let (_home, cfg) = setup(&mock.base_url());
    let gw = Gateway::with_settings(&cfg, fast());
    let mut req = request(user("hi"));
    req.temperature = Some(0.3);
    let out = collect(&gw, req).await;
    assert_eq!(text_of(&out), "Hello world");
    assert_done(&out, "stop");

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/chat/completions");
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(r.header("accept"), Some("text/event-stream"));
    assert_eq!(r.body["model"], "mock-model");
    assert_eq!(r.body["stream"], true);
    assert_eq!(r.body["stream_options"]["include_usage"], true);
    assert_eq!(r.body["temperature"], 0.3);
    assert_eq!(r.body["messages"], json!(user("hi")));
    assert!(r.body.get("tools").is_none(), "empty tools are omitted");
}

#[tokio::test]
async fn tools_are_sent_when_present() {
    let mock = MockProvider::start(vec![]).await;
    let (_home, cfg) = setup(&mock.base_url());
    let gw = Gateway::with_settings(&cfg, fast());
    let tool =
        json!({"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}});
    let mut req = request(user("hi"));
    req.tools = vec![tool.clone()];
    req.model = Some("other-model".into());
    let out = collect(&gw, req).await;
    // Script exhausted: the documented fallback reply.
    assert_eq!(text_of(&out), "done");
    let body = &mock.requests()[0].body;
    assert_eq!(body["tools"], json!([tool]));
    assert_eq!(body["model"], "other-model");
    assert!(body.get("temperature").is_none());
}

#[tokio::test]
async fn tool_calls_split_across_deltas_aggregate_in_index_order() {
    let args0 = r#"{"path":"src/main.rs","offset":0}"#;
    let args1 = r#"{"command":"cargo test -- --nocapture"}"#;
    let args2 = r#"{"pattern":"fn ünïcode"}"#;
    let reply = MockReply::ToolCalls {
        text: vec!["Let me ".into(), "look.".into()],
        calls: vec![
            MockToolCall::new("call_a", "read_file", args0),
            MockToolCall {
                id: None,
                name: "bash".into(),
                arguments: args1.into(),
            },
            MockToolCall::new("call_c", "grep", args2),
        ],
        split: 2,
        interleave: true,
    };
    let mock = MockProvider::start(vec![reply]).await;
    let (_home, cfg) = setup(&mock.base_url());
    let gw = Gateway::with_settings(&cfg, fast());
    let out = collect(&gw, request(user("go"))).await;

    assert_eq!(text_of(&out), "Let me look.");
    let calls = calls_of(&out);
    assert_eq!(calls.len(), 3, "{out:?}");
    assert_eq!(
        (
            calls[0].id.as_str(),
            calls[0].name.as_str(),
            calls[0].arguments.as_str()
        ),
        ("call_a", "read_file", args0)
    );
    assert_eq!(
        (calls[1].name.as_str(), calls[1].arguments.as_str()),
        ("bash", args1)
    );
    assert!(
        calls[1].id.starts_with("call_") && calls[1].id.len() > 6,
        "generated id {}",
        calls[1].id
    );
    assert_eq!(
        (
            calls[2].id.as_str(),
            calls[2].name.as_str(),
            calls[2].arguments.as_str()
        ),
        ("call_c", "grep", args2)
    );
    for c in &calls {
        serde_json::from_str::<Value>(&c.arguments).expect("complete JSON arguments");
    }
    // Calls come after all text and right before Done.
    let first_call = out
        .iter()
        .position(|c| matches!(c, ProviderChunk::ToolCall(_)))
        .unwrap();
    assert!(out[first_call..]
        .iter()
        .all(|c| !matches!(c, ProviderChunk::Text { .. })));
    assert_done(&out, "tool_calls");
}

#[tokio::test]
async fn reasoning_content_is_streamed_and_replay_is_fixed() {
    let mock = MockProvider::start(vec![MockReply::Reasoning {
        reasoning: vec!["Let me ".into(), "think.".into()],
        text: vec!["Answer".into()],
    }])
    .await;
    let (_home, cfg) = setup(&mock.base_url());
    let gw = Gateway::with_settings(&cfg, fast());
    let call =
        json!([{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]);
    let messages = vec![
        json!({"role": "user", "content": "q"}),
        json!({"role": "assistant", "content": "", "tool_calls": call}),
        json!({"role": "tool", "tool_call_id": "c1", "content": "x"}),
        json!({"role": "assistant", "content": "", "reasoning_content": "kept", "tool_calls": call}),
        json!({"role": "tool", "tool_call_id": "c1", "content": "y"}),
        json!({"role": "assistant", "content": "plain"}),
        json!({"role": "user", "content": "q2"}),
    ];
    let out = collect(&gw, request(messages)).await;
    assert_eq!(reasoning_of(&out), "Let me think.");
    assert_eq!(text_of(&out), "Answer");
    assert_done(&out, "stop");

    let sent = mock.requests()[0].messages();
    assert_eq!(
        sent[1]["reasoning_content"], "",
        "tool-call message gets an empty reasoning"
    );
    assert_eq!(
        sent[3]["reasoning_content"], "kept",
        "existing reasoning is replayed as is"
    );
    assert!(
        sent[5].get("reasoning_content").is_none(),
        "plain messages untouched"
    );
    assert!(sent[0].get("reasoning_content").is_none());
}

#[test]
fn fix_reasoning_replay_helper() {
    let mut msgs = vec![
        json!({"role": "assistant", "content": "a", "tool_calls": [{"id": "1"}], "reasoning_content": null}),
        json!({"role": "assistant", "content": "b", "tool_calls": []}),
        json!({"role": "user", "content": "c", "tool_calls": [{"id": "1"}]}),
    ];
    fix_reasoning_replay(&mut msgs);
    assert_eq!(msgs[0]["reasoning_content"], "");
    assert!(msgs[1].get("reasoning_content").is_none());
    assert!(msgs[2].get("reasoning_content").is_none());
}

#[tokio::test]
async fn think_tags_split_across_deltas() {
    let mock = MockProvider::start(vec![MockReply::text(&[
        "<th",
        "ink>plan",
        "ning</thi",
        "nk>\n\nAns",
        "wer <b>ok</b>",
    ])])
    .await;
    let (_home, cfg) = setup(&mock.base_url());
    let gw = Gateway::with_settings(&cfg, fast());
    let out = collect(&gw, request(user("q"))).await;
    assert_eq!(reasoning_of(&out), "planning");
    assert_eq!(text_of(&out), "Answer <b>ok</b>");
    assert_done(&out, "stop");
}

fn usage_of(chunks: &[ProviderChunk]) -> Usage {
    let u = chunks
        .iter()
        .find_map(|c| match c {
            ProviderChunk::Usage(u) => Some(*u),
            _ => None,
        })
        .expect("a Usage chunk");
    let pos_u = chunks
        .iter()
        .position(|c| matches!(c, ProviderChunk::Usage(_)))
        .unwrap();
    let pos_d = chunks
        .iter()
        .position(|c| matches!(c, ProviderChunk::Done { .. }))
        .unwrap();
    assert!(pos_u < pos_d, "usage before done");
    u
}

#[tokio::test]
async fn usage_deepseek_cache_fields() {
    let mock = MockProvider::start(vec![MockReply::text(&["x"]).with_usage(json!({
        "prompt_tokens": 1200, "completion_tokens": 40, "total_tokens": 1240,
        "prompt_cache_hit_tokens": 1024, "prompt_cache_miss_tokens": 176,
        "completion_tokens_details": {"reasoning_tokens": 12}
    }))])
    .await;
    let (_home, cfg) = setup(&mock.base_url());
    let gw = Gateway::with_settings(&cfg, fast());
    let out = collect(&gw, request(user("q"))).await;
    let u = usage_of(&out);
    assert_eq!(
        u,
        Usage {
            prompt_tokens: 1200,
            completion_tokens: 40,
            cache_hit_tokens: 1024,
            cache_miss_tokens: 176,
            reasoning_tokens: 12,
        }
    );
    assert_done(&out, "stop");
}

#[tokio::test]
async fn usage_openai_cached_tokens() {
    let mock = MockProvider::start(vec![MockReply::text(&["x"]).with_usage(json!({
        "prompt_tokens": 2000, "completion_tokens": 7,
        "prompt_tokens_details": {"cached_tokens": 1536}
    }))])
    .await;
    let (_home, cfg) = setup(&mock.base_url());
    let gw = Gateway::with_settings(&cfg, fast());
    let out = collect(&gw, request(user("q"))).await;
    let u = usage_of(&out);
    assert_eq!((u.prompt_tokens, u.completion_tokens), (2000, 7));
    assert_eq!(
        (u.cache_hit_tokens, u.cache_miss_tokens, u.reasoning_tokens),
        (1536, 464, 0)
    );
}

#[tokio::test]
async fn rate_limit_429_honours_retry_after_then_succeeds() {
    let mock = MockProvider::start(vec![
        MockReply::status(429, Some(1), "Rate limit reached, slow down"),
        MockReply::text(&["ok"]),
    ])
    .await;
    let (_home, cfg) = setup(&mock.base_url());
    let gw = Gateway::with_settings(&cfg, fast());
    let started = Instant::now();
    let out = collect(&gw, request(user("q"))).await;
    assert_eq!(text_of(&out), "ok");
    assert_done(&out, "stop");
    assert_eq!(mock.request_count(), 2);
    // Lower bound only: the base backoff is 5 ms, so waiting ~1 s proves Retry-After was used.
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn server_errors_are_retried() {
    let mock = MockProvider::start(vec![
        MockReply::status(500, None, "internal"),
        MockReply::status(503, None, "overloaded"),
        MockReply::status(408, None, "timeout"),
        MockReply::text(&["fine"]),
    ])
    .await;
    let (_home, cfg) = setup(&mock.base_url());
    let gw = Gateway::with_settings(&cfg, fast());
    let out = collect(&gw, request(user("q"))).await;
    assert_eq!(text_of(&out), "fine");
    assert_done(&out, "stop");
    assert_eq!(mock.request_count(), 4);
}

#[tokio::test]
async fn retries_are_bounded() {
    let mock = MockProvider::start_with(|_| MockReply::status(502, None, "bad gateway")).await;
    let (_home, cfg) = setup(&mock.base_url());
    let mut s = fast();
    s.retry.max_retries = 3;
    let gw = Gateway::with_settings(&cfg, s);
    let out = collect(&gw, request(user("q"))).await;
    let (msg, retryable) = last_error(&out);
    // Spent retries are final: the host must not multiply them by re-asking.
    assert!(!retryable);
    assert!(msg.contains("502") && msg.contains("4 attempts"), "{msg}");
    assert_eq!(mock.request_count(), 4);
    // Every retry was announced before its wait, numbered, with the reason.
    let retries = retries_of(&out);
    assert_eq!(
        retries.iter().map(|r| r.attempt).collect::<Vec<_>>(),
        vec![2, 3, 4]
    );
    for r in &retries {
        assert_eq!(r.max_attempts, 4);
        assert_eq!(r.phase, RetryPhase::Connect);
        assert!(r.reason.contains("HTTP 502"), "{r:?}");
    }
}

#[tokio::test]
async fn retries_stop_at_the_time_budget() {
    let mock = MockProvider::start_with(|_| MockReply::status(500, None, "down")).await;
    let (_home, cfg) = setup(&mock.base_url());
    let mut s = fast();
    // Waits 50, 100, 200, 400, 800, 1600 ms (+ at most 25 % each) fit in 5 s; the next
    // one (3.2 s) would end past it, so the 7th attempt is the last.
    s.retry.base_delay = Duration::from_millis(50);
    s.retry.budget = Duration::from_secs(5);
    let gw = Gateway::with_settings(&cfg, s);
    let out = collect(&gw, request(user("q"))).await;
    let (msg, retryable) = last_error(&out);
    assert!(!retryable);
    assert!(msg.contains("retry budget of 5 s"), "{msg}");
    assert_eq!(mock.request_count(), 7);
    let retries = retries_of(&out);
    assert_eq!(
        retries.iter().map(|r| r.attempt).collect::<Vec<_>>(),
        (2..=7).collect::<Vec<_>>()
    );
    assert!(retries.iter().all(|r| r.max_attempts == 11));
}

#[test]
fn retry_bounds_come_from_the_config() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[agent]\nprovider_retries = 2\nprovider_retry_seconds = 7\n",
    )
    .unwrap();
    let cfg = load(home.path());
    let s = GatewaySettings::from_config(&cfg);
    assert_eq!(s.retry.max_retries, 2);
    assert_eq!(
        s.retry.connect_retries, 2,
        "never more than provider_retries"
    );
    assert_eq!(s.retry.budget, Duration::from_secs(7));
    std::fs::write(
        home.path().join("config.toml"),
        "[agent]\nprovider_retry_seconds = 0\n",
    )
    .unwrap();
    let err = Config::load(&LoadOptions {
        home: Some(home.path().to_path_buf()),
        ignore_project: true,
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("agent.provider_retry_seconds"), "{err}");
}

#[tokio::test]
async fn unauthorized_fails_at_once_naming_the_variable() {
    let mock = MockProvider::start(vec![
        MockReply::status(401, None, "Authentication Fails (invalid key)"),
        MockReply::text(&["should not be reached"]),
    ])
    .await;
    let (_home, cfg) = setup(&mock.base_url());
    let gw = Gateway::with_settings(&cfg, fast());
    let out = collect(&gw, request(user("q"))).await;
    let (msg, retryable) = last_error(&out);
    assert!(!retryable);
    assert!(msg.contains("REASONIX_GATEWAY_TEST_KEY"), "{msg}");
    assert!(msg.contains("401"), "{msg}");
    assert!(!msg.contains(KEY), "the key must never appear in errors");
    assert_eq!(mock.request_count(), 1);
}

#[tokio::test]
async fn forbidden_fails_at_once() {
    let mock = MockProvider::start(vec![MockReply::status(403, None, "no access")]).await;
    let (_home, cfg) = setup(&mock.base_url());
    let gw = Gateway::with_settings(&cfg, fast());
    let out = collect(&gw, request(user("q"))).await;
    assert!(!last_error(&out).1);
    assert_eq!(mock.request_count(), 1);
}

#[tokio::test]
async fn quota_exhausted_429_fails_at_once() {
    let mock = MockProvider::start(vec![
        MockReply::status(429, Some(1), "Insufficient Balance"),
        MockReply::text(&["should not be reached"]),
    ])
    .await;
    let (_home, cfg) = setup(&mock.base_url());
    let gw = Gateway::with_settings(&cfg, fast());
    let out = collect(&gw, request(user("q"))).await;
    let (msg, retryable) = last_error(&out);
    assert!(!retryable);
    assert!(
        msg.contains("quota") && msg.contains("Insufficient Balance"),
        "{msg}"
    );
    assert_eq!(mock.request_count(), 1);
}

#[tokio::test]
async fn bad_request_is_not_retried_and_shows_provider_message() {
    let mock = MockProvider::start(vec![MockReply::status(
        400,
        None,
        "This model's maximum context length is 65536 tokens",
    )])
    .await;
    let (_home, cfg) = setup(&mock.base_url());
    let gw = Gateway::with_settings(&cfg, fast());
    let out = collect(&gw, request(user("q"))).await;
    let (msg, retryable) = last_error(&out);
    assert!(!retryable);
    assert!(msg.contains("maximum context length"), "{msg}");
    assert_eq!(mock.request_count(), 1);
}

#[tokio::test]
async fn cut_stream_is_an_error_not_a_finished_turn() {
    let mock = MockProvider::start(vec![MockReply::Cut {
        chunks: vec!["partial ".into(), "answer".into()],
    }])
    .await;
    let (_home, cfg) = setup(&mock.base_url());
    let gw = Gateway::with_settings(&cfg, fast());
    let out = collect(&gw, request(user("q"))).await;
    assert_eq!(text_of(&out), "partial answer");
    let (msg, retryable) = last_error(&out);
    assert!(retryable);
    assert!(msg.contains("ended early"), "{msg}");
    assert!(!out.iter().any(|c| matches!(c, ProviderChunk::Done { .. })));
    // Not retried by the gateway: mid-stream failures are the daemon's to re-issue.
    assert_eq!(mock.request_count(), 1);
}

#[tokio::test]
async fn finish_reason_without_done_still_finishes() {
    let ev = |delta: Value, fr: Value| {
        json!({"model": "m2", "choices": [{"index": 0, "delta": delta, "finish_reason": fr}]})
            .to_string()
    };
    let mock = MockProvider::start(vec![MockReply::Raw {
        events: vec![
            ev(json!({"content": "hi"}), Value::Null),
            ev(json!({}), json!("length")),
        ],
    }])
    .await;
    let (_home, cfg) = setup(&mock.base_url());
    let gw = Gateway::with_settings(&cfg, fast());
    let out = collect(&gw, request(user("q"))).await;
    assert_eq!(text_of(&out), "hi");
    assert_eq!(
        out.last(),
        Some(&ProviderChunk::Done {
            finish_reason: Some("length".into()),
            model: "m2".into()
        })
    );
}

#[tokio::test]
async fn idle_stream_times_out_with_retryable_error() {
    let mock = MockProvider::start(vec![MockReply::Hang {
        chunks: vec!["thinking...".into()],
    }])
    .await;
    let (_home, cfg) = setup(&mock.base_url());
    let mut s = fast();
    s.idle_timeout = Duration::from_millis(400);
    let gw = Gateway::with_settings(&cfg, s);
    let out = collect(&gw, request(user("q"))).await;
    assert_eq!(text_of(&out), "thinking...");
    let (msg, retryable) = last_error(&out);
    assert!(retryable && msg.contains("idle"), "{msg}");
}

#[tokio::test]
async fn missing_key_names_variable_and_dotenv() {
    let mock = MockProvider::start(vec![]).await;
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), &mock.base_url(), false);
    let cfg = load(home.path());
    let gw = Gateway::with_settings(&cfg, fast());
    let out = collect(&gw, request(user("q"))).await;
    let (msg, retryable) = last_error(&out);
    assert!(!retryable);
    assert!(msg.contains("REASONIX_GATEWAY_TEST_KEY"), "{msg}");
    assert!(
        msg.contains(&home.path().join(".env").display().to_string()),
        "{msg}"
    );
    assert_eq!(mock.request_count(), 0, "nothing is sent without a key");
}

#[tokio::test]
async fn unknown_model_lists_what_exists() {
    let mock = MockProvider::start(vec![]).await;
    let (_home, cfg) = setup(&mock.base_url());
    let gw = Gateway::with_settings(&cfg, fast());
    let mut req = request(user("q"));
    req.model = Some("gpt-nonexistent".into());
    let out = collect(&gw, req).await;
    let (msg, retryable) = last_error(&out);
    assert!(!retryable);
    assert!(
        msg.contains("gpt-nonexistent") && msg.contains("mock-model"),
        "{msg}"
    );
    assert_eq!(mock.request_count(), 0);
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported() {
    // Bind and drop to get a port with nothing listening.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (_home, cfg) = setup(&format!("http://127.0.0.1:{port}"));
    // Connection errors get their own, smaller retry count (3 by default) even when the
    // status retries allow more.
    let gw = Gateway::with_settings(&cfg, fast());
    let out = collect(&gw, request(user("q"))).await;
    let (msg, retryable) = last_error(&out);
    assert!(!retryable);
    let url = format!("http://127.0.0.1:{port}/chat/completions");
    assert!(
        msg.contains("cannot reach provider `mock`") && msg.contains(&url),
        "{msg}"
    );
    assert!(
        msg.contains("4 attempts") && msg.contains("base_url"),
        "{msg}"
    );
    assert!(!msg.contains(KEY));
    let retries = retries_of(&out);
    assert_eq!(
        retries.iter().map(|r| r.attempt).collect::<Vec<_>>(),
        vec![2, 3, 4]
    );
    assert!(retries
        .iter()
        .all(|r| r.max_attempts == 4 && r.reason.contains(&url)));
}

#[tokio::test]
async fn closure_mode_sees_the_messages() {
    let mock = MockProvider::start_with(|req| {
        let last = req
            .messages()
            .last()
            .and_then(|m| m["content"].as_str().map(str::to_string));
        MockReply::text(&[format!("echo: {}", last.unwrap_or_default())])
    })
    .await;
    let (_home, cfg) = setup(&mock.base_url());
    let gw = Gateway::with_settings(&cfg, fast());
    let a = collect(&gw, request(user("first"))).await;
    let b = collect(&gw, request(user("second"))).await;
    assert_eq!(text_of(&a), "echo: first");
    assert_eq!(text_of(&b), "echo: second");
    assert_eq!(mock.request_count(), 2);
}

#[tokio::test]
async fn slow_stream_is_delivered_whole_to_a_late_reader() {
    let chunks: Vec<String> = (0..20).map(|i| format!("{i},")).collect();
    let mock =
        MockProvider::start(vec![MockReply::text(&chunks).slow(Duration::from_millis(5))]).await;
    let (_home, cfg) = setup(&mock.base_url());
    let gw = Gateway::with_settings(&cfg, fast());
    let mut rx = gw.stream(request(user("q")));
    // Nobody reads while the provider streams; the gateway must keep draining it.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(c) = rx.recv().await {
            out.push(c);
        }
    })
    .await
    .expect("stream ended");
    assert_eq!(text_of(&out), chunks.concat());
    assert_done(&out, "stop");
}
