//! `memory`: read the remembered facts (read-only): search them, show one with its earlier
//! revisions, or list them.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::tools::{blocking, parse_args, Tool, ToolContext, ToolOutput};
use reasonix_forward::memory::fact::truncate;
use reasonix_forward::memory::Scope;

/// Most facts a list or search shows.
const MAX_SHOWN: usize = 50;

/// `memory{query? | id? | list?}`.
pub struct MemoryTool;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    list: Option<bool>,
}

#[async_trait::async_trait]
impl Tool for MemoryTool {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn description(&self) -> &'static str {
        "Read the facts remembered for this workspace (project) and for the user (global). \
         Give `query` to search them (BM25), `id` to read one in full with its earlier \
         revisions, or `list: true` to list them all. Facts matching a user message are \
         already recalled into it in a <recalled-memory> block."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to search for"},
                "id": {"type": "string", "description": "Id of a fact to show in full"},
                "list": {"type": "boolean", "description": "List every fact"}
            },
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
        let Some(mem) = ctx.memory.clone() else {
            return ToolOutput::err("memory is not available in this session");
        };
        blocking(move || {
            let snap = mem.snapshot();
            let line = |f: &reasonix_forward::memory::Fact| {
                format!(
                    "{} · {} · {}{} · {}\n  {}\n",
                    f.id,
                    f.scope.as_str(),
                    f.kind.as_str(),
                    f.subject
                        .as_ref()
                        .map(|s| format!(" · subject {s}"))
                        .unwrap_or_default(),
                    f.updated.get(..10).unwrap_or(&f.updated),
                    truncate(&f.body.replace('\n', " "), 200)
                )
            };
            match (a.query, a.id, a.list.unwrap_or(false)) {
                (Some(q), None, false) => {
                    let ranked = snap.index.search(&q);
                    if ranked.is_empty() {
                        return ToolOutput::ok(format!("no remembered fact matches {q:?}"));
                    }
                    let mut out: String = ranked
                        .iter()
                        .take(MAX_SHOWN)
                        .map(|(i, _)| line(&snap.facts[*i]))
                        .collect();
                    out.push_str(&format!("({} matching facts)", ranked.len()));
                    ToolOutput::ok(out)
                }
                (None, Some(id), false) => match snap.facts.iter().find(|f| f.id == id) {
                    Some(f) => {
                        let mut out = f.to_markdown();
                        if f.scope == Scope::Project {
                            for r in mem.project().revisions(&id) {
                                out.push_str(&format!(
                                    "\n[earlier revision {} · {}]\n{}\n",
                                    r.revision, r.updated, r.body
                                ));
                            }
                        }
                        ToolOutput::ok(out)
                    }
                    None => ToolOutput::err(format!("no fact with id {id:?}")),
                },
                (None, None, true) => {
                    if snap.facts.is_empty() {
                        return ToolOutput::ok("no facts are remembered yet");
                    }
                    let mut out: String = snap.facts.iter().take(MAX_SHOWN).map(line).collect();
                    out.push_str(&format!("({} facts)", snap.facts.len()));
                    if !snap.notices.is_empty() {
                        out.push_str(&format!("\nskipped files:\n{}", snap.notices.join("\n")));
                    }
                    ToolOutput::ok(out)
                }
                _ => ToolOutput::err("give exactly one of `query`, `id` or `list: true`"),
            }
        })
        .await
    }
}
