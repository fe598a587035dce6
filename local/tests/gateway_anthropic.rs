//! The gateway's Anthropic Messages wire (`kind = "anthropic"`) against the scripted mock's
//! Anthropic wire over real HTTP: request shape and headers, the stream into chunks, thinking
//! signatures handed back and replayed, cache usage, retries as for `openai`, broken and
//! malformed streams, and reasoning effort on both wires.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use reasonix_forward::proto::{ProviderChunk, ProviderRequest, ReasoningEffort, ToolCall, Usage};
use reasonix_local::config::{Config, LoadOptions};
use reasonix_local::gateway::retry::RetryPolicy;
use reasonix_local::gateway::{Gateway, GatewaySettings};
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

const KEY: &str = "sk-ant-test-0123456789abcdef";

fn setup(base_url: &str, extra: &str) -> (tempfile::TempDir, Config) {
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), base_url, extra);
    let cfg = Config::load(&LoadOptions {
        home: Some(home.path().to_path_buf()),
        ignore_project: true,
        ..Default::default()
    })
    .unwrap();
    (home, cfg)
}

fn write_config(home: &Path, base_url: &str, extra: &str) {
    std::fs::write(
        home.join("config.toml"),
        format!(
            r#"
default_model = "claude/claude-mock"
[[providers]]
name = "claude"
kind = "anthropic"
base_url = "{base_url}"
models = ["claude-mock", "claude-small"]
api_key_env = "REASONIX_ANTHROPIC_TEST_KEY"
{extra}
[providers.model_overrides."claude-small"]
efforts = ["low", "medium"]
max_output_tokens = 8192
"#
        ),
    )
    .unwrap();
    std::fs::write(
        home.join(".env"),
        format!("REASONIX_ANTHROPIC_TEST_KEY={KEY}\n"),
    )
    .unwrap();
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

fn tool(name: &str) -> Value {
    json!({"type": "function", "function": {"name": name, "description": format!("the {name} tool"),
           "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}})
}

async fn collect(gw: &Gateway, req: ProviderRequest) -> Vec<ProviderChunk> {
    let mut rx = gw.stream(req);
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(c) = rx.recv().await {
            out.push(c);
        }
    })
    .await
    .expect("gateway stream never ended");
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

fn last_error(chunks: &[ProviderChunk]) -> (String, bool) {
    match chunks.last() {
        Some(ProviderChunk::Error { message, retryable }) => (message.clone(), *retryable),
        other => panic!("expected a final Error, got {other:?} in {chunks:?}"),
    }
}

/// The OpenAI-shaped assistant message the host would build from these chunks.
fn assistant_from(chunks: &[ProviderChunk]) -> Value {
    let calls: Vec<Value> = chunks
        .iter()
        .filter_map(|c| match c {
            ProviderChunk::ToolCall(ToolCall {
                id,
                name,
                arguments,
            }) => Some(json!({
                "id": id, "type": "function", "function": {"name": name, "arguments": arguments}})),
            _ => None,
        })
        .collect();
    let mut m = json!({"role": "assistant", "content": text_of(chunks),
                       "reasoning_content": reasoning_of(chunks), "tool_calls": calls});
    if let Some(data) = chunks.iter().find_map(|c| match c {
        ProviderChunk::Replay { data } => Some(data.clone()),
        _ => None,
    }) {
        m["provider_replay"] = data;
    }
    m
}

#[tokio::test]
async fn a_tool_step_streams_and_its_thinking_is_replayed() {
    let mock = MockProvider::start_anthropic(vec![
        MockReply::ToolCalls {
            text: vec!["Reading ".into(), "it.".into()],
            calls: vec![
                MockToolCall::new("toolu_a", "read_file", r#"{"path":"src/ünï.rs"}"#),
                MockToolCall::new("toolu_b", "ls", ""),
            ],
            split: 3,
            interleave: false,
        }
        .with_thinking(&["The user ", "wants a file."]),
        MockReply::text(&["It says ", "hi."]),
    ])
    .await;
    let (_home, cfg) = setup(&mock.base_url(), "");
    let gw = Gateway::with_settings(&cfg, fast());
    let history = vec![
        json!({"role": "system", "content": "You are Reasonix."}),
        json!({"role": "user", "content": "read src/ünï.rs"}),
    ];
    let mut req = request(history.clone());
    req.tools = vec![tool("ls"), tool("read_file")];
    req.temperature = Some(0.2);
    req.effort = Some(ReasoningEffort::Medium);
    let out = collect(&gw, req.clone()).await;
    assert_eq!(reasoning_of(&out), "The user wants a file.");
    assert_eq!(text_of(&out), "Reading it.");
    let calls: Vec<&ToolCall> = out
        .iter()
        .filter_map(|c| match c {
            ProviderChunk::ToolCall(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2, "{out:?}");
    assert_eq!(
        (calls[0].id.as_str(), calls[0].arguments.as_str()),
        ("toolu_a", r#"{"path":"src/ünï.rs"}"#)
    );
    // A call with no arguments streamed gets its start input, an empty object.
    assert_eq!(
        (calls[1].name.as_str(), calls[1].arguments.as_str()),
        ("ls", "{}")
    );
    assert!(
        matches!(out.last(), Some(ProviderChunk::Done { finish_reason: Some(r), .. }) if r == "tool_calls")
    );

    let r = &mock.requests()[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some(KEY));
    assert_eq!(r.header("authorization"), None, "x-api-key is the default");
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("accept"), Some("text/event-stream"));
    let b = &r.body;
    assert_eq!(b["model"], "claude-mock");
    assert_eq!(b["max_tokens"], 32_000);
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 6144})
    );
    assert!(
        b.get("temperature").is_none(),
        "no temperature beside thinking"
    );
    assert_eq!(
        b["system"],
        json!([{"type": "text", "text": "You are Reasonix.", "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(b["tools"][0]["name"], "ls");
    assert_eq!(
        b["tools"][1]["input_schema"]["properties"]["path"]["type"],
        "string"
    );
    assert!(b["tools"][0].get("cache_control").is_none());
    assert_eq!(b["tools"][1]["cache_control"], json!({"type": "ephemeral"}));

    // The next step, as the host sends it: the assistant message with what the gateway
    // handed back, then the tool results. The mock refuses it without the thinking.
    let mut next = history.clone();
    next.push(assistant_from(&out));
    next.push(json!({"role": "tool", "tool_call_id": "toolu_a", "content": "hi"}));
    next.push(json!({"role": "tool", "tool_call_id": "toolu_b", "content": "src/"}));
    let mut stripped = next.clone();
    stripped[2]
        .as_object_mut()
        .unwrap()
        .remove("provider_replay");
    let mut req2 = req.clone();
    req2.messages = stripped;
    let (msg, retry) = last_error(&collect(&gw, req2).await);
    assert!(!retry);
    assert!(
        msg.contains("HTTP 400") && msg.contains("Expected `thinking`"),
        "{msg}"
    );
    let mut req3 = req.clone();
    req3.messages = next;
    let out = collect(&gw, req3).await;
    assert_eq!(text_of(&out), "It says hi.", "{out:?}");
    let sent = mock.requests().last().unwrap().body.clone();
    let blocks = sent["messages"][1]["content"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "thinking");
    assert_eq!(blocks[0]["thinking"], "The user wants a file.");
    assert_eq!(blocks[1], json!({"type": "text", "text": "Reading it."}));
    assert_eq!(blocks[2]["input"], json!({"path": "src/ünï.rs"}));
    // Both results in one user message, the newest and the previous newest marked.
    assert_eq!(sent["messages"][2]["content"].as_array().unwrap().len(), 2);
    assert_eq!(
        sent["messages"][2]["content"][1]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(
        sent["messages"][0]["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(sent.to_string().matches("cache_control").count(), 4);
}

#[tokio::test]
async fn usage_comes_from_the_cache_fields() {
    let mock = MockProvider::start_anthropic(vec![]).await;
    mock.enable_prompt_cache(None);
    let (_home, cfg) = setup(&mock.base_url(), "");
    let gw = Gateway::with_settings(&cfg, fast());
    let sys = json!({"role": "system", "content": "s".repeat(6000)});
    let usage = |out: &[ProviderChunk]| -> Usage {
        out.iter()
            .find_map(|c| match c {
                ProviderChunk::Usage(u) => Some(*u),
                _ => None,
            })
            .expect("usage")
    };
    let first = collect(
        &gw,
        request(vec![sys.clone(), json!({"role": "user", "content": "one"})]),
    )
    .await;
    let u1 = usage(&first);
    assert_eq!(u1.cache_hit_tokens, 0);
    assert_eq!(u1.prompt_tokens, u1.cache_miss_tokens);
    let second = collect(
        &gw,
        request(vec![
            sys,
            json!({"role": "user", "content": "one"}),
            json!({"role": "assistant", "content": "done"}),
            json!({"role": "user", "content": "two"}),
        ]),
    )
    .await;
    let u2 = usage(&second);
    let acc = mock.prompt_accounting();
    // prompt = input + read + write; hit = read: the mock's own figures, unchanged.
    assert_eq!(u2.cache_hit_tokens, acc[1].hit_tokens);
    assert_eq!(u2.prompt_tokens, acc[1].prompt_tokens);
    assert_eq!(u2.cache_hit_tokens + u2.cache_miss_tokens, u2.prompt_tokens);
    assert_eq!(
        u2.cache_hit_tokens, u1.prompt_tokens,
        "the whole first request was read"
    );
}

#[tokio::test]
async fn bearer_auth_and_retry_after_as_for_openai() {
    let mock = MockProvider::start_anthropic(vec![
        MockReply::Status {
            code: 429,
            retry_after: Some(1),
            body: json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}).to_string(),
        },
        MockReply::Status {
            code: 529,
            retry_after: None,
            body: json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}).to_string(),
        },
        MockReply::text(&["ok"]),
    ])
    .await;
    let (_home, cfg) = setup(&mock.base_url(), "auth_header = \"bearer\"");
    let gw = Gateway::with_settings(&cfg, fast());
    let started = Instant::now();
    let out = collect(&gw, request(vec![json!({"role": "user", "content": "hi"})])).await;
    assert_eq!(text_of(&out), "ok", "{out:?}");
    let retries: Vec<_> = out
        .iter()
        .filter_map(|c| match c {
            ProviderChunk::Retrying(r) => Some(r.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(retries.len(), 2, "{out:?}");
    assert_eq!(retries[0].delay_ms, 1000, "Retry-After honoured");
    assert!(
        retries[0].reason.contains("429") && retries[0].reason.contains("slow down"),
        "{:?}",
        retries[0]
    );
    assert!(retries[1].reason.contains("529"), "{:?}", retries[1]);
    assert!(started.elapsed() >= Duration::from_secs(1));
    let r = &mock.requests()[0];
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(r.header("x-api-key"), None);

    // A rejected key fails at once, naming the variable.
    let mock = MockProvider::start_anthropic(vec![MockReply::Status {
        code: 401,
        retry_after: None,
        body: json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}).to_string(),
    }])
    .await;
    let (_home, cfg) = setup(&mock.base_url(), "");
    let out = collect(
        &Gateway::with_settings(&cfg, fast()),
        request(vec![json!({"role": "user", "content": "hi"})]),
    )
    .await;
    let (msg, retry) = last_error(&out);
    assert!(
        !retry && msg.contains("REASONIX_ANTHROPIC_TEST_KEY") && msg.contains("invalid x-api-key"),
        "{msg}"
    );
    assert!(!msg.contains(KEY));
    assert_eq!(mock.request_count(), 1);
}

#[tokio::test]
async fn cut_and_malformed_streams_are_errors() {
    let mock = MockProvider::start_anthropic(vec![
        MockReply::Cut {
            chunks: vec!["half an ".into(), "answer".into()],
        },
        MockReply::Raw {
            events: vec![
                json!({"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 1}}}).to_string(),
                json!({"type": "content_block_delta", "index": 3, "delta": {"type": "text_delta", "text": "x"}}).to_string(),
                json!({"type": "message_stop"}).to_string(),
            ],
        },
        MockReply::Raw {
            events: vec![
                json!({"type": "message_start", "message": {"model": "m"}}).to_string(),
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}).to_string(),
            ],
        },
    ])
    .await;
    let (_home, cfg) = setup(&mock.base_url(), "");
    let gw = Gateway::with_settings(&cfg, fast());
    let hi = || request(vec![json!({"role": "user", "content": "hi"})]);
    let out = collect(&gw, hi()).await;
    assert_eq!(text_of(&out), "half an answer");
    let (msg, retry) = last_error(&out);
    assert!(retry && msg.contains("ended early"), "{msg}");
    let (msg, retry) = last_error(&collect(&gw, hi()).await);
    assert!(
        retry && msg.contains("content block 3, which was never started"),
        "{msg}"
    );
    let (msg, retry) = last_error(&collect(&gw, hi()).await);
    assert!(retry && msg.contains("overloaded_error"), "{msg}");
}

#[tokio::test]
async fn effort_levels_are_checked_and_mapped_per_wire() {
    let mock = MockProvider::start_anthropic(vec![]).await;
    let (_home, cfg) = setup(&mock.base_url(), "");
    let gw = Gateway::with_settings(&cfg, fast());
    // `claude-small` takes low and medium only; `max` is refused before any request.
    let mut req = request(vec![json!({"role": "user", "content": "hi"})]);
    req.model = Some("claude-small".into());
    req.effort = Some(ReasoningEffort::Max);
    let (msg, retry) = last_error(&collect(&gw, req.clone()).await);
    assert!(!retry);
    assert!(
        msg.contains("claude/claude-small")
            && msg.contains("`max`")
            && msg.contains("it supports: low, medium"),
        "{msg}"
    );
    assert_eq!(mock.request_count(), 0);
    // Its budget is cut to fit its max_output_tokens of 8192.
    req.effort = Some(ReasoningEffort::Medium);
    collect(&gw, req).await;
    let b = mock.requests()[0].body.clone();
    assert_eq!(b["max_tokens"], 8192);
    assert_eq!(b["thinking"]["budget_tokens"], 6144);

    // The OpenAI wire: `reasoning_effort` by name, and another wire's replay data dropped.
    let oa = MockProvider::start(vec![]).await;
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!("default_model = \"o/m\"\n[[providers]]\nname = \"o\"\nbase_url = \"{}\"\nmodels = [\"m\"]\napi_key_env = \"REASONIX_ANTHROPIC_TEST_KEY\"\n", oa.base_url()),
    )
    .unwrap();
    std::fs::write(
        home.path().join(".env"),
        format!("REASONIX_ANTHROPIC_TEST_KEY={KEY}\n"),
    )
    .unwrap();
    let cfg = Config::load(&LoadOptions {
        home: Some(home.path().to_path_buf()),
        ignore_project: true,
        ..Default::default()
    })
    .unwrap();
    let gw = Gateway::with_settings(&cfg, fast());
    let mut req = request(vec![
        json!({"role": "user", "content": "hi"}),
        json!({"role": "assistant", "content": "x", "reasoning_content": "r",
               "provider_replay": {"anthropic": [{"type": "thinking", "signature": "s", "len": 1}]}}),
        json!({"role": "user", "content": "again"}),
    ]);
    req.effort = Some(ReasoningEffort::High);
    collect(&gw, req.clone()).await;
    let b = oa.requests()[0].body.clone();
    assert_eq!(b["reasoning_effort"], "high");
    assert!(b["messages"][1].get("provider_replay").is_none(), "{b}");
    assert_eq!(b["messages"][1]["reasoning_content"], "r");
    // `max` is not an OpenAI level unless the model lists it.
    req.effort = Some(ReasoningEffort::Max);
    let (msg, _) = last_error(&collect(&gw, req).await);
    assert!(msg.contains("it supports: low, medium, high"), "{msg}");
    assert_eq!(oa.request_count(), 1);
}

#[test]
fn provider_config_checks() {
    let load = |user: &str, project: Option<&str>| {
        let home = tempfile::tempdir().unwrap();
        let proj = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), user).unwrap();
        if let Some(p) = project {
            std::fs::write(proj.path().join("reasonix.toml"), p).unwrap();
        }
        Config::load(&LoadOptions {
            home: Some(home.path().to_path_buf()),
            project_dir: Some(proj.path().to_path_buf()),
            ignore_project: project.is_none(),
            ..Default::default()
        })
    };
    let base = "[[providers]]\nname = \"c\"\nkind = \"anthropic\"\nbase_url = \"https://api.anthropic.com\"\nmodels = [\"m\"]\napi_key_env = \"ANTHROPIC_API_KEY\"\n";
    let cfg = load(base, None).unwrap();
    let m = cfg.resolve_model(Some("c/m")).unwrap();
    assert_eq!(m.efforts, ReasoningEffort::ALL.to_vec());
    assert_eq!(m.auth, reasonix_local::config::AuthHeader::XApiKey);
    // A default effort the model does not take is refused at load, naming both.
    let e = load(
        &format!("{base}efforts = [\"low\"]\neffort = \"high\"\n"),
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("c/m") && e.contains("`high`") && e.contains("it supports: low"),
        "{e}"
    );
    // An unknown kind or level names the choices.
    let e = load(&base.replace("anthropic\"", "gemini\""), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("openai") && e.contains("anthropic"), "{e}");
    let e = load(&format!("{base}efforts = [\"extreme\"]\n"), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("extreme") && e.contains("max"), "{e}");
    // A project file cannot change how the key is sent; it may choose efforts.
    let cfg = load(
        base,
        Some("[[providers]]\nname = \"c\"\nauth_header = \"bearer\"\neffort = \"low\"\n"),
    )
    .unwrap();
    let m = cfg.resolve_model(Some("c/m")).unwrap();
    assert_eq!(m.auth, reasonix_local::config::AuthHeader::XApiKey);
    assert_eq!(m.default_effort, Some(ReasoningEffort::Low));
    assert!(
        cfg.warnings().iter().any(|w| w.contains("auth_header")),
        "{:?}",
        cfg.warnings()
    );
    // The built-in DeepSeek provider offers DeepSeek's levels.
    let cfg = load("", None).unwrap();
    let m = cfg.resolve_model(None).unwrap();
    assert_eq!(
        m.efforts,
        [
            ReasoningEffort::Low,
            ReasoningEffort::High,
            ReasoningEffort::Max
        ]
    );
    assert_eq!(m.auth, reasonix_local::config::AuthHeader::Bearer);
}
