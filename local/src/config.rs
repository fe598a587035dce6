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
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

mod wire;

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

/// `[agent]` settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentConfig {
    /// Sampling temperature; `None` leaves it to the provider.
    pub temperature: Option<f64>,
    /// Compact the context when it reaches `context_window × compact_ratio`.
    pub compact_ratio: f64,
    /// Snip old tool results when the context reaches `context_window × this`.
    pub tool_result_snip_ratio: f64,
    /// Compact even mid-turn before a request would reach `context_window × this`.
    pub compact_force_ratio: f64,
    /// Recent tokens every compaction keeps verbatim (absolute).
    pub compact_tail_tokens: u64,
    /// Model steps per turn before the turn pauses.
    pub max_steps: u32,
    /// Retries of a model request the provider did not accept (HTTP 408/429/5xx,
    /// timeouts; connection errors get at most 3).
    pub provider_retries: u32,
    /// Time budget, in seconds, of those retries together (waits and attempts).
    pub provider_retry_seconds: u64,
    /// Ask before sending a prompt whose estimated tokens exceed this share of the context
    /// window (TUI: a confirmation; `run`: refused without `--yes`); 0 never asks.
    pub prompt_confirm_ratio: f64,
    /// Reasoning effort chosen for every model (`--effort` sets it too); `None`: each
    /// model's own default.
    pub effort: Option<ReasoningEffort>,
    /// A goal pauses after this many tokens (prompt plus completion) since its start or
    /// last resume; `None`: no token budget.
    pub goal_token_budget: Option<u64>,
    /// A goal pauses after this cost in US dollars (at the model's `prices`); `None`: none.
    pub goal_cost_budget_usd: Option<f64>,
    /// A goal pauses after this many minutes of running; `None`: no time budget.
    pub goal_time_budget_minutes: Option<u64>,
    /// Start a goal keeper when a goal starts or resumes from this laptop: a background
    /// `reasonix keep` that serves the goal's model requests while no client is attached
    /// ([`crate::keeper`]). Default true; false: the goal waits for a laptop at its next
    /// model step.
    pub goal_keeper: bool,
    /// The planner beside the executor (issue 38 §2): a model label like `default_model`'s.
    /// Set only by the user's file (it decides where prompts go); checked at start-up.
    pub planner_model: Option<String>,
    /// How deep subagents nest (`task` inside a child's `task`); default 2.
    pub max_subagent_depth: u32,
    /// Subagents of one conversation running at once; default 6.
    pub max_subagents: u32,
    /// Writing subagents of one conversation running at once; default 3.
    pub max_subagent_writers: u32,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            temperature: None,
            compact_ratio: 0.8,
            tool_result_snip_ratio: 0.6,
            compact_force_ratio: 0.9,
            compact_tail_tokens: 16_384,
            max_steps: 50,
            provider_retries: crate::gateway::retry::DEFAULT_RETRIES,
            provider_retry_seconds: crate::gateway::retry::DEFAULT_BUDGET_SECS,
            prompt_confirm_ratio: 0.25,
            effort: None,
            goal_token_budget: None,
            goal_cost_budget_usd: None,
            goal_time_budget_minutes: None,
            goal_keeper: true,
            planner_model: None,
            max_subagent_depth: 2,
            max_subagents: 6,
            max_subagent_writers: 3,
        }
    }
}

/// Tokens of `text` as [`Config::big_prompt`] estimates them: about 4 bytes a token.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// A prompt over the confirmation threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BigPrompt {
    /// Estimated tokens of the prompt.
    pub tokens: u64,
    /// The model's context window.
    pub window: u64,
    /// `[agent] prompt_confirm_ratio`.
    pub ratio: f64,
}

impl std::fmt::Display for BigPrompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the prompt is about {} tokens, {:.0}% of the model's {}-token context window (more than [agent] prompt_confirm_ratio = {})",
            self.tokens,
            self.tokens as f64 * 100.0 / self.window as f64,
            self.window,
            self.ratio
        )
    }
}

/// `[tools]` settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolsConfig {
    /// Tools offered to the model; `None` means all built-in tools.
    pub enabled: Option<Vec<String>>,
    /// Timeout of one foreground `bash` call.
    pub bash_timeout_seconds: u64,
    /// Timeout of one MCP `tools/call`.
    pub mcp_call_timeout_seconds: u64,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            enabled: None,
            bash_timeout_seconds: 120,
            mcp_call_timeout_seconds: 300,
        }
    }
}

