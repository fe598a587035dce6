//! The Messages API's streaming events into chunks.
//!
//! `message_start` (model, input usage) → per content block `content_block_start`,
//! `content_block_delta`s (`text_delta`, `thinking_delta`, `signature_delta`,
//! `input_json_delta`), `content_block_stop` → `message_delta` (stop reason, output usage) →
//! `message_stop`; `ping` anywhere; `error` ends the stream. Text and thinking are forwarded as
//! they come; tool calls only once the stream is complete, in block order, with their JSON
//! input put together from its pieces; the thinking blocks' signatures are handed back as one
//! [`ProviderChunk::Replay`] so the next request can replay them.
//!
//! Unknown event and delta types are skipped (the API may add some); an event that is not
//! JSON, has no type, or refers to a block that was never started is an error naming it.

use std::collections::BTreeMap;

use reasonix_forward::proto::{ProviderChunk, ToolCall, Usage};
use serde_json::{json, Value};

use super::convert::REPLAY_KEY;
use crate::gateway::wire::{generate_call_id, StreamParser};

#[derive(Debug)]
enum Block {
    Text,
    Thinking {
        len: usize,
        signature: String,
    },
    Redacted {
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        /// `input` of the start event, used when no `input_json_delta` follows.
        start_input: Value,
        json: String,
        got_delta: bool,
    },
    /// A block type this parser does not use (server tools, citations, ...).
    Other,
}

/// The usage figures as the API reports them; later events repeat or extend earlier ones.
#[derive(Debug, Default, Clone, Copy)]
struct RawUsage {
    input: Option<u64>,
    cache_read: Option<u64>,
    cache_creation: Option<u64>,
    output: Option<u64>,
}

impl RawUsage {
    fn merge(&mut self, u: &Value) {
        let n = |k: &str| u.get(k).and_then(Value::as_u64);
        self.input = n("input_tokens").or(self.input);
        self.cache_read = n("cache_read_input_tokens").or(self.cache_read);
        self.cache_creation = n("cache_creation_input_tokens").or(self.cache_creation);
        self.output = n("output_tokens").or(self.output);
    }

    fn seen(&self) -> bool {
        self.input.is_some() || self.output.is_some()
    }
}

/// Map the API's usage into ours: every prompt token is input, cache read or cache write;
/// only the reads were served from cache.
pub fn usage_of(input: u64, cache_read: u64, cache_creation: u64, output: u64) -> Usage {
    Usage {
        prompt_tokens: input + cache_read + cache_creation,
        completion_tokens: output,
        cache_hit_tokens: cache_read,
        cache_miss_tokens: input + cache_creation,
        reasoning_tokens: 0,
    }
}

/// One response stream.
#[derive(Debug)]
pub struct MessageStream {
    fallback_model: String,
    model: Option<String>,
    blocks: BTreeMap<u64, Block>,
    stop_reason: Option<String>,
    saw_stop: bool,
    usage: RawUsage,
    events: u64,
}

impl MessageStream {
    /// `fallback_model` is reported in `Done` when `message_start` names no model.
    pub fn new(fallback_model: &str) -> MessageStream {
        MessageStream {
            fallback_model: fallback_model.to_string(),
            model: None,
            blocks: BTreeMap::new(),
            stop_reason: None,
            saw_stop: false,
            usage: RawUsage::default(),
            events: 0,
        }
    }

