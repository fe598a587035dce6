//! The Anthropic Messages wire of the mock provider ([`crate::mock_provider::MockProvider::start_anthropic`]).
//!
//! Requests are checked as the API checks them, so a client that would be refused by the real
//! service fails its test instead: the `anthropic-version` header and a key (`x-api-key` or
//! `Authorization`), `model`, a positive `max_tokens`, `stream: true`, at most four
//! `cache_control` blocks, non-empty text blocks and messages, roles alternating from `user`
//! with no `system` role among the messages, every `tool_use` answered by a `tool_result` in
//! the next message (results first) and no result without its call, a `thinking` budget of at
//! least 1024 below `max_tokens` with no `temperature` but 1 beside it, and — as the API does
//! while thinking is on — every assistant turn with tool use that the mock sent thinking with
//! must come back starting with those thinking blocks, each with the signature the mock gave
//! it (a changed text or signature is refused too). Refusals are HTTP 400 with the API's
//! error body (`{"type":"error","error":{"type":"invalid_request_error","message":…}}`).
//!
//! Replies are the same [`MockReply`] script as on the OpenAI wire, rendered as the API's
//! event stream: `message_start` (with usage), `ping`, one content block per part
//! (`thinking` with `thinking_delta`s and a `signature_delta`, `text` with `text_delta`s,
//! `tool_use` with the arguments cut into `input_json_delta`s), `message_delta` (stop reason,
//! output tokens), `message_stop`. A cut reply closes the connection after its text deltas.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use serde_json::{json, Value};

use crate::mock_provider::{completion_bytes, Ending, MockReply, Rendered};
use crate::prompt_cache::PromptAccounting;

/// Thinking blocks the mock sent, by the id of a tool use sent in the same reply.
#[derive(Debug, Default)]
pub struct IssuedThinking {
    by_tool_use: HashMap<String, Vec<(String, String)>>,
}

/// The signature the mock gives a thinking block with this text (a stand-in for the API's
/// opaque one: a changed text no longer matches it).
pub fn signature_of(thinking: &str) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    "reasonix-mock-thinking".hash(&mut h);
    thinking.hash(&mut h);
    format!("mocksig-{:016x}", h.finish())
}

/// The API's error body.
pub fn error_body(kind: &str, message: &str) -> String {
    json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
}

fn invalid(message: String) -> (u16, String) {
    (400, error_body("invalid_request_error", &message))
}

