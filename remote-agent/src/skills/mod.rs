//! Skills (issue 33 §3): reusable instructions with a profile, run as `/<name> args`.
//!
//! A skill is a folder with a `SKILL.md` ([`parse`]): front matter (`name`, `description`,
//! `model`, `effort`, `read-only`, `allowed-tools`, `run-as: inline | subagent`) and a body,
//! the instructions. Three sources, in this order of precedence for a name:
//! 1. built-in ([`builtin`]: `/init`, `/review`, `/explore`, embedded, byte-stable);
//! 2. the user's `~/.reasonix/skills/<name>/` — read on the laptop and sent with every
//!    session open ([`reasonix_forward::skills::SkillSettings`]), kept in memory here, never
//!    written to the host's disk;
//! 3. the workspace's `.reasonix/skills/<name>/` (read here; symlinks out of the workspace
//!    are skipped).
//!
//! A later source's skill of a name already taken is skipped with a notice, as is a
//! malformed `SKILL.md` (naming the file and the line).
//!
//! What a skill may do: it only narrows ([`gate`]). `allowed-tools` filters the session's
//! tools, `read-only` refuses writers as plan mode does; everything left still goes through
//! the session's policy. Keys that would loosen the mode, sandbox or write paths are ignored
//! with a warning. `model` must be one of the labels the user's config names (the laptop
//! sends them); any other is refused with a message listing them.
//!
//! This module is the pure core: reading, parsing, merging, expanding a `/<name>` line into
//! the turn's text and the turn's [`gate::SkillTurn`]. The session glue
//! (`session/skills.rs`) applies it.
//!
//! For subagents: [`Skills::profile`] (and `Session::skill_profile`) is the lookup a
//! `task{profile}` uses: the parsed [`SkillProfile`] of a name, with the same precedence.

pub mod builtin;
pub mod gate;
pub mod parse;

use std::path::Path;

use reasonix_forward::proto::ReasoningEffort;
use reasonix_forward::skills::{SkillAsset, SkillFile, SkillInfo, SkillSettings, Walk};

pub use gate::SkillTurn;

/// The skills folder of a workspace, relative to its root.
pub const PROJECT_DIR: &str = ".reasonix/skills";

/// Where a skill came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillSource {
    /// Embedded in the binary.
    BuiltIn,
    /// `~/.reasonix/skills/` on the laptop.
    User,
    /// `.reasonix/skills/` in the workspace.
    Project,
}

impl SkillSource {
    /// `built-in`, `user` or `project`.
    pub fn label(self) -> &'static str {
        match self {
            SkillSource::BuiltIn => "built-in",
            SkillSource::User => "user",
            SkillSource::Project => "project",
        }
    }
}

/// How a skill runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAs {
    /// In the current conversation: its text becomes the user turn.
    Inline,
    /// As a child conversation (a subagent's profile).
    Subagent,
}

impl RunAs {
    /// `inline` or `subagent`.
    pub fn label(self) -> &'static str {
        match self {
            RunAs::Inline => "inline",
            RunAs::Subagent => "subagent",
        }
    }
}

/// A parsed skill: the profile a `/<name>` or a subagent runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillProfile {
    /// Name typed after `/` (front matter `name`, else the folder's name).
    pub name: String,
    /// One line (front matter `description`, else the body's first line).
    pub description: String,
    /// Model label it asks for (checked against the user's configured models when it runs).
    pub model: Option<String>,
    /// Reasoning effort it asks for.
    pub effort: Option<ReasoningEffort>,
    /// Only read-only tools (bash in a read-only sandbox).
    pub read_only: bool,
    /// Tools it narrows to; `None`: the session's tools.
    pub allowed_tools: Option<Vec<String>>,
    /// Inline or as a subagent.
    pub run_as: RunAs,
    /// The instructions (`$ARGUMENTS`, `$1`…, `$$` substituted when it runs).
    pub body: String,
    /// Where it came from.
    pub source: SkillSource,
    /// Its `SKILL.md`, as notices name it.
    pub path: String,
    /// Files beside the `SKILL.md`.
    pub assets: Vec<SkillAsset>,
    /// Front matter keys that were ignored (they would loosen the session), with their line.
    pub warnings: Vec<String>,
}

impl SkillProfile {
    /// The skill as listings show it.
    pub fn info(&self) -> SkillInfo {
        SkillInfo {
            name: self.name.clone(),
            description: self.description.clone(),
            source: self.source.label().to_string(),
            run_as: self.run_as.label().to_string(),
            path: self.path.clone(),
            read_only: self.read_only,
            allowed_tools: self.allowed_tools.clone().unwrap_or_default(),
            model: self.model.clone(),
        }
    }

