//! Streamable HTTP transport: every outgoing message is a POST to the server URL; the answer is
//! either one JSON body or an SSE stream of messages. The `Mcp-Session-Id` the server returns
//! is sent back on every later request.
//!
//! The host binary is static and carries no TLS stack, so this is a small HTTP/1.1 client over
//! a tokio `TcpStream` for plain `http://` URLs only (servers on the host itself or its
//! private network). An `https://` server belongs on the laptop (`run_on = "laptop"`), or
//! behind a local proxy.
//!
//! Not implemented: the optional GET stream for server-initiated messages, resumption with
//! `Last-Event-ID`, and the DELETE at shutdown.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::transport::{Diagnostics, McpConnection, McpTransport};
use super::McpError;

/// How long to wait for a TCP connect and the response head of one POST.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest response head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// Largest JSON body accepted (one message or batch).
const MAX_BODY: usize = 64 * 1024 * 1024;

/// A Streamable HTTP server at a plain `http://` URL.
#[derive(Debug, Clone)]
pub struct HttpTransport {
    url: Url,
    raw_url: String,
    headers: BTreeMap<String, String>,
    /// Where a sign-in token comes from (the laptop), with the server's name.
    auth: Option<(String, Arc<super::LaptopTokens>)>,
}

/// A parsed plain `http://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Url {
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) path: String,
}

impl HttpTransport {
    /// A transport for `url` with extra request `headers` (variables already expanded).
    /// Fails for anything but `http://host[:port][/path]`.
    pub fn new(url: &str, headers: BTreeMap<String, String>) -> Result<Self, McpError> {
        Ok(Self {
            url: parse_url(url)?,
            raw_url: url.to_string(),
            headers,
            auth: None,
        })
    }

    /// Asks `tokens` (the laptop) for a bearer token of server `name` at every connection.
    pub fn with_laptop_tokens(mut self, name: &str, tokens: Arc<super::LaptopTokens>) -> Self {
        self.auth = Some((name.to_string(), tokens));
        self
    }
}

/// `headers` plus `Authorization: Bearer …` when the laptop holds a sign-in for `url` (and
/// no `Authorization` header is configured already).
pub(super) async fn signed_headers(
    headers: &BTreeMap<String, String>,
    auth: Option<&(String, Arc<super::LaptopTokens>)>,
    url: &str,
) -> Result<BTreeMap<String, String>, McpError> {
    let mut headers = headers.clone();
    let Some((name, tokens)) = auth else {
        return Ok(headers);
    };
    if headers
        .keys()
        .any(|k| k.eq_ignore_ascii_case("authorization"))
    {
        return Ok(headers);
    }
    match tokens.token(name, url).await {
        Ok(Some(t)) => {
            headers.insert("Authorization".into(), format!("Bearer {t}"));
        }
        Ok(None) => {}
        Err(e) => {
            return Err(McpError::Connect(format!(
                "the sign-in token for `{name}` could not be had from the laptop: {e}"
            )))
        }
    }
    Ok(headers)
}

/// The hint added to a 401: sign in on the laptop.
pub(super) fn sign_in_hint(auth: Option<&(String, Arc<super::LaptopTokens>)>) -> String {
    match auth {
        Some((name, _)) => format!(
            " (the server needs sign-in: run `reasonix mcp login {name}` on the laptop, then use the server again)"
        ),
        None => String::new(),
    }
}

