//! Goals (issue 38 §3), the pure core: the goal's state as the journal says
//! ([`GoalState::observe`]), and what the host does when a goal turn ends
//! ([`GoalState::after_turn`]): another turn, a pause at a budget, or the end (complete, the
//! same blocker three times in a row). The I/O (journaling, starting turns) is in
//! `session/goal.rs`; `update_goal` reaches the session through [`GoalSink`].

use reasonix_forward::proto::{
    EventKind, GoalBudgets, GoalEvent, GoalReport, GoalStatus, GoalSummary, TurnOutcome,
};

/// The tool the model reports with.
pub const UPDATE_TOOL: &str = "update_goal";

/// The same blocker reported this many times in a row ends the goal.
pub const BLOCKED_LIMIT: u32 = 3;

/// The longest evidence taken (bytes).
pub const MAX_EVIDENCE_BYTES: usize = 8 * 1024;

/// `update_goal`'s way into the session.
pub trait GoalSink: Send + Sync {
    /// Journal a report of the running goal; `Err` is the text the model sees.
    fn report(&self, status: GoalReport, evidence: String) -> Result<(), String>;
}

/// No session (tests, subagents): no goal runs.
pub struct NoGoal;

impl GoalSink for NoGoal {
    fn report(&self, _: GoalReport, _: String) -> Result<(), String> {
        Err(NOT_RUNNING.into())
    }
}

/// What `update_goal` answers when no goal runs.
pub const NOT_RUNNING: &str =
    "no goal is running in this session (the user starts one with /goal); carry on with the task";

/// One goal.
#[derive(Debug, Clone, PartialEq)]
pub struct Goal {
    /// Its id (the request that started it).
    pub id: String,
    /// What it is to achieve.
    pub objective: String,
    /// Its budgets.
    pub budgets: GoalBudgets,
    /// Where it stands.
    pub status: GoalStatus,
    /// Why it paused or ended, or the last report's evidence.
    pub progress: Option<String>,
    /// Turns started toward it.
    pub turns: u32,
    /// Tokens of its model requests in all.
    pub tokens: u64,
    /// Tokens, cost (millionths of a dollar) and running milliseconds since the last start
    /// or resume (what the budgets are measured on).
    pub window_tokens: u64,
    /// See `window_tokens`.
    pub window_cost: u64,
    /// Running milliseconds before the current stretch (since the last start or resume).
    pub window_ms: u64,
    /// When the current running stretch began (ms since the epoch), while running.
    pub running_since: Option<u64>,
    /// Reports of this turn and before: the last blocker and how many times in a row.
    pub blocked: Option<(String, u32)>,
    /// The last report since the current turn began (`None`: the model did not report).
    pub last_report: Option<GoalReport>,
}

/// The session's goal as the journal says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GoalState {
    /// The current (or last) goal.
    pub goal: Option<Goal>,
}

/// What the host does after a goal turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Nothing (no goal, or it is not running).
    Idle,
    /// Journal this status change (pause at a budget, or the end).
    Status(GoalStatus, String),
    /// Start the next turn toward the goal.
    Turn,
}

impl GoalState {
    /// Rebuild from journal events.
    pub fn from_events(events: &[reasonix_forward::proto::Event]) -> GoalState {
        let mut s = GoalState::default();
        for e in events {
            s.observe(&e.kind, ts_ms(&e.ts));
        }
        s
    }

    /// Keep the state current with one journaled event (at `now_ms`, the event's time).
    pub fn observe(&mut self, kind: &EventKind, now_ms: u64) {
        match kind {
            EventKind::Goal(GoalEvent::Started {
                goal_id,
                objective,
                budgets,
            }) => {
                self.goal = Some(Goal {
                    id: goal_id.clone(),
                    objective: objective.clone(),
                    budgets: budgets.clone(),
                    status: GoalStatus::Running,
                    progress: None,
                    turns: 0,
                    tokens: 0,
                    window_tokens: 0,
                    window_cost: 0,
                    window_ms: 0,
                    running_since: Some(now_ms),
                    blocked: None,
                    last_report: None,
                });
            }
            EventKind::Goal(GoalEvent::Reported { status, evidence }) => {
                let Some(g) = self.goal.as_mut() else { return };
                g.last_report = Some(*status);
                g.progress = Some(evidence.clone());
                g.blocked = match status {
                    GoalReport::Blocked => {
                        let key = blocker_key(evidence);
                        match g.blocked.take() {
                            Some((k, n)) if k == key => Some((k, n + 1)),
                            _ => Some((key, 1)),
                        }
                    }
                    _ => None,
                };
            }
            EventKind::Goal(GoalEvent::Status { status, detail }) => {
                let Some(g) = self.goal.as_mut() else { return };
                if *status == GoalStatus::Running {
                    // A resume: the budgets count again from here.
                    g.window_tokens = 0;
                    g.window_cost = 0;
                    g.window_ms = 0;
                    g.running_since = Some(now_ms);
                    g.blocked = None;
                } else if let Some(since) = g.running_since.take() {
                    g.window_ms += now_ms.saturating_sub(since);
                }
                g.status = *status;
                if detail.is_some() {
                    g.progress = detail.clone();
                }
            }
            EventKind::UserTurn { .. } => {
                if let Some(g) = self
                    .goal
                    .as_mut()
                    .filter(|g| g.status == GoalStatus::Running)
                {
                    g.turns += 1;
                    g.last_report = None;
                }
            }
            EventKind::Usage { usage, .. } => {
                if let Some(g) = self
                    .goal
                    .as_mut()
                    .filter(|g| g.status == GoalStatus::Running)
                {
                    let t = usage.prompt_tokens + usage.completion_tokens;
                    g.tokens += t;
                    g.window_tokens += t;
                    if let Some([input, cached, output]) = g.budgets.prices {
                        let uncached = if usage.cache_hit_tokens + usage.cache_miss_tokens > 0 {
                            usage.cache_miss_tokens
                        } else {
                            usage.prompt_tokens
                        };
                        let micro = (uncached as u128 * input as u128
                            + usage.cache_hit_tokens as u128 * cached as u128
                            + usage.completion_tokens as u128 * output as u128)
                            / 1_000_000;
                        g.window_cost += micro as u64;
                    }
                }
            }
            _ => {}
        }
    }