    fn event(&mut self, v: &Value) -> Result<Vec<ProviderChunk>, ProviderChunk> {
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed(format!("an event without a `type`: {}", excerpt(v))))?;
        let mut out = Vec::new();
        match kind {
            "message_start" => {
                let m = v.get("message").unwrap_or(&Value::Null);
                if let Some(model) = m
                    .get("model")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                {
                    self.model = Some(model.to_string());
                }
                if let Some(u) = m.get("usage") {
                    self.usage.merge(u);
                }
            }
            "content_block_start" => {
                let index = index_of(v, kind)?;
                let b = v.get("content_block").ok_or_else(|| {
                    malformed(format!(
                        "content_block_start {index} without a content_block"
                    ))
                })?;
                let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let block = match b.get("type").and_then(Value::as_str).unwrap_or("") {
                    "text" => {
                        push_text(&mut out, s("text"), false);
                        Block::Text
                    }
                    "thinking" => {
                        let text = s("thinking");
                        let len = text.len();
                        push_text(&mut out, text, true);
                        Block::Thinking {
                            len,
                            signature: s("signature"),
                        }
                    }
                    "redacted_thinking" => Block::Redacted { data: s("data") },
                    "tool_use" => Block::ToolUse {
                        id: s("id"),
                        name: s("name"),
                        start_input: b.get("input").cloned().unwrap_or_else(|| json!({})),
                        json: String::new(),
                        got_delta: false,
                    },
                    _ => Block::Other,
                };
                if self.blocks.insert(index, block).is_some() {
                    return Err(malformed(format!(
                        "content block {index} was started twice"
                    )));
                }
            }
            "content_block_delta" => {
                let index = index_of(v, kind)?;
                let d = v.get("delta").unwrap_or(&Value::Null);
                let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let dtype = d.get("type").and_then(Value::as_str).unwrap_or("");
                let block = self.blocks.get_mut(&index).ok_or_else(|| {
                    malformed(format!(
                        "a {dtype} for content block {index}, which was never started"
                    ))
                })?;
                match (dtype, block) {
                    ("text_delta", Block::Text) => push_text(&mut out, s("text"), false),
                    ("thinking_delta", Block::Thinking { len, .. }) => {
                        let t = s("thinking");
                        *len += t.len();
                        push_text(&mut out, t, true);
                    }
                    ("signature_delta", Block::Thinking { signature, .. }) => {
                        signature.push_str(&s("signature"))
                    }
                    (
                        "input_json_delta",
                        Block::ToolUse {
                            json, got_delta, ..
                        },
                    ) => {
                        json.push_str(&s("partial_json"));
                        *got_delta = true;
                    }
                    (
                        "text_delta" | "thinking_delta" | "signature_delta" | "input_json_delta",
                        other,
                    ) => {
                        return Err(malformed(format!(
                            "a {dtype} for content block {index}, which is a {} block",
                            block_name(other)
                        )))
                    }
                    // Citations and deltas added later carry nothing this agent uses.
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = index_of(v, kind)?;
                if !self.blocks.contains_key(&index) {
                    return Err(malformed(format!(
                        "content_block_stop for block {index}, which was never started"
                    )));
                }
            }
            "message_delta" => {
                if let Some(r) = v
                    .pointer("/delta/stop_reason")
                    .and_then(Value::as_str)
                    .filter(|r| !r.is_empty())
                {
                    self.stop_reason = Some(r.to_string());
                }
                if let Some(u) = v.get("usage") {
                    self.usage.merge(u);
                }
            }
            "message_stop" => self.saw_stop = true,
            "error" => return Err(provider_error(v.get("error").unwrap_or(v))),
            // `ping` and event types added after this was written.
            _ => {}
        }
        Ok(out)
    }

    fn replay(&self) -> Option<Value> {
        let items: Vec<Value> = self
            .blocks
            .values()
            .filter_map(|b| match b {
                Block::Thinking { len, signature } => {
                    Some(json!({"type": "thinking", "signature": signature, "len": len}))
                }
                Block::Redacted { data } => {
                    Some(json!({"type": "redacted_thinking", "data": data}))
                }
                Block::Text | Block::ToolUse { .. } | Block::Other => None,
            })
            .collect();
        (!items.is_empty()).then(|| json!({ REPLAY_KEY: items }))
    }
}

impl StreamParser for MessageStream {
    fn data(&mut self, payload: &str) -> Vec<ProviderChunk> {
        self.events += 1;
        let v: Value = match serde_json::from_str(payload) {
            Ok(v) => v,
            Err(e) => {
                return vec![malformed(format!(
                    "an event that is not JSON ({e}): {}",
                    excerpt_str(payload)
                ))]
            }
        };
        match self.event(&v) {
            Ok(chunks) => chunks,
            Err(e) => vec![e],
        }
    }

    fn saw_end(&self) -> bool {
        self.saw_stop
    }

    fn answer_complete(&self) -> bool {
        self.stop_reason.is_some()
    }

