//! `read_only_task`: a subagent with read-only tools only.

use serde_json::{json, Value};

use super::task::run_task;
use super::task_properties;
use crate::tools::{Tool, ToolContext, ToolOutput};

/// `read_only_task{prompt, description, profile?, model?, effort?, tools?, max_steps?,
/// run_in_background?}`.
pub struct ReadOnlyTaskTool;

#[async_trait::async_trait]
impl Tool for ReadOnlyTaskTool {
    fn name(&self) -> &'static str {
        "read_only_task"
    }

    fn description(&self) -> &'static str {
        "Like task, with read-only tools only (for research)."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": task_properties(true, false),
            "required": ["prompt", "description"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        run_task(self.name(), args, ctx, true).await
    }
}
