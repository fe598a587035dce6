//! Skill folders (`<root>/<name>/SKILL.md` and the files beside it), read raw: by the host
//! for the workspace's `.reasonix/skills/` and by the laptop for `~/.reasonix/skills/`.
//!
//! Reading only, bounded in size and number; parsing the front matter and deciding what a
//! skill may do is the host's (`reasonix-remote`'s `skills` module). The wire types of
//! skills live here too.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::proto::CommandFileProblem;

/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// Largest `SKILL.md` read.
pub const MAX_SKILL_BYTES: u64 = 64 * 1024;
/// Most skills read from one folder.
pub const MAX_SKILLS: usize = 128;
/// Most files beside one `SKILL.md` that are listed.
pub const MAX_ASSETS: usize = 32;
/// Largest file beside a user skill whose text is sent to the host.
pub const MAX_ASSET_BYTES: u64 = 16 * 1024;
/// Most text of files beside one user skill sent to the host.
pub const MAX_ASSET_TOTAL: usize = 64 * 1024;

/// One skill folder as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillFile {
    /// The folder's name (the skill's name unless the front matter's `name` differs).
    pub name: String,
    /// Path of the `SKILL.md` shown in notices.
    pub path: String,
    /// The text of `SKILL.md`.
    pub text: String,
    /// The files beside it (`references/…`, `scripts/…`), relative to the folder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assets: Vec<SkillAsset>,
}

/// A file beside a `SKILL.md`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillAsset {
    /// Path relative to the skill's folder (`references/api.md`).
    pub path: String,
    /// Its text, for a user skill (the laptop's files are not on the host); `None` for a
    /// project skill (the model reads it in the workspace) or a file too big or not text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// What a driving client sends about skills with every session open: the user's skills
/// (kept in the host's memory only, never written to its disk) and the model labels the
/// user configured (a skill may only choose one of them).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SkillSettings {
    /// `~/.reasonix/skills/*/SKILL.md` as read on the laptop.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user: Vec<SkillFile>,
    /// Skill folders of the laptop that could not be read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user_skipped: Vec<CommandFileProblem>,
    /// Every model label the user's config accepts (`provider/model`, `model`, `provider`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
}

impl SkillSettings {
    /// True when there is nothing to send.
    pub fn is_empty(&self) -> bool {
        self.user.is_empty() && self.user_skipped.is_empty() && self.models.is_empty()
    }
}

// Debug without the skills' text (settings are logged).
impl std::fmt::Debug for SkillSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillSettings")
            .field("user_skills", &self.user.len())
            .field("models", &self.models)
            .finish()
    }
}

/// One skill as `reasonix skills list` and `/skills` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillInfo {
    /// Name typed after `/`.
    pub name: String,
    /// One line.
    pub description: String,
    /// `built-in`, `user` or `project`.
    pub source: String,
    /// `inline` or `subagent`.
    pub run_as: String,
    /// Where it was read (`built-in:review` for the embedded ones).
    pub path: String,
    /// The skill may only use read-only tools.
    pub read_only: bool,
    /// Tools it narrows to (empty: every tool of the session).
    #[serde(default)]
    pub allowed_tools: Vec<String>,
    /// Model it asks for, if any.
    #[serde(default)]
    pub model: Option<String>,
}

/// How one skills folder is read.
pub struct Walk<'a> {
    /// The skills folder (each skill is a folder below it).
    pub root: &'a Path,
    /// When set (a canonical path), a file whose real path is outside it is skipped.
    pub confine_to: Option<&'a Path>,
    /// Send the text of the files beside `SKILL.md` (the laptop's user skills).
    pub with_asset_text: bool,
    /// How a path is shown in `SkillFile::path` and in problems.
    pub shown: &'a dyn Fn(&Path) -> String,
}

