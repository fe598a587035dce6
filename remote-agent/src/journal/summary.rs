//! What a session listing needs from a journal that is not open: read from its head (created,
//! title) and its tail (last seq, turn count) without loading the events in between.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use reasonix_forward::proto::{Event, EventKind};
use serde::Deserialize;

use super::{title_of, JournalError};

/// Metadata of a journal on disk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JournalSummary {
    /// Timestamp of the first event.
    pub created: String,
    /// Highest turn number (the last event's turn: turns only grow, a rewind cuts the file).
    pub turns: u64,
    /// Seq of the last whole event.
    pub last_seq: u64,
    /// First line of the first user turn.
    pub title: String,
    /// Timestamp of the last whole event.
    pub last_ts: String,
}

/// Lines read from the head looking for the first user turn (it is the second event of a
/// session; a few notices may precede it).
const HEAD_LINES: usize = 32;
/// First tail window; doubled while the last whole line does not fit.
const TAIL_WINDOW: u64 = 64 * 1024;

#[derive(Deserialize)]
struct SeqTurn {
    seq: u64,
    #[serde(default)]
    turn: u64,
    #[serde(default)]
    ts: String,
}

/// Read the summary of the journal at `path`: a few lines from the head, a window from the
/// tail. Memory stays bounded by the largest single line read.
pub fn summarize(path: &Path) -> Result<JournalSummary, JournalError> {
    let io = |e| JournalError::io(path, e);
    let mut file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let mut out = JournalSummary::default();
    let mut reader = BufReader::new(&mut file);
    let mut line = Vec::new();
    for _ in 0..HEAD_LINES {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(io)? == 0 {
            break;
        }
        let Ok(ev) = serde_json::from_slice::<Event>(&line) else {
            continue;
        };
        if out.created.is_empty() {
            out.created = ev.ts.clone();
        }
        if let EventKind::UserTurn { text, .. } = &ev.kind {
            out.title = title_of(text);
            break;
        }
    }
    drop(reader);
    let mut window = TAIL_WINDOW.min(len);
    while window > 0 {
        file.seek(SeekFrom::Start(len - window)).map_err(io)?;
        let mut buf = Vec::with_capacity(window as usize);
        (&mut file).take(window).read_to_end(&mut buf).map_err(io)?;
        // Unless the window starts the file, its first line is a fragment.
        let whole = if window == len {
            &buf[..]
        } else {
            match buf.iter().position(|b| *b == b'\n') {
                Some(i) => &buf[i + 1..],
                None => &[][..],
            }
        };
        let last = whole
            .split(|b| *b == b'\n')
            .rev()
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
            .find_map(|l| serde_json::from_slice::<SeqTurn>(l).ok());
        if let Some(last) = last {
            out.last_seq = last.seq;
            out.turns = last.turn;
            out.last_ts = last.ts;
            break;
        }
        if window == len {
            break;
        }
        window = (window * 2).min(len);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Journal;
    use std::io::Write;

    #[test]
    fn head_and_tail_give_the_listing_fields() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.jsonl");
        let (mut j, _) = Journal::open(&path).expect("open");
        j.append(0, EventKind::Notice { text: "hi".into() })
            .expect("append");
        j.append(
            1,
            EventKind::UserTurn {
                request_id: "r".into(),
                text: "fix the build\nplease".into(),
                attachments: Vec::new(),
            },
        )
        .expect("append");
        // A last event far bigger than the first tail window.
        j.append(
            3,
            EventKind::Notice {
                text: "x".repeat(300 * 1024),
            },
        )
        .expect("append");
        drop(j);
        // And a torn line after it, as `kill -9` leaves.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("reopen");
        f.write_all(b"{\"seq\":4,\"ts\":").expect("torn");
        drop(f);
        let s = summarize(&path).expect("summary");
        assert_eq!(s.title, "fix the build");
        assert_eq!(s.last_seq, 3);
        assert_eq!(s.turns, 3);
        assert!(s.created.ends_with('Z'), "{}", s.created);
        assert!(
            s.last_ts.ends_with('Z') && s.last_ts >= s.created,
            "{}",
            s.last_ts
        );
    }

    #[test]
    fn an_empty_journal_summarises_to_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("e.jsonl");
        std::fs::write(&path, b"").expect("write");
        assert_eq!(
            summarize(&path).expect("summary"),
            JournalSummary::default()
        );
    }
}
