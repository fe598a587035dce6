//! Code restore as one transaction: every operation is checked and every byte it will write is
//! staged in the state directory first; only then is the workspace touched. Each applied step
//! is recorded, and on the first failure the recorded steps are undone in reverse order, so a
//! failed restore leaves the workspace as it was.
//!
//! Replaced and deleted files are not removed while the transaction runs: they are renamed
//! aside (same directory, so the rename cannot cross filesystems) and only deleted at commit.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use super::CheckpointError;

/// Where the bytes of a restored file come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// A blob of the shadow repository (staged with `git cat-file` before applying).
    Git(String),
    /// A file already on disk (the hook blob store).
    File(PathBuf),
}

/// The mode a written file gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ModeSpec {
    /// Exactly this (from a hook record).
    Exact(u32),
    /// Git only knows "executable or not": keep the current file's other bits.
    Exec(bool),
}

/// One planned change, on a workspace-relative path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// Remove a file or symlink.
    Delete { rel: Vec<u8> },
    /// Write a regular file.
    WriteFile {
        rel: Vec<u8>,
        source: Source,
        mode: ModeSpec,
    },
    /// Create a symlink (the source holds the target).
    WriteSymlink { rel: Vec<u8>, source: Source },
    /// Change the permission bits only.
    Chmod { rel: Vec<u8>, mode: ModeSpec },
}

impl Op {
    pub(crate) fn rel(&self) -> &[u8] {
        match self {
            Op::Delete { rel }
            | Op::WriteFile { rel, .. }
            | Op::WriteSymlink { rel, .. }
            | Op::Chmod { rel, .. } => rel,
        }
    }
}

/// A fully checked and staged operation.
#[derive(Debug)]
enum Ready {
    Delete {
        path: PathBuf,
    },
    Write {
        path: PathBuf,
        staged: PathBuf,
        mode: u32,
        symlink: bool,
    },
    Chmod {
        path: PathBuf,
        mode: u32,
    },
}

/// Everything needed to apply, checked against the disk.
#[derive(Debug)]
pub(crate) struct Prepared {
    ready: Vec<Ready>,
    /// Directories in the way of a file write that hold nothing but files being deleted.
    clear_dirs: Vec<PathBuf>,
    staging: PathBuf,
    tx: String,
}

/// A step already applied, with what undoes it.
#[derive(Debug)]
enum Done {
    Aside { orig: PathBuf, aside: PathBuf },
    Created { path: PathBuf },
    Chmod { path: PathBuf, old: u32 },
    MadeDir { path: PathBuf },
    RemovedDir { path: PathBuf, mode: u32 },
}

/// Writes the given shadow blobs to the given files.
pub(crate) type ReadGit<'a> = dyn Fn(&[String], &[PathBuf]) -> Result<(), CheckpointError> + 'a;

/// Checks a workspace-relative path: plain components only, never into a `.git` directory.
pub(crate) fn check_rel(rel: &[u8]) -> Result<(), CheckpointError> {
    let shown = || String::from_utf8_lossy(rel).into_owned();
    if rel.is_empty() {
        return Err(CheckpointError::Refused {
            path: shown(),
            reason: "empty path".into(),
        });
    }
    for c in Path::new(OsStr::from_bytes(rel)).components() {
        match c {
            Component::Normal(name) => {
                if name.as_bytes().eq_ignore_ascii_case(b".git") {
                    return Err(CheckpointError::Refused {
                        path: shown(),
                        reason: "paths inside a .git directory are never restored".into(),
                    });
                }
            }
            Component::RootDir
            | Component::Prefix(_)
            | Component::ParentDir
            | Component::CurDir => {
                return Err(CheckpointError::Refused {
                    path: shown(),
                    reason: "the path escapes the workspace".into(),
                });
            }
        }
    }
    Ok(())
}

