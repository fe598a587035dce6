//! read_file, write_file, edit_file, multi_edit, move_file and writer confinement, on real
//! files in temp directories.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use reasonix_remote::sandbox::Sandbox;
use reasonix_remote::tools::{MutationHook, ToolContext, ToolOutput, ToolRegistry};
use serde_json::{json, Value};

fn ctx(dir: &Path) -> ToolContext {
    ToolContext::new(dir, Arc::new(Sandbox::off(dir)))
}

async fn call(ctx: &ToolContext, tool: &str, args: Value) -> ToolOutput {
    let t = ToolRegistry::builtin().get(tool).expect("tool registered");
    t.run(args, ctx).await
}

fn ok(o: &ToolOutput) -> &str {
    assert!(!o.is_error, "expected success, got error: {}", o.text);
    &o.text
}

fn err(o: &ToolOutput) -> &str {
    assert!(o.is_error, "expected an error, got: {}", o.text);
    &o.text
}

#[tokio::test]
async fn read_file_numbers_lines_and_pages() {
    let d = tempfile::tempdir().unwrap();
    let body: String = (1..=12).map(|i| format!("line {i}\n")).collect();
    std::fs::write(d.path().join("a.txt"), body).unwrap();
    let c = ctx(d.path());
    let o = call(
        &c,
        "read_file",
        json!({"path": "a.txt", "offset": 2, "limit": 3}),
    )
    .await;
    assert_eq!(
        ok(&o),
        "3→line 3\n4→line 4\n5→line 5\n\n[more lines below; pass offset=5 to continue]\n"
    );
    let o = call(&c, "read_file", json!({"path": "a.txt", "offset": 10})).await;
    assert_eq!(ok(&o), "11→line 11\n12→line 12\n");
    let o = call(&c, "read_file", json!({"path": "a.txt", "offset": 50})).await;
    assert_eq!(ok(&o), "(offset 50 is past EOF — file has 12 lines)");
    // Absolute paths read too.
    let abs = d.path().join("a.txt");
    let o = call(&c, "read_file", json!({"path": abs, "limit": 1})).await;
    assert!(ok(&o).starts_with("1→line 1\n"), "{}", o.text);
}

#[tokio::test]
async fn read_file_special_cases() {
    let d = tempfile::tempdir().unwrap();
    let c = ctx(d.path());
    std::fs::write(d.path().join("empty"), "").unwrap();
    assert_eq!(
        ok(&call(&c, "read_file", json!({"path": "empty"})).await),
        "(empty file)"
    );
    let mut bin = b"PK\x03\x04".to_vec();
    bin.extend([0u8; 64]);
    std::fs::write(d.path().join("x.zip"), &bin).unwrap();
    let o = call(&c, "read_file", json!({"path": "x.zip"})).await;
    assert!(
        err(&o).contains("binary file x.zip (NUL byte detected)"),
        "{}",
        o.text
    );
    std::fs::create_dir(d.path().join("sub")).unwrap();
    let o = call(&c, "read_file", json!({"path": "sub"})).await;
    assert!(
        err(&o).contains("sub is a directory, not a file — use the ls tool"),
        "{}",
        o.text
    );
    let o = call(&c, "read_file", json!({"path": "missing.txt"})).await;
    assert_eq!(err(&o), "read missing.txt: no such file or directory");
    let o = call(&c, "read_file", json!({"nope": 1})).await;
    assert!(
        err(&o).starts_with("invalid arguments for read_file:"),
        "{}",
        o.text
    );
    // CRLF lines are shown without the CR; invalid UTF-8 shown lossily.
    std::fs::write(d.path().join("crlf.txt"), b"a\r\nb\xff\r\n").unwrap();
    let o = call(&c, "read_file", json!({"path": "crlf.txt"})).await;
    assert_eq!(ok(&o), "1→a\n2→b\u{FFFD}\n");
}

