//! MCP tools as agent tools: naming (`mcp__<server>__<tool>`, sanitised, collisions made
//! unique deterministically), schema canonicalisation and the [`Tool`] adapter.

use std::collections::{BTreeSet, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use reasonix_forward::sync::LockExt;
use serde_json::{json, Value};

use super::client::{McpToolInfo, ProgressSink};
use super::manager::Server;
use super::McpError;
use crate::tools::{canonicalize, Tool, ToolContext, ToolOutput};

tokio::task_local! {
    static PROGRESS: ProgressSink;
}

/// Runs `fut` (typically `tool.run(args, ctx)`) with `sink` receiving the progress of every
/// MCP call made inside it. The agent wraps each tool call in this to turn
/// `notifications/progress` into `ToolProgress{call_id, …}` for the client. Calls made outside
/// any `with_progress` send no progress token.
pub async fn with_progress<F: Future>(sink: ProgressSink, fut: F) -> F::Output {
    PROGRESS.scope(sink, fut).await
}

/// `name` with every character outside `[A-Za-z0-9_-]` replaced by `_`.
pub fn sanitize_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The exposed names of `(server, tool)` pairs, in the input order: `mcp__<server>__<tool>`
/// sanitised. When two pairs sanitise to the same name, the pairs are ordered by
/// `(server, tool)` and the first keeps the name; the others get `_2`, `_3`, … (skipping any
/// name already taken), so the result depends only on the set of pairs, never on start order.
pub fn exposed_names(pairs: &[(String, String)]) -> Vec<String> {
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    reasonix_forward::sort::sort_by(&mut order, |&a, &b| pairs[a].cmp(&pairs[b]));
    let bases: Vec<String> = pairs
        .iter()
        .map(|(s, t)| format!("mcp__{}__{}", sanitize_name(s), sanitize_name(t)))
        .collect();
    // Names used by first holders are reserved up front, so a suffixed name never steals a
    // name that another pair would get unsuffixed.
    let mut taken: BTreeSet<String> = BTreeSet::new();
    let mut first: Vec<bool> = vec![false; pairs.len()];
    for &i in &order {
        if taken.insert(bases[i].clone()) {
            first[i] = true;
        }
    }
    let mut out = vec![String::new(); pairs.len()];
    for &i in &order {
        if first[i] {
            out[i] = bases[i].clone();
            continue;
        }
        let mut n = 2;
        loop {
            let cand = format!("{}_{n}", bases[i]);
            if taken.insert(cand.clone()) {
                out[i] = cand;
                break;
            }
            n += 1;
        }
    }
    out
}

/// Interns a string for the `&'static str` the [`Tool`] trait returns. Each distinct text is
/// leaked once; tool names and descriptions are few and live for the whole process anyway.
fn intern(s: &str) -> &'static str {
    static SET: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut set = SET
        .get_or_init(|| Mutex::new(HashSet::new()))
        .lock_or_recover();
    if let Some(hit) = set.get(s) {
        return hit;
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    set.insert(leaked);
    leaked
}

/// The `parameters` schema of an MCP tool: `inputSchema` with keys sorted at every depth,
/// the top-level `$schema` dropped (some providers reject it) and `type: object` ensured.
fn canonical_schema(input: &Value) -> Value {
    let mut v = match input {
        Value::Object(_) => input.clone(),
        _ => json!({"type": "object"}),
    };
    if let Value::Object(m) = &mut v {
        m.remove("$schema");
        m.entry("type").or_insert_with(|| json!("object"));
        if m.get("type") == Some(&json!("object")) {
            m.entry("properties").or_insert_with(|| json!({}));
        }
    }
    canonicalize(&v)
}

/// One MCP tool registered as an agent tool.
pub struct McpTool {
    name: &'static str,
    description: &'static str,
    parameters: Value,
    read_only: bool,
    remote_name: String,
    /// The server's or tool's own timeout from its spec, if any.
    own_timeout: Option<Duration>,
    /// The manager's default, for direct [`call`](McpTool::call)s.
    default_timeout: Duration,
    server: Arc<Server>,
}

impl McpTool {
    pub(crate) fn new(
        exposed: &str,
        info: &McpToolInfo,
        own_timeout: Option<Duration>,
        default_timeout: Duration,
        server: Arc<Server>,
    ) -> Self {
        let description = if info.description.trim().is_empty() {
            format!("Tool `{}` of MCP server `{}`.", info.name, server.spec.name)
        } else {
            info.description.clone()
        };
        Self {
            name: intern(exposed),
            description: intern(&description),
            parameters: canonical_schema(&info.input_schema),
            read_only: info.read_only,
            remote_name: info.name.clone(),
            own_timeout,
            default_timeout,
            server,
        }
    }

    /// The server it belongs to.
    pub fn server_name(&self) -> &str {
        &self.server.spec.name
    }

    /// The server's own name for the tool.
    pub fn remote_name(&self) -> &str {
        &self.remote_name
    }

    /// The call timeout of a direct [`call`](Self::call) (tool override, server override or
    /// the manager's default).
    pub fn timeout(&self) -> Duration {
        self.own_timeout.unwrap_or(self.default_timeout)
    }

    /// The call timeout under a session whose policy allows `limit`: the server's or tool's
    /// own timeout when it is shorter, else `limit`. A workspace file declares the server, so
    /// its timeouts may only shorten what the session allows (tighten-only, like every
    /// project setting).
    pub fn timeout_within(&self, limit: Duration) -> Duration {
        match self.own_timeout {
            Some(own) => own.min(limit),
            None => limit,
        }
    }

    /// Calls the tool with [`timeout`](Self::timeout); progress goes to `progress`. Starts
    /// (or restarts) the server first when it is not running. Failures of any kind come back
    /// as an error result for the model.
    pub async fn call(&self, args: Value, progress: Option<ProgressSink>) -> ToolOutput {
        self.call_with_timeout(args, progress, self.timeout(), None)
            .await
    }

    /// [`call`](Self::call), with the server's elicitations during the call going to
    /// `elicitor` (the session's user) instead of being declined.
    pub async fn call_eliciting(
        &self,
        args: Value,
        progress: Option<ProgressSink>,
        elicitor: Arc<dyn super::Elicitor>,
    ) -> ToolOutput {
        self.call_with_timeout(args, progress, self.timeout(), Some(elicitor))
            .await
    }

    async fn call_with_timeout(
        &self,
        args: Value,
        progress: Option<ProgressSink>,
        timeout: Duration,
        elicitor: Option<Arc<dyn super::Elicitor>>,
    ) -> ToolOutput {
        let server = &self.server;
        let sname = &server.spec.name;
        let client = match server.client().await {
            Ok(c) => c,
            Err(e) => {
                return ToolOutput::err(format!(
                    "MCP server `{sname}` is not available: {e}. The call was not made; it will \
                     be retried when the tool is called again."
                ))
            }
        };
        match client
            .call_tool_eliciting(&self.remote_name, args, timeout, progress, elicitor)
            .await
        {
            Ok(r) => {
                let text = r.text();
                if r.is_error {
                    ToolOutput::err(if text.is_empty() {
                        format!("MCP tool `{}` failed", self.remote_name)
                    } else {
                        text
                    })
                } else {
                    ToolOutput::ok(text)
                }
            }
            Err(McpError::Closed(reason)) => {
                server.mark_crashed(&client, &reason).await;
                ToolOutput::err(format!(
                    "MCP server `{sname}` exited during the call to `{}`; the result is unknown. \
                     {reason}\nThe server will be restarted on the next call.",
                    self.remote_name
                ))
            }
            Err(e @ McpError::Timeout { .. }) => ToolOutput::err(format!(
                "MCP server `{sname}`: {e}; the request was cancelled. Try a smaller request."
            )),
            Err(e @ McpError::Rpc { .. }) => ToolOutput::err(format!(
                "MCP server `{sname}` rejected the call to `{}`: {e}",
                self.remote_name
            )),
            Err(e) => ToolOutput::err(format!(
                "MCP server `{sname}`, tool `{}`: {e}",
                self.remote_name
            )),
        }
    }
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn name(&self) -> &'static str {
        self.name
    }

    fn description(&self) -> &'static str {
        self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let progress = PROGRESS.try_with(Arc::clone).ok();
        let timeout = self.timeout_within(ctx.mcp_call_timeout);
        self.call_with_timeout(args, progress, timeout, Some(Arc::clone(&ctx.elicit)))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str, t: &str) -> (String, String) {
        (s.to_string(), t.to_string())
    }

    #[test]
    fn sanitises() {
        assert_eq!(sanitize_name("get-sum"), "get-sum");
        assert_eq!(sanitize_name("a.b c/é"), "a_b_c__");
    }

    #[test]
    fn collisions_are_order_independent() {
        let a = vec![
            p("my.srv", "x"),
            p("my_srv", "x"),
            p("my srv", "x"),
            p("other", "y"),
        ];
        let names = exposed_names(&a);
        // Sorted: "my srv" < "my.srv" < "my_srv".
        assert_eq!(
            names,
            vec![
                "mcp__my_srv__x_2",
                "mcp__my_srv__x_3",
                "mcp__my_srv__x",
                "mcp__other__y"
            ]
        );
        let mut b = a.clone();
        b.reverse();
        let mut names_b = exposed_names(&b);
        names_b.reverse();
        assert_eq!(names, names_b);
    }

    #[test]
    fn suffix_never_steals_a_real_name() {
        // `t_2` exists as a real tool name; the collision suffix must skip it.
        let a = vec![p("a.b", "t"), p("a_b", "t"), p("a_b", "t_2")];
        let names = exposed_names(&a);
        assert_eq!(names, vec!["mcp__a_b__t", "mcp__a_b__t_3", "mcp__a_b__t_2"]);
    }

    #[test]
    fn schema_is_canonical() {
        let s = canonical_schema(
            &json!({"$schema": "x", "required": ["b"], "properties": {"b": {"type": "string", "description": "d"}}}),
        );
        assert_eq!(
            s.to_string(),
            r#"{"properties":{"b":{"description":"d","type":"string"}},"required":["b"],"type":"object"}"#
        );
    }
}
