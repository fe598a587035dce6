//! Checks that need the merged picture.

use super::{Config, ConfigError};

impl Config {
    /// Checks that need the merged picture.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            source_name: None,
            key: key.to_string(),
            message,
        };
        for (key, v) in [
            ("agent.compact_ratio", self.agent.compact_ratio),
            (
                "agent.tool_result_snip_ratio",
                self.agent.tool_result_snip_ratio,
            ),
            ("agent.compact_force_ratio", self.agent.compact_force_ratio),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(invalid(key, format!("must be in (0, 1], got {v}")));
            }
        }
        let a = &self.agent;
        if !(a.tool_result_snip_ratio <= a.compact_ratio
            && a.compact_ratio <= a.compact_force_ratio)
        {
            return Err(invalid(
                "agent.compact_ratio",
                format!(
                    "the ladder must climb: tool_result_snip_ratio ({}) ≤ compact_ratio ({}) ≤ compact_force_ratio ({}); fix the order in [agent]",
                    a.tool_result_snip_ratio, a.compact_ratio, a.compact_force_ratio
                ),
            ));
        }
        if let Some(c) = self.agent.goal_cost_budget_usd {
            if !(c.is_finite() && c > 0.0) {
                return Err(invalid(
                    "agent.goal_cost_budget_usd",
                    format!("must be a positive number of US dollars, got {c}"),
                ));
            }
        }
        if let Some(t) = self.agent.temperature {
            if !(0.0..=2.0).contains(&t) {
                return Err(invalid(
                    "agent.temperature",
                    format!("must be between 0 and 2, got {t}"),
                ));
            }
        }
        if !(1..=600).contains(&self.agent.provider_retry_seconds) {
            return Err(invalid(
                "agent.provider_retry_seconds",
                format!(
                    "must be between 1 and 600, got {}",
                    self.agent.provider_retry_seconds
                ),
            ));
        }
        if !(0.0..=1.0).contains(&self.agent.prompt_confirm_ratio) {
            return Err(invalid(
                "agent.prompt_confirm_ratio",
                format!(
                    "must be between 0 (never ask) and 1, got {}",
                    self.agent.prompt_confirm_ratio
                ),
            ));
        }
        if self.agent.max_steps == 0 {
            return Err(invalid("agent.max_steps", "must be at least 1".into()));
        }
        for p in &self.providers {
            if !is_env_name(&p.api_key_env) {
                return Err(invalid(
                    &format!("providers.{}.api_key_env", p.name),
                    format!(
                        "`api_key_env` is the NAME of an environment variable (like DEEPSEEK_API_KEY), not the key; put the key itself in {}",
                        self.dotenv_path().display()
                    ),
                ));
            }
            if !(p.base_url.starts_with("http://") || p.base_url.starts_with("https://")) {
                return Err(invalid(
                    &format!("providers.{}.base_url", p.name),
                    format!("must start with http:// or https://, got `{}`", p.base_url),
                ));
            }
        }
        self.validate_wire()?;
        if self.default_model.is_some() {
            self.resolve_model(None)?;
        }
        self.validate_effort()?;
        Ok(())
    }
}

pub(super) fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
