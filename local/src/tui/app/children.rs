//! The workbench's view of subagents (#33 §2): each child of the open session, built from
//! the [`EventKind::Subagent`] events the client already receives — its task, model steps,
//! tokens, the tool it runs now and when it started — for the panel beside the
//! conversation and the transcript overlay (`Ctrl-G`), where `x` cancels it.

use std::collections::BTreeMap;

use crossterm::event::{KeyCode, KeyEvent};
use reasonix_forward::proto::EventKind;

use super::{rid, Action, App, Overlay};

/// One child as the events tell it.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChildView {
    /// `sa-N`.
    pub(crate) id: String,
    /// The parent's call that started it.
    pub(crate) call_id: String,
    /// Its task (its first user message).
    pub(crate) task: String,
    /// Model steps it finished.
    pub(crate) steps: u32,
    /// Prompt + completion tokens of its steps.
    pub(crate) tokens: u64,
    /// The tool it runs now.
    pub(crate) tool: Option<String>,
    /// Wall-clock ms of its start (its first event).
    pub(crate) started_ms: i64,
    /// How it ended (`None`: running).
    pub(crate) ended: Option<String>,
    /// What it did, in order: one entry per message and tool call.
    pub(crate) log: Vec<String>,
    /// Its streamed answer so far (the current step's text).
    pub(crate) streaming: String,
}

/// Every child of the open session, by id.
#[derive(Debug, Default)]
pub(crate) struct Children {
    by_id: BTreeMap<String, ChildView>,
}

impl Children {
    /// Take in one `Subagent` event of the session (`ts_ms`: its timestamp). Nested
    /// children's events count for the outer child (its steps are its own).
    pub(crate) fn observe(&mut self, call_id: &str, child: &str, event: &EventKind, ts_ms: i64) {
        let c = self
            .by_id
            .entry(child.to_string())
            .or_insert_with(|| ChildView {
                id: child.to_string(),
                call_id: call_id.to_string(),
                started_ms: ts_ms,
                ..ChildView::default()
            });
        match event {
            EventKind::UserTurn { text, .. } => {
                c.task = text.clone();
                c.started_ms = ts_ms;
                c.ended = None;
                c.log.push(format!("▶ task: {text}"));
            }
            EventKind::TextDelta { text } => c.streaming.push_str(text),
            EventKind::AssistantMessage {
                content,
                tool_calls,
                ..
            } => {
                c.streaming.clear();
                if !content.trim().is_empty() {
                    c.log.push(format!("◆ {content}"));
                }
                for t in tool_calls {
                    c.log.push(format!("→ {} {}", t.name, t.arguments));
                }
            }
            EventKind::Usage { usage, .. } => {
                c.steps += 1;
                c.tokens += usage.prompt_tokens + usage.completion_tokens;
            }
            EventKind::ToolStarted { name, .. } => c.tool = Some(name.clone()),
            EventKind::ToolFinished {
                name,
                output,
                is_error,
                ..
            } => {
                c.tool = None;
                let first = output.lines().next().unwrap_or_default();
                c.log.push(format!(
                    "← {name}{}: {first}",
                    if *is_error { " (error)" } else { "" }
                ));
            }
            EventKind::TurnFinished { outcome, detail } => {
                c.tool = None;
                c.streaming.clear();
                let how = match detail {
                    Some(d) => format!("{outcome}: {d}"),
                    None => outcome.to_string(),
                };
                c.log.push(format!("■ {how}"));
                c.ended = Some(how);
            }
            EventKind::Subagent { child, .. } => {
                c.log.push(format!("  (its subagent {child})"));
            }
            _ => {}
        }
    }

    /// The children still running, oldest first.
    pub(crate) fn running(&self) -> Vec<&ChildView> {
        let mut v: Vec<&ChildView> = self.by_id.values().filter(|c| c.ended.is_none()).collect();
        v.sort_by_key(|c| (c.started_ms, c.id.clone()));
        v
    }

    /// Child `id`.
    pub(crate) fn get(&self, id: &str) -> Option<&ChildView> {
        self.by_id.get(id)
    }

    /// Every child, oldest first.
    pub(crate) fn all(&self) -> Vec<&ChildView> {
        let mut v: Vec<&ChildView> = self.by_id.values().collect();
        v.sort_by_key(|c| (c.started_ms, c.id.clone()));
        v
    }