    /// True while the goal runs (the host starts turns for it).
    pub fn running(&self) -> bool {
        self.goal
            .as_ref()
            .is_some_and(|g| g.status == GoalStatus::Running)
    }

    /// The listing's view.
    pub fn summary(&self) -> Option<GoalSummary> {
        self.goal.as_ref().map(|g| GoalSummary {
            objective: g.objective.clone(),
            status: g.status,
            turns: g.turns,
            tokens: g.tokens,
            progress: g.progress.clone(),
        })
    }

    /// The first budget reached at `now_ms`, described.
    pub fn budget_reached(&self, now_ms: u64) -> Option<String> {
        let g = self.goal.as_ref()?;
        let b = &g.budgets;
        if let Some(max) = b.tokens.filter(|m| g.window_tokens >= *m) {
            return Some(format!(
                "token budget reached: {} of {max} tokens (goal_token_budget)",
                g.window_tokens
            ));
        }
        if let Some(max) = b.cost_micro_usd.filter(|m| g.window_cost >= *m) {
            return Some(format!(
                "cost budget reached: ${:.4} of ${:.4} (goal_cost_budget_usd)",
                g.window_cost as f64 / 1e6,
                max as f64 / 1e6
            ));
        }
        let ran = g.window_ms + g.running_since.map_or(0, |s| now_ms.saturating_sub(s));
        if let Some(max) = b.minutes.filter(|m| ran >= m.saturating_mul(60_000)) {
            return Some(format!(
                "time budget reached: {} s of {max} min (goal_time_budget_minutes)",
                ran / 1000
            ));
        }
        None
    }

    /// What to do after a turn of the running goal ended with `outcome` at `now_ms`.
    pub fn after_turn(&self, outcome: TurnOutcome, now_ms: u64) -> Next {
        let Some(g) = self
            .goal
            .as_ref()
            .filter(|g| g.status == GoalStatus::Running)
        else {
            return Next::Idle;
        };
        if g.last_report == Some(GoalReport::Complete) {
            return Next::Status(GoalStatus::Complete, g.progress.clone().unwrap_or_default());
        }
        if let Some((_, n)) = g.blocked.as_ref().filter(|(_, n)| *n >= BLOCKED_LIMIT) {
            return Next::Status(
                GoalStatus::Blocked,
                format!(
                    "blocked {n} times in a row: {}",
                    g.progress.clone().unwrap_or_default()
                ),
            );
        }
        match outcome {
            TurnOutcome::Cancelled => {
                return Next::Status(
                    GoalStatus::Paused,
                    "the turn was cancelled; /goal resume continues".into(),
                )
            }
            TurnOutcome::Failed => {
                return Next::Status(
                    GoalStatus::Paused,
                    "the turn failed (see its error); /goal resume continues".into(),
                )
            }
            _ => {}
        }
        if let Some(why) = self.budget_reached(now_ms) {
            return Next::Status(
                GoalStatus::BudgetPaused,
                format!("{why}; /goal resume continues with the same budgets"),
            );
        }
        Next::Turn
    }
}

/// Blockers compare by their words, not their spacing or case.
fn blocker_key(evidence: &str) -> String {
    evidence
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// An event's time (RFC 3339) in ms since the epoch; 0 when unreadable.
pub fn ts_ms(ts: &str) -> u64 {
    humantime::parse_rfc3339_weak(ts)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

/// The user message of the goal's first turn.
pub fn start_text(objective: &str) -> String {
    format!(
        "[goal] {objective}\n\nWork toward this goal on your own; nobody may be watching. \
         At the end of each turn call update_goal: status \"continue\" while there is more to do \
         (say what you did), \"complete\" once it is done (evidence: how you checked it), or \
         \"blocked\" when you cannot go on (evidence: what blocks you)."
    )
}

/// The user message of every later turn (built from the objective alone, so a replay of
/// the journal gives the same bytes).
pub fn continue_text(objective: &str, turn: u32) -> String {
    format!(
        "[goal, turn {turn}] Continue toward the goal: {objective}\n\nReport with update_goal at the end of this turn."
    )
}

#[cfg(test)]
mod tests;
