//! Helpers shared by the checkpoint tests: a real workspace on disk, a real `sh`, the user's
//! real git, and exact before/after pictures of the workspace and of its `.git`.
#![allow(dead_code, clippy::unwrap_used)] // shared by several test files; tests may unwrap

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use reasonix_remote::tools::MutationHook;

/// One entry of a workspace picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    File { bytes: Vec<u8>, mode: u32 },
    Symlink(PathBuf),
    Dir { mode: u32 },
}

/// Every path under `root` except `.git`, with exact bytes and modes.
pub fn picture(root: &Path) -> BTreeMap<String, Entry> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == ".git" {
                continue;
            }
            let m = std::fs::symlink_metadata(&p).unwrap();
            let mode = m.permissions().mode() & 0o7777;
            if m.file_type().is_symlink() {
                out.insert(rel, Entry::Symlink(std::fs::read_link(&p).unwrap()));
            } else if m.is_dir() {
                out.insert(rel, Entry::Dir { mode });
                stack.push(p);
            } else {
                out.insert(
                    rel,
                    Entry::File {
                        bytes: std::fs::read(&p).unwrap(),
                        mode,
                    },
                );
            }
        }
    }
    out
}

/// Every file of the user's `.git` directory, byte for byte.
pub fn git_picture(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let git = root.join(".git");
    let mut out = BTreeMap::new();
    let mut stack = vec![git.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(&git).unwrap().to_string_lossy().into_owned();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                out.insert(format!("{rel}/"), Vec::new());
                stack.push(p);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Runs a shell script in `dir` the way the bash tool would, and insists it succeeds.
pub fn sh(dir: &Path, script: &str) {
    let out = Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sh -c {script:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The user's git in `dir`, isolated from this machine's global config.
pub fn user_git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("/usr/bin/git")
        .args([
            "-c",
            "user.name=Test User",
            "-c",
            "user.email=test@example.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What a file tool does: the hook, then the write.
pub fn tool_write(hook: &dyn MutationHook, ws: &Path, rel: &str, bytes: &[u8]) {
    let p = ws.join(rel);
    hook.before_write(&p);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, bytes).unwrap();
}

/// What the move tool does: the hook on both paths, then the rename.
pub fn tool_move(hook: &dyn MutationHook, ws: &Path, from: &str, to: &str) {
    hook.before_write(&ws.join(from));
    hook.before_write(&ws.join(to));
    std::fs::rename(ws.join(from), ws.join(to)).unwrap();
}

pub fn write(ws: &Path, rel: &str, bytes: &[u8]) {
    let p = ws.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(p, bytes).unwrap();
}

pub fn chmod(ws: &Path, rel: &str, mode: u32) {
    std::fs::set_permissions(ws.join(rel), std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Bytes that are not text: NULs, high bytes, CR LF pairs.
pub fn binary_blob(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| match i % 7 {
            0 => 0,
            1 => b'\r',
            2 => b'\n',
            _ => (i as u8).wrapping_mul(31).wrapping_add(seed),
        })
        .collect()
}

fn describe(e: Option<&Entry>) -> String {
    match e {
        None => "absent".into(),
        Some(Entry::Dir { mode }) => format!("dir {mode:o}"),
        Some(Entry::Symlink(t)) => format!("symlink -> {}", t.display()),
        Some(Entry::File { bytes, mode }) => {
            let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(40)]).into_owned();
            format!("file {mode:o} {} bytes {shown:?}", bytes.len())
        }
    }
}

/// Asserts two pictures are equal, naming only the paths that differ.
#[track_caller]
pub fn assert_same(
    actual: &BTreeMap<String, Entry>,
    expected: &BTreeMap<String, Entry>,
    what: &str,
) {
    let mut diffs = Vec::new();
    for k in actual
        .keys()
        .chain(expected.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let (a, e) = (actual.get(k), expected.get(k));
        if a != e {
            diffs.push(format!(
                "  {k}: actual {} / expected {}",
                describe(a),
                describe(e)
            ));
        }
    }
    assert!(diffs.is_empty(), "{what}:\n{}", diffs.join("\n"));
}
