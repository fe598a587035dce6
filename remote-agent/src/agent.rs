//! Building model requests with a byte-stable prefix, and rebuilding the conversation from
//! journal events.
//!
//! Cache-first discipline: the prefix (system prompt + canonical, name-sorted tool schemas)
//! is fixed when the session starts and never mutated; everything volatile rides the turn
//! tail. Each request records hashes of both parts so a drop in cache hits can be explained.

use std::path::Path;

use reasonix_forward::proto::{Attachment, Event, EventKind, ToolCall};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::tools::bound_for_context;

/// Files whose content becomes standing instructions, in the order they are looked for.
pub const INSTRUCTION_FILES: [&str; 3] = ["REASONIX.md", "AGENTS.md", "CLAUDE.md"];

/// Largest standing-instruction file we include, in bytes.
const MAX_INSTRUCTIONS: usize = 64 * 1024;

/// The stable prefix of a session.
#[derive(Debug, Clone)]
pub struct Prefix {
    /// The system prompt.
    pub system: String,
    /// Tool schemas, canonical and sorted.
    pub tools: Vec<Value>,
    /// Hash of the system prompt.
    pub system_hash: String,
    /// Hash of the tool schemas.
    pub tools_hash: String,
}

impl Prefix {
    /// Build the prefix for a workspace: base prompt + standing instructions + tools.
    pub fn build(workspace: &Path, tools: Vec<Value>) -> Prefix {
        let mut system = String::from(BASE_PROMPT);
        system.push_str(&format!("\n\nWorkspace root: {}\n", workspace.display()));
        for name in INSTRUCTION_FILES {
            let path = workspace.join(name);
            if let Ok(text) = std::fs::read_to_string(&path) {
                let text: String = if text.len() > MAX_INSTRUCTIONS {
                    let mut cut = MAX_INSTRUCTIONS;
                    while !text.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    text[..cut].to_string()
                } else {
                    text
                };
                system.push_str(&format!(
                    "\n<standing-instructions file=\"{name}\">\n{text}\n</standing-instructions>\n"
                ));
            }
        }
        let tools_bytes = serde_json::to_vec(&tools).unwrap_or_default();
        Prefix {
            system_hash: short_hash(system.as_bytes()),
            tools_hash: short_hash(&tools_bytes),
            system,
            tools,
        }
    }
}

impl Prefix {
    /// Adds a standing-instructions block named `name` (pinned memory facts) at the end of
    /// the system prompt; only ever done before the session's first model request.
    pub fn add_instructions(&mut self, name: &str, text: &str) {
        self.system.push_str(&format!(
            "\n<standing-instructions file=\"{name}\">\n{text}\n</standing-instructions>\n"
        ));
        self.system_hash = short_hash(self.system.as_bytes());
    }
}

/// Bytes (as sent, JSON-escaped) of the standing-instruction blocks in a system prompt
/// built by [`Prefix::build`] (what `/context` reports apart from the base prompt).
pub fn instruction_bytes(system: &str) -> usize {
    const OPEN: &str = "\n<standing-instructions file=";
    const CLOSE: &str = "</standing-instructions>\n";
    let mut total = 0;
    let mut rest = system;
    while let Some(start) = rest.find(OPEN) {
        let block = &rest[start..];
        let end = block
            .find(CLOSE)
            .map(|e| e + CLOSE.len())
            .unwrap_or(block.len());
        // Escaped length minus the two quotes JSON adds around a string.
        total += Value::String(block[..end].to_string()).to_string().len() - 2;
        rest = &block[end..];
    }
    total
}

/// First 16 hex digits of the SHA-256 of `bytes`.
pub fn short_hash(bytes: &[u8]) -> String {
    hex::encode(&Sha256::digest(bytes)[..8])
}

const BASE_PROMPT: &str = "You are Reasonix, a careful coding agent working in the user's \
repository through tools. Read before you write. Prefer small, exact edits (edit_file, \
multi_edit) over rewriting files. Run commands with bash when it helps to verify your work. \
Paths are relative to the workspace root unless absolute. When a tool returns an error, read \
it and adapt instead of repeating the same call. Keep answers short and concrete; show the \
user what changed.";

