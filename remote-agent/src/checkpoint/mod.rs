//! Per-turn checkpoints of the workspace and rewind ("put the files back as they were before
//! turn N"), covering what bash changes as well as what the file tools change.
//!
//! Two layers are kept for every user turn:
//!
//! * **Prior states from the file tools.** Every writer calls [`MutationHook::before_write`]
//!   before it changes a path; the store saves the path's state at that moment (content and
//!   permission bits, a symlink target, or "absent") once per turn. This works everywhere.
//! * **A whole-workspace snapshot** taken by [`CheckpointStore::begin_turn`] into a shadow git
//!   repository under the host state directory (see `shadow.rs`). It sees what `sed -i`, `rm`,
//!   generators and builds did, honours `.gitignore` and the user's `.git/info/exclude`, and is
//!   incremental. The user's own `.git` (HEAD, index, refs, stash, hooks, config) is never
//!   opened for writing. Without a usable `git` binary the store keeps only the first layer
//!   and [`CheckpointStore::coverage`] says that bash changes are not covered.
//!
//! Limits ([`Limits`]): the newest 100 checkpoints, 1 GiB of stored content, 32 MiB per file.
//! A larger file is recorded as not covered (and a rewind leaves it alone); going over the
//! count or byte limit drops the oldest checkpoints, and every such event is written into the
//! `notes` of the checkpoint that caused it.
//!
//! A rewind is one transaction (see `restore.rs`) and is itself undoable: it first records a
//! [`CheckpointKind::BeforeRewind`] checkpoint of the current state, whose id it returns.
//!
//! Layout of the state directory (one per workspace, see [`default_state_dir`]):
//! `shadow.git/` (bare repository with its own index), `blobs/<sha256>` (file-tool prior
//! contents), `meta/<id>.json` (one file per checkpoint), `store.json`, `tmp/` (rewind staging).
//!
//! All methods block (they run git and do file I/O); call them from `spawn_blocking` or accept a
//! short stall. The store is meant to be shared (`Arc`) by every session of a workspace.

mod journal_cut;
mod restore;
mod shadow;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::OsStr;
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::clock::now_ms;
use reasonix_forward::sync::LockExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::tools::MutationHook;
use restore::{ModeSpec, Op, Source};
use shadow::Shadow;

pub use journal_cut::{truncate_journal, JournalCut};

/// Default cap on the number of checkpoints kept per workspace.
pub const DEFAULT_MAX_CHECKPOINTS: usize = 100;
/// Default cap on stored content (shadow repository plus saved file contents), in bytes.
pub const DEFAULT_MAX_STORE_BYTES: u64 = 1 << 30;
/// Default cap on one file's size; larger files are recorded as not covered.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 32 << 20;

/// How many changed paths [`CheckpointInfo::changed_paths`] lists at most.
pub const CHANGED_PATHS_SHOWN: usize = 50;

/// Caps of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Newest checkpoints kept (older ones are dropped).
    pub max_checkpoints: usize,
    /// Stored bytes (shadow repository objects + saved file contents).
    pub max_store_bytes: u64,
    /// Largest file saved; larger ones are not covered.
    pub max_file_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_checkpoints: DEFAULT_MAX_CHECKPOINTS,
            max_store_bytes: DEFAULT_MAX_STORE_BYTES,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
        }
    }
}

/// Which git the shadow snapshots use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum GitMode {
    /// `git` found on `$PATH` when the store opens; none found means file-tool coverage only.
    #[default]
    Auto,
    /// This binary.
    Program(PathBuf),
    /// No shadow snapshots (file-tool coverage only).
    Off,
}

/// Options of [`CheckpointStore::open_with`].
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Caps.
    pub limits: Limits,
    /// Git selection.
    pub git: GitMode,
}

/// Errors of the checkpoint store. Each names the path or command involved.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// File I/O failed.
    #[error("checkpoints: {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// A shadow git command failed.
    #[error("checkpoints: `{command}` failed: {detail}")]
    Git {
        /// The command (without the isolation options).
        command: String,
        /// git's message.
        detail: String,
    },
    /// A metadata file could not be parsed.
    #[error("checkpoints: metadata {path} is unreadable: {detail}")]
    Metadata {
        /// The file.
        path: PathBuf,
        /// The parse error.
        detail: String,
    },
    /// The state directory was made for another workspace.
    #[error("checkpoint store {state_dir} belongs to workspace {other}, not {workspace}")]
    WrongWorkspace {
        /// The state directory.
        state_dir: PathBuf,
        /// The workspace it was made for.
        other: String,
        /// The workspace asked for.
        workspace: PathBuf,
    },
    /// The workspace is not a directory.
    #[error("workspace {0} is not a directory")]
    NotADirectory(PathBuf),
    /// No checkpoint exists for that turn.
    #[error("no checkpoint for turn {turn} of session {session} ({available})")]
    NoCheckpoint {
        /// The session.
        session: String,
        /// The turn asked for.
        turn: u64,
        /// Which turns do have one.
        available: String,
    },
    /// No checkpoint has that id.
    #[error("no checkpoint with id {0} (it may have been dropped by the limits)")]
    UnknownCheckpoint(String),
    /// Turns are numbered from 1.
    #[error("turn numbers start at 1 (got {0})")]
    BadTurn(u64),
    /// The restore would touch a path it must not (outside the workspace, through a symlink,
    /// inside `.git`). Nothing was changed.
    #[error("refusing to restore {path}: {reason}; nothing was changed")]
    Refused {
        /// Workspace-relative path.
        path: String,
        /// Why.
        reason: String,
    },
    /// The disk is not in a state the restore can handle. Nothing was changed.
    #[error("cannot restore {path}: {reason}; nothing was changed")]
    Conflict {
        /// Workspace-relative path.
        path: String,
        /// Why.
        reason: String,
    },
    /// Applying failed; what was applied has been rolled back (unless `rollback_errors` says
    /// otherwise).
    #[error("restoring {path} failed: {source}; {}", rollback_text(.rollback_errors))]
    RestoreFailed {
        /// Workspace-relative path of the failing step.
        path: String,
        /// The cause.
        source: io::Error,
        /// Steps that could not be undone (empty: the workspace is unchanged).
        rollback_errors: Vec<String>,
    },
}

fn rollback_text(errors: &[String]) -> String {
    if errors.is_empty() {
        "every change already made was rolled back, the workspace is unchanged".to_string()
    } else {
        format!(
            "rolling back was incomplete ({}); the undo checkpoint holds the state from before the rewind",
            errors.join("; ")
        )
    }
}

