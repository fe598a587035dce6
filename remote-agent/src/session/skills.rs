//! The session's side of skills ([`crate::skills`]): the skills of its driver and workspace,
//! a `/<name>` line expanded into a turn, and the running skill's gate on tool calls.

use super::*;
use crate::skills::{Expansion, SkillProfile, Skills};

impl Session {
    /// The skills this session offers: built-in, the driving client's user skills (sent with
    /// its open) and the workspace's `.reasonix/skills/` (read now).
    pub fn skills(&self) -> Skills {
        let settings = self
            .lock()
            .settings
            .skills
            .as_deref()
            .cloned()
            .unwrap_or_default();
        Skills::load(&self.workspace, &settings)
    }

    /// The parsed profile of skill `name`, with the precedence of `/<name>` (built-in, user,
    /// project). The lookup a subagent's `task{profile}` uses.
    pub fn skill_profile(&self, name: &str) -> Option<SkillProfile> {
        self.skills().profile(name).cloned()
    }

    /// A `/<name> args` line naming a `run-as: subagent` skill: `(profile, task)` of the
    /// child that runs it ([`Session::submit_subagent`]).
    pub fn subagent_skill(&self, line: &str) -> Option<(String, String)> {
        if !line.trim_start().starts_with('/') {
            return None;
        }
        self.skills().subagent_line(line)
    }

    /// A `/<name> args` line naming a skill: its turn text and gate, or why it cannot run.
    /// `None`: not a skill.
    pub fn expand_skill(&self, line: &str) -> Option<Result<Expansion, String>> {
        if !line.trim_start().starts_with('/') {
            return None;
        }
        let models = self.skill_models();
        self.skills().expand_line(line, &models)
    }

    /// The gate of the current turn when the journal says it is a skill's (its user text
    /// opens with `<skill name="…"`) and the session does not hold it (the daemon restarted
    /// since the turn began): the skill's gate as it reads now, or — the skill gone — the
    /// narrowest one (read-only, no tools), never none.
    pub(super) fn restored_skill_turn(&self) -> Option<crate::skills::SkillTurn> {
        let name = {
            let inner = self.lock();
            if inner.skill.is_some() {
                return None;
            }
            let text = inner.events.iter().rev().find_map(|e| match &e.kind {
                EventKind::UserTurn { text, .. } => Some(text.clone()),
                _ => None,
            })?;
            crate::skills::skill_of_turn_text(&text)?
        };
        let models = self.skill_models();
        let skills = self.skills();
        Some(
            skills
                .profile(&name)
                .and_then(|p| crate::skills::expand(p, "", &models).ok())
                .map(|e| e.turn)
                .unwrap_or(crate::skills::SkillTurn {
                    name,
                    allowed_tools: Some(Vec::new()),
                    read_only: true,
                    model: None,
                    effort: None,
                }),
        )
    }

    /// The model labels the driver's config names.
    /// The model labels the user configured (what a skill may ask for).
    pub(crate) fn skill_models(&self) -> Vec<String> {
        self.lock()
            .settings
            .skills
            .as_ref()
            .map(|s| s.models.clone())
            .unwrap_or_default()
    }

    /// The running skill's verdict on a tool call (`None`: no skill, or it lets the call go
    /// on to plan mode and the policy).
    pub(super) fn skill_gate(
        &self,
        tool: &str,
        args: &serde_json::Value,
        read_only: bool,
    ) -> Option<crate::policy::Decision> {
        let skill = self.lock().skill.clone()?;
        let sandboxed = self.tool_ctx.lock_or_recover().sandbox.is_active();
        crate::skills::gate::decide(&skill, tool, args, read_only, sandboxed)
    }
}
