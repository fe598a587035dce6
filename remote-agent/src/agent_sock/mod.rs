//! The workspace's forwarded ssh-agent, host side (issue #36 §2).
//!
//! Once a laptop with `ForwardAgent` on offers its agent, the daemon listens on one stable
//! Unix socket (`<run dir>/<workspace key>-agent/agent`, directory 0700, socket 0600) for the
//! life of the daemon: the `SSH_AUTH_SOCK` of the workspace's terminals, and of the bash
//! tool when `[sandbox] ssh_agent = true`. It outlives every SSH connection: each agent
//! request on it goes over the link that is current *when the request is made*
//! ([`Route`], chosen by the daemon: the driving laptop that offered its agent) as one
//! agent channel per socket connection ([`reasonix_forward::channel::ChannelOpen::Agent`]).
//!
//! No laptop attached (no offer, or its transport is down) → the request is answered
//! `SSH_AGENT_FAILURE` at once, never held: `ssh-add -l` says "agent refused operation"
//! and `git push` falls back to other keys or fails. When the link drops while a request
//! is out, the request fails the same way; the next one goes through whichever laptop
//! drives by then. Nothing the agent says is logged; only which process asked for what
//! kind of operation.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use reasonix_forward::agent::{
    failure, kind_name, message_kind, read_message, AgentOpen, Frames, AGENT_WINDOW,
};
use reasonix_forward::channel::{Channel, ChannelData, ChannelEnd, ChannelOpen};
use reasonix_forward::proto::PtyBytes;
use reasonix_forward::rpc::Rpc;
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};

/// How long one request may wait for the laptop's answer while the link stays up (a
/// hardware key or a confirmation on the laptop takes a while).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// Where agent requests go now: a link (by the daemon's connection id, so a channel is
/// reused only on the same link) and its RPC.
#[derive(Clone)]
pub struct Route {
    /// The daemon's id of the link's connection.
    pub conn: u64,
    /// The link's RPC.
    pub rpc: Rpc,
}

/// Picks the route for each request; `None` when no laptop that forwards its agent is
/// attached.
pub type RoutePicker = Arc<dyn Fn() -> Option<Route> + Send + Sync>;

/// The socket path of this process's daemon, once it serves one (one daemon per process;
/// read by the terminals and the bash sandbox).
static SOCKET: OnceLock<PathBuf> = OnceLock::new();

/// The forwarded agent's socket, when this process serves one.
pub fn socket_path() -> Option<&'static Path> {
    SOCKET.get().map(PathBuf::as_path)
}

/// The directory holding the socket (what the bash sandbox hides or shows).
pub fn socket_dir() -> Option<&'static Path> {
    socket_path().and_then(Path::parent)
}

/// The socket path for a workspace's run directory and key.
pub fn path_for(run_dir: &Path, key: &str) -> PathBuf {
    run_dir.join(format!("{key}-agent")).join("agent")
}

/// The served socket.
pub struct AgentSocket {
    path: PathBuf,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for AgentSocket {
    fn drop(&mut self) {
        self.accept.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

impl AgentSocket {
    /// Listen at `path` (its directory made 0700, the socket 0600; a stale socket of an
    /// earlier daemon is replaced: the caller holds the workspace's daemon lock) and send
    /// every request where `route` says.
    pub fn serve(path: PathBuf, route: RoutePicker) -> std::io::Result<Arc<AgentSocket>> {
        let sock = Self::listen(path, route)?;
        let _ = SOCKET.set(sock.path.clone());
        Ok(sock)
    }

    /// [`AgentSocket::serve`] without making it this process's `SSH_AUTH_SOCK` (tests).
    fn listen(path: PathBuf, route: RoutePicker) -> std::io::Result<Arc<AgentSocket>> {
        if path.as_os_str().len() > 107 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "the agent socket path {} is longer than a Unix socket allows; set XDG_RUNTIME_DIR to a short directory on the host",
                    path.display()
                ),
            ));
        }
        let dir = path.parent().unwrap_or(Path::new("/"));
        crate::paths::private_dir(dir)?;
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let listener = UnixListener::bind(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        tracing::info!(socket = %path.display(), "serving the forwarded ssh-agent");
        let accept = tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        tokio::spawn(serve_client(stream, Arc::clone(&route)));
                    }
                    Err(e) => {
                        tracing::warn!("agent socket accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
        });
        Ok(Arc::new(AgentSocket { path, accept }))
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Which host process connected (for the laptop's log and prompt).
fn peer(stream: &UnixStream) -> AgentOpen {
    let pid = stream
        .peer_cred()
        .ok()
        .and_then(|c| c.pid())
        .and_then(|p| u32::try_from(p).ok());
    let command = pid
        .and_then(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).ok())
        .map(|c| c.trim().to_string())
        .unwrap_or_default();
    AgentOpen { pid, command }
}

/// The open channel of one socket connection, and the link it is on.
struct Open {
    conn: u64,
    channel: Channel,
    frames: Frames,
}

/// One client of the socket: request after request, each answered by the laptop's agent
/// or by `SSH_AGENT_FAILURE`.
async fn serve_client(stream: UnixStream, route: RoutePicker) {
    let who = peer(&stream);
    let (mut rd, mut wr) = stream.into_split();
    let mut open: Option<Open> = None;
    loop {
        let msg = match read_message(&mut rd).await {
            Ok(Some(m)) => m,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!("agent socket client gone: {e}");
                return;
            }
        };
        let kind = kind_name(message_kind(&msg));
        let reply = match ask(&mut open, msg, &route, &who).await {
            Ok(reply) => reply,
            Err(why) => {
                tracing::info!(
                    pid = who.pid,
                    command = %who.command,
                    "agent request ({kind}) refused: {why}"
                );
                open = None;
                failure()
            }
        };
        if wr.write_all(&reply).await.is_err() {
            return;
        }
    }
}