pub(super) fn parse_url(url: &str) -> Result<Url, McpError> {
    let rest = if let Some(r) = url.strip_prefix("http://") {
        r
    } else if url.starts_with("https://") {
        return Err(McpError::Config(format!(
            "{url}: https is not supported by the host's MCP client (no TLS in the static \
             binary); run this server on the laptop (`run_on = \"laptop\"`) or use plain http"
        )));
    } else {
        return Err(McpError::Config(format!("{url}: expected an http:// URL")));
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.contains('@') {
        return Err(McpError::Config(format!(
            "{url}: credentials in the URL are not supported; use headers"
        )));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let end = v6
            .find(']')
            .ok_or_else(|| McpError::Config(format!("{url}: bad IPv6 host")))?;
        let host = &v6[..end];
        let port = v6[end + 1..].strip_prefix(':');
        (host.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| McpError::Config(format!("{url}: bad port `{p}`")))?,
        None => 80,
    };
    if host.is_empty() {
        return Err(McpError::Config(format!("{url}: missing host")));
    }
    Ok(Url {
        host,
        port,
        path: path.to_string(),
    })
}

#[async_trait::async_trait]
impl McpTransport for HttpTransport {
    async fn open(&self) -> Result<McpConnection, McpError> {
        let mut conn = self.clone();
        conn.headers = signed_headers(&self.headers, self.auth.as_ref(), &self.raw_url).await?;
        let (to_tx, to_rx) = mpsc::channel::<String>(64);
        let (from_tx, from_rx) = mpsc::channel::<String>(256);
        let diag = Diagnostics::new();
        tokio::spawn(pump(conn, to_rx, from_tx, diag.clone()));
        Ok(McpConnection::new(to_tx, from_rx).with_diagnostics(diag))
    }

    fn describe(&self) -> String {
        format!("http: {}", self.raw_url)
    }
}

/// Sends each outgoing line as a POST, in order: the next POST starts only once the previous
/// one's response head arrived, so the server sees messages in the order they were sent
/// (`initialize` before `notifications/initialized` before `tools/list`). Bodies are read
/// concurrently, so long calls do not block others.
async fn pump(
    t: HttpTransport,
    mut rx: mpsc::Receiver<String>,
    tx: mpsc::Sender<String>,
    diag: Arc<Diagnostics>,
) {
    let mut session: Option<String> = None;
    while let Some(line) = rx.recv().await {
        let request_id = request_id_of(&line);
        let resp =
            match tokio::time::timeout(HEAD_TIMEOUT, post(&t, session.as_deref(), &line)).await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => {
                    fail(
                        &tx,
                        request_id.as_ref(),
                        &format!("HTTP request to {} failed: {e}", t.raw_url),
                    )
                    .await;
                    continue;
                }
                Err(_) => {
                    fail(
                        &tx,
                        request_id.as_ref(),
                        &format!("no HTTP response from {} within 30 s", t.raw_url),
                    )
                    .await;
                    continue;
                }
            };
        if let Some(sid) = resp.header("mcp-session-id") {
            session = Some(sid.to_string());
        }
        if resp.status == 404 && session.is_some() {
            // The server forgot the session: the client must start over (initialize again).
            diag.set_exit("HTTP session expired (404); reconnecting on next use");
            fail(&tx, request_id.as_ref(), "the HTTP MCP session expired").await;
            return;
        }
        if !(200..300).contains(&resp.status) {
            let status = resp.status;
            let mut body = resp.body;
            let text = body.read_all(4096).await.unwrap_or_default();
            let text = String::from_utf8_lossy(&text).trim().to_string();
            diag.push_stderr(&format!("HTTP {status}: {text}"));
            // A JSON-RPC error body is the answer itself; anything else becomes one.
            if let Ok(v) = serde_json::from_str::<Value>(&text) {
                if v.get("error").is_some() && v.get("id").is_some_and(|id| !id.is_null()) {
                    let _ = tx.send(text).await;
                    continue;
                }
            }
            let hint = if status == 401 {
                sign_in_hint(t.auth.as_ref())
            } else {
                String::new()
            };
            fail(
                &tx,
                request_id.as_ref(),
                &format!("HTTP {status} from {}: {text}{hint}", t.raw_url),
            )
            .await;
            continue;
        }
        if resp.status == 202 || resp.status == 204 || request_id.is_none() {
            continue;
        }
        let tx = tx.clone();
        let is_sse = resp
            .header("content-type")
            .is_some_and(|ct| ct.to_ascii_lowercase().starts_with("text/event-stream"));
        tokio::spawn(async move {
            let mut body = resp.body;
            let answered = if is_sse {
                read_sse(&mut body, &tx, request_id.as_ref()).await
            } else {
                match body.read_all(MAX_BODY).await {
                    Ok(bytes) => {
                        forward_json(&String::from_utf8_lossy(&bytes), &tx, request_id.as_ref())
                            .await
                    }
                    Err(_) => false,
                }
            };
            if !answered {
                fail(
                    &tx,
                    request_id.as_ref(),
                    "the HTTP response ended without an answer",
                )
                .await;
            }
        });
    }
}

