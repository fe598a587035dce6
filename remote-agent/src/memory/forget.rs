//! `forget`: retire a fact (always asks the user, see [`super::gate`]). A project fact moves
//! to the store's archive on the host (recoverable with `reasonix memory restore`); a global
//! one is archived by the laptop, which owns the global store.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::{blocking, parse_args, Tool, ToolContext, ToolOutput};
use reasonix_forward::memory::Scope;

/// Marks a global fact the laptop must archive in a `forget` result.
pub const GLOBAL_FORGET: &str = "<memory-forget id=\"";

/// `forget{id, reason}`.
pub struct ForgetTool;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    id: String,
    reason: String,
}

#[async_trait::async_trait]
impl Tool for ForgetTool {
    fn name(&self) -> &'static str {
        "forget"
    }

    fn description(&self) -> &'static str {
        "Retire a remembered fact that is wrong or no longer true (asks the user). The fact is \
         archived, not deleted, and can be restored. Find ids with the `memory` tool or in a \
         <recalled-memory> block."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "Id of the fact (m-…)"},
                "reason": {"type": "string", "description": "Why it should be forgotten (shown to the user)"}
            },
            "required": ["id", "reason"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let a: Args = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        let Some(mem) = ctx.memory.clone() else {
            return ToolOutput::err("memory is not available in this session");
        };
        blocking(move || {
            let snap = mem.snapshot();
            let Some(fact) = snap.facts.iter().find(|f| f.id == a.id) else {
                return ToolOutput::err(format!(
                    "no fact with id {:?}; list them with the `memory` tool",
                    a.id
                ));
            };
            if fact.scope == Scope::Global {
                mem.remove_global(&a.id);
                return ToolOutput::ok(format!(
                    "forgot global fact {} ({}); the laptop archives it (recoverable with `reasonix memory restore --global {}`)\n{GLOBAL_FORGET}{}\"/>",
                    a.id, a.reason, a.id, a.id
                ));
            }
            let r = mem.project().forget(&a.id);
            mem.invalidate();
            match r {
                Ok(_) => ToolOutput::ok(format!(
                    "forgot project fact {} ({}); it is archived and can be restored with `reasonix memory restore {}`",
                    a.id, a.reason, a.id
                )),
                Err(e) => ToolOutput::err(format!(
                    "fact {} could not be forgotten: {e} (an exported fact in the repository's {} is removed by deleting its file)",
                    a.id,
                    reasonix_forward::memory::EXPORT_DIR
                )),
            }
        })
        .await
    }
}
