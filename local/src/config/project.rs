//! The project file (`./reasonix.toml`), which comes with a repository and is not trusted:
//! it may only tighten security settings; what it would loosen is ignored and reported.

use std::path::Path;

use super::file::FileConfig;
use super::load::{absolutize, set, upsert_mcp};
use super::{Config, McpRunOn, ProjectLayer};

impl Config {
    /// Apply an untrusted (project) file: only tightening changes to security settings.
    pub(super) fn apply_project(&mut self, file: FileConfig, path: &Path, workspace_root: &Path) {
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
}
