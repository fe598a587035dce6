//! Conversation rewind on the journal file: everything from the first event of turn `N` on is
//! copied, byte for byte, to an archive next to the journal, then the journal is cut there.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::CheckpointError;

/// What [`truncate_journal`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalCut {
    /// The archive holding the removed lines, `None` when nothing was at or after the turn.
    pub archive: Option<PathBuf>,
    /// Lines left in the journal (blank lines not counted).
    pub kept_lines: usize,
    /// Lines moved to the archive.
    pub archived_lines: usize,
    /// Byte length of the journal after the cut.
    pub new_len: u64,
}

#[derive(Deserialize)]
struct TurnOnly {
    #[serde(default)]
    turn: Option<u64>,
}

/// Archives and removes every journal line from the first event whose `turn >= to_turn`.
///
/// The archive is `<journal>.rewound-<UTC timestamp>.jsonl` and holds the removed lines
/// unchanged; it is written and synced before the journal is touched. The journal is then
/// truncated **in place** (`ftruncate`), so a handle the session holds open in append mode
/// stays valid and its next write lands right after the kept part. The caller resets its own
/// turn and sequence counters. Lines that do not parse (a torn write) before the cut are kept.
pub fn truncate_journal(journal: &Path, to_turn: u64) -> Result<JournalCut, CheckpointError> {
    if to_turn == 0 {
        return Err(CheckpointError::BadTurn(to_turn));
    }
    let data = fs::read(journal).map_err(|e| CheckpointError::io(journal, e))?;
    let mut offset = 0usize;
    let mut cut = None;
    let mut kept = 0;
    for line in data.split_inclusive(|b| *b == b'\n') {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        if !body.iter().all(u8::is_ascii_whitespace) {
            let turn = serde_json::from_slice::<TurnOnly>(body)
                .ok()
                .and_then(|t| t.turn);
            if matches!(turn, Some(t) if t >= to_turn) {
                cut = Some(offset);
                break;
            }
            kept += 1;
        }
        offset += line.len();
    }
    let Some(cut) = cut else {
        return Ok(JournalCut {
            archive: None,
            kept_lines: kept,
            archived_lines: 0,
            new_len: data.len() as u64,
        });
    };
    let tail = &data[cut..];
    let archived = tail
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .count();
    let archive = archive_path(journal);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&archive)
        .map_err(|e| CheckpointError::io(&archive, e))?;
    file.write_all(tail)
        .and_then(|_| file.sync_all())
        .map_err(|e| CheckpointError::io(&archive, e))?;
    let journal_file = OpenOptions::new()
        .write(true)
        .open(journal)
        .map_err(|e| CheckpointError::io(journal, e))?;
    journal_file
        .set_len(cut as u64)
        .and_then(|_| journal_file.sync_all())
        .map_err(|e| CheckpointError::io(journal, e))?;
    Ok(JournalCut {
        archive: Some(archive),
        kept_lines: kept,
        archived_lines: archived,
        new_len: cut as u64,
    })
}

/// A fresh archive name; a counter suffix keeps two rewinds in the same millisecond apart.
fn archive_path(journal: &Path) -> PathBuf {
    let stamp = crate::clock::compact_timestamp(crate::clock::now_ms());
    let base = journal.as_os_str().to_string_lossy().into_owned();
    let mut candidate = PathBuf::from(format!("{base}.rewound-{stamp}.jsonl"));
    let mut n = 1;
    while candidate.exists() {
        candidate = PathBuf::from(format!("{base}.rewound-{stamp}-{n}.jsonl"));
        n += 1;
    }
    candidate
}
