//! The model-request retry shown in the status line (#15): "retrying the model request in
//! N s (attempt k/M, reason)" from the moment a retry is announced until the model answers,
//! the turn ends, or the next retry replaces it.

use super::*;
use reasonix_forward::proto::ProviderRetry;

/// A retry announced by the host, and when (on the UI clock) its wait ends.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RetryView {
    /// The retry as announced.
    pub(crate) retry: ProviderRetry,
    /// `mono_ms` at which the next attempt starts.
    pub(crate) until_ms: i64,
}

impl App {
    /// Track retries from a session event: a retry starts the countdown; anything the model
    /// produced, and the end of the turn, clear it.
    pub(super) fn track_retry(&mut self, kind: &EventKind) {
        match kind {
            EventKind::ProviderRetry(r) => {
                self.retry = Some(RetryView {
                    retry: r.clone(),
                    until_ms: self.mono_ms + r.delay_ms as i64,
                });
            }
            EventKind::TextDelta { .. }
            | EventKind::ReasoningDelta { .. }
            | EventKind::AssistantMessage { .. }
            | EventKind::Usage { .. }
            | EventKind::TurnFinished { .. }
            | EventKind::UserTurn { .. } => self.retry = None,
            EventKind::SessionStarted { .. }
            | EventKind::ToolStarted { .. }
            | EventKind::ToolFinished { .. }
            | EventKind::ApprovalRequested { .. }
            | EventKind::ApprovalAnswered { .. }
            | EventKind::ElicitationRequested { .. }
            | EventKind::ElicitationAnswered { .. }
            | EventKind::Notice { .. }
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

    /// The status-line text of the retry in progress, if a turn is waiting on one.
    pub(crate) fn retry_status(&self) -> Option<String> {
        let v = self.retry.as_ref().filter(|_| self.turn_busy())?;
        let left_ms = (v.until_ms - self.mono_ms).max(0);
        Some(v.retry.describe((left_ms as u64).div_ceil(1000)))
    }
}
