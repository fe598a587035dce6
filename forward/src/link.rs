//! The resumable link: an ordered, exactly-once stream of [`Envelope`]s that survives the
//! loss of its transport.
//!
//! Each [`Link`] end numbers its data frames (`seq` from 1) and keeps every frame the peer
//! has not acknowledged in a replay buffer bounded by bytes. Every frame carries the highest
//! `seq` received (`ack`), which trims the peer's buffer. When a transport dies, the link
//! lives on; [`Link::run_transport`] on a new transport resends what the peer lacks. At most
//! one transport runs at a time: starting a new one stops the old one first.
//! See `docs/PROTOCOL.md` for the wire-level description.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch, Notify, OwnedMutexGuard};
use tokio::task::{AbortHandle, JoinHandle};

use crate::frame::{
    encode_parts, io_closed, Frame, FrameDecoder, FrameKind, HEADER_LEN, PREFIX_LEN,
};
use crate::proto::Envelope;
use crate::sync::LockExt;

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

/// Capacity of the inbound envelope channel. When the consumer falls behind, the reader
/// stops reading, which pushes back on the peer (its replay buffer fills, its `send` waits).
const INBOUND_CAPACITY: usize = 1024;

/// Send an explicit `Ack` after this many data frames received without sending anything.
const ACK_EVERY_FRAMES: u64 = 64;

/// ... or after this long.
const ACK_DELAY: Duration = Duration::from_millis(50);

/// The writer takes at most this many frames / bytes per batch, so control frames (pings,
/// pongs) queued meanwhile wait for at most one batch.
const BATCH_FRAMES: usize = 256;
const BATCH_BYTES: usize = 256 * 1024;

/// How long `close()` lets the writer flush its `Close` frame before the transport is torn down.
const CLOSE_GRACE: Duration = Duration::from_millis(500);

/// Counters of one link end, for status displays and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// `seq` of the last data frame queued by `send` (0 = none yet).
    pub sent_seq: u64,
    /// Highest `seq` the peer acknowledged.
    pub peer_acked: u64,
    /// Highest data `seq` received and delivered.
    pub received: u64,
    /// Frames in the replay buffer (queued or sent, not yet acknowledged).
    pub buffered_frames: usize,
    /// Payload bytes in the replay buffer.
    pub buffered_bytes: usize,
    /// Transports attached so far.
    pub transports: u64,
    /// Data frames written that had already been written on an earlier transport.
    pub resent_frames: u64,
    /// Duplicate data frames received and dropped.
    pub duplicates_dropped: u64,
    /// Round-trip time of the last answered heartbeat.
    pub last_rtt: Option<Duration>,
}

/// Outbound state shared by senders, the writer and the ack processing.
struct State {
    /// `seq` the next `send` gets.
    next_seq: u64,
    /// Frame kinds and payloads ([`crate::payload`]) of seq `front_seq .. next_seq`,
    /// unacknowledged.
    buffer: VecDeque<(FrameKind, Bytes)>,
    /// `seq` of `buffer[0]`; everything before it is acknowledged by the peer.
    front_seq: u64,
    buffered_bytes: usize,
    /// Highest seq ever written on any transport (for counting resends).
    high_written: u64,
    closed: bool,
    close_reason: Option<String>,
    /// Dropped on close so the receiver sees the end of the stream.
    inbound_tx: Option<mpsc::Sender<Envelope>>,
    /// Generation of the current transport; bumped by every `run_transport` and `close`.
    generation: u64,
    /// Tasks of the running transport, aborted when a newer one starts.
    tasks: Vec<AbortHandle>,
    stats: LinkStats,
}

struct Shared {
    config: LinkConfig,
    state: Mutex<State>,
    /// Highest data seq delivered to the inbound channel.
    received: AtomicU64,
    /// Woken when buffer space frees up or the link closes (senders wait on it).
    space: Notify,
    /// Held by the running transport's tasks; a new transport waits for it so two readers
    /// never deliver concurrently.
    slot: Arc<tokio::sync::Mutex<()>>,
    connected: watch::Sender<bool>,
    closed: watch::Sender<bool>,
    /// Mirror of `State::generation`, so a transport waiting for the slot can notice that
    /// a newer one was started and give up.
    generation: watch::Sender<u64>,
    /// The running transport's writer queue (None while disconnected).
    wire: Mutex<Option<Arc<Wire>>>,
    /// The peer reads `Bytes` frames (it said so in the handshake): channel bytes go raw.
    bytes_frames: AtomicBool,
    /// The peer takes channel data before it answered the open (it said so in the
    /// handshake): see [`crate::channel::EARLY_WINDOW`].
    early_data: AtomicBool,
}

