//! The one mutation path every writer goes through: confinement (symlinks resolved) →
//! prior-state hook → atomic write. Permission is decided by the agent before the tool runs.
//!
//! A [`WriteTarget`] can only be obtained from [`confine_write`], so a writer cannot change a
//! path that was not checked against the writable roots.

use std::fmt;
use std::io::Write;
use std::path::{Component, Path, PathBuf};

use super::ToolContext;

/// Why a path may not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfineError {
    /// The argument was empty.
    #[error("path is required")]
    Empty,
    /// The path (after resolving symlinks and `..`) is outside every writable root.
    #[error(
        "refusing to write {raw}: it resolves to {resolved}, outside the writable roots ({roots}). \
         To widen them, add the directory to `[sandbox] allow_write` in ~/.reasonix/config.toml \
         (a project's reasonix.toml may only tighten)."
    )]
    Outside {
        /// The path as the model gave it.
        raw: String,
        /// Where it really points.
        resolved: String,
        /// The roots, comma separated.
        roots: RootList,
    },
    /// The path is a symlink whose target is missing: writing through it could land anywhere.
    #[error("refusing to write {raw}: {link} is a symlink to a missing target")]
    DanglingSymlink {
        /// The path as the model gave it.
        raw: String,
        /// The dangling link.
        link: String,
    },
    /// The path is inside a repository's `.git` directory (hooks there would run outside the
    /// sandbox on the user's next git command).
    #[error(
        "refusing to write {raw}: it is inside the git internals ({resolved}); change the \
         repository with git commands through bash instead"
    )]
    GitInternals {
        /// The path as the model gave it.
        raw: String,
        /// Where it really points.
        resolved: String,
    },
    /// The path is inside the writable roots but outside the child's `write_paths`.
    #[error(
        "refusing to write {raw}: it resolves to {resolved}, outside this subagent's write_paths ({roots}); \
         a subagent may only change the paths its task named"
    )]
    OutsideWritePaths {
        /// The path as the model gave it.
        raw: String,
        /// Where it really points.
        resolved: String,
        /// The write paths, comma separated.
        roots: RootList,
    },
    /// The filesystem could not be inspected.
    #[error("cannot resolve {raw}: {error}")]
    Io {
        /// The path as the model gave it.
        raw: String,
        /// The OS error text.
        error: String,
    },
}

/// Writable roots, displayed comma separated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootList(pub Vec<PathBuf>);

impl fmt::Display for RootList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|p| p.display().to_string()).collect();
        f.write_str(&parts.join(", "))
    }
}

/// A path a writer may change: absolute, symlinks resolved, inside a writable root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteTarget {
    path: PathBuf,
}

impl WriteTarget {
    /// The resolved absolute path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the file's content (creating parents), after the mutation hook. The write is
    /// atomic (temp file + rename in the same directory) and keeps the old file's mode.
    pub fn write(&self, ctx: &ToolContext, bytes: &[u8]) -> std::io::Result<()> {
        ctx.mutation_hook.before_write(&self.path);
        write_atomic(&self.path, bytes)
    }

    /// Moves this file to `dest` (creating parents), after the mutation hook for both paths.
    pub fn move_to(&self, ctx: &ToolContext, dest: &WriteTarget) -> std::io::Result<()> {
        ctx.mutation_hook.before_write(&self.path);
        ctx.mutation_hook.before_write(&dest.path);
        if let Some(parent) = dest.path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        match std::fs::rename(&self.path, &dest.path) {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                // Different filesystems (an allow_write root on another mount): copy, then remove.
                std::fs::copy(&self.path, &dest.path)?;
                std::fs::remove_file(&self.path)
            }
            Err(e) => Err(e),
        }
    }
}

/// The writable roots of a context: the workspace first, then `allow_write`, resolved.
pub fn writable_roots(ctx: &ToolContext) -> Vec<PathBuf> {
    std::iter::once(&ctx.workspace)
        .chain(ctx.allow_write.iter())
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
        .collect()
}

