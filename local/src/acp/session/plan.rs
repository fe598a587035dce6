//! Plan mode over ACP (issue 38 §1): the session modes `default` and `plan`
//! (`session/set_mode`), `current_mode_update` when the host's plan mode changes, and the
//! approval of a proposed plan as a `session/request_permission` (execute / revise /
//! cancel). The prompt that planned stays open while the user decides; "execute" ties it to
//! the turn that runs the plan, so its answer comes when the plan has run.

use super::*;
use reasonix_forward::proto::{PlanAction, PlanDecision, PlanEvent};

/// The mode ids.
pub(crate) const DEFAULT_MODE: &str = "default";
/// Plan mode's id.
pub(crate) const PLAN_MODE: &str = "plan";

const EXECUTE: &str = "plan_execute";
const REVISE: &str = "plan_revise";
const CANCEL: &str = "plan_cancel";

/// The modes a session offers, `plan` current or not.
pub(crate) fn modes(plan: bool) -> acp::SessionModeState {
    acp::SessionModeState::new(
        if plan { PLAN_MODE } else { DEFAULT_MODE },
        vec![
            acp::SessionMode::new(DEFAULT_MODE, "Default")
                .description("the permission mode of your reasonix config".to_string()),
            acp::SessionMode::new(PLAN_MODE, "Plan").description(
                "research read-only and propose a plan; nothing changes until you approve it"
                    .to_string(),
            ),
        ],
    )
}

/// What the actor remembers of plan mode.
#[derive(Default)]
pub(super) struct PlanAcp {
    /// A plan's permission request is out.
    asking: bool,
    /// The planning prompt's turn ended while the user decides: its outcome, answered once
    /// they did (unless they execute: then the executing turn answers it).
    deferred: Option<(TurnOutcome, Option<String>)>,
    /// A plan proposed while catching up, asked once caught up.
    unanswered: Option<(String, String)>,
}

impl Actor {
    /// A plan event of the journal.
    pub(super) fn plan_event(&mut self, ev: &PlanEvent) {
        match ev {
            PlanEvent::Mode { on } => self.mode_update(*on),
            PlanEvent::Decided { decision, .. } => {
                self.plan.unanswered = None;
                if *decision != PlanDecision::Revise {
                    self.mode_update(false);
                }
            }
            PlanEvent::Proposed { plan_id, plan, .. } => {
                if self.catch_up_to.is_some() || self.opened_reply.is_some() {
                    self.plan.unanswered = Some((plan_id.clone(), plan.clone()));
                } else {
                    self.ask_plan(plan_id.clone(), plan.clone());
                }
            }
            // Routing and the planner's handoff are shown by the translator (or not at all).
            PlanEvent::Routed { .. }
            | PlanEvent::Handoff { .. }
            | PlanEvent::PlannerFailed { .. } => {}
        }
    }

    fn mode_update(&self, on: bool) {
        self.plan_on.store(on, std::sync::atomic::Ordering::Relaxed);
        self.update(acp::SessionUpdate::CurrentModeUpdate(
            acp::CurrentModeUpdate::new(if on { PLAN_MODE } else { DEFAULT_MODE }),
        ));
    }

    /// Once caught up: the plan that still waits.
    pub(super) fn plan_caught_up(&mut self) {
        if let Some((id, plan)) = self.plan.unanswered.take() {
            self.ask_plan(id, plan);
        }
    }

    /// True when the prompt's turn end must wait for the plan's answer (and it was kept).
    pub(super) fn plan_defers(&mut self, outcome: TurnOutcome, detail: Option<&str>) -> bool {
        if !self.plan.asking {
            return false;
        }
        self.plan.deferred = Some((outcome, detail.map(str::to_string)));
        true
    }