/// Send `msg` to the current laptop's agent and wait for its answer.
async fn ask(
    open: &mut Option<Open>,
    msg: Vec<u8>,
    route: &RoutePicker,
    who: &AgentOpen,
) -> Result<Vec<u8>, String> {
    let Some(r) = route() else {
        return Err("no laptop attached forwards its ssh-agent".into());
    };
    if !r.rpc.link().is_connected() {
        return Err("no laptop attached: the driving laptop's link is down".into());
    }
    if open.as_ref().is_some_and(|o| o.conn != r.conn) {
        *open = None;
    }
    let mut connected = r.rpc.link().watch_connected();
    let fresh = open.is_none();
    if fresh {
        // Eager: the request crosses with the open when the laptop takes early data (one
        // round trip per agent connection, not two); a refusal ends the channel with the
        // laptop's reason, which the answer below reports.
        let opening = r
            .rpc
            .open_channel_eager(ChannelOpen::Agent(who.clone()), AGENT_WINDOW);
        let answer = tokio::select! {
            a = opening => a,
            _ = connected.wait_for(|c| !*c) => return Err("the laptop's link dropped".into()),
        };
        let (channel, _) = answer.map_err(|e| format!("the laptop did not open its agent: {e}"))?;
        *open = Some(Open {
            conn: r.conn,
            channel,
            frames: Frames::new(),
        });
    }
    let Some(o) = open.as_mut() else {
        return Err("no agent channel".into());
    };
    o.channel
        .tx
        .send(ChannelData::Bytes {
            data: PtyBytes(msg),
        })
        .await
        .map_err(|e| e.to_string())?;
    let answer = async {
        loop {
            if let Some(reply) = o.frames.next_message()? {
                return Ok(reply);
            }
            match o.channel.rx.recv().await {
                Some(ChannelData::Bytes { data }) => o.frames.push(&data.0),
                Some(_) => return Err("the laptop sent something other than bytes".to_string()),
                None => {
                    return Err(match o.channel.rx.end() {
                        Some(ChannelEnd::CancelledByPeer(why)) if fresh => {
                            format!("the laptop did not open its agent: {why}")
                        }
                        end => format!(
                            "the agent channel ended: {}",
                            end.map(|e| e.to_string()).unwrap_or_default()
                        ),
                    })
                }
            }
        }
    };
    tokio::select! {
        a = tokio::time::timeout(ANSWER_TIMEOUT, answer) => {
            a.map_err(|_| format!("the laptop's agent did not answer within {} s", ANSWER_TIMEOUT.as_secs()))?
        }
        _ = connected.wait_for(|c| !*c) => Err("the laptop's link dropped while the request was out".into()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;
    use reasonix_forward::agent::{frame, SSH_AGENT_FAILURE};
    use tokio::io::AsyncReadExt;

    /// With no laptop the socket answers at once with SSH_AGENT_FAILURE (a real socket, a
    /// real client), and it is private.
    #[tokio::test]
    async fn no_laptop_means_an_immediate_failure_and_the_socket_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k-agent").join("agent");
        let sock = AgentSocket::listen(path.clone(), Arc::new(|| None)).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(mode(&path), 0o600);
        let mut c = UnixStream::connect(sock.path()).await.unwrap();
        for _ in 0..2 {
            c.write_all(&frame(&[11])).await.unwrap();
            let mut reply = [0u8; 5];
            tokio::time::timeout(Duration::from_secs(5), c.read_exact(&mut reply))
                .await
                .expect("answered at once")
                .unwrap();
            assert_eq!(reply, [0, 0, 0, 1, SSH_AGENT_FAILURE]);
        }
        drop(sock);
        assert!(!path.exists(), "the socket is removed with the daemon");
    }
}
