//! The provider gateway: the only code in Reasonix that reads API keys and speaks HTTP to
//! model providers.
//!
//! The daemon on the host sends a [`ProviderRequest`]; [`Gateway::stream`] resolves the model,
//! reads the key (environment, then `<home>/.env`), POSTs to `base_url/chat/completions` with
//! SSE streaming, retries transient failures of the connection/header phase, and turns the
//! stream into typed [`ProviderChunk`]s on a channel. The reading task does not depend on the
//! channel's reader keeping up, so a slow or temporarily disconnected consumer does not stall
//! the provider connection.

pub mod keys;
pub mod retry;
pub mod sse;
pub mod think;

use std::sync::Arc;
use std::time::Duration;

use reasonix_forward::prefix::SharedMessages;
use reasonix_forward::proto::{ProviderChunk, ProviderRequest, ProviderRetry, RetryPhase};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::config::{Config, ResolvedModel};
use keys::{lookup_api_key, ApiKey};
use retry::{classify_status, parse_retry_after, RetryPolicy, StatusClass};
use sse::{classify_line, SseLine, SseLines, StreamAssembler};

/// Tunables of the gateway. Tests shrink the timings.
#[derive(Debug, Clone)]
pub struct GatewaySettings {
    /// Longest silence tolerated while waiting for headers or the next bytes of a stream.
    pub idle_timeout: Duration,
    /// TCP/TLS connect timeout of one attempt.
    pub connect_timeout: Duration,
    /// Retries of the connection/header phase.
    pub retry: RetryPolicy,
    /// Capacity of the chunk channel returned by [`Gateway::stream`]. Large on purpose: the
    /// reader may be slow (e.g. while the link to the host is down) and the provider stream
    /// must keep being drained meanwhile.
    pub channel_capacity: usize,
}

impl Default for GatewaySettings {
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(15),
            retry: RetryPolicy::default(),
            channel_capacity: 1 << 16,
        }
    }
}

impl GatewaySettings {
    /// The defaults with the retry bounds the user configured in `[agent]`.
    pub fn from_config(config: &Config) -> GatewaySettings {
        let mut s = GatewaySettings::default();
        s.retry.max_retries = config.agent.provider_retries;
        s.retry.connect_retries = s.retry.connect_retries.min(s.retry.max_retries);
        s.retry.budget = Duration::from_secs(config.agent.provider_retry_seconds);
        s
    }
}

/// The provider gateway. Cheap to clone; clones share one HTTP connection pool.
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

struct Inner {
    config: Config,
    settings: GatewaySettings,
    /// `Err` holds why the HTTP client could not be built; every stream then reports it.
    client: Result<reqwest::Client, String>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("settings", &self.inner.settings)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway with the default settings (300 s idle timeout) and the retry bounds of
    /// `[agent]` (`provider_retries`, `provider_retry_seconds`).
    pub fn new(config: &Config) -> Gateway {
        Gateway::with_settings(config, GatewaySettings::from_config(config))
    }

