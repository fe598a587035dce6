//! A turn's life on the session's side: admitted durably, its checkpoint taken, run by the
//! main conversation's runner ([`crate::runner`]), then ended (or continued, when a steer
//! arrived after the last model step).

use super::*;
use crate::plan::route::Route;
use crate::runner::Runner;

impl Session {
    /// Run a turn. `admitted` is the durability point of a fresh turn's `UserTurn` event
    /// (`None` when a paused turn continues): the model is not asked before it holds.
    pub(super) async fn run_turn(
        self: Arc<Self>,
        cancel: CancellationToken,
        admitted: Option<Barrier>,
    ) {
        let mut admitted = admitted;
        let (barrier, outcome) = loop {
            let (outcome, detail) = self.turn_steps(&cancel, admitted.take()).await;
            self.notice_mcp_tool_changes();
            if let Some(barrier) = self.end_turn(outcome, detail) {
                self.turn_end_hooks(outcome);
                break (barrier, outcome);
            }
        };
        if let Err(e) = barrier.wait().await {
            // The events stay queued and are written at the next durability point that
            // succeeds; say so, since a daemon crash before then would lose them.
            self.record(EventKind::Notice {
                text: self.journal_failure("this turn is not saved on the host yet", &e),
            });
        }
        // A running goal starts its next turn (or pauses, or ends) once this one is saved.
        self.goal_after_turn(outcome);
    }

    /// Close the turn with `outcome`, or return `None` when a steer arrived after the last
    /// step looked: the turn then goes on with it (decided under the lock that ends the
    /// turn, so no steer falls in between).
    fn end_turn(&self, outcome: TurnOutcome, detail: Option<String>) -> Option<Barrier> {
        let mut inner = self.lock();
        if outcome == TurnOutcome::Completed && !inner.pending.steers.is_empty() {
            return None;
        }
        let new_state = if outcome == TurnOutcome::Paused {
            TurnState::Paused
        } else {
            TurnState::Idle
        };
        if new_state == TurnState::Idle {
            self.drop_pending_steers(&mut inner, outcome);
        }
        self.turn_end_laptop_notice(outcome);
        self.emit(&mut inner, EventKind::TurnFinished { outcome, detail });
        if new_state == TurnState::Idle {
            inner.cancel = None;
        }
        // Under the same lock as the TurnFinished event: a client that submits the next
        // turn as soon as it sees this one finish must find the session idle, not busy.
        self.set_state_locked(&mut inner, new_state, None);
        // Durability point: the turn's end.
        Some(inner.journal.barrier())
    }

    /// A fresh turn waits for its admission and takes its checkpoint; then the main
    /// conversation's runner takes the model steps.
    async fn turn_steps(
        &self,
        cancel: &CancellationToken,
        admitted: Option<Barrier>,
    ) -> (TurnOutcome, Option<String>) {
        let fresh = admitted.is_some();
        if let Some(admitted) = admitted {
            if let Err(e) = admitted.wait().await {
                return (
                    TurnOutcome::Failed,
                    Some(self.journal_failure("the turn did not start", &e)),
                );
            }
            self.checkpoint_turn().await;
            // `reasonix subagent run`: the child is the turn (no model step of its own).
            let direct = self.lock().direct.take();
            if let Some(call) = direct {
                return self.runner().run_direct(call, cancel).await;
            }
        }
        // With a planner model, a routed turn is planned first (#38 §2).
        let routed = self.lock().route.take();
        if let Some((decision, task)) = routed.filter(|(d, _)| d.route != Route::Direct) {
            match self.plan_turn(&task, decision, cancel).await {
                Ok(true) => {}
                Ok(false) => return (TurnOutcome::Completed, None),
                Err(end) => return end,
            }
        }
        self.runner().run(cancel, fresh).await
    }

    /// The runner of the session's main conversation.
    pub(super) fn runner(&self) -> Runner<'_> {
        Runner::new(self, &self.main)
    }
}

/// The result a tool call left unfinished by a daemon that stopped is given at the next open
/// (`started`: it had started; it is never run again).
pub(super) fn interrupted_output(started: bool) -> &'static str {
    if started {
        "interrupted: the host daemon stopped while this tool was running; it was not run again. Check its effects before retrying."
    } else {
        "not run: the host daemon stopped before this tool started."
    }
}
