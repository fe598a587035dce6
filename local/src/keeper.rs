//! The goal keeper (issue 38 §3): a small background `reasonix keep` process on the laptop
//! that holds a link and the provider gateway for a session while its goal runs, so that
//! closing the workbench, interrupting `reasonix run --goal` or closing the terminal does
//! not stop the goal at its next model step. The API key stays on the laptop: the keeper
//! reads the laptop's config and secrets like any client, never from its arguments.
//!
//! On the host the keeper is a standby gateway: it never drives (it cannot submit, approve
//! or change settings), and the session uses it only while no driver with a live link is
//! attached. It reconnects like every client ([`crate::client`]) and exits when the goal
//! ends (complete, blocked, stopped, paused) or the session is gone. One keeper per session
//! on this laptop: `<reasonix home>/keepers/<session>.pid`; its log is
//! `<reasonix home>/logs/keeper-<session>.log`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use reasonix_forward::goal::GoalStatus;
use reasonix_forward::proto::{
    ErrorCode, EventKind, GoalEvent, OpenSession, Request, Response, SessionInfo,
};
use reasonix_forward::rpc::CallError;

use crate::client::{Client, ClientEvent, ClientOptions, ConnState};
use crate::config::Config;
use crate::connect::Connector;
use crate::gateway::Gateway;

/// How a keeper started by this process reaches the same workspace: the arguments of
/// `reasonix keep` after `--session ID` (`--ssh DEST` with the SSH options, or `--workspace
/// PATH`). Set once by the command that connects; none (containers, exec transports): no
/// keeper can be started.
static ORIGIN: OnceLock<Vec<String>> = OnceLock::new();

/// Record how this process reached its workspace (see [`ORIGIN`]); the first call wins.
pub fn set_origin(args: Vec<String>) {
    let _ = ORIGIN.set(args);
}

/// `<home>/keepers/<session>.pid`: the keeper of `session` writes its process id there.
pub fn pid_file(home: &Path, session: &str) -> PathBuf {
    home.join("keepers").join(format!("{}.pid", safe(session)))
}

/// `<home>/logs/keeper-<session>.log`: the keeper's standard output and error.
pub fn log_file(home: &Path, session: &str) -> PathBuf {
    home.join("logs")
        .join(format!("keeper-{}.log", safe(session)))
}

/// A session id as a file name (ids are hex and dashes; anything else is replaced).
fn safe(session: &str) -> String {
    session
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The process id of the keeper of `session` on this laptop, if one runs.
pub fn running(home: &Path, session: &str) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(pid_file(home, session))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    crate::platform::detach::pid_alive(pid).then_some(pid)
}

/// What [`start`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Started {
    /// A keeper was started with this process id.
    Spawned(u32),
    /// A keeper already keeps the session.
    Already(u32),
    /// `[agent] goal_keeper = false`: the goal waits for a laptop at its model steps.
    Off,
    /// No keeper could be started (why); the goal waits for a laptop at its model steps.
    Unavailable(String),
}

impl Started {
    /// The line for the user.
    pub fn line(&self) -> String {
        match self {
            Started::Spawned(pid) | Started::Already(pid) => format!(
                "goal kept by this laptop (pid {pid}): it goes on if this client closes, while this laptop is on"
            ),
            Started::Off => "no goal keeper ([agent] goal_keeper = false): with no client attached the goal waits for a laptop at its next model step".into(),
            Started::Unavailable(why) => format!(
                "no goal keeper ({why}): with no client attached the goal waits for a laptop at its next model step"
            ),
        }
    }
}

/// Start the keeper of `session` unless one runs or the user turned keepers off. Never
/// fails the goal: a keeper that cannot start is reported, and the goal works as without.
pub fn start(config: &Config, session: &str) -> Started {
    if !config.agent.goal_keeper {
        return Started::Off;
    }
    let Some(origin) = ORIGIN.get() else {
        return Started::Unavailable(
            "this transport has no keeper: only SSH and local workspaces".into(),
        );
    };
    if let Some(pid) = running(&config.home, session) {
        return Started::Already(pid);
    }
    match spawn(&config.home, session, origin) {
        Ok(pid) => Started::Spawned(pid),
        Err(e) => Started::Unavailable(e),
    }
}

