//! `parallel_tasks`: several subagents at once (within the limits: children and writers at
//! once, never two whose write paths overlap), their answers returned together.

use serde::Deserialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::{task_properties, TaskArgs};
use crate::tools::{parse_args, Tool, ToolContext, ToolOutput};

/// `parallel_tasks{tasks[]}`.
pub struct ParallelTasksTool;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    tasks: Vec<TaskArgs>,
}

/// Most tasks in one call.
const MAX_TASKS: usize = 32;

#[async_trait::async_trait]
impl Tool for ParallelTasksTool {
    fn name(&self) -> &'static str {
        "parallel_tasks"
    }

    fn description(&self) -> &'static str {
        "Run several task entries at once and return all answers (at most 6 at once, 3 \
         writers; overlapping write_paths wait)."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "tasks": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": task_properties(false, true),
                        "required": ["prompt", "description"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["tasks"],
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
        if a.tasks.is_empty() || a.tasks.len() > MAX_TASKS {
            return ToolOutput::err(format!(
                "tasks must hold 1 to {MAX_TASKS} entries, not {}",
                a.tasks.len()
            ));
        }
        // Every task is checked before any runs.
        let mut prepared = Vec::new();
        for (i, t) in a.tasks.into_iter().enumerate() {
            if t.run_in_background {
                return ToolOutput::err(format!(
                    "task {}: run_in_background is for task; parallel_tasks returns when all are done",
                    i + 1
                ));
            }
            let description = t.description.clone();
            match crate::delegate::prepare(ctx, t.spec(false)) {
                Ok(p) => prepared.push((description, p)),
                Err(e) => {
                    return ToolOutput::err(format!(
                        "task {} ({description}): {e}; no task was run",
                        i + 1
                    ))
                }
            }
        }
        let cancel = CancellationToken::new();
        let _guard = cancel.clone().drop_guard();
        let mut set = tokio::task::JoinSet::new();
        for (i, (description, p)) in prepared.into_iter().enumerate() {
            let cancel = cancel.clone();
            // Registered here, in order, so the children's ids follow the tasks'.
            let id = crate::delegate::register(&p);
            set.spawn(async move {
                (
                    i,
                    description,
                    crate::delegate::run_registered(p, id, cancel).await,
                )
            });
        }
        let mut results = Vec::new();
        while let Some(done) = set.join_next().await {
            match done {
                Ok(r) => results.push(r),
                Err(e) => {
                    return ToolOutput::err(format!(
                        "internal error: a subagent task panicked: {e}"
                    ))
                }
            }
        }
        reasonix_forward::sort::sort_by_key(&mut results, |(i, _, _)| *i);
        let ok = results.iter().filter(|(_, _, r)| r.ok()).count();
        let mut text = format!("{ok} of {} tasks completed.\n", results.len());
        for (i, description, r) in &results {
            text.push_str(&format!(
                "\n## task {} ({description})\n{}\n",
                i + 1,
                r.render()
            ));
        }
        if ok == 0 {
            ToolOutput::err(text)
        } else {
            ToolOutput::ok(text)
        }
    }
}
