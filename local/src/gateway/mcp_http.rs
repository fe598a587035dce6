//! Laptop-side HTTP MCP servers (#35 §3): `[[mcp]]` with a `url` in the user's config runs on
//! the laptop, so its sign-in token (`reasonix mcp login NAME`, `/mcp login NAME`; the same
//! OAuth flow and token file, [`super::oauth`]) never leaves the laptop at all. The host
//! reaches the server through an MCP channel like any laptop server; here that channel's
//! JSON-RPC lines become Streamable HTTP POSTs (one per line, in order; each answered with
//! JSON, an SSE stream read concurrently, or 202), with `Mcp-Session-Id` kept and the current
//! access token (refreshed when due) as the bearer. A 401 answers the request with an error
//! that names the sign-in command.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reasonix_forward::sync::LockExt;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::mcp_host::{McpHostChannels, McpOpener, ServerDiagnostics};

/// Lines buffered each way.
const DEPTH: usize = 256;

/// An opener for the laptop HTTP server `name` at `url` (`home`: the token file's folder).
pub fn opener(
    name: &str,
    url: &str,
    headers: BTreeMap<String, String>,
    home: PathBuf,
) -> McpOpener {
    let (name, url) = (name.to_string(), url.to_string());
    Arc::new(move || open(&name, &url, headers.clone(), home.clone()))
}

fn open(
    name: &str,
    url: &str,
    headers: BTreeMap<String, String>,
    home: PathBuf,
) -> Result<McpHostChannels, String> {
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| e.to_string())?;
    let (to_server, mut lines_in) = mpsc::channel::<String>(DEPTH);
    let (lines_out, from_server) = mpsc::channel::<String>(DEPTH);
    let diagnostics = ServerDiagnostics::new();
    let diag = Arc::clone(&diagnostics);
    let session: Arc<Mutex<Option<String>>> = Arc::default();
    let (name, url) = (name.to_string(), url.to_string());
    tokio::spawn(async move {
        while let Some(line) = lines_in.recv().await {
            let id = serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|v| v.get("id").cloned().filter(|_| v.get("method").is_some()));
            let store = super::oauth::TokenStore::in_home(&home);
            let mut req = http
                .post(&url)
                .header("Content-Type", "application/json")
                .header("Accept", "application/json, text/event-stream")
                .body(line);
            for (k, v) in &headers {
                req = req.header(k, v);
            }
            if !headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("authorization"))
            {
                match super::oauth::access_token(&store, &url).await {
                    Ok(Some(t)) => req = req.bearer_auth(t),
                    Ok(None) => {}
                    Err(e) => {
                        answer_error(&lines_out, id, &e).await;
                        continue;
                    }
                }
            }
            if let Some(s) = session.lock_or_recover().clone() {
                req = req.header("Mcp-Session-Id", s);
            }
            let resp = match req.send().await {
                Ok(r) => r,
                Err(e) => {
                    diag.set_exit(format!("HTTP request to {url} failed: {e}"));
                    answer_error(&lines_out, id, &format!("HTTP request to {url}: {e}")).await;
                    continue;
                }
            };
            let status = resp.status();
            if let Some(s) = resp
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
            {
                *session.lock_or_recover() = Some(s.to_string());
            }
            if status.as_u16() == 401 {
                let msg = format!(
                    "HTTP 401 from {url} (the server needs sign-in: run `reasonix mcp login {name}` or `/mcp login {name}`, then use the server again)"
                );
                answer_error(&lines_out, id, &msg).await;
                continue;
            }
            if !status.is_success() {
                let body = resp.text().await.unwrap_or_default();
                let msg = format!("HTTP {status} from {url}: {}", body.trim());
                answer_error(&lines_out, id, &msg).await;
                continue;
            }
            let sse = resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|c| c.starts_with("text/event-stream"));
            // Bodies are read concurrently: a call's stream may carry a request (an
            // elicitation) whose answer is the next POST.
            let out = lines_out.clone();
            tokio::spawn(async move { read_body(resp, sse, &out).await });
        }
    });
    Ok(McpHostChannels {
        to_server,
        from_server,
        diagnostics,
    })
}

/// A JSON-RPC error answer for request `id` (none for a notification or a response).
async fn answer_error(out: &mpsc::Sender<String>, id: Option<Value>, message: &str) {
    if let Some(id) = id {
        let line = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": -32000, "message": message},
        });
        let _ = out.send(line.to_string()).await;
    }
}

/// Passes a response body on as lines: JSON as one line, SSE `data:` events one each.
async fn read_body(mut resp: reqwest::Response, sse: bool, out: &mpsc::Sender<String>) {
    if !sse {
        if let Ok(text) = resp.text().await {
            let text = text.trim();
            if !text.is_empty() {
                let _ = out.send(text.to_string()).await;
            }
        }
        return;
    }
    let mut buf = String::new();
    let mut data = String::new();
    while let Ok(Some(chunk)) = resp.chunk().await {
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(nl) = buf.find('\n') {
            let line = buf[..nl].trim_end_matches('\r').to_string();
            buf.drain(..=nl);
            if line.is_empty() {
                if !data.is_empty() && out.send(std::mem::take(&mut data)).await.is_err() {
                    return;
                }
            } else if let Some(d) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(d.strip_prefix(' ').unwrap_or(d));
            }
        }
    }
    if !data.is_empty() {
        let _ = out.send(data).await;
    }
}