#[tokio::test]
async fn read_file_huge_file_with_offset_and_limit() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("huge.log");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
    use std::io::Write;
    for i in 1..=300_000 {
        writeln!(
            f,
            "entry number {i} with some padding text to make it longer"
        )
        .unwrap();
    }
    drop(f);
    let c = ctx(d.path());
    let o = call(
        &c,
        "read_file",
        json!({"path": "huge.log", "offset": 250_000, "limit": 2}),
    )
    .await;
    assert_eq!(
        ok(&o),
        "250001→entry number 250001 with some padding text to make it longer\n250002→entry number 250002 with some padding text to make it longer\n\n[more lines below; pass offset=250002 to continue]\n"
    );
    // Default limit is 2000 lines.
    let o = call(&c, "read_file", json!({"path": "huge.log"})).await;
    assert_eq!(ok(&o).lines().filter(|l| l.contains('→')).count(), 2000);
    assert!(
        o.text.starts_with("   1→entry number 1 "),
        "width follows the largest number shown"
    );
    assert!(o
        .text
        .ends_with("[more lines below; pass offset=2000 to continue]\n"));
}

#[derive(Default)]
struct RecordingHook(Mutex<Vec<(PathBuf, bool)>>);

impl MutationHook for RecordingHook {
    fn before_write(&self, path: &Path) {
        self.0
            .lock()
            .unwrap()
            .push((path.to_path_buf(), path.exists()));
    }
}

#[tokio::test]
async fn write_file_creates_parents_reports_and_calls_hook() {
    let d = tempfile::tempdir().unwrap();
    let hook = Arc::new(RecordingHook::default());
    let mut c = ctx(d.path());
    c.mutation_hook = hook.clone();
    let o = call(
        &c,
        "write_file",
        json!({"path": "deep/er/new.txt", "content": "hello\n"}),
    )
    .await;
    assert_eq!(ok(&o), "wrote 6 bytes to deep/er/new.txt");
    assert_eq!(
        std::fs::read_to_string(d.path().join("deep/er/new.txt")).unwrap(),
        "hello\n"
    );
    let o = call(
        &c,
        "write_file",
        json!({"path": "deep/er/new.txt", "content": "hello\n"}),
    )
    .await;
    assert_eq!(
        ok(&o),
        "no changes made: deep/er/new.txt already has this content"
    );
    let o = call(
        &c,
        "write_file",
        json!({"path": "deep/er/new.txt", "content": "bye\n"}),
    )
    .await;
    assert_eq!(ok(&o), "wrote 4 bytes to deep/er/new.txt");
    let calls = hook.0.lock().unwrap().clone();
    let target = c.workspace.join("deep/er/new.txt");
    // Once per change, before it happens: first absent, then present. Not for "no changes".
    assert_eq!(calls, vec![(target.clone(), false), (target, true)]);
}

#[cfg(unix)]
#[tokio::test]
async fn writers_refuse_paths_outside_the_roots() {
    let d = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let ws = d.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.join("escape")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("nothing-here"), ws.join("dangling")).unwrap();
    let c = ctx(&ws);
    for (path, why) in [
        ("../sibling.txt", "dotdot"),
        ("new/../../x.txt", "dotdot in missing tail"),
        ("escape/evil.txt", "symlink escape"),
    ] {
        let o = call(&c, "write_file", json!({"path": path, "content": "x"})).await;
        let t = err(&o);
        assert!(t.contains("outside the writable roots"), "{why}: {t}");
        assert!(
            t.contains(&c.workspace.display().to_string()),
            "{why}: names the root: {t}"
        );
        assert!(
            t.contains("[sandbox] allow_write"),
            "{why}: says how to widen: {t}"
        );
    }
    let abs = outside.path().join("abs.txt");
    let o = call(&c, "write_file", json!({"path": abs, "content": "x"})).await;
    assert!(err(&o).contains("outside the writable roots"), "{}", o.text);
    let o = call(
        &c,
        "write_file",
        json!({"path": "dangling", "content": "x"}),
    )
    .await;
    assert!(
        err(&o).contains("symlink to a missing target"),
        "{}",
        o.text
    );
    // The editors and move_file go through the same check.
    std::fs::write(outside.path().join("t.txt"), "abc").unwrap();
    let o = call(
        &c,
        "edit_file",
        json!({"path": "escape/t.txt", "old_string": "abc", "new_string": "x"}),
    )
    .await;
    assert!(err(&o).contains("outside the writable roots"), "{}", o.text);
    std::fs::write(ws.join("in.txt"), "abc").unwrap();
    let o = call(
        &c,
        "move_file",
        json!({"source_path": "in.txt", "destination_path": "escape/moved.txt"}),
    )
    .await;
    assert!(err(&o).contains("outside the writable roots"), "{}", o.text);
    // Nothing landed outside.
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
    assert!(!d.path().join("sibling.txt").exists());
    // A symlink that stays inside is fine, and allow_write widens the roots.
    std::os::unix::fs::symlink(ws.join("in.txt"), ws.join("inner-link")).unwrap();
    let o = call(
        &c,
        "write_file",
        json!({"path": "inner-link", "content": "via link"}),
    )
    .await;
    assert_eq!(ok(&o), "wrote 8 bytes to in.txt");
    let mut wide = c.clone();
    wide.allow_write = vec![outside.path().to_path_buf()];
    let o = call(
        &wide,
        "write_file",
        json!({"path": "escape/ok.txt", "content": "x"}),
    )
    .await;
    ok(&o);
    assert!(outside.path().join("ok.txt").exists());
}

