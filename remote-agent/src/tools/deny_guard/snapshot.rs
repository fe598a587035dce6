//! What the covered paths hold: a bounded walk of the places a deny rule's paths can be, and
//! the state of every covered entry found there (kind, permission bits, owner, times, the
//! bytes of a file, a symlink's target).
//!
//! The walk never follows symlinks and never honours `.gitignore` (secrets are usually
//! ignored files); it skips the generated and vendored directories the walkers skip
//! (`.git`, `node_modules`, `target`, ...) below its starting points, and the daemon's own
//! state directory.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::policy::WriteDenyRules;
use crate::tools::search::LS_SKIP_DIRS;

use super::scope::Scope;

/// Directory entries one walk looks at before it stops (the rest is not checked, and the
/// report says so).
pub const MAX_WALK_ENTRIES: usize = 100_000;
/// Bytes of one covered file kept to restore it; a bigger file is watched by its metadata
/// only (under the sandbox it is read-only anyway).
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// Bytes of covered files kept in all by one snapshot.
pub const MAX_TOTAL_BYTES: u64 = 64 * 1024 * 1024;

/// The kind of a covered entry, with what is needed to put it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Kind {
    /// A regular file; its bytes when they were within the caps.
    File(Option<Arc<Vec<u8>>>),
    /// A directory.
    Dir,
    /// A symlink and its target.
    Symlink(PathBuf),
    /// A FIFO, socket or device node (watched, never recreated).
    Other,
}

/// The state of one covered entry.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub kind: Kind,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
    /// Index of the first rule covering it.
    pub rule: usize,
}

impl Entry {
    /// Same file content (or target) as `other`, deciding by metadata when nothing changed
    /// and by bytes otherwise. `None` when it cannot be told (no bytes were kept).
    pub fn same_content(&self, other: &Entry, path: &Path) -> Option<bool> {
        match (&self.kind, &other.kind) {
            (Kind::Dir, Kind::Dir) | (Kind::Other, Kind::Other) => Some(true),
            (Kind::Symlink(a), Kind::Symlink(b)) => Some(a == b),
            (Kind::File(old), Kind::File(_)) => {
                if (self.dev, self.ino, self.size, self.mtime, self.ctime)
                    == (other.dev, other.ino, other.size, other.mtime, other.ctime)
                {
                    return Some(true);
                }
                let Some(old) = old.as_ref() else {
                    // No bytes to compare: only a change of metadata alone (`chmod`, a new
                    // hard link) can be told apart from a write.
                    let same = (self.dev, self.ino, self.size, self.mtime)
                        == (other.dev, other.ino, other.size, other.mtime);
                    return same.then_some(true);
                };
                if self.size != other.size {
                    return Some(false);
                }
                Some(read_bounded(path, self.size).is_some_and(|now| now == **old))
            }
            _ => Some(false),
        }
    }

    /// Same permission bits, owner and modification time.
    pub fn same_metadata(&self, other: &Entry) -> bool {
        let dir = matches!(self.kind, Kind::Dir);
        // A directory's mtime moves whenever an entry in it does; its covered entries are
        // checked one by one instead.
        (self.mode, self.uid, self.gid) == (other.mode, other.uid, other.gid)
            && (dir || matches!(self.kind, Kind::Symlink(_)) || self.mtime == other.mtime)
    }
}

/// The covered entries found by one walk.
#[derive(Debug, Default)]
pub(super) struct Snapshot {
    /// By absolute path; parents sort before their children.
    pub entries: BTreeMap<PathBuf, Entry>,
    /// True when the walk stopped at [`MAX_WALK_ENTRIES`].
    pub partial: bool,
    /// Entries looked at.
    pub visited: usize,
    /// Covered files whose bytes were not kept (over a cap).
    pub unkept: Vec<PathBuf>,
    /// When the walk started, in seconds since the epoch (a path missing from a partial
    /// walk is taken as new only if its status changed after this).
    pub started: i64,
}

/// Whether a walk keeps file bytes (to restore) or only metadata (to find changes and
/// mount points).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Capture {
    Content,
    MetadataOnly,
}

/// Reads at most `size + 1` bytes of the regular file `path` without following a final
/// symlink and without blocking on a FIFO put there meanwhile.
pub(super) fn read_bounded(path: &Path, size: u64) -> Option<Vec<u8>> {
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut out = Vec::with_capacity(size.min(MAX_FILE_BYTES) as usize);
    f.take(size.saturating_add(1)).read_to_end(&mut out).ok()?;
    Some(out)
}

