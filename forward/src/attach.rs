//! Report lines of the attach bridge (`reasonix-remote attach`), written on its stdout
//! *instead of* (or, for [`AttachReport::Fallback`], just before) the link preamble when the
//! daemon answering on the workspace socket is not of the client's build. See
//! `docs/PROTOCOL.md` §2.1.
//!
//! Format: one line `REASONIX-ATTACH/1 <tag> <json>\n`, `<tag>` being the random token the
//! client passed with `--tag` (so shell noise can never be taken for a report), `<json>` an
//! [`AttachReport`].

use serde::{Deserialize, Serialize};

use crate::proto::TurnState;

/// First word of a report line.
pub const ATTACH_REPORT_MAGIC: &str = "REASONIX-ATTACH/1";

crate::proto_serde::tagged_enum! {
    AttachReportDe, "report";
    /// What the bridge reports.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
    #[serde(tag = "report", rename_all = "snake_case")]
    pub enum AttachReport {
        /// A daemon of another build runs a turn: nothing was changed and the bridge exited. The
        /// client asks the user (upgrade and interrupt, attach read-only, wait) or refuses.
        Busy {
            /// Build id of the running daemon.
            build_id: String,
            /// Its sessions with a turn in progress.
            sessions: Vec<BusySession>,
        },
        /// The daemon of the client's build failed to start after the old one was stopped; the
        /// old build's daemon was started again and the link that follows goes to it.
        Fallback {
            /// Build id of the daemon the link goes to.
            build_id: String,
            /// Why the new daemon did not start.
            reason: String,
        },
        /// The workspace (or the host's state folder) cannot be used: nothing was started and
        /// the bridge exited. Retrying does not help; the client stops with [`WorkspaceProblem::fix`].
        Refused {
            /// What is wrong.
            problem: WorkspaceProblem,
            /// The path concerned, as the host sees it.
            path: String,
            /// The operating system's words (e.g. `No such file or directory (os error 2)`).
            detail: String,
        },
    }
}

/// Why a workspace cannot be used (an [`AttachReport::Refused`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceProblem {
    /// The workspace folder does not exist.
    Missing,
    /// The workspace path is a file (or something else that is not a folder).
    NotADirectory,
    /// The workspace folder (or a folder on its path) cannot be entered by this user.
    PermissionDenied,
    /// The workspace folder can be entered but not written by this user.
    Unwritable,
    /// The host's disk (or the user's quota) is full.
    NoSpace,
    /// The state folder (`~/.reasonix`, its run folder) cannot be created or written.
    StateUnusable,
}

impl WorkspaceProblem {
    /// What is wrong, in a few words.
    pub fn what(self) -> &'static str {
        match self {
            WorkspaceProblem::Missing => "the workspace folder does not exist",
            WorkspaceProblem::NotADirectory => "the workspace path is not a folder",
            WorkspaceProblem::PermissionDenied => "permission denied on the workspace folder",
            WorkspaceProblem::Unwritable => "the workspace folder is not writable",
            WorkspaceProblem::NoSpace => "no space left on the host",
            WorkspaceProblem::StateUnusable => "the Reasonix state folder cannot be used",
        }
    }

    /// What the user can do about it (also in docs/REMOTE.md, "Troubleshooting").
    pub fn fix(self) -> &'static str {
        match self {
            WorkspaceProblem::Missing => {
                "Check the path (a relative path is relative to the home folder), create the folder, or rerun with --mkdir to create it"
            }
            WorkspaceProblem::NotADirectory => {
                "Give the folder that contains it, or another path"
            }
            WorkspaceProblem::PermissionDenied => {
                "Connect as a user that can enter it, or fix its permissions (chmod/chown)"
            }
            WorkspaceProblem::Unwritable => {
                "Connect as a user that can write it, or fix its permissions (chmod u+w); a read-only mount cannot be a workspace"
            }
            WorkspaceProblem::NoSpace => {
                "Free disk space on the host (`df -h ~`), e.g. with `reasonix remote uninstall` of old builds or removing old sessions"
            }
            WorkspaceProblem::StateUnusable => {
                "Make ~/.reasonix writable for this user (or set REASONIX_HOME on the host), and check `df -h ~`"
            }
        }
    }
}

/// A session with a turn in progress, in a [`AttachReport::Busy`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BusySession {
    /// Session id.
    pub id: String,
    /// Its state.
    pub state: TurnState,
    /// First line of its first prompt.
    pub title: String,
}

/// The report line for `tag` (with its newline).
pub fn report_line(tag: &str, report: &AttachReport) -> String {
    let json = serde_json::to_string(report).unwrap_or_else(|_| "{}".into());
    format!("{ATTACH_REPORT_MAGIC} {tag} {json}\n")
}

/// Parse one line (without its newline) as a report for `tag`. `None` for any other line.
pub fn parse_report_line(line: &str, tag: &str) -> Option<Result<AttachReport, String>> {
    let rest = line.trim_end_matches('\r');
    let at = rest.find(ATTACH_REPORT_MAGIC)?;
    let rest = rest[at + ATTACH_REPORT_MAGIC.len()..].strip_prefix(' ')?;
    let rest = rest.strip_prefix(tag)?.strip_prefix(' ')?;
    Some(serde_json::from_str(rest).map_err(|e| format!("{e}: {rest}")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn report_lines_round_trip_and_need_the_tag() {
        let r = AttachReport::Busy {
            build_id: "0.1.0-old".into(),
            sessions: vec![BusySession {
                id: "s1".into(),
                state: TurnState::Running,
                title: "fix it".into(),
            }],
        };
        let line = report_line("t0k", &r);
        assert!(line.starts_with("REASONIX-ATTACH/1 t0k {"), "{line}");
        let l = line.trim_end();
        assert_eq!(parse_report_line(l, "t0k"), Some(Ok(r)));
        assert_eq!(parse_report_line(l, "other"), None);
        assert_eq!(parse_report_line("hello REASONIX-ATTACH", "t0k"), None);
        assert!(matches!(
            parse_report_line("REASONIX-ATTACH/1 t0k {bad", "t0k"),
            Some(Err(_))
        ));
    }
}
