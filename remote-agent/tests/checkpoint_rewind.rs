//! Rewind of tool and bash changes on a real git workspace, with real files and the real
//! `git` binary: exact bytes and modes come back, new files go, the user's `.git` is never
//! touched, the rewind can be undone, and a restore that fails half-way changes nothing.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod checkpoint_common;

use std::sync::Arc;

use checkpoint_common::*;
use reasonix_remote::checkpoint::{CheckpointError, CheckpointKind, CheckpointStore};

/// A workspace that is a real git repository with history, a stash, a staged change, an
/// untracked file, ignored files and hooks that would leave a mark if anything ran them.
fn setup_repo(ws: &std::path::Path) {
    user_git(ws, &["init", "-q", "-b", "main"]);
    write(ws, ".gitignore", b"build/\n*.log\nsecret/\n");
    write(ws, ".gitattributes", b"* text=auto\n");
    write(ws, "README.md", b"hello world\nsecond line\n");
    write(
        ws,
        "src/main.rs",
        b"fn main() {\n    println!(\"hello\");\n}\n",
    );
    write(ws, "crlf.txt", b"one\r\ntwo\r\n");
    write(ws, "data.bin", &binary_blob(1, 4096));
    write(ws, "script.sh", b"#!/bin/sh\necho hi\n");
    chmod(ws, "script.sh", 0o644);
    write(ws, "private.txt", b"only me\n");
    chmod(ws, "private.txt", 0o600);
    write(ws, "old_name.txt", b"renamed by the move tool\n");
    write(ws, "bash_rename.txt", b"renamed by mv\n");
    write(ws, "delete_me.txt", b"removed by rm\n");
    user_git(ws, &["add", "-A"]);
    user_git(ws, &["commit", "-q", "-m", "first"]);
    write(ws, "src/lib.rs", b"pub fn lib() {}\n");
    user_git(ws, &["add", "src/lib.rs"]);
    user_git(ws, &["commit", "-q", "-m", "second"]);
    // A stash entry.
    write(ws, "src/lib.rs", b"pub fn stashed() {}\n");
    user_git(ws, &["stash", "-q"]);
    // A staged change and an untracked file.
    write(ws, "README.md", b"hello world\nsecond line\nstaged line\n");
    user_git(ws, &["add", "README.md"]);
    write(ws, "untracked.txt", b"not in the user's index\n");
    // Ignored content, by .gitignore and by the user's own .git/info/exclude.
    write(ws, "build/out.o", b"object code\n");
    std::fs::write(ws.join(".git/info/exclude"), "local_only/\n").unwrap();
    write(ws, "local_only/notes.txt", b"mine\n");
    write(ws, "app.log", b"log line 1\n");
    // Hooks that would leave a mark in the workspace if any git command ran them.
    for hook in [
        "pre-commit",
        "post-index-change",
        "post-checkout",
        "reference-transaction",
    ] {
        let p = ws.join(".git/hooks").join(hook);
        std::fs::write(
            &p,
            format!("#!/bin/sh\ntouch '{}/HOOK_RAN_{hook}'\n", ws.display()),
        )
        .unwrap();
        chmod(ws, &format!(".git/hooks/{hook}"), 0o755);
    }
}