    /// A gateway with explicit settings.
    pub fn with_settings(config: &Config, settings: GatewaySettings) -> Gateway {
        let client = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .user_agent(concat!("reasonix/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot initialise the HTTP client: {e}"));
        Gateway {
            inner: Arc::new(Inner {
                config: config.clone(),
                settings,
                client,
            }),
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> &GatewaySettings {
        &self.inner.settings
    }

    /// Resolve a model label with this gateway's config.
    pub fn resolve(
        &self,
        label: Option<&str>,
    ) -> Result<ResolvedModel, crate::config::ConfigError> {
        self.inner.config.resolve_model(label)
    }

    /// Start one chat completion. Returns at once; a spawned task performs the request and
    /// sends chunks: any number of `Text`/`Reasoning`, then complete `ToolCall`s in index
    /// order, `Usage` (when the provider reports it) and `Done` — or a single final `Error`.
    /// Every stream ends with exactly one `Done` or `Error`. Dropping the receiver cancels the
    /// request. Must be called inside a Tokio runtime.
    pub fn stream(&self, mut req: ProviderRequest) -> mpsc::Receiver<ProviderChunk> {
        let messages = std::mem::take(&mut req.messages).into();
        self.stream_shared(req, messages)
    }

    /// [`Gateway::stream`] with the request's messages in `messages` (its own `messages`
    /// are ignored), shared with the caller rather than copied: the laptop keeps them as the
    /// base of the link's next request (`reasonix_forward::prefix`).
    pub fn stream_shared(
        &self,
        req: ProviderRequest,
        messages: SharedMessages,
    ) -> mpsc::Receiver<ProviderChunk> {
        let (tx, rx) = mpsc::channel(self.inner.settings.channel_capacity.max(1));
        let inner = self.inner.clone();
        tokio::spawn(async move {
            let stream_id = req.stream_id.clone();
            // A dropped receiver cancels at once, even while waiting on the provider or
            // sleeping between retries.
            tokio::select! {
                _ = run_stream(&inner, req, &messages, &tx) => {
                    tracing::debug!(stream_id, "provider stream finished");
                }
                _ = tx.closed() => {
                    tracing::debug!(stream_id, "provider stream cancelled by its reader");
                }
            }
        });
        rx
    }
}

/// Check, before anything connects, that a request for the model `label` (`None`: the
/// default) could be made: the model resolves to a provider and that provider's API key is
/// there. `reasonix run` calls it first, so a run that would fail at its first model request
/// (no key, unknown model or provider) fails without starting a daemon or creating a session
/// (#15). The error is the same text the first request would have failed with.
pub fn preflight(config: &Config, label: Option<&str>) -> Result<ResolvedModel, String> {
    let resolved = config.resolve_model(label).map_err(|e| e.to_string())?;
    lookup_api_key(&resolved.api_key_env, &config.dotenv_path())
        .map_err(|e| format!("provider `{}`: {e}", resolved.provider))?;
    Ok(resolved)
}

/// Sends one chunk; `false` when the receiver is gone (the request is then abandoned).
async fn emit(tx: &mpsc::Sender<ProviderChunk>, chunk: ProviderChunk) -> bool {
    tx.send(chunk).await.is_ok()
}

fn error_chunk(message: impl Into<String>, retryable: bool) -> ProviderChunk {
    ProviderChunk::Error {
        message: message.into(),
        retryable,
    }
}

async fn run_stream(
    inner: &Inner,
    req: ProviderRequest,
    messages: &SharedMessages,
    tx: &mpsc::Sender<ProviderChunk>,
) {
    let client = match &inner.client {
        Ok(c) => c,
        Err(e) => {
            emit(tx, error_chunk(e.clone(), false)).await;
            return;
        }
    };
    let resolved = match inner.config.resolve_model(req.model.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            emit(tx, error_chunk(e.to_string(), false)).await;
            return;
        }
    };
    let key = match lookup_api_key(&resolved.api_key_env, &inner.config.dotenv_path()) {
        Ok((k, _)) => k,
        Err(e) => {
            emit(
                tx,
                error_chunk(format!("provider `{}`: {e}", resolved.provider), false),
            )
            .await;
            return;
        }
    };
    let body = Body {
        model: &resolved.model,
        messages: ReplayedMessages(messages),
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        tools: (!req.tools.is_empty()).then_some(req.tools.as_slice()),
        temperature: req.temperature.or(inner.config.agent.temperature),
    };
    let body = match serde_json::to_vec(&body) {
        Ok(b) => b,
        Err(e) => {
            emit(
                tx,
                error_chunk(format!("cannot encode the request: {e}"), false),
            )
            .await;
            return;
        }
    };
    let url = format!(
        "{}/chat/completions",
        resolved.base_url.trim_end_matches('/')
    );
    let resp = match connect(client, &inner.settings, &url, &key, body, &resolved, tx).await {
        Ok(r) => r,
        Err(chunk) => {
            let chunk = match chunk {
                ProviderChunk::Error { message, retryable } => ProviderChunk::Error {
                    message: key.redact(&message),
                    retryable,
                },
                other => other,
            };
            emit(tx, chunk).await;
            return;
        }
    };
    read_stream(resp, &inner.settings, &resolved, &key, tx).await;
}

/// The JSON body of a streaming chat completion, serialised straight from the request
/// (the conversation is not copied for it).
#[derive(serde::Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: ReplayedMessages<'a>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a [Value]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
}

#[derive(serde::Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// Messages as sent: each one as it is, except an assistant message with tool calls that
/// lost its `reasoning_content`, which gets an empty one ([`fix_reasoning_replay`]).
struct ReplayedMessages<'a>(&'a SharedMessages);

impl serde::Serialize for ReplayedMessages<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for m in self.0.iter() {
            if needs_reasoning_fix(m) {
                let mut fixed = [m.clone()];
                fix_reasoning_replay(&mut fixed);
                seq.serialize_element(&fixed[0])?;
            } else {
                seq.serialize_element(m)?;
            }
        }
        seq.end()
    }
}

fn needs_reasoning_fix(m: &Value) -> bool {
    m.get("role").and_then(Value::as_str) == Some("assistant")
        && m.get("tool_calls")
            .and_then(Value::as_array)
            .is_some_and(|c| !c.is_empty())
        && m.get("reasoning_content").is_none_or(Value::is_null)
}

