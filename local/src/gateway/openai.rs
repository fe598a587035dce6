//! The OpenAI-compatible chat-completions wire (`kind = "openai"`): `POST
//! base_url/chat/completions` with `stream: true`, the host's messages sent as they are, and
//! the SSE `data:` payloads turned into chunks by [`StreamAssembler`]: text and reasoning as
//! they come, tool calls only once complete (aggregated by `index`), then usage and `Done`.

use std::collections::BTreeMap;

use reasonix_forward::prefix::SharedMessages;
use reasonix_forward::proto::{ProviderChunk, ToolCall, Usage};
use serde_json::Value;

use super::think::{Piece, ThinkSplitter};
use super::wire::{generate_call_id, StreamParser, Wire, WireRequest};
use crate::config::ResolvedModel;

/// The OpenAI-compatible wire.
pub struct OpenAi;

impl Wire for OpenAi {
    fn url(&self, base_url: &str) -> String {
        format!("{}/chat/completions", base_url.trim_end_matches('/'))
    }

    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    fn body(&self, req: &WireRequest<'_>) -> Result<Vec<u8>, String> {
        let body = Body {
            model: &req.model.model,
            messages: ReplayedMessages(req.messages),
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            tools: (!req.tools.is_empty()).then_some(req.tools),
            temperature: req.temperature,
            reasoning_effort: req.effort.map(|e| e.as_str()),
        };
        serde_json::to_vec(&body).map_err(|e| format!("cannot encode the request: {e}"))
    }

    fn parser(&self, model: &ResolvedModel) -> Box<dyn StreamParser> {
        Box::new(StreamAssembler::new(&model.model))
    }
}

/// The JSON body of a streaming chat completion, serialised straight from the request
/// (the conversation is not copied for it).
#[derive(serde::Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: ReplayedMessages<'a>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a [Value]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    /// The effort level by its name (`low`, `medium`, `high`, `max`), as DeepSeek and
    /// OpenAI's reasoning models take it.
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
}

#[derive(serde::Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// Messages as sent: each one as it is, except an assistant message with tool calls that
/// lost its `reasoning_content`, which gets an empty one ([`fix_reasoning_replay`]), and
/// the `provider_replay` key another wire format asked to get back, which this one never
/// sends (OpenAI refuses unknown message fields).
struct ReplayedMessages<'a>(&'a SharedMessages);

impl serde::Serialize for ReplayedMessages<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for m in self.0.iter() {
            let foreign = m.get("provider_replay").is_some();
            if needs_reasoning_fix(m) || foreign {
                let mut fixed = [m.clone()];
                fix_reasoning_replay(&mut fixed);
                if let Some(obj) = fixed[0].as_object_mut() {
                    obj.remove("provider_replay");
                }
                seq.serialize_element(&fixed[0])?;
            } else {
                seq.serialize_element(m)?;
            }
        }
        seq.end()
    }
}

fn needs_reasoning_fix(m: &Value) -> bool {
    m.get("role").and_then(Value::as_str) == Some("assistant")
        && m.get("tool_calls")
            .and_then(Value::as_array)
            .is_some_and(|c| !c.is_empty())
        && m.get("reasoning_content").is_none_or(Value::is_null)
}