/// Checks every operation against the disk and stages the content, without changing the
/// workspace. `read_git` writes the given blobs to the given files.
pub(crate) fn prepare(
    workspace: &Path,
    staging: &Path,
    ops: &[Op],
    read_git: &ReadGit<'_>,
) -> Result<Prepared, CheckpointError> {
    fs::create_dir_all(staging).map_err(|e| CheckpointError::io(staging, e))?;
    let deleted: BTreeSet<Vec<u8>> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Delete { rel } => Some(rel.clone()),
            _ => None,
        })
        .collect();
    let mut git_shas = Vec::new();
    let mut git_dests = Vec::new();
    let mut ready = Vec::new();
    let mut clear_dirs = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let rel = op.rel();
        check_rel(rel)?;
        check_ancestors(workspace, rel, &deleted)?;
        let path = workspace.join(OsStr::from_bytes(rel));
        let shown = String::from_utf8_lossy(rel).into_owned();
        let current = fs::symlink_metadata(&path).ok();
        let mut stage = |source: &Source| -> Result<PathBuf, CheckpointError> {
            match source {
                Source::Git(sha) => {
                    let dest = staging.join(format!("{i}"));
                    git_shas.push(sha.clone());
                    git_dests.push(dest.clone());
                    Ok(dest)
                }
                Source::File(p) => {
                    if p.is_file() {
                        Ok(p.clone())
                    } else {
                        Err(CheckpointError::Conflict {
                            path: shown.clone(),
                            reason: format!("its saved content {} is missing", p.display()),
                        })
                    }
                }
            }
        };
        match op {
            Op::Delete { .. } => match &current {
                None => {}
                Some(m) if m.is_dir() => {
                    return Err(CheckpointError::Conflict {
                        path: shown,
                        reason: "expected a file to remove, found a directory".into(),
                    })
                }
                Some(_) => ready.push(Ready::Delete { path }),
            },
            Op::WriteFile { source, mode, .. } => {
                if let Some(m) = &current {
                    if m.is_dir() {
                        ensure_clearable(workspace, &path, &deleted)?;
                        clear_dirs.push(path.clone());
                    }
                }
                let staged = stage(source)?;
                let mode = resolve_mode(*mode, current.as_ref());
                ready.push(Ready::Write {
                    path,
                    staged,
                    mode,
                    symlink: false,
                });
            }
            Op::WriteSymlink { source, .. } => {
                if let Some(m) = &current {
                    if m.is_dir() {
                        ensure_clearable(workspace, &path, &deleted)?;
                        clear_dirs.push(path.clone());
                    }
                }
                let staged = stage(source)?;
                ready.push(Ready::Write {
                    path,
                    staged,
                    mode: 0o777,
                    symlink: true,
                });
            }
            Op::Chmod { mode, .. } => match &current {
                Some(m) if m.is_file() => {
                    let mode = resolve_mode(*mode, current.as_ref());
                    ready.push(Ready::Chmod { path, mode });
                }
                _ => {
                    return Err(CheckpointError::Conflict {
                        path: shown,
                        reason: "expected a regular file to change the mode of".into(),
                    })
                }
            },
        }
    }
    read_git(&git_shas, &git_dests)?;
    // Apply order: deletes, then writes (parents before children), then mode changes.
    reasonix_forward::sort::sort_by_key(&mut ready, rank);
    Ok(Prepared {
        ready,
        clear_dirs,
        staging: staging.to_path_buf(),
        tx: tx_id(),
    })
}

fn rank(r: &Ready) -> (u8, PathBuf) {
    match r {
        Ready::Delete { path } => (0, path.clone()),
        Ready::Write { path, .. } => (1, path.clone()),
        Ready::Chmod { path, .. } => (2, path.clone()),
    }
}

fn resolve_mode(spec: ModeSpec, current: Option<&fs::Metadata>) -> u32 {
    match spec {
        ModeSpec::Exact(m) => m & 0o7777,
        ModeSpec::Exec(exec) => {
            let base = match current {
                Some(m) if m.is_file() => m.permissions().mode() & 0o7777,
                _ => {
                    if exec {
                        return 0o755;
                    }
                    return 0o644;
                }
            };
            if exec {
                // Like `chmod +x` for whoever may read it.
                base | ((base & 0o444) >> 2)
            } else {
                base & !0o111
            }
        }
    }
}