    /// The folder the skill's files are in, as the model should name them (project skills:
    /// relative to the workspace root).
    fn folder(&self) -> &str {
        self.path
            .strip_suffix(reasonix_forward::skills::SKILL_FILE)
            .unwrap_or(&self.path)
            .trim_end_matches('/')
    }
}

/// The skills of a session (or of a listing), merged, with what was skipped.
#[derive(Debug, Clone, Default)]
pub struct Skills {
    /// Skills sorted by name.
    pub skills: Vec<SkillProfile>,
    /// One line per skipped or shadowed skill, and per ignored key.
    pub notices: Vec<String>,
}

/// What a `/<name> args` line becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expansion {
    /// The user turn's text.
    pub text: String,
    /// What the turn may do.
    pub turn: SkillTurn,
}

impl Skills {
    /// Built-in, then the user's (from `settings`), then the workspace's skills.
    pub fn load(workspace: &Path, settings: &SkillSettings) -> Skills {
        let (project, project_skipped) = read_project(workspace);
        Skills::merge(
            builtin::files(),
            settings.user.clone(),
            &settings.user_skipped,
            project,
            &project_skipped,
        )
    }

    /// Merge the three sources (pure; [`Skills::load`] reads them).
    pub fn merge(
        builtin: Vec<SkillFile>,
        user: Vec<SkillFile>,
        user_skipped: &[reasonix_forward::proto::CommandFileProblem],
        project: Vec<SkillFile>,
        project_skipped: &[reasonix_forward::proto::CommandFileProblem],
    ) -> Skills {
        let mut set = Skills::default();
        for p in user_skipped.iter().chain(project_skipped) {
            set.notices
                .push(format!("skill {} skipped: {}", p.path, p.problem));
        }
        for (files, source) in [
            (builtin, SkillSource::BuiltIn),
            (user, SkillSource::User),
            (project, SkillSource::Project),
        ] {
            for f in files {
                let mut p = match parse::parse(&f.name, &f.path, &f.text, source) {
                    Ok(p) => p,
                    Err(e) => {
                        set.notices.push(format!("skill {} skipped: {e}", f.path));
                        continue;
                    }
                };
                if let Some(prev) = set.skills.iter().find(|s| s.name == p.name) {
                    set.notices.push(format!(
                        "skill {} skipped: /{} is already the {} skill {} (built-in skills win over the user's, the user's over the project's)",
                        f.path, p.name, prev.source.label(), prev.path
                    ));
                    continue;
                }
                for w in &p.warnings {
                    set.notices.push(format!("skill {}: {w}", f.path));
                }
                p.assets = f.assets;
                set.skills.push(p);
            }
        }
        reasonix_forward::sort::sort_by(&mut set.skills, |a, b| a.name.cmp(&b.name));
        set
    }

    /// The parsed profile of skill `name` (the lookup subagents use for `task{profile}`).
    pub fn profile(&self, name: &str) -> Option<&SkillProfile> {
        self.skills.iter().find(|s| s.name == name)
    }

    /// Every skill as listings show it.
    pub fn info(&self) -> Vec<SkillInfo> {
        self.skills.iter().map(SkillProfile::info).collect()
    }

    /// For a line `/name args` naming one of these skills: the turn's text and gate, or why
    /// it cannot run (a subagent skill, a model the user did not configure). `None`: the
    /// line names no skill.
    pub fn expand_line(&self, line: &str, models: &[String]) -> Option<Result<Expansion, String>> {
        let rest = line.trim_start().strip_prefix('/')?;
        let (name, args) = match rest.split_once(char::is_whitespace) {
            Some((n, a)) => (n, a.trim()),
            None => (rest, ""),
        };
        let skill = self.profile(name)?;
        Some(expand(skill, args, models))
    }

    /// For a line `/name args` naming a `run-as: subagent` skill: the child's profile (the
    /// skill's name) and task (the arguments, or a line asking it to do its work). The
    /// session runs it as one child, as `reasonix subagent run name "args"` does.
    pub fn subagent_line(&self, line: &str) -> Option<(String, String)> {
        let rest = line.trim_start().strip_prefix('/')?;
        let (name, args) = match rest.split_once(char::is_whitespace) {
            Some((n, a)) => (n, a.trim()),
            None => (rest, ""),
        };
        let skill = self.profile(name)?;
        if skill.run_as != RunAs::Subagent {
            return None;
        }
        let task = if args.is_empty() {
            format!("Do what the skill /{name} is for.")
        } else {
            args.to_string()
        };
        Some((skill.name.clone(), task))
    }
}