/// DeepSeek answers HTTP 400 when an assistant message with tool calls is replayed without
/// `reasoning_content`; give every such message an empty one when it lost it. Messages that
/// carry reasoning keep it untouched.
pub fn fix_reasoning_replay(messages: &mut [Value]) {
    for m in messages.iter_mut().filter(|m| needs_reasoning_fix(m)) {
        if let Some(obj) = m.as_object_mut() {
            obj.insert("reasoning_content".into(), Value::String(String::new()));
        }
    }
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Turns `data:` payloads into chunks. One per provider response.
#[derive(Debug)]
pub struct StreamAssembler {
    think: ThinkSplitter,
    calls: BTreeMap<u64, PartialCall>,
    finish_reason: Option<String>,
    model: Option<String>,
    fallback_model: String,
    usage: Option<Usage>,
    saw_done: bool,
    payloads: u64,
}

impl StreamAssembler {
    /// `fallback_model` is reported in `Done` when the provider names no model.
    pub fn new(fallback_model: &str) -> Self {
        Self {
            think: ThinkSplitter::new(),
            calls: BTreeMap::new(),
            finish_reason: None,
            model: None,
            fallback_model: fallback_model.to_string(),
            usage: None,
            saw_done: false,
            payloads: 0,
        }
    }

    /// True once `[DONE]` was seen.
    pub fn saw_done(&self) -> bool {
        self.saw_done
    }

    /// True once a choice carried a `finish_reason`.
    pub fn has_finish_reason(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// Number of `data:` payloads seen.
    pub fn payloads(&self) -> u64 {
        self.payloads
    }

    /// Feed one `data:` payload. Returns the chunks to forward now. A provider error object
    /// yields one `Error` chunk, after which the stream should be abandoned.
    pub fn data(&mut self, payload: &str) -> Vec<ProviderChunk> {
        self.payloads += 1;
        if payload.trim() == "[DONE]" {
            self.saw_done = true;
            return Vec::new();
        }
        let v: Value = match serde_json::from_str(payload) {
            Ok(v) => v,
            Err(e) => {
                // Proxies sometimes inject keep-alive junk; one bad payload is not fatal.
                tracing::warn!(error = %e, "skipping unparsable SSE payload");
                return Vec::new();
            }
        };
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            return vec![provider_error(err)];
        }
        if let Some(m) = v
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
        {
            self.model = Some(m.to_string());
        }
        if let Some(u) = v.get("usage").and_then(parse_usage) {
            self.usage = Some(u);
        }
        let mut out = Vec::new();
        let choices = v.get("choices").and_then(Value::as_array);
        for choice in choices.into_iter().flatten() {
            if let Some(fr) = choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .filter(|f| !f.is_empty())
            {
                self.finish_reason = Some(fr.to_string());
            }
            let Some(delta) = choice.get("delta").or_else(|| choice.get("message")) else {
                continue;
            };
            // DeepSeek uses `reasoning_content`; some routers use `reasoning`.
            for key in ["reasoning_content", "reasoning"] {
                if let Some(r) = delta.get(key).and_then(Value::as_str) {
                    if !r.is_empty() {
                        out.push(ProviderChunk::Reasoning {
                            text: r.to_string(),
                        });
                    }
                }
            }
            if let Some(c) = delta.get("content").and_then(Value::as_str) {
                self.split_content(c, &mut out);
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for (pos, tc) in calls.iter().enumerate() {
                    self.tool_call_delta(pos, tc);
                }
            }
        }
        out
    }

    fn split_content(&mut self, c: &str, out: &mut Vec<ProviderChunk>) {
        for p in self.think.push(c) {
            out.push(piece_chunk(p));
        }
    }

    fn tool_call_delta(&mut self, pos: usize, tc: &Value) {
        let id = tc
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let index = match tc.get("index").and_then(Value::as_u64) {
            Some(i) => i,
            // No index: match by id, else a new id starts a new call, else continue the last.
            None => match id {
                Some(id) => match self.calls.iter().find(|(_, c)| c.id == id) {
                    Some((i, _)) => *i,
                    None => self.calls.keys().next_back().map_or(pos as u64, |i| i + 1),
                },
                None => self.calls.keys().next_back().copied().unwrap_or(pos as u64),
            },
        };
        let call = self.calls.entry(index).or_default();
        if let Some(id) = id {
            if call.id.is_empty() {
                call.id = id.to_string();
            }
        }
        let f = tc.get("function");
        if let Some(name) = f.and_then(|f| f.get("name")).and_then(Value::as_str) {
            // Most providers send the name once; some repeat it whole in every delta.
            if call.name != name {
                call.name.push_str(name);
            }
        }
        if let Some(args) = f.and_then(|f| f.get("arguments")).and_then(Value::as_str) {
            call.arguments.push_str(args);
        }
    }

    /// End of stream: flush held-back text, then complete tool calls in index order, usage
    /// and `Done` — or an `Error` when the stream ended without `[DONE]` and without a
    /// finish reason (a cut connection, not a finished turn). `note` is added to that error.
    pub fn finish(&mut self, note: Option<&str>) -> Vec<ProviderChunk> {
        let mut out: Vec<ProviderChunk> =
            self.think.finish().into_iter().map(piece_chunk).collect();
        if !self.saw_done && self.finish_reason.is_none() {
            let mut message = format!(
                "the provider stream ended early (no [DONE] and no finish_reason after {} events)",
                self.payloads
            );
            if let Some(n) = note {
                message.push_str(": ");
                message.push_str(n);
            }
            out.push(ProviderChunk::Error {
                message,
                retryable: true,
            });
            return out;
        }
        for (_, c) in std::mem::take(&mut self.calls) {
            let id = if c.id.is_empty() {
                generate_call_id()
            } else {
                c.id
            };
            out.push(ProviderChunk::ToolCall(ToolCall {
                id,
                name: c.name,
                arguments: c.arguments,
            }));
        }
        if let Some(u) = self.usage.take() {
            out.push(ProviderChunk::Usage(u));
        }
        out.push(ProviderChunk::Done {
            finish_reason: self.finish_reason.clone(),
            model: self
                .model
                .clone()
                .unwrap_or_else(|| self.fallback_model.clone()),
        });
        out
    }
}

impl StreamParser for StreamAssembler {
    fn data(&mut self, payload: &str) -> Vec<ProviderChunk> {
        StreamAssembler::data(self, payload)
    }

    fn saw_end(&self) -> bool {
        self.saw_done()
    }

    fn answer_complete(&self) -> bool {
        self.has_finish_reason()
    }

    fn finish(&mut self, note: Option<&str>) -> Vec<ProviderChunk> {
        StreamAssembler::finish(self, note)
    }
}

fn piece_chunk(p: Piece) -> ProviderChunk {
    match p {
        Piece::Text(text) => ProviderChunk::Text { text },
        Piece::Reasoning(text) => ProviderChunk::Reasoning { text },
    }
}

fn provider_error(err: &Value) -> ProviderChunk {
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| err.to_string());
    let lower = message.to_ascii_lowercase();
    let retryable = ["overload", "rate limit", "timeout", "temporarily", "busy"]
        .iter()
        .any(|w| lower.contains(w));
    ProviderChunk::Error {
        message: format!("the provider reported an error mid-stream: {message}"),
        retryable,
    }
}

