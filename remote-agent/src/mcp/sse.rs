//! The older HTTP+SSE transport (MCP 2024-11-05): the client GETs an SSE stream at the
//! server URL; the server's first event, `endpoint`, names the URL that takes the client's
//! messages as POSTs; every server message (answers, requests, notifications) arrives as a
//! `message` event on the stream.
//!
//! The endpoint is resolved against the SSE URL and must have the same origin (scheme, host,
//! port): a server may not direct the client's messages, and the headers that go with them,
//! anywhere else. Plain `http://` only, as for Streamable HTTP (the host binary has no TLS).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::http::{
    fail, forward_json, parse_url, request_id_of, send, sign_in_hint, signed_headers, Body, Url,
};
use super::transport::{Diagnostics, McpConnection, McpTransport};
use super::McpError;

/// How long the server has to answer the GET and announce its endpoint.
const ENDPOINT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one POST may take to be accepted.
const POST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest single SSE event accepted.
const MAX_EVENT: usize = 64 * 1024 * 1024;

/// A server speaking the 2024-11-05 HTTP+SSE transport at a plain `http://` URL.
#[derive(Debug, Clone)]
pub struct SseTransport {
    url: Url,
    raw_url: String,
    headers: BTreeMap<String, String>,
    auth: Option<(String, Arc<super::LaptopTokens>)>,
}

impl SseTransport {
    /// A transport for the SSE stream at `url` with extra request `headers` (sent on the GET
    /// and on every POST). Fails for anything but `http://host[:port][/path]`.
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

    fn header_list(&self) -> Vec<(&str, &str)> {
        self.headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }
}

#[async_trait::async_trait]
impl McpTransport for SseTransport {
    async fn open(&self) -> Result<McpConnection, McpError> {
        let mut signed = self.clone();
        signed.headers = signed_headers(&self.headers, self.auth.as_ref(), &self.raw_url).await?;
        let this = &signed;
        let connect = async {
            let resp = send(
                &this.url,
                "GET",
                "text/event-stream",
                &this.header_list(),
                None,
            )
            .await
            .map_err(|e| McpError::Connect(format!("GET {}: {e}", self.raw_url)))?;
            let mut body = resp.body;
            if !(200..300).contains(&resp.status) {
                let text = body.read_all(4096).await.unwrap_or_default();
                let hint = if resp.status == 401 {
                    sign_in_hint(self.auth.as_ref())
                } else {
                    String::new()
                };
                return Err(McpError::Connect(format!(
                    "GET {}: HTTP {}: {}{hint}",
                    self.raw_url,
                    resp.status,
                    String::from_utf8_lossy(&text).trim()
                )));
            }
            let mut events = EventReader::default();
            // The first event must be `endpoint`; anything before it is a protocol error.
            match events.next(&mut body).await {
                Some(ev) if ev.event == "endpoint" => {
                    let endpoint = resolve_endpoint(&self.url, ev.data.trim())
                        .map_err(|e| McpError::Connect(format!("{}: {e}", self.raw_url)))?;
                    Ok((body, events, endpoint))
                }
                Some(ev) => Err(McpError::Protocol(format!(
                    "{}: the SSE stream's first event is `{}`, expected `endpoint` (is this a \
                     Streamable HTTP server? then drop `type = \"sse\"`)",
                    self.raw_url, ev.event
                ))),
                None => Err(McpError::Connect(format!(
                    "{}: the SSE stream ended before the `endpoint` event",
                    self.raw_url
                ))),
            }
        };
        let (body, events, endpoint) = tokio::time::timeout(ENDPOINT_TIMEOUT, connect)
            .await
            .map_err(|_| McpError::Timeout {
                what: format!("the `endpoint` event of {}", self.raw_url),
                after: ENDPOINT_TIMEOUT,
            })??;
        tracing::info!(target: "mcp", url = %self.raw_url, endpoint = %endpoint.path, "SSE endpoint announced");
        let (to_tx, to_rx) = mpsc::channel::<String>(64);
        let (from_tx, from_rx) = mpsc::channel::<String>(256);
        let diag = Diagnostics::new();
        let reader = tokio::spawn(read_stream(body, events, from_tx.clone(), diag.clone()));
        let writer = tokio::spawn(post_lines(signed.clone(), endpoint, to_rx, from_tx));
        let guard = AbortOnDrop(vec![reader.abort_handle(), writer.abort_handle()]);
        Ok(McpConnection::new(to_tx, from_rx)
            .with_diagnostics(diag)
            .with_keepalive(Box::new(guard)))
    }

