//! What `reasonix-remote status --json` and `stop` print, one JSON object per line: every
//! workspace daemon of the user on a host with its sessions and their states. Read by
//! `reasonix remote status|stop` on the laptop.

use serde::{Deserialize, Serialize};

use crate::proto::TurnState;

/// One session of a daemon, as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// Session id.
    pub id: String,
    /// Turn state.
    pub state: TurnState,
    /// Number of user turns.
    pub turns: u64,
    /// First line of the first prompt.
    pub title: String,
}

/// What one workspace daemon reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonReport {
    /// Its socket.
    pub socket: String,
    /// Canonical workspace path.
    pub workspace: String,
    /// Build id of the daemon.
    pub build_id: String,
    /// Process id.
    pub pid: u32,
    /// Seconds since it started.
    pub uptime_secs: u64,
    /// Clients attached right now (not counting this query).
    pub clients: u32,
    /// Sessions of the workspace with their states.
    pub sessions: Vec<SessionSummary>,
    /// The daemon's bash sandbox: `bwrap`, `landlock (…)`, `unavailable (why)` or `off`
    /// (empty from a daemon that predates this field).
    #[serde(default)]
    pub sandbox: String,
}

impl DaemonReport {
    /// True when a turn is in progress in one of its sessions (running, waiting for the
    /// laptop or for an approval). A turn paused at its step limit is not running.
    pub fn busy(&self) -> bool {
        self.sessions.iter().any(|s| state_busy(s.state))
    }
}

/// True for the turn states in which stopping the daemon interrupts work.
pub fn state_busy(state: TurnState) -> bool {
    match state {
        TurnState::Running | TurnState::WaitingForLaptop | TurnState::WaitingForApproval => true,
        TurnState::Idle | TurnState::Paused => false,
    }
}

crate::proto_serde::tagged_enum! {
    StatusLineDe, "kind";
    /// One line of `reasonix-remote status --json`: a daemon, or a socket nobody answers on.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    pub enum StatusLine {
        /// A daemon answered.
        Daemon(DaemonReport),
        /// A socket whose daemon did not answer (stale socket or a hung daemon).
        Unreachable {
            /// Socket path.
            socket: String,
            /// Why.
            reason: String,
        },
    }
}

/// One line of `reasonix-remote stop --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopLine {
    /// Workspace of the stopped daemon.
    pub workspace: String,
    /// Its pid.
    pub pid: u32,
    /// Its build.
    pub build_id: String,
    /// Sessions that had a turn in progress (interrupted by the stop).
    pub interrupted: Vec<String>,
    /// It did not exit on SIGTERM within the grace and was killed.
    pub killed: bool,
    /// Clients that were attached to it (they lose their link; one that reconnects starts
    /// the daemon again). Absent from older builds' lines.
    #[serde(default)]
    pub clients: u32,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn busy_states() {
        let mut r = DaemonReport {
            socket: "s".into(),
            workspace: "/w".into(),
            build_id: "b".into(),
            pid: 1,
            uptime_secs: 0,
            clients: 0,
            sandbox: "bwrap".into(),
            sessions: vec![SessionSummary {
                id: "a".into(),
                state: TurnState::Paused,
                turns: 1,
                title: String::new(),
            }],
        };
        assert!(!r.busy());
        r.sessions[0].state = TurnState::WaitingForApproval;
        assert!(r.busy());
        let line = serde_json::to_string(&StatusLine::Daemon(r.clone())).unwrap();
        assert!(line.contains("\"kind\":\"daemon\""), "{line}");
        let back: StatusLine = serde_json::from_str(&line).unwrap();
        assert_eq!(back, StatusLine::Daemon(r));
    }
}