/// Explain a drop in cache-hit tokens by comparing this request's prefix hashes with the
/// previous request's. `rewrite` names a declared history rewrite (a compaction) since the
/// previous request, which explains a drop by itself.
pub fn cache_note(
    prev: Option<(&str, &str, u64)>,
    system_hash: &str,
    tools_hash: &str,
    hit_tokens: u64,
    rewrite: Option<&str>,
) -> Option<String> {
    let (prev_sys, prev_tools, prev_hit) = prev?;
    if hit_tokens >= prev_hit {
        return None;
    }
    if let Some(what) = rewrite {
        return Some(format!(
            "cache hits dropped from {prev_hit} to {hit_tokens} tokens: declared cache reset by {what} (log_rewrite)"
        ));
    }
    let mut changed = Vec::new();
    if prev_sys != system_hash {
        changed.push("system prompt");
    }
    if prev_tools != tools_hash {
        changed.push("tool schemas");
    }
    Some(if changed.is_empty() {
        format!(
            "cache hits dropped from {prev_hit} to {hit_tokens} tokens with an unchanged prefix (the provider's cache expired or was evicted)"
        )
    } else {
        format!(
            "cache hits dropped from {prev_hit} to {hit_tokens} tokens: the {} changed",
            changed.join(" and ")
        )
    })
}

/// The conversation (without the system message) rebuilt from journal events.
pub fn messages_from_events(events: &[Event]) -> Vec<Value> {
    let mut messages = Vec::new();
    // Steers wait for their injection point; `!` outputs for the next user turn.
    let mut steers = crate::steer::Replay::default();
    // Plan mode adds its note to the user turns it covers (as the live session did).
    let mut plan = crate::plan::PlanState::default();
    for ev in events {
        plan.observe(&ev.kind);
        match &ev.kind {
            EventKind::UserTurn {
                text, attachments, ..
            } => {
                let shell = steers.take_shell();
                messages.push(crate::steer::user_message_with_shell(
                    &crate::plan::turn_text(text, plan.on),
                    attachments,
                    &shell,
                ));
            }
            EventKind::Steer { .. }
            | EventKind::SteerInjected { .. }
            | EventKind::ShellRan { .. } => {
                if let Some(msg) = steers.observe(&ev.kind) {
                    messages.push(msg);
                }
            }
            // The planner's handoff joins the executor's conversation where it was given.
            EventKind::Plan(reasonix_forward::proto::PlanEvent::Handoff { text, .. }) => {
                messages.push(user_message(text, &[]))
            }
            EventKind::AssistantMessage {
                content,
                reasoning,
                tool_calls,
                provider_replay,
            } => messages.push(assistant_message(
                content,
                reasoning.as_deref(),
                tool_calls,
                provider_replay.as_ref(),
            )),
            EventKind::ToolFinished {
                call_id,
                output,
                output_ref,
                context_bytes,
                ..
            } => messages.push(tool_result_message(
                call_id,
                output,
                output_ref.is_some(),
                *context_bytes,
            )),
            EventKind::SessionStarted { .. }
            | EventKind::TextDelta { .. }
            | EventKind::ReasoningDelta { .. }
            | EventKind::ToolStarted { .. }
            | EventKind::ApprovalRequested { .. }
            | EventKind::ApprovalAnswered { .. }
            | EventKind::ElicitationRequested { .. }
            | EventKind::ElicitationAnswered { .. }
            | EventKind::Usage { .. }
            | EventKind::TurnFinished { .. }
            | EventKind::Notice { .. }
            | EventKind::ProviderRetry(_)
            | EventKind::Plan(_)
            | EventKind::Goal(_)
            | EventKind::Checkpoint { .. }
            | EventKind::Subagent { .. }
            | EventKind::Planner { .. } => {}
            EventKind::Compacted {
                snipped,
                replaced,
                summary,
                kept_user_bytes,
                ..
            } => {
                if let (Some(range), Some(summary)) = (replaced, summary) {
                    crate::compaction::apply(
                        &mut messages,
                        crate::compaction::Rewrite::Summary {
                            range: *range,
                            summary,
                            kept_user_bytes: *kept_user_bytes,
                        },
                    );
                } else {
                    crate::compaction::apply(
                        &mut messages,
                        crate::compaction::Rewrite::Snip(snipped),
                    );
                }
            }
        }
    }
    messages
}