#[tokio::test]
async fn edit_file_exact_unique_and_errors() {
    let d = tempfile::tempdir().unwrap();
    let c = ctx(d.path());
    let f = d.path().join("m.rs");
    std::fs::write(&f, "fn a() {}\nfn b() {}\nlet x = 1;\nlet x = 1;\n").unwrap();
    let o = call(
        &c,
        "edit_file",
        json!({"path": "m.rs", "old_string": "fn b() {}", "new_string": "fn b() { 2 }"}),
    )
    .await;
    assert_eq!(ok(&o), "edited m.rs at line 2");
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "fn a() {}\nfn b() { 2 }\nlet x = 1;\nlet x = 1;\n"
    );
    let o = call(
        &c,
        "edit_file",
        json!({"path": "m.rs", "old_string": "let x = 1;", "new_string": "let y = 2;"}),
    )
    .await;
    assert!(
        err(&o).starts_with("old_string is not unique in m.rs: 2 matches, at lines 3, 4."),
        "{}",
        o.text
    );
    let o = call(
        &c,
        "edit_file",
        json!({"path": "m.rs", "old_string": "", "new_string": "z"}),
    )
    .await;
    assert!(
        err(&o).starts_with("old_string must not be empty"),
        "{}",
        o.text
    );
    let o = call(
        &c,
        "edit_file",
        json!({"path": "m.rs", "old_string": "fn a() {}", "new_string": "fn a() {}"}),
    )
    .await;
    assert!(err(&o).contains("identical"), "{}", o.text);
    let o = call(
        &c,
        "edit_file",
        json!({"path": "nope.rs", "old_string": "a", "new_string": "b"}),
    )
    .await;
    assert_eq!(
        err(&o),
        "edit nope.rs: no such file (use write_file to create a new file)"
    );
    // Many matches: at most 8 line numbers listed.
    let many: String = (0..12).map(|_| "dup\n").collect();
    std::fs::write(d.path().join("dup.txt"), many).unwrap();
    let o = call(
        &c,
        "edit_file",
        json!({"path": "dup.txt", "old_string": "dup", "new_string": "x"}),
    )
    .await;
    assert!(
        err(&o).contains("12 matches, at lines 1, 2, 3, 4, 5, 6, 7, 8 and 4 more."),
        "{}",
        o.text
    );
}

#[tokio::test]
async fn edit_file_not_found_shows_nearest_match() {
    let d = tempfile::tempdir().unwrap();
    let c = ctx(d.path());
    std::fs::write(
        d.path().join("c.py"),
        "import os\n\ndef total(items):\n    return sum(items)\n",
    )
    .unwrap();
    let o = call(&c, "edit_file", json!({"path": "c.py", "old_string": "def total(item):\n    return sum(item)", "new_string": "x"})).await;
    let t = err(&o);
    assert!(
        t.starts_with("old_string not found in c.py. Nearest match at line 3"),
        "{t}"
    );
    assert!(
        t.contains("--- expected (old_string)\ndef total(item):\n    return sum(item)\n"),
        "{t}"
    );
    assert!(
        t.contains("--- actual (lines 3-4)\ndef total(items):\n    return sum(items)\n"),
        "{t}"
    );
    let o = call(
        &c,
        "edit_file",
        json!({"path": "c.py", "old_string": "zzzzzzzz qqqq", "new_string": "x"}),
    )
    .await;
    assert!(err(&o).contains("no similar lines"), "{}", o.text);
    assert_eq!(
        std::fs::read_to_string(d.path().join("c.py")).unwrap(),
        "import os\n\ndef total(items):\n    return sum(items)\n"
    );
}

