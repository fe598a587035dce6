//! The provider and model tables: prices, per-model overrides, a provider after merging, and
//! resolving a model label against them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::file::ProviderFile;
use super::load::set;
use super::{
    AuthHeader, Config, ConfigError, ProviderKind, ReasoningEffort, DEFAULT_CONTEXT_WINDOW,
};

/// Prices in currency units per one million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prices {
    /// Uncached prompt tokens.
    pub input: f64,
    /// Prompt tokens served from the provider's cache.
    #[serde(default)]
    pub cached: f64,
    /// Completion tokens (including reasoning).
    pub output: f64,
}

/// Per-model settings that differ from the provider's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ModelOverride {
    /// Context window of this model.
    pub context_window: Option<u64>,
    /// Prices of this model.
    pub prices: Option<Prices>,
    /// Reasoning-effort levels this model takes (replaces the provider's list).
    pub efforts: Option<Vec<ReasoningEffort>>,
    /// Effort this model uses when the user chose none.
    pub effort: Option<ReasoningEffort>,
    /// Most tokens one reply may have (`max_tokens` on the Anthropic wire).
    pub max_output_tokens: Option<u64>,
}

/// One model provider after merging.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProviderConfig {
    /// Name used in model labels (`name/model`).
    pub name: String,
    /// Wire format.
    pub kind: ProviderKind,
    /// Base URL; the gateway appends `/chat/completions` (`openai`) or `/v1/messages`
    /// (`anthropic`).
    pub base_url: String,
    /// Models offered (used to resolve bare model names).
    pub models: Vec<String>,
    /// Model used when only the provider name is given (falls back to the first of `models`).
    pub default: Option<String>,
    /// Name of the environment variable (or `<home>/.env` entry) holding the API key.
    pub api_key_env: String,
    /// Context window of the provider's models unless overridden per model.
    pub context_window: u64,
    /// Per-model overrides keyed by model name.
    pub model_overrides: BTreeMap<String, ModelOverride>,
    /// Prices per 1M tokens, unless overridden per model.
    pub prices: Option<Prices>,
    /// How the key is sent; `None`: the kind's default (`bearer` for `openai`,
    /// `x-api-key` for `anthropic`).
    pub auth_header: Option<AuthHeader>,
    /// Reasoning-effort levels the provider's models take; `None`: the kind's default.
    pub efforts: Option<Vec<ReasoningEffort>>,
    /// Effort used when the user chose none; `None`: the provider decides.
    pub effort: Option<ReasoningEffort>,
    /// Most tokens one reply may have; `None`: the provider's default (the Anthropic wire,
    /// which requires a value, sends [`DEFAULT_MAX_OUTPUT_TOKENS`]).
    pub max_output_tokens: Option<u64>,
}

impl ProviderConfig {
    /// The model used when only the provider is named.
    pub fn default_model(&self) -> Option<&str> {
        self.default
            .as_deref()
            .or_else(|| self.models.first().map(String::as_str))
    }
}

/// A model label resolved against the configured providers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResolvedModel {
    /// Provider name.
    pub provider: String,
    /// Model name as sent to the provider.
    pub model: String,
    /// Provider base URL.
    pub base_url: String,
    /// Environment variable holding the provider's key.
    pub api_key_env: String,
    /// Context window of this model.
    pub context_window: u64,
    /// Prices of this model, when configured.
    pub prices: Option<Prices>,
    /// Wire format of its provider.
    pub kind: ProviderKind,
    /// How the key is sent.
    pub auth: AuthHeader,
    /// Reasoning-effort levels it takes.
    pub efforts: Vec<ReasoningEffort>,
    /// Effort used when the user chose none.
    pub default_effort: Option<ReasoningEffort>,
    /// Most tokens one reply may have, when configured.
    pub max_output_tokens: Option<u64>,
}

impl ResolvedModel {
    /// `provider/model`.
    pub fn label(&self) -> String {
        format!("{}/{}", self.provider, self.model)
    }
}

impl Config {
    /// Find a provider by name.
    pub fn provider(&self, name: &str) -> Option<&ProviderConfig> {
        self.providers.iter().find(|p| p.name == name)
    }

