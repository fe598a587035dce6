//! An Anthropic-like prompt cache for the mock provider: caching is explicit.
//!
//! The Messages API caches a prompt prefix only where a request marks a block with
//! `cache_control`, and a later request reads it only if that exact prefix was written by an
//! earlier request's breakpoint. The mock does the same, over the prompt in the order the API
//! caches it (tools, then system, then messages), one block at a time:
//!
//! - every breakpoint of a request writes the prefix ending at its block;
//! - a request reads the longest written prefix that ends at one of its own block
//!   boundaries no more than [`LOOKBACK_BLOCKS`] blocks before one of its breakpoints (the
//!   API's automatic look-back); a request without breakpoints reads nothing;
//! - usage: `cache_read_input_tokens` = the prefix read, `cache_creation_input_tokens` = from
//!   there to the last breakpoint, `input_tokens` = the rest;
//! - a prefix that reaches into the messages is keyed with the request's `thinking`
//!   settings too (the API drops message cache entries when they change); tools and system
//!   are not;
//! - `cache_control` itself is not part of the cached content (moving a breakpoint does not
//!   change the prefix);
//! - tokens are estimated as for the DeepSeek-like cache ([`crate::prompt_cache::tokens_of`]);
//!   the API's minimum cacheable length is not modelled.
//!
//! A prompt over the configured window is refused with the API's 400 (`prompt is too long`).

use serde_json::{json, Value};

use crate::prompt_cache::{tokens_of, PromptAccounting};

/// How far back from a breakpoint the API looks for an earlier cache entry, in blocks.
pub const LOOKBACK_BLOCKS: usize = 20;

/// One cacheable block of a request.
#[derive(Debug, Clone)]
struct Block {
    /// Canonical text (the block without `cache_control`, a message's role before its first
    /// block).
    text: String,
    /// Marked with `cache_control`.
    breakpoint: bool,
    /// Part of `messages` (keyed with the thinking settings).
    in_messages: bool,
}

/// The blocks of a Messages API body in cache order.
fn blocks(body: &Value) -> Vec<Block> {
    let mut out = Vec::new();
    let mut push = |v: &Value, prefix: &str, in_messages: bool| {
        let mut clean = v.clone();
        let breakpoint = clean
            .as_object_mut()
            .and_then(|o| o.remove("cache_control"))
            .is_some();
        out.push(Block {
            text: format!("{prefix}{clean}"),
            breakpoint,
            in_messages,
        });
    };
    for t in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        push(t, "", false);
    }
    match body.get("system") {
        Some(Value::String(s)) => push(&json!({"type": "text", "text": s}), "", false),
        Some(Value::Array(a)) => a.iter().for_each(|b| push(b, "", false)),
        _ => {}
    }
    for m in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        match m.get("content") {
            Some(Value::String(s)) => push(
                &json!({"type": "text", "text": s}),
                &format!("<{role}>"),
                true,
            ),
            Some(Value::Array(a)) => {
                for (i, b) in a.iter().enumerate() {
                    let prefix = if i == 0 {
                        format!("<{role}>")
                    } else {
                        String::new()
                    };
                    push(b, &prefix, true);
                }
            }
            _ => {}
        }
    }
    out
}

/// The cache: prefixes written by earlier requests.
#[derive(Debug, Default)]
pub struct AnthropicCache {
    /// Refuse prompts over this many tokens (`None`: no limit).
    pub window: Option<u64>,
    /// (key, prefix text) of every entry written.
    written: Vec<(String, String)>,
    /// Accounting of every request, in arrival order.
    pub log: Vec<PromptAccounting>,
}

impl AnthropicCache {
    /// A cache refusing prompts over `window` tokens.
    pub fn new(window: Option<u64>) -> AnthropicCache {
        AnthropicCache {
            window,
            ..AnthropicCache::default()
        }
    }

    /// Account one request; `Err(body)` is the 400 error body when it is over the window.
    /// `key` identifies the account and model.
    pub fn account(
        &mut self,
        index: usize,
        key: &str,
        body: &Value,
    ) -> Result<PromptAccounting, String> {
        let blocks = blocks(body);
        let thinking = body
            .get("thinking")
            .map(Value::to_string)
            .unwrap_or_default();
        // Prefix texts and their keys, block by block.
        let mut prefixes: Vec<(String, String)> = Vec::with_capacity(blocks.len());
        let mut text = String::new();
        for b in &blocks {
            text.push_str(&b.text);
            let k = if b.in_messages {
                format!("{key}|{thinking}")
            } else {
                key.to_string()
            };
            prefixes.push((k, text.clone()));
        }
        let total = tokens_of(text.len());
        if let Some(w) = self.window {
            if total > w {
                self.log.push(PromptAccounting {
                    index,
                    prompt_tokens: total,
                    hit_tokens: 0,
                    miss_tokens: 0,
                    cache_write_tokens: 0,
                    rejected: true,
                });
                return Err(json!({"type": "error", "error": {
                    "type": "invalid_request_error",
                    "message": format!("prompt is too long: {total} tokens > {w} maximum"),
                }})
                .to_string());
            }
        }
        let breakpoints: Vec<usize> = blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b.breakpoint)
            .map(|(i, _)| i)
            .collect();
        let mut read = 0u64;
        for &bp in &breakpoints {
            for j in (bp.saturating_sub(LOOKBACK_BLOCKS - 1)..=bp).rev() {
                if self.written.iter().any(|w| w == &prefixes[j]) {
                    read = read.max(tokens_of(prefixes[j].1.len()));
                    break;
                }
            }
        }
        let cached_end = breakpoints
            .last()
            .map_or(0, |&bp| tokens_of(prefixes[bp].1.len()));
        let write = cached_end.saturating_sub(read);
        let input = total - read - write;
        for &bp in &breakpoints {
            if !self.written.contains(&prefixes[bp]) {
                self.written.push(prefixes[bp].clone());
            }
        }
        let acc = PromptAccounting {
            index,
            prompt_tokens: total,
            hit_tokens: read,
            miss_tokens: input + write,
            cache_write_tokens: write,
            rejected: false,
        };
        self.log.push(acc);
        Ok(acc)
    }
}

