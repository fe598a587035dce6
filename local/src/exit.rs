//! The exit codes of `reasonix` (listed in `reasonix run --help`, README and docs/SPEC.md):
//! one per way a command can end, so scripts can tell them apart.

/// How a `reasonix` command ended, as its process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Exit {
    /// 0: the turn (or command) completed.
    Completed,
    /// 1: the turn or command failed (provider error, tool journal failure, daemon gone, ...).
    Failed,
    /// 2: bad input: arguments, config file.
    Usage,
    /// 3: the turn paused at its step limit (`--continue` lets it go on).
    Paused,
    /// 4: a writer needed approval and was denied because the run was headless
    /// (rerun with `--auto` or `--yolo`, or allow it in the config).
    NeedsApproval,
    /// 5: connecting failed: SSH, authentication, install, the host workspace, attach.
    Connection,
    /// 130: the turn was cancelled (Ctrl-C / SIGTERM, or another client cancelled it).
    Cancelled,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Exit::Completed => 0,
            Exit::Failed => 1,
            Exit::Usage => 2,
            Exit::Paused => 3,
            Exit::NeedsApproval => 4,
            Exit::Connection => 5,
            Exit::Cancelled => 130,
        }
    }

    /// The table printed in `reasonix run --help` (and kept equal to the README's).
    pub const HELP: &'static str = "Exit codes:
  0    the turn completed
  1    the turn failed (provider error, the daemon went away, ...)
  2    bad arguments or configuration
  3    paused at the step limit (--continue goes on)
  4    needs approval: a writer was denied because the run is headless (use --auto/--yolo)
  5    connection failure (SSH, authentication, install, host workspace, attach)
  130  cancelled (Ctrl-C or SIGTERM cancels the turn on the host first)";
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lists_every_code_once() {
        for e in [
            Exit::Completed,
            Exit::Failed,
            Exit::Usage,
            Exit::Paused,
            Exit::NeedsApproval,
            Exit::Connection,
            Exit::Cancelled,
        ] {
            let prefix = format!("\n  {:<4} ", e.code());
            assert_eq!(Exit::HELP.matches(&prefix).count(), 1, "{e:?}");
        }
    }
}
