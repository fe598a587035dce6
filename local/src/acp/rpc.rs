//! JSON-RPC 2.0 over newline-delimited stdio, as ACP uses it: one message per line, requests
//! in both directions. Malformed input is answered with the matching JSON-RPC error and never
//! ends the loop.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema as acp;
use reasonix_forward::sync::LockExt;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// The longest line accepted (a prompt with embedded files can be large; beyond this the
/// line is refused, not buffered without end).
pub const MAX_LINE: usize = 64 * 1024 * 1024;

/// What the editor sent, once framed and classified.
#[derive(Debug)]
pub enum Inbound {
    /// A request: answer it with [`Peer::respond`].
    Request {
        /// The request id, echoed in the answer.
        id: Value,
        /// Method name.
        method: String,
        /// Parameters (`null` when absent).
        params: Value,
    },
    /// A notification.
    Notification {
        /// Method name.
        method: String,
        /// Parameters (`null` when absent).
        params: Value,
    },
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, acp::Error>>>>>;

/// The sending side: answers, notifications and requests to the editor. Cheap to clone.
#[derive(Clone)]
pub struct Peer {
    out: mpsc::UnboundedSender<String>,
    pending: Pending,
    next_id: Arc<AtomicU64>,
}

impl Peer {
    fn send(&self, v: Value) {
        // Serialising a Value cannot fail; a closed writer means stdout is gone, and with it
        // the editor, so there is nobody left to tell.
        let _ = self.out.send(v.to_string());
    }

    /// Answer request `id`.
    pub fn respond(&self, id: Value, result: Result<Value, acp::Error>) {
        match result {
            Ok(r) => self.send(json!({"jsonrpc": "2.0", "id": id, "result": r})),
            Err(e) => self.send(json!({"jsonrpc": "2.0", "id": id, "error": e})),
        }
    }

    /// Answer request `id` with a typed result.
    pub fn respond_with<T: Serialize>(&self, id: Value, result: Result<T, acp::Error>) {
        self.respond(id, result.and_then(to_value));
    }

    /// Send a notification.
    pub fn notify<T: Serialize>(&self, method: &str, params: &T) {
        match serde_json::to_value(params) {
            Ok(p) => self.send(json!({"jsonrpc": "2.0", "method": method, "params": p})),
            Err(e) => tracing::warn!("ACP notification {method} not serialised: {e}"),
        }
    }

    /// Send a request to the editor and wait for its answer.
    pub async fn request<T: Serialize>(
        &self,
        method: &str,
        params: &T,
    ) -> Result<Value, acp::Error> {
        let params = to_value(params)?;
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        self.pending.lock_or_recover().insert(id, tx);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        rx.await.unwrap_or_else(|_| {
            Err(acp::Error::internal_error()
                .data("the editor connection closed before it answered"))
        })
    }

    fn deliver(&self, id: &Value, result: Result<Value, acp::Error>) {
        let Some(n) = id.as_u64() else {
            tracing::warn!("answer to an id this agent never used: {id}");
            return;
        };
        match self.pending.lock_or_recover().remove(&n) {
            Some(tx) => {
                let _ = tx.send(result);
            }
            None => tracing::warn!("answer to an id this agent never used: {id}"),
        }
    }

    /// Fail every request still waiting for the editor (its input ended).
    fn close_pending(&self) {
        self.pending.lock_or_recover().clear();
    }
}

/// A value as JSON, or an internal error.
pub fn to_value<T: Serialize>(v: T) -> Result<Value, acp::Error> {
    serde_json::to_value(v).map_err(|e| acp::Error::internal_error().data(e.to_string()))
}

/// Start the writer on `output` and return the peer and a receiver of what the editor sends,
/// read from `input`. The reader answers malformed lines itself; the receiver ends when the
/// input does.
pub fn start<R, W>(input: R, output: W) -> (Peer, mpsc::UnboundedReceiver<Inbound>)
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<String>();
    let peer = Peer {
        out: out_tx,
        pending: Pending::default(),
        next_id: Arc::new(AtomicU64::new(0)),
    };
    tokio::spawn(async move {
        let mut output = output;
        while let Some(line) = out_rx.recv().await {
            let write = async {
                output.write_all(line.as_bytes()).await?;
                output.write_all(b"\n").await?;
                output.flush().await
            };
            if let Err(e) = write.await {
                tracing::warn!("ACP output closed: {e}");
                return;
            }
        }
    });
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    let reader_peer = peer.clone();
    tokio::spawn(async move {
        let mut input = tokio::io::BufReader::new(input);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match read_line(&mut input, &mut buf).await {
                Ok(LineRead::Eof) => break,
                Ok(LineRead::TooLong) => {
                    reader_peer.respond(
                        Value::Null,
                        Err(acp::Error::invalid_request().data(format!(
                            "message longer than {MAX_LINE} bytes; it was dropped"
                        ))),
                    );
                    continue;
                }
                Ok(LineRead::Line) => {}
                Err(e) => {
                    tracing::warn!("ACP input failed: {e}");
                    break;
                }
            }
            if buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if let Some(msg) = classify(&reader_peer, &buf) {
                if in_tx.send(msg).is_err() {
                    break;
                }
            }
        }
        reader_peer.close_pending();
    });
    (peer, in_rx)
}

enum LineRead {
    Line,
    TooLong,
    Eof,
}