#[test]
fn rewind_restores_tool_and_bash_changes_and_can_be_undone() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    let state = tmp.path().join("state");
    setup_repo(&ws);
    // `--no-optional-locks`: the test's own `git status` must not rewrite the index.
    let status = |ws: &std::path::Path| {
        user_git(
            ws,
            &[
                "--no-optional-locks",
                "status",
                "--porcelain=v1",
                "--untracked-files=all",
            ],
        )
    };
    let head_before = user_git(&ws, &["rev-parse", "HEAD"]);
    let status_before = status(&ws);
    let stash_before = user_git(&ws, &["stash", "list"]);
    let before = picture(&ws);
    let git_before = git_picture(&ws);

    let store = Arc::new(CheckpointStore::open(&ws, &state).unwrap());
    assert!(store.coverage().contains("bash"), "{}", store.coverage());
    let hook = store.hook_for("s1");

    // ---- turn 1: file tools and bash.
    let t1 = store.begin_turn("s1", 1).unwrap();
    assert!(t1.covered_bash);
    assert_eq!(t1.turn, 1);
    tool_write(hook.as_ref(), &ws, "src/main.rs", b"fn main() {}\n");
    tool_write(
        hook.as_ref(),
        &ws,
        "src/new_tool.rs",
        b"// created by a tool\n",
    );
    tool_move(hook.as_ref(), &ws, "old_name.txt", "renamed.txt");
    tool_write(hook.as_ref(), &ws, "app.log", b"rewritten by a tool\n");
    tool_write(hook.as_ref(), &ws, "private.txt", b"changed\n");
    sh(
        &ws,
        "sed -i 's/hello/HELLO/' README.md && rm delete_me.txt && mv bash_rename.txt bash_renamed.txt \
         && echo new > bash_new.txt && chmod +x script.sh && printf '\\000\\001\\377' >> data.bin \
         && printf 'x\\r\\n' >> crlf.txt && mkdir -p gen/deep && echo g > gen/deep/x.txt \
         && echo changed > build/out.o && echo also > local_only/notes.txt \
         && ln -s README.md link_to_readme && chmod 755 private.txt",
    );

    // ---- turn 2: more of both.
    let t2 = store.begin_turn("s1", 2).unwrap();
    assert_ne!(t1.id, t2.id);
    tool_write(
        hook.as_ref(),
        &ws,
        "src/main.rs",
        b"fn main() { turn2(); }\n",
    );
    sh(
        &ws,
        "rm src/new_tool.rs && echo more >> untracked.txt && echo t2 > t2_new.txt",
    );
    let after = picture(&ws);
    assert_eq!(
        git_picture(&ws),
        git_before,
        "taking checkpoints changed the user's .git"
    );

    // The listing says what each turn changed.
    let list = store.list("s1").unwrap();
    assert_eq!(list.len(), 2);
    assert!(
        list[0].changed_paths.contains(&"delete_me.txt".to_string()),
        "{:?}",
        list[0]
    );
    assert!(list[0].changed_paths.contains(&"app.log".to_string()));
    assert!(
        list[1].changed_paths.contains(&"t2_new.txt".to_string()),
        "{:?}",
        list[1]
    );
    assert!(!list[1].changed_paths.contains(&"delete_me.txt".to_string()));

    // ---- dry run: reports, changes nothing.
    let dry = store.rewind("s1", 1, true).unwrap();
    assert!(dry.dry_run);
    assert_eq!(dry.undo_checkpoint, None);
    assert_same(&picture(&ws), &after, "a dry run changed the workspace");
    for p in [
        "README.md",
        "src/main.rs",
        "old_name.txt",
        "bash_rename.txt",
        "delete_me.txt",
        "data.bin",
        "crlf.txt",
        "app.log",
        "private.txt",
    ] {
        assert!(
            dry.restored.contains(&p.to_string()),
            "{p} not in {:?}",
            dry.restored
        );
    }
    for p in [
        "renamed.txt",
        "bash_renamed.txt",
        "bash_new.txt",
        "gen/deep/x.txt",
        "link_to_readme",
        "t2_new.txt",
    ] {
        assert!(
            dry.removed.contains(&p.to_string()),
            "{p} not in {:?}",
            dry.removed
        );
    }
    assert!(dry.restored.contains(&"untracked.txt".to_string()));
    assert_eq!(dry.mode_changed, vec!["script.sh".to_string()]);
    assert!(
        !dry.paths().iter().any(|p| p.starts_with("build/")),
        "ignored file touched: {:?}",
        dry.paths()
    );

    // ---- the rewind.
    let report = store.rewind("s1", 1, false).unwrap();
    assert_eq!(report.restored, dry.restored);
    assert_eq!(report.removed, dry.removed);
    assert_eq!(report.mode_changed, dry.mode_changed);
    let undo = report.undo_checkpoint.clone().expect("undo checkpoint");
    let mut expected = before.clone();
    // The ignored file bash changed is not covered and must be left exactly as bash left it.
    expected.insert("build/out.o".into(), after["build/out.o"].clone());
    expected.insert(
        "local_only/notes.txt".into(),
        after["local_only/notes.txt"].clone(),
    );
    assert_same(
        &picture(&ws),
        &expected,
        "rewind did not restore the pre-turn state",
    );
    assert_eq!(
        git_picture(&ws),
        git_before,
        "rewind changed the user's .git"
    );
    assert_eq!(user_git(&ws, &["rev-parse", "HEAD"]), head_before);
    assert_eq!(status(&ws), status_before);
    assert_eq!(user_git(&ws, &["stash", "list"]), stash_before);

    // The undo point is listed as such.
    let list = store.list("s1").unwrap();
    let u = list.iter().find(|c| c.id == undo).unwrap();
    assert_eq!(
        u.kind,
        CheckpointKind::BeforeRewind {
            target: t1.id.clone()
        }
    );

    // ---- undo: back to the post-turn state.
    let back = store.rewind_to(&undo, false).unwrap();
    assert!(back.undo_checkpoint.is_some());
    assert_same(
        &picture(&ws),
        &after,
        "undo did not return to the post-turn state",
    );
    let git_after_all = git_picture(&ws);
    assert_eq!(git_after_all, git_before, "undo changed the user's .git");
    assert!(!git_after_all.keys().any(|k| k.contains("HOOK_RAN")));
    assert!(!ws.read_dir().unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with("HOOK_RAN")));

    // ---- checkpoints survive a restart of the daemon.
    drop(hook);
    drop(store);
    let store = CheckpointStore::open(&ws, &state).unwrap();
    let ids: Vec<String> = store
        .list("s1")
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert!(
        ids.contains(&t1.id) && ids.contains(&t2.id) && ids.contains(&undo),
        "{ids:?}"
    );
    store.rewind("s1", 2, false).unwrap();
    let mut at_t2 = after.clone();
    at_t2.insert(
        "src/main.rs".into(),
        Entry::File {
            bytes: b"fn main() {}\n".to_vec(),
            mode: 0o644,
        },
    );
    at_t2.insert(
        "src/new_tool.rs".into(),
        Entry::File {
            bytes: b"// created by a tool\n".to_vec(),
            mode: 0o644,
        },
    );
    at_t2.insert("untracked.txt".into(), before["untracked.txt"].clone());
    at_t2.remove("t2_new.txt");
    assert_same(&picture(&ws), &at_t2, "rewind to turn 2 after reopening");
}