/// Checks that `raw` (relative to the workspace, or absolute) resolves inside a writable root.
/// Existing parts of the path are resolved by the kernel (symlinks, `..`); the missing tail is
/// normalised lexically, so `new/../../x` cannot climb out either.
pub fn confine_write(ctx: &ToolContext, raw: &str) -> Result<WriteTarget, ConfineError> {
    if raw.trim().is_empty() {
        return Err(ConfineError::Empty);
    }
    let abs = ctx.resolve(raw);
    let resolved = resolve_existing_prefix(&abs, raw)?;
    let roots = writable_roots(ctx);
    if let Some(root) = roots.iter().find(|r| resolved.starts_with(r)) {
        check_git_internals(root, &resolved, raw)?;
        check_write_only(ctx, &resolved, raw)?;
        Ok(WriteTarget { path: resolved })
    } else {
        Err(ConfineError::Outside {
            raw: raw.to_string(),
            resolved: resolved.display().to_string(),
            roots: RootList(roots),
        })
    }
}

/// A target whose parent is already resolved and confined; the final component is kept as
/// is (so `move_file` moves a symlink itself, not its target).
pub(crate) fn unresolved_target(
    ctx: &ToolContext,
    path: PathBuf,
    raw: &str,
) -> Result<WriteTarget, ConfineError> {
    let roots = writable_roots(ctx);
    if let Some(root) = roots.iter().find(|r| path.starts_with(r) && path != **r) {
        check_git_internals(root, &path, raw)?;
        check_write_only(ctx, &path, raw)?;
        Ok(WriteTarget { path })
    } else {
        Err(ConfineError::Outside {
            raw: raw.to_string(),
            resolved: path.display().to_string(),
            roots: RootList(roots),
        })
    }
}

/// Refuses paths outside a subagent's `write_paths` ([`ToolContext::write_only`]), compared
/// on the resolved path (so `..`, symlinks and absolute spellings cannot widen them).
fn check_write_only(ctx: &ToolContext, path: &Path, raw: &str) -> Result<(), ConfineError> {
    match &ctx.write_only {
        Some(paths) if !crate::delegate::paths::permits(paths, path) => {
            Err(ConfineError::OutsideWritePaths {
                raw: raw.to_string(),
                resolved: path.display().to_string(),
                roots: RootList(paths.to_vec()),
            })
        }
        _ => Ok(()),
    }
}

/// Refuses paths with a `.git` component below their root (the sandbox protects the same
/// directories from bash).
fn check_git_internals(root: &Path, path: &Path, raw: &str) -> Result<(), ConfineError> {
    let below = path.strip_prefix(root).unwrap_or(path);
    if below.components().any(|c| c.as_os_str() == ".git") {
        return Err(ConfineError::GitInternals {
            raw: raw.to_string(),
            resolved: path.display().to_string(),
        });
    }
    Ok(())
}

/// Resolves the longest existing prefix of `abs` with `canonicalize` and appends the rest.
fn resolve_existing_prefix(abs: &Path, raw: &str) -> Result<PathBuf, ConfineError> {
    let comps: Vec<Component<'_>> = abs.components().collect();
    // Find the longest prefix that exists (without following a final symlink).
    let mut split = 0;
    let mut prefix = PathBuf::new();
    for (i, c) in comps.iter().enumerate() {
        prefix.push(c.as_os_str());
        if std::fs::symlink_metadata(&prefix).is_ok() {
            split = i + 1;
        } else {
            break;
        }
    }
    let existing: PathBuf = comps[..split].iter().map(|c| c.as_os_str()).collect();
    let mut resolved = match std::fs::canonicalize(&existing) {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ConfineError::DanglingSymlink {
                raw: raw.to_string(),
                link: existing.display().to_string(),
            })
        }
        Err(e) => {
            return Err(ConfineError::Io {
                raw: raw.to_string(),
                error: e.to_string(),
            })
        }
    };
    for c in &comps[split..] {
        match c {
            Component::Normal(n) => resolved.push(n),
            Component::ParentDir => {
                resolved.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    Ok(resolved)
}

/// Writes `bytes` to `path` through a temp file in the same directory and a rename.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let parent = path.parent().unwrap_or_else(|| Path::new("/"));
    std::fs::create_dir_all(parent)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = parent.join(format!(
        ".{name}.reasonix-{:016x}.tmp",
        rand::random::<u64>()
    ));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        if let Ok(meta) = std::fs::metadata(path) {
            f.set_permissions(meta.permissions())?;
        }
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