/// `[permissions]` settings.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct PermissionsConfig {
    /// Fallback for writer tools.
    pub mode: PermissionMode,
    /// Rules that allow without a prompt (`Tool`, `Tool(glob)`, `Bash(prefix:*)`).
    pub allow: Vec<Rule>,
    /// Rules that always prompt.
    pub ask: Vec<Rule>,
    /// Rules that always deny.
    pub deny: Vec<Rule>,
}

/// The user's `[sandbox]` settings (sent to the host as part of the typed
/// [`SessionPolicy`](reasonix_forward::policy::SessionPolicy); the host builds its own
/// `sandbox::SandboxConfig` from that policy at each session open).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SandboxSettings {
    /// Workspace root on the host; `None` means the directory the session is opened in.
    pub workspace_root: Option<PathBuf>,
    /// Extra writable roots besides the workspace.
    pub allow_write: Vec<PathBuf>,
    /// Paths hidden from tools and bash.
    pub forbid_read: Vec<PathBuf>,
    /// Bash sandbox policy: `"enforce"` (bubblewrap, else Landlock), `"bwrap"` (bubblewrap
    /// only) or `"off"`.
    pub bash: BashSandbox,
    /// Whether sandboxed bash has network access.
    pub network: bool,
    /// Whether the bash tool gets the forwarded ssh-agent (`[sandbox] ssh_agent`, #36 §2).
    pub ssh_agent: bool,
    /// `[sandbox] ssh_agent = "confirm"`: every signing request on the forwarded agent asks
    /// the user on the laptop (`crate::agent_confirm`).
    pub ssh_agent_confirm: bool,
    /// `[sandbox] ssh_agent_approved`: key fingerprints that sign without a question.
    pub ssh_agent_approved: Vec<String>,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        Self {
            workspace_root: None,
            allow_write: Vec::new(),
            forbid_read: Vec::new(),
            bash: BashSandbox::Enforce,
            network: true,
            ssh_agent: false,
            ssh_agent_confirm: false,
            ssh_agent_approved: Vec::new(),
        }
    }
}

/// Command-line flags; they win over every file and are trusted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// `--model`.
    pub model: Option<String>,
    /// `--mode` / `--auto` / `--yolo`.
    pub mode: Option<PermissionMode>,
    /// `--workspace`.
    pub workspace_root: Option<PathBuf>,
    /// `--temperature`.
    pub temperature: Option<f64>,
    /// `--max-steps`.
    pub max_steps: Option<u32>,
    /// `--effort`.
    pub effort: Option<ReasoningEffort>,
}

