//! Scripted mock provider (real HTTP server streaming SSE), speaking the OpenAI-compatible
//! chat-completions wire or, started with [`MockProvider::start_anthropic`], the Anthropic
//! Messages wire (see [`crate::mock_anthropic`]); the script, the recording and the faults are
//! the same for both.
//!
//! [`MockProvider::start`] binds `127.0.0.1:0` and serves `POST /chat/completions` with a
//! minimal hand-rolled HTTP/1.1 (one request per connection, `Connection: close`; an SSE
//! body is delimited by closing the connection, so a [`MockReply::Cut`] looks exactly like a
//! provider that hung up cleanly mid-answer).
//!
//! Replies are taken from the script in order of arrival. **When the script is exhausted,
//! every further request gets a plain text reply `"done"`** (finish reason `stop`), so an
//! agent loop under test always terminates. [`MockProvider::start_with`] instead chooses each
//! reply with a closure over the recorded request.
//!
//! Every request is recorded ([`MockProvider::requests`]) with its headers (including
//! `Authorization`) and its JSON body. A client that closes the connection before its reply
//! ended (a cancelled stream) is recorded too ([`MockProvider::closed_early`],
//! [`MockProvider::wait_closed_early`]).
//!
//! With [`MockProvider::enable_prompt_cache`] the mock also caches prompts like DeepSeek
//! (see [`crate::prompt_cache`]): every complete reply without a scripted usage carries a
//! usage chunk with `prompt_cache_hit_tokens` / `prompt_cache_miss_tokens`, and a prompt over
//! the window is answered with DeepSeek's 400 error instead of the scripted reply (which
//! stays in the script for the next request).
//!
//! Like DeepSeek's reasoning models, the mock refuses a request with two user (or two
//! assistant) messages in a row with a 400 (always, cache or not).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::anthropic_cache::AnthropicCache;
use crate::mock_anthropic::IssuedThinking;
use crate::prompt_cache::{PromptAccounting, PromptCache};

/// One tool call the mock will stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MockToolCall {
    /// Call id; `None` sends no id (the gateway must generate one).
    #[serde(default)]
    pub id: Option<String>,
    /// Tool name.
    pub name: String,
    /// JSON arguments text, streamed in pieces.
    pub arguments: String,
}