    fn describe(&self) -> String {
        format!("sse: {}", self.raw_url)
    }
}

/// Ends the stream reader and the POST writer with the connection.
struct AbortOnDrop(Vec<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for h in &self.0 {
            h.abort();
        }
    }
}

/// `endpoint` resolved against the SSE URL `base`: absolute (`http://…`), scheme-relative
/// (`//host/…`), path-absolute (`/messages?x`) or relative (`messages`). A different origin
/// is refused.
pub(super) fn resolve_endpoint(base: &Url, endpoint: &str) -> Result<Url, String> {
    if endpoint.is_empty() {
        return Err("the server announced an empty endpoint".into());
    }
    if endpoint.contains(['\r', '\n', ' ']) {
        return Err(format!(
            "the server announced a malformed endpoint `{endpoint}`"
        ));
    }
    let absolute = if endpoint.contains("://") {
        Some(endpoint.to_string())
    } else {
        endpoint
            .strip_prefix("//")
            .map(|rest| format!("http://{rest}"))
    };
    if let Some(abs) = absolute {
        let url = parse_url(&abs).map_err(|e| format!("endpoint `{endpoint}`: {e}"))?;
        if !url.host.eq_ignore_ascii_case(&base.host) || url.port != base.port {
            return Err(format!(
                "the server announced the endpoint `{endpoint}` on another origin than its SSE \
                 stream (http://{}:{}); refused: a server may only take messages on its own origin",
                base.host, base.port
            ));
        }
        return Ok(url);
    }
    let path = if endpoint.starts_with('/') {
        endpoint.to_string()
    } else {
        // Relative to the SSE URL's directory (its query dropped).
        let base_path = base.path.split(['?', '#']).next().unwrap_or("/");
        let dir = &base_path[..base_path.rfind('/').map_or(0, |i| i + 1)];
        let dir = if dir.is_empty() { "/" } else { dir };
        format!("{dir}{endpoint}")
    };
    Ok(Url {
        host: base.host.clone(),
        port: base.port,
        path,
    })
}

/// One server-sent event.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Event {
    /// `event:` (`message` when absent).
    pub(super) event: String,
    /// The `data:` lines joined with `\n`.
    pub(super) data: String,
}

/// Splits an SSE body into events.
#[derive(Default)]
pub(super) struct EventReader {
    pending: Vec<u8>,
    event: String,
    data: Option<String>,
    done: bool,
}

impl EventReader {
    /// The next event with data, `None` at the end of the stream (or an error).
    pub(super) async fn next(&mut self, body: &mut Body) -> Option<Event> {
        loop {
            if let Some(ev) = self.take_buffered() {
                return Some(ev);
            }
            if self.done {
                return None;
            }
            match body.next_chunk().await {
                Ok(Some(chunk)) => {
                    self.pending.extend_from_slice(&chunk);
                    if self.pending.len() > MAX_EVENT {
                        tracing::warn!(target: "mcp", "SSE event over {MAX_EVENT} bytes; stream dropped");
                        return None;
                    }
                }
                Ok(None) | Err(_) => self.done = true,
            }
        }
    }

    /// An event completed by the bytes already read.
    pub(super) fn take_buffered(&mut self) -> Option<Event> {
        while let Some(nl) = self.pending.iter().position(|&b| b == b'\n') {
            let raw: Vec<u8> = self.pending.drain(..=nl).collect();
            let line = String::from_utf8_lossy(&raw);
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                let event = std::mem::take(&mut self.event);
                if let Some(data) = self.data.take() {
                    return Some(Event {
                        event: if event.is_empty() {
                            "message".into()
                        } else {
                            event
                        },
                        data,
                    });
                }
            } else if let Some(v) = field(line, "data") {
                match &mut self.data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(v);
                    }
                    None => self.data = Some(v.to_string()),
                }
            } else if let Some(v) = field(line, "event") {
                self.event = v.to_string();
            }
            // `id:`, `retry:` and `:` comments (keep-alives) carry nothing we use.
        }
        None
    }
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(name)?.strip_prefix(':')?;
    Some(rest.strip_prefix(' ').unwrap_or(rest))
}