/// One end of a resumable link. Cheap to clone; all clones share the same state.
#[derive(Clone)]
pub struct Link {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("stats", &self.stats())
            .finish()
    }
}

impl Link {
    /// Make a link end. Inbound envelopes arrive on the returned receiver in order and
    /// exactly once, whatever happens to the transports underneath. The receiver ends
    /// (`None`) after the link is closed.
    pub fn new(config: LinkConfig) -> (Link, mpsc::Receiver<Envelope>) {
        let (tx, rx) = mpsc::channel(INBOUND_CAPACITY);
        let state = State {
            next_seq: 1,
            buffer: VecDeque::new(),
            front_seq: 1,
            buffered_bytes: 0,
            high_written: 0,
            closed: false,
            close_reason: None,
            inbound_tx: Some(tx),
            generation: 0,
            tasks: Vec::new(),
            stats: LinkStats::default(),
        };
        let shared = Shared {
            config,
            state: Mutex::new(state),
            received: AtomicU64::new(0),
            space: Notify::new(),
            slot: Arc::new(tokio::sync::Mutex::new(())),
            connected: watch::channel(false).0,
            closed: watch::channel(false).0,
            generation: watch::channel(0).0,
            wire: Mutex::new(None),
            bytes_frames: AtomicBool::new(false),
            early_data: AtomicBool::new(false),
        };
        (
            Link {
                shared: Arc::new(shared),
            },
            rx,
        )
    }

    /// The configuration this link was made with.
    pub fn config(&self) -> &LinkConfig {
        &self.shared.config
    }

    /// The peer said in the handshake that it reads `Bytes` frames: from now on channel
    /// bytes are sent raw instead of as base64 in JSON ([`crate::payload`]). A link's peer
    /// is one process for the link's whole life, so this never needs turning off.
    pub fn enable_bytes_frames(&self) {
        self.shared.bytes_frames.store(true, Ordering::Release);
    }

    /// Whether channel bytes go out as `Bytes` frames.
    pub fn bytes_frames(&self) -> bool {
        self.shared.bytes_frames.load(Ordering::Acquire)
    }

    /// The peer said in the handshake that it takes channel data before it answered the
    /// open, within [`crate::channel::EARLY_WINDOW`] (and sends such data itself): from now
    /// on [`crate::channel::Channels::open_eager`] returns at once and channels this side
    /// accepts take data before the answer. Like [`Link::enable_bytes_frames`], never turned
    /// off.
    pub fn enable_early_data(&self) {
        self.shared.early_data.store(true, Ordering::Release);
    }

    /// Whether the peer takes channel data before its answer to the open.
    pub fn early_data(&self) -> bool {
        self.shared.early_data.load(Ordering::Acquire)
    }

    /// Queue an envelope. Works while no transport is attached (it waits in the replay
    /// buffer); waits when the replay buffer is full (backpressure, never drops).
    ///
    /// Fails with [`LinkError::Closed`] once the link is closed, and with
    /// [`LinkError::Oversized`] when the envelope cannot fit in one frame (nothing is queued).
    /// An envelope larger than the whole replay limit is accepted once the buffer is empty.
    pub async fn send(&self, envelope: Envelope) -> Result<(), LinkError> {
        self.try_send(envelope).await.map_err(|(e, _)| e)
    }

