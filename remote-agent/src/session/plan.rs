//! Plan mode in the session: the user's requests (enter, leave, answer the card), the gate
//! on every tool call, the read-only sandbox, and `exit_plan_mode`'s proposals. The state
//! is [`crate::plan::PlanState`], kept current by every journaled event, so a daemon restart,
//! a takeover or a rewind finds it where the journal left it.

use super::*;
use crate::plan::{self as core, Proposed};
use reasonix_forward::proto::{PlanAction, PlanDecision, PlanEvent};

/// `exit_plan_mode`'s way into the session.
pub(super) struct SessionPlan(pub(super) std::sync::Weak<Session>);

impl core::PlanSink for SessionPlan {
    fn active(&self) -> bool {
        self.0.upgrade().is_some_and(|s| s.lock().plan.on)
    }

    fn propose(&self, plan: String, steps: Vec<String>) -> Result<(), String> {
        let s = self.0.upgrade().ok_or("the session is gone")?;
        let mut inner = s.lock();
        if !inner.plan.on {
            return Err("plan mode was turned off meanwhile; carry on with the task".into());
        }
        let plan_id = format!("plan-{}-{}", inner.turn, inner.journal.last_seq() + 1);
        s.emit(
            &mut inner,
            EventKind::Plan(PlanEvent::Proposed {
                plan_id,
                plan,
                steps,
            }),
        );
        Ok(())
    }
}

impl Session {
    /// True while plan mode is on (nothing writes).
    pub fn plan_mode(&self) -> bool {
        self.lock().plan.on
    }

    /// The plan waiting for the user's answer.
    pub fn pending_plan(&self) -> Option<Proposed> {
        self.lock().plan.pending.clone()
    }

    /// Plan mode's verdict on a tool call before the policy's ([`core::gate`]).
    pub(super) fn plan_gate(&self, tool: &str, args: &Value, read_only: bool) -> Option<Decision> {
        if !self.lock().plan.on {
            return None;
        }
        let sandboxed = self.tool_ctx.lock_or_recover().sandbox.is_active();
        core::gate::decide(tool, args, read_only, sandboxed)
    }

    /// The tool context, with bash's sandbox read-only while plan mode is on (or a read-only
    /// skill runs).
    pub(super) fn plan_tool_ctx(&self) -> ToolContext {
        let mut ctx = self.tool_ctx();
        let read_only = {
            let inner = self.lock();
            inner.plan.on || inner.skill.as_ref().is_some_and(|s| s.read_only)
        };
        if read_only {
            ctx.sandbox = Arc::new(ctx.sandbox.read_only());
        }
        ctx
    }

    /// A plan-mode request of the driving client. `Ok(false)`: a repeat of `request_id`.
    pub async fn plan_request(
        self: &Arc<Self>,
        request_id: &str,
        action: PlanAction,
    ) -> Result<bool, SessionError> {
        let barrier = {
            let mut inner = self.lock();
            // Its own key: an `execute` or a task submits a turn under `request_id` itself.
            if !inner.seen_requests.insert(format!("plan:{request_id}")) {
                return Ok(false);
            }
            match &action {
                PlanAction::Enter { task } => {
                    if task.is_some() && !matches!(inner.state, TurnState::Idle | TurnState::Paused)
                    {
                        inner.seen_requests.remove(&format!("plan:{request_id}"));
                        return Err(SessionError::Busy);
                    }
                    if !inner.plan.on {
                        self.emit(&mut inner, EventKind::Plan(PlanEvent::Mode { on: true }));
                    }
                }
                PlanAction::Leave => {
                    if let Some(p) = inner.plan.pending.clone() {
                        self.emit(
                            &mut inner,
                            EventKind::Plan(PlanEvent::Decided {
                                plan_id: p.plan_id,
                                decision: PlanDecision::Cancel,
                                comment: None,
                            }),
                        );
                    }
                    if inner.plan.on {
                        self.emit(&mut inner, EventKind::Plan(PlanEvent::Mode { on: false }));
                    }
                }
                PlanAction::Decide {
                    plan_id, decision, ..
                } => {
                    let Some(p) = inner.plan.pending.clone() else {
                        inner.seen_requests.remove(&format!("plan:{request_id}"));
                        return Err(SessionError::NoPlan);
                    };
                    if plan_id.as_ref().is_some_and(|id| *id != p.plan_id) {
                        inner.seen_requests.remove(&format!("plan:{request_id}"));
                        return Err(SessionError::NoPlan);
                    }
                    if *decision != PlanDecision::Cancel
                        && !matches!(inner.state, TurnState::Idle | TurnState::Paused)
                    {
                        inner.seen_requests.remove(&format!("plan:{request_id}"));
                        return Err(SessionError::Busy);
                    }
                    if *decision == PlanDecision::Cancel {
                        self.emit(
                            &mut inner,
                            EventKind::Plan(PlanEvent::Decided {
                                plan_id: p.plan_id,
                                decision: PlanDecision::Cancel,
                                comment: None,
                            }),
                        );
                    }
                }
            }
            inner.journal.barrier()
        };
        barrier.wait().await?;
        match action {
            PlanAction::Enter { task: Some(task) } => {
                self.submit(request_id, &task)?;
            }
            PlanAction::Enter { task: None } | PlanAction::Leave => {}
            PlanAction::Decide {
                decision: PlanDecision::Cancel,
                ..
            } => {}
            PlanAction::Decide {
                decision, comment, ..
            } => {
                let Some(p) = self.pending_plan() else {
                    return Err(SessionError::NoPlan);
                };
                let comment = comment.filter(|c| !c.trim().is_empty());
                let text = match decision {
                    PlanDecision::Execute => {
                        // The steps are the todo list the execution starts from.
                        *self.tool_ctx().todos.lock_or_recover() = core::todos_of(&p.steps);
                        core::execute_text(&p)
                    }
                    _ => core::revise_text(
                        comment
                            .as_deref()
                            .unwrap_or("the user asked for another plan"),
                    ),
                };
                let decided = PlanEvent::Decided {
                    plan_id: p.plan_id,
                    decision,
                    comment,
                };
                self.submit_inner(
                    request_id,
                    &text,
                    Vec::new(),
                    Vec::new(),
                    vec![decided],
                    None,
                    None,
                )?;
            }
        }
        Ok(true)
    }
}
