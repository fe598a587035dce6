//! Starting a child in a process tree of its own and stopping that whole tree, the way each
//! system does it. The only place in `forward` that knows the difference.
//!
//! - Unix: `setpgid(0, 0)` at spawn (`process_group(0)`), `kill(-pgid, SIGKILL)` to stop, so
//!   wrappers (`npx`, `sh -c`, `uvx`) die together with what they started.
//! - Windows: `CREATE_NEW_PROCESS_GROUP` at spawn (Ctrl-C typed at the laptop's console does
//!   not reach the server) and `taskkill /T /F /PID` to stop, which ends the process and every
//!   process it started (Windows keeps the parent id of each process: `npx.cmd` → `node`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use tokio::process::Command;

/// A command for `program` as this system starts programs: on Windows a bare name such as
/// `npx` is looked up on `PATH` with the extensions of `PATHEXT` (`npx.cmd`, `uvx.exe`), as
/// the shell does; Rust's own lookup finds `.exe` files only, and most Node tools are `.cmd`
/// shims. Elsewhere (and for names with a folder or an extension) `program` is used as given.
pub fn command(program: &str) -> Command {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let pathext = std::env::var_os("PATHEXT").unwrap_or_default();
    let resolved = if cfg!(windows) {
        windows_lookup(program, &path, &pathext, |p| p.is_file())
    } else {
        None
    };
    match resolved {
        Some(p) => Command::new(p),
        None => Command::new(program),
    }
}

/// The `PATH` lookup of [`command`] on Windows: `None` when `program` has a folder or an
/// extension (Windows runs it as given) or nothing matches.
pub fn windows_lookup(
    program: &str,
    path: &OsStr,
    pathext: &OsStr,
    is_file: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    if program.contains(['/', '\\', ':']) || Path::new(program).extension().is_some() {
        return None;
    }
    let pathext = pathext.to_string_lossy();
    let exts: Vec<&str> = if pathext.trim().is_empty() {
        vec![".COM", ".EXE", ".BAT", ".CMD"]
    } else {
        pathext.split(';').filter(|e| !e.is_empty()).collect()
    };
    let path = path.to_string_lossy();
    for dir in path.split(';').filter(|d| !d.is_empty()) {
        for ext in &exts {
            let candidate = PathBuf::from(format!(
                "{}\\{program}{}",
                dir.trim_end_matches('\\'),
                ext.to_ascii_lowercase()
            ));
            if is_file(&candidate) {
                return Some(candidate);
            }
        }
    }
    None
}

/// Makes `cmd` start in a process group (Unix) or console process group (Windows) of its own.
pub fn isolate(cmd: &mut Command) {
    imp::isolate(cmd);
}

/// Stops the tree started by [`isolate`] whose leader has id `pid`. Does not wait; a tree that
/// is already gone is fine.
pub fn kill_tree(pid: u32) {
    imp::kill_tree(pid);
}

#[cfg(unix)]
mod imp {
    use tokio::process::Command;

    pub(super) fn isolate(cmd: &mut Command) {
        cmd.process_group(0);
    }

    pub(super) fn kill_tree(pid: u32) {
        let Ok(pgid) = libc::pid_t::try_from(pid) else {
            return;
        };
        // SAFETY: kill(2) with a negative pid signals a process group and touches no memory.
        // The group was created for this child by `process_group(0)`, so no other program is
        // hit; if it is already gone the call fails with ESRCH, which is fine.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

#[cfg(windows)]
mod imp {
    use tokio::process::Command;

    /// `CREATE_NEW_PROCESS_GROUP` (winbase.h).
    const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
    /// `CREATE_NO_WINDOW` (winbase.h): `taskkill` opens no console window of its own.
    const CREATE_NO_WINDOW: u32 = 0x0800_0000;

    pub(super) fn isolate(cmd: &mut Command) {
        cmd.creation_flags(CREATE_NEW_PROCESS_GROUP);
    }

    pub(super) fn kill_tree(pid: u32) {
        let mut kill = std::process::Command::new("taskkill");
        kill.args(["/T", "/F", "/PID", &pid.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        std::os::windows::process::CommandExt::creation_flags(&mut kill, CREATE_NO_WINDOW);
        // Not waited for: this runs in a Drop. A failure (no taskkill) leaves the tree to end
        // when its pipes close, as a server does when its stdin reaches EOF.
        let _ = kill.spawn();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_finds_cmd_shims_on_path_in_pathext_order() {
        let files = [r"C:\node\npx.cmd", r"C:\node\npx", r"C:\py\uvx.exe"];
        let is_file = |p: &Path| files.contains(&p.to_str().unwrap_or_default());
        let path = OsStr::new(r"C:\Windows;C:\node\;C:\py");
        let pathext = OsStr::new(".COM;.EXE;.BAT;.CMD");
        let look = |p: &str| windows_lookup(p, path, pathext, is_file);
        assert_eq!(look("npx"), Some(PathBuf::from(r"C:\node\npx.cmd")));
        assert_eq!(look("uvx"), Some(PathBuf::from(r"C:\py\uvx.exe")));
        assert_eq!(look("npx.cmd"), None, "an extension is used as given");
        assert_eq!(look(r"C:\node\npx"), None, "a folder is used as given");
        assert_eq!(look("missing"), None);
        assert_eq!(
            windows_lookup("npx", path, OsStr::new(""), is_file),
            Some(PathBuf::from(r"C:\node\npx.cmd")),
            "no PATHEXT: the default list"
        );
    }
}
