//! The provider gateway: the only code in Reasonix that reads API keys and speaks HTTP to
//! model providers.
//!
//! The daemon on the host sends a [`ProviderRequest`] (OpenAI-shaped messages, whatever the
//! provider); [`Gateway::stream`] resolves the model, reads the key (environment, then
//! `<home>/.env`), has the provider's wire format ([`wire::Wire`]: `openai.rs`,
//! `anthropic.rs`) build the body, POSTs it with SSE streaming ([`http`]), retries transient
//! failures of the connection/header phase, and turns the stream into typed
//! [`ProviderChunk`]s on a channel. The reading task does not depend on the channel's reader
//! keeping up, so a slow or temporarily disconnected consumer does not stall the provider
//! connection.

pub mod anthropic;
pub mod http;
pub mod keys;
pub mod mcp_http;
pub mod oauth;
pub mod openai;
pub mod retry;
pub mod sse;
pub mod think;
pub mod web_fetch;
pub mod wire;

use std::sync::Arc;
use std::time::Duration;

use reasonix_forward::prefix::SharedMessages;
use reasonix_forward::proto::{ProviderChunk, ProviderRequest};
use tokio::sync::mpsc;

use crate::config::{Config, ResolvedModel};
use keys::lookup_api_key;
use retry::RetryPolicy;

pub use openai::fix_reasoning_replay;

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

/// Check `[agent] planner_model` (issue 38 §2) like [`preflight`] checks the executor's: it
/// resolves to a configured provider and model, and that provider's key is there. Every
/// entry that starts a session calls it, so a planner that could never answer is an error
/// at start-up naming it, not a failure at the first planned turn.
pub fn preflight_planner(config: &Config) -> Result<(), String> {
    let Some(label) = config.agent.planner_model.as_deref() else {
        return Ok(());
    };
    preflight(config, Some(label))
        .map(|_| ())
        .map_err(|e| format!("[agent] planner_model `{label}`: {e}"))
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
    // The laptop checked the level when it was chosen; checked again here because the
    // request may come from a session another laptop (with another config) set up.
    let effort = match resolved.effort(req.effort) {
        Ok(e) => e,
        Err(e) => {
            emit(tx, error_chunk(e.to_string(), false)).await;
            return;
        }
    };
    let wire = wire::for_kind(resolved.kind);
    let body = wire.body(&wire::WireRequest {
        model: &resolved,
        messages,
        tools: &req.tools,
        temperature: req.temperature.or(inner.config.agent.temperature),
        effort,
    });
    let body = match body {
        Ok(b) => b,
        Err(e) => {
            emit(tx, error_chunk(e, false)).await;
            return;
        }
    };
    let url = wire.url(&resolved.base_url);
    let target = http::Target {
        url: &url,
        key: &key,
        wire,
        model: &resolved,
    };
    let resp = match http::connect(client, &inner.settings, &target, body, tx).await {
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
    http::read_stream(
        resp,
        &inner.settings,
        &resolved,
        &key,
        wire.parser(&resolved),
        tx,
    )
    .await;
}
