//! `todo_write`: the agent's plan, replaced as a whole on every call.

use reasonix_forward::sync::LockExt;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{parse_args, Tool, ToolContext, ToolOutput};

/// `todo_write{todos[{content, status, active_form?}]}`.
pub struct TodoWriteTool;

#[derive(Deserialize)]
struct Args {
    todos: Vec<Item>,
}

#[derive(Deserialize, serde::Serialize)]
struct Item {
    content: String,
    status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    active_form: Option<String>,
}

/// Allowed item states.
pub const TODO_STATUSES: [&str; 3] = ["pending", "in_progress", "completed"];

#[async_trait::async_trait]
impl Tool for TodoWriteTool {
    fn name(&self) -> &'static str {
        "todo_write"
    }

    fn description(&self) -> &'static str {
        "Write the current plan as a list of steps, replacing the previous list. Each step has \
         content and a status (pending, in_progress, completed); keep at most one in_progress. \
         Use it for tasks with several steps so the user can follow along."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "description": "The complete plan, in order",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "description": "What the step does (imperative)"},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                            "active_form": {"type": "string", "description": "Present-continuous form shown while it runs"}
                        },
                        "required": ["content", "status"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["todos"],
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
        for (i, item) in a.todos.iter().enumerate() {
            if item.content.trim().is_empty() {
                return ToolOutput::err(format!("todo {} has empty content", i + 1));
            }
            if !TODO_STATUSES.contains(&item.status.as_str()) {
                return ToolOutput::err(format!(
                    "todo {} has status {:?}; use one of pending, in_progress, completed",
                    i + 1,
                    item.status
                ));
            }
        }
        let in_progress = a.todos.iter().filter(|t| t.status == "in_progress").count();
        if in_progress > 1 {
            return ToolOutput::err(format!(
                "{in_progress} todos are in_progress; keep exactly one step in progress at a time"
            ));
        }
        let mut text = String::new();
        for t in &a.todos {
            let mark = match t.status.as_str() {
                "completed" => "[x]",
                "in_progress" => "[>]",
                _ => "[ ]",
            };
            text.push_str(&format!("{mark} {}\n", t.content));
        }
        let done = a.todos.iter().filter(|t| t.status == "completed").count();
        text.push_str(&format!("({done}/{} done)", a.todos.len()));
        let stored: Vec<Value> = a
            .todos
            .iter()
            .filter_map(|t| serde_json::to_value(t).ok())
            .collect();
        *ctx.todos.lock_or_recover() = stored;
        ToolOutput::ok(text)
    }
}
