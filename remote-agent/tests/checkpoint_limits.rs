//! The caps of the checkpoint store: count, bytes and per-file size are enforced and
//! reported, never exceeded silently; a file over the per-file cap is left alone by rewind.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod checkpoint_common;

use std::sync::Arc;

use checkpoint_common::*;
use reasonix_remote::checkpoint::{CheckpointStore, Limits, Options, PriorState};

fn options(limits: Limits) -> Options {
    Options {
        limits,
        ..Options::default()
    }
}

#[test]
fn count_and_file_size_limits_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    write(&ws, "small.txt", b"small\n");
    write(&ws, "big.bin", &binary_blob(3, 3000));
    let limits = Limits {
        max_checkpoints: 3,
        max_file_bytes: 1000,
        ..Limits::default()
    };
    let store = Arc::new(
        CheckpointStore::open_with(&ws, &tmp.path().join("state"), options(limits)).unwrap(),
    );
    let hook = store.hook_for("s");

    let t1 = store.begin_turn("s", 1).unwrap();
    assert!(
        t1.not_covered.iter().any(|n| n.path == "big.bin"),
        "{:?}",
        t1.not_covered
    );
    assert!(
        t1.notes
            .iter()
            .any(|n| n.contains("big.bin") && n.contains("per-file limit")),
        "{:?}",
        t1.notes
    );
    // A file tool writing the big file: recorded as not covered, never silently saved.
    tool_write(hook.as_ref(), &ws, "big.bin", &binary_blob(4, 3000));
    tool_write(hook.as_ref(), &ws, "small.txt", b"changed\n");
    sh(&ws, "echo more >> big.bin");
    let big_now = std::fs::read(ws.join("big.bin")).unwrap();

    let list = store.list("s").unwrap();
    assert!(list[0].not_covered.iter().any(|n| n.path == "big.bin"));
    let r = store.rewind("s", 1, false).unwrap();
    assert_eq!(r.restored, vec!["small.txt".to_string()]);
    assert!(
        r.skipped.iter().any(|n| n.path == "big.bin"),
        "{:?}",
        r.skipped
    );
    assert_eq!(
        std::fs::read(ws.join("big.bin")).unwrap(),
        big_now,
        "rewind touched a file it does not cover"
    );
    assert_eq!(std::fs::read(ws.join("small.txt")).unwrap(), b"small\n");

    // Only the newest 3 are kept; each drop is reported.
    let mut notes = Vec::new();
    for turn in 2..=5 {
        write(&ws, "small.txt", format!("turn {turn}\n").as_bytes());
        notes.extend(store.begin_turn("s", turn).unwrap().notes);
    }
    let list = store.list("s").unwrap();
    assert_eq!(
        list.len(),
        3,
        "{:?}",
        list.iter().map(|c| &c.id).collect::<Vec<_>>()
    );
    assert_eq!(store.stats().checkpoints, 3);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("dropped the oldest checkpoint") && n.contains("newest 3")),
        "{notes:?}"
    );
    assert!(store.stats().dropped >= 3);
    // A dropped turn cannot be rewound to, and the error says what exists.
    let err = store.rewind("s", 1, true).unwrap_err().to_string();
    assert!(err.contains("no checkpoint for turn 1"), "{err}");
}

#[test]
fn byte_limit_drops_old_checkpoints_and_never_exceeds() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let limits = Limits {
        max_checkpoints: 100,
        max_store_bytes: 400 * 1024,
        max_file_bytes: 1 << 20,
    };
    let store = Arc::new(
        CheckpointStore::open_with(&ws, &tmp.path().join("state"), options(limits)).unwrap(),
    );
    let hook = store.hook_for("s");
    let mut notes = Vec::new();
    for turn in 1..=8u64 {
        // ~100 KiB of incompressible new content per turn, half by bash, half by a tool.
        let noise: Vec<u8> = (0..50 * 1024).map(|_| rand::random::<u8>()).collect();
        write(&ws, "bash.bin", &noise);
        let info = store.begin_turn("s", turn).unwrap();
        notes.extend(info.notes);
        let noise: Vec<u8> = (0..50 * 1024).map(|_| rand::random::<u8>()).collect();
        tool_write(hook.as_ref(), &ws, "tool.bin", &noise);
        let stats = store.stats();
        assert!(
            stats.stored_bytes <= limits.max_store_bytes,
            "store holds {} bytes over its {} cap",
            stats.stored_bytes,
            limits.max_store_bytes
        );
    }
    assert!(notes.iter().any(|n| n.contains("over its")), "{notes:?}");
    let list = store.list("s").unwrap();
    assert!(list.len() < 8, "nothing was dropped");
    assert!(list.last().unwrap().covered_bash);

    // One snapshot larger than the whole cap: given up, reported, coverage says so.
    let huge: Vec<u8> = (0..600 * 1024).map(|_| rand::random::<u8>()).collect();
    write(&ws, "huge.bin", &huge);
    let info = store.begin_turn("s", 9).unwrap();
    assert!(!info.covered_bash);
    assert!(
        info.notes.iter().any(|n| n.contains("larger than")),
        "{:?}",
        info.notes
    );
    assert!(
        store.coverage().contains("not covered"),
        "{}",
        store.coverage()
    );
    assert!(store.stats().stored_bytes <= limits.max_store_bytes);
    // File tools are still covered, within the cap.
    tool_write(hook.as_ref(), &ws, "tool.bin", b"small\n");
    let list = store.list("s").unwrap();
    assert!(list
        .last()
        .unwrap()
        .changed_paths
        .contains(&"tool.bin".to_string()));
}

#[test]
fn prior_states_record_absent_content_and_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    write(&ws, "x.sh", b"#!/bin/sh\n");
    chmod(&ws, "x.sh", 0o750);
    let state = tmp.path().join("state");
    let store = Arc::new(
        CheckpointStore::open_with(
            &ws,
            &state,
            Options {
                git: reasonix_remote::checkpoint::GitMode::Off,
                ..Options::default()
            },
        )
        .unwrap(),
    );
    let hook = store.hook_for("s");
    let t = store.begin_turn("s", 1).unwrap();
    tool_write(hook.as_ref(), &ws, "x.sh", b"changed");
    tool_write(hook.as_ref(), &ws, "new.txt", b"n");
    hook.before_write(&tmp.path().join("outside.txt"));
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(state.join("meta").join(format!("{}.json", t.id))).unwrap(),
    )
    .unwrap();
    let files: std::collections::BTreeMap<String, PriorState> =
        serde_json::from_value(meta["files"].clone()).unwrap();
    match &files["x.sh"] {
        PriorState::File { mode, size, .. } => {
            assert_eq!(*mode, 0o750);
            assert_eq!(*size, 10);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(files["new.txt"], PriorState::Absent);
    let list = store.list("s").unwrap();
    assert!(
        list[0]
            .not_covered
            .iter()
            .any(|n| n.reason.contains("outside the workspace")),
        "{:?}",
        list[0].not_covered
    );
}
