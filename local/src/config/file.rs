//! The file layer: every field optional so layers can be told apart from defaults; parsing
//! with error spans (line, column, dotted key) and the scan for API keys.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::validate::is_env_name;
use super::{
    AuthHeader, ConfigError, McpServerSpec, ModelOverride, PermissionsLayer, Prices, ProviderKind,
    ReasoningEffort, SandboxLayer, ToolsLayer,
};

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileConfig {
    pub(super) default_model: Option<String>,
    #[serde(default)]
    pub(super) providers: Vec<ProviderFile>,
    #[serde(default)]
    pub(super) agent: AgentFile,
    #[serde(default)]
    pub(super) tools: ToolsLayer,
    #[serde(default)]
    pub(super) permissions: PermissionsLayer,
    #[serde(default)]
    pub(super) sandbox: SandboxLayer,
    #[serde(default)]
    pub(super) mcp: Vec<McpServerSpec>,
    #[serde(default)]
    pub(super) workspaces: BTreeMap<String, crate::always_scope::WorkspaceFile>,
    /// Checked one by one, so a bad entry is a warning and the others still load.
    #[serde(default)]
    pub(super) hooks: Vec<toml::Value>,
    #[serde(default)]
    pub(super) ports: crate::ports::PortsFile,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProviderFile {
    pub(super) name: String,
    pub(super) kind: Option<ProviderKind>,
    pub(super) base_url: Option<String>,
    pub(super) models: Option<Vec<String>>,
    pub(super) default: Option<String>,
    pub(super) api_key_env: Option<String>,
    pub(super) context_window: Option<u64>,
    pub(super) model_overrides: Option<BTreeMap<String, ModelOverride>>,
    pub(super) prices: Option<Prices>,
    pub(super) auth_header: Option<AuthHeader>,
    pub(super) efforts: Option<Vec<ReasoningEffort>>,
    pub(super) effort: Option<ReasoningEffort>,
    pub(super) max_output_tokens: Option<u64>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct AgentFile {
    pub(super) temperature: Option<f64>,
    pub(super) compact_ratio: Option<f64>,
    pub(super) tool_result_snip_ratio: Option<f64>,
    pub(super) compact_force_ratio: Option<f64>,
    pub(super) compact_tail_tokens: Option<u64>,
    pub(super) max_steps: Option<u32>,
    pub(super) provider_retries: Option<u32>,
    pub(super) provider_retry_seconds: Option<u64>,
    pub(super) prompt_confirm_ratio: Option<f64>,
    pub(super) effort: Option<ReasoningEffort>,
    pub(super) goal_token_budget: Option<u64>,
    pub(super) goal_cost_budget_usd: Option<f64>,
    pub(super) goal_time_budget_minutes: Option<u64>,
    pub(super) goal_keeper: Option<bool>,
    pub(super) planner_model: Option<String>,
    pub(super) max_subagent_depth: Option<u32>,
    pub(super) max_subagents: Option<u32>,
    pub(super) max_subagent_writers: Option<u32>,
}

/// Field names that only ever hold secrets.
const SECRET_KEYS: &[&str] = &[
    "api_key",
    "apikey",
    "api-key",
    "key",
    "secret",
    "token",
    "access_token",
    "auth_token",
    "password",
    "authorization",
    "bearer",
];

pub(super) fn parse_file(
    path: &Path,
    text: &str,
    dotenv: &Path,
) -> Result<FileConfig, ConfigError> {
    // Syntax first, then the secret scan (before typed parsing, which would only call an
    // `api_key` field "unknown"), then types.
    let table: toml::Table = toml::from_str(text).map_err(|e| parse_error(path, text, &e))?;
    scan_secrets(path, text, &table, dotenv)?;
    toml::from_str::<FileConfig>(text).map_err(|e| parse_error(path, text, &e))
}

fn scan_secrets(
    path: &Path,
    text: &str,
    table: &toml::Table,
    dotenv: &Path,
) -> Result<(), ConfigError> {
    let found = |key: String, field: &str, hint: String| ConfigError::SecretInConfig {
        path: path.to_path_buf(),
        line: find_key_line(text, field),
        key,
        env_hint: hint,
        dotenv: dotenv.to_path_buf(),
    };
    for (k, v) in table {
        if is_secret_key(k) || looks_like_key(v) {
            return Err(found(k.clone(), k, "PROVIDER_API_KEY".into()));
        }
    }
    if let Some(toml::Value::Array(providers)) = table.get("providers") {
        for (i, p) in providers.iter().enumerate() {
            let Some(p) = p.as_table() else { continue };
            let name = p.get("name").and_then(|n| n.as_str()).unwrap_or("provider");
            let hint = p
                .get("api_key_env")
                .and_then(|n| n.as_str())
                .filter(|n| is_env_name(n))
                .map(str::to_string)
                .unwrap_or_else(|| format!("{}_API_KEY", name.to_uppercase().replace('-', "_")));
            for (k, v) in p {
                // `api_key_env` holds a variable NAME; flag it only when it holds a key.
                let secret = if k == "api_key_env" {
                    looks_like_key(v)
                } else {
                    is_secret_key(k) || looks_like_key(v)
                };
                if secret {
                    return Err(found(format!("providers[{i}].{k}"), k, hint));
                }
            }
        }
    }
    Ok(())
}

fn is_secret_key(k: &str) -> bool {
    let k = k.to_ascii_lowercase();
    SECRET_KEYS.contains(&k.as_str())
}

/// A string that looks like a provider API key (`sk-…`, long and without spaces).
fn looks_like_key(v: &toml::Value) -> bool {
    v.as_str().is_some_and(|s| {
        let s = s.trim();
        s.len() >= 20
            && ((s.starts_with("sk-") && !s.contains(char::is_whitespace))
                || s.starts_with("Bearer "))
    })
}

fn find_key_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            l.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
                || l.strip_prefix(&format!("\"{key}\""))
                    .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|i| i + 1)
}

