//! Every workspace daemon of this user on the host: find them (their sockets), ask each one
//! what it runs, and stop one or all. Used by `reasonix-remote status` / `stop` (behind
//! `reasonix remote status|stop`) and by the attach bridge before it replaces a daemon of
//! another build.
//!
//! A daemon is asked over its own socket with the link protocol (a short-lived link, one
//! `Status` and one `ListSessions` request), so daemons of other builds that speak the same
//! protocol version answer too.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reasonix_forward::handshake::client_handshake;
use reasonix_forward::link::{Link, LinkConfig};
use reasonix_forward::proto::{
    DaemonStatus, Hello, Request, Response, SessionInfo, PROTOCOL_VERSION,
};
use reasonix_forward::rpc::Rpc;
pub use reasonix_forward::workspaces::{
    state_busy, DaemonReport, SessionSummary, StatusLine, StopLine,
};
use tokio::net::UnixStream;

use crate::paths::{state_home, HostPaths};

/// How long one daemon may take to answer.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a stopped daemon gets to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Errors of the workspace listing and stopping.
#[derive(Debug, thiserror::Error)]
pub enum WorkspacesError {
    /// The daemon's socket could not be reached or did not answer.
    #[error("daemon at {socket}: {reason}")]
    Query {
        /// Socket path.
        socket: String,
        /// What went wrong.
        reason: String,
    },
    /// The workspace path is unusable.
    #[error("{0}")]
    Workspace(io::Error),
}

/// The directories daemon sockets live in (see [`HostPaths::for_workspace`]).
fn run_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        dirs.push(PathBuf::from(d).join("reasonix"));
    }
    dirs.push(state_home().join("run"));
    // SAFETY: getuid cannot fail.
    dirs.push(PathBuf::from(format!("/tmp/reasonix-{}", unsafe {
        libc::getuid()
    })));
    dirs
}

/// Every daemon socket of this user, sorted.
pub fn sockets() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in run_dirs() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().and_then(|x| x.to_str()) == Some("sock") && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    reasonix_forward::sort::sort(&mut out);
    out
}

/// Ask the daemon listening on `socket` for its status and sessions.
pub async fn query(socket: &Path) -> Result<DaemonReport, WorkspacesError> {
    let err = |reason: String| WorkspacesError::Query {
        socket: socket.display().to_string(),
        reason,
    };
    let fut = async {
        let stream = UnixStream::connect(socket)
            .await
            .map_err(|e| err(format!("cannot connect: {e}")))?;
        let (reader, mut writer) = stream.into_split();
        let hello = Hello {
            protocol: PROTOCOL_VERSION,
            build_id: reasonix_forward::build_id().to_string(),
            client_id: format!("query-{:012x}", rand::random::<u64>() >> 16),
            resume: None,
            bytes_frames: false,
            early_data: false,
        };
        let (reader, welcome) = client_handshake(reader, &mut writer, &hello, 4096)
            .await
            .map_err(|e| err(format!("handshake: {e}")))?;
        let (link, inbound) = Link::new(LinkConfig::default());
        let (rpc, _incoming) = Rpc::new(
            link.clone(),
            inbound,
            reasonix_forward::channel::Side::Client,
        );
        let runner = link.clone();
        let transport =
            tokio::spawn(
                async move { runner.run_transport(reader, writer, welcome.received).await },
            );
        let status = rpc.request(Request::Status).await;
        let sessions = rpc.request(Request::ListSessions).await;
        link.close();
        transport.abort();
        let status: DaemonStatus = match status {
            Ok(Response::Status(s)) => s,
            Ok(other) => return Err(err(format!("unexpected answer to Status: {other:?}"))),
            Err(e) => return Err(err(format!("Status: {e}"))),
        };
        let sessions: Vec<SessionInfo> = match sessions {
            Ok(Response::Sessions { sessions }) => sessions,
            Ok(other) => return Err(err(format!("unexpected answer to ListSessions: {other:?}"))),
            Err(e) => return Err(err(format!("ListSessions: {e}"))),
        };
        Ok(DaemonReport {
            socket: socket.display().to_string(),
            workspace: status.workspace,
            build_id: status.build_id,
            pid: status.pid,
            uptime_secs: status.uptime_secs,
            sandbox: status.sandbox,
            // The query's own link counts as a client while it is open.
            clients: status.clients.saturating_sub(1),
            sessions: sessions
                .into_iter()
                .map(|s| SessionSummary {
                    id: s.id,
                    state: s.state,
                    turns: s.turns,
                    title: s.title,
                })
                .collect(),
        })
    };
    tokio::time::timeout(QUERY_TIMEOUT, fut)
        .await
        .map_err(|_| err(format!("no answer within {} s", QUERY_TIMEOUT.as_secs())))?
}

/// Every workspace daemon of this user.
pub async fn list() -> Vec<StatusLine> {
    let mut out = Vec::new();
    for socket in sockets() {
        match query(&socket).await {
            Ok(r) => out.push(StatusLine::Daemon(r)),
            Err(e) => out.push(StatusLine::Unreachable {
                socket: socket.display().to_string(),
                reason: e.to_string(),
            }),
        }
    }
    out
}

/// The socket of `workspace`'s daemon (the path is resolved like the daemon does; nothing is
/// created).
pub fn socket_of(workspace: &Path) -> Result<PathBuf, WorkspacesError> {
    HostPaths::locate(workspace)
        .map(|p| p.socket)
        .map_err(WorkspacesError::Workspace)
}

/// True while a process with this pid exists.
fn alive(pid: u32) -> bool {
    crate::daemon::pid_alive(pid)
}

/// Send SIGTERM to `pid`, wait up to [`STOP_GRACE`] for it to exit, then SIGKILL. Returns
/// true when it had to be killed.
pub async fn terminate(pid: u32) -> bool {
    // SAFETY: plain kill(2) on a pid a daemon of this user reported about itself.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGTERM);
    }
    let deadline = Instant::now() + STOP_GRACE;
    while alive(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if !alive(pid) {
        return false;
    }
    // SAFETY: as above.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while alive(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// Stop the daemon serving `workspace`. `Ok(None)` when none runs.
pub async fn stop_workspace(workspace: &Path) -> Result<Option<StopLine>, WorkspacesError> {
    let socket = socket_of(workspace)?;
    if !socket.exists() {
        return Ok(None);
    }
    let report = query(&socket).await?;
    Ok(Some(stop_daemon(&report).await))
}

/// Stop the daemon described by `report`.
pub async fn stop_daemon(report: &DaemonReport) -> StopLine {
    let killed = terminate(report.pid).await;
    StopLine {
        workspace: report.workspace.clone(),
        pid: report.pid,
        build_id: report.build_id.clone(),
        interrupted: report
            .sessions
            .iter()
            .filter(|s| state_busy(s.state))
            .map(|s| s.id.clone())
            .collect(),
        killed,
        clients: report.clients,
    }
}
