//! Before the attach bridge starts anything: is the workspace a folder this user can enter
//! and write, and can the state folder be created? Each failure is an
//! [`AttachReport::Refused`] with a [`WorkspaceProblem`], which the client shows once and
//! does not retry (see docs/REMOTE.md, "Troubleshooting").

use std::io;
use std::path::{Path, PathBuf};

use reasonix_forward::attach::{AttachReport, WorkspaceProblem};

use crate::paths::HostPaths;

/// A workspace the bridge refuses, with the report for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// What is wrong.
    pub problem: WorkspaceProblem,
    /// The path concerned.
    pub path: PathBuf,
    /// The operating system's words.
    pub detail: String,
}

impl Refusal {
    fn new(problem: WorkspaceProblem, path: &Path, detail: impl std::fmt::Display) -> Self {
        Self {
            problem,
            path: path.to_path_buf(),
            detail: detail.to_string(),
        }
    }

    /// The report line's content.
    pub fn report(&self) -> AttachReport {
        AttachReport::Refused {
            problem: self.problem,
            path: self.path.display().to_string(),
            detail: self.detail.clone(),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} ({}); {}",
            self.path.display(),
            self.problem.what(),
            self.detail,
            self.problem.fix()
        )
    }
}

/// The problem an I/O error on `path` means; `fallback` when it is none of the known ones.
fn classify(e: &io::Error, fallback: WorkspaceProblem) -> WorkspaceProblem {
    match e.kind() {
        io::ErrorKind::NotFound => WorkspaceProblem::Missing,
        io::ErrorKind::NotADirectory => WorkspaceProblem::NotADirectory,
        io::ErrorKind::PermissionDenied => WorkspaceProblem::PermissionDenied,
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => WorkspaceProblem::NoSpace,
        io::ErrorKind::ReadOnlyFilesystem => WorkspaceProblem::Unwritable,
        _ => fallback,
    }
}

/// Check `workspace` (creating it first when `mkdir`), then create the state folders.
pub fn check(workspace: &Path, mkdir: bool) -> Result<HostPaths, Refusal> {
    if mkdir && std::fs::symlink_metadata(workspace).is_err() {
        std::fs::create_dir_all(workspace).map_err(|e| {
            Refusal::new(
                classify(&e, WorkspaceProblem::PermissionDenied),
                workspace,
                format!("creating it failed: {e}"),
            )
        })?;
    }
    let meta = std::fs::metadata(workspace)
        .map_err(|e| Refusal::new(classify(&e, WorkspaceProblem::Missing), workspace, &e))?;
    if !meta.is_dir() {
        return Err(Refusal::new(
            WorkspaceProblem::NotADirectory,
            workspace,
            "it is a file",
        ));
    }
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(
        workspace.as_os_str(),
    ))
    .map_err(|_| Refusal::new(WorkspaceProblem::Missing, workspace, "NUL in the path"))?;
    // SAFETY: `c` is a valid NUL-terminated path; access only reads it.
    if unsafe { libc::access(c.as_ptr(), libc::X_OK) } != 0 {
        let e = io::Error::last_os_error();
        return Err(Refusal::new(
            WorkspaceProblem::PermissionDenied,
            workspace,
            e,
        ));
    }
    // SAFETY: as above.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        let e = io::Error::last_os_error();
        return Err(Refusal::new(WorkspaceProblem::Unwritable, workspace, e));
    }
    HostPaths::for_workspace(workspace).map_err(|e| {
        let problem = match classify(&e, WorkspaceProblem::StateUnusable) {
            WorkspaceProblem::NoSpace => WorkspaceProblem::NoSpace,
            // The workspace itself was fine just above: the rest is about the state folder.
            _ => WorkspaceProblem::StateUnusable,
        };
        Refusal::new(problem, &crate::paths::state_home(), e)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_and_created_workspaces() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope/deeper");
        let r = check(&missing, false).unwrap_err();
        assert_eq!(r.problem, WorkspaceProblem::Missing, "{r}");
        assert!(r.to_string().contains("--mkdir"), "{r}");
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(
            check(&file, false).unwrap_err().problem,
            WorkspaceProblem::NotADirectory
        );
        assert_eq!(
            check(&file.join("sub"), false).unwrap_err().problem,
            WorkspaceProblem::NotADirectory
        );
    }
}