/// Check one request; `Err((status, body))` is the refusal.
pub fn check_request(
    headers: &[(String, String)],
    body: &Value,
    issued: &IssuedThinking,
) -> Result<(), (u16, String)> {
    let header = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.as_str())
    };
    if header("x-api-key").is_none() && header("authorization").is_none() {
        return Err((
            401,
            error_body("authentication_error", "x-api-key header is required"),
        ));
    }
    if header("anthropic-version").is_none() {
        return Err(invalid("anthropic-version: header is required".into()));
    }
    if body
        .get("model")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err(invalid("model: Field required".into()));
    }
    let max_tokens = body.get("max_tokens").and_then(Value::as_u64).unwrap_or(0);
    if max_tokens == 0 {
        return Err(invalid(
            "max_tokens: Field required (a positive integer)".into(),
        ));
    }
    if body.get("stream") != Some(&Value::Bool(true)) {
        return Err(invalid(
            "the mock serves streaming requests only (stream: true)".into(),
        ));
    }
    let breakpoints = body.to_string().matches("\"cache_control\"").count();
    if breakpoints > 4 {
        return Err(invalid(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
        )));
    }
    if let Some(t) = body.get("thinking") {
        let budget = t.get("budget_tokens").and_then(Value::as_u64).unwrap_or(0);
        if t.get("type").and_then(Value::as_str) == Some("enabled") {
            if budget < 1024 {
                return Err(invalid(
                    "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
                        .into(),
                ));
            }
            if budget >= max_tokens {
                return Err(invalid(
                    "`max_tokens` must be greater than `thinking.budget_tokens`".into(),
                ));
            }
            if body
                .get("temperature")
                .and_then(Value::as_f64)
                .is_some_and(|x| x != 1.0)
            {
                return Err(invalid(
                    "`temperature` may only be set to 1 when thinking is enabled".into(),
                ));
            }
        }
    }
    for (i, t) in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if t.get("name")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
            || t.get("input_schema").is_none()
        {
            return Err(invalid(format!(
                "tools.{i}: a tool needs `name` and `input_schema`"
            )));
        }
    }
    if let Some(system) = body.get("system").and_then(Value::as_array) {
        check_blocks("system", system)?;
    }
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| invalid("messages: at least one message is required".into()))?;
    let mut open_calls: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        let expected = if i % 2 == 0 { "user" } else { "assistant" };
        if role == "system" {
            return Err(invalid(format!(
                "messages.{i}.role: Unexpected role \"system\". The Messages API accepts a top-level `system` parameter, not \"system\" as an input message role."
            )));
        }
        if role != expected {
            return Err(invalid(format!(
                "messages.{i}: roles must alternate between \"user\" and \"assistant\", starting with \"user\" (found \"{role}\")"
            )));
        }
        let blocks = match m.get("content") {
            Some(Value::String(s)) if !s.is_empty() => Vec::new(),
            Some(Value::Array(a)) if !a.is_empty() => a.clone(),
            _ => {
                return Err(invalid(format!(
                    "messages.{i}: all messages must have non-empty content"
                )))
            }
        };
        check_blocks(&format!("messages.{i}.content"), &blocks)?;
        let kind = |b: &Value| {
            b.get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        if role == "user" {
            let results: Vec<String> = blocks
                .iter()
                .filter(|b| kind(b) == "tool_result")
                .map(|b| {
                    b.get("tool_use_id")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                })
                .collect();
            if let Some(missing) = open_calls.iter().find(|id| !results.contains(id)) {
                return Err(invalid(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {missing}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
                )));
            }
            if let Some(stray) = results.iter().find(|id| !open_calls.contains(id)) {
                return Err(invalid(format!(
                    "messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: {stray}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                )));
            }
            let first_other = blocks.iter().position(|b| kind(b) != "tool_result");
            if let Some(p) = first_other {
                if blocks[p..].iter().any(|b| kind(b) == "tool_result") {
                    return Err(invalid(format!(
                        "messages.{i}.content: `tool_result` blocks must come before any other content"
                    )));
                }
            }
            open_calls.clear();
        } else {
            open_calls = blocks
                .iter()
                .filter(|b| kind(b) == "tool_use")
                .map(|b| {
                    b.get("id")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                })
                .collect();
            check_thinking_replay(i, &blocks, &open_calls, issued)?;
        }
    }
    Ok(())
}

/// Text blocks must not be empty; thinking blocks must carry the mock's signature.
fn check_blocks(at: &str, blocks: &[Value]) -> Result<(), (u16, String)> {
    for (j, b) in blocks.iter().enumerate() {
        match b.get("type").and_then(Value::as_str).unwrap_or("") {
            "text" => {
                if b.get("text")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    return Err(invalid(format!(
                        "{at}.{j}: text content blocks must be non-empty"
                    )));
                }
            }
            "thinking" => {
                let text = b.get("thinking").and_then(Value::as_str).unwrap_or("");
                let sig = b.get("signature").and_then(Value::as_str).unwrap_or("");
                if sig != signature_of(text) {
                    return Err(invalid(format!(
                        "{at}.{j}: Invalid `signature` in `thinking` block"
                    )));
                }
            }
            "tool_use" | "tool_result" | "redacted_thinking" | "image" => {}
            other => {
                return Err(invalid(format!(
                    "{at}.{j}.type: unknown content block type `{other}`"
                )))
            }
        }
    }
    Ok(())
}

/// An assistant turn with tool use that the mock sent thinking with must start with that
/// thinking, block for block.
fn check_thinking_replay(
    i: usize,
    blocks: &[Value],
    calls: &[String],
    issued: &IssuedThinking,
) -> Result<(), (u16, String)> {
    let Some(given) = calls.iter().find_map(|id| issued.by_tool_use.get(id)) else {
        return Ok(());
    };
    for (j, (text, sig)) in given.iter().enumerate() {
        let b = blocks.get(j);
        let ok = b.and_then(|b| b.get("type")).and_then(Value::as_str) == Some("thinking")
            && b.and_then(|b| b.get("thinking")).and_then(Value::as_str) == Some(text.as_str())
            && b.and_then(|b| b.get("signature")).and_then(Value::as_str) == Some(sig.as_str());
        if !ok {
            let found = b
                .and_then(|b| b.get("type"))
                .and_then(Value::as_str)
                .unwrap_or("nothing");
            return Err(invalid(format!(
                "messages.{i}.content.{j}.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. When `thinking` is enabled, an assistant message with `tool_use` blocks must start with the thinking blocks it was sent with (preceding the lastmost set of `tool_use` and `tool_result` blocks). To avoid this requirement, disable `thinking`."
            )));
        }
    }
    Ok(())
}