impl CheckpointError {
    pub(crate) fn io(path: &Path, source: io::Error) -> Self {
        CheckpointError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// What kind of checkpoint it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CheckpointKind {
    /// Taken at the start of a user turn: the state before that turn.
    Turn,
    /// Taken by a rewind just before it changed anything: rewinding to it undoes the rewind.
    BeforeRewind {
        /// Id of the checkpoint that rewind restored.
        target: String,
    },
}

/// The state of one path before a file tool first changed it in a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum PriorState {
    /// The path did not exist.
    Absent,
    /// A regular file; the content is stored under `blobs/<sha256>`.
    File {
        /// Hex SHA-256 of the content.
        sha256: String,
        /// Permission bits (`st_mode & 0o7777`).
        mode: u32,
        /// Size in bytes.
        size: u64,
    },
    /// A symbolic link.
    Symlink {
        /// Its target, as stored in the link.
        target: String,
    },
    /// Not saved; a rewind leaves the path alone.
    NotCovered {
        /// Why (too large, a directory, store full, ...).
        reason: String,
    },
}

/// A path a checkpoint does not cover, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotCovered {
    /// Workspace-relative path (or absolute, when outside the workspace).
    pub path: String,
    /// Why.
    pub reason: String,
}

/// A checkpoint as shown to users and clients.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointInfo {
    /// Stable id (`ck-<n>`).
    pub id: String,
    /// Session it belongs to.
    pub session: String,
    /// Turn number (from 1); for a [`CheckpointKind::BeforeRewind`] the session's latest turn
    /// when the rewind ran.
    pub turn: u64,
    /// Turn checkpoint or rewind undo point.
    pub kind: CheckpointKind,
    /// Creation time, RFC 3339 UTC.
    pub created: String,
    /// Creation time, milliseconds since the epoch.
    pub created_unix_ms: u64,
    /// How many paths changed between this checkpoint and the next one of the session (or the
    /// current workspace for the newest): what the turn changed. 0 from `begin_turn`.
    pub files_changed: usize,
    /// Up to [`CHANGED_PATHS_SHOWN`] of those paths, sorted.
    pub changed_paths: Vec<String>,
    /// Bytes this checkpoint added to the store.
    pub bytes: u64,
    /// True when the whole-workspace snapshot exists, so bash changes are covered.
    pub covered_bash: bool,
    /// True when the conversation was rewound past this turn and the turn was run again; the
    /// checkpoint stays reachable by id only.
    pub superseded: bool,
    /// Paths this checkpoint does not cover.
    pub not_covered: Vec<NotCovered>,
    /// Limit events and snapshot problems that happened when it was taken.
    pub notes: Vec<String>,
}

/// What a rewind changed (or, for a dry run, would change).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RewindReport {
    /// The checkpoint restored.
    pub target: String,
    /// Its turn.
    pub to_turn: u64,
    /// Nothing was changed.
    pub dry_run: bool,
    /// Files written back (recreated or content restored), workspace-relative, sorted.
    pub restored: Vec<String>,
    /// Files removed (created after the checkpoint).
    pub removed: Vec<String>,
    /// Files whose permission bits alone were restored.
    pub mode_changed: Vec<String>,
    /// Paths left alone, with the reason.
    pub skipped: Vec<NotCovered>,
    /// Checkpoint of the state before this rewind; `rewind_to(id)` undoes it. `None` for a
    /// dry run.
    pub undo_checkpoint: Option<String>,
    /// [`CheckpointStore::coverage`] at the time.
    pub coverage: String,
}

impl RewindReport {
    /// One line for the user, e.g. `restored 3, removed 1, mode changed 1 (undo: ck-12)`.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{}rewind to before turn {}: restored {}, removed {}, mode changed {}",
            if self.dry_run { "dry run: " } else { "" },
            self.to_turn,
            self.restored.len(),
            self.removed.len(),
            self.mode_changed.len()
        );
        if !self.skipped.is_empty() {
            s.push_str(&format!(", left alone {}", self.skipped.len()));
        }
        if let Some(u) = &self.undo_checkpoint {
            s.push_str(&format!(" (undo: rewind to checkpoint {u})"));
        }
        s
    }

    /// Every path changed (or to change), sorted.
    pub fn paths(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .restored
            .iter()
            .chain(&self.removed)
            .chain(&self.mode_changed)
            .cloned()
            .collect();
        all.sort();
        all.dedup();
        all
    }
}

/// Usage against the limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoreStats {
    /// Checkpoints kept.
    pub checkpoints: usize,
    /// Bytes stored (shadow objects + saved file contents).
    pub stored_bytes: u64,
    /// Of which in the shadow repository.
    pub shadow_bytes: u64,
    /// Of which saved file-tool contents.
    pub blob_bytes: u64,
    /// The caps.
    pub limits: Limits,
    /// Checkpoints dropped by the limits since the store was opened.
    pub dropped: u64,
    /// Whole-workspace snapshots are being taken.
    pub shadow: bool,
    /// [`CheckpointStore::coverage`].
    pub coverage: String,
}

/// One checkpoint as persisted in `meta/<id>.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    id: String,
    seq: u64,
    session: String,
    turn: u64,
    #[serde(flatten)]
    kind: CheckpointKind,
    created_ms: u64,
    /// Shadow tree of the whole workspace.
    tree: Option<String>,
    /// Why there is no tree.
    shadow_note: Option<String>,
    /// File-tool prior states, by workspace-relative path.
    files: BTreeMap<String, PriorState>,
    not_covered: Vec<NotCovered>,
    bytes: u64,
    superseded: bool,
    notes: Vec<String>,
}

/// `store.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct StoreFile {
    version: u32,
    workspace: String,
    next_seq: u64,
    /// Paths currently excluded from snapshots for their size.
    oversize: BTreeSet<String>,
}

struct Inner {
    records: Vec<Record>,
    store: StoreFile,
    /// Session → checkpoint receiving its file-tool prior states.
    current: HashMap<String, String>,
    /// The most recently begun checkpoint (for the session-less hook).
    last_current: Option<String>,
    blob_bytes: u64,
    shadow_bytes: u64,
    /// Snapshots paused because one alone exceeded the byte cap.
    shadow_suspended: Option<String>,
    dropped_since_gc: usize,
    dropped_total: u64,
}

/// The checkpoint store of one workspace.
pub struct CheckpointStore {
    workspace: PathBuf,
    state_dir: PathBuf,
    limits: Limits,
    shadow: Option<Shadow>,
    no_shadow_reason: Option<String>,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for CheckpointStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointStore")
            .field("workspace", &self.workspace)
            .field("state_dir", &self.state_dir)
            .field("shadow", &self.shadow.is_some())
            .finish()
    }
}

/// `<home>/checkpoints/<workspace key>`: where the daemon keeps a workspace's store.
pub fn default_state_dir(home: &Path, workspace_key: &str) -> PathBuf {
    home.join("checkpoints").join(workspace_key)
}

impl CheckpointStore {
    /// Opens (or creates) the store of `workspace` in `state_dir` with the default limits and
    /// `git` from `$PATH`.
    pub fn open(workspace: &Path, state_dir: &Path) -> Result<Self, CheckpointError> {
        Self::open_with(workspace, state_dir, Options::default())
    }

