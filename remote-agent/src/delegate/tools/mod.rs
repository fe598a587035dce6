//! The delegation tools, one file each, and what they share: the arguments of one child and
//! how a finished child becomes a tool result.

use std::sync::Arc;

use reasonix_forward::proto::ReasoningEffort;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::ToolRegistry;

use super::ChildSpec;

mod fleet;
mod list_subagents;
mod parallel_tasks;
mod read_only_task;
mod read_subagent_result;
mod task;

pub use fleet::FleetTool;
pub use list_subagents::ListSubagentsTool;
pub use parallel_tasks::ParallelTasksTool;
pub use read_only_task::ReadOnlyTaskTool;
pub use read_subagent_result::ReadSubagentResultTool;
pub use task::TaskTool;

/// Adds the delegation tools to `registry`.
pub(crate) fn register(registry: &mut ToolRegistry) {
    registry.register(Arc::new(TaskTool));
    registry.register(Arc::new(ReadOnlyTaskTool));
    registry.register(Arc::new(ParallelTasksTool));
    registry.register(Arc::new(FleetTool));
    registry.register(Arc::new(ReadSubagentResultTool));
    registry.register(Arc::new(ListSubagentsTool));
}

/// The arguments of one child (`task`, an entry of `parallel_tasks`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TaskArgs {
    pub prompt: String,
    pub description: String,
    #[serde(default)]
    pub profile: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub effort: Option<ReasoningEffort>,
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    #[serde(default)]
    pub write_paths: Option<Vec<String>>,
    #[serde(default)]
    pub max_steps: Option<u32>,
    #[serde(default)]
    pub run_in_background: bool,
}

impl TaskArgs {
    pub(super) fn spec(self, read_only: bool) -> ChildSpec {
        ChildSpec {
            prompt: self.prompt,
            description: self.description,
            profile: self.profile,
            model: self.model,
            effort: self.effort,
            tools: self.tools,
            write_paths: self.write_paths,
            max_steps: self.max_steps,
            read_only,
        }
    }
}

/// The JSON schema properties of one child's arguments (`background`: with
/// `run_in_background`; `writes`: with `write_paths`).
pub(super) fn task_properties(background: bool, writes: bool) -> Value {
    let mut p = json!({
        "prompt": {"type": "string", "description": "The complete task for the subagent: it sees nothing of this conversation, so include every detail it needs"},
        "description": {"type": "string", "description": "A few words naming the task (shown to the user)"},
        "profile": {"type": "string", "description": "Subagent profile: general (default; may edit and run commands) or explore (read-only research)"},
        "model": {"type": "string", "description": "Model for the subagent (default: the profile's, else this session's)"},
        "effort": {"type": "string", "enum": ["low", "medium", "high", "max"], "description": "Reasoning effort for the subagent"},
        "tools": {"type": "array", "items": {"type": "string"}, "description": "Only these tools (a subset of what the profile allows)"},
        "max_steps": {"type": "integer", "minimum": 1, "description": "Model steps before the subagent stops with its partial answer (at most the session's limit)"}
    });
    if writes {
        p["write_paths"] = json!({"type": "array", "items": {"type": "string"}, "description": "The only files and directories the subagent may change (its bash sees only these writable); subagents whose write_paths overlap never run at the same time"});
    }
    if background {
        p["run_in_background"] = json!({"type": "boolean", "description": "Return at once with the subagent's id; read its answer later with read_subagent_result"});
    }
    p
}
