//! Loading: where the files are, the trusted layers (user file, flags) applied in order, and
//! the helpers every layer uses.

use std::path::{Component, Path, PathBuf};

use super::file::{parse_file, AgentFile, FileConfig};
use super::{
    Config, ConfigError, McpRunOn, McpServerSpec, PermissionMode, ReasoningEffort, DOTENV_FILE,
    HOME_ENV, PROJECT_FILE, USER_FILE,
};

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

impl Config {
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

    /// Apply a file's `[agent]` table (the same from a user and a project file: agent
    /// settings are not security settings).
    pub(super) fn apply_agent(&mut self, a: AgentFile) {
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
}

/// Replace `slot` when the layer sets a value.
pub(super) fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

pub(super) fn upsert_mcp(list: &mut Vec<McpServerSpec>, m: McpServerSpec) {
    match list.iter_mut().find(|x| x.name == m.name) {
        Some(slot) => *slot = m,
        None => list.push(m),
    }
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
pub(super) fn absolutize(p: &Path, base: &Path) -> PathBuf {
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