/// Where to look for config files.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadOptions {
    /// Reasonix home; `None` = `$REASONIX_HOME`, else `~/.reasonix`.
    pub home: Option<PathBuf>,
    /// Directory holding the project file; `None` = the current directory.
    pub project_dir: Option<PathBuf>,
    /// Skip the project file entirely.
    pub ignore_project: bool,
    /// Command-line flags.
    pub overrides: Overrides,
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

    /// Load defaults, the user file, the project file and the flags, in that order.
    pub fn load(opts: &LoadOptions) -> Result<Config, ConfigError> {
        let home = match &opts.home {
            Some(h) => h.clone(),
            None => reasonix_home()?,
        };
        let mut cfg = Config::defaults(home.clone());
        let dotenv = home.join(DOTENV_FILE);

        let user_path = home.join(USER_FILE);
        if let Some(text) = read_optional(&user_path)? {
            let file = parse_file(&user_path, &text, &dotenv)?;
            cfg.apply_user(file, &user_path)?;
            cfg.sources.push(user_path);
        }

        // Flags are trusted like the user file; the project file then tightens all of them.
        if let Some(mode) = opts.overrides.mode {
            cfg.permissions.mode = mode;
        }

        if !opts.ignore_project {
            let project_dir = match &opts.project_dir {
                Some(d) => d.clone(),
                None => std::env::current_dir().map_err(|source| ConfigError::Read {
                    path: PathBuf::from("."),
                    source,
                })?,
            };
            let project_path = project_dir.join(PROJECT_FILE);
            if let Some(text) = read_optional(&project_path)? {
                let file = parse_file(&project_path, &text, &dotenv)?;
                let root = opts
                    .overrides
                    .workspace_root
                    .clone()
                    .or_else(|| cfg.sandbox.workspace_root.clone())
                    .unwrap_or_else(|| project_dir.clone());
                cfg.apply_project(file, &project_path, &absolutize(&root, &project_dir));
                cfg.sources.push(project_path);
            }
        }

        cfg.apply_overrides(&opts.overrides);
        cfg.validate()?;
        Ok(cfg)
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

    /// Find a provider by name.
    pub fn provider(&self, name: &str) -> Option<&ProviderConfig> {
        self.providers.iter().find(|p| p.name == name)
    }

    /// The context window of `model` (or the default model) and the compaction ladder of
    /// `[agent]`, as the host receives them. A model that does not resolve gets `window = 0`
    /// (no compaction; its requests fail with the resolution error anyway).
    pub fn context_settings(
        &self,
        model: Option<&str>,
    ) -> reasonix_forward::proto::ContextSettings {
        let permille = |r: f64| (r * 1000.0).round().clamp(0.0, 1000.0) as u32;
        reasonix_forward::proto::ContextSettings {
            window: self
                .resolve_model(model)
                .map(|m| m.context_window)
                .unwrap_or(0),
            snip_permille: permille(self.agent.tool_result_snip_ratio),
            compact_permille: permille(self.agent.compact_ratio),
            force_permille: permille(self.agent.compact_force_ratio),
            tail_tokens: self.agent.compact_tail_tokens,
        }
    }

    /// A goal's budgets from `[agent] goal_token_budget`, `goal_cost_budget_usd` and
    /// `goal_time_budget_minutes`, with `model`'s prices (cost is counted only with them).
    pub fn goal_budgets(&self, model: Option<&str>) -> reasonix_forward::proto::GoalBudgets {
        let micro = |usd: f64| (usd * 1e6).round().max(0.0) as u64;
        reasonix_forward::proto::GoalBudgets {
            tokens: self.agent.goal_token_budget,
            cost_micro_usd: self.agent.goal_cost_budget_usd.map(micro),
            minutes: self.agent.goal_time_budget_minutes,
            prices: self
                .resolve_model(model)
                .ok()
                .and_then(|m| m.prices)
                .map(|p| [micro(p.input), micro(p.cached), micro(p.output)]),
        }
    }

    /// When `text` is big enough to ask before sending it to `model` (#15 item 6): its
    /// estimated tokens exceed `[agent] prompt_confirm_ratio` of the context window.
    pub fn big_prompt(&self, model: Option<&str>, text: &str) -> Option<BigPrompt> {
        let ratio = self.agent.prompt_confirm_ratio;
        let window = self.resolve_model(model).ok()?.context_window;
        if ratio <= 0.0 || window == 0 {
            return None;
        }
        let tokens = estimate_tokens(text);
        (tokens as f64 > window as f64 * ratio).then_some(BigPrompt {
            tokens,
            window,
            ratio,
        })
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

    fn resolved(&self, p: &ProviderConfig, model: &str) -> ResolvedModel {
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

    /// Apply a file's `[agent]` table (the same from a user and a project file: agent
    /// settings are not security settings).
    fn apply_agent(&mut self, a: AgentFile) {
        set(&mut self.agent.temperature, a.temperature.map(Some));
        set(&mut self.agent.compact_ratio, a.compact_ratio);
        set(&mut self.agent.max_steps, a.max_steps);
        set(
            &mut self.agent.tool_result_snip_ratio,
            a.tool_result_snip_ratio,
        );
        set(&mut self.agent.compact_force_ratio, a.compact_force_ratio);
        set(&mut self.agent.compact_tail_tokens, a.compact_tail_tokens);
        set(&mut self.agent.provider_retries, a.provider_retries);
        set(
            &mut self.agent.provider_retry_seconds,
            a.provider_retry_seconds,
        );
        set(&mut self.agent.prompt_confirm_ratio, a.prompt_confirm_ratio);
        set(&mut self.agent.effort, a.effort.map(Some));
        set(
            &mut self.agent.goal_token_budget,
            a.goal_token_budget.map(Some),
        );
        set(
            &mut self.agent.goal_cost_budget_usd,
            a.goal_cost_budget_usd.map(Some),
        );
        set(
            &mut self.agent.goal_time_budget_minutes,
            a.goal_time_budget_minutes.map(Some),
        );
        set(&mut self.agent.goal_keeper, a.goal_keeper);
        set(&mut self.agent.max_subagent_depth, a.max_subagent_depth);
        set(
            &mut self.agent.max_subagents,
            a.max_subagents.map(|n| n.max(1)),
        );
        set(
            &mut self.agent.max_subagent_writers,
            a.max_subagent_writers.map(|n| n.max(1)),
        );
    }

    /// The `[agent]` subagent limits, as the host receives them.
    pub fn delegation_settings(&self) -> reasonix_forward::proto::DelegationSettings {
        reasonix_forward::proto::DelegationSettings {
            max_depth: self.agent.max_subagent_depth,
            max_children: self.agent.max_subagents,
            max_writers: self.agent.max_subagent_writers,
        }
    }

    /// Apply a trusted (user) file.
    fn apply_user(&mut self, file: FileConfig, path: &Path) -> Result<(), ConfigError> {
        let src = path.display().to_string();
        if let Some(m) = file.default_model {
            self.default_model = Some(m);
        }
        for (i, pf) in file.providers.into_iter().enumerate() {
            self.merge_provider(pf, &src, i)?;
        }
        if let Some(m) = file.agent.planner_model.clone() {
            self.agent.planner_model = Some(m).filter(|m| !m.trim().is_empty());
        }
        self.apply_agent(file.agent);
        let t = file.tools;
        set(&mut self.tools.enabled, t.enabled.map(Some));
        set(&mut self.tools.bash_timeout_seconds, t.bash_timeout_seconds);
        set(
            &mut self.tools.mcp_call_timeout_seconds,
            t.mcp_call_timeout_seconds,
        );
        let p = file.permissions;
        set(&mut self.permissions.mode, p.mode);
        self.permissions.allow.extend(p.allow.unwrap_or_default());
        self.permissions.ask.extend(p.ask.unwrap_or_default());
        self.permissions.deny.extend(p.deny.unwrap_or_default());
        self.workspaces.extend(file.workspaces);
        for (i, v) in file.hooks.into_iter().enumerate() {
            match v.try_into::<reasonix_forward::hooks::HookDecl>() {
                Ok(h) => self.hooks.push(h),
                Err(e) => self.warnings.push(format!(
                    "{src}: ignored [[hooks]] entry {}: {}; the other hooks still load",
                    i + 1,
                    e.to_string().trim().replace('\n', " ")
                )),
            }
        }
        self.ports.apply_user(file.ports);
        let s = file.sandbox;
        set(&mut self.sandbox.workspace_root, s.workspace_root.map(Some));
        self.sandbox
            .allow_write
            .extend(s.allow_write.unwrap_or_default());
        self.sandbox
            .forbid_read
            .extend(s.forbid_read.unwrap_or_default());
        set(&mut self.sandbox.bash, s.bash);
        set(&mut self.sandbox.network, s.network);
        if let Some(a) = s.ssh_agent {
            self.sandbox.ssh_agent = a.on();
            self.sandbox.ssh_agent_confirm = a == reasonix_forward::agent::AgentSetting::Confirm;
        }
        if let Some(keys) = s.ssh_agent_approved {
            self.sandbox.ssh_agent_approved = keys;
        }
        for mut m in file.mcp {
            let invalid = |message: String| ConfigError::Invalid {
                source_name: Some(src.clone()),
                key: format!("mcp `{}`", m.name),
                message,
            };
            match m.run_on {
                Some(McpRunOn::Host) => return Err(invalid(format!(
                    "[[mcp]] `{}` has run_on = \"host\", but servers of the user config run on the laptop. Declare host servers in the workspace's reasonix.toml or .mcp.json on the host, or remove `run_on` to run it on the laptop",
                    m.name
                ))),
                Some(McpRunOn::Laptop) | None => m.run_on = Some(McpRunOn::Laptop),
            }
            if m.command.is_none() && m.url.is_none() {
                return Err(invalid(format!(
                    "[[mcp]] `{}` runs on the laptop: give it a `command` (a stdio server the laptop starts) or a `url` (an HTTP server the laptop reaches, signed in with `reasonix mcp login {}` when it needs it)",
                    m.name, m.name
                )));
            }
            upsert_mcp(&mut self.mcp, m);
        }
        Ok(())
    }

    fn merge_provider(&mut self, pf: ProviderFile, src: &str, i: usize) -> Result<(), ConfigError> {
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

    /// Apply an untrusted (project) file: only tightening changes to security settings.
    fn apply_project(&mut self, file: FileConfig, path: &Path, workspace_root: &Path) {
        let src = path.display().to_string();
        let mut warns: Vec<String> = Vec::new();
        if file.ports.loosens() {
            warns.push(
                "ignored [ports] auto = true, map and connect_wait_seconds: a project file can only forward less (auto = false, ignore); set the rest in your user config".into(),
            );
        }
        self.ports.apply_project(&file.ports);
        if let Some(m) = &file.agent.planner_model {
            warns.push(format!(
                "ignored [agent] planner_model = {m:?}: a project file cannot choose which model gets the code; set it in your user config"
            ));
        }

        // Providers: a repository must not be able to send the user's key somewhere new, so
        // only cosmetic fields of providers the user already has are taken.
        let mut provider_notes = Vec::new();
        for pf in file.providers {
            let Some(existing) = self.providers.iter_mut().find(|p| p.name == pf.name) else {
                provider_notes.push(format!(
                    "ignored [[providers]] `{}`: a project file cannot add providers (define it in your user config)",
                    pf.name
                ));
                continue;
            };
            if pf
                .base_url
                .as_ref()
                .is_some_and(|u| *u != existing.base_url)
            {
                provider_notes.push(format!(
                    "ignored providers `{}` base_url: a project file cannot redirect a provider",
                    pf.name
                ));
            }
            if pf
                .api_key_env
                .as_ref()
                .is_some_and(|k| *k != existing.api_key_env)
            {
                provider_notes.push(format!(
                    "ignored providers `{}` api_key_env: a project file cannot choose which key is sent",
                    pf.name
                ));
            }
            if pf.kind.is_some_and(|k| k != existing.kind) {
                provider_notes.push(format!(
                    "ignored providers `{}` kind: a project file cannot change a provider's kind",
                    pf.name
                ));
            }
            if pf
                .auth_header
                .is_some_and(|a| Some(a) != existing.auth_header)
            {
                provider_notes.push(format!(
                    "ignored providers `{}` auth_header: a project file cannot choose how the key is sent",
                    pf.name
                ));
            }
            set(&mut existing.efforts, pf.efforts.map(Some));
            set(&mut existing.effort, pf.effort.map(Some));
            set(
                &mut existing.max_output_tokens,
                pf.max_output_tokens.map(Some),
            );
            set(&mut existing.models, pf.models);
            set(&mut existing.default, pf.default.map(Some));
            set(&mut existing.context_window, pf.context_window);
            existing
                .model_overrides
                .extend(pf.model_overrides.unwrap_or_default());
            set(&mut existing.prices, pf.prices.map(Some));
        }
        warns.extend(provider_notes);
        if !file.workspaces.is_empty() {
            warns.push(
                "ignored [workspaces]: workspace rules belong in your user config (a project file cannot allow anything)".into(),
            );
        }
        if !file.hooks.is_empty() {
            warns.push(
                "ignored [[hooks]]: a project declares hooks in .reasonix/hooks.toml, which run only once you trust that file (`reasonix hooks trust`)".into(),
            );
        }

        if let Some(m) = file.default_model {
            self.default_model = Some(m);
        }

        // Agent settings are not security settings.
        self.apply_agent(file.agent);

        let t = &file.tools;
        if let Some(list) = t.enabled.clone() {
            match &self.tools.enabled {
                None => self.tools.enabled = Some(list),
                Some(user) => {
                    let (keep, drop): (Vec<_>, Vec<_>) =
                        list.into_iter().partition(|t| user.contains(t));
                    if !drop.is_empty() {
                        warns.push(format!(
                            "ignored tools.enabled entries {drop:?}: a project file can only narrow your enabled tools"
                        ));
                    }
                    self.tools.enabled = Some(keep);
                }
            }
        }
        if let Some(root) = &file.sandbox.workspace_root {
            let abs = absolutize(root, workspace_root);
            if abs.starts_with(workspace_root) {
                self.sandbox.workspace_root = Some(abs);
            } else {
                warns.push(format!(
                    "ignored sandbox.workspace_root = {}: outside the workspace {}",
                    root.display(),
                    workspace_root.display()
                ));
            }
        }

        // A project may add the question to an agent the user gave the bash tool.
        let project_confirms =
            file.sandbox.ssh_agent == Some(reasonix_forward::agent::AgentSetting::Confirm);
        // The security settings: the one tighten-only merge the host applies too.
        let layer = ProjectLayer {
            permissions: file.permissions,
            sandbox: file.sandbox,
            tools: file.tools,
            laptop_mcp: file
                .mcp
                .iter()
                .filter(|m| m.run_on == Some(McpRunOn::Laptop))
                .map(|m| m.name.clone())
                .collect(),
        };
        let tightened = reasonix_forward::policy::tighten(&self.session_policy(), &layer);
        let p = tightened.policy;
        self.permissions.mode = p.mode;
        self.permissions.allow = p.rules.allow;
        self.permissions.ask = p.rules.ask;
        self.permissions.deny = p.rules.deny;
        self.sandbox.bash = p.sandbox.bash;
        self.sandbox.network = p.sandbox.network;
        self.sandbox.ssh_agent = p.sandbox.ssh_agent;
        if project_confirms && self.sandbox.ssh_agent {
            self.sandbox.ssh_agent_confirm = true;
        }
        self.sandbox.allow_write = p.sandbox.allow_write;
        self.sandbox.forbid_read = p.sandbox.forbid_read;
        self.tools.bash_timeout_seconds = p.timeouts.bash_seconds;
        self.tools.mcp_call_timeout_seconds = p.timeouts.mcp_call_seconds;

        // Workspace servers run on the host; one asking for the laptop was reported above
        // and runs on the host too (the laptop only starts servers of the user config).
        for mut m in file.mcp {
            m.run_on = Some(McpRunOn::Host);
            upsert_mcp(&mut self.mcp, m);
        }
        self.warnings
            .extend(warns.into_iter().map(|w| format!("{src}: {w}")));
        self.warnings
            .extend(tightened.ignored.iter().map(|i| i.to_string()));
        self.ignored.extend(tightened.ignored);
    }

    fn apply_overrides(&mut self, o: &Overrides) {
        if let Some(m) = &o.model {
            self.default_model = Some(m.clone());
        }
        if let Some(root) = &o.workspace_root {
            self.sandbox.workspace_root = Some(root.clone());
        }
        if let Some(t) = o.temperature {
            self.agent.temperature = Some(t);
        }
        if let Some(s) = o.max_steps {
            self.agent.max_steps = s;
        }
        if let Some(e) = o.effort {
            self.agent.effort = Some(e);
        }
    }

    /// Checks that need the merged picture.
    fn validate(&self) -> Result<(), ConfigError> {
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

/// Replace `slot` when the layer sets a value.
fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

fn upsert_mcp(list: &mut Vec<McpServerSpec>, m: McpServerSpec) {
    match list.iter_mut().find(|x| x.name == m.name) {
        Some(slot) => *slot = m,
        None => list.push(m),
    }
}

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The Reasonix home: `$REASONIX_HOME`, else `.reasonix` in the user's home folder (`$HOME`
/// on Linux and macOS, `%USERPROFILE%` on Windows; see `platform::home_dir`).
pub fn reasonix_home() -> Result<PathBuf, ConfigError> {
    reasonix_home_from(std::env::var_os(HOME_ENV), crate::platform::home_dir())
}

/// [`reasonix_home`] from its inputs: the override and the platform's home folder.
pub fn reasonix_home_from(
    override_dir: Option<std::ffi::OsString>,
    platform_home: Option<PathBuf>,
) -> Result<PathBuf, ConfigError> {
    if let Some(h) = override_dir.filter(|h| !h.is_empty()) {
        return Ok(PathBuf::from(h));
    }
    match platform_home.filter(|h| !h.as_os_str().is_empty()) {
        Some(h) => Ok(h.join(".reasonix")),
        None => Err(ConfigError::NoHome),
    }
}

/// `base.join(p)` for relative `p`, then `.` and `..` removed lexically (no file system
/// access: the workspace may live on another machine).
fn absolutize(p: &Path, base: &Path) -> PathBuf {
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn read_optional(path: &Path) -> Result<Option<String>, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ConfigError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

// ---------------------------------------------------------------------------------------
// File layer: every field optional so layers can be told apart from defaults.

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    default_model: Option<String>,
    #[serde(default)]
    providers: Vec<ProviderFile>,
    #[serde(default)]
    agent: AgentFile,
    #[serde(default)]
    tools: ToolsLayer,
    #[serde(default)]
    permissions: PermissionsLayer,
    #[serde(default)]
    sandbox: SandboxLayer,
    #[serde(default)]
    mcp: Vec<McpServerSpec>,
    #[serde(default)]
    workspaces: BTreeMap<String, crate::always_scope::WorkspaceFile>,
    /// Checked one by one, so a bad entry is a warning and the others still load.
    #[serde(default)]
    hooks: Vec<toml::Value>,
    #[serde(default)]
    ports: crate::ports::PortsFile,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderFile {
    name: String,
    kind: Option<ProviderKind>,
    base_url: Option<String>,
    models: Option<Vec<String>>,
    default: Option<String>,
    api_key_env: Option<String>,
    context_window: Option<u64>,
    model_overrides: Option<BTreeMap<String, ModelOverride>>,
    prices: Option<Prices>,
    auth_header: Option<AuthHeader>,
    efforts: Option<Vec<ReasoningEffort>>,
    effort: Option<ReasoningEffort>,
    max_output_tokens: Option<u64>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct AgentFile {
    temperature: Option<f64>,
    compact_ratio: Option<f64>,
    tool_result_snip_ratio: Option<f64>,
    compact_force_ratio: Option<f64>,
    compact_tail_tokens: Option<u64>,
    max_steps: Option<u32>,
    provider_retries: Option<u32>,
    provider_retry_seconds: Option<u64>,
    prompt_confirm_ratio: Option<f64>,
    effort: Option<ReasoningEffort>,
    goal_token_budget: Option<u64>,
    goal_cost_budget_usd: Option<f64>,
    goal_time_budget_minutes: Option<u64>,
    goal_keeper: Option<bool>,
    planner_model: Option<String>,
    max_subagent_depth: Option<u32>,
    max_subagents: Option<u32>,
    max_subagent_writers: Option<u32>,
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

fn parse_file(path: &Path, text: &str, dotenv: &Path) -> Result<FileConfig, ConfigError> {
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

/// Add `rule` to `[permissions] allow` of `$home/config.toml` (created if missing), keeping
/// the file's comments and layout. Does nothing when the rule is already there.
pub fn persist_allow_rule(home: &Path, rule: &str) -> Result<bool, ConfigError> {
    let path = home.join("config.toml");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(invalid_rule(
                &path,
                format!(
                    "cannot read {} to save the rule {rule}: {e}",
                    path.display()
                ),
            ))
        }
    };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| {
        invalid_rule(
            &path,
            format!(
                "cannot save the rule {rule}: {} does not parse: {e}",
                path.display()
            ),
        )
    })?;
    let perms = doc
        .entry("permissions")
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()));
    let Some(perms) = perms.as_table_like_mut() else {
        return Err(invalid_rule(
            &path,
            format!("{}: `permissions` is not a table", path.display()),
        ));
    };
    let allow = perms
        .entry("allow")
        .or_insert(toml_edit::Item::Value(toml_edit::Value::Array(
            toml_edit::Array::new(),
        )));
    let Some(arr) = allow.as_array_mut() else {
        return Err(invalid_rule(
            &path,
            format!("{}: `permissions.allow` is not an array", path.display()),
        ));
    };
    if arr.iter().any(|v| v.as_str() == Some(rule)) {
        return Ok(false);
    }
    arr.push(rule);
    std::fs::create_dir_all(home)
        .map_err(|e| invalid_rule(&path, format!("{}: {e}", home.display())))?;
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, doc.to_string())
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| invalid_rule(&path, format!("cannot write {}: {e}", path.display())))?;
    Ok(true)
}

fn invalid_rule(path: &Path, message: String) -> ConfigError {
    ConfigError::Invalid {
        source_name: Some(path.display().to_string()),
        key: "permissions.allow".into(),
        message,
    }
}
