//! A DeepSeek-like prompt cache for the mock provider.
//!
//! DeepSeek's context cache serves the longest prefix a request shares with an earlier
//! request (of the same account and model), in units of 64 tokens, and bills the rest as a
//! miss. The mock does the same with tokens estimated from bytes ([`BYTES_PER_TOKEN`] bytes a
//! token, rounded up) over a canonical serialisation of the prompt in the order DeepSeek's chat
//! template renders it (the model card's tool-call format is `{system prompt}{tool_description}
//! <｜User｜>…`): the system messages, then the tool schemas, then every other message in order.
//! So a system prompt that changes at its head (a date, a workspace listing) costs the tool
//! schemas after it as well, as it does on the real service. A prompt over the configured window is refused with the 400 error
//! DeepSeek sends (`maximum context length`).

use serde_json::{json, Value};

/// Bytes per token of the estimate (the same rule the agent starts its own estimate with).
pub const BYTES_PER_TOKEN: u64 = 4;

/// Tokens of one cache unit (DeepSeek caches whole 64-token blocks).
pub const CACHE_UNIT_TOKENS: u64 = 64;

/// What the cache made of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptAccounting {
    /// Arrival index of the request (as in [`crate::mock_provider::RecordedRequest`]).
    pub index: usize,
    /// Estimated prompt tokens.
    pub prompt_tokens: u64,
    /// Tokens served from the cache.
    pub hit_tokens: u64,
    /// Tokens not served from the cache.
    pub miss_tokens: u64,
    /// Of the missed tokens, those written to the cache for later requests (the Anthropic
    /// mock's `cache_creation_input_tokens`; 0 for the DeepSeek-like cache, which caches
    /// every prompt).
    pub cache_write_tokens: u64,
    /// True when the request was over the window and refused with a 400.
    pub rejected: bool,
}

/// Estimated tokens of `bytes` bytes (rounded up).
pub fn tokens_of(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(BYTES_PER_TOKEN)
}

/// The canonical prompt text of a chat-completions body, in the template's order: the system
/// messages (DeepSeek gathers every one of them into the system prompt), the tool schemas,
/// then each other message.
pub fn prompt_text(body: &Value) -> String {
    let msgs: &[Value] = body
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let is_system = |m: &&Value| m.get("role").and_then(Value::as_str) == Some("system");
    let mut s = String::new();
    for m in msgs.iter().filter(is_system) {
        s.push_str(&m.to_string());
    }
    if let Some(tools) = body.get("tools") {
        s.push_str(&tools.to_string());
    }
    for m in msgs.iter().filter(|m| !is_system(m)) {
        s.push_str(&m.to_string());
    }
    s
}

/// The cache state: earlier prompts by key (authorization + model).
#[derive(Debug, Default)]
pub struct PromptCache {
    /// Refuse prompts over this many tokens (`None`: no limit).
    pub window: Option<u64>,
    seen: Vec<(String, String)>,
    /// Accounting of every chat request, in arrival order.
    pub log: Vec<PromptAccounting>,
}

impl PromptCache {
    /// A cache refusing prompts over `window` tokens.
    pub fn new(window: Option<u64>) -> PromptCache {
        PromptCache {
            window,
            ..PromptCache::default()
        }
    }

    /// Account one request; `Err(body)` is the 400 error body when it is over the window.
    /// A refused request is not cached (the provider never processed it).
    pub fn account(
        &mut self,
        index: usize,
        key: &str,
        body: &Value,
    ) -> Result<PromptAccounting, String> {
        let text = prompt_text(body);
        let prompt_tokens = tokens_of(text.len());
        if let Some(w) = self.window {
            if prompt_tokens > w {
                self.log.push(PromptAccounting {
                    index,
                    prompt_tokens,
                    hit_tokens: 0,
                    miss_tokens: 0,
                    cache_write_tokens: 0,
                    rejected: true,
                });
                return Err(json!({"error": {
                    "message": format!("This model's maximum context length is {w} tokens. However, you requested {prompt_tokens} tokens ({prompt_tokens} in the messages, 0 in the completion). Please reduce the length of the messages or completion."),
                    "type": "invalid_request_error",
                    "param": null,
                    "code": "invalid_request_error",
                }})
                .to_string());
            }
        }
        let common = self
            .seen
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, p)| common_prefix(p.as_bytes(), text.as_bytes()))
            .max()
            .unwrap_or(0);
        // Whole cache units only, and never the full prompt's last partial unit.
        let hit_tokens = (common as u64 / BYTES_PER_TOKEN) / CACHE_UNIT_TOKENS * CACHE_UNIT_TOKENS;
        let hit_tokens = hit_tokens.min(prompt_tokens);
        let acc = PromptAccounting {
            index,
            prompt_tokens,
            hit_tokens,
            miss_tokens: prompt_tokens - hit_tokens,
            cache_write_tokens: 0,
            rejected: false,
        };
        self.seen.push((key.to_string(), text));
        self.log.push(acc);
        Ok(acc)
    }
}