/// Largest attached file, in bytes.
const MAX_ATTACHMENT: usize = 64 * 1024;

/// Files mentioned as `@path` in `text` that exist inside `workspace` (no `..`, no absolute
/// paths, symlinks resolved and still inside), read now: at most 8 files, 64 KiB each, text
/// only. Mentions that are not such files are left as plain text.
pub fn resolve_mentions(workspace: &Path, text: &str) -> Vec<Attachment> {
    let Ok(root) = workspace.canonicalize() else {
        return Vec::new();
    };
    let mut out: Vec<Attachment> = Vec::new();
    for word in text.split_whitespace() {
        let Some(rel) = word.strip_prefix('@') else {
            continue;
        };
        let rel = rel.trim_end_matches([',', '.', ';', ':', '!', '?', ')', '\'', '"']);
        if rel.is_empty() || Path::new(rel).is_absolute() || out.iter().any(|a| a.path == rel) {
            continue;
        }
        let Ok(full) = root.join(rel).canonicalize() else {
            continue;
        };
        if !full.starts_with(&root) || !full.is_file() {
            continue;
        }
        let Ok(bytes) = std::fs::read(&full) else {
            continue;
        };
        if bytes.iter().take(8192).any(|b| *b == 0) {
            continue;
        }
        let truncated = bytes.len() > MAX_ATTACHMENT;
        let mut end = bytes.len().min(MAX_ATTACHMENT);
        while end > 0 && std::str::from_utf8(&bytes[..end]).is_err() {
            end -= 1;
        }
        out.push(Attachment {
            path: rel.to_string(),
            content: String::from_utf8_lossy(&bytes[..end]).into_owned(),
            truncated,
        });
        if out.len() == 8 {
            break;
        }
    }
    out
}

/// A user message: the text, then each attached file in a fenced block.
pub fn user_message(text: &str, attachments: &[Attachment]) -> Value {
    let mut content = text.to_string();
    for a in attachments {
        if let Some(event) = a.path.strip_prefix(crate::session::HOOK_PREFIX) {
            content.push_str(&format!(
                "\n\n<hook-context event=\"{event}\">\n{}\n</hook-context>",
                a.content
            ));
            continue;
        }
        if let Some(id) = a.path.strip_prefix(crate::pty::mention::TERM_PREFIX) {
            content.push_str(&format!(
                "\n\n<attached-terminal id=\"{id}\" what=\"the current screen of the user's terminal {id}\">\n{}\n</attached-terminal>",
                a.content
            ));
            continue;
        }
        if a.path == crate::memory::RECALL_PATH {
            content.push_str("\n\n");
            content.push_str(&a.content);
            continue;
        }
        if let Some(rest) = a.path.strip_prefix(crate::mcp::prompt::RESOURCE_PREFIX) {
            let (server, uri) = rest.split_once(':').unwrap_or((rest, ""));
            content.push_str(&format!(
                "\n\n<attached-resource server=\"{server}\" uri=\"{uri}\"{}>\n{}\n</attached-resource>",
                if a.truncated {
                    " truncated=\"true\""
                } else {
                    ""
                },
                a.content
            ));
            continue;
        }
        content.push_str(&format!(
            "\n\n<attached-file path=\"{}\"{}>\n{}\n</attached-file>",
            a.path,
            if a.truncated {
                " truncated=\"true\""
            } else {
                ""
            },
            a.content
        ));
    }
    json!({"role": "user", "content": content})
}

