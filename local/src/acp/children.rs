//! Subagents over ACP (#33 §2): each child is a tool call of its own, id
//! `<parent call id>/<child id>` (a grandchild nests one more `/<id>`), shown in progress
//! from its first event; its steps — each tool call it makes with its result, its answer —
//! arrive as `tool_call_update` content naming them; its end completes (or fails) it.

use std::collections::HashMap;

use agent_client_protocol::v1::schema as acp;
use reasonix_forward::proto::{EventKind, TurnOutcome};
use serde_json::Value;

/// What one child did so far, as the editor is shown it.
#[derive(Debug, Default)]
pub(super) struct ChildCall {
    steps: Vec<String>,
}

/// The children of a session, by their ACP tool call id.
#[derive(Debug, Default)]
pub(super) struct Children {
    by_id: HashMap<String, ChildCall>,
}

/// At most this many characters of a step line (a tool's output, an answer).
const STEP_CHARS: usize = 240;

fn bounded(text: &str) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > STEP_CHARS {
        let mut s: String = one.chars().take(STEP_CHARS).collect();
        s.push('…');
        s
    } else {
        one
    }
}

/// A tool call's arguments in a few words: the first string argument.
fn args_summary(arguments: &str) -> String {
    let v: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    v.as_object()
        .and_then(|o| o.values().find_map(Value::as_str).map(bounded))
        .unwrap_or_default()
}

impl Children {
    /// The updates for one `Subagent` event of the parent call `call_id`.
    pub(super) fn event(
        &mut self,
        call_id: &str,
        child: &str,
        event: &EventKind,
    ) -> Vec<acp::SessionUpdate> {
        let id = format!("{call_id}/{child}");
        let mut out = Vec::new();
        if !self.by_id.contains_key(&id) {
            let task = match event {
                EventKind::UserTurn { text, .. } => text.clone(),
                _ => String::new(),
            };
            let first = task.lines().next().unwrap_or_default();
            let title = if first.is_empty() {
                format!("Subagent {child}")
            } else {
                format!("Subagent {child}: {}", bounded(first))
            };
            self.by_id.insert(id.clone(), ChildCall::default());
            out.push(acp::SessionUpdate::ToolCall(
                acp::ToolCall::new(id.clone(), title)
                    .kind(acp::ToolKind::Other)
                    .status(acp::ToolCallStatus::InProgress)
                    .raw_input(serde_json::json!({"subagent": child, "parent_call": call_id, "task": task})),
            ));
        }
        let mut status = None;
        let step = match event {
            EventKind::AssistantMessage {
                content,
                tool_calls,
                ..
            } => {
                let mut lines: Vec<String> = tool_calls
                    .iter()
                    .map(|t| format!("→ {} {}", t.name, args_summary(&t.arguments)))
                    .collect();
                if tool_calls.is_empty() && !content.trim().is_empty() {
                    lines.push(format!("answer: {}", bounded(content)));
                }
                lines
            }
            EventKind::ToolFinished {
                name,
                is_error,
                output,
                ..
            } => vec![format!(
                "← {name} {}: {}",
                if *is_error { "failed" } else { "ok" },
                bounded(output)
            )],
            EventKind::TurnFinished { outcome, detail } => {
                status = Some(if *outcome == TurnOutcome::Completed {
                    acp::ToolCallStatus::Completed
                } else {
                    acp::ToolCallStatus::Failed
                });
                vec![match detail {
                    Some(d) => format!("■ {outcome}: {}", bounded(d)),
                    None => format!("■ {outcome}"),
                }]
            }
            // A grandchild: a tool call of its own, nested under this child's id.
            EventKind::Subagent {
                call_id: _,
                child: grand,
                event: inner,
            } => {
                out.extend(self.event(&id, grand, inner));
                return out;
            }
            _ => Vec::new(),
        };
        if step.is_empty() {
            return out;
        }
        let c = self.by_id.entry(id.clone()).or_default();
        c.steps.extend(step);
        let mut fields = acp::ToolCallUpdateFields::new()
            .content(vec![acp::ToolCallContent::from(c.steps.join("\n"))]);
        if let Some(s) = status {
            fields = fields.status(s);
        }
        out.push(acp::SessionUpdate::ToolCallUpdate(
            acp::ToolCallUpdate::new(id, fields),
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use reasonix_forward::proto::ToolCall;

    fn text_of(u: &acp::SessionUpdate) -> String {
        match u {
            acp::SessionUpdate::ToolCallUpdate(t) => serde_json::to_string(&t.fields).unwrap(),
            acp::SessionUpdate::ToolCall(t) => serde_json::to_string(t).unwrap(),
            _ => String::new(),
        }
    }

    #[test]
    fn a_child_is_a_tool_call_whose_updates_name_its_steps() {
        let mut cs = Children::default();
        let up = cs.event(
            "call_t",
            "sa-1",
            &EventKind::UserTurn {
                request_id: "sa-1".into(),
                text: "read the notes\nmore".into(),
                attachments: vec![],
            },
        );
        assert_eq!(up.len(), 1);
        let s = text_of(&up[0]);
        assert!(
            s.contains("call_t/sa-1") && s.contains("Subagent sa-1: read the notes"),
            "{s}"
        );
        let up = cs.event(
            "call_t",
            "sa-1",
            &EventKind::AssistantMessage {
                content: String::new(),
                reasoning: None,
                tool_calls: vec![ToolCall {
                    id: "c".into(),
                    name: "read_file".into(),
                    arguments: "{\"path\":\"notes.txt\"}".into(),
                }],
                provider_replay: None,
            },
        );
        assert!(text_of(&up[0]).contains("→ read_file notes.txt"));
        let up = cs.event(
            "call_t",
            "sa-1",
            &EventKind::TurnFinished {
                outcome: TurnOutcome::Completed,
                detail: None,
            },
        );
        let s = text_of(&up[0]);
        assert!(s.contains("→ read_file notes.txt\\n■ completed"), "{s}");
        assert!(s.contains("completed\""), "{s}");
        // A grandchild nests under the child's id.
        let up = cs.event(
            "call_t",
            "sa-1",
            &EventKind::Subagent {
                call_id: "c2".into(),
                child: "sa-2".into(),
                event: Box::new(EventKind::UserTurn {
                    request_id: "sa-2".into(),
                    text: "deeper".into(),
                    attachments: vec![],
                }),
            },
        );
        assert!(text_of(&up[0]).contains("call_t/sa-1/sa-2"));
    }
}