impl MockToolCall {
    /// A call with an id.
    pub fn new(id: &str, name: &str, arguments: &str) -> Self {
        Self {
            id: Some(id.into()),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// One scripted answer. Serialisable (tagged by `"type"`) so the standalone binary can read a
/// script from JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MockReply {
    /// Content deltas, then `finish_reason: "stop"`, usage (if set) and `[DONE]`. Content may
    /// contain `<think>` tags, split anywhere.
    Text {
        /// Content deltas in order.
        chunks: Vec<String>,
    },
    /// Optional content, then tool calls whose arguments are cut into `split`-character
    /// deltas; `finish_reason: "tool_calls"`.
    ToolCalls {
        /// Content deltas before the calls.
        #[serde(default)]
        text: Vec<String>,
        /// The calls; index = position.
        calls: Vec<MockToolCall>,
        /// Characters of arguments per delta (at least 1).
        #[serde(default = "default_split")]
        split: usize,
        /// Stream the calls round-robin, highest index first in each round, so deltas of
        /// different calls interleave and index 0 is not the first seen.
        #[serde(default)]
        interleave: bool,
    },
    /// `reasoning_content` deltas (DeepSeek style), then content deltas.
    Reasoning {
        /// Reasoning deltas.
        reasoning: Vec<String>,
        /// Content deltas after the reasoning.
        #[serde(default)]
        text: Vec<String>,
    },
    /// A non-200 answer with a body (e.g. 429 with `Retry-After`, 500, 401).
    Status {
        /// HTTP status.
        code: u16,
        /// `Retry-After` seconds.
        #[serde(default)]
        retry_after: Option<u64>,
        /// Response body (usually `{"error":{"message":…}}`).
        #[serde(default)]
        body: String,
    },
    /// Content deltas, then the connection closes: no finish reason, no `[DONE]`.
    Cut {
        /// Content deltas sent before the cut.
        chunks: Vec<String>,
    },
    /// Content deltas, then the connection stays open and silent until the client leaves
    /// (for idle-timeout tests).
    Hang {
        /// Content deltas sent before going silent.
        chunks: Vec<String>,
    },
    /// Raw `data:` payloads sent verbatim; nothing is added (include `[DONE]` yourself).
    Raw {
        /// Payloads.
        events: Vec<String>,
    },
    /// Another reply with options.
    With {
        /// The reply.
        reply: Box<MockReply>,
        /// A `usage` object sent in a final chunk with empty `choices` (before `[DONE]`).
        #[serde(default)]
        usage: Option<Value>,
        /// Delay before each SSE event, in milliseconds (slow streaming).
        #[serde(default)]
        delay_ms: u64,
        /// `model` field of the chunks (default `mock-model`).
        #[serde(default)]
        model: Option<String>,
        /// Reasoning streamed before the reply (`reasoning_content` deltas on the OpenAI
        /// wire, a signed thinking block on the Anthropic wire).
        #[serde(default)]
        thinking: Vec<String>,
    },
}

fn default_split() -> usize {
    3
}

impl MockReply {
    /// `Text` from string slices.
    pub fn text<S: AsRef<str>>(chunks: &[S]) -> Self {
        MockReply::Text {
            chunks: chunks.iter().map(|c| c.as_ref().to_string()).collect(),
        }
    }

    /// `ToolCalls` with no text, not interleaved.
    pub fn tool_calls(calls: Vec<MockToolCall>, split: usize) -> Self {
        MockReply::ToolCalls {
            text: Vec::new(),
            calls,
            split,
            interleave: false,
        }
    }

    /// `Status` with an OpenAI-style error body carrying `message`.
    pub fn status(code: u16, retry_after: Option<u64>, message: &str) -> Self {
        MockReply::Status {
            code,
            retry_after,
            body: json!({"error": {"message": message, "type": "mock_error"}}).to_string(),
        }
    }

    /// This reply with a usage chunk.
    pub fn with_usage(self, usage: Value) -> Self {
        self.with(|o| o.usage = Some(usage))
    }

    /// This reply streamed with `delay` before every event.
    pub fn slow(self, delay: Duration) -> Self {
        self.with(|o| o.delay_ms = delay.as_millis() as u64)
    }

    /// This reply claiming to come from `model`.
    pub fn with_model(self, model: &str) -> Self {
        self.with(|o| o.model = Some(model.to_string()))
    }

    /// This reply with reasoning before it, in these deltas.
    pub fn with_thinking<S: AsRef<str>>(self, deltas: &[S]) -> Self {
        let deltas: Vec<String> = deltas.iter().map(|d| d.as_ref().to_string()).collect();
        self.with(|o| o.thinking = deltas)
    }

    fn with(self, f: impl FnOnce(&mut Options)) -> Self {
        let (inner, mut opts) = self.unwrap_options();
        f(&mut opts);
        MockReply::With {
            reply: Box::new(inner),
            usage: opts.usage,
            delay_ms: opts.delay_ms,
            model: opts.model,
            thinking: opts.thinking,
        }
    }

    /// Peel `With` layers (outer options win over inner ones).
    pub(crate) fn unwrap_options(self) -> (MockReply, Options) {
        match self {
            MockReply::With {
                reply,
                usage,
                delay_ms,
                model,
                thinking,
            } => {
                let (inner, mut o) = reply.unwrap_options();
                if usage.is_some() {
                    o.usage = usage;
                }
                if delay_ms > 0 {
                    o.delay_ms = delay_ms;
                }
                if model.is_some() {
                    o.model = model;
                }
                if !thinking.is_empty() {
                    o.thinking = thinking;
                }
                (inner, o)
            }
            other => (other, Options::default()),
        }
    }
}

/// The options of a [`MockReply::With`], peeled off the reply.
#[derive(Debug, Default)]
pub(crate) struct Options {
    pub(crate) usage: Option<Value>,
    pub(crate) delay_ms: u64,
    pub(crate) model: Option<String>,
    pub(crate) thinking: Vec<String>,
}

/// The wire format a mock speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MockWire {
    /// OpenAI-compatible `POST /chat/completions`.
    OpenAi,
    /// Anthropic `POST /v1/messages`.
    Anthropic,
}

/// The prompt cache of a mock, by wire.
enum Cache {
    /// Implicit prefix caching, as DeepSeek does.
    DeepSeek(PromptCache),
    /// Explicit `cache_control` breakpoints, as Anthropic does.
    Anthropic(AnthropicCache),
}

impl Cache {
    fn log(&self) -> &[PromptAccounting] {
        match self {
            Cache::DeepSeek(c) => &c.log,
            Cache::Anthropic(c) => &c.log,
        }
    }
}

/// A request as the mock received it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// 0-based arrival number.
    pub index: usize,
    /// HTTP method.
    pub method: String,
    /// Request path.
    pub path: String,
    /// Headers in arrival order, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// JSON body (`Null` when empty or not JSON).
    pub body: Value,
}

