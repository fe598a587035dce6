//! The `[agent]`, `[tools]`, `[permissions]` and `[sandbox]` sections after merging, and what
//! the host receives of them (context ladder, goal budgets, subagent limits).

use std::path::PathBuf;

use serde::Serialize;

use super::{BashSandbox, Config, PermissionMode, ReasoningEffort, Rule};

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

impl Config {
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

    /// The `[agent]` subagent limits, as the host receives them.
    pub fn delegation_settings(&self) -> reasonix_forward::proto::DelegationSettings {
        reasonix_forward::proto::DelegationSettings {
            max_depth: self.agent.max_subagent_depth,
            max_children: self.agent.max_subagents,
            max_writers: self.agent.max_subagent_writers,
        }
    }
}
