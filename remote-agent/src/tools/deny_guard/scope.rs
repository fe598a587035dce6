//! Where the guard looks: the places the deny rules' paths can be, cut down to what a bash
//! command can write.

use std::path::{Path, PathBuf};

use crate::policy::{ScanBase, WriteDenyRules};
use crate::sandbox::Sandbox;

/// The directories one check walks, and what it never enters.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// (start, how deep below it), without a start inside another unbounded one.
    walks: Vec<(PathBuf, Option<usize>)>,
    /// Never entered: the daemon's own state (journals, checkpoints, the kept denied writes).
    excluded: Vec<PathBuf>,
    /// The roots bash can write under the sandbox (canonical).
    writable: Vec<PathBuf>,
    /// False when commands run unconfined (`[sandbox] bash = "off"`).
    confined: bool,
}

/// Components of `path` below `base` (which it starts with).
fn depth_below(path: &Path, base: &Path) -> usize {
    path.strip_prefix(base)
        .map(|r| r.components().count())
        .unwrap_or(0)
}

impl Scope {
    /// The scope of `rules` for commands run by `sandbox`:
    ///
    /// * a rule with a literal directory part is walked from that directory when bash can
    ///   write there (inside a writable root, or anywhere when the sandbox is off); when the
    ///   directory holds writable roots (`/home/**`), from each of them;
    /// * a rule without one (`*.env`, `**/*.pem`) is walked over the workspace and the
    ///   `allow_write` roots (not the toolchain caches, which builds rewrite all the time:
    ///   a rule meant for a cache names it).
    ///
    /// Under the sandbox, a covered path outside every writable root needs no walk: the
    /// sandbox's root is read-only there.
    pub fn new(rules: &WriteDenyRules, sandbox: &Sandbox, excluded: Vec<PathBuf>) -> Scope {
        let writable = sandbox.writable_roots();
        let mut anywhere: Vec<PathBuf> = vec![sandbox.workspace().to_path_buf()];
        for p in &sandbox.config().allow_write {
            if let Ok(c) = std::fs::canonicalize(p) {
                if !anywhere.contains(&c) {
                    anywhere.push(c);
                }
            }
        }
        Self::from_parts(rules, writable, anywhere, sandbox.is_active(), excluded)
    }

    /// [`Scope::new`] from its inputs (the Landlock sandbox computes the same thing).
    pub fn from_parts(
        rules: &WriteDenyRules,
        writable: Vec<PathBuf>,
        anywhere: Vec<PathBuf>,
        confined: bool,
        excluded: Vec<PathBuf>,
    ) -> Scope {
        let mut walks: Vec<(PathBuf, Option<usize>)> = Vec::new();
        for base in rules.scan_bases() {
            match base {
                ScanBase::Anywhere => {
                    walks.extend(anywhere.iter().map(|r| (r.clone(), None)));
                }
                ScanBase::Under { dir, max_depth } => {
                    let inside = writable.iter().any(|w| dir.starts_with(w));
                    if inside || (!confined && dir != Path::new("/")) {
                        walks.push((dir, max_depth));
                        continue;
                    }
                    for w in writable.iter().filter(|w| w.starts_with(&dir)) {
                        let k = depth_below(w, &dir);
                        match max_depth {
                            None => walks.push((w.clone(), None)),
                            Some(d) if k <= d => walks.push((w.clone(), Some(d - k))),
                            Some(_) => {}
                        }
                    }
                }
            }
        }
        Scope {
            walks: simplify(walks),
            excluded,
            writable,
            confined,
        }
    }

    /// True when there is nothing to walk.
    pub fn is_empty(&self) -> bool {
        self.walks.is_empty()
    }

    /// The walks: (start, how deep below it; `None` for any depth).
    pub fn walks(&self) -> &[(PathBuf, Option<usize>)] {
        &self.walks
    }

    /// True for a path the walk must not enter.
    pub fn is_excluded(&self, path: &Path) -> bool {
        self.excluded.iter().any(|e| path.starts_with(e))
    }

