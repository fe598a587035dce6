//! The mock's DeepSeek-like prompt cache over real HTTP: usage figures and the window error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use reasonix_testkit::mock_provider::{MockProvider, MockReply};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn post(base: &str, body: &Value) -> String {
    let addr = base.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = body.to_string();
    let req = format!(
        "POST /chat/completions HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

fn usage_of(reply: &str) -> Value {
    reply
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|v| v.get("usage").cloned())
        .expect("a usage chunk")
}

#[tokio::test]
async fn cached_prefix_is_reported_and_over_window_is_refused() {
    let mock = MockProvider::start(vec![
        MockReply::text(&["a"]),
        MockReply::text(&["b"]),
        MockReply::text(&["c"]),
    ])
    .await;
    mock.enable_prompt_cache(Some(2000));
    let big = "x".repeat(4000);
    let one = json!({"model": "m", "messages": [{"role": "user", "content": big}]});
    let r1 = post(&mock.base_url(), &one).await;
    let u1 = usage_of(&r1);
    assert_eq!(u1["prompt_cache_hit_tokens"], 0, "{u1}");
    let two = json!({"model": "m", "messages": [{"role": "user", "content": big},
        {"role": "assistant", "content": "a"}, {"role": "user", "content": "go on"}]});
    let u2 = usage_of(&post(&mock.base_url(), &two).await);
    let hit = u2["prompt_cache_hit_tokens"].as_u64().unwrap();
    let miss = u2["prompt_cache_miss_tokens"].as_u64().unwrap();
    assert!(hit >= 960 && hit.is_multiple_of(64), "{u2}");
    assert_eq!(hit + miss, u2["prompt_tokens"].as_u64().unwrap());

    let huge = json!({"model": "m", "messages": [{"role": "user", "content": "y".repeat(9000)}]});
    let r3 = post(&mock.base_url(), &huge).await;
    assert!(r3.starts_with("HTTP/1.1 400"), "{r3}");
    assert!(r3.contains("maximum context length is 2000 tokens"), "{r3}");
    // The refused request did not consume the scripted reply.
    let r4 = post(&mock.base_url(), &two).await;
    assert!(r4.contains(r#""content":"c""#), "{r4}");
    let log = mock.prompt_accounting();
    assert_eq!(log.iter().filter(|a| a.rejected).count(), 1);
    assert_eq!(log.len(), 4);
}

/// Like DeepSeek's reasoning models, the mock refuses two user (or two assistant) messages
/// in a row with the provider's 400, and does not spend a scripted reply on it.
#[tokio::test]
async fn successive_user_or_assistant_messages_are_refused_like_deepseek() {
    let mock = MockProvider::start(vec![MockReply::text(&["fine"])]).await;
    for (messages, at) in [
        (
            json!([{"role": "system", "content": "s"}, {"role": "user", "content": "a"},
            {"role": "user", "content": "b"}]),
            "messages[1] and messages[2]",
        ),
        (
            json!([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
            {"role": "assistant", "content": "c"}]),
            "messages[1] and messages[2]",
        ),
    ] {
        let r = post(
            &mock.base_url(),
            &json!({"model": "m", "messages": messages}),
        )
        .await;
        assert!(r.starts_with("HTTP/1.1 400"), "{r}");
        assert!(
            r.contains("does not support successive user or assistant messages"),
            "{r}"
        );
        assert!(r.contains(at), "{r}");
    }
    let ok = json!({"model": "m", "messages": [{"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]});
    let r = post(&mock.base_url(), &ok).await;
    assert!(r.contains(r#""content":"fine""#), "{r}");
}
