//! `task`: run one subagent (a child conversation on the host) and return its answer.

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::{task_properties, TaskArgs};
use crate::tools::{parse_args, Tool, ToolContext, ToolOutput};

/// `task{prompt, description, profile?, model?, effort?, tools?, write_paths?, max_steps?,
/// run_in_background?}`.
pub struct TaskTool;

/// Run `args` as a child (`read_only`: `read_only_task`); shared by `task` and
/// `read_only_task`.
pub(super) async fn run_task(
    tool: &str,
    args: Value,
    ctx: &ToolContext,
    read_only: bool,
) -> ToolOutput {
    let a: TaskArgs = match parse_args(tool, args) {
        Ok(a) => a,
        Err(e) => return e,
    };
    let background = a.run_in_background;
    let prepared = match crate::delegate::prepare(ctx, a.spec(read_only)) {
        Ok(p) => p,
        Err(e) => return ToolOutput::err(e),
    };
    if background {
        let id = crate::delegate::register(&prepared);
        let cancel = CancellationToken::new();
        tokio::spawn(crate::delegate::run_registered(
            prepared,
            id.clone(),
            cancel,
        ));
        return ToolOutput::ok(format!(
            "started subagent {id} in the background; read its answer with read_subagent_result{{id: \"{id}\"}} (it waits for the end), or see it with list_subagents"
        ));
    }
    // Dropping this call (the turn was cancelled) cancels the child.
    let cancel = CancellationToken::new();
    let _guard = cancel.clone().drop_guard();
    let r = crate::delegate::run_child(prepared, cancel).await;
    let text = r.render();
    match r.status {
        crate::delegate::ChildStatus::Completed | crate::delegate::ChildStatus::StepLimit(_) => {
            ToolOutput::ok(text)
        }
        _ => ToolOutput::err(text),
    }
}

#[async_trait::async_trait]
impl Tool for TaskTool {
    fn name(&self) -> &'static str {
        "task"
    }

    fn description(&self) -> &'static str {
        "Delegate a self-contained task to a subagent (a separate conversation with its own \
         context and tools) and get its final answer. Put everything it needs in prompt. It \
         follows this session's permissions, narrowed by profile, tools and write_paths."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": task_properties(true, true),
            "required": ["prompt", "description"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        // The call itself changes nothing: each of the subagent's calls is decided by the
        // session's policy as it runs.
        true
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        run_task(self.name(), args, ctx, false).await
    }
}
