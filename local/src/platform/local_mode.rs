//! Local mode (`reasonix` without `ssh`) runs the host program `reasonix-remote` on this
//! machine. That program is built for Linux only (its sandbox is bubblewrap + Landlock, its
//! terminals Linux PTYs), so on macOS and Windows local mode says so, with what to do
//! instead, before it looks for a binary.

/// The laptop system, as far as local mode cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum System {
    /// Linux: local mode works.
    Linux,
    /// macOS.
    MacOs,
    /// Windows.
    Windows,
    /// Anything else (a BSD).
    Other,
}

impl System {
    /// The system this binary was built for.
    pub const THIS: System = if cfg!(target_os = "linux") {
        System::Linux
    } else if cfg!(target_os = "macos") {
        System::MacOs
    } else if cfg!(windows) {
        System::Windows
    } else {
        System::Other
    };
}

/// Why local mode cannot run on `system`, with what to do instead; `None` on Linux, and when
/// `explicit_binary` (`REASONIX_REMOTE_BIN` names a host program someone built for this
/// system themselves).
pub fn unavailable(system: System, explicit_binary: bool) -> Option<String> {
    if explicit_binary {
        return None;
    }
    let instead = match system {
        System::Linux => return None,
        System::MacOs => {
            "work on a Linux machine, VM or container over SSH instead: `reasonix ssh user@host:/path/to/project` (a local VM or container with an SSH server works too, e.g. `reasonix ssh me@localhost:2222:/work`)"
        }
        System::Windows => {
            "run `reasonix` inside WSL (local mode works there), or work over SSH: `reasonix ssh user@host:/path/to/project` (WSL with an SSH server: `reasonix ssh me@localhost:/home/me/project`)"
        }
        System::Other => "work on a Linux machine over SSH: `reasonix ssh user@host:/path/to/project`",
    };
    let name = match system {
        System::MacOs => "macOS",
        System::Windows => "Windows",
        _ => "this system",
    };
    Some(format!(
        "local mode (reasonix without `ssh`) runs the host program reasonix-remote on this machine, and it is built for Linux only, not for {name}; {instead}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_linux_runs_local_mode_unless_a_binary_is_named() {
        assert_eq!(unavailable(System::Linux, false), None);
        let mac = unavailable(System::MacOs, false).expect("macOS has no local mode");
        assert!(
            mac.contains("not for macOS") && mac.contains("reasonix ssh"),
            "{mac}"
        );
        let win = unavailable(System::Windows, false).expect("Windows has no local mode");
        assert!(
            win.contains("not for Windows") && win.contains("WSL"),
            "{win}"
        );
        assert!(unavailable(System::Other, false).is_some());
        assert_eq!(unavailable(System::Windows, true), None);
    }
}