impl RecordedRequest {
    /// First header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The `messages` array of the body (empty when absent).
    pub fn messages(&self) -> Vec<Value> {
        self.body
            .get("messages")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    }
}

type Chooser = dyn Fn(&RecordedRequest) -> MockReply + Send + Sync;

enum Source {
    Script(VecDeque<MockReply>),
    Func(Box<Chooser>),
}

struct State {
    wire: MockWire,
    source: Mutex<Source>,
    requests: Mutex<Vec<RecordedRequest>>,
    /// Indices of requests whose client hung up before the reply ended.
    closed_early: Mutex<Vec<usize>>,
    closed_notify: tokio::sync::Notify,
    /// The prompt cache, when enabled.
    cache: Mutex<Option<Cache>>,
    /// Thinking blocks the Anthropic wire handed out, by the tool use they came with.
    issued: Mutex<IssuedThinking>,
}

/// A running mock provider. Dropping it stops the server.
pub struct MockProvider {
    addr: std::net::SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl MockProvider {
    /// Start serving `script` on a random loopback port.
    pub async fn start(script: Vec<MockReply>) -> MockProvider {
        Self::spawn(MockWire::OpenAi, Source::Script(script.into())).await
    }

    /// Start serving replies chosen by `choose` for each request.
    pub async fn start_with(
        choose: impl Fn(&RecordedRequest) -> MockReply + Send + Sync + 'static,
    ) -> MockProvider {
        Self::spawn(MockWire::OpenAi, Source::Func(Box::new(choose))).await
    }

    /// Start serving `script` on the Anthropic Messages wire (`POST /v1/messages`).
    pub async fn start_anthropic(script: Vec<MockReply>) -> MockProvider {
        Self::spawn(MockWire::Anthropic, Source::Script(script.into())).await
    }

    /// Start serving replies chosen by `choose` on the Anthropic Messages wire.
    pub async fn start_anthropic_with(
        choose: impl Fn(&RecordedRequest) -> MockReply + Send + Sync + 'static,
    ) -> MockProvider {
        Self::spawn(MockWire::Anthropic, Source::Func(Box::new(choose))).await
    }

    async fn spawn(wire: MockWire, source: Source) -> MockProvider {
        #[allow(clippy::expect_used)] // test support: no loopback port means no test can run
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0 for the mock provider");
        #[allow(clippy::expect_used)]
        let addr = listener.local_addr().expect("local_addr of a bound socket");
        let state = Arc::new(State {
            wire,
            source: Mutex::new(source),
            requests: Mutex::new(Vec::new()),
            closed_early: Mutex::new(Vec::new()),
            closed_notify: tokio::sync::Notify::new(),
            cache: Mutex::new(None),
            issued: Mutex::new(IssuedThinking::default()),
        });
        let st = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let st = st.clone();
                tokio::spawn(async move {
                    let _ = serve(sock, &st).await;
                });
            }
        });
        MockProvider { addr, state, task }
    }

    /// The wire format this mock speaks.
    pub fn wire(&self) -> MockWire {
        self.state.wire
    }

    /// `http://127.0.0.1:PORT` (use as a provider `base_url`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state.requests).clone()
    }

    /// Number of requests received so far.
    pub fn request_count(&self) -> usize {
        lock(&self.state.requests).len()
    }

    /// Requests (by arrival index) whose client closed the connection before the reply
    /// ended: a [`MockReply::Hang`] the client left, or a streamed reply it stopped reading.
    pub fn closed_early(&self) -> Vec<usize> {
        lock(&self.state.closed_early).clone()
    }

    /// Wait until the client of request `index` closed its connection before the reply
    /// ended (returns at once if it already did).
    pub async fn wait_closed_early(&self, index: usize) {
        loop {
            let notified = self.state.closed_notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if lock(&self.state.closed_early).contains(&index) {
                return;
            }
            notified.await;
        }
    }

    /// Cache prompts from now on and refuse prompts over `window` tokens (`None`: no
    /// limit): like DeepSeek on the OpenAI wire, like Anthropic (only at `cache_control`
    /// breakpoints) on the Anthropic wire. Replies without a scripted usage then report the
    /// cache's figures.
    pub fn enable_prompt_cache(&self, window: Option<u64>) {
        *lock(&self.state.cache) = Some(match self.state.wire {
            MockWire::OpenAi => Cache::DeepSeek(PromptCache::new(window)),
            MockWire::Anthropic => Cache::Anthropic(AnthropicCache::new(window)),
        });
    }

    /// The cache's accounting of every chat request since it was enabled (empty when it is
    /// not enabled), in arrival order; refused requests are included (`rejected`).
    pub fn prompt_accounting(&self) -> Vec<PromptAccounting> {
        lock(&self.state.cache)
            .as_ref()
            .map(|c| c.log().to_vec())
            .unwrap_or_default()
    }

    /// Append replies to the script (no effect in closure mode).
    pub fn push(&self, replies: Vec<MockReply>) {
        if let Source::Script(q) = &mut *lock(&self.state.source) {
            q.extend(replies);
        }
    }
}

