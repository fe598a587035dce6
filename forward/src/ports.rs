//! The wire types of forwarded ports (issue #36 §1): what the daemon announces
//! ([`HostPort`] lists in [`crate::proto::Notification::Ports`] and
//! [`crate::proto::Response::Ports`]) and what a port channel connects to ([`PortOpen`]).
//!
//! The daemon notices TCP ports that the workspace's own processes listen on and announces
//! them; the laptop listens on its loopback and opens one port channel
//! ([`crate::channel::ChannelOpen::Port`]) per accepted connection, whose data are
//! [`crate::channel::ChannelData::Bytes`] both ways. See `docs/PROTOCOL.md`, "Ports".

use serde::{Deserialize, Serialize};

use crate::channel::{Channel, ChannelData, ChannelEnd};
use crate::proto::PtyBytes;

/// One TCP port a workspace process listens on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPort {
    /// The port number.
    pub port: u16,
    /// The address it listens on, as the host's kernel reports it (`127.0.0.1`, `0.0.0.0`,
    /// `::`, `::1`, or a specific address).
    pub addr: String,
    /// The listening process.
    pub pid: u32,
    /// Its command name (`/proc/<pid>/comm`), for the user.
    pub command: String,
    /// True when the daemon can reach it on the host's loopback (so the laptop forwards it
    /// automatically); false when it is bound to another address only or lives in a
    /// private network namespace, with [`HostPort::note`] saying why.
    pub loopback: bool,
    /// Why it is not forwarded automatically, when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What a port channel connects to on the host. The laptop opens it for loopback ports on
/// its own and for any other address only when the user asked for that address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortOpen {
    /// Host address to connect to (`127.0.0.1`, `::1`, or what the user gave).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl PortOpen {
    /// A connection to the host's loopback on `port`.
    pub fn loopback(port: u16) -> Self {
        PortOpen {
            host: "127.0.0.1".into(),
            port,
        }
    }

    /// True when `host` is a loopback address (`127.0.0.0/8`, `::1`, `localhost`).
    pub fn is_loopback(&self) -> bool {
        is_loopback_host(&self.host)
    }
}

/// True when `host` names the loopback (`127.0.0.0/8`, `::1`, `localhost`).
pub fn is_loopback_host(host: &str) -> bool {
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .map(|ip| ip.is_loopback())
        .unwrap_or(false)
}

/// Bytes per data piece a port channel sends.
pub const PORT_PIECE: usize = 32 * 1024;

/// Receive window of a port channel (either side): a bulk transfer moves at most this much
/// per round trip (credit comes back in halves), so it is sized for a fast link with a long
/// round trip (4 MiB per 50 ms is 80 MB/s); it is also the most one connection holds queued.
pub const PORT_WINDOW: u32 = 4 * 1024 * 1024;

/// Carry a TCP connection over a port channel until both directions are finished: bytes
/// read from `stream` go out as [`ChannelData::Bytes`] (at most [`PORT_PIECE`] each, under
/// the channel's credit), and when the socket's reader ends the channel is half-closed;
/// bytes from the channel are written to the socket, whose writing side is shut down when
/// the peer half-closes. A socket error cancels the channel, and a cancelled channel (or a
/// link closed for good) resets the connection. Returns why it ended when it was not a
/// clean close of both directions.
pub async fn splice(stream: tokio::net::TcpStream, channel: Channel) -> Result<(), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let Channel { tx, mut rx } = channel;
    let handle = tx.handle();
    let up = async move {
        let mut buf = vec![0u8; PORT_PIECE];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) => {
                    tx.close(None).await;
                    return Ok(());
                }
                Ok(n) => {
                    let data = ChannelData::Bytes {
                        data: PtyBytes(buf[..n].to_vec()),
                    };
                    tx.send(data).await.map_err(|e| e.to_string())?;
                }
                Err(e) => return Err(format!("reading the connection: {e}")),
            }
        }
    };
    let down = async move {
        while let Some(piece) = rx.recv().await {
            match piece {
                ChannelData::Bytes { data } => {
                    if let Err(e) = wr.write_all(&data.0).await {
                        return Err(format!("writing the connection: {e}"));
                    }
                }
                other => {
                    return Err(format!(
                        "a port channel carries bytes only, not {:?}",
                        std::mem::discriminant(&other)
                    ))
                }
            }
        }
        match rx.end() {
            Some(ChannelEnd::Closed(_)) => {
                let _ = wr.shutdown().await;
                Ok(())
            }
            Some(end) => Err(end.to_string()),
            None => Err(ChannelEnd::LinkClosed.to_string()),
        }
    };
    tokio::pin!(up, down);
    let (mut up_done, mut down_done) = (false, false);
    while !(up_done && down_done) {
        let r = tokio::select! {
            r = &mut up, if !up_done => { up_done = true; r }
            r = &mut down, if !down_done => { down_done = true; r }
        };
        if let Err(e) = r {
            handle.cancel(e.clone());
            return Err(e);
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_recognised() {
        for h in [
            "127.0.0.1",
            "127.1.2.3",
            "::1",
            "[::1]",
            "localhost",
            "LOCALHOST",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in ["0.0.0.0", "10.0.0.1", "example.com", "::", ""] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }
}
