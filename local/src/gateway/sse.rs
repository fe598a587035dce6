//! Server-sent events from an OpenAI-compatible `/chat/completions` stream, turned into
//! typed [`ProviderChunk`]s.
//!
//! [`SseLines`] cuts the byte stream into lines (UTF-8 safe across network chunks);
//! [`StreamAssembler`] turns `data:` payloads into chunks: text and reasoning as they come,
//! tool calls only once complete, then usage and `Done`.

use std::collections::BTreeMap;

use reasonix_forward::proto::{ProviderChunk, ToolCall, Usage};
use serde_json::Value;

use super::think::{Piece, ThinkSplitter};

/// Splits a byte stream into lines; `\r\n` and `\n` both end a line.
#[derive(Debug, Default)]
pub struct SseLines {
    buf: Vec<u8>,
}

impl SseLines {
    /// An empty splitter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add bytes; returns the lines completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut lines = Vec::new();
        while let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buf.drain(..=i).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            lines.push(String::from_utf8_lossy(&line).into_owned());
        }
        lines
    }

    /// The unterminated last line, if any (a stream may end without a final newline).
    pub fn finish(&mut self) -> Option<String> {
        if self.buf.is_empty() {
            return None;
        }
        let line = String::from_utf8_lossy(&self.buf).trim_end().to_string();
        self.buf.clear();
        Some(line)
    }
}

/// What one SSE line is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseLine<'a> {
    /// `data: <payload>`.
    Data(&'a str),
    /// Empty line, comment (`: ping`), `event:`, `id:` or `retry:`.
    Ignorable,
    /// Anything else (e.g. a JSON error body sent without SSE framing).
    Other(&'a str),
}

/// Classify one line.
pub fn classify_line(line: &str) -> SseLine<'_> {
    if let Some(rest) = line.strip_prefix("data:") {
        return SseLine::Data(rest.strip_prefix(' ').unwrap_or(rest).trim_end());
    }
    let t = line.trim();
    if t.is_empty()
        || t.starts_with(':')
        || t.starts_with("event:")
        || t.starts_with("id:")
        || t.starts_with("retry:")
    {
        SseLine::Ignorable
    } else {
        SseLine::Other(line)
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

/// A fresh tool-call id for providers that send none.
pub fn generate_call_id() -> String {
    format!("call_{:016x}", rand::random::<u64>())
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
    fn lines_split_across_chunks_and_utf8() {
        let mut l = SseLines::new();
        let bytes = "data: é\r\n\ndata: x".as_bytes();
        let mut got = Vec::new();
        for b in bytes {
            got.extend(l.push(&[*b]));
        }
        assert_eq!(got, vec!["data: é".to_string(), String::new()]);
        assert_eq!(l.finish().as_deref(), Some("data: x"));
    }

    #[test]
    fn classify() {
        assert_eq!(classify_line("data: {}"), SseLine::Data("{}"));
        assert_eq!(classify_line("data:[DONE]"), SseLine::Data("[DONE]"));
        assert_eq!(classify_line(": keep-alive"), SseLine::Ignorable);
        assert_eq!(
            classify_line("{\"error\":1}"),
            SseLine::Other("{\"error\":1}")
        );
    }

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
