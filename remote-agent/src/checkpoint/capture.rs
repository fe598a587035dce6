//! Recording prior states and workspace snapshots into a checkpoint.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::{restore, write_atomic, CheckpointStore, Inner, NotCovered, PriorState, Record};

impl CheckpointStore {
    /// Snapshots the workspace into `rec` (tree, oversize files, bytes added); problems become
    /// notes, never errors: a turn must not fail because its checkpoint is incomplete.
    pub(super) fn take_snapshot(&self, inner: &mut Inner, rec: &mut Record) {
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

    /// Saves the prior state of `path` into the checkpoint `id` (first time per path only).
    pub(super) fn record_prior(&self, inner: &mut Inner, id: &str, path: &Path) {
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
    pub(super) fn capture(&self, inner: &mut Inner, path: &Path) -> PriorState {
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
}
