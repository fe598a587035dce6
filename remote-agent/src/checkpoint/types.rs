//! Public data types and errors of the checkpoint store.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::CheckpointStore;

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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

/// Decoded from one flat struct, not by serde's internally tagged decoder (which buffers the
/// object as `Content` first: a copy of that machinery in the host binary, issue 17). The
/// encoding is the derived one; the tests compare the decoding with serde's.
impl<'de> Deserialize<'de> for PriorState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        #[derive(Deserialize)]
        #[serde(rename_all = "snake_case")]
        enum State {
            Absent,
            File,
            Symlink,
            NotCovered,
        }
        #[derive(Deserialize)]
        struct Flat {
            state: State,
            sha256: Option<String>,
            mode: Option<u32>,
            size: Option<u64>,
            target: Option<String>,
            reason: Option<String>,
        }
        let f = Flat::deserialize(d)?;
        fn need<T, E: Error>(v: Option<T>, name: &'static str) -> Result<T, E> {
            v.ok_or_else(|| E::missing_field(name))
        }
        Ok(match f.state {
            State::Absent => PriorState::Absent,
            State::File => PriorState::File {
                sha256: need::<_, D::Error>(f.sha256, "sha256")?,
                mode: need(f.mode, "mode")?,
                size: need(f.size, "size")?,
            },
            State::Symlink => PriorState::Symlink {
                target: need(f.target, "target")?,
            },
            State::NotCovered => PriorState::NotCovered {
                reason: need(f.reason, "reason")?,
            },
        })
    }
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
        reasonix_forward::sort::sort(&mut all);
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

#[cfg(test)]
mod prior_state_tests {
    use super::PriorState;

    /// serde's derived decoder of [`PriorState`], for comparison.
    #[derive(Debug, serde::Deserialize, PartialEq)]
    #[serde(tag = "state", rename_all = "snake_case")]
    enum Derived {
        Absent,
        File {
            sha256: String,
            mode: u32,
            size: u64,
        },
        Symlink {
            target: String,
        },
        NotCovered {
            reason: String,
        },
    }

    fn same(json: &str) -> Result<PriorState, String> {
        let ours = serde_json::from_str::<PriorState>(json).map_err(|e| e.to_string());
        let theirs = serde_json::from_str::<Derived>(json).map_err(|e| e.to_string());
        assert_eq!(
            ours.is_ok(),
            theirs.is_ok(),
            "{json}: {ours:?} vs {theirs:?}"
        );
        // Objects fail for the same reason (a JSON array, never written, only fails alike).
        if let (Err(a), Err(b), true) = (&ours, &theirs, json.starts_with('{')) {
            let first = |m: &str| m.split(" at line").next().unwrap_or("").to_string();
            assert_eq!(first(a), first(b), "{json}");
        }
        ours
    }

    #[test]
    fn prior_state_decodes_as_serde_derived_decoder_did() {
        for v in [
            PriorState::Absent,
            PriorState::File {
                sha256: "ab".into(),
                mode: 0o755,
                size: 7,
            },
            PriorState::Symlink {
                target: "../x".into(),
            },
            PriorState::NotCovered {
                reason: "too large".into(),
            },
        ] {
            let json = serde_json::to_string(&v).expect("encode");
            assert_eq!(same(&json).expect("decodes"), v, "{json}");
        }
        // Field order, unknown fields, and the refusals.
        let file = same(r#"{"size":1,"mode":420,"x":[1],"sha256":"c","state":"file"}"#);
        assert_eq!(
            file.expect("decodes"),
            PriorState::File {
                sha256: "c".into(),
                mode: 420,
                size: 1
            }
        );
        for bad in [
            r#"{"sha256":"c"}"#,
            r#"{"state":"file","sha256":"c","mode":420}"#,
            r#"{"state":"symlink"}"#,
            r#"{"state":"dir"}"#,
            r#"{"state":"file","sha256":"c","mode":-1,"size":1}"#,
            r#"[]"#,
        ] {
            assert!(same(bad).is_err(), "{bad}");
        }
    }
}
