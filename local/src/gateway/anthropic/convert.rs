//! OpenAI-shaped messages and tools (what the host sends) into the Messages API's `system`,
//! `messages` and `tools`, with the `cache_control` breakpoints that make each request reuse
//! the previous one's cache.
//!
//! - system messages before the conversation → `system` text blocks; a later one (none is
//!   sent today) → a user text block, so the cached prefix never moves;
//! - user text → `text` blocks (empty text dropped: the API refuses empty blocks);
//! - an assistant message → its thinking blocks (signed, from `provider_replay`, with the
//!   text cut from `reasoning_content`), a `text` block, then one `tool_use` per call;
//!   reasoning without a signature (from another wire) cannot be replayed and is dropped;
//! - tool results → `tool_result` blocks in a user message;
//! - successive messages of one role are merged into one message (the API alternates).
//!
//! Breakpoints (at most [`MAX_BREAKPOINTS`], the API's limit): the last tool (tools come
//! first in the cached prefix), the last system block, the newest message, and the newest
//! message of the request before this one (the message before the last assistant message),
//! which is where the previous request wrote its cache entry.

use serde_json::{json, Map, Value};

/// The API's limit on `cache_control` blocks in one request.
pub const MAX_BREAKPOINTS: usize = 4;

/// The key of the Anthropic data in a message's `provider_replay`.
pub const REPLAY_KEY: &str = "anthropic";

/// The request parts built from the host's messages.
#[derive(Debug, Default, PartialEq)]
pub struct Converted {
    /// `system` text blocks.
    pub system: Vec<Value>,
    /// `messages`, roles alternating, the first one `user`.
    pub messages: Vec<Value>,
}

/// Why a message cannot be carried.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConvertError {
    /// A content part of a type this wire has no block for.
    #[error("message {index} has a content part of type `{kind}`, which the Anthropic wire cannot carry")]
    UnsupportedPart {
        /// Position of the message in the request.
        index: usize,
        /// The part's `type`.
        kind: String,
    },
    /// A message without a role this wire knows.
    #[error("message {index} has role `{role}`; expected system, user, assistant or tool")]
    UnknownRole {
        /// Position of the message in the request.
        index: usize,
        /// The role.
        role: String,
    },
}

/// Convert the host's messages.
pub fn convert_messages<'a>(
    messages: impl IntoIterator<Item = &'a Value>,
) -> Result<Converted, ConvertError> {
    let mut out = Converted::default();
    for (index, m) in messages.into_iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        match role {
            "system" if out.messages.is_empty() => {
                out.system.extend(text_blocks(index, m.get("content"))?);
            }
            "system" | "user" => push(
                &mut out.messages,
                "user",
                text_blocks(index, m.get("content"))?,
            ),
            "assistant" => push(&mut out.messages, "assistant", assistant_blocks(m)),
            "tool" => {
                let content = match m.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => text_of_parts(other),
                };
                let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
                push(
                    &mut out.messages,
                    "user",
                    vec![json!({"type": "tool_result", "tool_use_id": id, "content": content})],
                );
            }
            other => {
                return Err(ConvertError::UnknownRole {
                    index,
                    role: other.to_string(),
                })
            }
        }
    }
    // The API wants the conversation to open with the user; a history whose head was
    // rewritten could start with the assistant.
    if out
        .messages
        .first()
        .and_then(|m| m.get("role"))
        .and_then(Value::as_str)
        == Some("assistant")
    {
        out.messages.insert(
            0,
            json!({"role": "user", "content": [{"type": "text", "text": "(the conversation continues)"}]}),
        );
    }
    Ok(out)
}

/// Append `blocks` as a message of `role`, into the last message when it has that role.
/// Nothing is appended for no blocks (an empty message is refused by the API).
fn push(messages: &mut Vec<Value>, role: &str, blocks: Vec<Value>) {
    if blocks.is_empty() {
        return;
    }
    if let Some(last) = messages.last_mut() {
        if last["role"] == role {
            if let Some(content) = last["content"].as_array_mut() {
                content.extend(blocks);
                return;
            }
        }
    }
    messages.push(json!({"role": role, "content": blocks}));
}