    fn finish(&mut self, note: Option<&str>) -> Vec<ProviderChunk> {
        if !self.saw_stop && self.stop_reason.is_none() {
            let mut message = format!(
                "the provider stream ended early (no message_stop and no stop_reason after {} events)",
                self.events
            );
            if let Some(n) = note {
                message.push_str(": ");
                message.push_str(n);
            }
            return vec![ProviderChunk::Error {
                message,
                retryable: true,
            }];
        }
        let mut out = Vec::new();
        for b in self.blocks.values() {
            if let Block::ToolUse {
                id,
                name,
                start_input,
                json,
                got_delta,
            } = b
            {
                let arguments = if *got_delta {
                    json.clone()
                } else {
                    start_input.to_string()
                };
                out.push(ProviderChunk::ToolCall(ToolCall {
                    id: if id.is_empty() {
                        generate_call_id()
                    } else {
                        id.clone()
                    },
                    name: name.clone(),
                    arguments,
                }));
            }
        }
        if let Some(data) = self.replay() {
            out.push(ProviderChunk::Replay { data });
        }
        if self.usage.seen() {
            let u = self.usage;
            out.push(ProviderChunk::Usage(usage_of(
                u.input.unwrap_or(0),
                u.cache_read.unwrap_or(0),
                u.cache_creation.unwrap_or(0),
                u.output.unwrap_or(0),
            )));
        }
        out.push(ProviderChunk::Done {
            finish_reason: self.stop_reason.as_deref().map(finish_reason),
            model: self
                .model
                .clone()
                .unwrap_or_else(|| self.fallback_model.clone()),
        });
        out
    }
}

/// The stop reason in the OpenAI terms the rest of Reasonix uses.
fn finish_reason(stop: &str) -> String {
    match stop {
        "end_turn" | "stop_sequence" => "stop",
        "tool_use" => "tool_calls",
        "max_tokens" => "length",
        "refusal" => "content_filter",
        other => other,
    }
    .to_string()
}

fn push_text(out: &mut Vec<ProviderChunk>, text: String, reasoning: bool) {
    if text.is_empty() {
        return;
    }
    out.push(if reasoning {
        ProviderChunk::Reasoning { text }
    } else {
        ProviderChunk::Text { text }
    });
}

fn block_name(b: &Block) -> &'static str {
    match b {
        Block::Text => "text",
        Block::Thinking { .. } => "thinking",
        Block::Redacted { .. } => "redacted_thinking",
        Block::ToolUse { .. } => "tool_use",
        Block::Other => "other",
    }
}

fn index_of(v: &Value, kind: &str) -> Result<u64, ProviderChunk> {
    v.get("index").and_then(Value::as_u64).ok_or_else(|| {
        malformed(format!(
            "a {kind} event without a block index: {}",
            excerpt(v)
        ))
    })
}

/// A stream the gateway cannot read. Retryable: a proxy or a cut can garble one response,
/// and the host re-asks a bounded number of times.
fn malformed(what: String) -> ProviderChunk {
    ProviderChunk::Error {
        message: format!("the provider sent a malformed Messages API stream: {what}"),
        retryable: true,
    }
}

fn provider_error(err: &Value) -> ProviderChunk {
    let kind = err.get("type").and_then(Value::as_str).unwrap_or("error");
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| err.to_string());
    let retryable = matches!(
        kind,
        "overloaded_error" | "api_error" | "rate_limit_error" | "timeout_error"
    );
    ProviderChunk::Error {
        message: format!("the provider reported an error mid-stream ({kind}): {message}"),
        retryable,
    }
}

fn excerpt(v: &Value) -> String {
    excerpt_str(&v.to_string())
}