fn parse_error(path: &Path, text: &str, e: &toml::de::Error) -> ConfigError {
    let (line, column, key) = match e.span() {
        Some(span) => {
            let start = span.start.min(text.len());
            let before = &text[..start];
            let line = before.matches('\n').count() + 1;
            let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
            let column = text[line_start..start].chars().count() + 1;
            (line, column, key_at(text, line_start))
        }
        None => (1, 1, None),
    };
    ConfigError::Parse {
        path: path.to_path_buf(),
        line,
        column,
        key,
        message: e.message().trim().to_string(),
    }
}

/// The dotted key of the `key = value` line starting at byte `line_start`, prefixed with the
/// table header above it (`[[providers]]` headers are numbered: `providers[1]`).
fn key_at(text: &str, line_start: usize) -> Option<String> {
    let line = text[line_start..].lines().next().unwrap_or("");
    let trimmed = line.trim();
    let (local, header_search_end) = if trimmed.starts_with('[') {
        (None, line_start)
    } else {
        let (k, _) = line.split_once('=')?;
        (Some(k.trim().trim_matches('"').to_string()), line_start)
    };
    let above = &text[..header_search_end];
    let mut header: Option<String> = None;
    for l in above.lines().rev() {
        let l = l.trim();
        if let Some(name) = l.strip_prefix("[[").and_then(|r| r.split_once("]]")) {
            let name = name.0.trim();
            let idx = above
                .lines()
                .filter(|x| {
                    x.trim()
                        .strip_prefix("[[")
                        .and_then(|r| r.split_once("]]"))
                        .is_some_and(|(n, _)| n.trim() == name)
                })
                .count()
                .saturating_sub(1);
            header = Some(format!("{name}[{idx}]"));
            break;
        }
        if let Some(name) = l.strip_prefix('[').and_then(|r| r.split_once(']')) {
            header = Some(name.0.trim().to_string());
            break;
        }
    }
    match (header, local) {
        (Some(h), Some(k)) => Some(format!("{h}.{k}")),
        (None, Some(k)) => Some(k),
        (Some(h), None) => Some(h),
        (None, None) => None,
    }
}
