//! Conversation rewind on a journal file: the tail from turn N is archived byte for byte and
//! cut from the journal, and a handle held open in append mode keeps working.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::io::Write;

use reasonix_remote::checkpoint::truncate_journal;

fn line(seq: u64, turn: u64, text: &str) -> String {
    format!("{{\"seq\":{seq},\"ts\":\"2025-01-01T00:00:00.000Z\",\"turn\":{turn},\"type\":\"notice\",\"text\":\"{text}\"}}\n")
}

#[test]
fn journal_tail_is_archived_and_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let journal = tmp.path().join("s1.jsonl");
    let head = [
        line(1, 0, "start"),
        line(2, 1, "one"),
        "{torn".to_string() + "\n",
        line(3, 1, "one b"),
    ]
    .concat();
    let tail = [
        line(4, 2, "two"),
        line(5, 2, "two b"),
        line(6, 0, "notice"),
        line(7, 3, "three"),
    ]
    .concat();
    std::fs::write(&journal, format!("{head}{tail}")).unwrap();
    // The session keeps its journal open for appending.
    let mut appender = std::fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .unwrap();

    let cut = truncate_journal(&journal, 2).unwrap();
    let archive = cut.archive.clone().expect("archive");
    let name = archive.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("s1.jsonl.rewound-") && name.ends_with(".jsonl"),
        "{name}"
    );
    assert_eq!(
        std::fs::read_to_string(&archive).unwrap(),
        tail,
        "archive must hold the original lines"
    );
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), head);
    assert_eq!(cut.archived_lines, 4);
    assert_eq!(cut.kept_lines, 4);
    assert_eq!(cut.new_len, head.len() as u64);

    appender
        .write_all(line(8, 2, "two again").as_bytes())
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(&journal).unwrap(),
        format!("{head}{}", line(8, 2, "two again"))
    );

    // Nothing at or after turn 5: nothing archived, nothing cut.
    let none = truncate_journal(&journal, 5).unwrap();
    assert_eq!(none.archive, None);
    assert_eq!(
        std::fs::read_to_string(&journal).unwrap().lines().count(),
        5
    );
    // A second rewind to the same turn gets its own archive.
    let again = truncate_journal(&journal, 2).unwrap();
    assert_ne!(again.archive.unwrap(), archive);
    assert!(truncate_journal(&journal, 0).is_err());
}