/// Render one reply. `Err((status, extra headers, body))` is a non-200 answer.
pub(crate) fn render(
    reply: MockReply,
    auto_usage: Option<PromptAccounting>,
    request_index: usize,
    issued: &mut IssuedThinking,
) -> Result<Rendered, (u16, String, String)> {
    let (reply, opts) = reply.unwrap_options();
    let out_bytes = completion_bytes(&reply) + opts.thinking.iter().map(String::len).sum::<usize>();
    let model = opts.model.clone().unwrap_or_else(|| "mock-model".into());
    let usage = opts
        .usage
        .clone()
        .or_else(|| auto_usage.map(|acc| crate::anthropic_cache::usage_json(&acc, out_bytes)));
    let mut s = Stream::default();
    let start_usage = usage
        .clone()
        .unwrap_or_else(|| json!({"input_tokens": 0, "output_tokens": 0}));
    s.event(json!({"type": "message_start", "message": {
        "id": format!("msg_mock_{request_index}"), "type": "message", "role": "assistant",
        "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": start_usage}}));
    s.event(json!({"type": "ping"}));
    let thinking_blocks = |s: &mut Stream, deltas: &[String]| -> Vec<(String, String)> {
        if deltas.is_empty() {
            return Vec::new();
        }
        let text: String = deltas.concat();
        let sig = signature_of(&text);
        let i = s.start(json!({"type": "thinking", "thinking": "", "signature": ""}));
        for d in deltas {
            s.delta(i, json!({"type": "thinking_delta", "thinking": d}));
        }
        s.delta(i, json!({"type": "signature_delta", "signature": sig}));
        s.stop(i);
        vec![(text, sig)]
    };
    let text_block = |s: &mut Stream, chunks: &[String]| {
        if chunks.is_empty() {
            return;
        }
        let i = s.start(json!({"type": "text", "text": ""}));
        for c in chunks {
            s.delta(i, json!({"type": "text_delta", "text": c}));
        }
        s.stop(i);
    };
    let mut given = thinking_blocks(&mut s, &opts.thinking);
    let ending = match reply {
        MockReply::Status {
            code,
            retry_after,
            body,
        } => {
            let extra = retry_after
                .map(|s| format!("Retry-After: {s}\r\n"))
                .unwrap_or_default();
            return Err((code, extra, body));
        }
        MockReply::Text { chunks } => {
            text_block(&mut s, &chunks);
            Ending::Finish("end_turn")
        }
        MockReply::Reasoning { reasoning, text } => {
            given.extend(thinking_blocks(&mut s, &reasoning));
            text_block(&mut s, &text);
            Ending::Finish("end_turn")
        }
        MockReply::ToolCalls {
            text, calls, split, ..
        } => {
            text_block(&mut s, &text);
            for (n, c) in calls.iter().enumerate() {
                let id =
                    c.id.clone()
                        .unwrap_or_else(|| format!("toolu_mock_{request_index}_{n}"));
                if !given.is_empty() {
                    issued.by_tool_use.insert(id.clone(), given.clone());
                }
                let i = s.start(json!({"type": "tool_use", "id": id, "name": c.name, "input": {}}));
                let chars: Vec<char> = c.arguments.chars().collect();
                for piece in chars.chunks(split.max(1)) {
                    s.delta(
                        i,
                        json!({"type": "input_json_delta",
                                      "partial_json": piece.iter().collect::<String>()}),
                    );
                }
                s.stop(i);
            }
            Ending::Finish("tool_use")
        }
        MockReply::Cut { chunks } => {
            if !chunks.is_empty() {
                let i = s.start(json!({"type": "text", "text": ""}));
                for c in &chunks {
                    s.delta(i, json!({"type": "text_delta", "text": c}));
                }
            }
            Ending::Cut
        }
        MockReply::Hang { chunks } => {
            if !chunks.is_empty() {
                let i = s.start(json!({"type": "text", "text": ""}));
                for c in &chunks {
                    s.delta(i, json!({"type": "text_delta", "text": c}));
                }
            }
            Ending::Hang
        }
        MockReply::Raw { events } => {
            s.frames = events.iter().map(|e| frame(e)).collect();
            Ending::Raw
        }
        // unwrap_options removed every `With` layer.
        MockReply::With { .. } => Ending::Cut,
    };
    if let Ending::Finish(stop) = ending {
        let output = usage
            .as_ref()
            .and_then(|u| u.get("output_tokens"))
            .cloned()
            .unwrap_or(json!(0));
        s.event(json!({"type": "message_delta",
                       "delta": {"stop_reason": stop, "stop_sequence": null},
                       "usage": {"output_tokens": output}}));
        s.event(json!({"type": "message_stop"}));
    }
    Ok(Rendered {
        frames: s.frames,
        ending,
        delay_ms: opts.delay_ms,
    })
}

/// One SSE frame, named by the event's `type` like the API's.
fn frame(data: &str) -> String {
    let kind = serde_json::from_str::<Value>(data)
        .ok()
        .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_string));
    match kind {
        Some(k) => format!("event: {k}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// The event stream being rendered.
#[derive(Default)]
struct Stream {
    frames: Vec<String>,
    blocks: u64,
}

impl Stream {
    fn event(&mut self, v: Value) {
        self.frames.push(frame(&v.to_string()));
    }

    fn start(&mut self, block: Value) -> u64 {
        let i = self.blocks;
        self.blocks += 1;
        self.event(json!({"type": "content_block_start", "index": i, "content_block": block}));
        i
    }

    fn delta(&mut self, i: u64, delta: Value) {
        self.event(json!({"type": "content_block_delta", "index": i, "delta": delta}));
    }

    fn stop(&mut self, i: u64) {
        self.event(json!({"type": "content_block_stop", "index": i}));
    }
}
