//! Goals in the session (issue 38 §3): the user's requests (start, pause, resume, clear),
//! `update_goal`'s reports, and the next turn after each goal turn. The state is
//! [`crate::goal::GoalState`], kept current by every journaled event, so a daemon restart
//! finds the goal where the journal left it and goes on (the interrupted call is reported as
//! such, never run again).

use super::*;
use crate::goal::{self as core, Next};
use reasonix_forward::proto::{GoalAction, GoalEvent, GoalReport, GoalStatus, GoalSummary};

/// `update_goal`'s way into the session.
pub(super) struct SessionGoal(pub(super) std::sync::Weak<Session>);

impl core::GoalSink for SessionGoal {
    fn report(&self, status: GoalReport, evidence: String) -> Result<(), String> {
        let s = self.0.upgrade().ok_or("the session is gone")?;
        let mut inner = s.lock();
        if !inner.goal.running() {
            return Err(core::NOT_RUNNING.into());
        }
        s.emit(
            &mut inner,
            EventKind::Goal(GoalEvent::Reported { status, evidence }),
        );
        Ok(())
    }
}

impl Session {
    /// The session's goal, as a listing shows it.
    pub fn goal_summary(&self) -> Option<GoalSummary> {
        self.lock().goal.summary()
    }

    /// True while the session's goal runs (turns keep being started for it).
    pub fn goal_running(&self) -> bool {
        self.lock().goal.running()
    }

    /// A goal request of the driving client. `Ok(false)`: a repeat of `request_id`.
    pub async fn goal_request(
        self: &Arc<Self>,
        request_id: &str,
        action: GoalAction,
    ) -> Result<bool, SessionError> {
        let key = format!("goal:{request_id}");
        let (barrier, start_turn) = {
            let mut inner = self.lock();
            if !inner.seen_requests.insert(key.clone()) {
                return Ok(false);
            }
            let idle = matches!(inner.state, TurnState::Idle | TurnState::Paused);
            let status = inner.goal.goal.as_ref().map(|g| g.status);
            let refuse = |inner: &mut Inner, e: SessionError| {
                inner.seen_requests.remove(&key);
                Err(e)
            };
            let start_turn = match &action {
                GoalAction::Start { objective, budgets } => {
                    if objective.trim().is_empty() {
                        return refuse(
                            &mut inner,
                            SessionError::Goal(
                                "the goal's objective is empty: /goal <what to achieve>".into(),
                            ),
                        );
                    }
                    if status.is_some_and(|s| !s.ended()) {
                        return refuse(
                            &mut inner,
                            SessionError::Goal(
                                "this session already has a goal; /goal clear stops it first"
                                    .into(),
                            ),
                        );
                    }
                    if !idle {
                        return refuse(&mut inner, SessionError::Busy);
                    }
                    self.emit(
                        &mut inner,
                        EventKind::Goal(GoalEvent::Started {
                            goal_id: request_id.to_string(),
                            objective: objective.trim().to_string(),
                            budgets: budgets.clone(),
                        }),
                    );
                    Some((request_id.to_string(), core::start_text(objective.trim())))
                }
                GoalAction::Pause => {
                    if status != Some(GoalStatus::Running) {
                        return refuse(
                            &mut inner,
                            SessionError::Goal("no goal is running to pause".into()),
                        );
                    }
                    self.emit(
                        &mut inner,
                        goal_status(
                            GoalStatus::Paused,
                            "paused by the user; /goal resume continues",
                        ),
                    );
                    None
                }
                GoalAction::Resume => match status {
                    // Already running: nothing to do (a client that attaches to wait for it).
                    Some(GoalStatus::Running) => None,
                    Some(GoalStatus::Paused | GoalStatus::BudgetPaused) => {
                        self.emit(
                            &mut inner,
                            goal_status(GoalStatus::Running, "resumed by the user"),
                        );
                        idle.then(|| self.next_goal_turn(&inner)).flatten()
                    }
                    _ => {
                        return refuse(
                            &mut inner,
                            SessionError::Goal("no paused goal to resume".into()),
                        )
                    }
                },
                GoalAction::Clear => {
                    if status.is_some_and(|s| !s.ended()) {
                        self.emit(
                            &mut inner,
                            goal_status(GoalStatus::Stopped, "stopped by the user"),
                        );
                        if let Some(c) = inner.cancel.take() {
                            c.cancel();
                        }
                    }
                    None
                }
            };
            (inner.journal.barrier(), start_turn)
        };
        barrier.wait().await?;
        if let Some((rid, text)) = start_turn {
            self.submit(&rid, &text)?;
        }
        Ok(true)
    }

    /// The id and text of the running goal's next turn.
    fn next_goal_turn(&self, inner: &Inner) -> Option<(String, String)> {
        let g = inner.goal.goal.as_ref()?;
        let n = g.turns + 1;
        Some((
            format!("{}#{n}", g.id),
            core::continue_text(&g.objective, n),
        ))
    }

    /// After a turn ended with `outcome`: the running goal's next turn, or its pause or end.
    pub(super) fn goal_after_turn(self: &Arc<Self>, outcome: TurnOutcome) {
        let next = {
            let mut inner = self.lock();
            match inner.goal.after_turn(outcome, crate::clock::now_ms()) {
                Next::Idle => None,
                Next::Status(status, detail) => {
                    self.emit(&mut inner, goal_status(status, &detail));
                    let barrier = inner.journal.barrier();
                    tokio::spawn(async move {
                        if let Err(e) = barrier.wait().await {
                            tracing::error!("the goal's status is not saved yet: {e}");
                        }
                    });
                    None
                }
                Next::Turn => self.next_goal_turn(&inner),
            }
        };
        if let Some((rid, text)) = next {
            match self.submit(&rid, &text) {
                // A user's turn came first: the goal goes on after it.
                Ok(_) | Err(SessionError::Busy) => {}
                Err(e) => {
                    let mut inner = self.lock();
                    let text = format!(
                        "the goal's next turn could not start: {e}; /goal resume tries again"
                    );
                    self.emit(&mut inner, goal_status(GoalStatus::Paused, &text));
                }
            }
        }
    }

    /// After the session was opened: a goal that was running when the daemon stopped goes
    /// on (the interrupted turn was closed by [`Session::open`]).
    pub(super) fn goal_after_open(self: &Arc<Self>) {
        if !self.goal_running() || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        self.goal_after_turn(TurnOutcome::Interrupted);
    }
}

fn goal_status(status: GoalStatus, detail: &str) -> EventKind {
    EventKind::Goal(GoalEvent::Status {
        status,
        detail: Some(detail.to_string()),
    })
}
