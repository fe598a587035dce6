//! The session's history as the `history` tool searches it: the journal's originals and the
//! compaction archive.

use super::*;
use crate::compaction::{self, archive};

impl Session {
    /// The main conversation's compaction archive (its [`crate::runner::Conversation`]
    /// archives there: named after the session).
    fn archive_path(&self) -> std::path::PathBuf {
        archive::archive_path(
            self.journal_path
                .parent()
                .unwrap_or(std::path::Path::new(".")),
            &self.id,
        )
    }
}

/// The session's history as the `history` tool searches it: every journaled user turn,
/// assistant message and tool result (the originals, before any compaction), then every
/// archived message. Holds the session weakly (the session owns the tool context).
pub(super) struct SessionHistory {
    session: std::sync::Weak<Session>,
}

impl SessionHistory {
    pub(super) fn of(session: &Arc<Session>) -> SessionHistory {
        SessionHistory {
            session: Arc::downgrade(session),
        }
    }
}

impl compaction::history::HistorySource for SessionHistory {
    fn documents(&self) -> Vec<compaction::history::HistoryDoc> {
        use compaction::history::HistoryDoc;
        let Some(session) = self.session.upgrade() else {
            return Vec::new();
        };
        let mut docs = Vec::new();
        {
            let inner = session.lock();
            for e in &inner.events {
                let (role, text) = match &e.kind {
                    EventKind::UserTurn { text, .. } => ("user".to_string(), text.clone()),
                    EventKind::AssistantMessage {
                        content,
                        tool_calls,
                        ..
                    } => {
                        let mut t = content.clone();
                        for c in tool_calls {
                            t.push_str(&format!("\n[call {} {}]", c.name, c.arguments));
                        }
                        ("assistant".to_string(), t)
                    }
                    EventKind::ToolFinished { name, output, .. } => {
                        (format!("tool {name}"), output.clone())
                    }
                    EventKind::Plan(reasonix_forward::proto::PlanEvent::Proposed {
                        plan, ..
                    }) => ("plan".to_string(), plan.clone()),
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
                    | EventKind::Checkpoint { .. }
                    | EventKind::Compacted { .. }
                    | EventKind::Plan(_)
                    | EventKind::Goal(_)
                    | EventKind::SteerInjected { .. }
                    | EventKind::Subagent { .. }
                    | EventKind::Planner { .. } => continue,
                    EventKind::Steer { text, .. } => ("user (steer)".to_string(), text.clone()),
                    EventKind::ShellRan {
                        command, output, ..
                    } => (format!("shell !{command}"), output.clone()),
                };
                docs.push(HistoryDoc {
                    id: format!("e{}", e.seq),
                    turn: e.turn,
                    role,
                    text,
                });
            }
        }
        // The archive keeps what a rewind cut from the journal, too.
        if let Ok(records) = archive::read_all(&session.archive_path()) {
            for r in records {
                let text = r
                    .message
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                docs.push(HistoryDoc {
                    id: r.id,
                    turn: r.turn,
                    role: format!("archived {}", r.kind),
                    text,
                });
            }
        }
        docs
    }
}
