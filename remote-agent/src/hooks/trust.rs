//! The trust rule: a project hook file runs only when the user trusted its exact bytes.
//!
//! The records are the laptop's (`~/.reasonix/hooks-trust.json`), sent with every session
//! open and every `/hooks` request as (path, SHA-256) pairs; the host keeps none. So nothing
//! that runs on the host (a hook, the model's bash, a hostile repository's build script) can
//! add a record, and any change to a file (one byte) gives it another hash: untrusted again.

use std::path::Path;

use reasonix_forward::hooks::TrustedHookFile;
use sha2::{Digest, Sha256};

/// The project hook files, workspace-relative, in the order they are read.
pub const PROJECT_FILES: [&str; 2] = [".reasonix/hooks.toml", ".claude/settings.json"];

/// Largest hook file read (a bigger one is a problem, not a hook source).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// A project hook file as read once: the bytes hashed are the bytes parsed.
#[derive(Debug, Clone)]
pub struct FileRead {
    /// Workspace-relative path.
    pub path: String,
    /// SHA-256 of its bytes (lower-case hex).
    pub sha256: String,
    /// Its text (lossy UTF-8).
    pub text: String,
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Read the project hook files of `workspace` that exist; a file that exists but cannot be
/// read is a problem line naming it.
pub fn read_project_files(workspace: &Path) -> (Vec<FileRead>, Vec<String>) {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for rel in PROJECT_FILES {
        let path = workspace.join(rel);
        match std::fs::metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                problems.push(format!("{rel}: cannot be read ({e}); its hooks do not run"));
                continue;
            }
            Ok(m) if m.len() > MAX_FILE_BYTES => {
                problems.push(format!(
                    "{rel}: {} bytes is more than a hook file may hold ({MAX_FILE_BYTES}); its hooks do not run",
                    m.len()
                ));
                continue;
            }
            Ok(_) => {}
        }
        match std::fs::read(&path) {
            Ok(bytes) => files.push(FileRead {
                path: rel.to_string(),
                sha256: sha256_hex(&bytes),
                text: String::from_utf8_lossy(&bytes).into_owned(),
            }),
            Err(e) => problems.push(format!("{rel}: cannot be read ({e}); its hooks do not run")),
        }
    }
    (files, problems)
}

/// True when a record trusts exactly this file's content at this path.
pub fn is_trusted(file: &FileRead, trusted: &[TrustedHookFile]) -> bool {
    trusted
        .iter()
        .any(|t| t.path == file.path && t.sha256.eq_ignore_ascii_case(&file.sha256))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn trust_keys_on_path_and_exact_content() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".reasonix")).unwrap();
        let file = dir.path().join(".reasonix/hooks.toml");
        std::fs::write(&file, "[[hooks]]\nevent = \"Stop\"\ncommand = \"true\"\n").unwrap();
        let (files, problems) = read_project_files(dir.path());
        assert!(problems.is_empty());
        assert_eq!(files.len(), 1);
        let record = TrustedHookFile {
            path: files[0].path.clone(),
            sha256: files[0].sha256.clone(),
        };
        assert!(is_trusted(&files[0], std::slice::from_ref(&record)));
        // The same content under another path is not trusted.
        let elsewhere = FileRead {
            path: ".claude/settings.json".into(),
            ..files[0].clone()
        };
        assert!(!is_trusted(&elsewhere, std::slice::from_ref(&record)));
        // One byte more: another hash, untrusted.
        std::fs::write(&file, "[[hooks]]\nevent = \"Stop\"\ncommand = \"true\"\n\n").unwrap();
        let (files, _) = read_project_files(dir.path());
        assert!(!is_trusted(&files[0], &[record]));
    }

    #[test]
    fn oversized_file_is_a_problem() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".claude")).unwrap();
        std::fs::write(
            dir.path().join(".claude/settings.json"),
            vec![b' '; (MAX_FILE_BYTES + 1) as usize],
        )
        .unwrap();
        let (files, problems) = read_project_files(dir.path());
        assert!(files.is_empty());
        assert!(problems[0].starts_with(".claude/settings.json: "));
    }
}
