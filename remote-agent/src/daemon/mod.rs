//! The per-(user, workspace) daemon: accepts clients on a private unix socket, resumes their
//! links, and serves sessions.
//!
//! This file holds the [`Daemon`] itself, its tunables and its startup errors; the parts:
//! - `lifecycle`: the workspace lock, the accept loop, idle timeout, shutdown, run marker;
//! - `links`: a client's transport, handshake and resume, and the routing of its link;
//! - `conn`: one client link (`Conn`) and the gateway a session's turns use through it;
//! - `requests`: the dispatch of every request and the small handlers;
//! - `sessions`: listing, loading, deleting and the trash;
//! - `roles`: opening a session on a link, driver and spectator, takeover;
//! - `keeper`: the laptop's goal keeper, a standby gateway beside the driver;
//! - `workbench`: steering, `!` shell commands, prompt history.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reasonix_forward::link::LinkConfig;

use crate::paths::HostPaths;
use crate::session::{Runtime, Session};

/// Daemon tunables.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// Exit after this long with no client and no running work.
    pub idle_timeout: Duration,
    /// Keep a link whose transport died this long for a resume.
    pub link_grace: Duration,
    /// Link tunables.
    pub link: LinkConfig,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(30 * 60),
            link_grace: Duration::from_secs(30 * 60),
            link: LinkConfig::default(),
        }
    }
}

/// Errors that stop the daemon from starting.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Another daemon holds the lock.
    #[error("another reasonix-remote daemon already serves this workspace (lock {0})")]
    AlreadyRunning(String),
    /// I/O failure while setting up.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: io::Error,
    },
}

fn io_ctx(context: impl Into<String>) -> impl FnOnce(io::Error) -> DaemonError {
    let context = context.into();
    move |source| DaemonError::Io { context, source }
}

/// Previous-run marker stored next to the journals.
#[derive(serde::Serialize, serde::Deserialize)]
struct DaemonMarker {
    pid: u32,
    started: String,
    clean: bool,
}

/// The running daemon.
pub struct Daemon {
    paths: HostPaths,
    config: DaemonConfig,
    runtime: Arc<Runtime>,
    sandbox_status: String,
    started: Instant,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    links: Mutex<HashMap<String, Arc<Conn>>>,
    next_conn: AtomicU64,
    unclean: Option<String>,
    last_activity: Mutex<Instant>,
    /// The workspace's terminals; they outlive every link.
    terminals: Arc<crate::pty::Terminals>,
    /// Held while a session is loaded from its journal, so two links opening the same
    /// session at once load it once.
    loading: tokio::sync::Mutex<()>,
    /// The workspace's prompt history, shared by every client.
    history: Arc<crate::prompt_history::PromptHistory>,
    /// The TCP ports the workspace's processes listen on (#36 §1), started on first watch.
    ports: std::sync::OnceLock<Arc<crate::ports::PortWatch>>,
    /// The forwarded ssh-agent's socket (#36 §2), made on the first laptop's offer.
    agent: std::sync::OnceLock<Arc<crate::agent_sock::AgentSocket>>,
}

mod agent;
mod conn;
mod keeper;
mod lifecycle;
mod links;
mod ports;
mod requests;
mod roles;
mod sessions;
mod workbench;

use conn::Conn;
pub use lifecycle::pid_alive;

impl Daemon {
    /// Prepare a daemon for `paths` (does not bind yet).
    pub fn new(
        paths: HostPaths,
        config: DaemonConfig,
        runtime: Arc<Runtime>,
        sandbox_status: String,
    ) -> Arc<Daemon> {
        let unclean = match std::fs::read(&paths.daemon_state)
            .ok()
            .and_then(|b| serde_json::from_slice::<DaemonMarker>(&b).ok())
        {
            Some(m) if !m.clean && !pid_alive(m.pid) => Some(format!(
                "the previous reasonix-remote daemon (pid {}, started {}) did not shut down cleanly: it was killed or crashed. If the host kills processes when you log out (systemd KillUserProcesses=yes), run `loginctl enable-linger $USER` on the host so sessions keep running.",
                m.pid, m.started
            )),
            _ => None,
        };
        let terminals = crate::pty::Terminals::new(paths.workspace.clone());
        let history = Arc::new(crate::prompt_history::PromptHistory::new(
            &paths.sessions_dir,
        ));
        Arc::new(Daemon {
            ports: std::sync::OnceLock::new(),
            agent: std::sync::OnceLock::new(),
            terminals,
            loading: tokio::sync::Mutex::new(()),
            history,
            paths,
            config,
            runtime,
            sandbox_status,
            started: Instant::now(),
            sessions: Mutex::new(HashMap::new()),
            links: Mutex::new(HashMap::new()),
            next_conn: AtomicU64::new(1),
            unclean,
            last_activity: Mutex::new(Instant::now()),
        })
    }
}
