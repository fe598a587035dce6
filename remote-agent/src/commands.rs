//! The workspace's custom command files (`.reasonix/commands/**/*.md`), read raw for the
//! client, which parses them together with the laptop's own (`~/.reasonix/commands/`).
//!
//! The host only reads: a file becomes prompt text on the laptop and nothing else (see
//! `docs/SPEC.md`, "Custom commands"). Files are bounded in size and number, and a symlink
//! that leads outside the workspace is skipped, so a hostile repository cannot make the
//! laptop paste a host secret (`~/.ssh/id_ed25519`) into a prompt.

use std::path::{Path, PathBuf};

use reasonix_forward::proto::{CommandFile, CommandFileProblem};

/// The commands folder, relative to the workspace root.
pub const COMMANDS_DIR: &str = ".reasonix/commands";
/// Largest command file read.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Most command files read (the rest are reported as skipped).
pub const MAX_FILES: usize = 256;
/// Deepest folder nesting below the commands folder.
pub const MAX_DEPTH: usize = 4;

/// Every `*.md` below `<workspace>/.reasonix/commands`, sorted by name, and the files that
/// could not be used with the reason. A missing folder is no commands, not an error.
pub fn read_command_files(workspace: &Path) -> (Vec<CommandFile>, Vec<CommandFileProblem>) {
    let root = workspace.join(COMMANDS_DIR);
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    let Ok(workspace) = workspace.canonicalize() else {
        return (files, skipped);
    };
    if !root.is_dir() {
        return (files, skipped);
    }
    walk(&workspace, &root, &root, 0, &mut files, &mut skipped);
    files.sort_by(|a, b| a.name.cmp(&b.name));
    (files, skipped)
}

fn shown(root: &Path, path: &Path) -> String {
    match path.strip_prefix(root) {
        Ok(rel) => format!("{COMMANDS_DIR}/{}", rel.display()),
        Err(_) => path.display().to_string(),
    }
}

fn walk(
    workspace: &Path,
    root: &Path,
    dir: &Path,
    depth: usize,
    files: &mut Vec<CommandFile>,
    skipped: &mut Vec<CommandFileProblem>,
) {
    let mut entries: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.flatten().map(|e| e.path()).collect(),
        Err(e) => {
            skipped.push(CommandFileProblem {
                path: shown(root, dir),
                problem: format!("cannot list the folder: {e}"),
            });
            return;
        }
    };
    entries.sort();
    for path in entries {
        let problem = |p: String| CommandFileProblem {
            path: shown(root, &path),
            problem: p,
        };
        // Resolve symlinks once and judge the target: it must stay inside the workspace.
        let real = match path.canonicalize() {
            Ok(r) => r,
            Err(e) => {
                skipped.push(problem(format!("cannot resolve: {e}")));
                continue;
            }
        };
        if !real.starts_with(workspace) {
            skipped.push(problem(
                "it is a link to a file outside the workspace; command files must live in the workspace".into(),
            ));
            continue;
        }
        if real.is_dir() {
            if depth + 1 >= MAX_DEPTH {
                skipped.push(problem(format!(
                    "folders nest deeper than {MAX_DEPTH} levels; move the commands up"
                )));
                continue;
            }
            walk(workspace, root, &path, depth + 1, files, skipped);
            continue;
        }
        if path.extension().and_then(|e| e.to_str()) != Some("md") {
            continue;
        }
        if files.len() >= MAX_FILES {
            skipped.push(problem(format!(
                "more than {MAX_FILES} command files; the rest are not read"
            )));
            continue;
        }
        let Some(name) = command_name(root, &path) else {
            skipped.push(problem(
                "the name may only use letters, digits, `-`, `_` and `.` (folders become `dir:name`)".into(),
            ));
            continue;
        };
        match std::fs::metadata(&real) {
            Ok(m) if m.len() > MAX_FILE_BYTES => {
                skipped.push(problem(format!(
                    "{} bytes, more than the {MAX_FILE_BYTES} a command file may have",
                    m.len()
                )));
                continue;
            }
            Ok(_) => {}
            Err(e) => {
                skipped.push(problem(format!("cannot read: {e}")));
                continue;
            }
        }
        match std::fs::read(&real) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => files.push(CommandFile {
                    name,
                    path: shown(root, &path),
                    text,
                }),
                Err(_) => skipped.push(problem("not UTF-8 text".into())),
            },
            Err(e) => skipped.push(problem(format!("cannot read: {e}"))),
        }
    }
}

/// `git/commit.md` below `root` is `git:commit`; `None` when a part has other characters
/// than letters, digits, `-`, `_` or `.`.
pub fn command_name(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?.with_extension("");
    let mut parts = Vec::new();
    for c in rel.components() {
        let part = c.as_os_str().to_str()?;
        let ok = !part.is_empty()
            && part
                .chars()
                .all(|ch| ch.is_alphanumeric() || matches!(ch, '-' | '_' | '.'));
        if !ok {
            return None;
        }
        parts.push(part.to_string());
    }
    (!parts.is_empty()).then(|| parts.join(":"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_nested_files_and_skips_what_it_must() {
        let ws = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let root = ws.path().join(COMMANDS_DIR);
        std::fs::create_dir_all(root.join("git")).expect("mkdir");
        std::fs::write(root.join("review.md"), "Review $ARGUMENTS").expect("w");
        std::fs::write(root.join("git/commit.md"), "Commit").expect("w");
        std::fs::write(root.join("notes.txt"), "not a command").expect("w");
        std::fs::write(root.join("bin.md"), [0xff, 0xfe]).expect("w");
        std::fs::write(root.join("big.md"), "x".repeat(MAX_FILE_BYTES as usize + 1)).expect("w");
        std::fs::write(outside.path().join("secret"), "key").expect("w");
        std::os::unix::fs::symlink(outside.path().join("secret"), root.join("leak.md"))
            .expect("symlink");
        std::fs::write(root.join("has space.md"), "x").expect("w");
        let (files, skipped) = read_command_files(ws.path());
        let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["git:commit", "review"]);
        assert_eq!(files[1].path, ".reasonix/commands/review.md");
        let mut bad: Vec<&str> = skipped.iter().map(|p| p.path.as_str()).collect();
        bad.sort();
        assert_eq!(
            bad,
            [
                ".reasonix/commands/big.md",
                ".reasonix/commands/bin.md",
                ".reasonix/commands/has space.md",
                ".reasonix/commands/leak.md"
            ]
        );
        assert!(skipped
            .iter()
            .any(|p| p.problem.contains("outside the workspace")));
    }

    #[test]
    fn no_folder_is_no_commands() {
        let ws = tempfile::tempdir().expect("tempdir");
        assert_eq!(read_command_files(ws.path()), (Vec::new(), Vec::new()));
    }
}