/// Read one line into `buf` (without the newline), refusing lines over [`MAX_LINE`] (their
/// bytes are skipped up to the next newline).
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    input: &mut R,
    buf: &mut Vec<u8>,
) -> std::io::Result<LineRead> {
    let mut too_long = false;
    loop {
        let avail = input.fill_buf().await?;
        if avail.is_empty() {
            return Ok(if buf.is_empty() && !too_long {
                LineRead::Eof
            } else if too_long {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
        let (take, done) = match avail.iter().position(|b| *b == b'\n') {
            Some(i) => (i, true),
            None => (avail.len(), false),
        };
        if !too_long {
            if buf.len() + take > MAX_LINE {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&avail[..take]);
            }
        }
        input.consume(if done { take + 1 } else { take });
        if done {
            return Ok(if too_long {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
    }
}

/// Classify one line; answer it directly when it is malformed or an answer to our request.
fn classify(peer: &Peer, line: &[u8]) -> Option<Inbound> {
    let v: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            peer.respond(
                Value::Null,
                Err(acp::Error::parse_error().data(format!("not JSON: {e}"))),
            );
            return None;
        }
    };
    let Value::Object(mut m) = v else {
        let why = if v.is_array() {
            "batches are not used by ACP; send one message per line"
        } else {
            "a JSON-RPC message is an object"
        };
        peer.respond(Value::Null, Err(acp::Error::invalid_request().data(why)));
        return None;
    };
    let id = m.remove("id");
    let params = m.remove("params").unwrap_or(Value::Null);
    let version_ok = m.get("jsonrpc").and_then(Value::as_str) == Some("2.0");
    match (m.remove("method"), id) {
        (Some(Value::String(method)), id) if version_ok => match id {
            Some(id @ (Value::Number(_) | Value::String(_))) => {
                Some(Inbound::Request { id, method, params })
            }
            None => Some(Inbound::Notification { method, params }),
            Some(other) => {
                peer.respond(
                    Value::Null,
                    Err(acp::Error::invalid_request()
                        .data(format!("the id must be a number or a string, not {other}"))),
                );
                None
            }
        },
        (None, Some(id)) if version_ok => {
            let result = match (m.remove("result"), m.remove("error")) {
                (_, Some(err)) => Err(serde_json::from_value::<acp::Error>(err.clone())
                    .unwrap_or_else(|_| acp::Error::internal_error().data(err))),
                (Some(r), None) => Ok(r),
                (None, None) => Ok(Value::Null),
            };
            peer.deliver(&id, result);
            None
        }
        (_, id) => {
            let why = if version_ok {
                "a message needs a string \"method\" (or be an answer with an \"id\")"
            } else {
                "\"jsonrpc\" must be \"2.0\""
            };
            let id = match id {
                Some(id @ (Value::Number(_) | Value::String(_))) => id,
                _ => Value::Null,
            };
            peer.respond(id, Err(acp::Error::invalid_request().data(why)));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn malformed_lines_are_answered_and_the_loop_goes_on() {
        let (mut editor_in, agent_in) = tokio::io::duplex(1 << 16);
        let (agent_out, mut editor_out) = tokio::io::duplex(1 << 16);
        let (_peer, mut inbound) = start(agent_in, agent_out);
        editor_in
            .write_all(b"{nope\n[1,2]\n{\"jsonrpc\":\"1.0\",\"id\":4,\"method\":\"x\"}\n\n{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"initialize\",\"params\":{}}\n")
            .await
            .expect("write");
        let msg = inbound.recv().await.expect("the valid request");
        assert!(matches!(msg, Inbound::Request { ref method, .. } if method == "initialize"));
        drop(editor_in);
        let mut out = String::new();
        // Three answers are written before the valid request is even classified.
        let mut buf = vec![0u8; 4096];
        while out.lines().count() < 3 {
            let n = editor_out.read(&mut buf).await.expect("read");
            out.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        let codes: Vec<i64> = out
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).expect("json")["error"]["code"]
                    .as_i64()
                    .expect("code")
            })
            .collect();
        assert_eq!(codes, [-32700, -32600, -32600]);
        assert!(out.contains("\"id\":4"), "{out}");
    }

    #[tokio::test]
    async fn answers_reach_the_waiting_request() {
        let (mut editor_in, agent_in) = tokio::io::duplex(1 << 16);
        let (agent_out, mut editor_out) = tokio::io::duplex(1 << 16);
        let (peer, _inbound) = start(agent_in, agent_out);
        let asking = tokio::spawn(async move { peer.request("x/y", &json!({"a": 1})).await });
        let mut buf = vec![0u8; 4096];
        let n = editor_out.read(&mut buf).await.expect("read");
        let sent: Value = serde_json::from_slice(&buf[..n]).expect("json");
        assert_eq!(sent["method"], "x/y");
        let answer = json!({"jsonrpc": "2.0", "id": sent["id"], "result": {"ok": true}});
        editor_in
            .write_all(format!("{answer}\n").as_bytes())
            .await
            .expect("write");
        let got = asking.await.expect("join").expect("answer");
        assert_eq!(got, json!({"ok": true}));
    }

    #[tokio::test]
    async fn an_overlong_line_is_refused_not_buffered() {
        let mut input: &[u8] = b"short\n";
        let mut buf = Vec::new();
        assert!(matches!(
            read_line(&mut input, &mut buf).await,
            Ok(LineRead::Line)
        ));
        assert_eq!(buf, b"short");
    }
}
