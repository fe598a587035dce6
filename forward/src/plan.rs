//! Plan mode on the wire (issue 38 §1): the user's requests ([`PlanAction`]) and what the
//! session journals ([`PlanEvent`]). The host's logic is in `remote-agent/src/plan/`.

use serde::{Deserialize, Serialize};

crate::proto_serde::tagged_enum! {
    PlanActionDe, "action";
    /// What the user does with plan mode ([`crate::proto::Request::Plan`]). Only a driving
    /// client may send it (a spectator is refused); the model never can.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
    #[serde(tag = "action", rename_all = "snake_case")]
    pub enum PlanAction {
        /// Turn plan mode on; with `task`, also submit it as a user turn (under the request's id).
        Enter {
            /// The task to plan (`/plan TASK`, `run --plan TASK`).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            task: Option<String>,
        },
        /// Turn plan mode off without approving anything (Shift+Tab past `plan`); a pending
        /// plan is dropped as cancelled.
        Leave,
        /// Answer the pending plan's approval card.
        Decide {
            /// The plan answered ([`PlanEvent::Proposed::plan_id`]); `None`: the pending one.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            plan_id: Option<String>,
            /// Execute, revise or cancel.
            decision: PlanDecision,
            /// With `revise`: what to change (sent to the model as the user's message).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            comment: Option<String>,
        },
    }
}

/// The user's answer to a proposed plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanDecision {
    /// Approve: leave plan mode, the steps become the todo list, and a turn executes it in
    /// the permission mode chosen before planning.
    Execute,
    /// Stay in plan mode; the comment goes to the model, which proposes a new plan.
    Revise,
    /// Leave plan mode; the plan is dropped and nothing runs.
    Cancel,
}

impl PlanDecision {
    /// `execute`, `revise`, `cancel`.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanDecision::Execute => "execute",
            PlanDecision::Revise => "revise",
            PlanDecision::Cancel => "cancel",
        }
    }
}

crate::proto_serde::tagged_enum! {
    PlanEventDe, "event";
    /// A plan-mode event of the session journal ([`crate::proto::EventKind::Plan`]).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
    #[serde(tag = "event", rename_all = "snake_case")]
    pub enum PlanEvent {
        /// The user turned plan mode on or off.
        Mode {
            /// Plan mode is on from here.
            on: bool,
        },
        /// The model proposed a plan with `exit_plan_mode`; it waits for the user's answer.
        Proposed {
            /// The plan's id (the `exit_plan_mode` call id).
            plan_id: String,
            /// The plan, Markdown (goal, ordered steps, files to touch, verification).
            plan: String,
            /// The ordered steps read from it (they become the todo list on approval).
            steps: Vec<String>,
        },
        /// The user answered the plan's card.
        Decided {
            /// The plan answered.
            plan_id: String,
            /// What the user chose.
            decision: PlanDecision,
            /// With `revise`: the user's comment.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            comment: Option<String>,
        },
        /// How the turn was routed (issue 38 §2, with a planner model): journaled right after
        /// its user turn. Codes only, never the user's text.
        Routed {
            /// `direct`, `plan`, `approval` or `plan_only`.
            route: String,
            /// `none`, `light` or `full`.
            depth: String,
            /// Why, as a short code (`question`, `small_edit`, `explicit_plan`, ...).
            reason: String,
        },
        /// The planner's handoff, appended to the executor's conversation as a user message
        /// (a replay of the journal appends it at the same place).
        Handoff {
            /// The planner model.
            model: String,
            /// The structured message (goal, steps, verified and candidate touch points,
            /// verification).
            text: String,
        },
        /// The planner did not converge within its research budget; `handed_over`: the original
        /// task went to the executor (an ordinary turn); otherwise nothing executed (plan only,
        /// approval).
        PlannerFailed {
            /// Why, in words (no user text).
            reason: String,
            /// The executor took the task.
            handed_over: bool,
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may unwrap
    use crate::proto::{Event, EventKind, Request};

    use super::*;

    /// The wire shapes `docs/PROTOCOL.md` documents, both ways.
    #[test]
    fn wire_shapes_round_trip() {
        let r = Request::Plan {
            request_id: "r1".into(),
            action: PlanAction::Decide {
                plan_id: Some("p".into()),
                decision: PlanDecision::Execute,
                comment: None,
            },
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"m": "plan", "request_id": "r1", "action": "decide", "plan_id": "p", "decision": "execute"})
        );
        assert_eq!(serde_json::from_value::<Request>(v).unwrap(), r);
        let enter: Request =
            serde_json::from_str(r#"{"m":"plan","request_id":"r2","action":"enter"}"#).unwrap();
        assert_eq!(
            enter,
            Request::Plan {
                request_id: "r2".into(),
                action: PlanAction::Enter { task: None }
            }
        );
        let ev = Event {
            seq: 3,
            ts: "t".into(),
            turn: 1,
            kind: EventKind::Plan(PlanEvent::Proposed {
                plan_id: "p".into(),
                plan: "## Steps\n1. a".into(),
                steps: vec!["a".into()],
            }),
        };
        let v = serde_json::to_value(&ev).unwrap();
        assert_eq!(v["type"], "plan");
        assert_eq!(v["event"], "proposed");
        assert_eq!(v["steps"], serde_json::json!(["a"]));
        assert_eq!(serde_json::from_value::<Event>(v).unwrap(), ev);
    }
}