    /// Opens (or creates) the store with explicit options. Checkpoints persisted by an earlier
    /// process are loaded.
    pub fn open_with(
        workspace: &Path,
        state_dir: &Path,
        options: Options,
    ) -> Result<Self, CheckpointError> {
        let workspace =
            fs::canonicalize(workspace).map_err(|e| CheckpointError::io(workspace, e))?;
        if !workspace.is_dir() {
            return Err(CheckpointError::NotADirectory(workspace));
        }
        for dir in [
            state_dir.to_path_buf(),
            state_dir.join("blobs"),
            state_dir.join("meta"),
            state_dir.join("tmp"),
        ] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .map_err(|e| CheckpointError::io(&dir, e))?;
        }
        // Leftovers of a rewind interrupted by a crash.
        if let Ok(rd) = fs::read_dir(state_dir.join("tmp")) {
            for e in rd.flatten() {
                let _ = fs::remove_dir_all(e.path());
            }
        }
        let store_path = state_dir.join("store.json");
        let mut store: StoreFile = match fs::read(&store_path) {
            Ok(data) => serde_json::from_slice(&data).map_err(|e| CheckpointError::Metadata {
                path: store_path.clone(),
                detail: e.to_string(),
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => StoreFile {
                version: 1,
                workspace: workspace.to_string_lossy().into_owned(),
                next_seq: 1,
                oversize: BTreeSet::new(),
            },
            Err(e) => return Err(CheckpointError::io(&store_path, e)),
        };
        if store.workspace != workspace.to_string_lossy() {
            return Err(CheckpointError::WrongWorkspace {
                state_dir: state_dir.to_path_buf(),
                other: store.workspace,
                workspace,
            });
        }
        let mut records = Vec::new();
        let meta = state_dir.join("meta");
        for e in fs::read_dir(&meta)
            .map_err(|e| CheckpointError::io(&meta, e))?
            .flatten()
        {
            let p = e.path();
            if p.extension() != Some(OsStr::new("json")) {
                continue;
            }
            match fs::read(&p).map(|d| serde_json::from_slice::<Record>(&d)) {
                Ok(Ok(r)) => records.push(r),
                // A half-written file from a crash; the rest of the store is still good.
                Ok(Err(err)) => {
                    tracing::warn!(path = %p.display(), %err, "skipping unreadable checkpoint")
                }
                Err(err) => {
                    tracing::warn!(path = %p.display(), %err, "skipping unreadable checkpoint")
                }
            }
        }
        records.sort_by_key(|r| r.seq);
        if let Some(last) = records.last() {
            store.next_seq = store.next_seq.max(last.seq + 1);
        }
        let (shadow, no_shadow_reason) = match open_shadow(&options.git, state_dir, &workspace) {
            Ok(s) => (Some(s), None),
            Err(reason) => (None, Some(reason)),
        };
        let blob_bytes = shadow::dir_bytes(&state_dir.join("blobs"));
        let shadow_bytes = shadow.as_ref().map(Shadow::store_bytes).unwrap_or(0);
        let this = CheckpointStore {
            workspace,
            state_dir: state_dir.to_path_buf(),
            limits: options.limits,
            shadow,
            no_shadow_reason,
            inner: Mutex::new(Inner {
                records,
                store,
                current: HashMap::new(),
                last_current: None,
                blob_bytes,
                shadow_bytes,
                shadow_suspended: None,
                dropped_since_gc: 0,
                dropped_total: 0,
            }),
        };
        {
            let inner = this.lock();
            this.save_store(&inner)?;
        }
        Ok(this)
    }

    /// The canonical workspace.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent-enough data (every change is
        // persisted record by record), so keep going rather than poison every later call.
        self.inner.lock_or_recover()
    }

    /// What a checkpoint covers on this host, in one sentence for the user.
    pub fn coverage(&self) -> String {
        let inner = self.lock();
        self.coverage_locked(&inner)
    }

    fn coverage_locked(&self, inner: &Inner) -> String {
        let max = reasonix_forward::units::bytes(self.limits.max_file_bytes);
        match (&self.shadow, &inner.shadow_suspended, &self.no_shadow_reason) {
            (Some(_), None, _) => format!(
                "file tools and bash: each turn snapshots the whole workspace (honouring .gitignore) \
                 into a shadow git repository under {}; files over {max} are not covered",
                self.state_dir.display()
            ),
            (Some(_), Some(why), _) => format!(
                "file tools only for now, bash changes are not covered: {why}"
            ),
            (None, _, reason) => format!(
                "file tools only: {}, so changes made by bash are not covered",
                reason.as_deref().unwrap_or("no workspace snapshots")
            ),
        }
    }

    /// Usage against the limits.
    pub fn stats(&self) -> StoreStats {
        let inner = self.lock();
        StoreStats {
            checkpoints: inner.records.len(),
            stored_bytes: inner.shadow_bytes + inner.blob_bytes,
            shadow_bytes: inner.shadow_bytes,
            blob_bytes: inner.blob_bytes,
            limits: self.limits,
            dropped: inner.dropped_total,
            shadow: self.shadow.is_some() && inner.shadow_suspended.is_none(),
            coverage: self.coverage_locked(&inner),
        }
    }

    /// Takes the checkpoint of turn `turn` (from 1) of `session`: the state before the turn.
    /// Call it when the turn starts, before any tool runs. Calling it again for the session's
    /// current turn returns the same checkpoint. Starting a turn number the session already
    /// had (the conversation was rewound) marks the old checkpoints of that turn and later ones
    /// as superseded. Cheap when nothing changed: unchanged files are not read again.
    pub fn begin_turn(&self, session: &str, turn: u64) -> Result<CheckpointInfo, CheckpointError> {
        if turn == 0 {
            return Err(CheckpointError::BadTurn(turn));
        }
        let mut inner = self.lock();
        if let Some(id) = inner.current.get(session) {
            if let Some(r) = inner.records.iter().find(|r| &r.id == id) {
                if r.turn == turn && r.kind == CheckpointKind::Turn && !r.superseded {
                    return Ok(info(r, BTreeSet::new()));
                }
            }
        }
        let mut superseded = Vec::new();
        for r in inner.records.iter_mut() {
            if r.session == session
                && r.kind == CheckpointKind::Turn
                && r.turn >= turn
                && !r.superseded
            {
                r.superseded = true;
                superseded.push(r.clone());
            }
        }
        for r in &superseded {
            self.save_record(r)?;
        }
        let mut rec = self.new_record(&mut inner, session, turn, CheckpointKind::Turn);
        self.take_snapshot(&mut inner, &mut rec);
        let id = rec.id.clone();
        inner.records.push(rec);
        inner.current.insert(session.to_string(), id.clone());
        inner.last_current = Some(id.clone());
        let notes = self.enforce_limits(&mut inner, &id);
        let rec = inner
            .records
            .iter_mut()
            .find(|r| r.id == id)
            .ok_or_else(|| CheckpointError::UnknownCheckpoint(id.clone()))?;
        rec.notes.extend(notes);
        let rec = rec.clone();
        self.save_record(&rec)?;
        self.save_store(&inner)?;
        Ok(info(&rec, BTreeSet::new()))
    }

