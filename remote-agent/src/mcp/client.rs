//! One JSON-RPC session with one server over an [`McpConnection`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reasonix_forward::sync::LockExt;
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, oneshot};

use super::elicit::{parse_request, Elicitor};
use super::transport::{Diagnostics, McpConnection};
use super::{McpError, PROTOCOL_VERSION};

/// Progress of a running `tools/call` (`notifications/progress`).
#[derive(Debug, Clone, PartialEq)]
pub struct McpProgress {
    /// Progress so far (increases with every notification).
    pub progress: f64,
    /// Total, when the server knows it.
    pub total: Option<f64>,
    /// Human message, when the server sends one.
    pub message: Option<String>,
}

impl McpProgress {
    /// One line for the UI: `2/5 indexing`, `40%`, `3`.
    pub fn render(&self) -> String {
        let mut s = match self.total {
            Some(t) => format!("{}/{}", fmt_num(self.progress), fmt_num(t)),
            None => fmt_num(self.progress),
        };
        if let Some(m) = &self.message {
            s.push(' ');
            s.push_str(m);
        }
        s
    }
}

fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// Receives the progress notifications of one call.
pub type ProgressSink = Arc<dyn Fn(McpProgress) + Send + Sync>;

/// What `initialize` told us about the server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerInfo {
    /// The protocol revision the server chose.
    pub protocol_version: String,
    /// `serverInfo.name`.
    pub name: String,
    /// `serverInfo.version`.
    pub version: String,
    /// `instructions`, if any.
    pub instructions: Option<String>,
    /// `capabilities` as sent (`prompts`, `resources`, …).
    pub capabilities: Value,
}

impl ServerInfo {
    /// True when the server advertised the capability `name` (`prompts`, `resources`).
    pub fn has_capability(&self, name: &str) -> bool {
        self.capabilities.get(name).is_some_and(|c| !c.is_null())
    }
}

/// One argument of a prompt, as `prompts/list` declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPromptArg {
    /// Its name (the key of `prompts/get` `arguments`).
    pub name: String,
    /// Its description (may be empty).
    pub description: String,
    /// `required == true`.
    pub required: bool,
}

/// One prompt as the server lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPromptInfo {
    /// The server's own name for it.
    pub name: String,
    /// Its description (may be empty).
    pub description: String,
    /// Its arguments, in the declared order (positional arguments map in this order).
    pub arguments: Vec<McpPromptArg>,
}

/// One resource as `resources/list` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpResourceInfo {
    /// Its URI.
    pub uri: String,
    /// Its name (may be empty).
    pub name: String,
    /// Its description (may be empty).
    pub description: String,
}

/// The text of MCP content items (a prompt message's `content`, a tool result's items):
/// text verbatim, embedded text resources with their URI, binary items described in one line.
pub fn content_text(items: &[Value]) -> String {
    CallResult {
        content: items.to_vec(),
        structured: None,
        is_error: false,
    }
    .text()
}

fn str_of(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

/// One tool as the server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpToolInfo {
    /// The server's own name for it.
    pub name: String,
    /// Its description (may be empty).
    pub description: String,
    /// `inputSchema` as sent.
    pub input_schema: Value,
    /// `annotations.readOnlyHint == true`.
    pub read_only: bool,
}

/// The result of a `tools/call`.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    /// `content` items as sent.
    pub content: Vec<Value>,
    /// `structuredContent`, if any.
    pub structured: Option<Value>,
    /// `isError`.
    pub is_error: bool,
}