fn text_blocks(index: usize, content: Option<&Value>) -> Result<Vec<Value>, ConvertError> {
    match content {
        Some(Value::String(s)) if !s.is_empty() => Ok(vec![json!({"type": "text", "text": s})]),
        Some(Value::Array(parts)) => {
            let mut out = Vec::new();
            for p in parts {
                let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
                match kind {
                    "text" => {
                        if let Some(t) = p
                            .get("text")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            out.push(json!({"type": "text", "text": t}));
                        }
                    }
                    "image_url" => out.push(image_block(index, p)?),
                    other => {
                        return Err(ConvertError::UnsupportedPart {
                            index,
                            kind: other.to_string(),
                        })
                    }
                }
            }
            Ok(out)
        }
        _ => Ok(Vec::new()),
    }
}

/// An OpenAI `image_url` part with a `data:` URL → a base64 `image` block.
fn image_block(index: usize, part: &Value) -> Result<Value, ConvertError> {
    let url = part
        .pointer("/image_url/url")
        .and_then(Value::as_str)
        .unwrap_or("");
    let parsed = url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"));
    match parsed {
        Some((media_type, data)) => Ok(json!({"type": "image", "source": {
            "type": "base64", "media_type": media_type, "data": data}})),
        None if !url.is_empty() => {
            Ok(json!({"type": "image", "source": {"type": "url", "url": url}}))
        }
        None => Err(ConvertError::UnsupportedPart {
            index,
            kind: "image_url without a url".into(),
        }),
    }
}

fn text_of_parts(v: &Value) -> String {
    match v.as_array() {
        Some(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        None => v.to_string(),
    }
}

/// Thinking blocks (replayed), text, tool uses.
fn assistant_blocks(m: &Value) -> Vec<Value> {
    let mut blocks = thinking_blocks(m);
    if let Some(text) = m
        .get("content")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for call in m
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let id = call.get("id").and_then(Value::as_str).unwrap_or("");
        let name = call
            .pointer("/function/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let args = call
            .pointer("/function/arguments")
            .and_then(Value::as_str)
            .unwrap_or("");
        blocks.push(json!({"type": "tool_use", "id": id, "name": name, "input": tool_input(args)}));
    }
    blocks
}

/// The arguments as the object `input` must be. A model of this wire always produced an
/// object; arguments from elsewhere that are not one are carried whole under one key.
fn tool_input(args: &str) -> Value {
    if args.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(args) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({"arguments": args}),
    }
}