/// Length of the common prefix of two byte strings.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The DeepSeek-style usage object of a reply with `completion_bytes` of output.
pub fn usage_json(acc: &PromptAccounting, completion_bytes: usize) -> Value {
    let completion = tokens_of(completion_bytes);
    json!({
        "prompt_tokens": acc.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": acc.prompt_tokens + completion,
        "prompt_cache_hit_tokens": acc.hit_tokens,
        "prompt_cache_miss_tokens": acc.miss_tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(msgs: &[&str]) -> Value {
        json!({"model": "m", "tools": [], "messages": msgs.iter().map(|m| json!({"role": "user", "content": m})).collect::<Vec<_>>()})
    }

    #[test]
    fn an_extension_hits_the_shared_prefix_in_64_token_units() {
        let mut c = PromptCache::new(None);
        let big = "x".repeat(4000);
        let first = c.account(0, "k", &body(&[&big])).expect("fits");
        assert_eq!((first.hit_tokens, first.rejected), (0, false));
        let second = c.account(1, "k", &body(&[&big, "more"])).expect("fits");
        // The shared prefix is the first message minus its closing bytes: ~1000 tokens, cut
        // to whole 64-token units.
        assert!(second.hit_tokens.is_multiple_of(CACHE_UNIT_TOKENS));
        assert!(
            second.hit_tokens >= 960 && second.hit_tokens <= 1024,
            "{second:?}"
        );
        assert_eq!(second.hit_tokens + second.miss_tokens, second.prompt_tokens);
        // Another key shares nothing.
        let other = c.account(2, "other", &body(&[&big, "more"])).expect("fits");
        assert_eq!(other.hit_tokens, 0);
        // A rewrite of the first message misses from the change on.
        let changed = c.account(3, "k", &body(&["y", &big])).expect("fits");
        assert_eq!(changed.hit_tokens, 0);
    }

    /// DeepSeek's template puts the tool descriptions after the system prompt: a system
    /// prompt that changes at its head misses the cache for the tools too, and the same
    /// system prompt with other tools keeps it.
    #[test]
    fn the_system_prompt_comes_before_the_tool_schemas() {
        let tools = json!([{"type": "function", "function": {"name": "t", "description": "d".repeat(4000)}}]);
        let req = |system: &str, tools: &Value| {
            json!({"model": "m", "tools": tools, "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": "hello"},
            ]})
        };
        let system = "s".repeat(2000);
        let mut c = PromptCache::new(None);
        c.account(0, "k", &req(&system, &tools)).expect("fits");
        let rebuilt = c
            .account(1, "k", &req(&format!("Turn 1.\n{system}"), &tools))
            .expect("fits");
        assert_eq!(rebuilt.hit_tokens, 0, "{rebuilt:?}");
        let other_tools = c.account(2, "k", &req(&system, &json!([]))).expect("fits");
        // The system message (about 500 tokens) is shared, cut to whole units.
        assert!(
            (448..=512).contains(&other_tools.hit_tokens),
            "{other_tools:?}"
        );
    }

    #[test]
    fn a_prompt_over_the_window_is_refused_like_deepseek() {
        let mut c = PromptCache::new(Some(100));
        let err = c
            .account(0, "k", &body(&[&"x".repeat(1000)]))
            .expect_err("over");
        assert!(
            err.contains("maximum context length is 100 tokens"),
            "{err}"
        );
        assert!(c.log[0].rejected);
        assert!(c.account(1, "k", &body(&["small"])).is_ok());
    }
}
