//! The deny rules on file writers, as bash's guard needs them: which paths they cover, where
//! such paths can be found, and whether a directory's whole subtree is covered.
//!
//! The bash reader can only see paths a command names; what an interpreter or a `cd` chain
//! writes is out of its sight. The sandbox and the after-call check
//! (`crate::tools::deny_guard`) make a deny rule on edits hold for bash whatever the command
//! looks like, and they ask this module what the rules cover.

use std::path::{Path, PathBuf};

use super::paths;
use super::rules::{Rule, Spec};
use super::Policy;
use crate::tools::WRITER_TOOLS;

/// A name no rule author would write, used to ask whether a glob covers *anything* below a
/// directory (a glob that matches these at several depths is taken to cover the subtree).
const PROBE: &str = "\u{1}reasonix-probe\u{1}";

/// The deny rules with a path glob that name at least one file writer (`Edit(glob)`,
/// `write_file(glob)`, `*(glob)`, ...), with the session's workspace.
#[derive(Debug, Clone, Default)]
pub struct WriteDenyRules {
    rules: Vec<Rule>,
    workspace: Option<PathBuf>,
}

/// Where the paths one rule covers can be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanBase {
    /// Below this directory (canonical), at most `max_depth` components deep (`None`: any
    /// depth; `Some(0)`: the path itself only).
    Under {
        /// The literal directory part of the rule's glob, resolved.
        dir: PathBuf,
        /// How deep below `dir` a covered path can be.
        max_depth: Option<usize>,
    },
    /// Anywhere: a slash-free glob matches a file name in any directory, and a glob starting
    /// with a wildcard has no literal directory part.
    Anywhere,
}

impl Policy {
    /// The deny rules that forbid a file writer to change some paths (see [`WriteDenyRules`]).
    /// Rules without a path (`Edit` alone) are not among them: they refuse the file tools as a
    /// whole and say nothing about paths bash may change.
    pub fn write_deny_rules(&self) -> WriteDenyRules {
        WriteDenyRules {
            rules: self
                .deny
                .iter()
                .filter(|r| matches!(r.spec, Some(Spec::Path { .. })))
                .filter(|r| WRITER_TOOLS.iter().any(|t| r.names_tool(t)))
                .cloned()
                .collect(),
            workspace: self.workspace.clone(),
        }
    }
}

impl WriteDenyRules {
    /// True when no rule applies (bash then needs no guard at all).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules as written, in order (indexes of [`WriteDenyRules::covering`]).
    pub fn texts(&self) -> Vec<&str> {
        self.rules.iter().map(|r| r.text.as_str()).collect()
    }

    /// The workspace the relative rules are placed in.
    pub fn workspace(&self) -> Option<&Path> {
        self.workspace.as_deref()
    }

    /// The forms a path is matched by: workspace-relative when inside the workspace (`.` for
    /// the root), and absolute. `abs` is taken literally (its last component is not followed
    /// when it is a symlink): the guard asks about directory entries, not where they point.
    fn forms(&self, abs: &Path) -> Vec<String> {
        let mut out = Vec::with_capacity(2);
        if let Some(ws) = &self.workspace {
            if let Ok(rel) = abs.strip_prefix(ws) {
                let rel = rel.display().to_string();
                out.push(if rel.is_empty() { ".".to_string() } else { rel });
            }
        }
        out.push(abs.display().to_string());
        out
    }

    /// The index of the first rule covering the entry at `abs` (an absolute path whose
    /// directories are canonical), or `None`.
    pub fn covering(&self, abs: &Path) -> Option<usize> {
        let forms = self.forms(abs);
        self.rules
            .iter()
            .position(|r| forms.iter().any(|f| r.matches_path(f)))
    }

    /// The text of rule `index` (`Edit(secrets/**)`).
    pub fn text(&self, index: usize) -> &str {
        self.rules.get(index).map(|r| r.text.as_str()).unwrap_or("")
    }

    /// True when some rule covers every path below the directory `abs` (`dir/**`, `**`):
    /// such a directory can be made read-only as a whole. Asked with made-up names at three
    /// depths, so a glob that only covers some children (`dir/*.key`, `dir/*`) does not count.
    pub fn covers_subtree(&self, abs: &Path) -> bool {
        let probes = [
            abs.join(PROBE),
            abs.join(PROBE).join(PROBE),
            abs.join(PROBE).join(PROBE).join(PROBE),
        ];
        let forms: Vec<Vec<String>> = probes.iter().map(|p| self.forms(p)).collect();
        self.rules
            .iter()
            .any(|r| forms.iter().all(|fs| fs.iter().any(|f| r.matches_path(f))))
    }

    /// Where each rule's covered paths can be, one entry per rule (same order as
    /// [`WriteDenyRules::texts`]).
    pub fn scan_bases(&self) -> Vec<ScanBase> {
        self.rules.iter().map(|r| self.scan_base(r)).collect()
    }

