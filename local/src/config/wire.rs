//! What the gateway needs from a provider's configuration to shape its requests: the wire
//! format (`kind`), how the key is sent, the output-token cap, and the reasoning-effort
//! levels a model takes (with the one it uses unless told otherwise).

use serde::{Deserialize, Serialize};

pub use reasonix_forward::proto::ReasoningEffort;

use super::{Config, ConfigError, ResolvedModel};

/// Wire format of a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI-compatible chat completions with SSE streaming (`POST base_url/chat/completions`).
    #[default]
    Openai,
    /// The Anthropic Messages API with SSE streaming (`POST base_url/v1/messages`) and
    /// explicit prompt caching (`cache_control` breakpoints).
    Anthropic,
}

impl ProviderKind {
    /// The name as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
        }
    }

    /// The effort levels a model of this kind takes unless its config lists others: the
    /// three `reasoning_effort` values OpenAI's reasoning models accept, and all four
    /// levels (thinking budgets) on the Anthropic wire.
    pub fn default_efforts(self) -> Vec<ReasoningEffort> {
        match self {
            ProviderKind::Openai => vec![
                ReasoningEffort::Low,
                ReasoningEffort::Medium,
                ReasoningEffort::High,
            ],
            ProviderKind::Anthropic => ReasoningEffort::ALL.to_vec(),
        }
    }

    /// How the key is sent unless `auth_header` says otherwise.
    pub fn default_auth(self) -> AuthHeader {
        match self {
            ProviderKind::Openai => AuthHeader::Bearer,
            ProviderKind::Anthropic => AuthHeader::XApiKey,
        }
    }
}

/// The header that carries the API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthHeader {
    /// `Authorization: Bearer <key>`.
    #[serde(rename = "bearer")]
    Bearer,
    /// `x-api-key: <key>` (Anthropic's own header).
    #[serde(rename = "x-api-key")]
    XApiKey,
}

/// `max_tokens` of an Anthropic request when the model sets no `max_output_tokens` (the
/// Messages API requires one).
pub const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 32_000;

/// The levels of a list, as a message shows them (`low, high, max`).
pub fn effort_list(levels: &[ReasoningEffort]) -> String {
    if levels.is_empty() {
        return "none".into();
    }
    levels
        .iter()
        .map(|e| e.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl ResolvedModel {
    /// `Ok` when the model takes `effort`; otherwise the error names the levels it does.
    pub fn check_effort(&self, effort: ReasoningEffort) -> Result<(), ConfigError> {
        if self.efforts.contains(&effort) {
            return Ok(());
        }
        Err(ConfigError::UnsupportedEffort {
            model: self.label(),
            effort,
            supported: effort_list(&self.efforts),
        })
    }

    /// The effort a request to this model is sent with: `choice` when given (checked),
    /// else the model's default.
    pub fn effort(
        &self,
        choice: Option<ReasoningEffort>,
    ) -> Result<Option<ReasoningEffort>, ConfigError> {
        match choice {
            Some(e) => self.check_effort(e).map(|()| Some(e)),
            None => Ok(self.default_effort),
        }
    }
}

impl Config {
    /// The effort of a session on `model` (`None`: the default model): the user's choice
    /// (`/effort`, `--effort` or `[agent] effort`, passed as `choice`), else the model's
    /// `effort`; a level the model does not take is an error naming those it does.
    pub fn effort_for(
        &self,
        model: Option<&str>,
        choice: Option<ReasoningEffort>,
    ) -> Result<Option<ReasoningEffort>, ConfigError> {
        self.resolve_model(model)?.effort(choice)
    }

    /// The effort a session opened with this configuration on `model` uses, for
    /// [`SessionSettings`](reasonix_forward::proto::SessionSettings): `[agent] effort`
    /// (which `--effort` sets) or the model's default. A level the model does not take was
    /// refused when the configuration was loaded (for the default model) or when it was
    /// chosen; here it falls back to the model's default rather than failing a session.
    pub fn session_effort(&self, model: Option<&str>) -> Option<ReasoningEffort> {
        match self.effort_for(model, self.agent.effort) {
            Ok(e) => e,
            Err(_) => self
                .resolve_model(model)
                .ok()
                .and_then(|m| m.default_effort),
        }
    }
}

impl Config {
    /// Every model's default effort is one of its levels, and no `max_output_tokens` is 0.
    pub(super) fn validate_wire(&self) -> Result<(), ConfigError> {
        let invalid = |key: String, message: String| ConfigError::Invalid {
            source_name: None,
            key,
            message,
        };
        for p in &self.providers {
            let mut models: Vec<&str> = p.models.iter().map(String::as_str).collect();
            models.extend(p.model_overrides.keys().map(String::as_str));
            for m in models {
                let resolved = self.resolved(p, m);
                if let Some(e) = resolved.default_effort {
                    resolved.check_effort(e).map_err(|e| {
                        invalid(
                            format!("providers.{}.effort", p.name),
                            format!("the default effort of `{}/{m}`: {e}", p.name),
                        )
                    })?;
                }
            }
            let caps = p.max_output_tokens.into_iter().chain(
                p.model_overrides
                    .values()
                    .filter_map(|o| o.max_output_tokens),
            );
            if caps.into_iter().any(|n| n == 0) {
                return Err(invalid(
                    format!("providers.{}.max_output_tokens", p.name),
                    "must be at least 1".into(),
                ));
            }
        }
        Ok(())
    }

    /// `[agent] effort` / `--effort` must suit the model a session starts with; a later
    /// `/model` keeps it only where it fits (the TUI says so).
    pub(super) fn validate_effort(&self) -> Result<(), ConfigError> {
        if let Some(e) = self.agent.effort {
            if let Ok(m) = self.resolve_model(None) {
                m.check_effort(e)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for e in ReasoningEffort::ALL {
            assert_eq!(ReasoningEffort::parse(e.as_str()), Some(e));
        }
        assert_eq!(
            ReasoningEffort::parse(" HIGH "),
            Some(ReasoningEffort::High)
        );
        assert_eq!(ReasoningEffort::parse("extreme"), None);
        assert_eq!(
            effort_list(&ProviderKind::Openai.default_efforts()),
            "low, medium, high"
        );
    }
}
