//! What a path argument *is*: the one canonical form that rules are matched against, however
//! the model spelled it (absolute, `./`, `..`, `//`, through symlinks).
//!
//! The kernel resolves a path component by component, following a symlink wherever one is met
//! and applying `..` to the directory reached so far (not to the text). [`resolve`] does the
//! same walk in user space, so the policy sees the file a tool will really open. Components
//! that do not exist yet (a file about to be written) are kept as spelled, and a `..` after a
//! missing component removes it, which is what the writers' own lexical normalisation does too.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// Symlinks followed before giving up, as the kernel's `ELOOP` limit.
const MAX_LINKS: usize = 40;

/// The absolute, symlink-free form of `raw` (relative paths start at `base`). A symlink loop
/// stops the walk; the path reached so far plus the rest as spelled is returned, which still
/// names the loop's entry point.
pub fn resolve(base: &Path, raw: &Path) -> PathBuf {
    let start = if raw.is_absolute() {
        raw.to_path_buf()
    } else {
        base.join(raw)
    };
    let mut todo: VecDeque<OsString> = VecDeque::new();
    push_components(&mut todo, &start, false);
    let mut cur = PathBuf::from("/");
    let mut links = 0usize;
    // True once a component is missing: nothing below it can be a symlink.
    let mut missing = false;
    while let Some(part) = todo.pop_front() {
        if part == ".." {
            cur.pop();
            // A `..` may climb back above the missing part into real directories.
            missing = !cur.exists();
            continue;
        }
        let next = cur.join(&part);
        if missing {
            cur = next;
            continue;
        }
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                let Ok(target) = std::fs::read_link(&next) else {
                    cur = next;
                    continue;
                };
                if links > MAX_LINKS {
                    cur = next;
                    for rest in todo.drain(..) {
                        cur.push(rest);
                    }
                    return cur;
                }
                if target.is_absolute() {
                    cur = PathBuf::from("/");
                }
                push_components(&mut todo, &target, true);
            }
            Ok(_) => cur = next,
            Err(_) => {
                missing = true;
                cur = next;
            }
        }
    }
    cur
}

/// Queues the normal and `..` components of `p` (`.`, `/` and empty ones are dropped), at the
/// front when `front` (a symlink's target replaces the link in the walk).
fn push_components(todo: &mut VecDeque<OsString>, p: &Path, front: bool) {
    let parts: Vec<OsString> = p
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    if front {
        for part in parts.into_iter().rev() {
            todo.push_front(part);
        }
    } else {
        todo.extend(parts);
    }
}

/// The forms of one path argument that rules see: the workspace-relative form when the
/// resolved path lies in the workspace (`.` for the root itself), and always the absolute
/// resolved form. Both depend only on the target, never on the spelling.
pub fn subject_forms(workspace: Option<&Path>, raw: &str) -> Vec<String> {
    let base = workspace.unwrap_or_else(|| Path::new("/"));
    // Without a workspace a relative path cannot be placed; match it as written (normalised)
    // and let the absolute form come from the process directory-independent walk below.
    let resolved = match workspace {
        Some(ws) => resolve(ws, Path::new(raw)),
        None if Path::new(raw).is_absolute() => resolve(base, Path::new(raw)),
        None => return vec![lexical_relative(raw)],
    };
    let mut forms = Vec::with_capacity(2);
    if let Some(ws) = workspace {
        if let Ok(rel) = resolved.strip_prefix(ws) {
            let rel = rel.display().to_string();
            forms.push(if rel.is_empty() { ".".to_string() } else { rel });
        }
    }
    forms.push(resolved.display().to_string());
    forms
}

/// `a/./b//c/../d` → `a/b/d` for a relative path when no workspace is known.
fn lexical_relative(raw: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for part in raw.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if out.last().is_some_and(|l| *l != "..") {
                    out.pop();
                } else {
                    out.push("..");
                }
            }
            p => out.push(p),
        }
    }
    if out.is_empty() {
        ".".to_string()
    } else {
        out.join("/")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may unwrap
    use super::*;

    #[test]
    fn walks_like_the_kernel() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::os::unix::fs::symlink(root.join("a/b"), root.join("l")).unwrap();
        std::os::unix::fs::symlink("a/b", root.join("rel")).unwrap();
        std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
        let r = |p: &str| resolve(&root, Path::new(p));
        assert_eq!(r("a//b/./c"), root.join("a/b/c"));
        assert_eq!(
            r("l/../x"),
            root.join("a/x"),
            "`..` after a link is physical"
        );
        assert_eq!(r("rel/c"), root.join("a/b/c"));
        assert_eq!(r("nope/../a"), root.join("a"));
        assert_eq!(r(&format!("{}/a/b", root.display())), root.join("a/b"));
        assert_eq!(r("loop/x"), root.join("loop/x"), "a loop stops the walk");
        assert_eq!(lexical_relative("./a//b/../c"), "a/c");
    }
}
