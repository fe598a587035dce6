//! `read_subagent_result`: the answer (and on request the transcript) of a subagent,
//! waiting for a background one to end.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::{bound_for_context, parse_args, Tool, ToolContext, ToolOutput};

/// `read_subagent_result{id, wait?, transcript?}`.
pub struct ReadSubagentResultTool;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    id: String,
    #[serde(default = "yes")]
    wait: bool,
    #[serde(default)]
    transcript: bool,
}

fn yes() -> bool {
    true
}

#[async_trait::async_trait]
impl Tool for ReadSubagentResultTool {
    fn name(&self) -> &'static str {
        "read_subagent_result"
    }

    fn description(&self) -> &'static str {
        "A subagent's answer by id (waits unless wait is false); transcript: its whole \
         conversation."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "wait": {"type": "boolean"},
                "transcript": {"type": "boolean"}
            },
            "required": ["id"],
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
        let Some(scope) = &ctx.delegate else {
            return ToolOutput::err("subagents run only inside a host session");
        };
        match scope.board().result(&a.id, a.wait).await {
            Err(e) => ToolOutput::err(e),
            Ok((status, None, _)) => ToolOutput::ok(format!(
                "subagent {} is {}; call again later (or with wait: true) for its answer",
                a.id,
                status.label()
            )),
            Ok((_, Some(r), transcript)) if a.transcript => ToolOutput::ok(format!(
                "[transcript of subagent {} ({})]\n{}",
                r.id,
                r.status.label(),
                bound_for_context(transcript.as_deref().unwrap_or("(none)"))
            )),
            Ok((_, Some(r), _)) => ToolOutput::ok(r.render()),
        }
    }
}