/// DeepSeek answers HTTP 400 when an assistant message with tool calls is replayed without
/// `reasoning_content`; give every such message an empty one when it lost it. Messages that
/// carry reasoning keep it untouched.
pub fn fix_reasoning_replay(messages: &mut [Value]) {
    for m in messages.iter_mut().filter(|m| needs_reasoning_fix(m)) {
        if let Some(obj) = m.as_object_mut() {
            obj.insert("reasoning_content".into(), Value::String(String::new()));
        }
    }
}

/// Up to 4 KiB of an error body, for messages.
const ERROR_BODY_LIMIT: usize = 4096;

/// The connection/header phase, with retries. Each retry is announced on `tx` as a
/// [`ProviderChunk::Retrying`] before its wait, so the user sees it. `Err` carries the final
/// `Error` chunk.
async fn connect(
    client: &reqwest::Client,
    settings: &GatewaySettings,
    url: &str,
    key: &ApiKey,
    body: Vec<u8>,
    model: &ResolvedModel,
    tx: &mpsc::Sender<ProviderChunk>,
) -> Result<reqwest::Response, ProviderChunk> {
    let policy = settings.retry;
    let started = tokio::time::Instant::now();
    let deadline = started + policy.budget;
    let mut attempts: u32 = 0;
    loop {
        attempts += 1;
        let attempt = client
            .post(url)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .bearer_auth(key.expose())
            .body(body.clone())
            .send();
        // The wait for headers ends at the idle timeout or the budget, whichever is first.
        let wait = settings
            .idle_timeout
            .min(deadline.saturating_duration_since(tokio::time::Instant::now()));
        let (failure, retry_after) = match tokio::time::timeout(wait, attempt).await {
            Err(_) => (
                Failure::Other(format!(
                    "no response from {url} within {} s",
                    wait.as_secs_f64().ceil() as u64
                )),
                None,
            ),
            Ok(Err(e)) if e.is_builder() => {
                return Err(error_chunk(
                    format!(
                        "invalid request to provider `{}`: {}",
                        model.provider,
                        describe(&e)
                    ),
                    false,
                ));
            }
            Ok(Err(e)) if e.is_connect() => (Failure::Connect(describe(&e)), None),
            Ok(Err(e)) => (Failure::Other(describe(&e)), None),
            Ok(Ok(resp)) if resp.status().is_success() => return Ok(resp),
            Ok(Ok(resp)) => {
                let status = resp.status().as_u16();
                let retry_after = resp
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(parse_retry_after);
                let text = read_error_body(resp, settings.idle_timeout).await;
                match classify_status(status, &text) {
                    StatusClass::Retry => (
                        Failure::Other(format!(
                            "HTTP {status} from provider `{}`: {}",
                            model.provider, text
                        )),
                        retry_after,
                    ),
                    StatusClass::Auth => {
                        return Err(error_chunk(
                            format!(
                                "provider `{}` rejected the API key from {} (HTTP {status}): {text}. Check the key in the environment or in your Reasonix .env",
                                model.provider, model.api_key_env
                            ),
                            false,
                        ));
                    }
                    StatusClass::Quota => {
                        return Err(error_chunk(
                            format!(
                                "provider `{}` says the account's balance or quota is exhausted (HTTP {status}): {text}. Top up the account or switch model; retrying will not help",
                                model.provider
                            ),
                            false,
                        ));
                    }
                    StatusClass::Fatal => {
                        return Err(error_chunk(
                            format!(
                                "provider `{}` refused the request for model `{}` (HTTP {status}): {text}",
                                model.provider, model.model
                            ),
                            false,
                        ));
                    }
                }
            }
        };
        let max_retries = match failure {
            Failure::Connect(_) => policy.connect_retries.min(policy.max_retries),
            Failure::Other(_) => policy.max_retries,
        };
        let retry = attempts; // the retry that would come next, 1-based
        let delay = policy.delay(retry, retry_after);
        let spent = started.elapsed();
        let over_budget = tokio::time::Instant::now() + delay >= deadline;
        if retry > max_retries || over_budget {
            let why = if retry > max_retries {
                format!(
                    "gave up after {attempts} attempts in {:.0} s",
                    spent.as_secs_f64()
                )
            } else {
                format!(
                    "gave up after {attempts} attempts: the retry budget of {} s is spent",
                    policy.budget.as_secs()
                )
            };
            // Exhausted here means "not retryable": the host would only repeat the same
            // retries and multiply the time a dead provider takes to fail the turn.
            let message = match failure {
                Failure::Connect(problem) => format!(
                    "cannot reach provider `{}` at {url}: {problem} ({why}). Check `base_url` of provider `{}` in your Reasonix config, and that the address is reachable from this machine",
                    model.provider, model.provider
                ),
                Failure::Other(problem) => format!("{problem} ({why})"),
            };
            return Err(error_chunk(message, false));
        }
        let problem = match &failure {
            Failure::Connect(p) => format!("cannot connect to {url}: {p}"),
            Failure::Other(p) => p.clone(),
        };
        let problem = key.redact(&problem);
        tracing::warn!(
            provider = %model.provider,
            retry,
            delay_ms = delay.as_millis() as u64,
            problem = %problem,
            "provider request failed; retrying"
        );
        let note = ProviderChunk::Retrying(ProviderRetry {
            phase: RetryPhase::Connect,
            attempt: attempts + 1,
            max_attempts: max_retries + 1,
            delay_ms: delay.as_millis() as u64,
            reason: short_reason(&problem),
        });
        if !emit(tx, note).await {
            return Err(error_chunk("the request was abandoned", false));
        }
        tokio::time::sleep(delay).await;
    }
}