    /// [`Link::send`], giving an envelope too big for one frame back with the error, so the
    /// caller can send its content another way (by reference) without keeping a copy.
    pub async fn try_send(&self, envelope: Envelope) -> Result<(), (LinkError, Option<Envelope>)> {
        let (kind, payload) =
            crate::payload::encode(&envelope, self.bytes_frames()).map_err(|e| {
                (
                    LinkError::Malformed(format!("cannot encode an envelope: {e}")),
                    None,
                )
            })?;
        let size = payload.len() + HEADER_LEN;
        if size > self.shared.config.max_frame_bytes {
            let e = LinkError::Oversized {
                size,
                limit: self.shared.config.max_frame_bytes,
            };
            return Err((e, Some(envelope)));
        }
        let payload = Bytes::from(payload);
        loop {
            // Register interest before looking, so a wake-up between the check and the
            // await is not lost.
            let notified = self.shared.space.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut st = self.shared.state.lock_or_recover();
                if st.closed {
                    return Err((LinkError::Closed, None));
                }
                let fits =
                    st.buffered_bytes + payload.len() <= self.shared.config.replay_limit_bytes;
                if fits || st.buffer.is_empty() {
                    st.buffered_bytes += payload.len();
                    st.buffer.push_back((kind, payload));
                    st.stats.sent_seq = st.next_seq;
                    st.next_seq += 1;
                    drop(st);
                    self.shared.wake_writer();
                    return Ok(());
                }
            }
            // Full: ask the peer for an ack now instead of waiting for its ack timer.
            self.shared.request_ack();
            notified.await;
        }
    }

    /// Wait until every envelope sent so far has been acknowledged by the peer (or the link
    /// closes: then [`LinkError::Closed`] if some were not).
    pub async fn flush(&self) -> Result<(), LinkError> {
        loop {
            let notified = self.shared.space.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let st = self.shared.state.lock_or_recover();
                if st.buffer.is_empty() {
                    return Ok(());
                }
                if st.closed {
                    return Err(LinkError::Closed);
                }
            }
            notified.await;
        }
    }

    /// Drive one transport until it fails. First resends every buffered frame with
    /// `seq > peer_received`, then runs the reader, writer and heartbeat until the transport
    /// ends; returns why. May be called again with a new transport to resume.
    ///
    /// Starting a new transport while one runs stops the old one (its call returns
    /// [`LinkError::TransportClosed`] "replaced by a newer transport") before the new one
    /// reads anything. Dropping the returned future also stops the transport.
    pub async fn run_transport<R, W>(&self, reader: R, writer: W, peer_received: u64) -> LinkError
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        self.start_transport(reader, writer, peer_received).await
    }

    /// Like [`Link::run_transport`], but the transport is claimed when this is *called*
    /// (the previous one is stopped at once), not when the future is first polled. Useful
    /// when the future is spawned: the last call wins, whatever order the tasks run in.
    pub fn start_transport<R, W>(
        &self,
        reader: R,
        writer: W,
        peer_received: u64,
    ) -> impl std::future::Future<Output = LinkError> + Send + 'static
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        // Claim the generation and stop the previous transport.
        let generation = {
            let mut st = shared.state.lock_or_recover();
            if st.closed {
                None
            } else {
                st.generation += 1;
                for t in st.tasks.drain(..) {
                    t.abort();
                }
                shared.connected.send_replace(false);
                shared.generation.send_replace(st.generation);
                Some(st.generation)
            }
        };
        async move {
            match generation {
                Some(generation) => {
                    drive_transport(shared, generation, reader, writer, peer_received).await
                }
                None => LinkError::Closed,
            }
        }
    }

    /// Highest data `seq` received from the peer (what a resume asks for).
    pub fn received(&self) -> u64 {
        self.shared.received.load(Ordering::Acquire)
    }

    /// True while a transport is attached and alive.
    pub fn is_connected(&self) -> bool {
        *self.shared.connected.borrow()
    }

    /// A watch of [`Link::is_connected`], for status lines.
    pub fn watch_connected(&self) -> watch::Receiver<bool> {
        self.shared.connected.subscribe()
    }

    /// True once the link is closed (locally or by the peer's `Close` frame).
    pub fn is_closed(&self) -> bool {
        *self.shared.closed.borrow()
    }

    /// Wait until the link is closed.
    pub async fn closed(&self) {
        let mut rx = self.shared.closed.subscribe();
        let _ = rx.wait_for(|c| *c).await;
    }

    /// Why the link was closed: the local reason, or the peer's `Close` frame text.
    pub fn close_reason(&self) -> Option<String> {
        self.shared.state.lock_or_recover().close_reason.clone()
    }

    /// Counters of this link end.
    pub fn stats(&self) -> LinkStats {
        let st = self.shared.state.lock_or_recover();
        let mut s = st.stats.clone();
        s.peer_acked = st.front_seq - 1;
        s.received = self.received();
        s.buffered_frames = st.buffer.len();
        s.buffered_bytes = st.buffered_bytes;
        s
    }

    /// Close the link: the current transport ends, `send` fails with [`LinkError::Closed`].
    pub fn close(&self) {
        self.close_with_reason("closed");
    }

    /// Close the link, telling the peer why (sent in a `Close` frame if a transport is up;
    /// the peer's link closes too). Envelopes not yet acknowledged are discarded; call
    /// [`Link::flush`] first to deliver them.
    pub fn close_with_reason(&self, reason: &str) {
        self.shared.close(reason.to_string());
    }
}