/// Every existing ancestor of `rel` must be a real directory, unless the plan deletes it
/// first (then the rest of the path will be created fresh).
fn check_ancestors(
    workspace: &Path,
    rel: &[u8],
    deleted: &BTreeSet<Vec<u8>>,
) -> Result<(), CheckpointError> {
    let rel_path = Path::new(OsStr::from_bytes(rel));
    let mut acc = PathBuf::new();
    let comps: Vec<_> = rel_path.components().collect();
    for c in comps.iter().take(comps.len().saturating_sub(1)) {
        acc.push(c);
        let full = workspace.join(&acc);
        match fs::symlink_metadata(&full) {
            Err(_) => return Ok(()),
            Ok(m) if m.is_dir() => {}
            Ok(m) => {
                if deleted.contains(acc.as_os_str().as_bytes()) {
                    return Ok(());
                }
                let reason = if m.file_type().is_symlink() {
                    format!(
                        "{} is a symlink; restores never pass through symlinks",
                        acc.display()
                    )
                } else {
                    format!("{} is a file where a directory is needed", acc.display())
                };
                return Err(if m.file_type().is_symlink() {
                    CheckpointError::Refused {
                        path: String::from_utf8_lossy(rel).into_owned(),
                        reason,
                    }
                } else {
                    CheckpointError::Conflict {
                        path: String::from_utf8_lossy(rel).into_owned(),
                        reason,
                    }
                });
            }
        }
    }
    Ok(())
}

/// A directory where a file must go may be removed only if everything in it is being
/// deleted by the same plan (what is left are empty directories).
fn ensure_clearable(
    workspace: &Path,
    dir: &Path,
    deleted: &BTreeSet<Vec<u8>>,
) -> Result<(), CheckpointError> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = fs::read_dir(&d).map_err(|e| CheckpointError::io(&d, e))?;
        for e in rd.flatten() {
            let p = e.path();
            let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
            if is_dir {
                stack.push(p);
                continue;
            }
            let rel = p.strip_prefix(workspace).unwrap_or(&p);
            if !deleted.contains(rel.as_os_str().as_bytes()) {
                return Err(CheckpointError::Conflict {
                    path: dir
                        .strip_prefix(workspace)
                        .unwrap_or(dir)
                        .display()
                        .to_string(),
                    reason: format!(
                        "a directory is where a file must be restored, and it holds {} which is not part of the checkpoint",
                        rel.display()
                    ),
                });
            }
        }
    }
    Ok(())
}

fn tx_id() -> String {
    format!("{:08x}", rand::random::<u32>())
}

/// Applies a prepared plan. On failure everything applied is undone and the error says
/// whether the undo was complete.
pub(crate) fn apply(workspace: &Path, prepared: Prepared) -> Result<(), CheckpointError> {
    let mut done = Vec::new();
    let result = apply_steps(workspace, &prepared, &mut done);
    match result {
        Ok(()) => {
            commit(workspace, &done);
            let _ = fs::remove_dir_all(&prepared.staging);
            Ok(())
        }
        Err((path, source)) => {
            let rollback_errors = rollback(done);
            let _ = fs::remove_dir_all(&prepared.staging);
            Err(CheckpointError::RestoreFailed {
                path: path
                    .strip_prefix(workspace)
                    .unwrap_or(&path)
                    .display()
                    .to_string(),
                source,
                rollback_errors,
            })
        }
    }
}

