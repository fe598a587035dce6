//! `write_paths` of a child: canonicalised once (symlinks, `..`, absolute and relative
//! spellings all resolved the way the kernel would), checked to lie inside what the parent
//! may write, compared for overlap between siblings, and checked again for every write.
//! Pure functions over paths and the filesystem's symlinks; no session.

use std::path::{Path, PathBuf};

use crate::policy::paths::resolve;

/// The canonical form of `raw` write paths given by the model, relative to `workspace`.
/// Each must resolve inside one of `parent` (the roots the parent conversation may write:
/// the workspace and `allow_write` for the main conversation, its own write paths for a
/// child). `Err` names the first path that escapes, where it really points, and the roots.
pub fn canonical_write_paths(
    workspace: &Path,
    raws: &[String],
    parent: &[PathBuf],
) -> Result<Vec<PathBuf>, String> {
    if raws.is_empty() {
        return Err("write_paths is empty; leave it out for a read-write child of the whole workspace, or name the files and directories the child may change".into());
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for raw in raws {
        if raw.trim().is_empty() {
            return Err("write_paths holds an empty path".into());
        }
        let p = resolve(workspace, Path::new(raw));
        if !parent.iter().any(|root| p.starts_with(root)) {
            let roots: Vec<String> = parent.iter().map(|r| r.display().to_string()).collect();
            return Err(format!(
                "write path {raw:?} resolves to {}, outside what this conversation may write ({}); a child's write paths can only narrow its parent's",
                p.display(),
                roots.join(", ")
            ));
        }
        if !out.contains(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

/// True when `a` and `b` share a path: one is equal to or inside the other. `None` stands for
/// "the whole workspace" (a writer without write paths), which overlaps every writer.
pub fn overlap(a: Option<&[PathBuf]>, b: Option<&[PathBuf]>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a
            .iter()
            .any(|x| b.iter().any(|y| x.starts_with(y) || y.starts_with(x))),
        _ => true,
    }
}

/// True when the canonical `target` lies in one of `write_paths` (equal or below).
pub fn permits(write_paths: &[PathBuf], target: &Path) -> bool {
    write_paths.iter().any(|w| target.starts_with(w))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ws() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(root.join("src/a")).unwrap();
        std::fs::create_dir_all(root.join("docs")).unwrap();
        (d, root)
    }

    #[test]
    fn every_spelling_of_one_path_is_the_same_canonical_path() {
        let (_d, root) = ws();
        std::os::unix::fs::symlink(root.join("src"), root.join("link")).unwrap();
        let spellings = [
            "src/a".to_string(),
            "./src/a".into(),
            "docs/../src/a".into(),
            "link/a".into(),
            root.join("src/a").display().to_string(),
            format!("{}//src/./a/", root.display()),
        ];
        for s in &spellings {
            let got =
                canonical_write_paths(&root, std::slice::from_ref(s), std::slice::from_ref(&root));
            assert_eq!(got, Ok(vec![root.join("src/a")]), "{s}");
        }
    }

    #[test]
    fn escapes_by_dotdot_symlink_or_absolute_path_are_refused() {
        let (_d, root) = ws();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
        for s in ["../x", "src/../../x", "out/file", "/etc/passwd", "out"] {
            let err = canonical_write_paths(&root, &[s.to_string()], std::slice::from_ref(&root))
                .unwrap_err();
            assert!(
                err.contains("outside what this conversation may write"),
                "{s}: {err}"
            );
        }
        // A child of a child: only inside the parent's write paths.
        let err = canonical_write_paths(&root, &["docs".into()], &[root.join("src")]).unwrap_err();
        assert!(err.contains("docs"), "{err}");
        assert!(
            canonical_write_paths(&root, &["src/a/new.rs".into()], &[root.join("src")]).is_ok()
        );
        assert!(canonical_write_paths(&root, &[], std::slice::from_ref(&root)).is_err());
    }

    #[test]
    fn overlap_is_ancestry_and_a_whole_workspace_writer_overlaps_all() {
        let a = vec![PathBuf::from("/w/src")];
        let b = vec![PathBuf::from("/w/src/a.rs")];
        let c = vec![PathBuf::from("/w/srcx"), PathBuf::from("/w/docs")];
        assert!(overlap(Some(&a), Some(&b)));
        assert!(overlap(Some(&b), Some(&a)));
        assert!(!overlap(Some(&a), Some(&c)), "srcx is not inside src");
        assert!(overlap(None, Some(&c)));
        assert!(overlap(Some(&a), None));
        assert!(permits(&a, Path::new("/w/src/x/y.rs")));
        assert!(!permits(&a, Path::new("/w/srcx/y.rs")));
    }
}
