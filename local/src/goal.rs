//! Goals on the laptop side (issue 38 §3): the goal as a session's events say
//! ([`GoalView`]), its lines for people, and the `/goal` argument grammar shared by the
//! workbench, `reasonix run --goal` and the ACP prompt command.

use reasonix_forward::proto::{
    EventKind, GoalAction, GoalBudgets, GoalEvent, GoalReport, GoalStatus, GoalSummary,
};

/// What `/goal ARG` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoalCommand {
    /// `/goal` or `/goal status`: show the goal.
    Status,
    /// Anything else: a request (a start carries default budgets; the sender fills them in).
    Act(GoalAction),
}

/// Parse the argument of `/goal` (`pause`, `resume`, `clear`/`stop`, `status`, or an objective).
pub fn parse(arg: &str) -> GoalCommand {
    match arg.trim() {
        "" | "status" => GoalCommand::Status,
        "pause" => GoalCommand::Act(GoalAction::Pause),
        "resume" => GoalCommand::Act(GoalAction::Resume),
        "clear" | "stop" => GoalCommand::Act(GoalAction::Clear),
        objective => GoalCommand::Act(GoalAction::Start {
            objective: objective.to_string(),
            budgets: GoalBudgets::default(),
        }),
    }
}

/// The session's goal as its events say.
#[derive(Debug, Clone, Default)]
pub struct GoalView {
    /// What it is to achieve (empty: no goal yet).
    pub objective: String,
    /// Where it stands.
    pub status: Option<GoalStatus>,
    /// The last report or why it paused/ended.
    pub progress: Option<String>,
}

impl GoalView {
    /// Keep the view current with one event.
    pub fn observe(&mut self, kind: &EventKind) {
        let EventKind::Goal(g) = kind else { return };
        match g {
            GoalEvent::Started { objective, .. } => {
                *self = GoalView {
                    objective: objective.clone(),
                    status: Some(GoalStatus::Running),
                    progress: None,
                }
            }
            GoalEvent::Reported { evidence, .. } => self.progress = Some(evidence.clone()),
            GoalEvent::Status { status, detail } => {
                self.status = Some(*status);
                if detail.is_some() {
                    self.progress = detail.clone();
                }
            }
        }
    }

    /// The status bar's segment: `goal running`, `goal paused`, … (`None`: no goal).
    pub fn bar(&self) -> Option<String> {
        self.status.map(|s| format!("goal {}", s.as_str()))
    }

    /// One line for `/goal status`.
    pub fn line(&self) -> String {
        match self.status {
            None => "no goal in this session: /goal <objective> starts one".into(),
            Some(s) => format!(
                "goal {}: {}{}",
                s.as_str(),
                self.objective,
                self.progress
                    .as_deref()
                    .map(|p| format!(" — {p}"))
                    .unwrap_or_default()
            ),
        }
    }
}

/// The transcript line of a goal event.
pub fn event_line(g: &GoalEvent) -> String {
    match g {
        GoalEvent::Started { objective, .. } => format!("goal started: {objective}"),
        GoalEvent::Reported { status, evidence } => {
            let status = match status {
                GoalReport::Continue => "continue",
                GoalReport::Complete => "complete",
                GoalReport::Blocked => "blocked",
            };
            format!("goal report ({status}): {evidence}")
        }
        GoalEvent::Status { status, detail } => match detail {
            Some(d) => format!("goal {}: {d}", status.as_str()),
            None => format!("goal {}", status.as_str()),
        },
    }
}

/// One line for a session listing: `complete 3 turns 12k tok: objective — progress`.
pub fn summary_line(g: &GoalSummary) -> String {
    format!(
        "goal {} ({} turns, {} tokens): {}{}",
        g.status.as_str(),
        g.turns,
        g.tokens,
        g.objective,
        g.progress
            .as_deref()
            .map(|p| format!(" — {}", p.lines().next().unwrap_or_default()))
            .unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_argument_grammar() {
        assert_eq!(parse(" "), GoalCommand::Status);
        assert_eq!(parse("status"), GoalCommand::Status);
        assert_eq!(parse("pause"), GoalCommand::Act(GoalAction::Pause));
        assert_eq!(parse("stop"), GoalCommand::Act(GoalAction::Clear));
        assert!(matches!(
            parse("  make the tests pass "),
            GoalCommand::Act(GoalAction::Start { objective, .. }) if objective == "make the tests pass"
        ));
    }
}