#[test]
fn unchanged_turns_cost_nothing_and_begin_turn_is_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    for i in 0..50 {
        write(
            &ws,
            &format!("d{}/f{i}.txt", i % 5),
            format!("file {i}\n").as_bytes(),
        );
    }
    let store = CheckpointStore::open(&ws, &tmp.path().join("state")).unwrap();
    let a = store.begin_turn("s", 1).unwrap();
    assert!(a.bytes > 0);
    let again = store.begin_turn("s", 1).unwrap();
    assert_eq!(again.id, a.id);
    let b = store.begin_turn("s", 2).unwrap();
    assert_eq!(b.bytes, 0, "an unchanged workspace stored new content");
    write(&ws, "d1/f1.txt", b"changed\n");
    let c = store.begin_turn("s", 3).unwrap();
    assert!(c.bytes > 0);
    assert_eq!(store.list("s").unwrap()[1].files_changed, 1);
}

#[test]
fn rewinding_the_conversation_supersedes_later_turns() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let store = Arc::new(CheckpointStore::open(&ws, &tmp.path().join("state")).unwrap());
    let hook = store.hook_for("s");
    store.begin_turn("s", 1).unwrap();
    tool_write(hook.as_ref(), &ws, "a.txt", b"1\n");
    let t2 = store.begin_turn("s", 2).unwrap();
    tool_write(hook.as_ref(), &ws, "a.txt", b"2\n");
    store.begin_turn("s", 3).unwrap();
    tool_write(hook.as_ref(), &ws, "a.txt", b"3\n");
    store.rewind("s", 2, false).unwrap();
    assert_eq!(std::fs::read(ws.join("a.txt")).unwrap(), b"1\n");
    // The conversation went back too: turn 2 runs again.
    let t2b = store.begin_turn("s", 2).unwrap();
    assert_ne!(t2b.id, t2.id);
    tool_write(hook.as_ref(), &ws, "a.txt", b"2b\n");
    let list = store.list("s").unwrap();
    assert!(list.iter().find(|c| c.id == t2.id).unwrap().superseded);
    assert!(!list.iter().find(|c| c.id == t2b.id).unwrap().superseded);
    let r = store.rewind("s", 2, false).unwrap();
    assert_eq!(r.target, t2b.id);
    assert_eq!(std::fs::read(ws.join("a.txt")).unwrap(), b"1\n");
    // A turn with no checkpoint is a clear error.
    match store.rewind("s", 9, true) {
        Err(CheckpointError::NoCheckpoint {
            turn: 9, available, ..
        }) => assert!(available.contains('1'), "{available}"),
        other => panic!("expected NoCheckpoint, got {other:?}"),
    }
}

/// Makes `path` impossible to rename or replace, even for root. Returns how, or `None`.
fn lock_file(path: &std::path::Path) -> Option<&'static str> {
    let ok = std::process::Command::new("chattr")
        .arg("+i")
        .arg(path)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    ok.then_some("chattr +i")
}

fn unlock_file(path: &std::path::Path) {
    let _ = std::process::Command::new("chattr")
        .arg("-i")
        .arg(path)
        .status();
}