fn apply_steps(
    workspace: &Path,
    p: &Prepared,
    done: &mut Vec<Done>,
) -> Result<(), (PathBuf, io::Error)> {
    let mut n = 0usize;
    let mut aside_name = |path: &Path| -> PathBuf {
        n += 1;
        // Next to the file (same filesystem, so a rename), except inside a directory that
        // must be removed to make room for a file: then next to that directory.
        let dir = p
            .clear_dirs
            .iter()
            .find(|d| path.starts_with(d))
            .and_then(|d| d.parent())
            .or_else(|| path.parent())
            .unwrap_or(workspace);
        dir.join(format!(".rxrw-{}-{n}", p.tx))
    };
    let mut deletes_done = false;
    for r in &p.ready {
        if !deletes_done && !matches!(r, Ready::Delete { .. }) {
            deletes_done = true;
            for dir in &p.clear_dirs {
                clear_dir(dir, done).map_err(|e| (dir.clone(), e))?;
            }
        }
        match r {
            Ready::Delete { path } => {
                verify_parent(workspace, path)?;
                let aside = aside_name(path);
                fs::rename(path, &aside).map_err(|e| (path.clone(), e))?;
                done.push(Done::Aside {
                    orig: path.clone(),
                    aside,
                });
            }
            Ready::Write {
                path,
                staged,
                mode,
                symlink,
            } => {
                make_parents(workspace, path, done)?;
                verify_parent(workspace, path)?;
                let tmp = aside_name(path);
                let made = if *symlink {
                    fs::read(staged).and_then(|target| {
                        std::os::unix::fs::symlink(OsStr::from_bytes(&target), &tmp)
                    })
                } else {
                    write_temp(staged, &tmp, *mode)
                };
                if let Err(e) = made {
                    let _ = fs::remove_file(&tmp);
                    return Err((path.clone(), e));
                }
                if fs::symlink_metadata(path).is_ok() {
                    let aside = aside_name(path);
                    if let Err(e) = fs::rename(path, &aside) {
                        let _ = fs::remove_file(&tmp);
                        return Err((path.clone(), e));
                    }
                    done.push(Done::Aside {
                        orig: path.clone(),
                        aside,
                    });
                }
                if let Err(e) = fs::rename(&tmp, path) {
                    let _ = fs::remove_file(&tmp);
                    return Err((path.clone(), e));
                }
                done.push(Done::Created { path: path.clone() });
            }
            Ready::Chmod { path, mode } => {
                verify_parent(workspace, path)?;
                let old = fs::symlink_metadata(path)
                    .map_err(|e| (path.clone(), e))?
                    .permissions()
                    .mode()
                    & 0o7777;
                fs::set_permissions(path, fs::Permissions::from_mode(*mode))
                    .map_err(|e| (path.clone(), e))?;
                done.push(Done::Chmod {
                    path: path.clone(),
                    old,
                });
            }
        }
    }
    if !deletes_done {
        for dir in &p.clear_dirs {
            clear_dir(dir, done).map_err(|e| (dir.clone(), e))?;
        }
    }
    Ok(())
}

/// Re-checks at apply time that no ancestor became a symlink since the plan was made.
fn verify_parent(workspace: &Path, path: &Path) -> Result<(), (PathBuf, io::Error)> {
    let rel = path.strip_prefix(workspace).unwrap_or(path);
    let mut acc = workspace.to_path_buf();
    let comps: Vec<_> = rel.components().collect();
    for c in comps.iter().take(comps.len().saturating_sub(1)) {
        acc.push(c);
        match fs::symlink_metadata(&acc) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err((
                    path.to_path_buf(),
                    io::Error::other(format!("{} became a symlink", acc.display())),
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

fn make_parents(
    workspace: &Path,
    path: &Path,
    done: &mut Vec<Done>,
) -> Result<(), (PathBuf, io::Error)> {
    let rel = path.strip_prefix(workspace).unwrap_or(path);
    let mut acc = workspace.to_path_buf();
    let comps: Vec<_> = rel.components().collect();
    for c in comps.iter().take(comps.len().saturating_sub(1)) {
        acc.push(c);
        match fs::symlink_metadata(&acc) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err((
                    acc.clone(),
                    io::Error::other("a file is in the way of a directory"),
                ))
            }
            Err(_) => {
                fs::DirBuilder::new()
                    .mode(0o755)
                    .create(&acc)
                    .map_err(|e| (acc.clone(), e))?;
                done.push(Done::MadeDir { path: acc.clone() });
            }
        }
    }
    Ok(())
}

use std::os::unix::fs::DirBuilderExt;

fn write_temp(staged: &Path, tmp: &Path, mode: u32) -> io::Result<()> {
    let mut src = fs::File::open(staged)?;
    let mut dst = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(tmp)?;
    io::copy(&mut src, &mut dst)?;
    // fchmod, so the umask does not bite.
    dst.set_permissions(fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// Removes the (now empty) directory tree at `dir`, bottom-up, recording each removal.
fn clear_dir(dir: &Path, done: &mut Vec<Done>) -> io::Result<()> {
    let mut order = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d)?.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                stack.push(e.path());
            }
        }
        order.push(d);
    }
    for d in order.into_iter().rev() {
        let mode = fs::symlink_metadata(&d)?.permissions().mode() & 0o7777;
        fs::remove_dir(&d)?;
        done.push(Done::RemovedDir { path: d, mode });
    }
    Ok(())
}