    fn new_record(
        &self,
        inner: &mut Inner,
        session: &str,
        turn: u64,
        kind: CheckpointKind,
    ) -> Record {
        let seq = inner.store.next_seq;
        inner.store.next_seq += 1;
        Record {
            id: format!("ck-{seq}"),
            seq,
            session: session.to_string(),
            turn,
            kind,
            created_ms: now_ms(),
            tree: None,
            shadow_note: None,
            files: BTreeMap::new(),
            not_covered: Vec::new(),
            bytes: 0,
            superseded: false,
            notes: Vec::new(),
        }
    }

    /// Snapshots the workspace into `rec` (tree, oversize files, bytes added); problems become
    /// notes, never errors: a turn must not fail because its checkpoint is incomplete.
    fn take_snapshot(&self, inner: &mut Inner, rec: &mut Record) {
        let Some(shadow) = &self.shadow else {
            rec.shadow_note = self.no_shadow_reason.clone();
            return;
        };
        if let Some(why) = &inner.shadow_suspended {
            rec.shadow_note = Some(why.clone());
            rec.notes.push(format!("no workspace snapshot: {why}"));
            return;
        }
        let before = inner.shadow_bytes;
        let snap = shadow
            .snapshot(self.limits.max_file_bytes, &inner.store.oversize)
            .and_then(|snap| shadow.set_ref(&rec.id, &snap.tree).map(|_| snap));
        match snap {
            Ok(snap) => {
                if let Err(e) = shadow.maintain() {
                    tracing::warn!(error = %e, "shadow repository maintenance failed");
                }
                inner.shadow_bytes = shadow.store_bytes();
                rec.bytes += inner.shadow_bytes.saturating_sub(before);
                inner.store.oversize = snap.oversize.iter().map(|(p, _)| p.clone()).collect();
                for (path, size) in &snap.oversize {
                    let reason = format!(
                        "{} is over the {} per-file limit",
                        reasonix_forward::units::bytes(*size),
                        reasonix_forward::units::bytes(self.limits.max_file_bytes)
                    );
                    rec.notes.push(format!("{path} is not covered: {reason}"));
                    rec.not_covered.push(NotCovered {
                        path: path.clone(),
                        reason,
                    });
                }
                for path in &snap.unreadable {
                    let reason = "git could not read it".to_string();
                    rec.notes.push(format!("{path} is not covered: {reason}"));
                    rec.not_covered.push(NotCovered {
                        path: path.clone(),
                        reason,
                    });
                }
                rec.tree = Some(snap.tree);
            }
            Err(e) => {
                let why = format!("the workspace snapshot failed ({e}); bash changes in this turn are not covered");
                rec.notes.push(why.clone());
                rec.shadow_note = Some(why);
            }
        }
    }

    /// Applies the count and byte caps after `new_id` was added; returns what happened.
    fn enforce_limits(&self, inner: &mut Inner, new_id: &str) -> Vec<String> {
        let mut notes = Vec::new();
        while inner.records.len() > self.limits.max_checkpoints {
            let Some(victim) = inner
                .records
                .iter()
                .find(|r| r.id != new_id)
                .map(|r| r.id.clone())
            else {
                break;
            };
            notes.push(format!(
                "dropped the oldest checkpoint {victim}: only the newest {} are kept",
                self.limits.max_checkpoints
            ));
            self.drop_record(inner, &victim);
        }
        let max = self.limits.max_store_bytes;
        let mut rounds = 0;
        while inner.shadow_bytes + inner.blob_bytes > max && rounds < 64 {
            rounds += 1;
            // Drop old checkpoints until their recorded sizes suggest we fit, then measure.
            let mut estimate: u64 =
                inner.records.iter().map(|r| r.bytes).sum::<u64>() + inner.blob_bytes;
            let mut dropped_any = false;
            while let Some(victim) = inner.records.iter().find(|r| r.id != new_id).cloned() {
                estimate = estimate.saturating_sub(victim.bytes);
                notes.push(format!(
                    "dropped the oldest checkpoint {}: the store is over its {} limit",
                    victim.id,
                    reasonix_forward::units::bytes(max)
                ));
                self.drop_record(inner, &victim.id);
                dropped_any = true;
                if estimate <= max {
                    break;
                }
            }
            self.gc(inner);
            if !dropped_any {
                break;
            }
        }
        if inner.shadow_bytes + inner.blob_bytes > max {
            // The newest snapshot alone is too big: give it up rather than exceed the cap.
            if let (Some(shadow), Some(rec)) = (
                &self.shadow,
                inner.records.iter_mut().find(|r| r.id == new_id),
            ) {
                if rec.tree.take().is_some() {
                    let _ = shadow.delete_ref(new_id);
                    shadow.reset_index();
                    let why = format!(
                        "one snapshot of this workspace is larger than the {} store limit",
                        reasonix_forward::units::bytes(max)
                    );
                    rec.shadow_note = Some(why.clone());
                    notes.push(format!("no workspace snapshot: {why}; bash changes are not covered until the daemon restarts"));
                    inner.shadow_suspended = Some(why);
                    self.gc(inner);
                }
            }
        }
        if inner.dropped_since_gc >= 10 {
            self.gc(inner);
        }
        notes
    }

    fn gc(&self, inner: &mut Inner) {
        if let Some(shadow) = &self.shadow {
            if let Err(e) = shadow.gc() {
                tracing::warn!(error = %e, "shadow repository gc failed");
            }
            inner.shadow_bytes = shadow.store_bytes();
        }
        inner.dropped_since_gc = 0;
    }

    /// Forgets a checkpoint: its ref, its metadata, the saved contents nobody else uses.
    fn drop_record(&self, inner: &mut Inner, id: &str) {
        let Some(pos) = inner.records.iter().position(|r| r.id == id) else {
            return;
        };
        let rec = inner.records.remove(pos);
        if let (Some(shadow), Some(_)) = (&self.shadow, &rec.tree) {
            if let Err(e) = shadow.delete_ref(id) {
                tracing::warn!(error = %e, id, "cannot delete checkpoint ref");
            }
        }
        let _ = fs::remove_file(self.state_dir.join("meta").join(format!("{id}.json")));
        inner.current.retain(|_, v| v != id);
        if inner.last_current.as_deref() == Some(id) {
            inner.last_current = None;
        }
        inner.dropped_since_gc += 1;
        inner.dropped_total += 1;
        let used: HashSet<&str> = inner
            .records
            .iter()
            .flat_map(|r| r.files.values())
            .filter_map(|s| match s {
                PriorState::File { sha256, .. } => Some(sha256.as_str()),
                _ => None,
            })
            .collect();
        for state in rec.files.values() {
            if let PriorState::File { sha256, size, .. } = state {
                if !used.contains(sha256.as_str()) {
                    let p = self.state_dir.join("blobs").join(sha256);
                    if fs::remove_file(&p).is_ok() {
                        inner.blob_bytes = inner.blob_bytes.saturating_sub(*size);
                    }
                }
            }
        }
    }

    /// The file-tool hook for one session: prior states go to that session's current turn.
    pub fn hook_for(self: &Arc<Self>, session: &str) -> Arc<dyn MutationHook> {
        Arc::new(SessionHook {
            store: Arc::clone(self),
            session: session.to_string(),
        })
    }

