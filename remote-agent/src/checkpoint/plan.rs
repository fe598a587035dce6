//! Rewind: planning the restore of a checkpoint and applying it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::clock::now_ms;
use sha2::{Digest, Sha256};

use super::restore::{self, ModeSpec, Op, Source};
use super::shadow::{self, Shadow};
use super::{
    CheckpointError, CheckpointKind, CheckpointStore, Inner, NotCovered, PriorState, Record,
    RewindReport,
};

impl CheckpointStore {
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
        Record::empty("dry-run".into(), u64::MAX, session, 0, CheckpointKind::Turn)
    }

    /// Removes every trace of an undo record that never became a checkpoint.
    fn forget_unsaved(&self, inner: &mut Inner, rec: &Record) {
        if let (Some(shadow), Some(_)) = (&self.shadow, &rec.tree) {
            let _ = shadow.delete_ref(&rec.id);
        }
        let _ = fs::remove_file(self.state_dir.join("meta").join(format!("{}.json", rec.id)));
        self.release_blobs(inner, rec);
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
        reasonix_forward::sort::sort(&mut report.restored);
        reasonix_forward::sort::sort(&mut report.removed);
        reasonix_forward::sort::sort(&mut report.mode_changed);
        reasonix_forward::sort::sort_by(&mut report.skipped, |a, b| a.path.cmp(&b.path));
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
}
