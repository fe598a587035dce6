//! Putting covered paths back: what a command created there is moved out of the way (kept
//! in the quarantine directory, never deleted outright), what it changed or deleted is
//! rewritten from the snapshot taken before it ran, and changed permission bits, owners and
//! times are set back.
//!
//! Paths are handled parents first, each looked at afresh when its turn comes, so a
//! directory replaced by a symlink is fixed before anything below it is read through it.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::snapshot::{observe, Capture, Entry, Kind, Snapshot};

/// Seconds of slack between the system clock and file timestamps.
const CLOCK_MARGIN_SECS: i64 = 2;

/// What a command did to one covered path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The path did not exist before.
    Created,
    /// Its content, kind or symlink target changed.
    Modified,
    /// It was removed (or moved away).
    Deleted,
    /// Only its permission bits, owner or modification time changed.
    Metadata,
}

impl Change {
    /// The verb the reports use.
    pub fn verb(self) -> &'static str {
        match self {
            Change::Created => "created",
            Change::Modified => "modified",
            Change::Deleted => "deleted",
            Change::Metadata => "changed the permissions or times of",
        }
    }
}

/// One change found and what was done about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undone {
    /// The covered path (absolute).
    pub path: PathBuf,
    /// What the command did.
    pub change: Change,
    /// Index of the rule covering it.
    pub rule: usize,
    /// Where the command's version was moved (created or modified paths).
    pub kept_at: Option<PathBuf>,
    /// Why it could not be undone, when it could not.
    pub failed: Option<String>,
}

/// Where the command's versions of covered paths go: `<root>/<time>-<random>/<path>`
/// (workspace-relative inside the workspace, `abs/<path>` elsewhere), created on first use.
pub(super) struct Quarantine<'a> {
    root: &'a Path,
    workspace: Option<&'a Path>,
    batch: Option<PathBuf>,
}

impl<'a> Quarantine<'a> {
    pub fn new(root: &'a Path, workspace: Option<&'a Path>) -> Self {
        Quarantine {
            root,
            workspace,
            batch: None,
        }
    }

    /// The batch directory, when anything was kept.
    pub fn batch(&self) -> Option<&Path> {
        self.batch.as_deref()
    }

    fn destination(&mut self, path: &Path) -> std::io::Result<PathBuf> {
        let batch = match &self.batch {
            Some(b) => b.clone(),
            None => {
                let secs = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs();
                let b = self
                    .root
                    .join(format!("{secs}-{:08x}", rand::random::<u32>()));
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&b)?;
                prune_batches(self.root, secs);
                self.batch = Some(b.clone());
                b
            }
        };
        let rel = match self.workspace.and_then(|w| path.strip_prefix(w).ok()) {
            Some(r) => r.to_path_buf(),
            None => Path::new("abs").join(path.strip_prefix("/").unwrap_or(path)),
        };
        let dest = batch.join(rel);
        if let Some(parent) = dest.parent() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)?;
        }
        Ok(dest)
    }

    /// Moves `path` (whatever it is) into the batch; across filesystems it is copied and
    /// then removed. Returns where it went; when it could not be kept it is removed all the
    /// same (a denied write never stays) and the error says why it was not kept.
    fn keep(&mut self, path: &Path) -> Result<PathBuf, String> {
        let dest = self.destination(path).map_err(|e| {
            let _ = remove_any(path);
            format!("could not be kept ({e}); removed")
        })?;
        match fs::rename(path, &dest) {
            Ok(()) => Ok(dest),
            Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                let copied = copy_any(path, &dest);
                remove_any(path).map_err(|e| format!("could not be removed: {e}"))?;
                copied
                    .map(|()| dest)
                    .map_err(|e| format!("could not be kept ({e}); removed"))
            }
            Err(e) => {
                remove_any(path)
                    .map_err(|e2| format!("could not be moved ({e}) or removed ({e2})"))?;
                Err(format!("could not be kept ({e}); removed"))
            }
        }
    }
}

/// How long the command's versions of undone writes are kept.
pub const KEEP_SECS: u64 = 7 * 24 * 3600;

/// Removes the batches under `root` older than [`KEEP_SECS`] at `now` (named
/// `<seconds>-<random>`; anything else is left alone).
fn prune_batches(root: &Path, now: u64) {
    let Ok(rd) = fs::read_dir(root) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let secs = name
            .to_str()
            .and_then(|n| n.split_once('-'))
            .and_then(|(s, _)| s.parse::<u64>().ok());
        if secs.is_some_and(|s| s + KEEP_SECS < now) {
            if let Err(err) = fs::remove_dir_all(e.path()) {
                tracing::warn!(path = %e.path().display(), %err, "cannot prune kept denied writes");
            }
        }
    }
}

fn remove_any(path: &Path) -> std::io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn copy_any(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = fs::symlink_metadata(from)?;
    if meta.is_dir() {
        fs::DirBuilder::new().mode(0o700).create(to)?;
        for e in fs::read_dir(from)? {
            let e = e?;
            copy_any(&e.path(), &to.join(e.file_name()))?;
        }
        Ok(())
    } else if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(fs::read_link(from)?, to)
    } else if meta.is_file() {
        fs::copy(from, to).map(|_| ())
    } else {
        // FIFOs, sockets and devices are not worth keeping.
        Ok(())
    }
}

