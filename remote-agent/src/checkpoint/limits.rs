//! The count and byte caps: dropping the oldest checkpoints.

use std::collections::HashSet;
use std::fs;

use super::{CheckpointStore, Inner, PriorState, Record};

impl CheckpointStore {
    /// Applies the count and byte caps after `new_id` was added; returns what happened.
    pub(super) fn enforce_limits(&self, inner: &mut Inner, new_id: &str) -> Vec<String> {
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
        self.release_blobs(inner, &rec);
    }

    /// Delete the blobs `rec` held that no record still in `inner` uses.
    pub(super) fn release_blobs(&self, inner: &mut Inner, rec: &Record) {
        let used: HashSet<&str> = inner
            .records
            .iter()
            .flat_map(|r| r.files.values())
            .filter_map(|s| match s {
                PriorState::File { sha256, .. } => Some(sha256.as_str()),
                _ => None,
            })
            .collect();
        let mut freed = 0u64;
        for state in rec.files.values() {
            if let PriorState::File { sha256, size, .. } = state {
                if !used.contains(sha256.as_str())
                    && fs::remove_file(self.state_dir.join("blobs").join(sha256)).is_ok()
                {
                    freed += *size;
                }
            }
        }
        inner.blob_bytes = inner.blob_bytes.saturating_sub(freed);
    }
}
