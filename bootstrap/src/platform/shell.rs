//! Running a `ProxyCommand` or `Match exec` line the way OpenSSH does on each system:
//! `$SHELL -c` (else `/bin/sh -c`) on Unix, with `exec ` before a ProxyCommand so the shell
//! is replaced by it; `cmd.exe /c` on Windows (OpenSSH for Windows' choice: no POSIX shell
//! there), the line passed verbatim (cmd.exe has its own quoting, not the C runtime's).

use super::Os;

/// The program and the arguments before the command line, for `os` with `$SHELL` = `shell`.
pub fn shell_for(os: Os, shell: Option<String>) -> (String, &'static str) {
    match os {
        Os::Unix => (
            shell
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "/bin/sh".to_string()),
            "-c",
        ),
        Os::Windows => ("cmd.exe".to_string(), "/c"),
    }
}

/// The text of a ProxyCommand as the shell gets it (before `%` tokens are expanded).
pub fn proxy_command_line(os: Os, cmd: &str) -> String {
    match os {
        Os::Unix => format!("exec {cmd}"),
        Os::Windows => cmd.to_string(),
    }
}

/// A tokio command running `line` in this system's shell; the first value is the shell's
/// name for messages.
pub fn shell_command(line: &str) -> (String, tokio::process::Command) {
    let (shell, flag) = shell_for(Os::THIS, std::env::var("SHELL").ok());
    let mut cmd = tokio::process::Command::new(&shell);
    cmd.arg(flag);
    imp::line_arg(cmd.as_std_mut(), line);
    (shell, cmd)
}

/// A blocking command running `line` in this system's shell; the first value is the
/// shell's name for messages.
pub fn shell_command_blocking(line: &str) -> (String, std::process::Command) {
    let (shell, flag) = shell_for(Os::THIS, std::env::var("SHELL").ok());
    let mut cmd = std::process::Command::new(&shell);
    cmd.arg(flag);
    imp::line_arg(&mut cmd, line);
    (shell, cmd)
}

#[cfg(unix)]
mod imp {
    pub(super) fn line_arg(cmd: &mut std::process::Command, line: &str) {
        cmd.arg(line);
    }
}

#[cfg(windows)]
mod imp {
    pub(super) fn line_arg(cmd: &mut std::process::Command, line: &str) {
        std::os::windows::process::CommandExt::raw_arg(cmd, line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_system_runs_the_line_in_its_shell() {
        assert_eq!(shell_for(Os::Unix, None), ("/bin/sh".to_string(), "-c"));
        assert_eq!(
            shell_for(Os::Unix, Some("/bin/zsh".into())),
            ("/bin/zsh".to_string(), "-c")
        );
        assert_eq!(
            shell_for(Os::Windows, Some("/usr/bin/bash".into())),
            ("cmd.exe".to_string(), "/c")
        );
        assert_eq!(proxy_command_line(Os::Unix, "nc %h %p"), "exec nc %h %p");
        assert_eq!(
            proxy_command_line(Os::Windows, r"C:\tools\nc.exe %h %p"),
            r"C:\tools\nc.exe %h %p"
        );
    }
}
