//! `remember`: save a fact that outlives the session (`docs/MEMORY.md`). The write policy
//! ([`super::gate`]) has already decided whether the user had to approve it. A project fact
//! is written to the workspace's store on the host; a global fact is handed to the laptop,
//! which owns the global store (the host keeps it in memory for this session's recall).

use serde_json::{json, Value};

use super::gate::{plan_remember, RememberArgs, MAX_FACT_CHARS};
use crate::tools::{blocking, parse_args, Tool, ToolContext, ToolOutput};
use reasonix_forward::memory::Scope;

/// Marks a global fact for the laptop in a `remember` result: `<memory-file name="<id>.md">`,
/// the file, `</memory-file>`.
pub const GLOBAL_FILE_OPEN: &str = "<memory-file name=\"";
/// Ends the global fact in a `remember` result.
pub const GLOBAL_FILE_CLOSE: &str = "</memory-file>";

/// `remember{content, type, scope, keywords?, subject?, pinned?, expires?}`.
pub struct RememberTool;

#[async_trait::async_trait]
impl Tool for RememberTool {
    fn name(&self) -> &'static str {
        "remember"
    }

    fn description(&self) -> &'static str {
        "Save a fact that later sessions should know: a decision, a preference, feedback, or \
         where something is. One short fact per call, in plain words; give a `subject` when it \
         is the current value of something that may change (a new value supersedes the old \
         one). scope `project` stays with this workspace; `global` follows the user to every \
         workspace. A new project fact is saved at once; global, user and feedback facts, \
         pinned facts and subject updates ask the user first. Never put secrets in a fact."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "content": {"type": "string", "maxLength": MAX_FACT_CHARS, "description": "The fact, in one or a few sentences"},
                "type": {"type": "string", "enum": ["user", "feedback", "project", "reference"], "description": "user: a preference of the user; feedback: on your work; project: a decision about this project; reference: where something is"},
                "scope": {"type": "string", "enum": ["project", "global"], "description": "project: this workspace only; global: all of the user's workspaces"},
                "keywords": {"type": "array", "items": {"type": "string"}, "description": "Extra words it should be found by"},
                "subject": {"type": "string", "description": "Key of what it is the current value of (e.g. `database`); a new value supersedes the old"},
                "pinned": {"type": "boolean", "description": "Join the standing instructions of every new session (asks the user)"},
                "expires": {"type": "string", "description": "Date (YYYY-MM-DD) after which it is no longer recalled"}
            },
            "required": ["content", "type", "scope"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let a: RememberArgs = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        let Some(mem) = ctx.memory.clone() else {
            return ToolOutput::err("memory is not available in this session");
        };
        blocking(move || {
            let plan = match plan_remember(&mem, &a) {
                Ok(p) => p,
                Err(e) => return ToolOutput::err(e),
            };
            let f = plan.fact;
            let what = match plan.supersedes {
                Some(old) => format!("revision {} of subject {:?} (revision {old} kept)", f.revision, f.subject.as_deref().unwrap_or("")),
                None => "a new fact".to_string(),
            };
            if f.scope == Scope::Global {
                mem.put_global(f.clone());
                return ToolOutput::ok(format!(
                    "remembered global fact {} ({what}); the laptop keeps it in the user's global memory, not this host\n{GLOBAL_FILE_OPEN}{}.md\">\n{}{GLOBAL_FILE_CLOSE}",
                    f.id,
                    f.id,
                    f.to_markdown()
                ));
            }
            let written = match plan.supersedes {
                Some(_) => mem.project().supersede(&f),
                None => mem.project().create(&f),
            };
            mem.invalidate();
            match written {
                Ok(_) => ToolOutput::ok(format!(
                    "remembered project fact {} ({what}); later sessions in this workspace recall it when a message matches{}",
                    f.id,
                    if f.pinned { "; pinned facts join the standing instructions from the next session on" } else { "" }
                )),
                Err(e) => ToolOutput::err(format!("the fact was not saved: {e}")),
            }
        })
        .await
    }
}