#[tokio::test]
async fn edit_file_keeps_crlf() {
    let d = tempfile::tempdir().unwrap();
    let c = ctx(d.path());
    let f = d.path().join("w.txt");
    std::fs::write(&f, "one\r\ntwo\r\nthree\r\n").unwrap();
    // The model sends LF; the file keeps CRLF everywhere, including the new line.
    let o = call(
        &c,
        "edit_file",
        json!({"path": "w.txt", "old_string": "two\nthree", "new_string": "2\n2.5\n3"}),
    )
    .await;
    assert_eq!(ok(&o), "edited w.txt at line 2 (CRLF line endings kept)");
    assert_eq!(std::fs::read(&f).unwrap(), b"one\r\n2\r\n2.5\r\n3\r\n");
}

#[tokio::test]
async fn edit_file_fuzzy_fallbacks() {
    let d = tempfile::tempdir().unwrap();
    let c = ctx(d.path());
    let f = d.path().join("f.rs");
    // Trailing whitespace in the file.
    std::fs::write(&f, "fn main() {   \n    run();  \n}\n").unwrap();
    let o = call(&c, "edit_file", json!({"path": "f.rs", "old_string": "fn main() {\n    run();", "new_string": "fn main() {\n    go();"})).await;
    assert_eq!(
        ok(&o),
        "edited f.rs at line 1\nfuzzy match: trailing whitespace differed"
    );
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "fn main() {\n    go();\n}\n"
    );
    // Tabs in the file, spaces from the model: the replacement keeps the tab style.
    std::fs::write(&f, "fn main() {\n\tif x {\n\t\ty();\n\t}\n}\n").unwrap();
    let o = call(&c, "edit_file", json!({"path": "f.rs", "old_string": "    if x {\n        y();\n    }", "new_string": "    if x {\n        z();\n    }"})).await;
    assert_eq!(
        ok(&o),
        "edited f.rs at line 2\nfuzzy match: tabs vs 4 spaces differed"
    );
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "fn main() {\n\tif x {\n\t\tz();\n\t}\n}\n"
    );
    // Different indentation depth.
    std::fs::write(&f, "class A:\n        def f(self):\n            return 1\n").unwrap();
    let o = call(&c, "edit_file", json!({"path": "f.rs", "old_string": "def f(self):\n    return 1", "new_string": "def f(self):\n    return 2"})).await;
    assert_eq!(
        ok(&o),
        "edited f.rs at line 2\nfuzzy match: indentation differed"
    );
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "class A:\n        def f(self):\n            return 2\n"
    );
}

#[tokio::test]
async fn multi_edit_is_all_or_nothing() {
    let d = tempfile::tempdir().unwrap();
    let c = ctx(d.path());
    let f = d.path().join("m.txt");
    std::fs::write(&f, "alpha\nbeta\ngamma\nbeta\n").unwrap();
    let o = call(
        &c,
        "multi_edit",
        json!({"path": "m.txt", "edits": [
            {"old_string": "alpha", "new_string": "ALPHA"},
            {"old_string": "missing", "new_string": "x"}
        ]}),
    )
    .await;
    let t = err(&o);
    assert!(
        t.starts_with("edit 2/2 failed: old_string not found in m.txt"),
        "{t}"
    );
    assert!(t.ends_with("No changes were made to m.txt."), "{t}");
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "alpha\nbeta\ngamma\nbeta\n"
    );
    let o = call(
        &c,
        "multi_edit",
        json!({"path": "m.txt", "edits": [
            {"old_string": "alpha", "new_string": "ALPHA"},
            {"old_string": "beta", "new_string": "BETA", "replace_all": true},
            {"old_string": "ALPHA\nBETA", "new_string": "first"}
        ]}),
    )
    .await;
    assert_eq!(
        ok(&o),
        "applied 3 edits to m.txt\nedit 2: replaced 2 occurrences"
    );
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "first\ngamma\nBETA\n");
    let o = call(&c, "multi_edit", json!({"path": "m.txt", "edits": []})).await;
    assert_eq!(err(&o), "edits must contain at least one edit");
}