/// Append `message` to a provider request's messages, joining it to the last one when both
/// are user messages with text content (a blank line apart). A request then never has two
/// user messages in a row, which DeepSeek's reasoning models refuse with a 400 ("does not
/// support successive user or assistant messages"). The conversation keeps them apart (a
/// turn whose model request failed, then the next prompt; a summary, then the user turns it
/// keeps); only what is sent is joined, the same way for every request, so requests still
/// extend each other.
pub fn push_request_message(messages: &mut Vec<Value>, message: Value) {
    if let Some(last) = messages.last_mut() {
        let both_user = last["role"] == "user" && message["role"] == "user";
        if let (true, Some(text), Some(next)) = (
            both_user,
            last["content"].as_str(),
            message["content"].as_str(),
        ) {
            last["content"] = Value::String(format!("{text}\n\n{next}"));
            return;
        }
    }
    messages.push(message);
}

/// An assistant message in OpenAI format. DeepSeek needs `reasoning_content` replayed on
/// messages that had reasoning or tool calls (an empty string when it was lost). What the
/// provider asked to get back with the message (`provider_replay`, e.g. Anthropic's thinking
/// signatures) rides along under that key; the laptop's gateway reads or drops it per wire
/// format.
pub fn assistant_message(
    content: &str,
    reasoning: Option<&str>,
    tool_calls: &[ToolCall],
    provider_replay: Option<&Value>,
) -> Value {
    let mut msg = json!({"role": "assistant", "content": content});
    if !tool_calls.is_empty() {
        msg["tool_calls"] = Value::Array(
            tool_calls
                .iter()
                .map(|c| {
                    json!({"id": c.id, "type": "function",
                           "function": {"name": c.name, "arguments": c.arguments}})
                })
                .collect(),
        );
    }
    if reasoning.is_some() || !tool_calls.is_empty() {
        msg["reasoning_content"] = Value::String(reasoning.unwrap_or("").to_string());
    }
    if let Some(replay) = provider_replay {
        msg["provider_replay"] = replay.clone();
    }
    msg
}

/// A tool result message; the output is bounded as it enters the context.
pub fn tool_message(call_id: &str, output: &str) -> Value {
    json!({"role": "tool", "tool_call_id": call_id, "content": bound_for_context(output)})
}

/// The tool result message of a `ToolFinished` event. When the output was stored by
/// reference the event already holds the bounded view the model saw, taken verbatim (bounding
/// it again would change the bytes of the conversation and break the provider's cache).
/// `context_bytes` is the smaller bound a small context window gave the result (the event's
/// field of that name), applied on top of either.
pub fn tool_result_message(
    call_id: &str,
    output: &str,
    by_ref: bool,
    context_bytes: Option<u64>,
) -> Value {
    match context_bytes {
        Some(limit) => json!({"role": "tool", "tool_call_id": call_id,
                              "content": crate::tools::bound_to(output, limit as usize)}),
        None if by_ref => json!({"role": "tool", "tool_call_id": call_id, "content": output}),
        None => tool_message(call_id, output),
    }
}

