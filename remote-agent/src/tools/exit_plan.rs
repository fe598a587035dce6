//! `exit_plan_mode{plan}`: the model ends planning with a Markdown plan; the user approves,
//! revises or cancels it on a card (see [`crate::plan`]). Always listed (the tool list is
//! part of the cached prefix and never changes within a session); refused outside plan mode.

use serde::Deserialize;
use serde_json::{json, Value};

use super::{parse_args, Tool, ToolContext, ToolOutput};

/// `exit_plan_mode{plan}`.
pub struct ExitPlanModeTool;

#[derive(Deserialize)]
struct Args {
    plan: String,
}

/// The longest plan taken (bytes).
pub const MAX_PLAN_BYTES: usize = 64 * 1024;

#[async_trait::async_trait]
impl Tool for ExitPlanModeTool {
    fn name(&self) -> &'static str {
        crate::plan::EXIT_TOOL
    }

    fn description(&self) -> &'static str {
        "Only in plan mode (the user turned it on; you cannot): propose your plan and end planning. \
         The plan is Markdown with ## Goal, ## Steps (an ordered, numbered list), ## Files to touch and \
         ## Verification. The user then executes, revises or cancels it; end your turn after calling it. \
         Outside plan mode the call is refused."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "plan": {"type": "string", "description": "The plan in Markdown: goal, ordered steps, files to touch, verification"}
            },
            "required": ["plan"],
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
        if !ctx.plan.active() {
            return ToolOutput::err(
                "not in plan mode: exit_plan_mode only ends a planning phase the user started \
                 (/plan, Shift+Tab, run --plan). Carry on with the task",
            );
        }
        let plan = a.plan.trim();
        if plan.is_empty() {
            return ToolOutput::err("the plan is empty; write it in Markdown (## Goal, ## Steps, ## Files to touch, ## Verification)");
        }
        if plan.len() > MAX_PLAN_BYTES {
            return ToolOutput::err(format!(
                "the plan has {} bytes; keep it under {MAX_PLAN_BYTES} (a plan, not the change itself)",
                plan.len()
            ));
        }
        let steps = crate::plan::steps::read(plan);
        if steps.is_empty() {
            return ToolOutput::err(
                "the plan has no steps; list them as an ordered list under ## Steps (1. ..., 2. ...)",
            );
        }
        match ctx.plan.propose(plan.to_string(), steps.clone()) {
            Ok(()) => ToolOutput::ok(format!(
                "The plan ({} steps) is saved and shown to the user, who will execute, revise or cancel it. \
                 End your turn now: do not call more tools.",
                steps.len()
            )),
            Err(e) => ToolOutput::err(e),
        }
    }
}