fn spawn(home: &Path, session: &str, origin: &[String]) -> Result<u32, String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find this program to start it again: {e}"))?;
    let log = log_file(home, session);
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("keep")
        .args(["--session", session])
        .args(origin)
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err);
    crate::platform::detach::detach(&mut cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the keeper: {e}"))?;
    let pid = child.id();
    // Reaped when it ends, so a long-lived workbench keeps no zombie.
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(pid)
}

/// The pid file of the running keeper: removed when the keeper ends.
struct PidFile(PathBuf);

impl PidFile {
    /// Claim `session` for this process; `Err(pid)` when another live keeper has it.
    fn claim(home: &Path, session: &str) -> Result<PidFile, String> {
        let path = pid_file(home, session);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let me = std::process::id();
        // Written whole under a name of its own, then linked into place (which fails when the
        // file exists): nobody ever reads a half-written pid.
        let tmp = path.with_extension(format!("{me}.tmp"));
        std::fs::write(&tmp, me.to_string())
            .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        let claimed = Self::link(&tmp, &path, home, session, me);
        let _ = std::fs::remove_file(&tmp);
        claimed
    }

    fn link(
        tmp: &Path,
        path: &Path,
        home: &Path,
        session: &str,
        me: u32,
    ) -> Result<PidFile, String> {
        for _ in 0..2 {
            match std::fs::hard_link(tmp, path) {
                Ok(()) => return Ok(PidFile(path.to_path_buf())),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if let Some(pid) = running(home, session).filter(|p| *p != me) {
                        return Err(format!("session {session} is kept already (pid {pid})"));
                    }
                    // A keeper that ended without cleaning up: its file is stale.
                    let _ = std::fs::remove_file(path);
                }
                Err(e) => return Err(format!("cannot create {}: {e}", path.display())),
            }
        }
        Err(format!("cannot claim {}", path.display()))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// True while `status` keeps the keeper: the goal's turns go on.
fn keeps(status: Option<GoalStatus>) -> bool {
    matches!(status, Some(GoalStatus::Running))
}

/// The keeper itself (`reasonix keep`): claim the session, attach as its standby gateway,
/// and serve its model requests until the goal ends. `Ok`: why it ended normally.
pub async fn run(
    config: &Config,
    connector: Arc<dyn Connector>,
    session: &str,
) -> Result<String, String> {
    let _pid = PidFile::claim(&config.home, session)?;
    let gateway = Arc::new(Gateway::new(config));
    let options = ClientOptions {
        config_home: Some(config.home.clone()),
        ..ClientOptions::default()
    };
    let (client, mut events) = Client::start(connector, gateway, options);
    let ended = keep(&client, &mut events, session).await;
    // Let go of the session at once (the host then lists no keeper), not when the link
    // expires.
    client.leave().await;
    ended
}

async fn keep(
    client: &Client,
    events: &mut tokio::sync::mpsc::UnboundedReceiver<ClientEvent>,
    session: &str,
) -> Result<String, String> {
    let mut open_task = Some(open(client, session));
    loop {
        let opened = async {
            match open_task.as_mut() {
                Some(t) => t.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = opened => {
                open_task = None;
                match r {
                    Ok(Some(status)) if keeps(Some(status)) => {
                        tracing::info!(session, "keeping the goal");
                        eprintln!("reasonix keep: keeping the goal of session {session}");
                    }
                    Ok(status) => {
                        return Ok(format!(
                            "the goal of session {session} is {}; nothing to keep",
                            status.map(|s| s.as_str()).unwrap_or("gone")
                        ))
                    }
                    Err(e) => return Err(e),
                }
            }
            ev = events.recv() => match ev {
                None => return Err("the client stopped".into()),
                Some(ClientEvent::Event(ev)) => {
                    if let EventKind::Goal(GoalEvent::Status { status, .. }) = &ev.kind {
                        if !keeps(Some(*status)) {
                            return Ok(format!("the goal of session {session} is {}", status.as_str()));
                        }
                    }
                }
                Some(ClientEvent::Reattached { reason }) => {
                    // A fresh link (the daemon restarted or the link expired): attach again
                    // and look at the goal as it is now.
                    eprintln!("reasonix keep: {reason}");
                    open_task = Some(open(client, session));
                }
                Some(ClientEvent::Connection(ConnState::Failed { reason, .. })) => {
                    return Err(format!("the connection failed: {reason}"));
                }
                Some(ClientEvent::Connection(state)) => {
                    tracing::info!(?state, "keeper connection");
                }
                // Approvals, roles, tool progress: the keeper answers nothing.
                Some(_) => {}
            }
        }
    }
}

type Opening =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Option<GoalStatus>, String>> + Send>>;

/// Attach to `session` as its keeper; the goal's status as the host lists it right after
/// (`None`: the session is gone).
fn open(client: &Client, session: &str) -> Opening {
    let client = client.clone();
    let session = session.to_string();
    Box::pin(async move {
        let row = list_row(&client, &session).await?;
        let Some(row) = row else { return Ok(None) };
        if !keeps(row.goal.as_ref().map(|g| g.status)) {
            return Ok(row.goal.map(|g| g.status));
        }
        let open = OpenSession {
            session: Some(session.clone()),
            // Only what happens from now on: the goal's status came with the listing.
            since: row.last_seq,
            keeper: true,
            ..OpenSession::default()
        };
        match client.open_session(open).await {
            Ok(_) => {}
            Err(CallError::Remote(e)) if e.code == ErrorCode::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot attach to session {session}: {e}")),
        }
        let row = list_row(&client, &session).await?;
        let Some(row) = row else { return Ok(None) };
        if !row.keeper_attached {
            return Err(
                "the host's reasonix-remote does not support goal keepers (upgrade it: reconnect with `reasonix ssh`)".into(),
            );
        }
        Ok(row.goal.map(|g| g.status))
    })
}

async fn list_row(client: &Client, session: &str) -> Result<Option<SessionInfo>, String> {
    let answer = tokio::time::timeout(
        Duration::from_secs(600),
        client.request(Request::ListSessions),
    )
    .await
    .map_err(|_| "the host did not list its sessions within 10 minutes".to_string())?;
    match answer {
        Ok(Response::Sessions { sessions }) => Ok(sessions.into_iter().find(|s| s.id == session)),
        Ok(other) => Err(format!("unexpected answer to ListSessions: {other:?}")),
        Err(e) => Err(format!("cannot list the sessions: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_keeper_per_session_and_its_file_goes_with_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path();
        assert_eq!(running(home, "abc-1"), None);
        let claim = PidFile::claim(home, "abc-1").expect("claim");
        assert_eq!(running(home, "abc-1"), Some(std::process::id()));
        // Another live process holds it: refused, naming it.
        std::fs::write(pid_file(home, "abc-2"), "1").expect("write");
        let err = PidFile::claim(home, "abc-2").err().expect("refused");
        assert!(err.contains("kept already (pid 1)"), "{err}");
        drop(claim);
        assert!(!pid_file(home, "abc-1").exists());
        // A stale file (no such process) is taken over.
        let mut child = std::process::Command::new("true").spawn().expect("true");
        let dead = child.id();
        child.wait().expect("wait");
        std::fs::write(pid_file(home, "abc-3"), dead.to_string()).expect("write");
        let claim = PidFile::claim(home, "abc-3").expect("stale file taken over");
        assert_eq!(running(home, "abc-3"), Some(std::process::id()));
        drop(claim);
    }

    #[test]
    fn file_names_stay_in_their_folder() {
        let home = Path::new("/h");
        assert_eq!(
            pid_file(home, "../x/y"),
            PathBuf::from("/h/keepers/___x_y.pid")
        );
        assert_eq!(
            log_file(home, "6750-ab12"),
            PathBuf::from("/h/logs/keeper-6750-ab12.log")
        );
    }

    #[test]
    fn only_a_running_goal_is_kept() {
        assert!(keeps(Some(GoalStatus::Running)));
        for s in [
            GoalStatus::Paused,
            GoalStatus::BudgetPaused,
            GoalStatus::Complete,
            GoalStatus::Blocked,
            GoalStatus::Stopped,
        ] {
            assert!(!keeps(Some(s)), "{s:?}");
        }
        assert!(!keeps(None));
    }
}