    /// Saves the prior state of `path` into the checkpoint `id` (first time per path only).
    fn record_prior(&self, inner: &mut Inner, id: &str, path: &Path) {
        let Some(pos) = inner.records.iter().position(|r| r.id == id) else {
            return;
        };
        let rel = match self.relative(path) {
            Ok(rel) => rel,
            Err(reason) => {
                let shown = path.display().to_string();
                let rec = &mut inner.records[pos];
                if !rec.not_covered.iter().any(|n| n.path == shown) {
                    rec.not_covered.push(NotCovered {
                        path: shown,
                        reason,
                    });
                    let rec = rec.clone();
                    let _ = self.save_record(&rec);
                }
                return;
            }
        };
        if inner.records[pos].files.contains_key(&rel) {
            return;
        }
        let state = self.capture(inner, path);
        let rec = &mut inner.records[pos];
        if let PriorState::NotCovered { reason } = &state {
            rec.notes.push(format!("{rel} is not covered: {reason}"));
            rec.not_covered.push(NotCovered {
                path: rel.clone(),
                reason: reason.clone(),
            });
        }
        rec.files.insert(rel, state);
        let rec = rec.clone();
        if let Err(e) = self.save_record(&rec) {
            tracing::warn!(error = %e, "cannot persist checkpoint");
        }
    }

    /// Workspace-relative UTF-8 form of an absolute path, or why it cannot be covered.
    fn relative(&self, path: &Path) -> Result<String, String> {
        let rel = match path.strip_prefix(&self.workspace) {
            Ok(r) => r.to_path_buf(),
            Err(_) => {
                // The tools pass resolved paths; accept an unresolved one whose directory
                // resolves into the workspace.
                let resolved = path
                    .parent()
                    .and_then(|p| fs::canonicalize(p).ok())
                    .zip(path.file_name())
                    .map(|(p, n)| p.join(n));
                match resolved.as_deref().map(|p| p.strip_prefix(&self.workspace)) {
                    Some(Ok(r)) => r.to_path_buf(),
                    _ => {
                        return Err(
                            "outside the workspace; rewind only restores the workspace".into()
                        )
                    }
                }
            }
        };
        let Some(s) = rel.to_str() else {
            return Err("the path is not valid UTF-8".into());
        };
        restore::check_rel(s.as_bytes()).map_err(|e| e.to_string())?;
        Ok(s.to_string())
    }

    /// The current state of `path`, its content saved in the blob store.
    fn capture(&self, inner: &mut Inner, path: &Path) -> PriorState {
        let meta = match fs::symlink_metadata(path) {
            Ok(m) => m,
            // ENOTDIR: a parent is a file, so this path does not exist either.
            Err(e)
                if e.kind() == io::ErrorKind::NotFound
                    || e.raw_os_error() == Some(libc::ENOTDIR) =>
            {
                return PriorState::Absent
            }
            Err(e) => {
                return PriorState::NotCovered {
                    reason: format!("cannot inspect it: {e}"),
                }
            }
        };
        if meta.file_type().is_symlink() {
            return match fs::read_link(path) {
                Ok(t) => match t.to_str() {
                    Some(s) => PriorState::Symlink {
                        target: s.to_string(),
                    },
                    None => PriorState::NotCovered {
                        reason: "a symlink whose target is not UTF-8".into(),
                    },
                },
                Err(e) => PriorState::NotCovered {
                    reason: format!("cannot read the link: {e}"),
                },
            };
        }
        if meta.is_dir() {
            return PriorState::NotCovered {
                reason: "a directory".into(),
            };
        }
        if !meta.is_file() {
            return PriorState::NotCovered {
                reason: "not a regular file".into(),
            };
        }
        let size = meta.len();
        if size > self.limits.max_file_bytes {
            return PriorState::NotCovered {
                reason: format!(
                    "{} is over the {} per-file limit",
                    reasonix_forward::units::bytes(size),
                    reasonix_forward::units::bytes(self.limits.max_file_bytes)
                ),
            };
        }
        let data = match fs::read(path) {
            Ok(d) => d,
            Err(e) => {
                return PriorState::NotCovered {
                    reason: format!("cannot read it: {e}"),
                }
            }
        };
        let sha = hex::encode(Sha256::digest(&data));
        let blob = self.state_dir.join("blobs").join(&sha);
        if !blob.exists() {
            let total = inner.shadow_bytes + inner.blob_bytes + data.len() as u64;
            if total > self.limits.max_store_bytes {
                return PriorState::NotCovered {
                    reason: format!(
                        "the checkpoint store is full ({} limit)",
                        reasonix_forward::units::bytes(self.limits.max_store_bytes)
                    ),
                };
            }
            if let Err(e) = write_atomic(&blob, &data) {
                return PriorState::NotCovered {
                    reason: format!("cannot save it: {e}"),
                };
            }
            inner.blob_bytes += data.len() as u64;
        }
        PriorState::File {
            sha256: sha,
            mode: meta.permissions().mode() & 0o7777,
            size: data.len() as u64,
        }
    }

    /// The checkpoints of `session`, oldest first, with what each turn changed.
    pub fn list(&self, session: &str) -> Result<Vec<CheckpointInfo>, CheckpointError> {
        let mut inner = self.lock();
        let recs: Vec<Record> = inner
            .records
            .iter()
            .filter(|r| r.session == session)
            .cloned()
            .collect();
        let mut current_tree: Option<Option<String>> = None;
        let mut out = Vec::new();
        for (i, r) in recs.iter().enumerate() {
            let next_tree = match recs.get(i + 1) {
                Some(n) => n.tree.clone(),
                None => {
                    if current_tree.is_none() {
                        current_tree = Some(self.current_tree(&mut inner));
                    }
                    current_tree.clone().flatten()
                }
            };
            let mut changed: BTreeSet<String> = r.files.keys().cloned().collect();
            if let (Some(shadow), Some(a), Some(b)) = (&self.shadow, &r.tree, &next_tree) {
                for d in shadow.diff(a, b)? {
                    changed.insert(String::from_utf8_lossy(&d.path).into_owned());
                }
            }
            out.push(info(r, changed));
        }
        Ok(out)
    }

    /// A snapshot of the workspace now (no checkpoint made), or `None` without the shadow.
    fn current_tree(&self, inner: &mut Inner) -> Option<String> {
        let shadow = self.shadow.as_ref()?;
        if inner.shadow_suspended.is_some() {
            return None;
        }
        match shadow.snapshot(self.limits.max_file_bytes, &inner.store.oversize) {
            Ok(s) => {
                inner.store.oversize = s.oversize.iter().map(|(p, _)| p.clone()).collect();
                Some(s.tree)
            }
            Err(e) => {
                tracing::warn!(error = %e, "snapshot for listing failed");
                None
            }
        }
    }