    fn ask_plan(&mut self, plan_id: String, plan: String) {
        let Some(session) = self.session.clone() else {
            return;
        };
        self.plan.asking = true;
        let args = serde_json::json!({ "plan": plan }).to_string();
        let request = acp::RequestPermissionRequest::new(
            session,
            self.translator
                .permission_call(&plan_id, reasonix_forward_exit_tool(), &args),
            vec![
                acp::PermissionOption::new(
                    EXECUTE,
                    "Execute the plan",
                    acp::PermissionOptionKind::AllowOnce,
                ),
                acp::PermissionOption::new(
                    REVISE,
                    "Revise it (send what to change as the next prompt)",
                    acp::PermissionOptionKind::RejectOnce,
                ),
                acp::PermissionOption::new(
                    CANCEL,
                    "Cancel the plan (leave plan mode)",
                    acp::PermissionOptionKind::RejectAlways,
                ),
            ],
        );
        let peer = self.peer.clone();
        let done = self.done.clone();
        tokio::spawn(async move {
            let answer = peer.request("session/request_permission", &request).await;
            let choice = match answer.and_then(|v| {
                serde_json::from_value::<acp::RequestPermissionResponse>(v)
                    .map_err(|e| acp::Error::invalid_params().data(e.to_string()))
            }) {
                Ok(acp::RequestPermissionResponse {
                    outcome: acp::RequestPermissionOutcome::Selected(s),
                    ..
                }) => match s.option_id.0.as_ref() {
                    EXECUTE => Some(PlanDecision::Execute),
                    CANCEL => Some(PlanDecision::Cancel),
                    _ => None,
                },
                // Dismissed, or an editor that cannot answer: nothing runs; the plan waits
                // and the next prompt revises it.
                _ => None,
            };
            let _ = done.send(Done::PlanAnswered(plan_id, choice));
        });
    }

    /// The user's answer to the plan's permission request (`None`: revise / dismissed).
    pub(super) fn plan_answered(&mut self, plan_id: String, choice: Option<PlanDecision>) {
        self.plan.asking = false;
        let send = |client: Client, rid: String, decision: PlanDecision| {
            tokio::spawn(async move {
                let action = PlanAction::Decide {
                    plan_id: Some(plan_id),
                    decision,
                    comment: None,
                };
                if let Err(e) = client.plan_request(&rid, action).await {
                    tracing::info!("plan answer not applied: {e}");
                }
            });
        };
        match choice {
            Some(PlanDecision::Execute) => {
                let rid = format!("acp-plan-{:016x}", rand::random::<u64>());
                // The planning prompt now waits for the turn that executes the plan.
                if let Some(p) = self.prompt.as_mut() {
                    p.request_id = rid.clone();
                    p.turn = None;
                }
                self.plan.deferred = None;
                send(self.client.clone(), rid, PlanDecision::Execute);
            }
            other => {
                if other == Some(PlanDecision::Cancel) {
                    let rid = format!("acp-plan-{:016x}", rand::random::<u64>());
                    send(self.client.clone(), rid, PlanDecision::Cancel);
                }
                if let Some((outcome, detail)) = self.plan.deferred.take() {
                    if let Some(p) = self.prompt.take() {
                        self.peer
                            .respond_with(p.id, stop_reason(outcome, detail.as_deref()));
                    }
                }
            }
        }
    }

    /// `session/set_mode`: `plan` turns plan mode on, `default` off.
    pub(super) fn set_mode(&mut self, id: Value, mode: String) {
        let action = match mode.as_str() {
            PLAN_MODE => PlanAction::Enter { task: None },
            DEFAULT_MODE => PlanAction::Leave,
            other => {
                self.peer.respond(
                    id,
                    Err(acp::Error::invalid_params().data(format!(
                        "unknown mode `{other}`: this agent offers `default` and `plan`"
                    ))),
                );
                return;
            }
        };
        let client = self.client.clone();
        let peer = self.peer.clone();
        tokio::spawn(async move {
            let rid = format!("acp-mode-{:016x}", rand::random::<u64>());
            match client.plan_request(&rid, action).await {
                Ok(_) => peer.respond_with(id, Ok(acp::SetSessionModeResponse::new())),
                Err(e) => peer.respond(id, Err(acp::Error::internal_error().data(e.to_string()))),
            }
        });
    }
}

fn reasonix_forward_exit_tool() -> &'static str {
    "exit_plan_mode"
}