impl Shared {
    fn wake_writer(&self) {
        if let Some(w) = self.wire.lock_or_recover().as_ref() {
            w.wake.notify_one();
        }
    }

    /// Send a `Ping` (answered at once with a `Pong` carrying the peer's ack) unless one
    /// is already out.
    fn request_ack(&self) {
        if let Some(w) = self.wire.lock_or_recover().as_ref() {
            if !w.ack_requested.swap(true, Ordering::AcqRel) {
                w.ack_ping_due.store(true, Ordering::Release);
                w.wake.notify_one();
            }
        }
    }

    fn close(&self, reason: String) {
        {
            let mut st = self.state.lock_or_recover();
            if st.closed {
                return;
            }
            st.closed = true;
            st.close_reason = Some(reason);
            st.inbound_tx = None;
        }
        self.closed.send_replace(true);
        self.space.notify_waiters();
        self.wake_writer();
    }
}

/// The body of [`Link::start_transport`] once the generation is claimed.
async fn drive_transport<R, W>(
    shared: Arc<Shared>,
    generation: u64,
    reader: R,
    writer: W,
    peer_received: u64,
) -> LinkError
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let shared = &shared;
    // Wait for the previous transport's tasks to stop. A newer transport may have been
    // started meanwhile, and may even hold the slot already: then this one gives up.
    let mut generation_rx = shared.generation.subscribe();
    let guard = tokio::select! {
        g = Arc::clone(&shared.slot).lock_owned() => Arc::new(g),
        _ = async { let _ = generation_rx.wait_for(|g| *g != generation).await; } => {
            return LinkError::TransportClosed("replaced by a newer transport".into());
        }
    };
    let wire = Arc::new(Wire {
        wake: Notify::new(),
        control: Mutex::new(VecDeque::new()),
        ack_sent: AtomicU64::new(0),
        ping_sent_at: Mutex::new(None),
        ack_requested: AtomicBool::new(false),
        ack_ping_due: AtomicBool::new(false),
    });
    // Validate the peer's position and trim what it already has.
    let start_seq = {
        let mut st = shared.state.lock_or_recover();
        if st.closed {
            return LinkError::Closed;
        }
        if st.generation != generation {
            return LinkError::TransportClosed("replaced by a newer transport".into());
        }
        let sent = st.next_seq - 1;
        if peer_received > sent {
            return LinkError::ResumeImpossible(format!(
                "the peer says it received data frame {peer_received}, but this side has \
                     only sent {sent}; the peer is talking to a different link"
            ));
        }
        // `peer_received` may be older than an ack that came in since (the peer read it
        // while its previous transport still ran), so it is a lower bound: start after
        // whichever is higher. A peer that really lost frames we discarded sees a gap.
        trim(&mut st, peer_received);
        st.stats.transports += 1;
        *shared.wire.lock_or_recover() = Some(Arc::clone(&wire));
        (peer_received + 1).max(st.front_seq)
    };
    shared.space.notify_waiters();

    let transport = Arc::new(Transport {
        shared: Arc::clone(shared),
        wire,
        _slot: guard,
    });
    let (err_tx, mut err_rx) = mpsc::channel::<(&'static str, LinkError)>(3);
    let mut tasks = TaskSet(Vec::new());
    {
        let t = Arc::clone(&transport);
        let tx = err_tx.clone();
        tasks.0.push(tokio::spawn(async move {
            let e = t.read_loop(reader).await;
            let _ = tx.send(("reader", e)).await;
        }));
    }
    let writer_task = {
        let t = Arc::clone(&transport);
        let tx = err_tx.clone();
        tokio::spawn(async move {
            let e = t.write_loop(writer, start_seq).await;
            let _ = tx.send(("writer", e)).await;
        })
    };
    let writer_abort = writer_task.abort_handle();
    tasks.0.push(writer_task);
    {
        let t = Arc::clone(&transport);
        let tx = err_tx;
        tasks.0.push(tokio::spawn(async move {
            let e = t.heartbeat_loop().await;
            let _ = tx.send(("heartbeat", e)).await;
        }));
    }
    // Only the tasks hold the slot from here on: the slot frees exactly when all have
    // stopped (finished or aborted), not merely when this function returns.
    drop(transport);
    {
        let mut st = shared.state.lock_or_recover();
        if st.generation != generation || st.closed {
            // Superseded or closed while we were starting: stop at once.
            drop(st);
            return LinkError::TransportClosed("replaced by a newer transport".into());
        }
        st.tasks = tasks.0.iter().map(JoinHandle::abort_handle).collect();
        // Set under the state lock so a newer transport's reset cannot interleave.
        shared.connected.send_replace(true);
    }
    let _connected = ConnectedGuard { shared, generation };
    tracing::debug!(generation, start_seq, "link transport attached");

    let mut closed_rx = shared.closed.subscribe();
    let ended = tokio::select! {
        got = err_rx.recv() => Some(got),
        _ = async { let _ = closed_rx.wait_for(|c| *c).await; } => None,
    };
    let result = match ended {
        Some(Some((task, e))) => {
            tracing::debug!(task, error = %e, "link transport ended");
            e
        }
        // Every task was aborted: a newer transport took over.
        Some(None) => LinkError::TransportClosed("replaced by a newer transport".into()),
        None => {
            // Closed locally: give the writer a moment to send the Close frame.
            let _ = tokio::time::timeout(CLOSE_GRACE, async {
                while let Some((task, _)) = err_rx.recv().await {
                    if task == "writer" {
                        break;
                    }
                }
            })
            .await;
            writer_abort.abort();
            LinkError::Closed
        }
    };
    drop(tasks);
    result
}

