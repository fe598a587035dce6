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
        "prompt": {"type": "string", "description": "The whole task; the subagent sees nothing else"},
        "description": {"type": "string", "description": "A few words naming it"},
        "profile": {"type": "string", "description": "general (default) or explore (read-only)"},
        "model": {"type": "string"},
        "effort": {"type": "string", "enum": ["low", "medium", "high", "max"]},
        "tools": {"type": "array", "items": {"type": "string"}, "description": "Only these tools"},
        "max_steps": {"type": "integer", "minimum": 1}
    });
    if writes {
        p["write_paths"] = json!({"type": "array", "items": {"type": "string"}, "description": "The only paths it may change"});
    }
    if background {
        p["run_in_background"] = json!({"type": "boolean", "description": "Return its id at once; see read_subagent_result"});
    }
    p
}
