//! `fleet`: a dependency graph of subagents, each started when its dependencies finished
//! (with their answers in its prompt), within the same limits as `parallel_tasks`. The graph
//! is validated before anything runs: a cycle or an unknown id is refused, naming it.

use serde::Deserialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::delegate::fleet::Schedule;
use crate::delegate::{ChildResult, ChildSpec};
use crate::tools::{bound_to, parse_args, Tool, ToolContext, ToolOutput};

/// `fleet{items[{id, prompt, depends_on[], profile?, write_paths?, description?}],
/// fail_fast?}`.
pub struct FleetTool;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    items: Vec<Item>,
    #[serde(default)]
    fail_fast: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Item {
    id: String,
    prompt: String,
    #[serde(default)]
    depends_on: Vec<String>,
    #[serde(default)]
    profile: Option<String>,
    #[serde(default)]
    write_paths: Option<Vec<String>>,
    #[serde(default)]
    description: Option<String>,
}

/// Most items in one fleet.
const MAX_ITEMS: usize = 128;
/// Bytes of a dependency's answer handed to a dependent.
const DEP_ANSWER_BOUND: usize = 4 * 1024;

#[async_trait::async_trait]
impl Tool for FleetTool {
    fn name(&self) -> &'static str {
        "fleet"
    }

    fn description(&self) -> &'static str {
        "Run a graph of subagent tasks: an item starts when its depends_on items finished and \
         gets their answers. Cycles and unknown ids are refused."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "prompt": {"type": "string"},
                            "depends_on": {"type": "array", "items": {"type": "string"}},
                            "profile": {"type": "string"},
                            "write_paths": {"type": "array", "items": {"type": "string"}},
                            "description": {"type": "string"}
                        },
                        "required": ["id", "prompt"],
                        "additionalProperties": false
                    }
                },
                "fail_fast": {"type": "boolean", "description": "Start no more items after a failure"}
            },
            "required": ["items"],
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
        if a.items.len() > MAX_ITEMS {
            return ToolOutput::err(format!(
                "a fleet holds at most {MAX_ITEMS} items, not {}",
                a.items.len()
            ));
        }
        let graph: Vec<(String, Vec<String>)> = a
            .items
            .iter()
            .map(|i| (i.id.clone(), i.depends_on.clone()))
            .collect();
        let mut schedule = match Schedule::new(&graph, a.fail_fast) {
            Ok(s) => s,
            Err(e) => return ToolOutput::err(e),
        };
        // Every item is checked before any runs.
        let mut prepared = Vec::new();
        for item in &a.items {
            let spec = ChildSpec {
                prompt: item.prompt.clone(),
                description: item
                    .description
                    .clone()
                    .unwrap_or_else(|| format!("fleet item {}", item.id)),
                profile: item.profile.clone(),
                write_paths: item.write_paths.clone(),
                ..ChildSpec::default()
            };
            match crate::delegate::prepare(ctx, spec) {
                Ok(p) => prepared.push(Some(p)),
                Err(e) => {
                    return ToolOutput::err(format!("item {:?}: {e}; nothing was run", item.id))
                }
            }
        }
        let cancel = CancellationToken::new();
        let _guard = cancel.clone().drop_guard();
        let mut results: Vec<Option<ChildResult>> = vec![None; a.items.len()];
        let mut set = tokio::task::JoinSet::new();
        loop {
            for i in schedule.ready() {
                let Some(mut p) = prepared[i].take() else {
                    continue;
                };
                let deps = &a.items[i].depends_on;
                if !deps.is_empty() {
                    let mut extra = String::from("\n\nResults of the tasks this one depends on:");
                    for d in deps {
                        let j = a.items.iter().position(|x| &x.id == d).unwrap_or(0);
                        if let Some(r) = &results[j] {
                            extra.push_str(&format!(
                                "\n\n### {d}\n{}",
                                bound_to(&r.answer, DEP_ANSWER_BOUND)
                            ));
                        }
                    }
                    p.append_prompt(&extra);
                }
                let cancel = cancel.clone();
                let id = crate::delegate::register(&p);
                set.spawn(async move { (i, crate::delegate::run_registered(p, id, cancel).await) });
            }
            if schedule.over() {
                break;
            }
            match set.join_next().await {
                Some(Ok((i, r))) => {
                    schedule.finish(i, r.ok());
                    results[i] = Some(r);
                }
                Some(Err(e)) => {
                    return ToolOutput::err(format!("internal error: a fleet item panicked: {e}"))
                }
                None => break,
            }
        }
        let mut ok = 0;
        let mut body = String::new();
        for (i, item) in a.items.iter().enumerate() {
            match (&results[i], &schedule.states()[i]) {
                (Some(r), _) => {
                    if r.ok() {
                        ok += 1;
                    }
                    body.push_str(&format!("\n## {} → {}\n{}\n", item.id, r.id, r.render()));
                }
                (None, crate::delegate::fleet::ItemState::Skipped(why)) => {
                    body.push_str(&format!("\n## {}\n{why}\n", item.id));
                }
                (None, other) => body.push_str(&format!("\n## {}\nnot run ({other:?})\n", item.id)),
            }
        }
        let text = format!("{ok} of {} fleet items completed.\n{body}", a.items.len());
        if ok == a.items.len() {
            ToolOutput::ok(text)
        } else {
            ToolOutput::err(text)
        }
    }
}
