//! The laptop's side of skills (`docs/SPEC.md`, "Skills"): the user's own skills
//! (`<home>/skills/<name>/SKILL.md`, `<home>` = `$REASONIX_HOME` or `~/.reasonix`), read here
//! and sent with every session open and every listing, with the model labels the user's
//! config names (a skill may only choose one of those). The host parses them with the
//! workspace's and the built-in ones, keeps them in memory and never writes them to its disk.
//!
//! On the slash path, skills come after the built-in commands and the custom command files:
//! a command file named like a skill wins (with a notice). A `/<skill>` line goes to the
//! host as typed; the host expands it.

use std::path::Path;

use reasonix_forward::proto::CommandFileProblem;
use reasonix_forward::skills::{SkillFile, SkillInfo, SkillSettings, Walk};

use crate::config::Config;

/// The user's skill folders in `<home>/skills/` (symlinks followed: the folder is the
/// user's own), with the text of the files beside each `SKILL.md` (bounded).
pub fn read_user(home: &Path) -> (Vec<SkillFile>, Vec<CommandFileProblem>) {
    let root = home.join("skills");
    let shown = |p: &Path| p.display().to_string();
    Walk {
        root: &root,
        confine_to: None,
        with_asset_text: true,
        shown: &shown,
    }
    .read()
}

/// Every model label the config accepts: `provider/model`, the bare model, the provider.
pub fn model_labels(config: &Config) -> Vec<String> {
    let mut out = Vec::new();
    for p in &config.providers {
        out.push(p.name.clone());
        for m in &p.models {
            out.push(format!("{}/{m}", p.name));
            out.push(m.clone());
        }
    }
    out.sort();
    out.dedup();
    out
}

/// What a session open (or a listing) carries about skills.
pub fn settings(home: &Path, models: Vec<String>) -> SkillSettings {
    let (user, user_skipped) = read_user(home);
    SkillSettings {
        user,
        user_skipped,
        models,
    }
}

/// [`settings`] for `config`, as a session open carries it (`None` when there is nothing).
pub fn session_settings(config: &Config) -> Option<Box<SkillSettings>> {
    let s = settings(&config.home, model_labels(config));
    (!s.is_empty()).then(|| Box::new(s))
}

/// A listing for people: one skill per line (name, source, how it runs, description),
/// then the notices.
pub fn table(skills: &[SkillInfo], notices: &[String]) -> String {
    let mut out = String::new();
    if skills.is_empty() {
        out.push_str("no skills\n");
    }
    let width = skills.iter().map(|s| s.name.len() + 1).max().unwrap_or(0);
    for s in skills {
        let mut flags = vec![s.source.clone(), s.run_as.clone()];
        if s.read_only {
            flags.push("read-only".into());
        }
        if !s.allowed_tools.is_empty() {
            flags.push(format!("tools: {}", s.allowed_tools.join(",")));
        }
        if let Some(m) = &s.model {
            flags.push(format!("model: {m}"));
        }
        out.push_str(&format!(
            "/{:<width$}  {}  [{}]\n",
            s.name,
            s.description,
            flags.join("; ")
        ));
    }
    for n in notices {
        out.push_str(&format!("warning: {n}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_user_skills_with_asset_text() {
        let home = tempfile::tempdir().expect("tempdir");
        let dir = home.path().join("skills/notes/references");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(home.path().join("skills/notes/SKILL.md"), "Take notes").expect("w");
        std::fs::write(dir.join("style.md"), "Be brief").expect("w");
        let (files, skipped) = read_user(home.path());
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].assets[0].path, "references/style.md");
        assert_eq!(files[0].assets[0].text.as_deref(), Some("Be brief"));
    }

    #[test]
    fn table_lists_flags_and_notices() {
        let t = table(
            &[SkillInfo {
                name: "review".into(),
                description: "Review".into(),
                source: "built-in".into(),
                run_as: "inline".into(),
                path: "built-in:review".into(),
                read_only: true,
                allowed_tools: vec!["read_file".into()],
                model: None,
            }],
            &["skill x skipped: line 2: bad".into()],
        );
        assert!(
            t.contains("/review") && t.contains("built-in; inline; read-only; tools: read_file"),
            "{t}"
        );
        assert!(t.contains("warning: skill x skipped: line 2"), "{t}");
    }
}