#[tokio::test]
async fn move_file_rules() {
    let d = tempfile::tempdir().unwrap();
    let hook = Arc::new(RecordingHook::default());
    let mut c = ctx(d.path());
    c.mutation_hook = hook.clone();
    std::fs::write(d.path().join("a.txt"), "A").unwrap();
    std::fs::write(d.path().join("b.txt"), "B").unwrap();
    std::fs::create_dir(d.path().join("dir")).unwrap();
    let o = call(
        &c,
        "move_file",
        json!({"source_path": "a.txt", "destination_path": "b.txt"}),
    )
    .await;
    assert!(
        err(&o).starts_with("destination b.txt already exists"),
        "{}",
        o.text
    );
    let o = call(
        &c,
        "move_file",
        json!({"source_path": "dir", "destination_path": "dir2"}),
    )
    .await;
    assert!(
        err(&o).contains("dir is a directory; move_file moves files only"),
        "{}",
        o.text
    );
    let o = call(
        &c,
        "move_file",
        json!({"source_path": "nope", "destination_path": "x"}),
    )
    .await;
    assert_eq!(err(&o), "move nope: no such file or directory");
    let o = call(
        &c,
        "move_file",
        json!({"source_path": "a.txt", "destination_path": "sub/dir/a2.txt"}),
    )
    .await;
    assert_eq!(ok(&o), "moved a.txt to sub/dir/a2.txt");
    assert!(!d.path().join("a.txt").exists());
    assert_eq!(
        std::fs::read_to_string(d.path().join("sub/dir/a2.txt")).unwrap(),
        "A"
    );
    let calls = hook.0.lock().unwrap().clone();
    assert_eq!(
        calls,
        vec![
            (c.workspace.join("a.txt"), true),
            (c.workspace.join("sub/dir/a2.txt"), false)
        ]
    );
}

#[tokio::test]
async fn todo_write_stores_and_renders_the_plan() {
    let d = tempfile::tempdir().unwrap();
    let c = ctx(d.path());
    let o = call(
        &c,
        "todo_write",
        json!({"todos": [
            {"content": "read code", "status": "completed"},
            {"content": "fix bug", "status": "in_progress", "active_form": "fixing bug"},
            {"content": "run tests", "status": "pending"}
        ]}),
    )
    .await;
    assert_eq!(
        ok(&o),
        "[x] read code\n[>] fix bug\n[ ] run tests\n(1/3 done)"
    );
    assert_eq!(c.todos.lock().unwrap().len(), 3);
    assert_eq!(c.todos.lock().unwrap()[1]["active_form"], "fixing bug");
    let o = call(
        &c,
        "todo_write",
        json!({"todos": [{"content": "x", "status": "doing"}]}),
    )
    .await;
    assert!(
        err(&o).contains("use one of pending, in_progress, completed"),
        "{}",
        o.text
    );
    assert_eq!(
        c.todos.lock().unwrap().len(),
        3,
        "a rejected plan leaves the old one"
    );
}

#[test]
fn bound_for_context_keeps_small_and_cuts_large() {
    use reasonix_remote::tools::{bound_for_context, CONTEXT_BOUND_BYTES};
    assert_eq!(bound_for_context("small"), "small");
    let big: String = (0..20_000).map(|i| format!("row {i}\n")).collect();
    let b = bound_for_context(&big);
    assert!(b.len() < CONTEXT_BOUND_BYTES + 300, "{}", b.len());
    assert!(b.starts_with("row 0\n"));
    assert!(b.ends_with("row 19999\n"));
    assert!(
        b.contains(&format!(
            "cut from the middle of this {}-byte result",
            big.len()
        )),
        "{}",
        &b[24000..25000.min(b.len())]
    );
    // Multi-byte text never splits a character.
    let wide = "é".repeat(40_000);
    let b = bound_for_context(&wide);
    assert!(b.contains("bytes ("));
}

#[tokio::test]
async fn writers_refuse_git_internals() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join(".git/hooks")).unwrap();
    let c = ctx(d.path());
    let o = call(
        &c,
        "write_file",
        json!({"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\nevil\n"}),
    )
    .await;
    assert!(err(&o).contains("inside the git internals"), "{}", o.text);
    assert!(!d.path().join(".git/hooks/pre-commit").exists());
    std::fs::write(d.path().join("f"), "x").unwrap();
    let o = call(
        &c,
        "move_file",
        json!({"source_path": "f", "destination_path": "sub/.git/config"}),
    )
    .await;
    assert!(err(&o).contains("inside the git internals"), "{}", o.text);
    // .gitignore and friends are ordinary files.
    let o = call(
        &c,
        "write_file",
        json!({"path": ".gitignore", "content": "target/\n"}),
    )
    .await;
    ok(&o);
}