/// Drop everything the peer acknowledged up to `ack`.
fn trim(st: &mut State, ack: u64) -> bool {
    let mut freed = false;
    while st.front_seq <= ack {
        match st.buffer.pop_front() {
            Some((_, p)) => {
                st.buffered_bytes -= p.len();
                st.front_seq += 1;
                freed = true;
            }
            None => break,
        }
    }
    freed
}

/// Aborts the transport's tasks when `run_transport` returns or is dropped.
struct TaskSet(Vec<JoinHandle<()>>);

impl Drop for TaskSet {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Keeps `connected` true while `run_transport` runs (also when its future is dropped).
/// Only the guard of the current generation clears the flag: an older transport's
/// `run_transport` may return after a newer one attached.
struct ConnectedGuard<'a> {
    shared: &'a Shared,
    generation: u64,
}

impl Drop for ConnectedGuard<'_> {
    fn drop(&mut self) {
        let st = self.shared.state.lock_or_recover();
        if st.generation == self.generation {
            self.shared.connected.send_replace(false);
            *self.shared.wire.lock_or_recover() = None;
        }
    }
}

/// The writer side of one running transport, reachable from `Shared` (senders wake it).
struct Wire {
    /// Wakes the writer: new data, ack due, control frame, close.
    wake: Notify,
    /// Control frames (kind, payload) waiting for the writer; they go before data.
    control: Mutex<VecDeque<(FrameKind, Bytes)>>,
    /// The `ack` value of the last frame written on this transport.
    ack_sent: AtomicU64,
    ping_sent_at: Mutex<Option<Instant>>,
    /// A `Ping` asking for an ack is out (reset when an ack or pong arrives).
    ack_requested: AtomicBool,
    /// The writer owes that `Ping`; it goes after the data of the batch, so the answer
    /// acknowledges the data written before it.
    ack_ping_due: AtomicBool,
}

impl Wire {
    fn push_control(&self, kind: FrameKind, payload: Bytes) {
        self.control.lock_or_recover().push_back((kind, payload));
        self.wake.notify_one();
    }
}

/// State of one running transport, shared by its reader, writer and heartbeat tasks.
struct Transport {
    shared: Arc<Shared>,
    wire: Arc<Wire>,
    /// The link's transport slot, released when the last task of this transport stops.
    /// Kept out of `Wire` because `Shared` holds the wire.
    _slot: Arc<OwnedMutexGuard<()>>,
}

impl Transport {
    fn push_control(&self, kind: FrameKind, payload: Bytes) {
        self.wire.push_control(kind, payload);
    }