/// The `id` of a request (a message with `method` and `id`); responses and notifications
/// expect no answer.
pub(super) fn request_id_of(line: &str) -> Option<Value> {
    let v: Value = serde_json::from_str(line).ok()?;
    if v.get("method").is_some() {
        v.get("id").filter(|id| !id.is_null()).cloned()
    } else {
        None
    }
}

/// Answers request `id` with a JSON-RPC error so the waiting call fails at once, instead of
/// waiting for its timeout.
pub(super) async fn fail(tx: &mpsc::Sender<String>, id: Option<&Value>, message: &str) {
    tracing::warn!(target: "mcp", "{message}");
    if let Some(id) = id {
        let err =
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": message}});
        let _ = tx.send(err.to_string()).await;
    }
}

/// Forwards a JSON body (one message or a batch); true when it carried the answer to `id`.
pub(super) async fn forward_json(
    text: &str,
    tx: &mpsc::Sender<String>,
    id: Option<&Value>,
) -> bool {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        tracing::warn!(target: "mcp", "malformed JSON body from HTTP MCP server skipped");
        return false;
    };
    let items = match v {
        Value::Array(items) => items,
        other => vec![other],
    };
    let mut answered = false;
    for m in items {
        if id.is_some() && m.get("id") == id && m.get("method").is_none() {
            answered = true;
        }
        if tx.send(m.to_string()).await.is_err() {
            break;
        }
    }
    answered
}

/// Reads an SSE stream, forwarding each event's data; stops when the answer to `id` arrived
/// and the stream ends. True when the answer was seen.
async fn read_sse(body: &mut Body, tx: &mpsc::Sender<String>, id: Option<&Value>) -> bool {
    let mut pending = Vec::<u8>::new();
    let mut data = String::new();
    let mut answered = false;
    loop {
        let chunk = match body.next_chunk().await {
            Ok(Some(c)) => c,
            Ok(None) | Err(_) => break,
        };
        pending.extend_from_slice(&chunk);
        while let Some(nl) = pending.iter().position(|&b| b == b'\n') {
            let raw: Vec<u8> = pending.drain(..=nl).collect();
            let line = String::from_utf8_lossy(&raw);
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if !data.is_empty() {
                    answered |= forward_json(&data, tx, id).await;
                    data.clear();
                }
            } else if let Some(d) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(d.strip_prefix(' ').unwrap_or(d));
            }
            // `event:`, `id:`, `retry:` and `:` comments carry nothing we use.
        }
    }
    if !data.is_empty() {
        answered |= forward_json(&data, tx, id).await;
    }
    answered
}

/// A response head with its body still to read.
pub(super) struct Response {
    pub(super) status: u16,
    headers: Vec<(String, String)>,
    pub(super) body: Body,
}

impl Response {
    /// The first header called `name` (any case).
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

async fn post(t: &HttpTransport, session: Option<&str>, body: &str) -> std::io::Result<Response> {
    let mut headers: Vec<(&str, &str)> = t
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    if let Some(sid) = session {
        headers.push(("Mcp-Session-Id", sid));
    }
    send(
        &t.url,
        "POST",
        "application/json, text/event-stream",
        &headers,
        Some(body),
    )
    .await
}

/// One HTTP/1.1 request (`Connection: close`) to `url`; returns once the response head is in.
/// `body` is sent as JSON.
pub(super) async fn send(
    url: &Url,
    method: &str,
    accept: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> std::io::Result<Response> {
    let stream = TcpStream::connect((url.host.as_str(), url.port)).await?;
    stream.set_nodelay(true)?;
    let host = if url.host.contains(':') {
        format!("[{}]", url.host)
    } else {
        url.host.clone()
    };
    let mut req = format!(
        "{method} {} HTTP/1.1\r\nHost: {}:{}\r\nAccept: {accept}\r\nConnection: close\r\n\
         User-Agent: reasonix-mcp\r\n",
        url.path, host, url.port,
    );
    if let Some(body) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    for (k, v) in headers {
        if k.contains(['\r', '\n', ':']) || v.contains(['\r', '\n']) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("bad header `{k}`"),
            ));
        }
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let mut stream = BufReader::new(stream);
    stream.get_mut().write_all(req.as_bytes()).await?;
    if let Some(body) = body {
        stream.get_mut().write_all(body.as_bytes()).await?;
    }
    stream.get_mut().flush().await?;

