//! The workspace's custom command files (`.reasonix/commands/**/*.md`), read raw for the
//! client, which parses them together with the laptop's own (`~/.reasonix/commands/`).
//!
//! The host only reads: a file becomes prompt text on the laptop and nothing else (see
//! `docs/SPEC.md`, "Custom commands"). Files are bounded in size and number, and a symlink
//! that leads outside the workspace is skipped, so a hostile repository cannot make the
//! laptop paste a host secret (`~/.ssh/id_ed25519`) into a prompt.

use std::path::Path;

use reasonix_forward::command_files::Walk;
pub use reasonix_forward::command_files::{command_name, MAX_DEPTH, MAX_FILES, MAX_FILE_BYTES};
use reasonix_forward::proto::{CommandFile, CommandFileProblem};

/// The commands folder, relative to the workspace root.
pub const COMMANDS_DIR: &str = ".reasonix/commands";

/// Every `*.md` below `<workspace>/.reasonix/commands`, sorted by name, and the files that
/// could not be used with the reason. A missing folder is no commands, not an error.
pub fn read_command_files(workspace: &Path) -> (Vec<CommandFile>, Vec<CommandFileProblem>) {
    let root = workspace.join(COMMANDS_DIR);
    let Ok(workspace) = workspace.canonicalize() else {
        return (Vec::new(), Vec::new());
    };
    let shown = |path: &Path| match path.strip_prefix(&root) {
        Ok(rel) => format!("{COMMANDS_DIR}/{}", rel.display()),
        Err(_) => path.display().to_string(),
    };
    Walk {
        root: &root,
        confine_to: Some(&workspace),
        shown: &shown,
    }
    .read()
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
        reasonix_forward::sort::sort(&mut bad);
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