/// Forwards every `message` event of the stream; when the stream ends the connection is
/// closed (the client sees the server gone and restarts it on next use).
async fn read_stream(
    mut body: Body,
    mut events: EventReader,
    tx: mpsc::Sender<String>,
    diag: Arc<Diagnostics>,
) {
    while let Some(ev) = events.next(&mut body).await {
        match ev.event.as_str() {
            "message" => {
                forward_json(&ev.data, &tx, None).await;
            }
            "endpoint" => {
                tracing::warn!(target: "mcp", "a second `endpoint` event was ignored");
            }
            other => tracing::debug!(target: "mcp", event = other, "SSE event ignored"),
        }
    }
    diag.set_exit("the SSE stream ended");
}

/// Sends each outgoing line as a POST to the endpoint, in order. A POST that fails answers
/// its request with an error at once.
async fn post_lines(
    t: SseTransport,
    endpoint: Url,
    mut rx: mpsc::Receiver<String>,
    tx: mpsc::Sender<String>,
) {
    let headers = t.header_list();
    while let Some(line) = rx.recv().await {
        let id = request_id_of(&line);
        let sent = tokio::time::timeout(POST_TIMEOUT, async {
            let resp = send(&endpoint, "POST", "*/*", &headers, Some(&line)).await?;
            let status = resp.status;
            let mut body = resp.body;
            let text = body.read_all(4096).await.unwrap_or_default();
            Ok::<_, std::io::Error>((status, String::from_utf8_lossy(&text).trim().to_string()))
        })
        .await;
        match sent {
            Ok(Ok((status, _))) if (200..300).contains(&status) => {}
            Ok(Ok((status, text))) => {
                fail(
                    &tx,
                    id.as_ref(),
                    &format!(
                        "HTTP {status} from the SSE endpoint of {}: {text}",
                        t.raw_url
                    ),
                )
                .await
            }
            Ok(Err(e)) => {
                fail(
                    &tx,
                    id.as_ref(),
                    &format!("POST to the SSE endpoint of {} failed: {e}", t.raw_url),
                )
                .await
            }
            Err(_) => {
                fail(
                    &tx,
                    id.as_ref(),
                    &format!(
                        "the SSE endpoint of {} did not accept a message within 30 s",
                        t.raw_url
                    ),
                )
                .await
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn base() -> Url {
        parse_url("http://127.0.0.1:3001/mcp/sse?x=1").unwrap()
    }

    #[test]
    fn endpoints_resolve_against_the_stream_url() {
        let r = |e: &str| resolve_endpoint(&base(), e).map(|u| u.path);
        assert_eq!(r("/messages?sessionId=a").unwrap(), "/messages?sessionId=a");
        assert_eq!(
            r("messages?sessionId=a").unwrap(),
            "/mcp/messages?sessionId=a"
        );
        assert_eq!(
            r("http://127.0.0.1:3001/m?s=1").unwrap(),
            "/m?s=1",
            "same origin, absolute"
        );
        assert_eq!(r("//127.0.0.1:3001/m").unwrap(), "/m");
        for bad in [
            "http://evil.example:3001/m",
            "http://127.0.0.1:3002/m",
            "//evil.example/m",
        ] {
            let e = r(bad).unwrap_err();
            assert!(e.contains("another origin"), "{bad}: {e}");
        }
        assert!(
            r("https://127.0.0.1:3001/m").is_err(),
            "https is another scheme"
        );
        assert!(r("").is_err());
        assert!(r("/a\r\nX: y").is_err());
    }

    #[test]
    fn events_split_with_names_and_multiline_data() {
        let mut r = EventReader::default();
        r.pending
            .extend_from_slice(b": keepalive\n\nevent: endpoint\ndata: /m?s=1\n\ndata: {\"a\":\ndata: 1}\r\n\r\nevent: x\n");
        assert_eq!(
            r.take_buffered().unwrap(),
            Event {
                event: "endpoint".into(),
                data: "/m?s=1".into()
            }
        );
        assert_eq!(
            r.take_buffered().unwrap(),
            Event {
                event: "message".into(),
                data: "{\"a\":\n1}".into()
            }
        );
        assert!(r.take_buffered().is_none(), "an unfinished event waits");
    }
}
