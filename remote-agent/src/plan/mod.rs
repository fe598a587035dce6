//! Plan mode (issue 38 §1): the user asks for a plan before anything changes. While it is
//! on, nothing writes ([`gate`]: writers refused, bash only in a read-only sandbox); the
//! model ends planning with `exit_plan_mode{plan}` ([`crate::tools::exit_plan`]), and only the
//! user's answer on the card (execute / revise / cancel) leaves it.
//!
//! This module is the pure core: the state read from journal events ([`PlanState`]), the
//! tool gate, the steps read from a plan ([`steps`]), and the texts the model sees. The
//! session glue (`session/plan.rs`) journals and applies it, so a replay of the journal
//! (daemon restart, takeover, rewind) rebuilds the same state and the same messages.

pub mod coordinator;
pub mod gate;
pub mod route;
pub mod steps;

use reasonix_forward::proto::{Event, EventKind, PlanDecision, PlanEvent};

/// Where `exit_plan_mode` hands its plan: the session (journaled as
/// [`PlanEvent::Proposed`]).
pub trait PlanSink: Send + Sync {
    /// Plan mode is on.
    fn active(&self) -> bool;
    /// Save `plan` (with its `steps`) as the plan waiting for the user; `Err`: why not.
    fn propose(&self, plan: String, steps: Vec<String>) -> Result<(), String>;
}

/// No session: never in plan mode.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoPlan;

impl PlanSink for NoPlan {
    fn active(&self) -> bool {
        false
    }
    fn propose(&self, _plan: String, _steps: Vec<String>) -> Result<(), String> {
        Err("not in plan mode".into())
    }
}

/// The name of the tool that ends planning.
pub const EXIT_TOOL: &str = "exit_plan_mode";

/// A plan the model proposed that the user has not answered yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposed {
    /// Its id (the `exit_plan_mode` call id).
    pub plan_id: String,
    /// The Markdown plan.
    pub plan: String,
    /// Its ordered steps.
    pub steps: Vec<String>,
}

/// Plan mode as the journal says it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanState {
    /// Plan mode is on: nothing writes.
    pub on: bool,
    /// The plan waiting for the user's answer.
    pub pending: Option<Proposed>,
}

impl PlanState {
    /// The state after `events` (a whole journal, in order).
    pub fn from_events(events: &[Event]) -> PlanState {
        let mut s = PlanState::default();
        for e in events {
            s.observe(&e.kind);
        }
        s
    }

    /// Apply one journaled event.
    pub fn observe(&mut self, kind: &EventKind) {
        let EventKind::Plan(ev) = kind else {
            return;
        };
        match ev {
            PlanEvent::Mode { on } => {
                self.on = *on;
                if !on {
                    self.pending = None;
                }
            }
            PlanEvent::Proposed {
                plan_id,
                plan,
                steps,
            } => {
                self.pending = Some(Proposed {
                    plan_id: plan_id.clone(),
                    plan: plan.clone(),
                    steps: steps.clone(),
                });
            }
            PlanEvent::Decided { decision, .. } => {
                self.pending = None;
                if matches!(decision, PlanDecision::Execute | PlanDecision::Cancel) {
                    self.on = false;
                }
            }
            PlanEvent::Routed { .. }
            | PlanEvent::Handoff { .. }
            | PlanEvent::PlannerFailed { .. } => {}
        }
    }
}

/// What the model reads before a user's message while plan mode is on (in the user turn,
/// never in the system prompt, so the cached prefix stays as it is).
pub const TURN_NOTE: &str = "[plan mode] The user wants a plan before any change. Research with the read-only tools \
(bash runs in a read-only sandbox: nothing you run can write). Do not try to change files. When you know \
enough, call exit_plan_mode with the plan in Markdown: ## Goal, ## Steps (an ordered, numbered list), \
## Files to touch, ## Verification. Then end your turn: the user approves, revises or cancels it.";

/// The user message of a turn: `text`, after [`TURN_NOTE`] while plan mode is on.
pub fn turn_text(text: &str, plan_on: bool) -> String {
    if plan_on {
        format!("{TURN_NOTE}\n\n{text}")
    } else {
        text.to_string()
    }
}

/// The text of the turn that executes an approved plan.
pub fn execute_text(plan: &Proposed) -> String {
    let mut out = String::from(
        "The user approved the plan below. Plan mode is off: execute it now, step by step, \
         keeping the todo list (todo_write) current — mark each step in_progress when you start it \
         and completed when it is done — and run the verification at the end.\n\n",
    );
    out.push_str(&plan.plan);
    out
}

/// The text of the turn that revises a plan with the user's `comment`.
pub fn revise_text(comment: &str) -> String {
    format!("Revise the plan: {comment}")
}

/// The todo list an approved plan starts with: its steps, the first in progress.
pub fn todos_of(steps: &[String]) -> Vec<serde_json::Value> {
    steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            serde_json::json!({
                "content": s,
                "status": if i == 0 { "in_progress" } else { "pending" },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: PlanEvent) -> Event {
        Event {
            seq: 1,
            turn: 1,
            ts: String::new(),
            kind: EventKind::Plan(kind),
        }
    }

    #[test]
    fn state_follows_the_journal() {
        let proposed = PlanEvent::Proposed {
            plan_id: "c1".into(),
            plan: "## Steps\n1. a".into(),
            steps: vec!["a".into()],
        };
        let s = PlanState::from_events(&[ev(PlanEvent::Mode { on: true }), ev(proposed.clone())]);
        assert!(s.on);
        assert_eq!(s.pending.as_ref().map(|p| p.plan_id.as_str()), Some("c1"));
        let revise = PlanEvent::Decided {
            plan_id: "c1".into(),
            decision: PlanDecision::Revise,
            comment: Some("more".into()),
        };
        let s = PlanState::from_events(&[
            ev(PlanEvent::Mode { on: true }),
            ev(proposed.clone()),
            ev(revise),
        ]);
        assert!(s.on && s.pending.is_none(), "revise stays in plan mode");
        let exec = PlanEvent::Decided {
            plan_id: "c1".into(),
            decision: PlanDecision::Execute,
            comment: None,
        };
        let s = PlanState::from_events(&[
            ev(PlanEvent::Mode { on: true }),
            ev(proposed.clone()),
            ev(exec),
        ]);
        assert!(!s.on && s.pending.is_none());
        let s = PlanState::from_events(&[
            ev(PlanEvent::Mode { on: true }),
            ev(proposed),
            ev(PlanEvent::Mode { on: false }),
        ]);
        assert_eq!(s, PlanState::default());
    }

    #[test]
    fn the_note_rides_the_user_turn_only_in_plan_mode() {
        assert_eq!(turn_text("fix it", false), "fix it");
        let t = turn_text("fix it", true);
        assert!(t.starts_with("[plan mode]") && t.ends_with("\n\nfix it"));
    }

    #[test]
    fn todos_start_with_the_first_step_in_progress() {
        let t = todos_of(&["a".into(), "b".into()]);
        assert_eq!(t[0]["status"], "in_progress");
        assert_eq!(t[1]["status"], "pending");
        assert_eq!(t[1]["content"], "b");
    }
}
