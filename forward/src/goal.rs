//! Goals on the wire (issue 38 §3): the user's requests ([`GoalAction`]) and what the session
//! journals ([`GoalEvent`]). The host keeps running turns toward the objective, with or
//! without a client attached, until the model reports it complete, reports the same blocker
//! three times in a row, the user stops it, or a budget is reached. The host's logic is in
//! `remote-agent/src/goal/`.

use serde::{Deserialize, Serialize};

/// What a session says while a running goal waits at a model step with no laptop attached
/// (the model is reached through a laptop's gateway, where the key is); the goal goes on by
/// itself when a client attaches. The host's state detail; `reasonix sessions` prints it.
pub const WAITING_FOR_LAPTOP: &str = "goal waiting for a laptop (the model key is on the laptop)";

/// The budgets of one goal (`[agent] goal_token_budget`, `goal_cost_budget_usd`,
/// `goal_time_budget_minutes`). Reaching one pauses the goal; `/goal resume` gives it the
/// same budgets again, counted from the resume.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalBudgets {
    /// Prompt plus completion tokens of the goal's model requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Cost in millionths of a US dollar, at `prices`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_micro_usd: Option<u64>,
    /// Running time in minutes (the time between turns of a paused goal is not counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minutes: Option<u64>,
    /// The model's prices, in millionths of a US dollar per million tokens (uncached input,
    /// cached input, output), from the laptop's config; without them cost is not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prices: Option<[u64; 3]>,
}

crate::proto_serde::tagged_enum! {
    GoalActionDe, "action";
    /// What the user does with the session's goal ([`crate::proto::Request::Goal`]). Only a
    /// driving client may send it.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
    #[serde(tag = "action", rename_all = "snake_case")]
    pub enum GoalAction {
        /// Start a goal (replacing an ended one); its first turn carries the request's id.
        Start {
            /// What the goal is to achieve.
            objective: String,
            /// Its budgets.
            #[serde(default)]
            budgets: GoalBudgets,
        },
        /// Stop starting new turns (the running turn finishes).
        Pause,
        /// Continue a paused (or budget-paused) goal.
        Resume,
        /// Stop the goal for good: the running turn is cancelled.
        Clear,
    }
}

/// What the model reports with `update_goal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalReport {
    /// More to do: the host starts another turn.
    Continue,
    /// Done; the evidence says how it was checked.
    Complete,
    /// Cannot go on; the evidence says why.
    Blocked,
}

/// Where a goal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalStatus {
    /// Turns keep running toward it.
    Running,
    /// The user paused it.
    Paused,
    /// A budget was reached; `/goal resume` continues.
    BudgetPaused,
    /// The model reported it complete.
    Complete,
    /// The model reported the same blocker three times in a row.
    Blocked,
    /// The user stopped (cleared) it.
    Stopped,
}

impl GoalStatus {
    /// `running`, `paused`, `budget-paused`, `complete`, `blocked`, `stopped`.
    pub fn as_str(self) -> &'static str {
        match self {
            GoalStatus::Running => "running",
            GoalStatus::Paused => "paused",
            GoalStatus::BudgetPaused => "budget-paused",
            GoalStatus::Complete => "complete",
            GoalStatus::Blocked => "blocked",
            GoalStatus::Stopped => "stopped",
        }
    }

    /// True once the goal is over (complete, blocked, stopped).
    pub fn ended(self) -> bool {
        matches!(
            self,
            GoalStatus::Complete | GoalStatus::Blocked | GoalStatus::Stopped
        )
    }
}

crate::proto_serde::tagged_enum! {
    GoalEventDe, "event";
    /// A goal event of the session journal ([`crate::proto::EventKind::Goal`]).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
    #[serde(tag = "event", rename_all = "snake_case")]
    pub enum GoalEvent {
        /// The user started a goal.
        Started {
            /// The goal's id (the request id that started it).
            goal_id: String,
            /// What it is to achieve.
            objective: String,
            /// Its budgets.
            budgets: GoalBudgets,
        },
        /// The model reported with `update_goal`.
        Reported {
            /// The report.
            status: GoalReport,
            /// What shows it.
            evidence: String,
        },
        /// The goal's status changed (paused, resumed, ended); `detail` says why.
        Status {
            /// The new status.
            status: GoalStatus,
            /// Why (the budget reached, the blocker, the evidence).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            detail: Option<String>,
        },
    }
}

/// A goal as a session listing shows it ([`crate::proto::SessionInfo::goal`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalSummary {
    /// What it is to achieve.
    pub objective: String,
    /// Where it stands.
    pub status: GoalStatus,
    /// Turns run toward it.
    pub turns: u32,
    /// Tokens spent on it.
    pub tokens: u64,
    /// The last thing the model reported (or why it paused/ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
}
