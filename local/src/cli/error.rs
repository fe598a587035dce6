//! The one error type of the command line: what to print (once) and the exit code.

use reasonix_local::exit::Exit;

/// Why a command did not succeed. `message` is printed once on stderr as `reasonix: …`;
/// `None` means the command already told the user (e.g. a `--json` error line, the TUI).
#[derive(Debug)]
pub struct CliError {
    /// The process exit code.
    pub exit: Exit,
    /// What to print, if it was not printed yet.
    pub message: Option<String>,
}

impl CliError {
    /// Bad arguments or configuration (exit 2).
    pub fn usage(message: impl std::fmt::Display) -> Self {
        Self::new(Exit::Usage, message)
    }

    /// The command failed (exit 1).
    pub fn failed(message: impl std::fmt::Display) -> Self {
        Self::new(Exit::Failed, message)
    }

    /// Connecting to the host failed (exit 5).
    pub fn connection(message: impl std::fmt::Display) -> Self {
        Self::new(Exit::Connection, message)
    }

    /// An error with this exit code and message.
    pub fn new(exit: Exit, message: impl std::fmt::Display) -> Self {
        Self {
            exit,
            message: Some(message.to_string()),
        }
    }

    /// Ended with `exit`; the user was already told why.
    pub fn reported(exit: Exit) -> Self {
        Self {
            exit,
            message: None,
        }
    }

    /// Print the message (if any) on stderr.
    pub fn print(&self) {
        if let Some(m) = &self.message {
            eprintln!("reasonix: {m}");
        }
    }
}
