//! Starting a child in a process tree of its own and stopping that whole tree, the way each
//! system does it. The only place in `forward` that knows the difference.
//!
//! - Unix: `setpgid(0, 0)` at spawn (`process_group(0)`), `kill(-pgid, SIGKILL)` to stop, so
//!   wrappers (`npx`, `sh -c`, `uvx`) die together with what they started.
//! - Windows: `CREATE_NEW_PROCESS_GROUP` at spawn (Ctrl-C typed at the laptop's console does
//!   not reach the server) and `taskkill /T /F /PID` to stop, which ends the process and every
//!   process it started (Windows keeps the parent id of each process: `npx.cmd` → `node`).

use tokio::process::Command;

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
