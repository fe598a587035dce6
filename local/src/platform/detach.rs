//! Starting a process that outlives its parent and its terminal (the goal keeper,
//! [`crate::keeper`]), and telling whether a process id is still alive.

use std::process::Command;

/// Make `cmd` start detached: its own session on Unix (no controlling terminal, so closing
/// the terminal or Ctrl-C in it never reaches it), a detached process in a new process
/// group on Windows (no console).
pub fn detach(cmd: &mut Command) {
    imp::detach(cmd)
}

/// True when a process with `pid` exists (Unix: `kill(pid, 0)`; Windows: assumed alive, the
/// keeper removes its own pid file when it ends).
pub fn pid_alive(pid: u32) -> bool {
    imp::pid_alive(pid)
}

#[cfg(unix)]
mod imp {
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    pub fn detach(cmd: &mut Command) {
        // SAFETY: `setsid` is async-signal-safe and touches no memory of the parent; it is
        // the only call between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    pub fn pid_alive(pid: u32) -> bool {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        if pid <= 0 {
            return false;
        }
        // SAFETY: signal 0 only checks that the process exists and may be signalled.
        let r = unsafe { libc::kill(pid, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
}

#[cfg(windows)]
mod imp {
    use std::os::windows::process::CommandExt;
    use std::process::Command;

    const DETACHED_PROCESS: u32 = 0x0000_0008;
    const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;

    pub fn detach(cmd: &mut Command) {
        cmd.creation_flags(DETACHED_PROCESS | CREATE_NEW_PROCESS_GROUP);
    }

    pub fn pid_alive(_pid: u32) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_is_alive_and_a_reaped_child_is_not() {
        assert!(super::pid_alive(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().expect("true");
        let pid = child.id();
        child.wait().expect("wait");
        assert!(!super::pid_alive(pid));
        assert!(!super::pid_alive(0));
    }
}