/// Sets the modification time of `path` (not following a final symlink), leaving the access
/// time alone. Needs ownership, not write permission.
fn set_mtime(path: &Path, (secs, nanos): (i64, i64)) -> std::io::Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let times = [
        libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        libc::timespec {
            tv_sec: secs as _,
            tv_nsec: nanos as libc::c_long,
        },
    ];
    // SAFETY: `c` is a valid NUL-terminated path and `times` two valid timespecs.
    let rc = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Sets the owner (best effort: only root may give a file away), permission bits and, for
/// files, the modification time of `path` to `old`'s.
fn set_metadata(path: &Path, old: &Entry) -> std::io::Result<()> {
    if matches!(old.kind, Kind::Symlink(_)) {
        let _ = std::os::unix::fs::lchown(path, Some(old.uid), Some(old.gid));
        return Ok(());
    }
    // chown first: it may clear set-id bits, which the mode then puts back.
    let _ = std::os::unix::fs::chown(path, Some(old.uid), Some(old.gid));
    fs::set_permissions(path, fs::Permissions::from_mode(old.mode))?;
    if let Kind::File(_) = old.kind {
        set_mtime(path, old.mtime)?;
    }
    Ok(())
}

/// Writes `old` at `path` (which must not exist): a directory (permission bits set at the
/// end, so its restored children can be written first), a file (through a temporary name
/// and a rename) or a symlink.
fn recreate(path: &Path, old: &Entry, dir_modes: &mut Vec<(PathBuf, Entry)>) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| format!("its directory cannot be made: {e}"))?;
    }
    match &old.kind {
        Kind::Dir => {
            fs::DirBuilder::new()
                .mode(0o700)
                .create(path)
                .map_err(|e| e.to_string())?;
            dir_modes.push((path.to_path_buf(), old.clone()));
            Ok(())
        }
        Kind::Symlink(target) => {
            std::os::unix::fs::symlink(target, path).map_err(|e| e.to_string())?;
            let _ = set_metadata(path, old);
            Ok(())
        }
        Kind::File(Some(bytes)) => {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let tmp = path.with_file_name(format!(
                ".{name}.reasonix-restore-{:08x}",
                rand::random::<u32>()
            ));
            let written = (|| -> std::io::Result<()> {
                let mut f = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&tmp)?;
                f.write_all(bytes)?;
                f.sync_all()?;
                drop(f);
                set_metadata(&tmp, old)?;
                fs::rename(&tmp, path)
            })();
            if let Err(e) = written {
                let _ = fs::remove_file(&tmp);
                return Err(e.to_string());
            }
            Ok(())
        }
        Kind::File(None) => Err(format!(
            "it was over {} MiB, so its content was not kept",
            super::snapshot::MAX_FILE_BYTES / (1024 * 1024)
        )),
        Kind::Other => Err("a FIFO, socket or device cannot be recreated".into()),
    }
}

