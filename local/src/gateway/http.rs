//! The transport every wire format shares: one POST with the key in its header, retries of
//! the connection/header phase (announced as [`ProviderChunk::Retrying`]), then the SSE body
//! read line by line into the wire's [`StreamParser`] with an idle timeout.

use std::time::Duration;

use reasonix_forward::proto::{ProviderChunk, ProviderRetry, RetryPhase};
use serde_json::Value;
use tokio::sync::mpsc;

use super::keys::ApiKey;
use super::retry::{classify_status, parse_retry_after, StatusClass};
use super::sse::{classify_line, SseLine, SseLines};
use super::wire::{StreamParser, Wire};
use super::{emit, error_chunk, GatewaySettings};
use crate::config::{AuthHeader, ResolvedModel};

/// Up to 4 KiB of an error body, for messages.
const ERROR_BODY_LIMIT: usize = 4096;

/// Where one model request goes and how.
pub(super) struct Target<'a> {
    /// The endpoint.
    pub url: &'a str,
    /// The provider's key.
    pub key: &'a ApiKey,
    /// The wire format (its protocol headers).
    pub wire: &'a dyn Wire,
    /// The model (provider name for messages, how the key is sent).
    pub model: &'a ResolvedModel,
}

/// The connection/header phase, with retries. Each retry is announced on `tx` as a
/// [`ProviderChunk::Retrying`] before its wait, so the user sees it. `Err` carries the final
/// `Error` chunk.
pub(super) async fn connect(
    client: &reqwest::Client,
    settings: &GatewaySettings,
    target: &Target<'_>,
    body: Vec<u8>,
    tx: &mpsc::Sender<ProviderChunk>,
) -> Result<reqwest::Response, ProviderChunk> {
    let Target {
        url,
        key,
        wire,
        model,
    } = *target;
    let policy = settings.retry;
    let started = tokio::time::Instant::now();
    let deadline = started + policy.budget;
    let mut attempts: u32 = 0;
    loop {
        attempts += 1;
        let mut builder = client
            .post(url)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .header(reqwest::header::CONTENT_TYPE, "application/json");
        builder = match model.auth {
            AuthHeader::Bearer => builder.bearer_auth(key.expose()),
            AuthHeader::XApiKey => builder.header("x-api-key", key.expose()),
        };
        for (name, value) in wire.headers() {
            builder = builder.header(*name, *value);
        }
        let attempt = builder.body(body.clone()).send();
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

/// Read the SSE body until the parser saw the stream's end, end of stream, an error or an
/// idle timeout.
pub(super) async fn read_stream(
    mut resp: reqwest::Response,
    settings: &GatewaySettings,
    model: &ResolvedModel,
    key: &ApiKey,
    mut asm: Box<dyn StreamParser>,
    tx: &mpsc::Sender<ProviderChunk>,
) {
    let asm = asm.as_mut();
    let mut lines = SseLines::new();
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
                if asm.answer_complete() {
                    // The answer is complete; only the trailer was lost.
                    finish(asm, None, tx).await;
                } else {
                    let msg = format!("the provider stream broke: {}", key.redact(&describe(&e)));
                    emit(tx, error_chunk(msg, true)).await;
                }
                return;
            }
            Ok(Ok(None)) => {
                if let Some(line) = lines.finish() {
                    if !handle_line(&line, asm, &mut stray, tx).await {
                        return;
                    }
                }
                let note = (!stray.is_empty()).then(|| key.redact(stray.trim()));
                finish(asm, note.as_deref(), tx).await;
                return;
            }
            Ok(Ok(Some(b))) => b,
        };
        for line in lines.push(&bytes) {
            if !handle_line(&line, asm, &mut stray, tx).await {
                return;
            }
            if asm.saw_end() {
                finish(asm, None, tx).await;
                return;
            }
        }
    }
}

/// Handle one line; `false` means stop (receiver gone or the provider reported an error).
async fn handle_line(
    line: &str,
    asm: &mut dyn StreamParser,
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

async fn finish(asm: &mut dyn StreamParser, note: Option<&str>, tx: &mpsc::Sender<ProviderChunk>) {
    for chunk in asm.finish(note) {
        if !emit(tx, chunk).await {
            return;
        }
    }
}