impl Drop for MockProvider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Lock ignoring poisoning: a panicking test thread must not hide the recorded requests.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

const MAX_HEAD: usize = 64 * 1024;

async fn serve(mut sock: TcpStream, state: &State) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return write_simple(&mut sock, 431, "", "request head too large").await;
        }
        let mut tmp = [0u8; 8192];
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let mut tmp = vec![0u8; (len - body.len()).min(1 << 16)];
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Ok(());
        }
        body.extend_from_slice(&tmp[..n]);
    }
    let body_json = serde_json::from_slice(&body).unwrap_or(Value::Null);

    let recorded = {
        let mut reqs = lock(&state.requests);
        let r = RecordedRequest {
            index: reqs.len(),
            method: method.clone(),
            path: path.clone(),
            headers,
            body: body_json,
        };
        reqs.push(r.clone());
        r
    };
    let path_only = path.split('?').next().unwrap_or("");
    let endpoint = match state.wire {
        MockWire::OpenAi => "/chat/completions",
        MockWire::Anthropic => "/v1/messages",
    };
    if method != "POST" || !path_only.ends_with(endpoint) {
        return write_simple(
            &mut sock,
            404,
            "",
            &format!("not found: the mock serves POST {endpoint}"),
        )
        .await;
    }
    let refused = match state.wire {
        MockWire::OpenAi => successive_roles_error(&recorded.body).map(|b| (400, b)),
        MockWire::Anthropic => crate::mock_anthropic::check_request(
            &recorded.headers,
            &recorded.body,
            &lock(&state.issued),
        )
        .err(),
    };
    if let Some((code, body)) = refused {
        return write_simple(&mut sock, code, "", &body).await;
    }
    let cached = match &mut *lock(&state.cache) {
        Some(cache) => {
            let credential = recorded
                .header("authorization")
                .or_else(|| recorded.header("x-api-key"))
                .unwrap_or("");
            let model = recorded
                .body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("");
            let key = format!("{credential}|{model}");
            Some(match cache {
                Cache::DeepSeek(c) => c.account(recorded.index, &key, &recorded.body),
                Cache::Anthropic(c) => c.account(recorded.index, &key, &recorded.body),
            })
        }
        None => None,
    };
    let auto_usage = match cached {
        Some(Err(body)) => return write_simple(&mut sock, 400, "", &body).await,
        Some(Ok(acc)) => Some(acc),
        None => None,
    };
    let reply = match &mut *lock(&state.source) {
        Source::Script(q) => q.pop_front().unwrap_or_else(|| MockReply::text(&["done"])),
        Source::Func(f) => f(&recorded),
    };
    let index = recorded.index;
    let result = match state.wire {
        MockWire::OpenAi => respond(&mut sock, reply, auto_usage).await,
        MockWire::Anthropic => {
            let rendered =
                crate::mock_anthropic::render(reply, auto_usage, index, &mut lock(&state.issued));
            match rendered {
                Ok(r) => write_stream(&mut sock, r).await,
                Err((code, extra, body)) => write_simple(&mut sock, code, &extra, &body)
                    .await
                    .map(|()| Ended::Complete),
            }
        }
    };
    let early = match &result {
        Ok(ended) => *ended == Ended::ClientLeft,
        // Writing failed: the client went away mid-reply.
        Err(_) => true,
    };
    if early {
        lock(&state.closed_early).push(index);
        state.closed_notify.notify_waiters();
    }
    result.map(|_| ())
}

