//! The Anthropic Messages API wire (`kind = "anthropic"`): `POST base_url/v1/messages` with
//! `stream: true` and `anthropic-version: 2023-06-01`, the key in `x-api-key` (or `Authorization:
//! Bearer` with `auth_header = "bearer"`). The host's OpenAI-shaped messages are converted
//! ([`convert`]), prompt caching is explicit (`cache_control` breakpoints, see
//! [`convert::place_breakpoints`]), the reasoning effort becomes a thinking budget
//! ([`thinking_budget`]), and the event stream is read by [`stream::MessageStream`].

pub mod convert;
pub mod stream;

use reasonix_forward::proto::ReasoningEffort;
use serde_json::{json, Map, Value};

use super::wire::{StreamParser, Wire, WireRequest};
use crate::config::{ResolvedModel, DEFAULT_MAX_OUTPUT_TOKENS};

/// The API version every request names.
pub const API_VERSION: &str = "2023-06-01";

/// The API's smallest thinking budget.
pub const MIN_THINKING_BUDGET: u64 = 1024;

/// Tokens left for the answer itself (text and tool calls) when a budget is cut to fit
/// `max_tokens`.
pub const ANSWER_RESERVE: u64 = 1024;

/// The Anthropic Messages wire.
pub struct Anthropic;

impl Wire for Anthropic {
    fn url(&self, base_url: &str) -> String {
        format!("{}/v1/messages", base_url.trim_end_matches('/'))
    }

    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        &[("anthropic-version", API_VERSION)]
    }

    fn body(&self, req: &WireRequest<'_>) -> Result<Vec<u8>, String> {
        let body = request_body(req)?;
        serde_json::to_vec(&body).map_err(|e| format!("cannot encode the request: {e}"))
    }

    fn parser(&self, model: &ResolvedModel) -> Box<dyn StreamParser> {
        Box::new(stream::MessageStream::new(&model.model))
    }
}

/// The thinking budget of an effort level (before it is fitted under `max_tokens`).
pub fn level_budget(effort: ReasoningEffort) -> u64 {
    match effort {
        ReasoningEffort::Low => 2_048,
        ReasoningEffort::Medium => 6_144,
        ReasoningEffort::High => 12_288,
        ReasoningEffort::Max => 24_576,
    }
}

/// The `budget_tokens` sent for `effort` with `max_tokens`: the level's budget, cut to leave
/// [`ANSWER_RESERVE`] tokens for the answer (the API wants the budget below `max_tokens`),
/// never under the API's minimum. `Err` when `max_tokens` has no room for any thinking.
pub fn thinking_budget(
    effort: ReasoningEffort,
    max_tokens: u64,
    model: &str,
) -> Result<u64, String> {
    let room = max_tokens.saturating_sub(ANSWER_RESERVE);
    if room < MIN_THINKING_BUDGET {
        return Err(format!(
            "model `{model}` has max_output_tokens = {max_tokens}, which leaves no room for thinking at effort `{effort}` (at least {} is needed); raise max_output_tokens or unset the effort",
            MIN_THINKING_BUDGET + ANSWER_RESERVE
        ));
    }
    Ok(level_budget(effort).min(room))
}

/// The request body (everything but the transport).
pub fn request_body(req: &WireRequest<'_>) -> Result<Value, String> {
    let mut converted =
        convert::convert_messages(req.messages.iter()).map_err(|e| e.to_string())?;
    let mut tools = convert::convert_tools(req.tools);
    convert::place_breakpoints(&mut tools, &mut converted);
    let max_tokens = req
        .model
        .max_output_tokens
        .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS);
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model.model));
    body.insert("max_tokens".into(), json!(max_tokens));
    if !converted.system.is_empty() {
        body.insert("system".into(), Value::Array(converted.system));
    }
    body.insert("messages".into(), Value::Array(converted.messages));
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("stream".into(), json!(true));
    match req.effort {
        Some(effort) => {
            let budget = thinking_budget(effort, max_tokens, &req.model.label())?;
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
            // With thinking on the API accepts no temperature but its default.
        }
        None => {
            if let Some(t) = req.temperature {
                body.insert("temperature".into(), json!(t));
            }
        }
    }
    Ok(Value::Object(body))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::config::{AuthHeader, ProviderKind};
    use reasonix_forward::prefix::SharedMessages;

    fn model(max: Option<u64>) -> ResolvedModel {
        ResolvedModel {
            provider: "a".into(),
            model: "claude-x".into(),
            base_url: "http://x".into(),
            api_key_env: "K".into(),
            context_window: 200_000,
            prices: None,
            kind: ProviderKind::Anthropic,
            auth: AuthHeader::XApiKey,
            efforts: ReasoningEffort::ALL.to_vec(),
            default_effort: None,
            max_output_tokens: max,
        }
    }

    #[test]
    fn effort_becomes_a_budget_and_drops_the_temperature() {
        let m = model(None);
        let msgs: SharedMessages = vec![json!({"role": "user", "content": "hi"})].into();
        let req = |effort| WireRequest {
            model: &m,
            messages: &msgs,
            tools: &[],
            temperature: Some(0.3),
            effort,
        };
        let b = request_body(&req(Some(ReasoningEffort::High))).unwrap();
        assert_eq!(
            b["thinking"],
            json!({"type": "enabled", "budget_tokens": 12_288})
        );
        assert_eq!(b["max_tokens"], 32_000);
        assert!(b.get("temperature").is_none());
        let b = request_body(&req(None)).unwrap();
        assert!(b.get("thinking").is_none());
        assert_eq!(b["temperature"], 0.3);
        assert_eq!(b["stream"], true);
        assert_eq!(
            b["messages"][0]["content"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
        // Budgets rise with the level and always fit under max_tokens.
        let budgets: Vec<u64> = ReasoningEffort::ALL
            .iter()
            .map(|e| level_budget(*e))
            .collect();
        assert!(budgets.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            thinking_budget(ReasoningEffort::Max, 8_192, "m").unwrap(),
            7_168
        );
        let e = thinking_budget(ReasoningEffort::Low, 2_000, "a/claude-x").unwrap_err();
        assert!(e.contains("max_output_tokens = 2000"), "{e}");
    }
}
