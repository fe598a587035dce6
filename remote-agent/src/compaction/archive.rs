//! The compaction archive: every message a compaction removed or snipped, as JSONL in
//! `<sessions dir>/archive/<session id>.jsonl`, one record a line, written and fsynced before
//! the rewrite is journaled so nothing is ever lost.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One archived message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArchivedMessage {
    /// Archive id (unique within the session's archive).
    pub id: String,
    /// Turn the message belonged to when it was archived (the turn of the compaction).
    pub turn: u64,
    /// `snip` or `summary`.
    pub kind: String,
    /// The message exactly as it was in the conversation.
    pub message: Value,
}

/// Errors of the archive.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// Writing or reading the file failed.
    #[error("compaction archive {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The archive file of session `id` in `sessions_dir`.
pub fn archive_path(sessions_dir: &Path, id: &str) -> PathBuf {
    sessions_dir.join("archive").join(format!("{id}.jsonl"))
}

/// The archive file name relative to the sessions directory (what events carry).
pub fn archive_name(id: &str) -> String {
    format!("archive/{id}.jsonl")
}

/// Append `records` and fsync (0600 file in a 0700 directory: tool output can be private).
pub fn append(path: &Path, records: &[ArchivedMessage]) -> Result<(), ArchiveError> {
    let io = |source| ArchiveError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
    let mut text = String::new();
    for r in records {
        // A record is plain data (strings and JSON values): serialising cannot fail.
        text.push_str(&serde_json::to_string(r).unwrap_or_default());
        text.push('\n');
    }
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)
}

/// The id of the archive's record number `n`: `a<n>` (event ids in the history are `e<seq>`).
pub fn record_id(n: u64) -> String {
    format!("a{n}")
}

/// The number the next record gets: one past the highest `a<n>` id in the archive, and at
/// least the number of records (ids of older formats count but are never reused). Records
/// survive rewinds, so a number is never given twice in a session.
pub fn next_number(path: &Path) -> Result<u64, ArchiveError> {
    let records = read_all(path)?;
    let highest = records
        .iter()
        .filter_map(|r| r.id.strip_prefix('a')?.parse::<u64>().ok())
        .map(|n| n + 1)
        .max()
        .unwrap_or(0);
    Ok(highest.max(records.len() as u64))
}

/// Every record of the archive (a missing file is an empty archive; a torn last line, left
/// by a crash during an append, is skipped).
pub fn read_all(path: &Path) -> Result<Vec<ArchivedMessage>, ArchiveError> {
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(ArchiveError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let mut out = Vec::new();
    for line in std::io::BufReader::new(f).lines() {
        let line = line.map_err(|source| ArchiveError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if let Ok(r) = serde_json::from_str(&line) {
            out.push(r);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> ArchivedMessage {
        ArchivedMessage {
            id: id.into(),
            turn: 1,
            kind: "snip".into(),
            message: serde_json::json!({"role": "tool", "content": id}),
        }
    }

    #[test]
    fn record_numbers_go_on_from_the_highest_and_never_repeat() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = archive_path(dir.path(), "s1");
        assert_eq!(next_number(&path).expect("missing file"), 0);
        // Ids of the older random format count as records but are never parsed as numbers.
        append(
            &path,
            &[record("ar00aa11bb22cc-0"), record("ar00aa11bb22cc-1")],
        )
        .expect("append");
        assert_eq!(next_number(&path).expect("read"), 2);
        append(&path, &[record(&record_id(2)), record(&record_id(7))]).expect("append");
        assert_eq!(next_number(&path).expect("read"), 8);
        // A torn last line (a crash during an append) does not lower the number.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(b"{\"id\":\"a9\",\"tu"))
            .expect("tear");
        assert_eq!(next_number(&path).expect("read"), 8);
        let ids: Vec<String> = read_all(&path)
            .expect("read")
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(ids, ["ar00aa11bb22cc-0", "ar00aa11bb22cc-1", "a2", "a7"]);
    }
}
