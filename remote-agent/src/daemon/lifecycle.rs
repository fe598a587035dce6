//! The daemon's life: the workspace lock, the socket and its accept loop (same-uid peers
//! only), the idle timeout, shutdown on a signal, and the previous-run marker that tells the
//! next daemon whether this one shut down cleanly.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reasonix_forward::sync::LockExt;
use tokio::net::UnixListener;

use super::{io_ctx, Daemon, DaemonError, DaemonMarker};
use crate::session::Session;

impl Daemon {
    fn write_marker(&self, clean: bool) {
        let marker = DaemonMarker {
            pid: std::process::id(),
            started: crate::journal::now_rfc3339(),
            clean,
        };
        if let Ok(b) = serde_json::to_vec(&marker) {
            let _ = std::fs::write(&self.paths.daemon_state, b);
        }
    }

    /// Bind the socket (holding the workspace lock) and serve until idle.
    pub async fn serve(self: Arc<Self>) -> Result<(), DaemonError> {
        let lock_file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.paths.lock)
            .map_err(io_ctx(format!("open lock {}", self.paths.lock.display())))?;
        // SAFETY: flock on a valid fd owned by lock_file, which lives until serve returns.
        let rc = unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&lock_file),
                libc::LOCK_EX | libc::LOCK_NB,
            )
        };
        if rc != 0 {
            return Err(DaemonError::AlreadyRunning(
                self.paths.lock.display().to_string(),
            ));
        }
        let _ = std::fs::remove_file(&self.paths.socket);
        let listener = UnixListener::bind(&self.paths.socket)
            .map_err(io_ctx(format!("bind {}", self.paths.socket.display())))?;
        std::fs::set_permissions(&self.paths.socket, std::fs::Permissions::from_mode(0o600))
            .map_err(io_ctx("chmod socket"))?;
        self.write_marker(false);
        // Deleted sessions older than the keep period go at each start (and at each trash
        // listing), so a daemon that rarely lists the trash still purges it.
        for id in crate::catalog::Catalog::new(&self.paths.sessions_dir)
            .expire(crate::catalog::now_secs())
        {
            tracing::info!("session {id} purged from the trash after its keep period");
        }
        tracing::info!(socket = %self.paths.socket.display(), "daemon listening");
        let my_uid = unsafe { libc::getuid() };
        let mut tick = tokio::time::interval(Duration::from_secs(1).min(self.config.idle_timeout));
        loop {
            tokio::select! {
                acc = listener.accept() => {
                    let (stream, _) = match acc {
                        Ok(s) => s,
                        Err(e) => { tracing::warn!("accept failed: {e}"); continue; }
                    };
                    match stream.peer_cred() {
                        Ok(cred) if cred.uid() == my_uid => {}
                        Ok(cred) => {
                            tracing::warn!("refused a client with uid {} (daemon uid {my_uid})", cred.uid());
                            continue;
                        }
                        Err(e) => { tracing::warn!("peer credentials unavailable: {e}"); continue; }
                    }
                    self.touch();
                    let me = Arc::clone(&self);
                    tokio::spawn(async move {
                        if let Err(e) = me.handle_transport(stream).await {
                            tracing::warn!("client transport ended: {e}");
                        }
                    });
                }
                _ = tick.tick() => {
                    if self.idle_expired() {
                        tracing::info!("idle timeout reached; exiting");
                        break;
                    }
                }
                _ = shutdown_signal() => {
                    tracing::info!("signal received; exiting");
                    break;
                }
            }
        }
        let _ = std::fs::remove_file(&self.paths.socket);
        self.terminals.close_all();
        // Durability point: every session's journal is written and fsynced before exit.
        let open: Vec<Arc<Session>> = self.sessions.lock_or_recover().values().cloned().collect();
        for session in open {
            if let Err(e) = session.flush_journal().await {
                tracing::error!("session {}: {e}", session.id);
            }
        }
        self.write_marker(true);
        drop(lock_file);
        Ok(())
    }

    pub(super) fn touch(&self) {
        *self.last_activity.lock_or_recover() = Instant::now();
    }

    fn idle_expired(&self) -> bool {
        let connected = self
            .links
            .lock_or_recover()
            .values()
            .any(|c| c.link.is_connected());
        let busy = self
            .sessions
            .lock_or_recover()
            .values()
            .any(|s| s.busy() || s.jobs_running());
        // A running shell is work: the user's terminal outlives its clients.
        if connected || busy || self.terminals.any_running() {
            self.touch();
            return false;
        }
        self.last_activity.lock_or_recover().elapsed() >= self.config.idle_timeout
    }
}

/// True when a process with this pid exists.
pub fn pid_alive(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence/permission.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    let exists = rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    // A killed daemon stays a zombie until its parent (the attach bridge that started it)
    // reaps it; signal 0 still finds it, but it runs nothing and holds no lock.
    exists && !is_zombie(pid)
}

/// `pid` has exited and waits to be reaped (state `Z` or `X` in `/proc/PID/stat`, after the
/// command name, which may itself hold spaces and parentheses).
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
        })
        .unwrap_or(false)
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut t), Ok(mut i)) => {
            tokio::select! {
                _ = t.recv() => {}
                _ = i.recv() => {}
            }
        }
        _ => std::future::pending::<()>().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zombie_is_not_alive() {
        let mut live = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        assert!(pid_alive(live.id()));
        let mut dead = std::process::Command::new("true").spawn().expect("true");
        // Exited but not reaped: a zombie until `wait`.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !is_zombie(dead.id()) {
            assert!(Instant::now() < deadline, "`true` never exited");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!pid_alive(dead.id()), "a zombie is not alive");
        let _ = dead.wait();
        assert!(!pid_alive(dead.id()), "a reaped process is not alive");
        let _ = live.kill();
        let _ = live.wait();
    }
}