/// The message's thinking blocks as the provider sent them: each block's text is its `len`
/// bytes of `reasoning_content`, in order. Replay data that does not fit the reasoning text
/// (edited, or from another wire) replays nothing.
fn thinking_blocks(m: &Value) -> Vec<Value> {
    let Some(items) = m
        .pointer(&format!("/provider_replay/{REPLAY_KEY}"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let reasoning = m
        .get("reasoning_content")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut at = 0usize;
    let mut out = Vec::new();
    for item in items {
        match item.get("type").and_then(Value::as_str) {
            Some("thinking") => {
                let len = item.get("len").and_then(Value::as_u64).unwrap_or(0) as usize;
                let Some(text) = at.checked_add(len).and_then(|end| reasoning.get(at..end)) else {
                    return Vec::new();
                };
                at += len;
                let signature = item.get("signature").and_then(Value::as_str).unwrap_or("");
                out.push(json!({"type": "thinking", "thinking": text, "signature": signature}));
            }
            Some("redacted_thinking") => {
                let data = item.get("data").and_then(Value::as_str).unwrap_or("");
                out.push(json!({"type": "redacted_thinking", "data": data}));
            }
            _ => return Vec::new(),
        }
    }
    if at != reasoning.len() {
        return Vec::new();
    }
    out
}

/// OpenAI tool definitions → `{name, description, input_schema}`.
pub fn convert_tools(tools: &[Value]) -> Vec<Value> {
    tools
        .iter()
        .map(|t| {
            let f = t.get("function").unwrap_or(t);
            let mut out = Map::new();
            out.insert(
                "name".into(),
                f.get("name")
                    .cloned()
                    .unwrap_or(Value::String(String::new())),
            );
            if let Some(d) = f.get("description") {
                out.insert("description".into(), d.clone());
            }
            out.insert(
                "input_schema".into(),
                f.get("parameters")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object"})),
            );
            Value::Object(out)
        })
        .collect()
}

/// Place the breakpoints (see the module doc). Returns how many were placed.
pub fn place_breakpoints(tools: &mut [Value], converted: &mut Converted) -> usize {
    let mut placed = 0;
    if let Some(last) = tools.last_mut() {
        placed += mark(last);
    }
    if let Some(last) = converted.system.last_mut() {
        placed += mark(last);
    }
    let msgs = &mut converted.messages;
    let newest = msgs.len().checked_sub(1);
    let previous = msgs
        .iter()
        .rposition(|m| m["role"] == "assistant")
        .and_then(|a| a.checked_sub(1));
    for i in [newest, previous].into_iter().flatten() {
        if placed >= MAX_BREAKPOINTS {
            break;
        }
        if Some(i) == previous && previous == newest {
            continue;
        }
        if let Some(block) = msgs[i]["content"]
            .as_array_mut()
            .and_then(|c| c.iter_mut().rev().find(|b| cacheable(b)))
        {
            placed += mark(block);
        }
    }
    placed
}

/// Thinking blocks cannot carry `cache_control`.
fn cacheable(block: &Value) -> bool {
    !matches!(
        block.get("type").and_then(Value::as_str),
        Some("thinking" | "redacted_thinking")
    )
}

fn mark(block: &mut Value) -> usize {
    match block.as_object_mut() {
        Some(o) if !o.contains_key("cache_control") => {
            o.insert("cache_control".into(), json!({"type": "ephemeral"}));
            1
        }
        _ => 0,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn call(id: &str, name: &str, args: &str) -> Value {
        json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
    }

    #[test]
    fn a_tool_loop_becomes_alternating_blocks() {
        let replay = json!({"anthropic": [
            {"type": "thinking", "signature": "sig-a", "len": 5},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "thinking", "signature": "sig-b", "len": 3},
        ]});
        let msgs = vec![
            json!({"role": "system", "content": "be brief"}),
            json!({"role": "user", "content": "list"}),
            json!({"role": "assistant", "content": "looking", "reasoning_content": "firstyes",
                   "provider_replay": replay,
                   "tool_calls": [call("t1", "ls", "{\"path\":\".\"}"), call("t2", "glob", "")]}),
            json!({"role": "tool", "tool_call_id": "t1", "content": "a\nb"}),
            json!({"role": "tool", "tool_call_id": "t2", "content": ""}),
            json!({"role": "user", "content": "and now?"}),
        ];
        let c = convert_messages(&msgs).unwrap();
        assert_eq!(c.system, vec![json!({"type": "text", "text": "be brief"})]);
        assert_eq!(c.messages.len(), 3);
        assert_eq!(
            c.messages[0],
            json!({"role": "user", "content": [{"type": "text", "text": "list"}]})
        );
        assert_eq!(
            c.messages[1]["content"],
            json!([
                {"type": "thinking", "thinking": "first", "signature": "sig-a"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "thinking", "thinking": "yes", "signature": "sig-b"},
                {"type": "text", "text": "looking"},
                {"type": "tool_use", "id": "t1", "name": "ls", "input": {"path": "."}},
                {"type": "tool_use", "id": "t2", "name": "glob", "input": {}},
            ])
        );
        // Tool results first, then the user's text, in one user message.
        assert_eq!(
            c.messages[2]["content"],
            json!([
                {"type": "tool_result", "tool_use_id": "t1", "content": "a\nb"},
                {"type": "tool_result", "tool_use_id": "t2", "content": ""},
                {"type": "text", "text": "and now?"},
            ])
        );
    }

    #[test]
    fn reasoning_without_a_fitting_signature_is_not_replayed() {
        // DeepSeek-style reasoning from the OpenAI wire: no replay data.
        let m = json!({"role": "assistant", "content": "", "reasoning_content": "hmm",
                       "tool_calls": [call("t", "ls", "{}")]});
        assert_eq!(
            assistant_blocks(&m),
            vec![json!({"type": "tool_use", "id": "t", "name": "ls", "input": {}})]
        );
        // Lengths that do not add up to the reasoning text: nothing replayed.
        let m = json!({"role": "assistant", "content": "x", "reasoning_content": "abc",
                       "provider_replay": {"anthropic": [{"type": "thinking", "signature": "s", "len": 9}]}});
        assert_eq!(
            assistant_blocks(&m),
            vec![json!({"type": "text", "text": "x"})]
        );
        // A cut inside a multi-byte character is refused, not a panic.
        let m = json!({"role": "assistant", "content": "", "reasoning_content": "é",
                       "provider_replay": {"anthropic": [{"type": "thinking", "signature": "s", "len": 1},
                                                         {"type": "thinking", "signature": "s", "len": 1}]}});
        assert!(assistant_blocks(&m).is_empty());
    }

    #[test]
    fn odd_inputs() {
        // Successive user messages merge; an empty assistant message disappears.
        let msgs = vec![
            json!({"role": "user", "content": "a"}),
            json!({"role": "assistant", "content": ""}),
            json!({"role": "user", "content": [{"type": "text", "text": "b"}, {"type": "text", "text": ""}]}),
        ];
        let c = convert_messages(&msgs).unwrap();
        assert_eq!(c.messages.len(), 1);
        assert_eq!(c.messages[0]["content"].as_array().unwrap().len(), 2);
        // A history that starts with the assistant gets a user opener.
        let c = convert_messages(&[json!({"role": "assistant", "content": "hi"})]).unwrap();
        assert_eq!(c.messages[0]["role"], "user");
        // Non-object arguments are carried, not lost.
        assert_eq!(tool_input("[1,2]"), json!({"arguments": "[1,2]"}));
        // Errors name the message.
        let e = convert_messages(&[json!({"role": "critic", "content": "x"})]).unwrap_err();
        assert!(e.to_string().contains("message 0 has role `critic`"), "{e}");
        let e = convert_messages(&[json!({"role": "user", "content": [{"type": "input_audio"}]})])
            .unwrap_err();
        assert!(e.to_string().contains("`input_audio`"), "{e}");
        let c = convert_messages(&[json!({"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]})])
        .unwrap();
        assert_eq!(
            c.messages[0]["content"][0]["source"]["media_type"],
            "image/png"
        );
    }

    #[test]
    fn tools_get_input_schema() {
        let t = vec![
            json!({"type": "function", "function": {"name": "ls", "description": "list",
                            "parameters": {"type": "object", "properties": {}}}}),
        ];
        assert_eq!(
            convert_tools(&t),
            vec![
                json!({"name": "ls", "description": "list", "input_schema": {"type": "object", "properties": {}}})
            ]
        );
    }

    fn marked(v: &Value) -> bool {
        v.get("cache_control").is_some()
    }

    #[test]
    fn breakpoints_sit_on_tools_system_newest_and_previous_newest() {
        let msgs = vec![
            json!({"role": "system", "content": "sys"}),
            json!({"role": "user", "content": "one"}),
            json!({"role": "assistant", "content": "", "tool_calls": [call("t1", "ls", "{}")]}),
            json!({"role": "tool", "tool_call_id": "t1", "content": "out"}),
        ];
        let mut c = convert_messages(&msgs).unwrap();
        let mut tools = convert_tools(&[
            json!({"type": "function", "function": {"name": "a"}}),
            json!({"type": "function", "function": {"name": "b"}}),
        ]);
        assert_eq!(place_breakpoints(&mut tools, &mut c), 4);
        assert!(!marked(&tools[0]) && marked(&tools[1]));
        assert!(marked(&c.system[0]));
        assert!(
            marked(&c.messages[0]["content"][0]),
            "the previous request's newest"
        );
        assert!(!marked(&c.messages[1]["content"][0]));
        assert!(marked(&c.messages[2]["content"][0]), "the newest");
        let all = serde_json::to_string(&(tools, c.system, c.messages)).unwrap();
        assert_eq!(all.matches("cache_control").count(), MAX_BREAKPOINTS);

        // A first request: no assistant yet, so only the newest message is marked; thinking
        // blocks are skipped.
        let mut c = convert_messages(&[json!({"role": "user", "content": "hi"})]).unwrap();
        assert_eq!(place_breakpoints(&mut [], &mut c), 1);
        let mut c = Converted {
            system: Vec::new(),
            messages: vec![json!({"role": "user", "content": [
                {"type": "text", "text": "x"}, {"type": "thinking", "thinking": "t", "signature": "s"}]})],
        };
        place_breakpoints(&mut [], &mut c);
        assert!(marked(&c.messages[0]["content"][0]));
        assert!(!marked(&c.messages[0]["content"][1]));
    }
}