/// The Messages API usage object of a reply with `completion_bytes` of output.
pub fn usage_json(acc: &PromptAccounting, completion_bytes: usize) -> Value {
    json!({
        "input_tokens": acc.miss_tokens - acc.cache_write_tokens,
        "cache_creation_input_tokens": acc.cache_write_tokens,
        "cache_read_input_tokens": acc.hit_tokens,
        "output_tokens": tokens_of(completion_bytes),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const BP: &str = "cache_control";

    fn text(t: &str, bp: bool) -> Value {
        let mut b = json!({"type": "text", "text": t});
        if bp {
            b[BP] = json!({"type": "ephemeral"});
        }
        b
    }

    fn body(system_bp: bool, msgs: &[(&str, &str, bool)]) -> Value {
        json!({
            "model": "m",
            "system": [text(&"s".repeat(4000), system_bp)],
            "messages": msgs.iter().map(|(role, t, bp)| json!({"role": role, "content": [text(t, *bp)]})).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn reads_only_what_an_earlier_breakpoint_wrote() {
        let mut c = AnthropicCache::new(None);
        let big = "x".repeat(8000);
        // No breakpoints: nothing read or written, everything is input.
        let a = c
            .account(0, "k", &body(false, &[("user", &big, false)]))
            .unwrap();
        assert_eq!(
            (a.hit_tokens, a.cache_write_tokens, a.miss_tokens),
            (0, 0, a.prompt_tokens)
        );
        let a = c
            .account(1, "k", &body(false, &[("user", &big, false)]))
            .unwrap();
        assert_eq!(
            a.hit_tokens, 0,
            "an identical request without breakpoints reads nothing"
        );
        // A breakpoint on the system prompt writes it; the next request reads it.
        let a = c
            .account(2, "k", &body(true, &[("user", &big, true)]))
            .unwrap();
        assert_eq!(a.hit_tokens, 0);
        assert_eq!(a.cache_write_tokens, a.prompt_tokens);
        let b = c
            .account(
                3,
                "k",
                &body(
                    true,
                    &[
                        ("user", &big, false),
                        ("assistant", "ok", false),
                        ("user", "more", true),
                    ],
                ),
            )
            .unwrap();
        // The previous request's breakpoint was on the first user block: read up to it.
        assert_eq!(b.hit_tokens, a.prompt_tokens, "{b:?} after {a:?}");
        assert_eq!(b.hit_tokens + b.miss_tokens, b.prompt_tokens);
        // The same prompt for another key reads nothing.
        let o = c
            .account(4, "other", &body(true, &[("user", &big, true)]))
            .unwrap();
        assert_eq!(o.hit_tokens, 0);
    }

    #[test]
    fn the_lookback_has_a_limit_and_thinking_keys_the_messages() {
        let mut c = AnthropicCache::new(None);
        let mut msgs: Vec<(&str, &str, bool)> = vec![("user", "first", true)];
        c.account(0, "k", &body(true, &msgs)).unwrap();
        // 25 more blocks and a breakpoint only on the newest: the first message's entry is
        // more than 20 blocks back, so only the system prompt (written too) is read.
        for i in 0..25 {
            let last = msgs.len() - 1;
            msgs[last].2 = false;
            msgs.push((
                if i % 2 == 0 { "assistant" } else { "user" },
                "step",
                i == 24,
            ));
        }
        let far = c.account(1, "k", &body(true, &msgs)).unwrap();
        let sys_only = tokens_of(blocks(&body(true, &[]))[0].text.len());
        assert_eq!(far.hit_tokens, sys_only, "{far:?}");
        // Changing the thinking settings keeps tools and system but not the messages.
        let msgs = [("user", "first", true)];
        let mut with_thinking = body(true, &msgs);
        with_thinking["thinking"] = json!({"type": "enabled", "budget_tokens": 2048});
        let t = c.account(2, "k", &with_thinking).unwrap();
        assert_eq!(t.hit_tokens, sys_only, "{t:?}");
    }

    #[test]
    fn over_the_window_is_refused() {
        let mut c = AnthropicCache::new(Some(100));
        let e = c
            .account(0, "k", &body(false, &[("user", "hi", false)]))
            .unwrap_err();
        assert!(e.contains("prompt is too long"), "{e}");
        assert!(c.log[0].rejected);
    }
}