impl CallResult {
    /// The result as text for the model: text items verbatim, other items described in one
    /// line each; `structuredContent` when there is no content at all.
    pub fn text(&self) -> String {
        let mut parts = Vec::new();
        for item in &self.content {
            let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
            let s = match kind {
                "text" => item
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                "image" | "audio" => {
                    let mime = item.get("mimeType").and_then(Value::as_str).unwrap_or("?");
                    let len = item.get("data").and_then(Value::as_str).map_or(0, str::len);
                    format!("[{kind} {mime}, {len} bytes of base64 not shown]")
                }
                "resource" => {
                    let r = item.get("resource").cloned().unwrap_or(Value::Null);
                    let uri = r.get("uri").and_then(Value::as_str).unwrap_or("?");
                    match r.get("text").and_then(Value::as_str) {
                        Some(t) => format!("[resource {uri}]\n{t}"),
                        None => format!("[resource {uri} (binary) not shown]"),
                    }
                }
                "resource_link" => {
                    let uri = item.get("uri").and_then(Value::as_str).unwrap_or("?");
                    let name = item.get("name").and_then(Value::as_str).unwrap_or("");
                    format!("[resource link {uri} {name}]").replace(" ]", "]")
                }
                _ => item.to_string(),
            };
            parts.push(s);
        }
        if parts.is_empty() {
            if let Some(s) = &self.structured {
                return s.to_string();
            }
        }
        parts.join("\n")
    }
}

type Reply = Result<Value, McpError>;

struct Shared {
    label: String,
    tx: mpsc::Sender<String>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
    progress: Mutex<HashMap<String, ProgressSink>>,
    closed: Mutex<Option<String>>,
    diagnostics: Arc<Diagnostics>,
    next_id: AtomicU64,
    malformed: AtomicU64,
    /// The roots answered to `roots/list` (`file://` URIs); `None` = no `roots` capability.
    roots: Option<Vec<Value>>,
    /// Set by `notifications/tools/list_changed`; read by [`McpClient::take_tools_changed`].
    tools_changed: AtomicBool,
    /// Who answers `elicitation/create`: the elicitor of the latest call in flight (by
    /// request id); none means decline.
    elicitors: Mutex<Vec<(u64, Arc<dyn Elicitor>)>>,
}

/// A live session with one server. Cheap to share behind an `Arc`; dropping the last handle
/// ends the connection (a stdio server is killed).
pub struct McpClient {
    shared: Arc<Shared>,
    reader: tokio::task::JoinHandle<()>,
    info: ServerInfo,
    _keepalive: Option<Box<dyn Send + Sync>>,
}

impl Drop for McpClient {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl McpClient {
    /// Runs `initialize` and `notifications/initialized` over `conn`, all within `timeout`.
    /// `label` names the server in logs and errors.
    pub async fn connect(
        label: &str,
        conn: McpConnection,
        timeout: Duration,
    ) -> Result<Self, McpError> {
        Self::connect_with_roots(label, conn, timeout, None).await
    }