/// The state of the entry at `path` now (not following a final symlink), or `None` when
/// there is none. `budget` is what may still be spent on file bytes.
pub(super) fn observe(
    path: &Path,
    rule: usize,
    capture: Capture,
    budget: &mut u64,
) -> Option<Entry> {
    let meta = fs::symlink_metadata(path).ok()?;
    let ft = meta.file_type();
    let kind = if ft.is_dir() {
        Kind::Dir
    } else if ft.is_symlink() {
        Kind::Symlink(fs::read_link(path).ok()?)
    } else if ft.is_file() {
        let keep =
            capture == Capture::Content && meta.len() <= MAX_FILE_BYTES && meta.len() <= *budget;
        let bytes = if keep {
            read_bounded(path, meta.len()).filter(|b| b.len() as u64 == meta.len())
        } else {
            None
        };
        if let Some(b) = &bytes {
            *budget -= b.len() as u64;
        }
        Kind::File(bytes.map(Arc::new))
    } else {
        Kind::Other
    };
    Some(Entry {
        kind,
        mode: meta.mode() & 0o7777,
        uid: meta.uid(),
        gid: meta.gid(),
        dev: meta.dev(),
        ino: meta.ino(),
        size: meta.len(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
        ctime: (meta.ctime(), meta.ctime_nsec()),
        rule,
    })
}

impl Snapshot {
    /// Walks `scope` and records every entry a rule covers.
    pub fn take(rules: &WriteDenyRules, scope: &Scope, capture: Capture) -> Snapshot {
        let mut snap = Snapshot {
            started: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0),
            ..Snapshot::default()
        };
        let mut budget = MAX_TOTAL_BYTES;
        for (root, depth) in scope.walks() {
            if snap.partial {
                break;
            }
            snap.walk(rules, scope, root, *depth, capture, &mut budget);
        }
        snap
    }

    fn record(
        &mut self,
        path: &Path,
        rule: usize,
        capture: Capture,
        budget: &mut u64,
    ) -> Option<bool> {
        let e = observe(path, rule, capture, budget)?;
        if capture == Capture::Content && matches!(e.kind, Kind::File(None)) {
            self.unkept.push(path.to_path_buf());
        }
        let is_dir = e.kind == Kind::Dir;
        self.entries.insert(path.to_path_buf(), e);
        Some(is_dir)
    }

    fn walk(
        &mut self,
        rules: &WriteDenyRules,
        scope: &Scope,
        root: &Path,
        depth: Option<usize>,
        capture: Capture,
        budget: &mut u64,
    ) {
        if scope.is_excluded(root) {
            return;
        }
        let Ok(meta) = fs::symlink_metadata(root) else {
            return;
        };
        if let Some(rule) = rules.covering(root) {
            if !self.entries.contains_key(root) {
                self.record(root, rule, capture, budget);
            }
        }
        if !meta.is_dir() {
            return;
        }
        let mut stack: Vec<(PathBuf, Option<usize>)> = vec![(root.to_path_buf(), depth)];
        while let Some((dir, left)) = stack.pop() {
            if left == Some(0) {
                continue;
            }
            let Ok(rd) = fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                self.visited += 1;
                if self.visited > MAX_WALK_ENTRIES {
                    self.partial = true;
                    return;
                }
                let path = e.path();
                let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
                if is_dir
                    && (LS_SKIP_DIRS.iter().any(|s| e.file_name() == *s)
                        || scope.is_excluded(&path))
                {
                    continue;
                }
                if let Some(rule) = rules.covering(&path) {
                    if !self.entries.contains_key(&path) {
                        self.record(&path, rule, capture, budget);
                    }
                }
                if is_dir {
                    stack.push((path, left.map(|l| l - 1)));
                }
            }
        }
    }

    /// The existing covered files and directories that a sandbox should make read-only for a
    /// command: inside the scope's writable roots (the rest of the filesystem is read-only
    /// already), a directory only when its whole subtree is covered (it then stands for
    /// everything below it), at most `max` paths. Symlinks and special files are left to
    /// the after-call check (a mount would follow the link).
    pub fn read_only_paths(
        &self,
        rules: &WriteDenyRules,
        scope: &Scope,
        max: usize,
    ) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        let mut whole: Vec<&Path> = Vec::new();
        for (path, e) in &self.entries {
            if out.len() >= max {
                break;
            }
            if whole.iter().any(|d| path.starts_with(d)) || !scope.is_writable(path) {
                continue;
            }
            match e.kind {
                Kind::File(_) => out.push(path.clone()),
                Kind::Dir if rules.covers_subtree(path) => {
                    out.push(path.clone());
                    whole.push(path);
                }
                Kind::Dir | Kind::Symlink(_) | Kind::Other => {}
            }
        }
        out
    }
}