/// Parse an OpenAI-style `usage` object. DeepSeek's `prompt_cache_hit_tokens` /
/// `prompt_cache_miss_tokens` win; otherwise `prompt_tokens_details.cached_tokens` is the hit
/// count and the rest of the prompt the miss count.
pub fn parse_usage(u: &Value) -> Option<Usage> {
    if !u.is_object() {
        return None;
    }
    let n = |v: Option<&Value>| v.and_then(Value::as_u64);
    let prompt = n(u.get("prompt_tokens")).unwrap_or(0);
    let completion = n(u.get("completion_tokens")).unwrap_or(0);
    let (hit, miss) = match n(u.get("prompt_cache_hit_tokens")) {
        Some(hit) => (
            hit,
            n(u.get("prompt_cache_miss_tokens")).unwrap_or(prompt.saturating_sub(hit)),
        ),
        None => {
            let cached = n(u.pointer("/prompt_tokens_details/cached_tokens")).unwrap_or(0);
            (cached, prompt.saturating_sub(cached))
        }
    };
    Some(Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        cache_hit_tokens: hit,
        cache_miss_tokens: miss,
        reasoning_tokens: n(u.pointer("/completion_tokens_details/reasoning_tokens")).unwrap_or(0),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn tool_calls_without_index_or_id() {
        let mut a = StreamAssembler::new("m");
        a.data(r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"ls","arguments":"{"}}]}}]}"#);
        a.data(r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"}"}}]}}]}"#);
        a.data(r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#);
        let out = a.finish(None);
        match &out[0] {
            ProviderChunk::ToolCall(tc) => {
                assert_eq!(tc.name, "ls");
                assert_eq!(tc.arguments, "{}");
                assert!(tc.id.starts_with("call_"));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(out.last(), Some(ProviderChunk::Done { .. })));
    }

    #[test]
    fn usage_styles() {
        let ds = serde_json::json!({"prompt_tokens": 100, "completion_tokens": 5,
            "prompt_cache_hit_tokens": 80, "prompt_cache_miss_tokens": 20,
            "completion_tokens_details": {"reasoning_tokens": 3}});
        let u = parse_usage(&ds).unwrap();
        assert_eq!(
            (u.cache_hit_tokens, u.cache_miss_tokens, u.reasoning_tokens),
            (80, 20, 3)
        );
        let oa = serde_json::json!({"prompt_tokens": 100, "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 64}});
        let u = parse_usage(&oa).unwrap();
        assert_eq!((u.cache_hit_tokens, u.cache_miss_tokens), (64, 36));
    }
}
