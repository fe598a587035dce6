//! The workspace's prompt history: what users sent from the composer, shared by every
//! client that attaches to the workspace's daemon (two laptops see the same history).
//!
//! One JSON string per line in `prompt-history.ndjson` in the workspace's state directory
//! (0700), the file 0600. Bounded to [`MAX_ENTRIES`] entries and [`MAX_BYTES`] bytes, the
//! oldest dropped first; rewritten atomically (temp file + rename) on every append. Only
//! composer submissions are stored: host-key answers, passwords and passphrases are typed
//! into prompt modals that never reach the composer.

use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use reasonix_forward::sync::LockExt;

/// Most entries kept.
pub const MAX_ENTRIES: usize = 1000;
/// Most bytes kept (the file's size, one JSON line per entry).
pub const MAX_BYTES: usize = 1024 * 1024;
/// Longest single entry stored; longer prompts (pasted logs) are not kept.
pub const MAX_ENTRY_BYTES: usize = 64 * 1024;

/// File name inside the workspace's state directory (not `.jsonl`: that suffix names session
/// journals there).
pub const FILE_NAME: &str = "prompt-history.ndjson";

/// Errors of the history store.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// Reading or writing the file failed.
    #[error("prompt history {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
}

/// The store; appends are serialised by its lock (one daemon per workspace).
#[derive(Debug)]
pub struct PromptHistory {
    path: PathBuf,
    lock: Mutex<()>,
    max_entries: usize,
    max_bytes: usize,
}

impl PromptHistory {
    /// The history kept in `state_dir`.
    pub fn new(state_dir: &Path) -> Self {
        Self::with_bounds(state_dir, MAX_ENTRIES, MAX_BYTES)
    }

    /// The history kept in `state_dir` with other bounds (tests).
    pub fn with_bounds(state_dir: &Path, max_entries: usize, max_bytes: usize) -> Self {
        PromptHistory {
            path: state_dir.join(FILE_NAME),
            lock: Mutex::new(()),
            max_entries,
            max_bytes,
        }
    }

    /// All entries, oldest first. A missing file is an empty history; unreadable lines
    /// (a hand-edited file) are skipped.
    pub fn list(&self) -> Result<Vec<String>, HistoryError> {
        let _g = self.lock.lock_or_recover();
        self.read()
    }

    fn read(&self) -> Result<Vec<String>, HistoryError> {
        match std::fs::read_to_string(&self.path) {
            Ok(s) => Ok(s
                .lines()
                .filter_map(|l| serde_json::from_str::<String>(l).ok())
                .collect()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(source) => Err(HistoryError::Io {
                path: self.path.clone(),
                source,
            }),
        }
    }

    /// Add `text` (blank text, a repeat of the newest entry and entries over
    /// [`MAX_ENTRY_BYTES`] are not stored), then trim to the bounds.
    pub fn append(&self, text: &str) -> Result<(), HistoryError> {
        if text.trim().is_empty() || text.len() > MAX_ENTRY_BYTES {
            return Ok(());
        }
        let _g = self.lock.lock_or_recover();
        let mut entries = self.read()?;
        if entries.last().map(String::as_str) == Some(text) {
            return Ok(());
        }
        entries.push(text.to_string());
        let lines: Vec<String> = entries
            .iter()
            .map(|e| serde_json::Value::String(e.clone()).to_string())
            .collect();
        let mut start = lines.len().saturating_sub(self.max_entries);
        let mut bytes: usize = lines[start..].iter().map(|l| l.len() + 1).sum();
        while bytes > self.max_bytes && start < lines.len() {
            bytes -= lines[start].len() + 1;
            start += 1;
        }
        let mut body = String::with_capacity(bytes);
        for l in &lines[start..] {
            body.push_str(l);
            body.push('\n');
        }
        self.write_atomic(body.as_bytes())
            .map_err(|source| HistoryError::Io {
                path: self.path.clone(),
                source,
            })
    }

    fn write_atomic(&self, body: &[u8]) -> io::Result<()> {
        let tmp = self
            .path
            .with_extension(format!("tmp-{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(body)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn bounded_deduplicated_private() {
        let dir = tempfile::tempdir().expect("dir");
        let h = PromptHistory::new(dir.path());
        assert!(h.list().expect("list").is_empty());
        h.append("one").expect("append");
        h.append("one").expect("append");
        h.append("  ").expect("append");
        h.append("two\nlines \"quoted\"").expect("append");
        assert_eq!(
            h.list().expect("list"),
            vec!["one", "two\nlines \"quoted\""]
        );
        let mode = std::fs::metadata(dir.path().join(FILE_NAME))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let h = PromptHistory::with_bounds(dir.path(), 50, 4096);
        for i in 0..55 {
            h.append(&format!("p{i}")).expect("append");
        }
        let all = h.list().expect("list");
        assert_eq!(all.len(), 50);
        assert_eq!(all.last().map(String::as_str), Some("p54"));
        assert_eq!(all[0], "p5");
        // The byte bound: big entries push old ones out.
        let big = "x".repeat(1000);
        for _ in 0..10 {
            h.append(&big).expect("append");
            h.append("sep").expect("append");
        }
        let size = std::fs::metadata(dir.path().join(FILE_NAME))
            .expect("meta")
            .len() as usize;
        assert!(size <= 4096, "{size}");
        assert!(size > 3000, "{size}");
        assert_eq!(
            h.list().expect("list").last().map(String::as_str),
            Some("sep")
        );
        // Over the entry bound: not stored.
        h.append(&"y".repeat(MAX_ENTRY_BYTES + 1)).expect("append");
        assert_eq!(
            h.list().expect("list").last().map(String::as_str),
            Some("sep")
        );
    }
}
