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

mod capture;
mod journal_cut;
mod limits;
mod plan;
mod restore;
mod shadow;
mod types;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::clock::now_ms;
use reasonix_forward::sync::LockExt;
use serde::{Deserialize, Serialize};

use crate::tools::MutationHook;
use shadow::Shadow;

pub use journal_cut::{truncate_journal, JournalCut};
pub use types::{
    CheckpointError, CheckpointInfo, CheckpointKind, GitMode, Limits, NotCovered, Options,
    PriorState, RewindReport, StoreStats, CHANGED_PATHS_SHOWN, DEFAULT_MAX_CHECKPOINTS,
    DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_STORE_BYTES,
};

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

impl Record {
    /// A record created now that holds nothing yet.
    fn empty(id: String, seq: u64, session: &str, turn: u64, kind: CheckpointKind) -> Record {
        Record {
            id,
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
        reasonix_forward::sort::sort_by_key(&mut records, |r| r.seq);
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
        Record::empty(format!("ck-{seq}"), seq, session, turn, kind)
    }

    /// The file-tool hook for one session: prior states go to that session's current turn.
    pub fn hook_for(self: &Arc<Self>, session: &str) -> Arc<dyn MutationHook> {
        Arc::new(SessionHook {
            store: Arc::clone(self),
            session: session.to_string(),
        })
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