    /// [`connect`](Self::connect), advertising the `roots` capability when `roots` is set:
    /// the server's `roots/list` is answered with those directories (the workspace root).
    pub async fn connect_with_roots(
        label: &str,
        conn: McpConnection,
        timeout: Duration,
        roots: Option<&[std::path::PathBuf]>,
    ) -> Result<Self, McpError> {
        let roots: Option<Vec<Value>> = roots.map(|dirs| {
            dirs.iter()
                .map(|d| {
                    json!({
                        "uri": file_uri(d),
                        "name": d.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                    })
                })
                .collect()
        });
        let mut capabilities = json!({"elicitation": {"form": {}}});
        if roots.is_some() {
            // The list is fixed for the connection's life, so no list_changed.
            capabilities["roots"] = json!({"listChanged": false});
        }
        let (tx, rx, diagnostics, keepalive) = conn.into_parts();
        let shared = Arc::new(Shared {
            label: label.to_string(),
            tx,
            pending: Mutex::new(HashMap::new()),
            progress: Mutex::new(HashMap::new()),
            closed: Mutex::new(None),
            diagnostics,
            next_id: AtomicU64::new(1),
            malformed: AtomicU64::new(0),
            roots,
            tools_changed: AtomicBool::new(false),
            elicitors: Mutex::new(Vec::new()),
        });
        let reader = tokio::spawn(read_loop(shared.clone(), rx));
        let mut client = Self {
            shared,
            reader,
            info: ServerInfo {
                protocol_version: String::new(),
                name: String::new(),
                version: String::new(),
                instructions: None,
                capabilities: Value::Null,
            },
            _keepalive: keepalive,
        };
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": capabilities,
            "clientInfo": {"name": "reasonix", "version": env!("CARGO_PKG_VERSION")},
        });
        let r = client.request("initialize", params, timeout, None).await?;
        let version = r
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| McpError::Protocol("initialize result has no protocolVersion".into()))?;
        let si = r.get("serverInfo").cloned().unwrap_or(Value::Null);
        client.info = ServerInfo {
            protocol_version: version.to_string(),
            name: si
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            version: si
                .get("version")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            instructions: r
                .get("instructions")
                .and_then(Value::as_str)
                .map(str::to_string),
            capabilities: r.get("capabilities").cloned().unwrap_or(Value::Null),
        };
        client.notify("notifications/initialized", None).await?;
        Ok(client)
    }

    /// True (once) when the server sent `notifications/tools/list_changed` since the last
    /// call. The caller decides what a change means; a running session's tools never change.
    pub fn take_tools_changed(&self) -> bool {
        self.shared.tools_changed.swap(false, Ordering::Relaxed)
    }

    /// What the server said about itself.
    pub fn info(&self) -> &ServerInfo {
        &self.info
    }

    /// False once the connection closed (process exited, channel dropped).
    pub fn is_alive(&self) -> bool {
        self.shared.closed.lock_or_recover().is_none()
    }

    /// Why the connection closed, once it did.
    pub fn closed_reason(&self) -> Option<String> {
        self.shared.closed.lock_or_recover().clone()
    }

    /// Stderr tail and exit status of the server, as far as known.
    pub fn diagnostics(&self) -> &Arc<Diagnostics> {
        &self.shared.diagnostics
    }

    /// Lines from the server that were not valid JSON-RPC and were skipped.
    pub fn malformed_lines(&self) -> u64 {
        self.shared.malformed.load(Ordering::Relaxed)
    }

    /// All tools, following `nextCursor` pages; each page within `timeout`.
    pub async fn list_tools(&self, timeout: Duration) -> Result<Vec<McpToolInfo>, McpError> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        // A server that keeps handing out cursors must not keep us here forever.
        for _ in 0..1000 {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let r = self.request("tools/list", params, timeout, None).await?;
            let tools = r.get("tools").and_then(Value::as_array).ok_or_else(|| {
                McpError::Protocol("tools/list result has no `tools` array".into())
            })?;
            for t in tools {
                let Some(name) = t.get("name").and_then(Value::as_str) else {
                    tracing::warn!(target: "mcp", server = %self.shared.label, "tool without a name skipped");
                    continue;
                };
                out.push(McpToolInfo {
                    name: name.to_string(),
                    description: t
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    input_schema: t
                        .get("inputSchema")
                        .cloned()
                        .unwrap_or_else(|| json!({"type": "object"})),
                    read_only: t
                        .pointer("/annotations/readOnlyHint")
                        .and_then(Value::as_bool)
                        == Some(true),
                });
            }
            match r.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() && cursor.as_deref() != Some(next) => {
                    cursor = Some(next.to_string())
                }
                _ => return Ok(out),
            }
        }
        Err(McpError::Protocol(
            "tools/list kept returning new cursors (over 1000 pages)".into(),
        ))
    }

    /// The server's prompts (`prompts/list`, following at most 20 pages of `nextCursor`);
    /// empty when the server did not advertise the `prompts` capability.
    pub async fn list_prompts(&self, timeout: Duration) -> Result<Vec<McpPromptInfo>, McpError> {
        let mut out = Vec::new();
        if !self.info.has_capability("prompts") {
            return Ok(out);
        }
        let mut cursor: Option<String> = None;
        for _ in 0..20 {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let r = self.request("prompts/list", params, timeout, None).await?;
            let prompts = r.get("prompts").and_then(Value::as_array).ok_or_else(|| {
                McpError::Protocol("prompts/list result has no `prompts` array".into())
            })?;
            for p in prompts {
                let name = str_of(p, "name");
                if name.is_empty() {
                    continue;
                }
                let arguments = p
                    .get("arguments")
                    .and_then(Value::as_array)
                    .map(|args| {
                        args.iter()
                            .filter(|a| !str_of(a, "name").is_empty())
                            .map(|a| McpPromptArg {
                                name: str_of(a, "name"),
                                description: str_of(a, "description"),
                                required: a.get("required").and_then(Value::as_bool) == Some(true),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                out.push(McpPromptInfo {
                    name,
                    description: str_of(p, "description"),
                    arguments,
                });
            }
            match r.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() && cursor.as_deref() != Some(next) => {
                    cursor = Some(next.to_string())
                }
                _ => break,
            }
        }
        Ok(out)
    }

    /// `prompts/get`: the prompt's messages (`role` and `content` as sent).
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        timeout: Duration,
    ) -> Result<Vec<Value>, McpError> {
        let params = json!({ "name": name, "arguments": arguments });
        let r = self.request("prompts/get", params, timeout, None).await?;
        r.get("messages")
            .and_then(Value::as_array)
            .cloned()
            .ok_or_else(|| McpError::Protocol("prompts/get result has no `messages` list".into()))
    }

    /// The first page of `resources/list` (at most `max` entries); empty when the server did
    /// not advertise the `resources` capability.
    pub async fn list_resources(
        &self,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<McpResourceInfo>, McpError> {
        if !self.info.has_capability("resources") {
            return Ok(Vec::new());
        }
        let r = self
            .request("resources/list", json!({}), timeout, None)
            .await?;
        let list = r
            .get("resources")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                McpError::Protocol("resources/list result has no `resources` array".into())
            })?;
        Ok(list
            .iter()
            .filter(|r| !str_of(r, "uri").is_empty())
            .take(max)
            .map(|r| McpResourceInfo {
                uri: str_of(r, "uri"),
                name: str_of(r, "name"),
                description: str_of(r, "description"),
            })
            .collect())
    }

    /// `resources/read`: the resource's `contents` items as sent.
    pub async fn read_resource(
        &self,
        uri: &str,
        timeout: Duration,
    ) -> Result<Vec<Value>, McpError> {
        let r = self
            .request("resources/read", json!({ "uri": uri }), timeout, None)
            .await?;
        r.get("contents")
            .and_then(Value::as_array)
            .cloned()
            .ok_or_else(|| {
                McpError::Protocol("resources/read result has no `contents` list".into())
            })
    }

    /// Calls tool `name` with `arguments` (an object; `null` means `{}`). Progress
    /// notifications go to `progress` when given (a `progressToken` is sent only then). On
    /// timeout the server is told `notifications/cancelled`.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        timeout: Duration,
        progress: Option<ProgressSink>,
    ) -> Result<CallResult, McpError> {
        self.call_tool_eliciting(name, arguments, timeout, progress, None)
            .await
    }

    /// [`call_tool`](Self::call_tool); an `elicitation/create` of the server while the call
    /// runs goes to `elicitor` (declined without one).
    pub async fn call_tool_eliciting(
        &self,
        name: &str,
        arguments: Value,
        timeout: Duration,
        progress: Option<ProgressSink>,
        elicitor: Option<Arc<dyn Elicitor>>,
    ) -> Result<CallResult, McpError> {
        let arguments = if arguments.is_null() {
            Value::Object(Map::new())
        } else {
            arguments
        };
        let params = json!({ "name": name, "arguments": arguments });
        let key = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        if let Some(e) = elicitor {
            self.shared.elicitors.lock_or_recover().push((key, e));
        }
        let r = self.request("tools/call", params, timeout, progress).await;
        self.shared
            .elicitors
            .lock_or_recover()
            .retain(|(k, _)| *k != key);
        let r = r?;
        let content = match r.get("content") {
            Some(Value::Array(a)) => a.clone(),
            None | Some(Value::Null) => Vec::new(),
            Some(_) => {
                return Err(McpError::Protocol(
                    "tools/call result `content` is not a list".into(),
                ))
            }
        };
        Ok(CallResult {
            content,
            structured: r.get("structuredContent").cloned(),
            is_error: r.get("isError").and_then(Value::as_bool).unwrap_or(false),
        })
    }

    /// Sends a request and waits for its answer.
    async fn request(
        &self,
        method: &str,
        mut params: Value,
        timeout: Duration,
        progress: Option<ProgressSink>,
    ) -> Result<Value, McpError> {
        if let Some(reason) = self.closed_reason() {
            return Err(McpError::Closed(reason));
        }
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let token = progress.map(|sink| {
            let token = format!("reasonix-{id}");
            self.shared
                .progress
                .lock_or_recover()
                .insert(token.clone(), sink);
            if let Value::Object(m) = &mut params {
                m.insert("_meta".into(), json!({ "progressToken": token }));
            }
            token
        });
        let (done_tx, done_rx) = oneshot::channel();
        self.shared.pending.lock_or_recover().insert(id, done_tx);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let result = if self.shared.tx.send(msg.to_string()).await.is_err() {
            Err(McpError::Closed(
                self.closed_reason()
                    .unwrap_or_else(|| "the connection is closed".into()),
            ))
        } else {
            match tokio::time::timeout(timeout, done_rx).await {
                Ok(Ok(reply)) => reply,
                Ok(Err(_)) => Err(McpError::Closed(
                    self.closed_reason()
                        .unwrap_or_else(|| "the connection is closed".into()),
                )),
                Err(_) => {
                    let what = match method {
                        "tools/call" => format!(
                            "tools/call `{}`",
                            msg.pointer("/params/name")
                                .and_then(Value::as_str)
                                .unwrap_or("?")
                        ),
                        other => other.to_string(),
                    };
                    let cancel = json!({"requestId": id, "reason": format!("timed out after {} s", timeout.as_secs())});
                    let _ = self.notify("notifications/cancelled", Some(cancel)).await;
                    Err(McpError::Timeout {
                        what,
                        after: timeout,
                    })
                }
            }
        };
        self.shared.pending.lock_or_recover().remove(&id);
        if let Some(t) = token {
            self.shared.progress.lock_or_recover().remove(&t);
        }
        result
    }

    async fn notify(&self, method: &str, params: Option<Value>) -> Result<(), McpError> {
        let mut msg = json!({"jsonrpc": "2.0", "method": method});
        if let (Some(p), Value::Object(m)) = (params, &mut msg) {
            m.insert("params".into(), p);
        }
        self.shared.tx.send(msg.to_string()).await.map_err(|_| {
            McpError::Closed(
                self.closed_reason()
                    .unwrap_or_else(|| "the connection is closed".into()),
            )
        })
    }
}

