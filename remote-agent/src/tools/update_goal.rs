//! `update_goal{status, evidence}`: the model reports on the session's goal (see
//! [`crate::goal`]): `continue` (another turn follows), `complete` (the goal ends), or
//! `blocked` (the same blocker three times in a row ends it). Always listed (the tool list is
//! part of the cached prefix); refused when no goal runs.

use reasonix_forward::proto::GoalReport;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{parse_args, Tool, ToolContext, ToolOutput};
use crate::goal::MAX_EVIDENCE_BYTES;

/// `update_goal{status, evidence}`.
pub struct UpdateGoalTool;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    status: GoalReport,
    evidence: String,
}

#[async_trait::async_trait]
impl Tool for UpdateGoalTool {
    fn name(&self) -> &'static str {
        crate::goal::UPDATE_TOOL
    }

    fn description(&self) -> &'static str {
        "Only while the user's goal runs: report on it at the end of each turn. status \"continue\": \
         more to do, another turn follows (evidence: what you did). \"complete\": the goal is met \
         (evidence: how you verified it). \"blocked\": you cannot go on (evidence: what blocks you); \
         the same blocker three times in a row ends the goal. Without a goal the call is refused."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "status": {"type": "string", "enum": ["continue", "complete", "blocked"], "description": "continue, complete or blocked"},
                "evidence": {"type": "string", "description": "What you did, how you verified completion, or what blocks you"}
            },
            "required": ["status", "evidence"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let a: Args = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        let evidence = a.evidence.trim();
        if evidence.is_empty() {
            return ToolOutput::err(
                "the evidence is empty; say what you did, how you checked completion, or what blocks you",
            );
        }
        if evidence.len() > MAX_EVIDENCE_BYTES {
            return ToolOutput::err(format!(
                "the evidence has {} bytes; keep it under {MAX_EVIDENCE_BYTES}",
                evidence.len()
            ));
        }
        match ctx.goal.report(a.status, evidence.to_string()) {
            Ok(()) => ToolOutput::ok(match a.status {
                GoalReport::Continue => "Recorded. End this turn; the next turn continues the goal.",
                GoalReport::Complete => "Recorded: the goal is complete. End your turn now.",
                GoalReport::Blocked => "Recorded as blocked. End this turn; the same blocker three times in a row ends the goal.",
            }),
            Err(e) => ToolOutput::err(e),
        }
    }
}