    /// True when bash could write `path`: inside a writable root under the sandbox, anywhere
    /// without it.
    pub fn is_writable(&self, path: &Path) -> bool {
        !self.confined || self.writable.iter().any(|w| path.starts_with(w))
    }
}

/// Drops duplicate walks and walks inside an unbounded one (keeping the deeper of two walks
/// of the same start).
fn simplify(mut walks: Vec<(PathBuf, Option<usize>)>) -> Vec<(PathBuf, Option<usize>)> {
    reasonix_forward::sort::sort(&mut walks);
    let mut out: Vec<(PathBuf, Option<usize>)> = Vec::new();
    for (p, d) in walks {
        if out.iter().any(|(q, dq)| dq.is_none() && p.starts_with(q)) {
            continue;
        }
        if let Some(same) = out.iter_mut().find(|(q, _)| *q == p) {
            same.1 = match (same.1, d) {
                (None, _) | (_, None) => None,
                (Some(a), Some(b)) => Some(a.max(b)),
            };
            continue;
        }
        out.push((p, d));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may unwrap
    use super::*;
    use crate::policy::{Mode, Policy};

    fn rules(deny: &[&str], ws: &Path) -> WriteDenyRules {
        let deny: Vec<String> = deny.iter().map(|s| s.to_string()).collect();
        Policy::new(Mode::Auto, &[], &[], &deny)
            .unwrap()
            .with_workspace(ws)
            .write_deny_rules()
    }

    #[test]
    fn confined_scope_walks_only_what_bash_can_write() {
        let ws = PathBuf::from("/w/ws");
        let cache = PathBuf::from("/home/u/.cache");
        let extra = PathBuf::from("/srv/extra");
        let writable = vec![ws.clone(), extra.clone(), cache.clone()];
        let anywhere = vec![ws.clone(), extra.clone()];
        let literal = [
            "Edit(secrets/**)",
            "Edit(/etc/**)",
            "Edit(/home/u/**)",
            "Edit(/srv/*/k)",
        ];
        let s = Scope::from_parts(
            &rules(&literal, &ws),
            writable.clone(),
            anywhere.clone(),
            true,
            Vec::new(),
        );
        assert_eq!(
            s.walks(),
            &[
                (cache.clone(), None),
                (extra.clone(), Some(1)),
                (ws.join("secrets"), None),
            ]
        );
        assert!(s.is_writable(&ws.join("a")) && !s.is_writable(Path::new("/etc/x")));
        // A slash-free glob walks the workspace and allow_write, not the caches.
        let mut all = literal.to_vec();
        all.push("Edit(*.env)");
        let s = Scope::from_parts(&rules(&all, &ws), writable, anywhere, true, Vec::new());
        assert_eq!(s.walks(), &[(cache, None), (extra, None), (ws, None)]);
    }

    #[test]
    fn unconfined_scope_walks_every_literal_directory() {
        let ws = PathBuf::from("/w/ws");
        let r = rules(
            &["Edit(secrets/**)", "Edit(/etc/**)", "Edit(/**/*.pem)"],
            &ws,
        );
        let s = Scope::from_parts(&r, vec![ws.clone()], vec![ws.clone()], false, Vec::new());
        assert_eq!(
            s.walks(),
            &[(PathBuf::from("/etc"), None), (ws.clone(), None)]
        );
        assert!(s.is_writable(Path::new("/etc/x")));
    }

    #[test]
    fn excluded_paths_and_nested_walks() {
        let ws = PathBuf::from("/w/ws");
        let r = rules(
            &["Edit(a/**)", "Edit(a/b/*)", "Edit(c/*)", "Edit(c/*/*)"],
            &ws,
        );
        let s = Scope::from_parts(
            &r,
            vec![ws.clone()],
            vec![ws.clone()],
            true,
            vec![PathBuf::from("/w/ws/state")],
        );
        assert_eq!(s.walks(), &[(ws.join("a"), None), (ws.join("c"), Some(2))]);
        assert!(s.is_excluded(Path::new("/w/ws/state/x")));
        assert!(!s.is_excluded(Path::new("/w/ws/statex")));
    }
}
