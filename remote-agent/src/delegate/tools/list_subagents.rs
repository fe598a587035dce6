//! `list_subagents`: the session's subagents with their status, task and usage.

use serde_json::{json, Value};

use crate::tools::{Tool, ToolContext, ToolOutput};

/// `list_subagents{}`.
pub struct ListSubagentsTool;

#[async_trait::async_trait]
impl Tool for ListSubagentsTool {
    fn name(&self) -> &'static str {
        "list_subagents"
    }

    fn description(&self) -> &'static str {
        "List this session's subagents with status and tokens."
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}, "additionalProperties": false})
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn run(&self, _args: Value, ctx: &ToolContext) -> ToolOutput {
        let Some(scope) = &ctx.delegate else {
            return ToolOutput::err("subagents run only inside a host session");
        };
        let list = scope.board().list();
        if list.is_empty() {
            return ToolOutput::ok("no subagents in this session yet");
        }
        let mut out = String::new();
        for l in list {
            out.push_str(&format!(
                "{}\t{}\t{}\t{}s\t{} tokens\t{} (call {})\n",
                l.id,
                l.status.label(),
                l.profile,
                l.elapsed_secs,
                l.usage.prompt + l.usage.completion,
                l.description,
                l.parent_call
            ));
        }
        ToolOutput::ok(out)
    }
}