/// DeepSeek's reasoning models refuse a request with two user (or two assistant) messages in
/// a row; the mock refuses it the same way, with the provider's error body, so a client that
/// would send one fails its test instead of failing only against the real service.
fn successive_roles_error(body: &Value) -> Option<String> {
    let messages = body.get("messages")?.as_array()?;
    let role = |m: &Value| {
        m.get("role")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let i = messages.windows(2).position(|w| {
        role(&w[0]) == role(&w[1]) && matches!(role(&w[0]).as_str(), "user" | "assistant")
    })?;
    Some(
        json!({"error": {
            "message": format!(
                "deepseek-reasoner does not support successive user or assistant messages (messages[{i}] and messages[{}] in your input). You should interleave the user/assistant messages in the message sequence.",
                i + 1
            ),
            "type": "invalid_request_error",
            "param": null,
            "code": "invalid_request_error",
        }})
        .to_string(),
    )
}

/// How serving one reply ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The reply was written in full.
    Complete,
    /// The client closed the connection while the reply was still open.
    ClientLeft,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

pub(crate) async fn write_simple(
    sock: &mut TcpStream,
    code: u16,
    extra_headers: &str,
    body: &str,
) -> std::io::Result<()> {
    let resp = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{extra_headers}\r\n{body}",
        reason(code),
        body.len()
    );
    sock.write_all(resp.as_bytes()).await?;
    sock.shutdown().await
}

/// How a rendered reply ends.
pub(crate) enum Ending {
    /// Finish reason chunk, usage, `[DONE]`.
    Finish(&'static str),
    /// Just close.
    Cut,
    /// Stay open and silent.
    Hang,
    /// Nothing added (raw).
    Raw,
}

async fn respond(
    sock: &mut TcpStream,
    reply: MockReply,
    auto_usage: Option<PromptAccounting>,
) -> std::io::Result<Ended> {
    let (reply, opts) = reply.unwrap_options();
    let completion_bytes = completion_bytes(&reply);
    let model = opts.model.clone().unwrap_or_else(|| "mock-model".into());
    let chunk = |delta: Value, finish: Option<&str>| -> String {
        json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
        .to_string()
    };
    let text_deltas = |chunks: &[String]| -> Vec<String> {
        chunks
            .iter()
            .map(|c| chunk(json!({"content": c}), None))
            .collect()
    };
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    events.extend(
        opts.thinking
            .iter()
            .map(|r| chunk(json!({"content": null, "reasoning_content": r}), None)),
    );
    let ending = match reply {
        MockReply::Status {
            code,
            retry_after,
            body,
        } => {
            let extra = retry_after
                .map(|s| format!("Retry-After: {s}\r\n"))
                .unwrap_or_default();
            return write_simple(sock, code, &extra, &body)
                .await
                .map(|()| Ended::Complete);
        }
        MockReply::Text { chunks } => {
            events.extend(text_deltas(&chunks));
            Ending::Finish("stop")
        }
        MockReply::Reasoning { reasoning, text } => {
            events.extend(
                reasoning
                    .iter()
                    .map(|r| chunk(json!({"content": null, "reasoning_content": r}), None)),
            );
            events.extend(text_deltas(&text));
            Ending::Finish("stop")
        }
        MockReply::ToolCalls {
            text,
            calls,
            split,
            interleave,
        } => {
            events.extend(text_deltas(&text));
            let per_call: Vec<Vec<Value>> = calls
                .iter()
                .enumerate()
                .map(|(i, c)| tool_call_deltas(i, c, split.max(1)))
                .collect();
            if interleave {
                let rounds = per_call.iter().map(Vec::len).max().unwrap_or(0);
                for r in 0..rounds {
                    for deltas in per_call.iter().rev() {
                        if let Some(d) = deltas.get(r) {
                            events.push(chunk(json!({"tool_calls": [d]}), None));
                        }
                    }
                }
            } else {
                for deltas in &per_call {
                    for d in deltas {
                        events.push(chunk(json!({"tool_calls": [d]}), None));
                    }
                }
            }
            Ending::Finish("tool_calls")
        }
        MockReply::Cut { chunks } => {
            events.extend(text_deltas(&chunks));
            Ending::Cut
        }
        MockReply::Hang { chunks } => {
            events.extend(text_deltas(&chunks));
            Ending::Hang
        }
        MockReply::Raw { events: raw } => {
            events = raw;
            Ending::Raw
        }
        // unwrap_options removed every `With` layer.
        MockReply::With { .. } => Ending::Cut,
    };
    if let Ending::Finish(reason) = ending {
        events.push(chunk(json!({}), Some(reason)));
        let usage = opts.usage.clone().or_else(|| {
            auto_usage.map(|acc| crate::prompt_cache::usage_json(&acc, completion_bytes))
        });
        if let Some(u) = &usage {
            events.push(
                json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0,
                       "model": model, "choices": [], "usage": u})
                .to_string(),
            );
        }
        events.push("[DONE]".into());
    }

    let frames = events
        .into_iter()
        .map(|e| format!("data: {e}\n\n"))
        .collect();
    write_stream(
        sock,
        Rendered {
            frames,
            ending,
            delay_ms: opts.delay_ms,
        },
    )
    .await
}

