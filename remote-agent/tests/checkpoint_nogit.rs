//! Without git on the host: file-tool changes are still restored, bash changes are not, and
//! the store says so. This file holds one test because it changes the process's PATH.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod checkpoint_common;

use std::sync::Arc;

use checkpoint_common::*;
use reasonix_remote::checkpoint::CheckpointStore;

#[test]
fn without_git_only_file_tools_are_covered_and_coverage_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let empty_bin = tmp.path().join("bin");
    std::fs::create_dir(&empty_bin).unwrap();
    // The store looks for git on PATH; this PATH has none.
    std::env::set_var("PATH", &empty_bin);
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    write(&ws, "tool.txt", b"before\n");
    write(&ws, "bash.txt", b"before\n");
    write(&ws, "run.sh", b"#!/bin/sh\n");
    let store = Arc::new(CheckpointStore::open(&ws, &tmp.path().join("state")).unwrap());
    let coverage = store.coverage();
    assert!(coverage.contains("git is not installed"), "{coverage}");
    assert!(coverage.contains("bash are not covered"), "{coverage}");
    assert!(!store.stats().shadow);
    assert!(!tmp.path().join("state/shadow.git").exists());

    let hook = store.hook_for("s");
    let t = store.begin_turn("s", 1).unwrap();
    assert!(!t.covered_bash);
    tool_write(hook.as_ref(), &ws, "tool.txt", b"after\n");
    tool_write(hook.as_ref(), &ws, "tool_new.txt", b"new\n");
    hook.before_write(&ws.join("run.sh"));
    chmod(&ws, "run.sh", 0o755);
    sh(&ws, "echo after > bash.txt && echo new > bash_new.txt");

    let r = store.rewind("s", 1, false).unwrap();
    assert!(r.coverage.contains("bash are not covered"));
    assert_eq!(r.restored, vec!["tool.txt".to_string()]);
    assert_eq!(r.removed, vec!["tool_new.txt".to_string()]);
    assert_eq!(r.mode_changed, vec!["run.sh".to_string()]);
    assert_eq!(std::fs::read(ws.join("tool.txt")).unwrap(), b"before\n");
    assert!(!ws.join("tool_new.txt").exists());
    // Bash changes are not covered and are honestly left as they are.
    assert_eq!(std::fs::read(ws.join("bash.txt")).unwrap(), b"after\n");
    assert!(ws.join("bash_new.txt").exists());
    // Undo works from the file-tool layer alone.
    store
        .rewind_to(r.undo_checkpoint.as_deref().unwrap(), false)
        .unwrap();
    assert_eq!(std::fs::read(ws.join("tool.txt")).unwrap(), b"after\n");
    assert_eq!(std::fs::read(ws.join("tool_new.txt")).unwrap(), b"new\n");
}
