//! The append-only session journal: one JSON event per line, numbered from 1.
//!
//! The file itself ([`Journal`]) is only touched by a session's writer thread
//! ([`JournalWriter`]) once the session is open: the session numbers events in memory and
//! hands them over, the writer batches them into few `write`s and fsyncs exactly at the
//! durability points the session asks for (see [`writer`]). A daemon killed with `kill -9`
//! may leave a torn last line; it is skipped (and reported) on reopen. A write that fails
//! half-way (disk full) is cut back to the last whole line, so the file never holds a torn
//! line in the middle.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use reasonix_forward::proto::{Event, EventKind};

mod summary;
pub mod writer;

pub use summary::{summarize, JournalSummary};
pub use writer::{Barrier, JournalSink, JournalWriter};

/// Errors of the journal. Cloneable so one failed write can be reported to every waiter.
#[derive(Debug, Clone, thiserror::Error)]
pub enum JournalError {
    /// I/O on the journal file failed.
    #[error("session journal {path}: {source}")]
    Io {
        /// The journal file.
        path: PathBuf,
        /// The cause.
        source: Arc<io::Error>,
    },
    /// The writer thread is gone (it panicked or the session is shutting down).
    #[error("session journal {path}: the journal writer stopped")]
    WriterGone {
        /// The journal file.
        path: PathBuf,
    },
}

impl JournalError {
    pub(crate) fn io(path: &Path, source: io::Error) -> Self {
        JournalError::Io {
            path: path.to_path_buf(),
            source: Arc::new(source),
        }
    }

    /// The journal file concerned.
    pub fn path(&self) -> &Path {
        match self {
            JournalError::Io { path, .. } | JournalError::WriterGone { path } => path,
        }
    }

    /// What the user should do about it, naming the state directory.
    pub fn advice(&self) -> String {
        let dir = self
            .path()
            .parent()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|| ".".into());
        match self {
            JournalError::Io { source, .. } => match source.raw_os_error() {
                Some(libc::ENOSPC) | Some(libc::EDQUOT) => format!(
                    "the host's disk is full: free space on the file system holding {dir} (check with `df -h {dir}`)"
                ),
                Some(libc::EROFS) | Some(libc::EACCES) | Some(libc::EPERM) => format!(
                    "the state directory {dir} is not writable: make it writable (or point REASONIX_HOME at a writable directory and restart the daemon)"
                ),
                _ => format!("check the file system holding {dir} (see the daemon log)"),
            },
            JournalError::WriterGone { .. } => {
                "restart the daemon (`reasonix remote stop`, then attach again); see the daemon log"
                    .into()
            }
        }
    }
}

/// An open journal file.
pub struct Journal {
    path: PathBuf,
    file: File,
    next_seq: u64,
    /// Lines that could not be parsed on open (torn writes).
    pub skipped_lines: usize,
}

/// Every event in the journal at `path` (none when it does not exist) and how many lines
/// did not parse (torn writes).
pub fn read_events(path: &Path) -> Result<(Vec<Event>, usize), JournalError> {
    let mut events = Vec::new();
    let mut skipped = 0;
    if path.exists() {
        let reader = BufReader::new(File::open(path).map_err(|e| JournalError::io(path, e))?);
        for line in reader.split(b'\n') {
            let line = line.map_err(|e| JournalError::io(path, e))?;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Event>(&line) {
                Ok(ev) => events.push(ev),
                Err(_) => skipped += 1,
            }
        }
    }
    Ok((events, skipped))
}