/// Routes every line from the server: answers to their waiting request, progress to its sink,
/// server requests answered (`ping`) or refused. A line that is not JSON-RPC is logged and
/// skipped; it never ends the session.
async fn read_loop(shared: Arc<Shared>, mut rx: mpsc::Receiver<String>) {
    while let Some(line) = rx.recv().await {
        let v: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                skip_malformed(&shared, &line, &e.to_string());
                continue;
            }
        };
        match v {
            Value::Array(items) => {
                for item in items {
                    handle_message(&shared, item).await;
                }
            }
            other => handle_message(&shared, other).await,
        }
    }
    let mut reason = format!("MCP server `{}` closed the connection", shared.label);
    let diag = shared.diagnostics.summary();
    if !diag.is_empty() {
        reason.push_str(": ");
        reason.push_str(&diag);
    }
    *shared.closed.lock_or_recover() = Some(reason);
    // Dropping the senders wakes every waiting request with "closed".
    shared.pending.lock_or_recover().clear();
}

fn skip_malformed(shared: &Shared, line: &str, why: &str) {
    shared.malformed.fetch_add(1, Ordering::Relaxed);
    let short: String = line.chars().take(200).collect();
    tracing::warn!(target: "mcp", server = %shared.label, line = %short, "skipped malformed line from MCP server: {why}");
}