    /// Restores the workspace to the checkpoint of turn `to_turn` of `session` (the state just
    /// before that turn began). With `dry_run` nothing changes and the report says what would.
    pub fn rewind(
        &self,
        session: &str,
        to_turn: u64,
        dry_run: bool,
    ) -> Result<RewindReport, CheckpointError> {
        if to_turn == 0 {
            return Err(CheckpointError::BadTurn(to_turn));
        }
        let mut inner = self.lock();
        let target = inner
            .records
            .iter()
            .filter(|r| {
                r.session == session
                    && r.turn == to_turn
                    && r.kind == CheckpointKind::Turn
                    && !r.superseded
            })
            .max_by_key(|r| r.seq)
            .map(|r| r.id.clone());
        let Some(target) = target else {
            let turns: BTreeSet<u64> = inner
                .records
                .iter()
                .filter(|r| r.session == session && r.kind == CheckpointKind::Turn && !r.superseded)
                .map(|r| r.turn)
                .collect();
            let available = if turns.is_empty() {
                "the session has no checkpoints".to_string()
            } else {
                format!(
                    "checkpoints exist for turns {}",
                    turns
                        .iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            return Err(CheckpointError::NoCheckpoint {
                session: session.to_string(),
                turn: to_turn,
                available,
            });
        };
        self.rewind_locked(&mut inner, &target, dry_run)
    }

    /// Restores the workspace to checkpoint `id` (any kind; an undo point from a rewind
    /// report undoes that rewind).
    pub fn rewind_to(&self, id: &str, dry_run: bool) -> Result<RewindReport, CheckpointError> {
        let mut inner = self.lock();
        self.rewind_locked(&mut inner, id, dry_run)
    }

    fn rewind_locked(
        &self,
        inner: &mut Inner,
        id: &str,
        dry_run: bool,
    ) -> Result<RewindReport, CheckpointError> {
        let target = inner
            .records
            .iter()
            .find(|r| r.id == id)
            .cloned()
            .ok_or_else(|| CheckpointError::UnknownCheckpoint(id.to_string()))?;
        let session = target.session.clone();
        let latest_turn = inner
            .records
            .iter()
            .filter(|r| r.session == session)
            .map(|r| r.turn)
            .max()
            .unwrap_or(target.turn);
        let mut undo = if dry_run {
            None
        } else {
            Some(self.new_record(
                inner,
                &session,
                latest_turn,
                CheckpointKind::BeforeRewind {
                    target: id.to_string(),
                },
            ))
        };
        // The state now, as a tree. For a real rewind it is the undo checkpoint's snapshot.
        let mut cur_tree = None;
        let mut leave_alone: BTreeMap<Vec<u8>, String> = target
            .not_covered
            .iter()
            .map(|n| (n.path.as_bytes().to_vec(), n.reason.clone()))
            .collect();
        if let (Some(_), Some(_)) = (&self.shadow, &target.tree) {
            let mut scratch;
            let rec = match undo.as_mut() {
                Some(u) => u,
                None => {
                    scratch = self.new_record_scratch(&session);
                    &mut scratch
                }
            };
            self.take_snapshot(inner, rec);
            cur_tree = rec.tree.clone();
            for n in &rec.not_covered {
                leave_alone
                    .entry(n.path.as_bytes().to_vec())
                    .or_insert_with(|| n.reason.clone());
            }
            if dry_run {
                if let (Some(shadow), Some(_)) = (&self.shadow, &cur_tree) {
                    let _ = shadow.delete_ref(&rec.id);
                }
            }
            if cur_tree.is_none() {
                // Without a snapshot of the present the rewind could not be undone.
                let why = rec
                    .shadow_note
                    .clone()
                    .unwrap_or_else(|| "unknown reason".into());
                if let Some(u) = &undo {
                    self.forget_unsaved(inner, u);
                }
                return Err(CheckpointError::Conflict {
                    path: ".".into(),
                    reason: format!("the current state of the workspace cannot be snapshotted ({why}), so the rewind could not be undone"),
                });
            }
        }
        let staging = self.state_dir.join("tmp").join(format!(
            "rw-{}-{:08x}",
            now_ms(),
            rand::random::<u32>()
        ));
        fs::create_dir_all(&staging).map_err(|e| CheckpointError::io(&staging, e))?;
        let result = self.plan_and_apply(
            inner,
            &target,
            cur_tree.as_deref(),
            &leave_alone,
            undo.as_mut(),
            &staging,
            dry_run,
        );
        let _ = fs::remove_dir_all(&staging);
        let mut report = match result {
            Ok(r) => r,
            Err(e) => {
                if let Some(u) = &undo {
                    self.forget_unsaved(inner, u);
                }
                return Err(e);
            }
        };
        report.coverage = self.coverage_locked(inner);
        if let Some(u) = undo {
            report.undo_checkpoint = Some(u.id.clone());
            // After a rewind no turn is open; file-tool writes before the next turn are not
            // attributed to an old checkpoint.
            inner.current.remove(&session);
            let uid = u.id.clone();
            inner.records.push(u);
            let notes = self.enforce_limits(inner, &uid);
            if let Some(r) = inner.records.iter_mut().find(|r| r.id == uid) {
                r.notes.extend(notes);
                let r = r.clone();
                self.save_record(&r)?;
            }
            self.save_store(inner)?;
        }
        Ok(report)
    }

    fn new_record_scratch(&self, session: &str) -> Record {
        Record {
            id: "dry-run".into(),
            seq: u64::MAX,
            session: session.to_string(),
            turn: 0,
            kind: CheckpointKind::Turn,
            created_ms: now_ms(),
            tree: None,
            shadow_note: None,
            files: BTreeMap::new(),
            not_covered: Vec::new(),
            bytes: 0,
            superseded: false,
            notes: Vec::new(),
        }
    }

    /// Removes every trace of an undo record that never became a checkpoint.
    fn forget_unsaved(&self, inner: &mut Inner, rec: &Record) {
        if let (Some(shadow), Some(_)) = (&self.shadow, &rec.tree) {
            let _ = shadow.delete_ref(&rec.id);
        }
        let _ = fs::remove_file(self.state_dir.join("meta").join(format!("{}.json", rec.id)));
        let used: HashSet<&str> = inner
            .records
            .iter()
            .flat_map(|r| r.files.values())
            .filter_map(|s| match s {
                PriorState::File { sha256, .. } => Some(sha256.as_str()),
                _ => None,
            })
            .collect();
        for state in rec.files.values() {
            if let PriorState::File { sha256, size, .. } = state {
                if !used.contains(sha256.as_str())
                    && fs::remove_file(self.state_dir.join("blobs").join(sha256)).is_ok()
                {
                    inner.blob_bytes = inner.blob_bytes.saturating_sub(*size);
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn plan_and_apply(
        &self,
        inner: &mut Inner,
        target: &Record,
        cur_tree: Option<&str>,
        leave_alone: &BTreeMap<Vec<u8>, String>,
        mut undo: Option<&mut Record>,
        staging: &Path,
        dry_run: bool,
    ) -> Result<RewindReport, CheckpointError> {
        let mut ops: Vec<Op> = Vec::new();
        let mut skipped: Vec<NotCovered> = Vec::new();
        let skip = |skipped: &mut Vec<NotCovered>, rel: &[u8], reason: String| {
            skipped.push(NotCovered {
                path: String::from_utf8_lossy(rel).into_owned(),
                reason,
            })
        };
        // File-tool prior states, earliest capture after the target wins.
        let mut prior: BTreeMap<String, PriorState> = BTreeMap::new();
        for r in inner
            .records
            .iter()
            .filter(|r| r.session == target.session && r.seq >= target.seq)
        {
            for (p, s) in &r.files {
                prior.entry(p.clone()).or_insert_with(|| s.clone());
            }
        }
        // Layer 1: the whole-workspace snapshot, when both ends have one.
        let shadow_pair = match (&self.shadow, &target.tree, cur_tree) {
            (Some(s), Some(t), Some(c)) => Some((s, t.as_str(), c)),
            _ => None,
        };
        let mut cur_paths = HashSet::new();
        let mut in_trees = HashSet::new();
        if let Some((shadow, ttree, ctree)) = shadow_pair {
            let diff = shadow.diff(ctree, ttree)?;
            let exact = self.exact_modes(shadow, &diff, &prior)?;
            for d in diff {
                if let Some(reason) = leave_alone.get(&d.path) {
                    skip(&mut skipped, &d.path, format!("not covered: {reason}"));
                    continue;
                }
                if d.old_mode == 0o160000 || d.new_mode == 0o160000 {
                    skip(
                        &mut skipped,
                        &d.path,
                        "a nested git repository; its contents are not covered".into(),
                    );
                    continue;
                }
                let rel = d.path.clone();
                let op = if d.new_mode == 0 {
                    Op::Delete { rel }
                } else if d.new_mode == 0o120000 {
                    Op::WriteSymlink {
                        rel,
                        source: Source::Git(d.new_sha.clone()),
                    }
                } else {
                    // Git keeps only the executable bit; a file-tool record of the same
                    // content knows the exact bits (0600 and the like).
                    let mode = match exact.get(&rel) {
                        Some(m) => ModeSpec::Exact(*m),
                        None => ModeSpec::Exec(d.new_mode == 0o100755),
                    };
                    if d.old_sha == d.new_sha && d.old_mode != 0o120000 && d.old_mode != 0 {
                        Op::Chmod { rel, mode }
                    } else {
                        Op::WriteFile {
                            rel,
                            source: Source::Git(d.new_sha.clone()),
                            mode,
                        }
                    }
                };
                ops.push(op);
            }
            cur_paths = shadow.tree_paths(ctree)?;
            in_trees = shadow.tree_paths(ttree)?;
            in_trees.extend(cur_paths.iter().cloned());
        }
        let mut candidates: Vec<(String, PriorState)> = prior
            .into_iter()
            .filter(|(p, _)| !in_trees.contains(p.as_bytes()))
            .collect();
        if let Some((shadow, _, _)) = shadow_pair {
            // Outside both trees and not ignored means absent then and now: the snapshot is
            // the authority. Ignored paths are only known through the file tools.
            // A path below a symlink cannot be asked about (git refuses); it stays a
            // candidate so that the restore refuses it unless the plan removes the link.
            let below_link: HashSet<String> = candidates
                .iter()
                .filter(|(p, _)| self.has_symlink_ancestor(p))
                .map(|(p, _)| p.clone())
                .collect();
            let paths: Vec<Vec<u8>> = candidates
                .iter()
                .filter(|(p, _)| !below_link.contains(p))
                .map(|(p, _)| p.as_bytes().to_vec())
                .collect();
            let ignored = shadow.ignored(&paths)?;
            candidates.retain(|(p, _)| below_link.contains(p) || ignored.contains(p.as_bytes()));
        }
        for (i, (rel, state)) in candidates.into_iter().enumerate() {
            let relb = rel.as_bytes().to_vec();
            if let Some(reason) = leave_alone.get(&relb) {
                skip(&mut skipped, &relb, format!("not covered: {reason}"));
                continue;
            }
            let path = self.workspace.join(&rel);
            let current = fs::symlink_metadata(&path).ok();
            match state {
                PriorState::NotCovered { reason } => {
                    if current.is_some() {
                        skip(&mut skipped, &relb, format!("not covered: {reason}"));
                    }
                }
                PriorState::Absent => match &current {
                    None => {}
                    Some(m) if m.is_dir() => skip(
                        &mut skipped,
                        &relb,
                        "it did not exist, but is now a directory; left as is".into(),
                    ),
                    Some(_) => ops.push(Op::Delete { rel: relb }),
                },
                PriorState::File { sha256, mode, size } => {
                    let same_content = match &current {
                        Some(m) if m.is_file() && m.len() == size => fs::read(&path)
                            .map(|d| hex::encode(Sha256::digest(&d)) == sha256)
                            .unwrap_or(false),
                        _ => false,
                    };
                    let cur_mode = current.as_ref().map(|m| m.permissions().mode() & 0o7777);
                    if same_content {
                        if cur_mode != Some(mode & 0o7777) {
                            ops.push(Op::Chmod {
                                rel: relb,
                                mode: ModeSpec::Exact(mode),
                            });
                        }
                    } else {
                        ops.push(Op::WriteFile {
                            rel: relb,
                            source: Source::File(self.state_dir.join("blobs").join(&sha256)),
                            mode: ModeSpec::Exact(mode),
                        });
                    }
                }
                PriorState::Symlink { target: link } => {
                    let same = current
                        .as_ref()
                        .map(|m| m.file_type().is_symlink())
                        .unwrap_or(false)
                        && fs::read_link(&path)
                            .map(|t| t.as_os_str().as_bytes() == link.as_bytes())
                            .unwrap_or(false);
                    if !same {
                        let staged = staging.join(format!("link-{i}"));
                        fs::write(&staged, link.as_bytes())
                            .map_err(|e| CheckpointError::io(&staged, e))?;
                        ops.push(Op::WriteSymlink {
                            rel: relb,
                            source: Source::File(staged),
                        });
                    }
                }
            }
        }
        // Every path the rewind changes must be restorable by the undo checkpoint: paths the
        // current snapshot holds are; the others get their current state saved now.
        if let Some(u) = undo.as_deref_mut() {
            let mut kept = Vec::with_capacity(ops.len());
            for op in ops {
                let rel = op.rel().to_vec();
                let in_snapshot = cur_tree.is_some() && cur_paths.contains(&rel);
                let Ok(rel_s) = String::from_utf8(rel.clone()) else {
                    if in_snapshot {
                        kept.push(op);
                    } else {
                        skip(&mut skipped, &rel, "the path is not valid UTF-8".into());
                    }
                    continue;
                };
                // Saved even when the snapshot has the content: it also keeps the exact
                // permission bits, which git does not.
                let full = self.workspace.join(&rel_s);
                // A directory where a file goes back: the plan clears it only when everything
                // in it is being removed (each file saved on its own); as a file it is absent.
                let state = if fs::symlink_metadata(&full)
                    .map(|m| m.is_dir())
                    .unwrap_or(false)
                {
                    PriorState::Absent
                } else {
                    self.capture(inner, &full)
                };
                match &state {
                    PriorState::NotCovered { .. } if in_snapshot => {}
                    PriorState::NotCovered { reason } => {
                        skip(
                            &mut skipped,
                            &rel,
                            format!(
                                "its current state cannot be saved for undo ({reason}); left as is"
                            ),
                        );
                        continue;
                    }
                    _ => {
                        u.files.insert(rel_s, state);
                    }
                }
                kept.push(op);
            }
            ops = kept;
        }
        let mut report = RewindReport {
            target: target.id.clone(),
            to_turn: target.turn,
            dry_run,
            restored: Vec::new(),
            removed: Vec::new(),
            mode_changed: Vec::new(),
            skipped,
            undo_checkpoint: None,
            coverage: String::new(),
        };
        for op in &ops {
            let shown = String::from_utf8_lossy(op.rel()).into_owned();
            match op {
                Op::Delete { .. } => report.removed.push(shown),
                Op::WriteFile { .. } | Op::WriteSymlink { .. } => report.restored.push(shown),
                Op::Chmod { .. } => report.mode_changed.push(shown),
            }
        }
        report.restored.sort();
        report.removed.sort();
        report.mode_changed.sort();
        report.skipped.sort_by(|a, b| a.path.cmp(&b.path));
        // Everything is checked and staged before the first change, even for a dry run, so a
        // dry run also reports a restore that would be refused.
        let shadow = self.shadow.clone();
        let read_git = move |shas: &[String], dests: &[PathBuf]| -> Result<(), CheckpointError> {
            match &shadow {
                Some(s) => s.read_blobs(shas, dests),
                None if shas.is_empty() => Ok(()),
                None => Err(CheckpointError::Git {
                    command: "git cat-file".into(),
                    detail: "git is not available".into(),
                }),
            }
        };
        let prepared = restore::prepare(&self.workspace, &staging.join("stage"), &ops, &read_git)?;
        if dry_run {
            return Ok(report);
        }
        if let Some(u) = undo.as_deref() {
            // Persist the undo point before touching anything: a crash mid-apply keeps it.
            self.save_record(u)?;
        }
        restore::apply(&self.workspace, prepared)?;
        Ok(report)
    }

    /// Exact permission bits for diff entries whose target content equals a file-tool record
    /// of the same path (and whose executable bit agrees with git's).
    fn exact_modes(
        &self,
        shadow: &Shadow,
        diff: &[shadow::DiffEntry],
        prior: &BTreeMap<String, PriorState>,
    ) -> Result<HashMap<Vec<u8>, u32>, CheckpointError> {
        let mut wanted = Vec::new();
        for d in diff {
            if d.new_mode != 0o100644 && d.new_mode != 0o100755 {
                continue;
            }
            let Ok(p) = std::str::from_utf8(&d.path) else {
                continue;
            };
            if let Some(PriorState::File { sha256, mode, .. }) = prior.get(p) {
                let exec = mode & 0o100 != 0;
                if exec == (d.new_mode == 0o100755) {
                    wanted.push((
                        d.path.clone(),
                        d.new_sha.clone(),
                        *mode,
                        self.state_dir.join("blobs").join(sha256),
                    ));
                }
            }
        }
        let files: Vec<PathBuf> = wanted.iter().map(|w| w.3.clone()).collect();
        let ids = shadow.hash_files(&files)?;
        Ok(wanted
            .into_iter()
            .zip(ids)
            .filter(|((_, sha, _, _), id)| sha == id)
            .map(|((path, _, mode, _), _)| (path, mode))
            .collect())
    }

    fn has_symlink_ancestor(&self, rel: &str) -> bool {
        let mut acc = self.workspace.clone();
        let comps: Vec<_> = Path::new(rel).components().collect();
        for c in comps.iter().take(comps.len().saturating_sub(1)) {
            acc.push(c);
            match fs::symlink_metadata(&acc) {
                Ok(m) if m.file_type().is_symlink() => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    }

    fn save_record(&self, rec: &Record) -> Result<(), CheckpointError> {
        let path = self.state_dir.join("meta").join(format!("{}.json", rec.id));
        let data = serde_json::to_vec_pretty(rec).map_err(|e| CheckpointError::Metadata {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        write_atomic(&path, &data).map_err(|e| CheckpointError::io(&path, e))
    }

    fn save_store(&self, inner: &Inner) -> Result<(), CheckpointError> {
        let path = self.state_dir.join("store.json");
        let data =
            serde_json::to_vec_pretty(&inner.store).map_err(|e| CheckpointError::Metadata {
                path: path.clone(),
                detail: e.to_string(),
            })?;
        write_atomic(&path, &data).map_err(|e| CheckpointError::io(&path, e))
    }
}

/// The session-less hook: prior states go to the most recently begun checkpoint. Prefer
/// [`CheckpointStore::hook_for`] when several sessions share the store.
impl MutationHook for CheckpointStore {
    fn before_write(&self, path: &Path) {
        let mut inner = self.lock();
        let Some(id) = inner.last_current.clone() else {
            tracing::debug!(path = %path.display(), "write outside any turn; no checkpoint");
            return;
        };
        self.record_prior(&mut inner, &id, path);
    }
}

/// [`MutationHook`] bound to one session (see [`CheckpointStore::hook_for`]).
struct SessionHook {
    store: Arc<CheckpointStore>,
    session: String,
}

impl MutationHook for SessionHook {
    fn before_write(&self, path: &Path) {
        let mut inner = self.store.lock();
        let Some(id) = inner.current.get(&self.session).cloned() else {
            tracing::debug!(path = %path.display(), session = %self.session, "write outside any turn; no checkpoint");
            return;
        };
        self.store.record_prior(&mut inner, &id, path);
    }
}

fn open_shadow(mode: &GitMode, state_dir: &Path, workspace: &Path) -> Result<Shadow, String> {
    let git = match mode {
        GitMode::Off => return Err("workspace snapshots are switched off".into()),
        GitMode::Program(p) => p.clone(),
        GitMode::Auto => {
            shadow::find_git().ok_or_else(|| "git is not installed on this host".to_string())?
        }
    };
    if shadow::git_version(&git).is_none() {
        return Err(format!("{} does not run", git.display()));
    }
    Shadow::open(&git, &state_dir.join("shadow.git"), workspace)
        .map_err(|e| format!("the shadow repository cannot be set up ({e})"))
}

fn info(r: &Record, changed: BTreeSet<String>) -> CheckpointInfo {
    CheckpointInfo {
        id: r.id.clone(),
        session: r.session.clone(),
        turn: r.turn,
        kind: r.kind.clone(),
        created: crate::clock::rfc3339_ms(r.created_ms),
        created_unix_ms: r.created_ms,
        files_changed: changed.len(),
        changed_paths: changed.into_iter().take(CHANGED_PATHS_SHOWN).collect(),
        bytes: r.bytes,
        covered_bash: r.tree.is_some(),
        superseded: r.superseded,
        not_covered: r.not_covered.clone(),
        notes: r.notes.clone(),
    }
}

fn write_atomic(path: &Path, data: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.{:08x}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        rand::random::<u32>()
    ));
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(data)?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