impl Walk<'_> {
    /// Every `<root>/<name>/SKILL.md`, sorted by name, and the folders that could not be
    /// used with the reason. A missing root is no skills, not an error.
    pub fn read(&self) -> (Vec<SkillFile>, Vec<CommandFileProblem>) {
        let mut skills = Vec::new();
        let mut skipped = Vec::new();
        let Ok(rd) = std::fs::read_dir(self.root) else {
            return (skills, skipped);
        };
        let mut dirs: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        crate::sort::sort(&mut dirs);
        for dir in dirs {
            let problem = |p: &Path, why: String| CommandFileProblem {
                path: (self.shown)(p),
                problem: why,
            };
            if !self.inside(&dir) {
                skipped.push(problem(
                    &dir,
                    "it is a link outside the workspace; skills must live in the workspace".into(),
                ));
                continue;
            }
            if !dir.is_dir() {
                continue;
            }
            let file = dir.join(SKILL_FILE);
            let name = dir
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("")
                .to_string();
            if !valid_name(&name) {
                skipped.push(problem(
                    &dir,
                    "a skill's folder name may only use letters, digits, `-`, `_` and `.`".into(),
                ));
                continue;
            }
            if !file.exists() {
                skipped.push(problem(
                    &dir,
                    format!("no {SKILL_FILE} in the folder; add one or remove the folder"),
                ));
                continue;
            }
            if !self.inside(&file) {
                skipped.push(problem(
                    &file,
                    "it is a link outside the workspace; skills must live in the workspace".into(),
                ));
                continue;
            }
            if skills.len() >= MAX_SKILLS {
                skipped.push(problem(
                    &file,
                    format!("more than {MAX_SKILLS} skills; the rest are not read"),
                ));
                continue;
            }
            match std::fs::metadata(&file) {
                Ok(m) if m.len() > MAX_SKILL_BYTES => {
                    skipped.push(problem(
                        &file,
                        format!(
                            "{} bytes, more than the {MAX_SKILL_BYTES} a {SKILL_FILE} may have",
                            m.len()
                        ),
                    ));
                    continue;
                }
                Ok(_) => {}
                Err(e) => {
                    skipped.push(problem(&file, format!("cannot read: {e}")));
                    continue;
                }
            }
            let text = match std::fs::read(&file).map(String::from_utf8) {
                Ok(Ok(t)) => t,
                Ok(Err(_)) => {
                    skipped.push(problem(&file, "not UTF-8 text".into()));
                    continue;
                }
                Err(e) => {
                    skipped.push(problem(&file, format!("cannot read: {e}")));
                    continue;
                }
            };
            let mut assets = Vec::new();
            let mut total = 0;
            self.assets(&dir, &dir, 0, &mut assets, &mut total);
            skills.push(SkillFile {
                name,
                path: (self.shown)(&file),
                text,
                assets,
            });
        }
        (skills, skipped)
    }

    fn inside(&self, path: &Path) -> bool {
        match self.confine_to {
            None => true,
            Some(c) => path.canonicalize().is_ok_and(|r| r.starts_with(c)),
        }
    }

    fn assets(
        &self,
        base: &Path,
        dir: &Path,
        depth: usize,
        out: &mut Vec<SkillAsset>,
        total: &mut usize,
    ) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        crate::sort::sort(&mut entries);
        for p in entries {
            if out.len() >= MAX_ASSETS || !self.inside(&p) {
                continue;
            }
            if p.is_dir() {
                if depth < 2 {
                    self.assets(base, &p, depth + 1, out, total);
                }
                continue;
            }
            let Ok(rel) = p.strip_prefix(base) else {
                continue;
            };
            let rel = rel.to_string_lossy().replace('\\', "/");
            if depth == 0 && rel == SKILL_FILE {
                continue;
            }
            let text = if self.with_asset_text {
                std::fs::metadata(&p)
                    .ok()
                    .filter(|m| m.len() <= MAX_ASSET_BYTES)
                    .and_then(|_| std::fs::read(&p).ok())
                    .and_then(|b| String::from_utf8(b).ok())
                    .filter(|t| *total + t.len() <= MAX_ASSET_TOTAL)
            } else {
                None
            };
            *total += text.as_ref().map_or(0, String::len);
            out.push(SkillAsset { path: rel, text });
        }
    }
}

/// A skill name: letters, digits, `-`, `_` and `.`, not empty, at most 64 characters.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_skills_and_assets_and_skips_the_rest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("skills");
        std::fs::create_dir_all(root.join("ok/references")).expect("mkdir");
        std::fs::write(root.join("ok/SKILL.md"), "---\nname: ok\n---\nbody").expect("w");
        std::fs::write(root.join("ok/references/a.md"), "ref").expect("w");
        std::fs::create_dir_all(root.join("empty")).expect("mkdir");
        std::fs::create_dir_all(root.join("bin")).expect("mkdir");
        std::fs::write(root.join("bin/SKILL.md"), [0xff, 0xfe]).expect("w");
        std::fs::write(outside.path().join("SKILL.md"), "secret").expect("w");
        std::fs::create_dir_all(root.join("leak")).expect("mkdir");
        std::os::unix::fs::symlink(
            outside.path().join("SKILL.md"),
            root.join("leak").join(SKILL_FILE),
        )
        .expect("symlink");
        let canon = dir.path().canonicalize().expect("canon");
        let shown = |p: &Path| p.display().to_string();
        let (skills, skipped) = Walk {
            root: &root,
            confine_to: Some(&canon),
            with_asset_text: true,
            shown: &shown,
        }
        .read();
        assert_eq!(skills.len(), 1, "{skills:?}");
        assert_eq!(skills[0].name, "ok");
        assert_eq!(skills[0].assets.len(), 1);
        assert_eq!(skills[0].assets[0].path, "references/a.md");
        assert_eq!(skills[0].assets[0].text.as_deref(), Some("ref"));
        let why: Vec<String> = skipped.iter().map(|p| p.problem.clone()).collect();
        assert_eq!(skipped.len(), 3, "{why:?}");
        assert!(why.iter().any(|w| w.contains("outside the workspace")));
        assert!(why.iter().any(|w| w.contains("not UTF-8")));
        assert!(why.iter().any(|w| w.contains("no SKILL.md")));
    }
}