    let mut head = Vec::new();
    loop {
        let n = stream.read_until(b'\n', &mut head).await?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed before the response head",
            ));
        }
        if head.ends_with(b"\r\n\r\n") || head.ends_with(b"\n\n") {
            break;
        }
        if head.len() > MAX_HEAD {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "response head too large",
            ));
        }
    }
    let head = String::from_utf8_lossy(&head);
    let mut lines = head.lines();
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("bad status line `{status_line}`"),
            )
        })?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let find = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.clone())
    };
    let mode =
        if find("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
            BodyMode::Chunked { done: false }
        } else if let Some(len) = find("content-length").and_then(|v| v.parse::<usize>().ok()) {
            BodyMode::Length(len)
        } else if status == 204 || status == 304 {
            BodyMode::Length(0)
        } else {
            BodyMode::Eof
        };
    Ok(Response {
        status,
        headers,
        body: Body { stream, mode },
    })
}

/// A response body read incrementally (SSE needs messages as they arrive).
pub(super) struct Body {
    stream: BufReader<TcpStream>,
    mode: BodyMode,
}

enum BodyMode {
    Chunked { done: bool },
    Length(usize),
    Eof,
}

impl Body {
    /// The next piece of body, `None` at the end.
    pub(super) async fn next_chunk(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        match &mut self.mode {
            BodyMode::Length(0) | BodyMode::Chunked { done: true } => Ok(None),
            BodyMode::Length(left) => {
                let mut buf = vec![0u8; (*left).min(16 * 1024)];
                let n = self.stream.read(&mut buf).await?;
                if n == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                *left -= n;
                buf.truncate(n);
                Ok(Some(buf))
            }
            BodyMode::Eof => {
                let mut buf = vec![0u8; 16 * 1024];
                let n = self.stream.read(&mut buf).await?;
                if n == 0 {
                    self.mode = BodyMode::Length(0);
                    return Ok(None);
                }
                buf.truncate(n);
                Ok(Some(buf))
            }
            BodyMode::Chunked { done } => {
                let mut size_line = String::new();
                if self.stream.read_line(&mut size_line).await? == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                let hex = size_line
                    .trim()
                    .split(';')
                    .next()
                    .unwrap_or_default()
                    .trim();
                let size = usize::from_str_radix(hex, 16).map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::InvalidData, "bad chunk size")
                })?;
                if size == 0 {
                    *done = true;
                    // Trailers up to the blank line.
                    loop {
                        let mut l = String::new();
                        if self.stream.read_line(&mut l).await? == 0 || l.trim().is_empty() {
                            break;
                        }
                    }
                    return Ok(None);
                }
                let mut buf = vec![0u8; size];
                self.stream.read_exact(&mut buf).await?;
                let mut crlf = String::new();
                self.stream.read_line(&mut crlf).await?;
                Ok(Some(buf))
            }
        }
    }

    /// The whole body, failing past `limit` bytes.
    pub(super) async fn read_all(&mut self, limit: usize) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(c) = self.next_chunk().await? {
            out.extend_from_slice(&c);
            if out.len() > limit {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "response body too large",
                ));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = parse_url("http://127.0.0.1:3001/mcp").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 3001, "/mcp")
        );
        let u = parse_url("http://example.org").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("example.org", 80, "/")
        );
        let u = parse_url("http://[::1]:8080/x?y=1").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("::1", 8080, "/x?y=1")
        );
        let e = parse_url("https://example.org/mcp")
            .unwrap_err()
            .to_string();
        assert!(e.contains("https is not supported"), "{e}");
        assert!(parse_url("ftp://x").is_err());
        assert!(parse_url("http://h:notaport/").is_err());
    }
}