async fn handle_message(shared: &Arc<Shared>, v: Value) {
    let Value::Object(m) = &v else {
        skip_malformed(shared, &v.to_string(), "not a JSON object");
        return;
    };
    let method = m.get("method").and_then(Value::as_str);
    let id = m.get("id").filter(|id| !id.is_null());
    match (method, id) {
        (Some("elicitation/create"), Some(id)) => {
            // Answered on its own task: the user may take a while, and the server's other
            // messages (progress, pings) must keep flowing meanwhile.
            let params = m.get("params").cloned().unwrap_or(Value::Null);
            let elicitor = shared
                .elicitors
                .lock_or_recover()
                .last()
                .map(|(_, e)| Arc::clone(e));
            let shared = Arc::clone(shared);
            let id = id.clone();
            tokio::spawn(async move {
                let reply = match parse_request(&shared.label, &params) {
                    Err(why) => {
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": why}})
                    }
                    Ok(request) => {
                        let answer = match elicitor {
                            Some(e) => e.elicit(request).await,
                            None => {
                                tracing::info!(target: "mcp", server = %shared.label, "elicitation outside a call declined");
                                super::ElicitAnswer::Decline
                            }
                        };
                        json!({"jsonrpc": "2.0", "id": id, "result": answer.to_result()})
                    }
                };
                let _ = shared.tx.send(reply.to_string()).await;
            });
        }
        (Some(method), Some(id)) => {
            // A request from the server: ping, and roots/list when we advertised roots.
            let reply = if method == "ping" {
                json!({"jsonrpc": "2.0", "id": id, "result": {}})
            } else if let (Some(roots), "roots/list") = (&shared.roots, method) {
                json!({"jsonrpc": "2.0", "id": id, "result": {"roots": roots}})
            } else {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("method `{method}` is not supported by this client")}})
            };
            let _ = shared.tx.send(reply.to_string()).await;
        }
        (Some("notifications/progress"), None) => {
            let p = m.get("params").cloned().unwrap_or(Value::Null);
            let token = match p.get("progressToken") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => return,
            };
            let sink = shared.progress.lock_or_recover().get(&token).cloned();
            if let Some(sink) = sink {
                sink(McpProgress {
                    progress: p.get("progress").and_then(Value::as_f64).unwrap_or(0.0),
                    total: p.get("total").and_then(Value::as_f64),
                    message: p.get("message").and_then(Value::as_str).map(str::to_string),
                });
            }
        }
        (Some("notifications/tools/list_changed"), None) => {
            tracing::info!(target: "mcp", server = %shared.label, "MCP server changed its tool list");
            shared.tools_changed.store(true, Ordering::Relaxed);
        }
        (Some(method), None) => {
            tracing::debug!(target: "mcp", server = %shared.label, method, "notification from MCP server ignored");
        }
        (None, Some(id)) => {
            let Some(id) = id.as_u64() else {
                skip_malformed(shared, &v.to_string(), "response id is not one of ours");
                return;
            };
            let Some(waiter) = shared.pending.lock_or_recover().remove(&id) else {
                tracing::debug!(target: "mcp", server = %shared.label, id, "late or unknown response dropped");
                return;
            };
            let reply = if let Some(err) = m.get("error") {
                Err(McpError::Rpc {
                    code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
                    message: err
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                })
            } else {
                Ok(m.get("result").cloned().unwrap_or(Value::Null))
            };
            let _ = waiter.send(reply);
        }
        (None, None) => skip_malformed(
            shared,
            &v.to_string(),
            "neither a request, a notification nor a response",
        ),
    }
}

/// `file://` URI of an absolute path, percent-encoding what RFC 3986 does not allow in a path.
fn file_uri(path: &std::path::Path) -> String {
    let mut out = String::from("file://");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