/// A reply rendered as SSE frames, ready to be written.
pub(crate) struct Rendered {
    /// Whole frames (`event:`/`data:` lines and the blank line after them).
    pub(crate) frames: Vec<String>,
    /// What happens after the last frame.
    pub(crate) ending: Ending,
    /// Delay before each frame, in milliseconds.
    pub(crate) delay_ms: u64,
}

/// Write a 200 event-stream response with `r`'s frames, then end it as `r.ending` says.
pub(crate) async fn write_stream(sock: &mut TcpStream, r: Rendered) -> std::io::Result<Ended> {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
    sock.write_all(head.as_bytes()).await?;
    sock.flush().await?;
    for f in r.frames {
        if r.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(r.delay_ms)).await;
        }
        sock.write_all(f.as_bytes()).await?;
        sock.flush().await?;
    }
    if let Ending::Hang = r.ending {
        // Silent until the client goes away.
        let mut tmp = [0u8; 1024];
        while sock.read(&mut tmp).await? > 0 {}
        return Ok(Ended::ClientLeft);
    }
    sock.shutdown().await.map(|()| Ended::Complete)
}

/// Bytes the reply generates (for the completion-token estimate of an automatic usage).
pub(crate) fn completion_bytes(reply: &MockReply) -> usize {
    let sum = |v: &[String]| v.iter().map(String::len).sum::<usize>();
    match reply {
        MockReply::Text { chunks } | MockReply::Cut { chunks } | MockReply::Hang { chunks } => {
            sum(chunks)
        }
        MockReply::Reasoning { reasoning, text } => sum(reasoning) + sum(text),
        MockReply::ToolCalls { text, calls, .. } => {
            sum(text)
                + calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.len())
                    .sum::<usize>()
        }
        MockReply::Status { .. } | MockReply::Raw { .. } | MockReply::With { .. } => 0,
    }
}

fn tool_call_deltas(index: usize, call: &MockToolCall, split: usize) -> Vec<Value> {
    let mut first = json!({
        "index": index,
        "type": "function",
        "function": {"name": call.name, "arguments": ""},
    });
    if let Some(id) = &call.id {
        first["id"] = json!(id);
    }
    let mut out = vec![first];
    let chars: Vec<char> = call.arguments.chars().collect();
    for piece in chars.chunks(split) {
        out.push(json!({
            "index": index,
            "function": {"arguments": piece.iter().collect::<String>()},
        }));
    }
    out
}
