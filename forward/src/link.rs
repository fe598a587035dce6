//! The resumable link: an ordered, exactly-once stream of [`Envelope`]s that survives the
//! loss of its transport.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use crate::proto::Envelope;

/// Tunables of a link.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// How often a heartbeat is sent when the transport is otherwise idle.
    pub heartbeat_interval: Duration,
    /// A transport with no inbound bytes for this long is declared dead.
    pub dead_after: Duration,
    /// Bytes of unacknowledged frames kept for replay; `send` waits when full.
    pub replay_limit_bytes: usize,
    /// Largest frame accepted or sent.
    pub max_frame_bytes: usize,
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            heartbeat_interval: Duration::from_secs(5),
            dead_after: Duration::from_secs(15),
            replay_limit_bytes: 64 * 1024 * 1024,
            max_frame_bytes: 16 * 1024 * 1024,
        }
    }
}

/// Why a link or one of its transports ended.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The transport reached EOF or failed.
    #[error("the connection closed: {0}")]
    TransportClosed(String),
    /// No bytes arrived for the dead-after interval.
    #[error("no data from the peer for {0:?}; the connection is considered dead")]
    Dead(Duration),
    /// A frame could not be decoded.
    #[error("malformed frame from the peer: {0}")]
    Malformed(String),
    /// A frame exceeded the size limit.
    #[error("frame of {size} bytes exceeds the limit of {limit} bytes")]
    Oversized {
        /// Announced size.
        size: usize,
        /// Limit in force.
        limit: usize,
    },
    /// The handshake failed.
    #[error("handshake failed: {0}")]
    Handshake(String),
    /// Protocol versions differ.
    #[error("protocol mismatch: this side speaks {ours}, the peer speaks {theirs}; install matching builds of reasonix and reasonix-remote")]
    ProtocolMismatch {
        /// Our version.
        ours: u32,
        /// The peer's version.
        theirs: u32,
    },
    /// The peer cannot resume because it no longer has frames we have not received.
    #[error("cannot resume: {0}")]
    ResumeImpossible(String),
    /// The link was closed locally.
    #[error("the link was closed")]
    Closed,
}

/// One end of a resumable link. Cheap to clone; all clones share the same state.
#[derive(Clone)]
pub struct Link {
    _private: (),
}

impl Link {
    /// Make a link end. Inbound envelopes arrive on the returned receiver in order and
    /// exactly once, whatever happens to the transports underneath.
    pub fn new(config: LinkConfig) -> (Link, mpsc::Receiver<Envelope>) {
        let _ = config;
        todo!("forward::link::Link::new")
    }

    /// Queue an envelope. Works while no transport is attached (it waits in the replay
    /// buffer); waits when the replay buffer is full (backpressure, never drops).
    pub async fn send(&self, envelope: Envelope) -> Result<(), LinkError> {
        let _ = envelope;
        todo!("forward::link::Link::send")
    }

    /// Drive one transport until it fails. First resends every buffered frame with
    /// `seq > peer_received`, then runs the reader, writer and heartbeat until the transport
    /// ends; returns why. May be called again with a new transport to resume.
    pub async fn run_transport<R, W>(&self, reader: R, writer: W, peer_received: u64) -> LinkError
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let _ = (reader, writer, peer_received);
        todo!("forward::link::Link::run_transport")
    }

    /// Highest data `seq` received from the peer (what a resume asks for).
    pub fn received(&self) -> u64 {
        todo!("forward::link::Link::received")
    }

    /// True while a transport is attached and alive.
    pub fn is_connected(&self) -> bool {
        todo!("forward::link::Link::is_connected")
    }

    /// Close the link: the current transport ends, `send` fails with [`LinkError::Closed`].
    pub fn close(&self) {
        todo!("forward::link::Link::close")
    }
}
