//! What differs between the laptop systems Reasonix runs on (Linux, macOS, Windows), one
//! small function per difference, so that the rest of the crate has no `#[cfg]`:
//! the home folder, the ssh-agent's default address and how to reach it ([`agent`]), and the
//! console used for passphrase and host-key prompts ([`console`]). Decisions that depend on
//! the system take an [`Os`], so the Linux tests check Windows' and macOS' answers through the
//! same functions.

pub mod agent;
pub mod console;
pub mod shell;

use std::ffi::OsString;
use std::path::PathBuf;

/// The families of laptop systems whose conventions differ (macOS is `Unix` here: its
/// OpenSSH, paths and agent socket follow Unix rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    /// Linux, macOS, the BSDs.
    Unix,
    /// Windows (OpenSSH for Windows conventions).
    Windows,
}

impl Os {
    /// The system this binary was built for.
    pub const THIS: Os = if cfg!(windows) { Os::Windows } else { Os::Unix };

    /// Whether `c` separates path components (`/` everywhere, also `\` on Windows).
    pub fn is_separator(self, c: char) -> bool {
        c == '/' || (self == Os::Windows && c == '\\')
    }

    /// The separator this system writes between components.
    pub fn separator(self) -> char {
        match self {
            Os::Unix => '/',
            Os::Windows => '\\',
        }
    }
}

/// The user's home folder: `$HOME` (then the password database) on Unix, the profile folder
/// (`%USERPROFILE%`, `FOLDERID_Profile`) on Windows, as the `directories` crate finds it.
pub fn home_dir() -> Option<PathBuf> {
    directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf())
}

/// Where the ssh-agent listens when `IdentityAgent` does not say: `$SSH_AUTH_SOCK` (set by
/// the login session on Linux, by launchd on macOS), else on Windows the pipe of the OpenSSH
/// for Windows agent service, which is what its `ssh` uses.
pub fn default_agent(os: Os, ssh_auth_sock: Option<OsString>) -> Option<PathBuf> {
    match ssh_auth_sock.filter(|v| !v.is_empty()) {
        Some(v) => Some(PathBuf::from(v)),
        None if os == Os::Windows => Some(PathBuf::from(agent::OPENSSH_WINDOWS_PIPE)),
        None => None,
    }
}

/// The folder of the system-wide SSH files (`ssh_config`, `ssh_known_hosts`): `/etc/ssh` on
/// Unix; on Windows `%ProgramData%\ssh` (OpenSSH for Windows' `__PROGRAMDATA__\ssh`, by
/// default `C:\ProgramData\ssh`), `program_data` being the `ProgramData` variable.
pub fn system_ssh_dir(os: Os, program_data: Option<OsString>) -> PathBuf {
    match os {
        Os::Unix => PathBuf::from("/etc/ssh"),
        Os::Windows => {
            let base = program_data
                .filter(|v| !v.is_empty())
                .map(|v| v.to_string_lossy().into_owned())
                .unwrap_or_else(|| r"C:\ProgramData".to_string());
            PathBuf::from(format!(r"{}\ssh", base.trim_end_matches(['\\', '/'])))
        }
    }
}

/// [`system_ssh_dir`] for this system.
pub fn system_ssh_dir_here() -> PathBuf {
    system_ssh_dir(Os::THIS, std::env::var_os("ProgramData"))
}

/// The signal that ended a process, where the system has signals (Unix); `None` elsewhere
/// or when it exited with a code.
pub fn exit_signal(status: &std::process::ExitStatus) -> Option<i32> {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        status.signal()
    }
    #[cfg(not(unix))]
    {
        let _ = status;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_address_per_system() {
        let sock = || Some(OsString::from("/private/tmp/com.apple.launchd.x/Listeners"));
        assert_eq!(
            default_agent(Os::Unix, sock()),
            Some(PathBuf::from("/private/tmp/com.apple.launchd.x/Listeners"))
        );
        assert_eq!(default_agent(Os::Unix, None), None);
        assert_eq!(default_agent(Os::Unix, Some(OsString::new())), None);
        assert_eq!(
            default_agent(Os::Windows, None),
            Some(PathBuf::from(r"\\.\pipe\openssh-ssh-agent"))
        );
        assert_eq!(
            default_agent(Os::Windows, Some(OsString::from(r"\\.\pipe\mine"))),
            Some(PathBuf::from(r"\\.\pipe\mine"))
        );
    }

    #[test]
    fn system_ssh_files_per_system() {
        assert_eq!(system_ssh_dir(Os::Unix, None), PathBuf::from("/etc/ssh"));
        assert_eq!(
            system_ssh_dir(Os::Unix, Some(OsString::from(r"C:\ProgramData"))),
            PathBuf::from("/etc/ssh")
        );
        assert_eq!(
            system_ssh_dir(Os::Windows, None),
            PathBuf::from(r"C:\ProgramData\ssh")
        );
        assert_eq!(
            system_ssh_dir(Os::Windows, Some(OsString::from(r"D:\PD\"))),
            PathBuf::from(r"D:\PD\ssh")
        );
        assert_eq!(
            system_ssh_dir(Os::Windows, Some(OsString::new())),
            PathBuf::from(r"C:\ProgramData\ssh")
        );
    }

    #[test]
    fn separators() {
        assert!(Os::Windows.is_separator('\\') && Os::Windows.is_separator('/'));
        assert!(!Os::Unix.is_separator('\\'));
    }
}
