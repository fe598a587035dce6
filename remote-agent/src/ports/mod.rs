//! Forwarded ports, host side (issue #36 §1).
//!
//! - [`procfs`]: the pure core: which TCP ports the daemon's descendants (bash tool jobs,
//!   `!` commands, terminals, host MCP servers: every process the workspace's daemon
//!   started, and what they started) listen on, from their sockets in `/proc`.
//! - [`PortWatch`]: polls that list while at least one link watches it
//!   ([`reasonix_forward::proto::Request::WatchPorts`]) and hands every change to them.
//! - [`serve`]: a port channel the laptop opens: connect to the host address it names and
//!   carry the bytes ([`reasonix_forward::ports::splice`]).
//!
//! Only the laptop decides what it forwards: it opens loopback ports on its own and other
//! addresses only when its user names them. A process that left the daemon's tree (a
//! double fork to init) is not the workspace's any more and is not announced.

pub mod procfs;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use reasonix_forward::channel::{ChannelAccepted, Offer};
use reasonix_forward::ports::{splice, HostPort, PortOpen, PORT_WINDOW};
use reasonix_forward::proto::{ErrorCode, RpcError};
use tokio::sync::watch;

/// How often the listening ports are looked up while someone watches.
pub const POLL: Duration = Duration::from_millis(700);

/// How long connecting to a host port may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The workspace's listening ports, kept current while watched.
pub struct PortWatch {
    current: watch::Sender<Vec<HostPort>>,
    proc: PathBuf,
    root: u32,
    own_netns: Option<String>,
}

impl PortWatch {
    /// Start polling `/proc` for listeners below this process (every [`POLL`], only while
    /// some link watches).
    pub fn start() -> Arc<PortWatch> {
        Self::start_at(PathBuf::from("/proc"), std::process::id(), POLL)
    }

    fn start_at(proc: PathBuf, root: u32, every: Duration) -> Arc<PortWatch> {
        let (current, _) = watch::channel(Vec::new());
        let own_netns = std::fs::read_link(proc.join("self/ns/net"))
            .ok()
            .map(|p| p.to_string_lossy().into_owned());
        let me = Arc::new(PortWatch {
            current,
            proc,
            root,
            own_netns,
        });
        let weak = Arc::downgrade(&me);
        tokio::spawn(async move {
            loop {
                let Some(me) = weak.upgrade() else { return };
                if me.current.receiver_count() > 0 {
                    me.refresh().await;
                }
                drop(me);
                tokio::time::sleep(every).await;
            }
        });
        me
    }

    /// Look the list up now and publish it if it changed.
    async fn refresh(&self) {
        let (p, root, ns) = (self.proc.clone(), self.root, self.own_netns.clone());
        let found = tokio::task::spawn_blocking(move || procfs::scan(&p, root, ns.as_deref()))
            .await
            .unwrap_or_default();
        self.current.send_if_modified(|cur| {
            if *cur != found {
                *cur = found;
                true
            } else {
                false
            }
        });
    }

    /// The list now (looked up at once) and a receiver that sees every change after it.
    pub async fn watch(&self) -> (Vec<HostPort>, watch::Receiver<Vec<HostPort>>) {
        let mut rx = self.current.subscribe();
        self.refresh().await;
        let now = rx.borrow_and_update().clone();
        (now, rx)
    }
}

/// Serve a port channel: connect to `open` on the host and carry the connection's bytes.
/// Refused (with the reason for the user) when nothing answers there.
pub async fn serve(open: PortOpen, offer: Offer) {
    let target = if open.host.contains(':') && !open.host.starts_with('[') {
        format!("[{}]:{}", open.host, open.port)
    } else {
        format!("{}:{}", open.host, open.port)
    };
    let stream = match tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio::net::TcpStream::connect(target.as_str()),
    )
    .await
    {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            let msg = format!("nothing answers on {target} on the host: {e}");
            offer.refuse(RpcError::new(ErrorCode::NotFound, msg)).await;
            return;
        }
        Err(_) => {
            let msg = format!(
                "connecting to {target} on the host took more than {} s",
                CONNECT_TIMEOUT.as_secs()
            );
            offer.refuse(RpcError::new(ErrorCode::Io, msg)).await;
            return;
        }
    };
    let channel = match offer.accept(ChannelAccepted::Port, PORT_WINDOW).await {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!("port channel to {target} not accepted: {e}");
            return;
        }
    };
    if let Err(e) = splice(stream, channel).await {
        tracing::debug!("port connection to {target} ended: {e}");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    /// The watcher sees a port a child starts listening on, and sees it go when the child
    /// exits (real processes, real `/proc`).
    #[tokio::test]
    async fn a_watcher_sees_a_child_port_come_and_go() {
        let w = PortWatch::start_at(PathBuf::from("/proc"), std::process::id(), POLL / 7);
        let (_, mut rx) = w.watch().await;
        let mut child = tokio::process::Command::new("python3")
            .args([
                "-c",
                "import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen()\nprint(s.getsockname()[1],flush=True)\ntime.sleep(60)",
            ])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("python3");
        let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        tokio::io::AsyncBufReadExt::read_line(&mut out, &mut line)
            .await
            .unwrap();
        let port: u16 = line.trim().parse().unwrap();
        let seen = tokio::time::timeout(
            Duration::from_secs(20),
            rx.wait_for(|l| l.iter().any(|p| p.port == port && p.loopback)),
        )
        .await;
        assert!(seen.is_ok(), "port {port} was never announced");
        drop(seen);
        child.kill().await.unwrap();
        let gone = tokio::time::timeout(
            Duration::from_secs(20),
            rx.wait_for(|l| !l.iter().any(|p| p.port == port)),
        )
        .await;
        assert!(
            gone.is_ok(),
            "port {port} stayed announced after its process exited"
        );
    }
}