/// Why one attempt of the connection/header phase failed.
enum Failure {
    /// Connecting failed (refused, DNS, TLS handshake, connect timeout).
    Connect(String),
    /// The provider answered with a retryable status, or the wait for headers ran out.
    Other(String),
}

/// The reason as the status line shows it: one line, at most 120 characters.
fn short_reason(problem: &str) -> String {
    let one_line: String = problem.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= 120 {
        one_line
    } else {
        let cut: String = one_line.chars().take(119).collect();
        format!("{cut}…")
    }
}

async fn read_error_body(mut resp: reqwest::Response, idle: Duration) -> String {
    let mut buf = Vec::new();
    while buf.len() < ERROR_BODY_LIMIT {
        match tokio::time::timeout(idle, resp.chunk()).await {
            Ok(Ok(Some(b))) => buf.extend_from_slice(&b),
            _ => break,
        }
    }
    buf.truncate(ERROR_BODY_LIMIT);
    let text = String::from_utf8_lossy(&buf).trim().to_string();
    // Prefer the provider's own message when the body is the usual `{"error":{...}}`.
    serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("message"))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or(text)
}

/// A reqwest error with its causes (e.g. "connection refused"), without headers.
fn describe(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// Read the SSE body until `[DONE]`, end of stream, an error or an idle timeout.
async fn read_stream(
    mut resp: reqwest::Response,
    settings: &GatewaySettings,
    model: &ResolvedModel,
    key: &ApiKey,
    tx: &mpsc::Sender<ProviderChunk>,
) {
    let mut lines = SseLines::new();
    let mut asm = StreamAssembler::new(&model.model);
    // Non-SSE text in the body (e.g. a JSON error with status 200), kept for the message.
    let mut stray = String::new();
    loop {
        let next = tokio::time::timeout(settings.idle_timeout, resp.chunk()).await;
        let bytes = match next {
            Err(_) => {
                let msg = format!(
                    "no data from provider `{}` for {} s (idle timeout)",
                    model.provider,
                    settings.idle_timeout.as_secs()
                );
                emit(tx, error_chunk(msg, true)).await;
                return;
            }
            Ok(Err(e)) => {
                if asm.has_finish_reason() {
                    // The answer is complete; only the trailer was lost.
                    finish(&mut asm, None, tx).await;
                } else {
                    let msg = format!("the provider stream broke: {}", key.redact(&describe(&e)));
                    emit(tx, error_chunk(msg, true)).await;
                }
                return;
            }
            Ok(Ok(None)) => {
                if let Some(line) = lines.finish() {
                    if !handle_line(&line, &mut asm, &mut stray, tx).await {
                        return;
                    }
                }
                let note = (!stray.is_empty()).then(|| key.redact(stray.trim()));
                finish(&mut asm, note.as_deref(), tx).await;
                return;
            }
            Ok(Ok(Some(b))) => b,
        };
        for line in lines.push(&bytes) {
            if !handle_line(&line, &mut asm, &mut stray, tx).await {
                return;
            }
            if asm.saw_done() {
                finish(&mut asm, None, tx).await;
                return;
            }
        }
    }
}

/// Handle one line; `false` means stop (receiver gone or the provider reported an error).
async fn handle_line(
    line: &str,
    asm: &mut StreamAssembler,
    stray: &mut String,
    tx: &mpsc::Sender<ProviderChunk>,
) -> bool {
    match classify_line(line) {
        SseLine::Data(payload) => {
            for chunk in asm.data(payload) {
                let is_error = matches!(chunk, ProviderChunk::Error { .. });
                if !emit(tx, chunk).await || is_error {
                    return false;
                }
            }
            true
        }
        SseLine::Ignorable => true,
        SseLine::Other(text) => {
            if stray.len() < 300 {
                stray.push_str(text);
                stray.push(' ');
            }
            true
        }
    }
}

async fn finish(asm: &mut StreamAssembler, note: Option<&str>, tx: &mpsc::Sender<ProviderChunk>) {
    for chunk in asm.finish(note) {
        if !emit(tx, chunk).await {
            return;
        }
    }
}
