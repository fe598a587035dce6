//! The mock's Anthropic Messages wire over real HTTP: the event stream, the checks the API
//! makes (thinking replay, tool results, breakpoints), and the explicit prompt cache.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use reasonix_testkit::mock_anthropic::signature_of;
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall, MockWire};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn post_with(base: &str, path: &str, headers: &str, body: &Value) -> String {
    let addr = base.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = body.to_string();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

async fn post(base: &str, body: &Value) -> String {
    post_with(
        base,
        "/v1/messages",
        "x-api-key: k\r\nanthropic-version: 2023-06-01\r\n",
        body,
    )
    .await
}

/// The `(event, data)` pairs of an SSE body.
fn events(reply: &str) -> Vec<(String, Value)> {
    let body = reply.split("\r\n\r\n").nth(1).unwrap_or("");
    body.split("\n\n")
        .filter(|f| !f.trim().is_empty())
        .map(|f| {
            let ev = f
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .unwrap_or("")
                .to_string();
            let data = f
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap_or("null");
            (ev, serde_json::from_str(data).unwrap())
        })
        .collect()
}

fn request(messages: Value) -> Value {
    json!({"model": "claude-mock", "max_tokens": 4096, "stream": true,
           "thinking": {"type": "enabled", "budget_tokens": 2048},
           "messages": messages})
}

#[tokio::test]
async fn thinking_and_tool_use_stream_and_the_thinking_must_come_back() {
    let mock = MockProvider::start_anthropic(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new("toolu_1", "read_file", r#"{"path":"a"}"#)],
            4,
        )
        .with_thinking(&["I should ", "read it"]),
        MockReply::text(&["done"]),
        MockReply::text(&["done again"]),
    ])
    .await;
    assert_eq!(mock.wire(), MockWire::Anthropic);
    let r = post(
        &mock.base_url(),
        &request(json!([{"role": "user", "content": "go"}])),
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    let ev = events(&r);
    let names: Vec<&str> = ev.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(names[..2], ["message_start", "ping"]);
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
    // Every frame's event name is its data's type.
    assert!(ev.iter().all(|(e, d)| d["type"] == e.as_str()));
    let thinking: String = ev
        .iter()
        .filter_map(|(_, d)| d.pointer("/delta/thinking").and_then(Value::as_str))
        .collect();
    assert_eq!(thinking, "I should read it");
    let sig = ev
        .iter()
        .find_map(|(_, d)| d.pointer("/delta/signature").and_then(Value::as_str))
        .unwrap()
        .to_string();
    assert_eq!(sig, signature_of("I should read it"));
    let args: String = ev
        .iter()
        .filter_map(|(_, d)| d.pointer("/delta/partial_json").and_then(Value::as_str))
        .collect();
    assert_eq!(args, r#"{"path":"a"}"#);
    assert_eq!(ev[ev.len() - 2].1["delta"]["stop_reason"], "tool_use");

    let tool_use =
        json!({"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a"}});
    let result = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}]});
    // Without the thinking block it was given: refused as the API refuses it.
    let bare = request(json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [tool_use]},
        result,
    ]));
    let r = post(&mock.base_url(), &bare).await;
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    assert!(
        r.contains("Expected `thinking` or `redacted_thinking`, but found `tool_use`"),
        "{r}"
    );
    // With the text changed: the signature no longer fits.
    let edited = request(json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should not read it", "signature": sig}, tool_use]},
        result,
    ]));
    let r = post(&mock.base_url(), &edited).await;
    assert!(r.contains("Invalid `signature`"), "{r}");
    // Replayed as given: accepted, and the scripted reply is the next one.
    let good = request(json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should read it", "signature": sig}, tool_use]},
        result,
    ]));
    let r = post(&mock.base_url(), &good).await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(r.contains(r#""text":"done""#), "{r}");
}

#[tokio::test]
async fn requests_the_api_would_refuse_are_refused() {
    let mock = MockProvider::start_anthropic(vec![]).await;
    let base = mock.base_url();
    let bad = |m: Value| request(m);
    let cases: Vec<(Value, &str)> = vec![
        (
            bad(json!([{"role": "assistant", "content": "hi"}])),
            "starting with \\\"user\\\"",
        ),
        (
            bad(json!([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])),
            "must alternate",
        ),
        (
            bad(json!([{"role": "system", "content": "s"}])),
            "Unexpected role",
        ),
        (
            bad(json!([{"role": "user", "content": [{"type": "text", "text": ""}]}])),
            "must be non-empty",
        ),
        (
            bad(json!([{"role": "user", "content": "go"},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}]},
                    {"role": "user", "content": "no result"}])),
            "without `tool_result`",
        ),
        (
            bad(
                json!([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope", "content": ""}]}]),
            ),
            "unexpected `tool_use_id`",
        ),
    ];
    for (body, needle) in cases {
        let r = post(&base, &body).await;
        assert!(r.starts_with("HTTP/1.1 400"), "{needle}: {r}");
        assert!(r.contains(needle), "{needle}: {r}");
        assert!(r.contains(r#""type":"invalid_request_error""#), "{r}");
    }
    let mut five = request(json!([{"role": "user", "content": [
        {"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}]}]));
    five["system"] = json!((0..4)
        .map(|i| json!({"type": "text", "text": format!("s{i}"),
        "cache_control": {"type": "ephemeral"}}))
        .collect::<Vec<_>>());
    assert!(post(&base, &five)
        .await
        .contains("A maximum of 4 blocks with cache_control"));
    let mut hot = request(json!([{"role": "user", "content": "a"}]));
    hot["temperature"] = json!(0.2);
    assert!(post(&base, &hot)
        .await
        .contains("`temperature` may only be set to 1"));
    let mut small = request(json!([{"role": "user", "content": "a"}]));
    small["thinking"]["budget_tokens"] = json!(512);
    assert!(post(&base, &small)
        .await
        .contains("greater than or equal to 1024"));
    let no_version = post_with(
        &base,
        "/v1/messages",
        "x-api-key: k\r\n",
        &request(json!([{"role": "user", "content": "a"}])),
    )
    .await;
    assert!(
        no_version.contains("anthropic-version: header is required"),
        "{no_version}"
    );
    let no_key = post_with(
        &base,
        "/v1/messages",
        "anthropic-version: 2023-06-01\r\n",
        &request(json!([{"role": "user", "content": "a"}])),
    )
    .await;
    assert!(no_key.starts_with("HTTP/1.1 401"), "{no_key}");
    let wrong_path = post_with(
        &base,
        "/chat/completions",
        "x-api-key: k\r\n",
        &request(json!([])),
    )
    .await;
    assert!(wrong_path.starts_with("HTTP/1.1 404"), "{wrong_path}");
    // Nothing refused consumed a reply: the default reply still comes.
    assert!(
        post(&base, &request(json!([{"role": "user", "content": "a"}])))
            .await
            .contains("done")
    );
}

fn usage_of(reply: &str) -> Value {
    events(reply)
        .into_iter()
        .find(|(e, _)| e == "message_start")
        .map(|(_, d)| d["message"]["usage"].clone())
        .unwrap()
}

#[tokio::test]
async fn the_cache_reads_only_up_to_an_earlier_breakpoint() {
    let mock = MockProvider::start_anthropic(vec![]).await;
    mock.enable_prompt_cache(None);
    let bp = json!({"type": "ephemeral"});
    let system = json!([{"type": "text", "text": "s".repeat(8000), "cache_control": bp}]);
    let big = "x".repeat(8000);
    let mut first = request(
        json!([{"role": "user", "content": [{"type": "text", "text": big, "cache_control": bp}]}]),
    );
    first["system"] = system.clone();
    let u1 = usage_of(&post(&mock.base_url(), &first).await);
    assert_eq!(u1["cache_read_input_tokens"], 0, "{u1}");
    let written = u1["cache_creation_input_tokens"].as_u64().unwrap();
    assert!(written > 4000, "{u1}");
    // The next request extends it with its breakpoint on the newest message only.
    let mut second = request(json!([
        {"role": "user", "content": [{"type": "text", "text": big}]},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "next", "cache_control": bp}]},
    ]));
    second["system"] = system;
    let u2 = usage_of(&post(&mock.base_url(), &second).await);
    assert_eq!(
        u2["cache_read_input_tokens"].as_u64(),
        Some(written),
        "{u2}"
    );
    assert!(
        u2["cache_creation_input_tokens"].as_u64().unwrap() > 0,
        "{u2}"
    );
    // Without any breakpoint nothing is read, even for the same prompt.
    let plain = request(json!([{"role": "user", "content": big}]));
    let u3 = usage_of(&post(&mock.base_url(), &plain).await);
    assert_eq!(u3["cache_read_input_tokens"], 0, "{u3}");
    assert_eq!(u3["cache_creation_input_tokens"], 0, "{u3}");
    let log = mock.prompt_accounting();
    assert_eq!(log.len(), 3);
    assert!(log
        .iter()
        .all(|a| a.hit_tokens + a.miss_tokens == a.prompt_tokens));
}
