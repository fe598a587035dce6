//! `history`: search the session's own history (including what compaction snipped or
//! summarised away) and load an archived message in full.

use serde::Deserialize;
use serde_json::{json, Value};

use super::{parse_args, Tool, ToolContext, ToolOutput};
use crate::compaction::history::{bm25, snippet};

/// `history{query?, load?, limit=5}`.
pub struct HistoryTool;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    load: Option<String>,
    #[serde(default)]
    limit: Option<u64>,
}

/// Most results a search returns.
pub const HISTORY_MAX_RESULTS: u64 = 20;

#[async_trait::async_trait]
impl Tool for HistoryTool {
    fn name(&self) -> &'static str {
        "history"
    }

    fn description(&self) -> &'static str {
        "Search this session's earlier messages and tool results, including those compacted \
         away (snipped tool results and summarised messages are archived, never lost). Give \
         `query` to get ranked snippets with their ids and turns, or `load` with an id (from a \
         search or a snipped-result placeholder) to read that message in full."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to search for (BM25 ranking)"},
                "load": {"type": "string", "description": "Id of a message to return in full"},
                "limit": {"type": "integer", "minimum": 1, "maximum": HISTORY_MAX_RESULTS, "description": "Results of a search (default 5)"}
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
        let source = ctx.history.clone();
        let docs = match tokio::task::spawn_blocking(move || source.documents()).await {
            Ok(d) => d,
            Err(e) => return ToolOutput::err(format!("reading the history failed: {e}")),
        };
        match (a.query, a.load) {
            (Some(_), Some(_)) | (None, None) => ToolOutput::err(
                "give exactly one of `query` (to search) or `load` (an id to read in full)",
            ),
            (None, Some(id)) => match docs.iter().rev().find(|d| d.id == id) {
                Some(d) => ToolOutput::ok(format!(
                    "[{} · turn {} · {}]\n{}",
                    d.id, d.turn, d.role, d.text
                )),
                None => ToolOutput::err(format!(
                    "no message with id {id:?} in this session's history; search with `query` to find ids"
                )),
            },
            (Some(q), None) => {
                let limit = a.limit.unwrap_or(5).clamp(1, HISTORY_MAX_RESULTS) as usize;
                let ranked = bm25(&docs, &q);
                if ranked.is_empty() {
                    return ToolOutput::ok(format!("no earlier message matches {q:?}"));
                }
                let mut out = String::new();
                for (i, score) in ranked.iter().take(limit) {
                    let d = &docs[*i];
                    out.push_str(&format!(
                        "{} · turn {} · {} · score {score:.2}\n  {}\n",
                        d.id,
                        d.turn,
                        d.role,
                        snippet(&d.text, &q, 240)
                    ));
                }
                out.push_str(&format!(
                    "({} of {} matching messages; load one with {{\"load\": ID}})",
                    limit.min(ranked.len()),
                    ranked.len()
                ));
                ToolOutput::ok(out)
            }
        }
    }
}