fn rollback(done: Vec<Done>) -> Vec<String> {
    let mut errors = Vec::new();
    for step in done.into_iter().rev() {
        let r = match &step {
            Done::Created { path } => fs::remove_file(path),
            Done::Aside { orig, aside } => fs::rename(aside, orig),
            Done::Chmod { path, old } => {
                fs::set_permissions(path, fs::Permissions::from_mode(*old))
            }
            Done::MadeDir { path } => fs::remove_dir(path),
            Done::RemovedDir { path, mode } => fs::DirBuilder::new()
                .mode(*mode)
                .create(path)
                .and_then(|_| fs::set_permissions(path, fs::Permissions::from_mode(*mode))),
        };
        if let Err(e) = r {
            errors.push(format!("{step:?}: {e}"));
        }
    }
    errors
}

/// Drops the set-aside originals and the directories our deletes left empty.
fn commit(workspace: &Path, done: &[Done]) {
    let mut emptied: BTreeMap<usize, BTreeSet<PathBuf>> = BTreeMap::new();
    let created: BTreeSet<&Path> = done
        .iter()
        .filter_map(|d| match d {
            Done::Created { path } => Some(path.as_path()),
            _ => None,
        })
        .collect();
    for d in done {
        if let Done::Aside { orig, aside } = d {
            let _ = fs::remove_file(aside);
            if !created.contains(orig.as_path()) {
                if let Some(parent) = orig.parent() {
                    emptied
                        .entry(parent.components().count())
                        .or_default()
                        .insert(parent.to_path_buf());
                }
            }
        }
    }
    // Deepest first; `remove_dir` only succeeds on empty directories, and we stop at the root.
    let mut levels: Vec<_> = emptied.into_iter().collect();
    reasonix_forward::sort::sort_by_key(&mut levels, |l| std::cmp::Reverse(l.0));
    let mut seen = BTreeSet::new();
    for (_, dirs) in levels {
        for mut dir in dirs {
            while dir != workspace && dir.starts_with(workspace) && seen.insert(dir.clone()) {
                if fs::remove_dir(&dir).is_err() {
                    break;
                }
                match dir.parent() {
                    Some(p) => dir = p.to_path_buf(),
                    None => break,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rel_paths_are_checked() {
        assert!(check_rel(b"a/b.txt").is_ok());
        assert!(check_rel(b"../x").is_err());
        assert!(check_rel(b"/etc/passwd").is_err());
        assert!(check_rel(b"a/../../x").is_err());
        assert!(check_rel(b".git/config").is_err());
        assert!(check_rel(b"sub/.GIT/HEAD").is_err());
        assert!(check_rel(b"").is_err());
    }

    #[test]
    fn exec_bit_follows_read_bits() {
        assert_eq!(resolve_mode(ModeSpec::Exec(true), None), 0o755);
        assert_eq!(resolve_mode(ModeSpec::Exec(false), None), 0o644);
        assert_eq!(resolve_mode(ModeSpec::Exact(0o100600), None), 0o600);
    }
}