/// The turn of `skill` run with `args`.
pub fn expand(skill: &SkillProfile, args: &str, models: &[String]) -> Result<Expansion, String> {
    if skill.run_as == RunAs::Subagent {
        return Err(format!(
            "the skill /{} runs as a subagent (`run-as: subagent` in {}), not inline in this conversation; \
             run it with `/{} args`, `task{{profile}}` or `reasonix subagent run`",
            skill.name, skill.path, skill.name
        ));
    }
    check_model(skill, models)?;
    let mut text = format!(
        "<skill name=\"{}\" source=\"{}\">\n{}\n",
        skill.name,
        skill.source.label(),
        substitute(&skill.body, args)
    );
    if !args.is_empty() && !skill.body.contains("$ARGUMENTS") && !skill.body.contains("$1") {
        text.push_str(&format!("\nArguments: {args}\n"));
    }
    if !skill.assets.is_empty() {
        match skill.source {
            SkillSource::Project => {
                text.push_str("\nFiles of this skill (read them when you need them):\n");
                for a in &skill.assets {
                    text.push_str(&format!("- {}/{}\n", skill.folder(), a.path));
                }
            }
            _ => {
                text.push_str("\nFiles of this skill:\n");
                for a in &skill.assets {
                    match &a.text {
                        Some(t) => text.push_str(&format!(
                            "<skill-file path=\"{}\">\n{t}\n</skill-file>\n",
                            a.path
                        )),
                        None => text.push_str(&format!(
                            "- {} (on the user's laptop only: too big or not text, not available here)\n",
                            a.path
                        )),
                    }
                }
            }
        }
    }
    text.push_str("</skill>");
    Ok(Expansion {
        text,
        turn: SkillTurn {
            name: skill.name.clone(),
            allowed_tools: skill.allowed_tools.clone(),
            read_only: skill.read_only,
            model: skill.model.clone(),
            effort: skill.effort,
        },
    })
}

/// The skill a user turn's text runs (the `<skill name="…"` it opens with), if any.
pub fn skill_of_turn_text(text: &str) -> Option<String> {
    let rest = text.strip_prefix("<skill name=\"")?;
    let name = rest.split('"').next()?;
    reasonix_forward::skills::valid_name(name).then(|| name.to_string())
}

/// The parsed profile of skill `name` in `workspace` for a driver with `settings` (the same
/// precedence as `/<name>`): the lookup a subagent's `task{profile}` uses when it has no
/// session at hand; with one, `Session::skill_profile`.
pub fn profile(workspace: &Path, settings: &SkillSettings, name: &str) -> Option<SkillProfile> {
    Skills::load(workspace, settings).profile(name).cloned()
}

/// A skill's model must be one the user configured.
pub fn check_model(skill: &SkillProfile, models: &[String]) -> Result<(), String> {
    let Some(m) = &skill.model else {
        return Ok(());
    };
    if models.iter().any(|k| k == m) {
        return Ok(());
    }
    Err(format!(
        "the skill /{} asks for model `{m}` ({}), which no provider in your config offers; {}. \
         Change its `model:` or remove it to use the session's model",
        skill.name,
        skill.path,
        if models.is_empty() {
            "the client sent no configured models".to_string()
        } else {
            format!("configured: {}", models.join(", "))
        }
    ))
}

/// `$ARGUMENTS` (every argument), `$1`…`$N` (by position), `$$` (a literal `$`): the same
/// expansion as command files.
pub use reasonix_forward::command_files::expand_args as substitute;

/// The workspace's skill folders, confined to the workspace.
pub fn read_project(
    workspace: &Path,
) -> (
    Vec<SkillFile>,
    Vec<reasonix_forward::proto::CommandFileProblem>,
) {
    let root = workspace.join(PROJECT_DIR);
    let Ok(canon) = workspace.canonicalize() else {
        return (Vec::new(), Vec::new());
    };
    let shown = |p: &Path| match p.strip_prefix(workspace) {
        Ok(rel) => rel.display().to_string(),
        Err(_) => p.display().to_string(),
    };
    Walk {
        root: &root,
        confine_to: Some(&canon),
        with_asset_text: false,
        shown: &shown,
    }
    .read()
}

#[cfg(test)]
mod tests;