impl Journal {
    /// Open (or create) the journal at `path` and return it with every event in it.
    pub fn open(path: &Path) -> Result<(Journal, Vec<Event>), JournalError> {
        let (events, skipped) = read_events(path)?;
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| JournalError::io(path, e))?;
        // A torn last line has no newline; terminate it so the next event starts clean.
        if skipped > 0 {
            file.write_all(b"\n")
                .map_err(|e| JournalError::io(path, e))?;
        }
        let next_seq = events.last().map(|e| e.seq + 1).unwrap_or(1);
        Ok((
            Journal {
                path: path.to_path_buf(),
                file,
                next_seq,
                skipped_lines: skipped,
            },
            events,
        ))
    }

    /// Append an event and return it with its number (synchronous; used while a session is
    /// being opened, before its writer thread takes the file over).
    pub fn append(&mut self, turn: u64, kind: EventKind) -> Result<Event, JournalError> {
        let event = Event {
            seq: self.next_seq,
            ts: now_rfc3339(),
            turn,
            kind,
        };
        let line = encode(&event).map_err(|e| JournalError::io(&self.path, e))?;
        self.append_bytes(&line)?;
        self.next_seq += 1;
        Ok(event)
    }

    /// Append whole lines. All or nothing: when the write fails part-way the file is cut
    /// back to its length before, so no torn line is left behind.
    pub fn append_bytes(&mut self, bytes: &[u8]) -> Result<(), JournalError> {
        let before = self.file.metadata().map(|m| m.len());
        if let Err(e) = self.file.write_all(bytes) {
            if let Ok(len) = before {
                // Shrinking needs no space, so this works on a full disk too.
                if let Err(te) = self.file.set_len(len) {
                    tracing::error!(
                        "journal {}: could not cut a partial write back: {te}",
                        self.path.display()
                    );
                }
            }
            return Err(JournalError::io(&self.path, e));
        }
        Ok(())
    }

    /// Flush to stable storage.
    pub fn sync(&mut self) -> Result<(), JournalError> {
        self.file
            .sync_data()
            .map_err(|e| JournalError::io(&self.path, e))
    }

    /// Make the next event number at least `seq + 1` (after a truncation, numbers are never
    /// reused).
    pub fn continue_after(&mut self, seq: u64) {
        self.next_seq = self.next_seq.max(seq + 1);
    }

    /// Highest sequence number written.
    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// Path of the journal file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl JournalSink for Journal {
    fn append(&mut self, bytes: &[u8]) -> Result<(), JournalError> {
        self.append_bytes(bytes)
    }

    fn sync(&mut self) -> Result<(), JournalError> {
        Journal::sync(self)
    }
}

/// One journal line (with its newline).
pub(crate) fn encode(event: &Event) -> io::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(event).map_err(io::Error::other)?;
    line.push(b'\n');
    Ok(line)
}

/// The title of a session: the first line of its first user turn, at most 80 characters.
pub fn title_of(text: &str) -> String {
    // A skill's turn is titled by its command, not its instructions.
    if let Some(name) = crate::skills::skill_of_turn_text(text) {
        return format!("/{name}");
    }
    text.lines().next().unwrap_or("").chars().take(80).collect()
}

pub use crate::clock::now_rfc3339;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_last_line_is_skipped_and_numbering_continues() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.jsonl");
        {
            let (mut j, ev) = Journal::open(&path).expect("open");
            assert!(ev.is_empty());
            j.append(1, EventKind::Notice { text: "a".into() })
                .expect("append");
            j.append(1, EventKind::Notice { text: "b".into() })
                .expect("append");
            j.sync().expect("sync");
        }
        // Simulate a crash in the middle of a write.
        let mut f = OpenOptions::new().append(true).open(&path).expect("reopen");
        f.write_all(b"{\"seq\":3,\"ts\":\"x\",\"tu").expect("write");
        drop(f);
        let (mut j, ev) = Journal::open(&path).expect("open again");
        assert_eq!(ev.len(), 2);
        assert_eq!(j.skipped_lines, 1);
        let e = j
            .append(2, EventKind::Notice { text: "c".into() })
            .expect("append");
        assert_eq!(e.seq, 3);
        drop(j);
        let (_, ev) = Journal::open(&path).expect("open third");
        assert_eq!(ev.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2, 3]);
    }

    #[test]
    fn advice_names_the_directory_and_the_fix() {
        let e = JournalError::io(
            Path::new("/state/sessions/k/s.jsonl"),
            io::Error::from_raw_os_error(libc::ENOSPC),
        );
        assert!(e.to_string().contains("/state/sessions/k/s.jsonl"), "{e}");
        assert!(
            e.advice().contains("df -h /state/sessions/k"),
            "{}",
            e.advice()
        );
        let ro = JournalError::io(
            Path::new("/ro/s.jsonl"),
            io::Error::from_raw_os_error(libc::EROFS),
        );
        assert!(ro.advice().contains("not writable"), "{}", ro.advice());
    }
}
