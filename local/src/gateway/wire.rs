//! The seam between the gateway's transport (key, HTTP, retries, SSE lines) and a provider's
//! wire format. Each format is one module implementing [`Wire`]: where the request goes,
//! what its body is, which protocol headers it needs, and how one response's `data:`
//! payloads become [`ProviderChunk`]s. The host always sends OpenAI-shaped messages; turning
//! them into another format is the wire's business only.

use reasonix_forward::prefix::SharedMessages;
use reasonix_forward::proto::{ProviderChunk, ReasoningEffort};
use serde_json::Value;

use crate::config::{ProviderKind, ResolvedModel};

/// What a wire format gets to build one request body from.
pub struct WireRequest<'a> {
    /// The model, resolved against the config (name, limits, effort levels).
    pub model: &'a ResolvedModel,
    /// OpenAI-format messages: the system prompt, then the conversation.
    pub messages: &'a SharedMessages,
    /// OpenAI-format tool definitions (`{"type":"function","function":{...}}`), sorted.
    pub tools: &'a [Value],
    /// Sampling temperature (the request's, else `[agent] temperature`).
    pub temperature: Option<f64>,
    /// Reasoning effort, already checked against [`ResolvedModel::efforts`].
    pub effort: Option<ReasoningEffort>,
}

/// One wire format.
pub trait Wire: Sync {
    /// The URL a request goes to, from the provider's `base_url`.
    fn url(&self, base_url: &str) -> String;

    /// Protocol headers besides the key, content type and `Accept` (e.g. a version).
    fn headers(&self) -> &'static [(&'static str, &'static str)];

    /// The JSON body of a streaming request; `Err` says why it cannot be built.
    fn body(&self, req: &WireRequest<'_>) -> Result<Vec<u8>, String>;

    /// A parser for one response stream of `model`.
    fn parser(&self, model: &ResolvedModel) -> Box<dyn StreamParser>;
}

/// Turns the `data:` payloads of one response into chunks.
pub trait StreamParser: Send {
    /// Feed one `data:` payload; returns the chunks to forward now. An `Error` chunk ends
    /// the stream (nothing more is read).
    fn data(&mut self, payload: &str) -> Vec<ProviderChunk>;

    /// True once the stream's own end marker was seen (`[DONE]`, `message_stop`): reading
    /// stops and [`StreamParser::finish`] is called.
    fn saw_end(&self) -> bool;

    /// True once the answer is complete (a finish or stop reason arrived): a connection
    /// lost after this point lost only the trailer.
    fn answer_complete(&self) -> bool;

    /// End of stream: held-back chunks, complete tool calls in order, usage and `Done` — or
    /// an `Error` when the stream ended before the answer was complete (`note` is added to
    /// that error).
    fn finish(&mut self, note: Option<&str>) -> Vec<ProviderChunk>;
}

/// The wire of a provider kind.
pub fn for_kind(kind: ProviderKind) -> &'static dyn Wire {
    match kind {
        ProviderKind::Openai => &super::openai::OpenAi,
        ProviderKind::Anthropic => &super::anthropic::Anthropic,
    }
}

/// A fresh tool-call id for providers that send none.
pub fn generate_call_id() -> String {
    format!("call_{:016x}", rand::random::<u64>())
}