#[test]
fn a_restore_that_fails_midway_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    write(&ws, "a.txt", b"a0\n");
    write(&ws, "m/m.txt", b"m0\n");
    write(&ws, "run.sh", b"#!/bin/sh\n");
    write(&ws, "zz_locked.txt", b"z0\n");
    let store = Arc::new(CheckpointStore::open(&ws, &tmp.path().join("state")).unwrap());
    let hook = store.hook_for("s");
    store.begin_turn("s", 1).unwrap();
    tool_write(hook.as_ref(), &ws, "a.txt", b"a1\n");
    tool_write(hook.as_ref(), &ws, "b_new.txt", b"new\n");
    sh(&ws, "echo m1 > m/m.txt && chmod +x run.sh && echo z1 > zz_locked.txt && mkdir -p n/deep && echo n > n/deep/n.txt");
    let post = picture(&ws);

    // The last file the plan writes cannot be replaced: applying fails after the deletes and
    // the earlier writes were done, and all of them must be undone.
    let locked = ws.join("zz_locked.txt");
    let Some(how) = lock_file(&locked) else {
        eprintln!("SKIPPED: chattr +i is not available on this filesystem, cannot make a file unwritable for root");
        return;
    };
    let result = store.rewind("s", 1, false);
    unlock_file(&locked);
    match result {
        Err(CheckpointError::RestoreFailed {
            path,
            rollback_errors,
            ..
        }) => {
            assert_eq!(
                path, "zz_locked.txt",
                "failed at an unexpected step ({how})"
            );
            assert!(rollback_errors.is_empty(), "{rollback_errors:?}");
        }
        other => panic!("expected RestoreFailed with {how}, got {other:?}"),
    }
    assert_same(&picture(&ws), &post, "a failed restore left changes behind");
    // The failed attempt leaves no undo point behind.
    assert!(store
        .list("s")
        .unwrap()
        .iter()
        .all(|c| matches!(c.kind, CheckpointKind::Turn)));

    // Unlocked, the same rewind goes through.
    let r = store.rewind("s", 1, false).unwrap();
    assert!(r.removed.contains(&"b_new.txt".to_string()));
    assert_eq!(std::fs::read(ws.join("zz_locked.txt")).unwrap(), b"z0\n");
    assert_eq!(std::fs::read(ws.join("a.txt")).unwrap(), b"a0\n");
    assert!(!ws.join("n").exists());
}

#[test]
fn restores_never_pass_through_symlinks() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(&outside).unwrap();
    let ws = ws.canonicalize().unwrap();
    write(&ws, ".gitignore", b"cache\n");
    write(&ws, "cache/f.txt", b"cached\n");
    write(&ws, "lib/a.rs", b"a\n");
    let store = Arc::new(CheckpointStore::open(&ws, &tmp.path().join("state")).unwrap());
    let hook = store.hook_for("s");
    store.begin_turn("s", 1).unwrap();
    tool_write(hook.as_ref(), &ws, "cache/f.txt", b"changed by a tool\n");
    // bash swaps the ignored directory for a symlink out of the workspace.
    sh(
        &ws,
        &format!("mv cache cache.old && ln -s '{}' cache", outside.display()),
    );
    let post = picture(&ws);
    match store.rewind("s", 1, false) {
        Err(CheckpointError::Refused { path, reason }) => {
            assert_eq!(path, "cache/f.txt");
            assert!(reason.contains("symlink"), "{reason}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_same(&picture(&ws), &post, "refused rewind");
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "wrote outside the workspace"
    );

    // A tracked directory replaced by a symlink is fine: the plan removes the link first.
    sh(&ws, "rm cache && mv cache.old cache");
    store.begin_turn("s", 2).unwrap();
    sh(
        &ws,
        &format!("rm -r lib && ln -s '{}' lib", outside.display()),
    );
    store.rewind("s", 2, false).unwrap();
    assert!(std::fs::symlink_metadata(ws.join("lib")).unwrap().is_dir());
    assert_eq!(std::fs::read(ws.join("lib/a.rs")).unwrap(), b"a\n");
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "wrote outside the workspace"
    );
}

#[test]
fn files_and_directories_swapped_by_bash_come_back() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    write(&ws, "a", b"a file\n");
    write(&ws, "b/y.txt", b"in a dir\n");
    write(&ws, "b/sub/z.txt", b"deeper\n");
    let before = picture(&ws);
    let store = CheckpointStore::open(&ws, &tmp.path().join("state")).unwrap();
    store.begin_turn("s", 1).unwrap();
    sh(&ws, "rm a && mkdir -p a/inner && echo x > a/x && echo w > a/inner/w && rm -r b && echo now-a-file > b");
    let after = picture(&ws);
    let r = store.rewind("s", 1, false).unwrap();
    assert_same(&picture(&ws), &before, "file/dir swap not undone");
    store
        .rewind_to(r.undo_checkpoint.as_deref().unwrap(), false)
        .unwrap();
    assert_same(&picture(&ws), &after, "undo of the file/dir swap");
}
