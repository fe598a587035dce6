//! Configuration of the laptop side: providers, agent, tools, permissions, sandbox and MCP.
//!
//! Layers, lowest to highest precedence: built-in defaults, the user file
//! `<home>/config.toml` (`<home>` is `$REASONIX_HOME`, else `~/.reasonix`), the project file
//! `./reasonix.toml`, then command-line flags ([`Overrides`]).
//!
//! The user file and flags are trusted. The project file comes with a repository and is not:
//! it may only *tighten* security settings, and anything that would loosen them (or point an
//! API key at a new endpoint, or start a program on the laptop) is ignored and reported in
//! [`Config::warnings`].
//!
//! API keys never live here: a key-looking field in any file is an error telling the user to
//! move it to the environment or `<home>/.env` (which only the gateway reads).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

mod file;
mod load;
mod persist;
mod project;
mod providers;
mod sections;
mod validate;
mod wire;

pub use load::{reasonix_home, reasonix_home_from, LoadOptions, Overrides};
pub use persist::persist_allow_rule;
pub use providers::{ModelOverride, Prices, ProviderConfig, ResolvedModel};
pub use sections::{
    estimate_tokens, AgentConfig, BigPrompt, PermissionsConfig, SandboxSettings, ToolsConfig,
};
pub use wire::{effort_list, AuthHeader, ProviderKind, ReasoningEffort, DEFAULT_MAX_OUTPUT_TOKENS};

pub use reasonix_forward::policy::{
    BashSandbox, Ignored, McpRunOn, McpServerSpec, PermissionMode, PermissionsLayer, ProjectLayer,
    Rule, Rules, SandboxLayer, SandboxPolicy, SessionPolicy, Timeouts, ToolsLayer,
};

/// Name of the project config file looked up in the project directory.
pub const PROJECT_FILE: &str = "reasonix.toml";
/// Name of the user config file inside the Reasonix home.
pub const USER_FILE: &str = "config.toml";
/// Name of the secrets file inside the Reasonix home (read by the gateway only).
pub const DOTENV_FILE: &str = ".env";
/// Environment variable that overrides the Reasonix home directory.
pub const HOME_ENV: &str = "REASONIX_HOME";
/// Context window assumed when a provider does not say.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;

/// DeepSeek's list prices per 1M tokens for `deepseek-v4-flash` (the built-in default model;
/// the retired `deepseek-chat` alias mapped to it), as api-docs.deepseek.com/quick_start/pricing
/// lists them in 2026: a cache hit costs a fiftieth of a miss. Used for the cost figures of
/// the built-in provider; a `prices` entry in the config replaces them.
pub const DEEPSEEK_V4_FLASH_PRICES: Prices = Prices {
    input: 0.14,
    cached: 0.0028,
    output: 0.28,
};

/// DeepSeek's regular list prices per 1M tokens for `deepseek-v4-pro` (see
/// [`DEEPSEEK_V4_FLASH_PRICES`]).
pub const DEEPSEEK_V4_PRO_PRICES: Prices = Prices {
    input: 1.74,
    cached: 0.0145,
    output: 3.48,
};

/// Everything that can go wrong while loading or using the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A config file exists but cannot be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A config file is not valid TOML or has a value of the wrong type or an unknown key.
    #[error("{}:{line}:{column}: {}{message}", path.display(), key.as_ref().map(|k| format!("key `{k}`: ")).unwrap_or_default())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// Dotted key the error is about, when it can be told (`sandbox.network`,
        /// `providers[1].context_window`).
        key: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A config file contains something that looks like an API key.
    #[error("{}{}: `{key}` looks like an API key; keys are never read from config files. Remove it, and put the key in the environment or in {} as `{env_hint}=...`", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default(), dotenv.display())]
    SecretInConfig {
        /// The file.
        path: PathBuf,
        /// 1-based line, when found.
        line: Option<usize>,
        /// Dotted key holding the secret.
        key: String,
        /// Environment variable name the user should use instead.
        env_hint: String,
        /// Where `.env` lives.
        dotenv: PathBuf,
    },
    /// A value is well-typed but not acceptable.
    #[error("{}: key `{key}`: {message}", source_name.as_deref().unwrap_or("config"))]
    Invalid {
        /// File or flag the value came from.
        source_name: Option<String>,
        /// Dotted key.
        key: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// A model label matches no configured provider or model.
    #[error("unknown model `{label}`; configured: {known}. Use `provider/model`, a provider name, or a model listed under [[providers]] models")]
    UnknownModel {
        /// The label as given.
        label: String,
        /// What exists, as `provider: model, model; ...`.
        known: String,
    },
    /// Neither `REASONIX_HOME` nor the home folder (`HOME`, `%USERPROFILE%`) is known.
    #[error("cannot locate the Reasonix home: set REASONIX_HOME or HOME")]
    NoHome,
    /// A reasoning-effort level the model does not take.
    #[error("model `{model}` does not take reasoning effort `{effort}`; it supports: {supported}. Choose one of those (`/effort`, `--effort`, `[agent] effort`), or list the model's levels in `efforts` of its provider or model_overrides entry")]
    UnsupportedEffort {
        /// `provider/model`.
        model: String,
        /// The level asked for.
        effort: ReasoningEffort,
        /// The levels it takes, as a list (`none` when it takes none).
        supported: String,
    },
}