    /// Forget every child (another session opened).
    pub(crate) fn clear(&mut self) {
        self.by_id.clear();
    }
}

impl App {
    /// `Ctrl-G`: open the transcript of the first running child (else the newest child).
    pub(super) fn open_child_view(&mut self) -> Vec<Action> {
        let id = self
            .children
            .running()
            .first()
            .map(|c| c.id.clone())
            .or_else(|| self.children.all().last().map(|c| c.id.clone()));
        match id {
            Some(id) => self.overlay = Some(Overlay::Child { id, scroll: 0 }),
            None => self.set_hint("no subagents in this session"),
        }
        Vec::new()
    }

    /// A key in the child overlay: Tab / → the next child, ← the previous, ↑/↓ scroll,
    /// `x` cancels the child shown (while it runs).
    pub(super) fn child_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let max_scroll = self.overlay_max_scroll.get();
        let Some(Overlay::Child { id, scroll }) = self.overlay.as_mut() else {
            return Vec::new();
        };
        let ids: Vec<String> = self.children.all().iter().map(|c| c.id.clone()).collect();
        let at = ids.iter().position(|i| i == id).unwrap_or(0);
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => {
                *scroll = (*scroll).min(max_scroll).saturating_sub(1)
            }
            KeyCode::Down | KeyCode::Char('j') => *scroll = (*scroll + 1).min(max_scroll),
            KeyCode::Tab | KeyCode::Right if !ids.is_empty() => {
                *id = ids[(at + 1) % ids.len()].clone();
                *scroll = 0;
            }
            KeyCode::BackTab | KeyCode::Left if !ids.is_empty() => {
                *id = ids[(at + ids.len() - 1) % ids.len()].clone();
                *scroll = 0;
            }
            KeyCode::Char('x') => {
                let child = id.clone();
                let running = self.children.get(&child).is_some_and(|c| c.ended.is_none());
                if !running {
                    self.set_hint(format!("subagent {child} already ended"));
                    return Vec::new();
                }
                self.set_hint(format!("cancelling subagent {child}…"));
                return vec![Action::CancelSubagent {
                    request_id: rid("cancel-child"),
                    child,
                }];
            }
            _ => {}
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use reasonix_forward::proto::{ToolCall, TurnOutcome, Usage};

    #[test]
    fn a_child_is_followed_from_its_events() {
        let mut cs = Children::default();
        let ev = |k: EventKind| k;
        cs.observe(
            "call_t",
            "sa-1",
            &ev(EventKind::UserTurn {
                request_id: "sa-1".into(),
                text: "map the parser".into(),
                attachments: vec![],
            }),
            1000,
        );
        cs.observe(
            "call_t",
            "sa-1",
            &EventKind::AssistantMessage {
                content: String::new(),
                reasoning: None,
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "bash".into(),
                    arguments: "{\"command\":\"sleep 9\"}".into(),
                }],
                provider_replay: None,
            },
            1100,
        );
        cs.observe(
            "call_t",
            "sa-1",
            &EventKind::Usage {
                usage: Usage {
                    prompt_tokens: 1200,
                    completion_tokens: 34,
                    ..Usage::default()
                },
                model: "m".into(),
                system_hash: String::new(),
                tools_hash: String::new(),
                cache_note: None,
            },
            1100,
        );
        cs.observe(
            "call_t",
            "sa-1",
            &EventKind::ToolStarted {
                call_id: "c1".into(),
                name: "bash".into(),
                arguments: "{}".into(),
            },
            1200,
        );
        let r = cs.running();
        assert_eq!(r.len(), 1);
        let c = r[0];
        assert_eq!((c.steps, c.tokens), (1, 1234));
        assert_eq!(c.tool.as_deref(), Some("bash"));
        assert_eq!(c.task, "map the parser");
        assert!(c.log.iter().any(|l| l.contains("→ bash")), "{:?}", c.log);
        cs.observe(
            "call_t",
            "sa-1",
            &EventKind::TurnFinished {
                outcome: TurnOutcome::Cancelled,
                detail: None,
            },
            1300,
        );
        assert!(cs.running().is_empty());
        assert_eq!(cs.get("sa-1").unwrap().ended.as_deref(), Some("cancelled"));
    }
}