fn excerpt_str(s: &str) -> String {
    if s.chars().count() <= 120 {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(119).collect::<String>())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn run(events: &[Value]) -> Vec<ProviderChunk> {
        let mut p = MessageStream::new("fallback");
        let mut out = Vec::new();
        for e in events {
            out.extend(p.data(&e.to_string()));
        }
        out.extend(p.finish(None));
        out
    }

    fn start(usage: Value) -> Value {
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
               "role": "assistant", "model": "claude-x", "content": [], "usage": usage}})
    }

    #[test]
    fn thinking_text_and_tool_use_in_one_stream() {
        let out = run(&[
            start(json!({"input_tokens": 10, "cache_read_input_tokens": 1000,
                         "cache_creation_input_tokens": 50, "output_tokens": 1})),
            json!({"type": "ping"}),
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "let me "}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "think"}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "SIG"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Reading."}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "content_block_start", "index": 2,
                   "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": "}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "\"a.txt\"}"}}),
            json!({"type": "content_block_stop", "index": 2}),
            json!({"type": "content_block_start", "index": 3,
                   "content_block": {"type": "tool_use", "id": "toolu_2", "name": "ls", "input": {}}}),
            json!({"type": "content_block_stop", "index": 3}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 42}}),
            json!({"type": "message_stop"}),
        ]);
        assert_eq!(
            out,
            vec![
                ProviderChunk::Reasoning {
                    text: "let me ".into()
                },
                ProviderChunk::Reasoning {
                    text: "think".into()
                },
                ProviderChunk::Text {
                    text: "Reading.".into()
                },
                ProviderChunk::ToolCall(ToolCall {
                    id: "toolu_1".into(),
                    name: "read_file".into(),
                    arguments: "{\"path\": \"a.txt\"}".into()
                }),
                ProviderChunk::ToolCall(ToolCall {
                    id: "toolu_2".into(),
                    name: "ls".into(),
                    arguments: "{}".into()
                }),
                ProviderChunk::Replay {
                    data: json!({"anthropic": [{"type": "thinking", "signature": "SIG", "len": 12}]})
                },
                ProviderChunk::Usage(Usage {
                    prompt_tokens: 1060,
                    completion_tokens: 42,
                    cache_hit_tokens: 1000,
                    cache_miss_tokens: 60,
                    reasoning_tokens: 0
                }),
                ProviderChunk::Done {
                    finish_reason: Some("tool_calls".into()),
                    model: "claude-x".into()
                },
            ]
        );
    }

    #[test]
    fn a_cut_stream_is_an_error_unless_the_stop_reason_came() {
        let head = [
            start(json!({"input_tokens": 3})),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "par"}}),
        ];
        let out = run(&head);
        assert_eq!(out[0], ProviderChunk::Text { text: "par".into() });
        match out.last() {
            Some(ProviderChunk::Error { message, retryable }) => {
                assert!(*retryable);
                assert!(message.contains("ended early"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let mut p = MessageStream::new("m");
        for e in &head {
            p.data(&e.to_string());
        }
        p.data(&json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}).to_string());
        assert!(p.answer_complete() && !p.saw_end());
        assert!(
            matches!(p.finish(None).last(), Some(ProviderChunk::Done { finish_reason: Some(r), .. }) if r == "stop")
        );
    }

    fn error_of(chunks: &[ProviderChunk]) -> (String, bool) {
        match chunks.last() {
            Some(ProviderChunk::Error { message, retryable }) => (message.clone(), *retryable),
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn malformed_events_are_named() {
        let mut p = MessageStream::new("m");
        let (m, retry) = error_of(&p.data("{not json"));
        assert!(m.contains("not JSON") && m.contains("{not json"), "{m}");
        assert!(retry);
        let (m, _) = error_of(&p.data(r#"{"index": 0}"#));
        assert!(m.contains("without a `type`"), "{m}");
        let (m, _) = error_of(&p.data(
            r#"{"type":"content_block_delta","index":7,"delta":{"type":"text_delta","text":"x"}}"#,
        ));
        assert!(m.contains("block 7, which was never started"), "{m}");
        let (m, _) =
            error_of(&p.data(r#"{"type":"content_block_start","content_block":{"type":"text"}}"#));
        assert!(m.contains("without a block index"), "{m}");
        p.data(
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        );
        let (m, _) = error_of(&p.data(r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}"#));
        assert!(m.contains("which is a text block"), "{m}");
        let (m, _) = error_of(
            &p.data(r#"{"type":"content_block_start","index":0,"content_block":{"type":"text"}}"#),
        );
        assert!(m.contains("started twice"), "{m}");
        // Unknown events and deltas pass.
        assert!(p.data(r#"{"type":"brand_new_event"}"#).is_empty());
        assert!(p
            .data(r#"{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta"}}"#)
            .is_empty());
    }

    #[test]
    fn error_events_say_whether_to_retry() {
        let mut p = MessageStream::new("m");
        let (m, retry) = error_of(&p.data(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ));
        assert!(
            retry && m.contains("overloaded_error") && m.contains("Overloaded"),
            "{m}"
        );
        let (_, retry) = error_of(
            &p.data(r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#),
        );
        assert!(!retry);
    }

    #[test]
    fn redacted_thinking_is_replayed_and_usage_maps() {
        let out = run(&[
            start(json!({"input_tokens": 5, "output_tokens": 0})),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking", "data": "XYZ"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                   "usage": {"output_tokens": 7, "input_tokens": 5, "cache_read_input_tokens": 0}}),
            json!({"type": "message_stop"}),
        ]);
        assert!(out.contains(&ProviderChunk::Replay {
            data: json!({"anthropic": [{"type": "redacted_thinking", "data": "XYZ"}]})
        }));
        assert!(out.contains(&ProviderChunk::Usage(usage_of(5, 0, 0, 7))));
    }
}