    fn scan_base(&self, rule: &Rule) -> ScanBase {
        let Some(Spec::Path {
            pattern,
            basename_only,
            ..
        }) = &rule.spec
        else {
            return ScanBase::Anywhere;
        };
        if basename_only.is_some() {
            return ScanBase::Anywhere;
        }
        let parts: Vec<&str> = pattern.split('/').collect();
        let lit = parts
            .iter()
            .take_while(|p| !p.contains(['*', '?', '[', '{', '\\']))
            .count();
        let prefix = parts[..lit].join("/");
        let rest = &parts[lit..];
        let absolute = pattern.starts_with('/');
        let dir = match (absolute, &self.workspace) {
            (true, _) if prefix.is_empty() => PathBuf::from("/"),
            (true, _) => paths::resolve(Path::new("/"), Path::new(&prefix)),
            (false, Some(ws)) if prefix.is_empty() => ws.clone(),
            (false, Some(ws)) => paths::resolve(ws, Path::new(&prefix)),
            // A relative rule without a workspace cannot be placed.
            (false, None) => return ScanBase::Anywhere,
        };
        // `**` crosses any number of directories; braces may hide a `/` of their own.
        let unbounded = rest.iter().any(|p| p.contains("**") || p.contains('{'));
        ScanBase::Under {
            dir,
            max_depth: (!unbounded).then_some(rest.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may unwrap
    use super::*;
    use crate::policy::Mode;

    fn rules(deny: &[&str], ws: &Path) -> WriteDenyRules {
        let deny: Vec<String> = deny.iter().map(|s| s.to_string()).collect();
        Policy::new(Mode::Auto, &[], &[], &deny)
            .unwrap()
            .with_workspace(ws)
            .write_deny_rules()
    }

    #[test]
    fn only_path_rules_on_writers_count() {
        let d = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(d.path()).unwrap();
        let r = rules(
            &[
                "Edit",
                "Read(secrets/**)",
                "Bash(rm:*)",
                "Edit(secrets/**)",
                "write_file(*.env)",
                "read_file(x/**)",
                "*(keys/**)",
            ],
            &ws,
        );
        assert_eq!(
            r.texts(),
            ["Edit(secrets/**)", "write_file(*.env)", "*(keys/**)"]
        );
        assert!(rules(&["Edit", "Read(a/**)"], &ws).is_empty());
    }

    #[test]
    fn covering_names_the_rule_and_the_directory_itself() {
        let d = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(d.path()).unwrap();
        let r = rules(&["Edit(secrets/**)", "Edit(**/*.env)", "Edit(/etc/x)"], &ws);
        assert_eq!(r.covering(&ws.join("secrets")), Some(0));
        assert_eq!(r.covering(&ws.join("secrets/a/b")), Some(0));
        assert_eq!(r.covering(&ws.join("src/a.env")), Some(1));
        assert_eq!(r.covering(&ws.join("a.env")), Some(1));
        assert_eq!(r.covering(Path::new("/etc/x")), Some(2));
        assert_eq!(r.covering(&ws.join("src/a.rs")), None);
        assert_eq!(r.covering(&ws.join("secretsx")), None);
    }

    #[test]
    fn subtree_coverage_needs_every_depth() {
        let d = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(d.path()).unwrap();
        let r = rules(
            &["Edit(a/**)", "Edit(b/*)", "Edit(c/**/*.key)", "Edit(*.env)"],
            &ws,
        );
        assert!(r.covers_subtree(&ws.join("a")));
        assert!(r.covers_subtree(&ws.join("a/deeper")));
        assert!(!r.covers_subtree(&ws.join("b")));
        assert!(!r.covers_subtree(&ws.join("c")));
        assert!(!r.covers_subtree(&ws.join("x.env")));
        assert!(!r.covers_subtree(&ws));
        assert!(rules(&["Edit(**)"], &ws).covers_subtree(&ws.join("any")));
    }

    #[test]
    fn scan_bases_start_at_the_literal_directory() {
        let d = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir(ws.join("real")).unwrap();
        std::os::unix::fs::symlink("real", ws.join("lnk")).unwrap();
        let r = rules(
            &[
                "Edit(secrets/**)",
                "Edit(lnk/*.key)",
                "Edit(**/*.env)",
                "Edit(*.pem)",
                "Edit(/srv/keys/**)",
                "Edit(conf/{a,b/c})",
                "Edit(one/file)",
            ],
            &ws,
        );
        assert_eq!(
            r.scan_bases(),
            vec![
                ScanBase::Under {
                    dir: ws.join("secrets"),
                    max_depth: None
                },
                ScanBase::Under {
                    dir: ws.join("real"),
                    max_depth: Some(1)
                },
                ScanBase::Under {
                    dir: ws.clone(),
                    max_depth: None
                },
                ScanBase::Anywhere,
                ScanBase::Under {
                    dir: PathBuf::from("/srv/keys"),
                    max_depth: None
                },
                ScanBase::Under {
                    dir: ws.join("conf"),
                    max_depth: None
                },
                ScanBase::Under {
                    dir: ws.join("one/file"),
                    max_depth: Some(0)
                },
            ]
        );
    }
}
