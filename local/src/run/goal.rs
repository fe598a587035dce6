//! `reasonix run --goal`: which of the session's events move the run along, and how the run
//! ends when the goal does.

use reasonix_forward::proto::{EventKind, GoalEvent, GoalStatus};

use super::RunOutcome;
use crate::exit::Exit;

/// What an event after the goal request means to the run.
pub(super) enum Follow {
    /// A turn of the goal began: its events are shown.
    Turn,
    /// A turn of the goal ended: its summary is shown, and the run goes on.
    TurnEnd,
    /// A goal event outside a turn (the start, a resume): shown.
    Show,
    /// The goal ended or paused: the run ends.
    End(GoalStatus, Option<String>),
    /// Anything else.
    Other,
}

pub(super) fn follow(kind: &EventKind) -> Follow {
    match kind {
        EventKind::UserTurn { .. } => Follow::Turn,
        EventKind::TurnFinished { .. } => Follow::TurnEnd,
        EventKind::Goal(GoalEvent::Status { status, detail }) if *status != GoalStatus::Running => {
            Follow::End(*status, detail.clone())
        }
        EventKind::Goal(GoalEvent::Started { .. } | GoalEvent::Status { .. }) => Follow::Show,
        _ => Follow::Other,
    }
}

/// The run's end for a goal that ended (or paused) with `status`: 0 only when complete.
pub(super) fn outcome(
    status: GoalStatus,
    detail: Option<String>,
    denied_headless: &[String],
) -> RunOutcome {
    let why = |what: &str| {
        Some(format!(
            "{what}{}",
            detail
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        ))
    };
    match status {
        GoalStatus::Complete => RunOutcome {
            exit: Exit::Completed,
            reason: None,
        },
        GoalStatus::Paused | GoalStatus::BudgetPaused => RunOutcome {
            exit: Exit::Paused,
            reason: why(&format!(
                "the goal is {} (reasonix run --continue --goal resume continues it)",
                status.as_str()
            )),
        },
        GoalStatus::Blocked if !denied_headless.is_empty() => RunOutcome {
            exit: Exit::NeedsApproval,
            reason: Some(format!(
                "the goal is blocked; {} needed approval and was denied because the run is headless; rerun with --auto (or --yolo), or allow it in the config",
                denied_headless.join(", ")
            )),
        },
        GoalStatus::Blocked | GoalStatus::Stopped | GoalStatus::Running => RunOutcome {
            exit: Exit::Failed,
            reason: why(&format!("the goal is {}", status.as_str())),
        },
    }
}