    async fn read_loop<R: AsyncRead + Unpin>(&self, mut reader: R) -> LinkError {
        let config = &self.shared.config;
        let mut decoder = FrameDecoder::new(config.max_frame_bytes);
        let inbound = match self.shared.state.lock_or_recover().inbound_tx.clone() {
            Some(tx) => tx,
            None => return LinkError::Closed,
        };
        loop {
            // Decode and handle every complete frame before reading more.
            loop {
                let frame = match decoder.next_frame() {
                    Ok(Some(f)) => f,
                    Ok(None) => break,
                    Err(e) => return e,
                };
                if let Err(e) = self.handle_frame(frame, &inbound).await {
                    return e;
                }
            }
            let buf = decoder.buffer_mut();
            if buf.capacity() - buf.len() < 8 * 1024 {
                buf.reserve(64 * 1024);
            }
            match tokio::time::timeout(config.dead_after, reader.read_buf(buf)).await {
                Err(_) => return LinkError::Dead(config.dead_after),
                Ok(Ok(0)) => {
                    return LinkError::TransportClosed(if decoder.pending() == 0 {
                        "the peer closed the connection".into()
                    } else {
                        format!(
                            "the connection ended in the middle of a frame ({} bytes pending)",
                            decoder.pending()
                        )
                    })
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return io_closed("reading from the peer", &e),
            }
        }
    }

    async fn handle_frame(
        &self,
        frame: Frame,
        inbound: &mpsc::Sender<Envelope>,
    ) -> Result<(), LinkError> {
        // Every frame carries the peer's ack.
        if frame.ack > 0 {
            let freed = {
                let mut st = self.shared.state.lock_or_recover();
                let sent = st.next_seq - 1;
                if frame.ack > sent {
                    return Err(LinkError::Malformed(format!(
                        "the peer acknowledged data frame {} but only {sent} were sent",
                        frame.ack
                    )));
                }
                trim(&mut st, frame.ack)
            };
            if freed {
                self.wire.ack_requested.store(false, Ordering::Release);
                self.shared.space.notify_waiters();
            }
        }
        match frame.kind {
            FrameKind::Data | FrameKind::Bytes => {
                let received = self.shared.received.load(Ordering::Acquire);
                if frame.seq == 0 {
                    return Err(LinkError::Malformed("data frame with seq 0".into()));
                }
                if frame.seq <= received {
                    self.shared.state.lock_or_recover().stats.duplicates_dropped += 1;
                    return Ok(());
                }
                if frame.seq != received + 1 {
                    return Err(LinkError::Malformed(format!(
                        "sequence gap: expected data frame {}, got {}",
                        received + 1,
                        frame.seq
                    )));
                }
                let envelope = crate::payload::decode(frame.kind, &frame.payload).map_err(|e| {
                    LinkError::Malformed(format!(
                        "{} frame {} does not hold a valid envelope: {e}",
                        frame.kind.name(),
                        frame.seq
                    ))
                })?;
                if inbound.send(envelope).await.is_err() {
                    // The receiver is gone: nobody will ever read inbound envelopes again,
                    // so the link is useless; close it rather than reconnect forever.
                    self.shared
                        .close("the local receiver of inbound envelopes was dropped".into());
                    return Err(LinkError::Closed);
                }
                self.shared.received.store(frame.seq, Ordering::Release);
                let unacked = frame.seq - self.wire.ack_sent.load(Ordering::Acquire);
                if unacked == 1 || unacked >= ACK_EVERY_FRAMES {
                    self.wire.wake.notify_one();
                }
                Ok(())
            }
            FrameKind::Ack => Ok(()),
            FrameKind::Ping => {
                self.push_control(FrameKind::Pong, Bytes::new());
                Ok(())
            }
            FrameKind::Pong => {
                self.wire.ack_requested.store(false, Ordering::Release);
                if let Some(at) = self.wire.ping_sent_at.lock_or_recover().take() {
                    self.shared.state.lock_or_recover().stats.last_rtt = Some(at.elapsed());
                }
                Ok(())
            }
            FrameKind::Close => {
                let reason = String::from_utf8_lossy(&frame.payload).into_owned();
                tracing::info!(%reason, "the peer closed the link");
                self.shared.close(format!("closed by the peer: {reason}"));
                Err(LinkError::Closed)
            }
            FrameKind::Hello | FrameKind::Welcome => Err(LinkError::Malformed(format!(
                "unexpected {} frame after the handshake",
                frame.kind.name()
            ))),
        }
    }

    async fn write_loop<W: AsyncWrite + Unpin>(&self, mut writer: W, start_seq: u64) -> LinkError {
        let mut cursor = start_seq;
        let mut out = BytesMut::with_capacity(BATCH_BYTES + 1024);
        let mut batch: Vec<(u64, FrameKind, Bytes)> = Vec::with_capacity(BATCH_FRAMES);
        let mut ack_pending_since: Option<Instant> = None;
        loop {
            // The wake permit is consumed here; anything that happens after this point
            // leaves a new permit, so the wait at the bottom cannot miss it.
            let notified = self.wire.wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();

            out.clear();
            let received = self.shared.received.load(Ordering::Acquire);
            let controls: Vec<(FrameKind, Bytes)> =
                self.wire.control.lock_or_recover().drain(..).collect();
            for (kind, payload) in &controls {
                encode_parts(*kind, 0, received, payload, &mut out);
                if *kind == FrameKind::Ping {
                    *self.wire.ping_sent_at.lock_or_recover() = Some(Instant::now());
                }
            }
            let closing = {
                let mut st = self.shared.state.lock_or_recover();
                if st.closed {
                    Some(st.close_reason.clone().unwrap_or_default())
                } else {
                    // Frames the peer acknowledged meanwhile need not be sent.
                    cursor = cursor.max(st.front_seq);
                    let mut bytes = 0;
                    while cursor < st.next_seq && batch.len() < BATCH_FRAMES && bytes < BATCH_BYTES
                    {
                        // Index is in range: front_seq <= cursor < next_seq.
                        let idx = (cursor - st.front_seq) as usize;
                        if let Some((kind, p)) = st.buffer.get(idx) {
                            bytes += p.len();
                            batch.push((cursor, *kind, p.clone()));
                        }
                        cursor += 1;
                    }
                    if let Some((last, _, _)) = batch.last() {
                        let first = batch[0].0;
                        if first <= st.high_written {
                            st.stats.resent_frames += st.high_written.min(*last) - first + 1;
                        }
                        st.high_written = st.high_written.max(*last);
                    }
                    None
                }
            };
            if let Some(reason) = closing {
                encode_parts(FrameKind::Close, 0, received, reason.as_bytes(), &mut out);
                let _ = writer.write_all(&out).await;
                let _ = writer.flush().await;
                let _ = writer.shutdown().await;
                return LinkError::Closed;
            }
            for (seq, kind, payload) in batch.drain(..) {
                encode_parts(kind, seq, received, &payload, &mut out);
            }
            if self.wire.ack_ping_due.swap(false, Ordering::AcqRel) {
                encode_parts(FrameKind::Ping, 0, received, &[], &mut out);
                *self.wire.ping_sent_at.lock_or_recover() = Some(Instant::now());
            }
            let ack_sent = self.wire.ack_sent.load(Ordering::Acquire);
            if out.is_empty() && received > ack_sent {
                let since = *ack_pending_since.get_or_insert_with(Instant::now);
                if received - ack_sent >= ACK_EVERY_FRAMES || since.elapsed() >= ACK_DELAY {
                    encode_parts(FrameKind::Ack, 0, received, &[], &mut out);
                }
            }
            if !out.is_empty() {
                if let Err(e) = writer.write_all(&out).await {
                    return io_closed("writing to the peer", &e);
                }
                self.wire.ack_sent.store(received, Ordering::Release);
                ack_pending_since = None;
                // Flush only when nothing else is waiting, so bursts go out in big writes.
                let more = cursor < self.shared.state.lock_or_recover().next_seq
                    || !self.wire.control.lock_or_recover().is_empty();
                if !more {
                    if let Err(e) = writer.flush().await {
                        return io_closed("flushing to the peer", &e);
                    }
                }
                continue;
            }
            match ack_pending_since {
                Some(since) => {
                    let due = tokio::time::Instant::from_std(since + ACK_DELAY);
                    tokio::select! {
                        _ = &mut notified => {}
                        _ = tokio::time::sleep_until(due) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    async fn heartbeat_loop(&self) -> LinkError {
        let mut tick = tokio::time::interval(self.shared.config.heartbeat_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await; // the first tick is immediate
        loop {
            tick.tick().await;
            self.push_control(FrameKind::Ping, Bytes::new());
        }
    }
}

/// Size on the wire of a data frame carrying `payload_len` bytes.
pub fn data_frame_wire_len(payload_len: usize) -> usize {
    PREFIX_LEN + HEADER_LEN + payload_len
}