/// Tool calls of the last assistant message that have no result yet: what a crash left
/// behind. Returns (call, started) pairs; `started` is true when a `ToolStarted` was
/// journaled, i.e. the tool may have run.
pub fn unfinished_calls(events: &[Event]) -> Vec<(ToolCall, bool)> {
    let mut pending: Vec<(ToolCall, bool)> = Vec::new();
    for ev in events {
        match &ev.kind {
            EventKind::AssistantMessage { tool_calls, .. } => {
                pending = tool_calls.iter().map(|c| (c.clone(), false)).collect();
            }
            EventKind::ToolStarted { call_id, .. } => {
                if let Some(p) = pending.iter_mut().find(|(c, _)| &c.id == call_id) {
                    p.1 = true;
                }
            }
            EventKind::ToolFinished { call_id, .. } => pending.retain(|(c, _)| &c.id != call_id),
            EventKind::UserTurn { .. } => pending.clear(),
            EventKind::SessionStarted { .. }
            | EventKind::TextDelta { .. }
            | EventKind::ReasoningDelta { .. }
            | EventKind::ApprovalRequested { .. }
            | EventKind::ApprovalAnswered { .. }
            | EventKind::ElicitationRequested { .. }
            | EventKind::ElicitationAnswered { .. }
            | EventKind::Usage { .. }
            | EventKind::TurnFinished { .. }
            | EventKind::Notice { .. }
            | EventKind::ProviderRetry(_)
            | EventKind::Plan(_)
            | EventKind::Goal(_)
            | EventKind::Checkpoint { .. }
            | EventKind::Compacted { .. }
            | EventKind::Steer { .. }
            | EventKind::SteerInjected { .. }
            | EventKind::ShellRan { .. }
            | EventKind::Subagent { .. }
            | EventKind::Planner { .. } => {}
        }
    }
    pending
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_never_has_two_user_messages_in_a_row() {
        let conv = [
            json!({"role": "user", "content": "first try"}),
            json!({"role": "user", "content": "second try"}),
            json!({"role": "assistant", "content": "ok"}),
            json!({"role": "user", "content": "next"}),
            json!({"role": "user", "content": [{"type": "text", "text": "parts"}]}),
        ];
        let mut messages = vec![json!({"role": "system", "content": "sys"})];
        for m in conv {
            push_request_message(&mut messages, m);
        }
        assert_eq!(
            messages,
            [
                json!({"role": "system", "content": "sys"}),
                json!({"role": "user", "content": "first try\n\nsecond try"}),
                json!({"role": "assistant", "content": "ok"}),
                json!({"role": "user", "content": "next"}),
                // Content that is not text is not joined into.
                json!({"role": "user", "content": [{"type": "text", "text": "parts"}]}),
            ]
        );
    }

    #[test]
    fn mentions_attach_workspace_files_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("src")).expect("ws");
        std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").expect("file");
        std::fs::write(dir.path().join("secret.txt"), "outside").expect("outside");
        std::fs::write(ws.join("bin.dat"), [0u8, 1, 2]).expect("binary");
        let a = resolve_mentions(
            &ws,
            "look at @src/main.rs, not @../secret.txt or @bin.dat or @missing.rs",
        );
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].path, "src/main.rs");
        assert_eq!(a[0].content, "fn main() {}\n");
        let m = user_message("look", &a);
        let c = m["content"].as_str().expect("content");
        assert!(c.contains("<attached-file path=\"src/main.rs\">\nfn main() {}\n"));
    }

    #[test]
    fn cache_note_names_the_changed_part() {
        assert_eq!(cache_note(None, "a", "b", 0, None), None);
        assert_eq!(cache_note(Some(("a", "b", 100)), "a", "b", 120, None), None);
        let n = cache_note(Some(("a", "b", 100)), "a", "c", 10, None).expect("note");
        assert!(n.contains("tool schemas changed"), "{n}");
        let n = cache_note(Some(("a", "b", 100)), "a", "b", 10, None).expect("note");
        assert!(n.contains("unchanged prefix"), "{n}");
        let n = cache_note(
            Some(("a", "b", 100)),
            "a",
            "b",
            10,
            Some("compaction (snip)"),
        )
        .expect("note");
        assert!(
            n.contains("declared cache reset by compaction (snip)"),
            "{n}"
        );
    }

    #[test]
    fn tool_call_messages_replay_reasoning() {
        let call = ToolCall {
            id: "c1".into(),
            name: "ls".into(),
            arguments: "{}".into(),
        };
        let m = assistant_message("", None, std::slice::from_ref(&call), None);
        assert_eq!(m["reasoning_content"], "");
        assert!(m.get("provider_replay").is_none());
        let m = assistant_message("hi", None, &[], None);
        assert!(m.get("reasoning_content").is_none());
        let replay = json!({"anthropic": [{"type": "thinking", "signature": "s", "len": 2}]});
        let m = assistant_message("", Some("ab"), std::slice::from_ref(&call), Some(&replay));
        assert_eq!(m["provider_replay"], replay);
    }
}