    /// Resolve a model label: `provider/model`, a provider name (its default model), or a
    /// bare model name listed by some provider (the first such provider wins). `None` or an
    /// empty label means `default_model`, else the first provider's default model.
    pub fn resolve_model(&self, label: Option<&str>) -> Result<ResolvedModel, ConfigError> {
        let label = label
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .or(self.default_model.as_deref());
        let Some(label) = label else {
            let first = self.providers.first();
            return match first.and_then(|p| p.default_model().map(|m| (p, m))) {
                Some((p, m)) => Ok(self.resolved(p, m)),
                None => Err(self.unknown("(default)")),
            };
        };
        if let Some(p) = self.provider(label) {
            return match p.default_model() {
                Some(m) => Ok(self.resolved(p, m)),
                None => Err(self.unknown(label)),
            };
        }
        if let Some((prov, model)) = label.split_once('/') {
            if let Some(p) = self.provider(prov) {
                if !model.is_empty() {
                    return Ok(self.resolved(p, model));
                }
            }
        }
        // A bare model; may itself contain '/' (`openai/gpt-4o` on a router).
        for p in &self.providers {
            if p.models.iter().any(|m| m == label) {
                return Ok(self.resolved(p, label));
            }
        }
        Err(self.unknown(label))
    }

    pub(super) fn resolved(&self, p: &ProviderConfig, model: &str) -> ResolvedModel {
        let ov = p.model_overrides.get(model);
        ResolvedModel {
            provider: p.name.clone(),
            model: model.to_string(),
            base_url: p.base_url.clone(),
            api_key_env: p.api_key_env.clone(),
            context_window: ov
                .and_then(|o| o.context_window)
                .unwrap_or(p.context_window),
            prices: ov.and_then(|o| o.prices).or(p.prices),
            kind: p.kind,
            auth: p.auth_header.unwrap_or_else(|| p.kind.default_auth()),
            efforts: ov
                .and_then(|o| o.efforts.clone())
                .or_else(|| p.efforts.clone())
                .unwrap_or_else(|| p.kind.default_efforts()),
            default_effort: ov.and_then(|o| o.effort).or(p.effort),
            max_output_tokens: ov.and_then(|o| o.max_output_tokens).or(p.max_output_tokens),
        }
    }

    fn unknown(&self, label: &str) -> ConfigError {
        let known = if self.providers.is_empty() {
            "no providers".to_string()
        } else {
            self.providers
                .iter()
                .map(|p| {
                    if p.models.is_empty() {
                        format!("{} (no models listed)", p.name)
                    } else {
                        format!("{}: {}", p.name, p.models.join(", "))
                    }
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        ConfigError::UnknownModel {
            label: label.to_string(),
            known,
        }
    }

    pub(super) fn merge_provider(
        &mut self,
        pf: ProviderFile,
        src: &str,
        i: usize,
    ) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            source_name: Some(src.to_string()),
            key: format!("providers[{i}].{key}"),
            message,
        };
        if pf.name.trim().is_empty() {
            return Err(invalid("name", "a provider needs a non-empty name".into()));
        }
        if let Some(existing) = self.providers.iter_mut().find(|p| p.name == pf.name) {
            set(&mut existing.kind, pf.kind);
            set(&mut existing.base_url, pf.base_url);
            set(&mut existing.models, pf.models);
            set(&mut existing.default, pf.default.map(Some));
            set(&mut existing.api_key_env, pf.api_key_env);
            set(&mut existing.context_window, pf.context_window);
            existing
                .model_overrides
                .extend(pf.model_overrides.unwrap_or_default());
            set(&mut existing.prices, pf.prices.map(Some));
            set(&mut existing.auth_header, pf.auth_header.map(Some));
            set(&mut existing.efforts, pf.efforts.map(Some));
            set(&mut existing.effort, pf.effort.map(Some));
            set(
                &mut existing.max_output_tokens,
                pf.max_output_tokens.map(Some),
            );
            return Ok(());
        }
        let base_url = pf.base_url.ok_or_else(|| {
            invalid(
                "base_url",
                format!("provider `{}` needs a base_url", pf.name),
            )
        })?;
        let api_key_env = pf.api_key_env.ok_or_else(|| {
            invalid(
                "api_key_env",
                format!(
                    "provider `{}` needs api_key_env (the NAME of the variable holding its key)",
                    pf.name
                ),
            )
        })?;
        self.providers.push(ProviderConfig {
            name: pf.name,
            kind: pf.kind.unwrap_or_default(),
            base_url,
            models: pf.models.unwrap_or_default(),
            default: pf.default,
            api_key_env,
            context_window: pf.context_window.unwrap_or(DEFAULT_CONTEXT_WINDOW),
            model_overrides: pf.model_overrides.unwrap_or_default(),
            prices: pf.prices,
            auth_header: pf.auth_header,
            efforts: pf.efforts,
            effort: pf.effort,
            max_output_tokens: pf.max_output_tokens,
        });
        Ok(())
    }
}