/// The merged configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    /// Model label used when none is given.
    pub default_model: Option<String>,
    /// Providers, in declaration order (built-in `deepseek` first unless redefined).
    pub providers: Vec<ProviderConfig>,
    /// `[agent]`.
    pub agent: AgentConfig,
    /// `[tools]`.
    pub tools: ToolsConfig,
    /// `[permissions]`.
    pub permissions: PermissionsConfig,
    /// `[sandbox]`.
    pub sandbox: SandboxSettings,
    /// `[[mcp]]` servers.
    pub mcp: Vec<McpServerSpec>,
    /// `[[hooks]]` of the user config (#34; sent to the host with every session open).
    pub hooks: Vec<reasonix_forward::hooks::HookDecl>,
    /// The Reasonix home directory (holds `config.toml` and `.env`).
    pub home: PathBuf,
    /// Config files that were read, lowest precedence first.
    pub sources: Vec<PathBuf>,
    /// Project settings that were ignored because they would loosen security.
    warnings: Vec<String>,
    /// The policy part of `warnings`, as [`reasonix_forward::policy::tighten`] reported it
    /// (the host reports the same list when it applies the same file).
    ignored: Vec<Ignored>,
    /// `[workspaces."<workspace>"]` tables of the user config (#15 "always allow" scope).
    pub workspaces: BTreeMap<String, crate::always_scope::WorkspaceFile>,
    /// The workspace whose table was merged by [`Config::apply_workspace`].
    pub workspace_key: Option<String>,
    /// `[ports]`: forwarding of the host's ports.
    pub ports: crate::ports::PortSettings,
}

impl Config {
    /// Built-in defaults only: the `deepseek` provider and default settings.
    pub fn defaults(home: PathBuf) -> Config {
        Config {
            default_model: None,
            providers: vec![ProviderConfig {
                name: "deepseek".into(),
                kind: ProviderKind::Openai,
                base_url: "https://api.deepseek.com".into(),
                models: vec!["deepseek-v4-flash".into(), "deepseek-v4-pro".into()],
                default: Some("deepseek-v4-flash".into()),
                api_key_env: "DEEPSEEK_API_KEY".into(),
                context_window: DEFAULT_CONTEXT_WINDOW,
                model_overrides: BTreeMap::from([(
                    "deepseek-v4-pro".to_string(),
                    ModelOverride {
                        prices: Some(DEEPSEEK_V4_PRO_PRICES),
                        ..ModelOverride::default()
                    },
                )]),
                prices: Some(DEEPSEEK_V4_FLASH_PRICES),
                auth_header: None,
                // DeepSeek's `reasoning_effort` levels (it maps `medium` to `high`, so
                // offering it would only mislead); the service's own default is `high`.
                efforts: Some(vec![
                    ReasoningEffort::Low,
                    ReasoningEffort::High,
                    ReasoningEffort::Max,
                ]),
                effort: None,
                max_output_tokens: None,
            }],
            agent: AgentConfig::default(),
            tools: ToolsConfig::default(),
            permissions: PermissionsConfig::default(),
            sandbox: SandboxSettings::default(),
            mcp: Vec::new(),
            hooks: Vec::new(),
            home,
            sources: Vec::new(),
            warnings: Vec::new(),
            ignored: Vec::new(),
            workspaces: BTreeMap::new(),
            workspace_key: None,
            ports: crate::ports::PortSettings::default(),
        }
    }

    /// Merge the user config's rules for `workspace` (as the status line names it:
    /// `local:/path`, `[user@]host:path`) into the permissions, and remember the name so
    /// "always allow" answers are stored under it. The user's own file is trusted, so these
    /// may allow more; a project file's `ask`/`deny` still win (deny > ask > allow), and the
    /// host tightens the result with the workspace's project file again.
    pub fn apply_workspace(&mut self, workspace: &str) {
        let key = crate::always_scope::workspace_key(workspace);
        let workspace = key.as_str();
        if let Some(w) = self.workspaces.get(workspace) {
            let p = &w.permissions;
            self.permissions.allow.extend(p.allow.iter().cloned());
            self.permissions.ask.extend(p.ask.iter().cloned());
            self.permissions.deny.extend(p.deny.iter().cloned());
        }
        self.workspace_key = Some(workspace.to_string());
    }

    /// Settings from the project file that were ignored, one human-readable line each.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The policy settings of the project file that were ignored (part of [`warnings`](Self::warnings)).
    pub fn ignored(&self) -> &[Ignored] {
        &self.ignored
    }

    /// The security policy of a session opened with this configuration, as sent to the host
    /// (which tightens it again with the workspace's project file, to the same result when
    /// it reads the same file).
    pub fn session_policy(&self) -> SessionPolicy {
        SessionPolicy {
            mode: self.permissions.mode,
            rules: Rules {
                allow: self.permissions.allow.clone(),
                ask: self.permissions.ask.clone(),
                deny: self.permissions.deny.clone(),
            },
            sandbox: SandboxPolicy {
                bash: self.sandbox.bash,
                network: self.sandbox.network,
                ssh_agent: self.sandbox.ssh_agent,
                allow_write: self.sandbox.allow_write.clone(),
                forbid_read: self.sandbox.forbid_read.clone(),
            },
            timeouts: Timeouts {
                bash_seconds: self.tools.bash_timeout_seconds,
                mcp_call_seconds: self.tools.mcp_call_timeout_seconds,
            },
        }
    }

    /// Path of the `.env` file the gateway reads keys from.
    pub fn dotenv_path(&self) -> PathBuf {
        self.home.join(DOTENV_FILE)
    }
}