/// Compares `before` with the covered paths now (`after` found the new ones) and undoes
/// every difference. Returns one item per changed path, parents first.
pub(super) fn undo(
    before: &Snapshot,
    after: &Snapshot,
    quarantine: &mut Quarantine<'_>,
) -> Vec<Undone> {
    let paths: BTreeSet<&PathBuf> = before.entries.keys().chain(after.entries.keys()).collect();
    let mut out = Vec::new();
    let mut dir_modes: Vec<(PathBuf, Entry)> = Vec::new();
    let mut moved: Vec<PathBuf> = Vec::new();
    for path in paths {
        let old = before.entries.get(path);
        let rule = old
            .or_else(|| after.entries.get(path))
            .map(|e| e.rule)
            .unwrap_or(0);
        // Looked at now: an earlier fix (a parent put back) may have changed what is here.
        let mut no_budget = 0;
        let now = observe(path, rule, Capture::MetadataOnly, &mut no_budget);
        let item = |change: Change, kept_at: Option<PathBuf>, failed: Option<String>| Undone {
            path: path.clone(),
            change,
            rule,
            kept_at,
            failed,
        };
        match (old, now) {
            (None, None) => {}
            (None, Some(now)) => {
                // Inside a directory already moved away, it went with it.
                if moved.iter().any(|m| path.starts_with(m)) {
                    continue;
                }
                // A walk cut short may simply not have reached it before: only a path whose
                // status changed since then (with a margin for the coarse file clock) can
                // be the command's.
                if before.partial && now.ctime.0 < before.started - CLOCK_MARGIN_SECS {
                    continue;
                }
                match quarantine.keep(path) {
                    Ok(at) => {
                        moved.push(path.clone());
                        out.push(item(Change::Created, Some(at), None));
                    }
                    Err(why) => out.push(item(Change::Created, None, Some(why))),
                }
            }
            (Some(old), None) => {
                let failed = recreate(path, old, &mut dir_modes).err();
                out.push(item(Change::Deleted, None, failed));
            }
            (Some(old), Some(now)) => match old.same_content(&now, path) {
                Some(true) if old.same_metadata(&now) => {}
                Some(true) => {
                    let failed = if old.kind == Kind::Dir {
                        dir_modes.push((path.clone(), old.clone()));
                        None
                    } else {
                        set_metadata(path, old).err().map(|e| e.to_string())
                    };
                    out.push(item(Change::Metadata, None, failed));
                }
                Some(false) => {
                    let kept = quarantine.keep(path);
                    let failed = recreate(path, old, &mut dir_modes).err();
                    let (kept_at, why_not_kept) = match kept {
                        Ok(at) => {
                            moved.push(path.clone());
                            (Some(at), None)
                        }
                        Err(why) => (None, Some(why)),
                    };
                    out.push(item(Change::Modified, kept_at, failed.or(why_not_kept)));
                }
                None => out.push(item(
                    Change::Modified,
                    None,
                    Some(format!(
                        "it was over {} MiB, so its content was not kept to restore; left as the command wrote it",
                        super::snapshot::MAX_FILE_BYTES / (1024 * 1024)
                    )),
                )),
            },
        }
    }
    // Deepest first, so a directory made read-only again does not stop its parent's fix.
    for (path, old) in dir_modes.iter().rev() {
        if let Err(e) = set_metadata(path, old) {
            tracing::warn!(path = %path.display(), error = %e, "restoring a directory's mode failed");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may unwrap
    use super::*;

    fn snap_of(paths: &[&Path], partial: bool, started: i64) -> Snapshot {
        let mut s = Snapshot {
            partial,
            started,
            ..Snapshot::default()
        };
        let mut budget = u64::MAX;
        for p in paths {
            if let Some(e) = observe(p, 0, Capture::Content, &mut budget) {
                s.entries.insert(p.to_path_buf(), e);
            }
        }
        s
    }

    #[test]
    fn a_path_a_partial_walk_missed_is_not_taken_for_new() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("ws");
        let q = d.path().join("q");
        std::fs::create_dir_all(&ws).unwrap();
        let old = ws.join("old.env");
        std::fs::write(&old, "x").unwrap();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let after = snap_of(&[&old], false, now);
        // The walk before started long after the file last changed, and missed it.
        let before = snap_of(&[], true, now + 60);
        let mut quarantine = Quarantine::new(&q, Some(&ws));
        assert!(undo(&before, &after, &mut quarantine).is_empty());
        assert!(old.exists());
        // A complete walk that did not see it means the command made it.
        let before = snap_of(&[], false, now + 60);
        let done = undo(&before, &after, &mut quarantine);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].change, Change::Created);
        assert!(!old.exists());
        let kept = done[0].kept_at.clone().unwrap();
        assert!(
            kept.starts_with(&q) && kept.ends_with("old.env"),
            "{kept:?}"
        );
        assert_eq!(std::fs::read_to_string(kept).unwrap(), "x");
    }

    #[test]
    fn old_batches_are_pruned_when_a_new_one_starts() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("q");
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let old = root.join(format!("{}-00000000", now - KEEP_SECS - 10));
        let recent = root.join(format!("{}-00000001", now - 60));
        let other = root.join("notes");
        for p in [&old, &recent, &other] {
            std::fs::create_dir_all(p.join("x")).unwrap();
        }
        let ws = d.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("new.env"), "x").unwrap();
        let mut q = Quarantine::new(&root, Some(&ws));
        q.keep(&ws.join("new.env")).unwrap();
        assert!(!old.exists() && recent.exists() && other.exists());
    }

    #[test]
    fn a_file_whose_bytes_were_not_kept_is_reported_and_left_alone() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let big = ws.join("big");
        std::fs::write(&big, "before").unwrap();
        let mut budget = 0;
        let mut before = Snapshot::default();
        before.entries.insert(
            big.clone(),
            observe(&big, 0, Capture::Content, &mut budget).unwrap(),
        );
        assert!(matches!(before.entries[&big].kind, Kind::File(None)));
        std::fs::write(&big, "after!!").unwrap();
        let q = d.path().join("q");
        let mut quarantine = Quarantine::new(&q, Some(&ws));
        let done = undo(&before, &Snapshot::default(), &mut quarantine);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].change, Change::Modified);
        assert!(done[0].failed.as_deref().unwrap().contains("not kept"));
        assert_eq!(std::fs::read_to_string(&big).unwrap(), "after!!");
        // A chmod alone of such a file is set back.
        std::fs::write(&big, "before").unwrap();
        let mut before = Snapshot::default();
        before.entries.insert(
            big.clone(),
            observe(&big, 0, Capture::Content, &mut budget).unwrap(),
        );
        std::fs::set_permissions(&big, fs::Permissions::from_mode(0o600)).unwrap();
        let done = undo(&before, &Snapshot::default(), &mut quarantine);
        assert_eq!(done.len(), 1, "{done:?}");
        assert_eq!(done[0].change, Change::Metadata);
        assert!(done[0].failed.is_none());
        assert_eq!(
            fs::metadata(&big).unwrap().permissions().mode() & 0o777,
            before.entries[&big].mode
        );
    }
}
