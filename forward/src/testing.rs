//! An in-memory transport that can be cut, stalled and resumed on demand (test seam).
//!
//! [`pair`] gives two connected [`MemStream`]s (full duplex, like a socket pair) and a
//! [`Control`] that injects faults:
//!
//! - [`Control::cut`] (alias [`Control::simulate_disconnect`]): the connection is gone at
//!   once; bytes in flight are lost, reads see EOF, writes fail with `BrokenPipe`;
//! - [`Control::cut_after`]: let `n` more bytes through (both directions counted), then cut;
//!   the bytes before the cut point stay readable, so the cut falls at an exact byte offset;
//! - [`Control::stall`] / [`Control::unstall`]: bytes stop flowing silently (reads wait,
//!   writes fill the buffer and then wait) and flow again afterwards;
//! - [`Control::blackhole`]: writes succeed but the bytes vanish (a dead route with no RST).
//!
//! Dropping the writing half ends the peer's reads with EOF; dropping the reading half makes
//! the peer's writes fail, as with a real socket.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::link::{Link, LinkError};
use crate::sync::LockExt;

/// Default bytes buffered per direction before writes wait.
pub const DEFAULT_CAPACITY: usize = 256 * 1024;

#[derive(Default)]
struct Direction {
    buf: VecDeque<u8>,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
    writer_gone: bool,
    reader_gone: bool,
}

struct Inner {
    dirs: [Direction; 2],
    capacity: usize,
    cut: bool,
    stalled: bool,
    blackhole: bool,
    /// Bytes still allowed through before a scheduled cut.
    budget: Option<u64>,
    carried: u64,
}

impl Inner {
    fn wake_all(&mut self) {
        for d in &mut self.dirs {
            if let Some(w) = d.read_waker.take() {
                w.wake();
            }
            if let Some(w) = d.write_waker.take() {
                w.wake();
            }
        }
    }
}

type SharedInner = Arc<Mutex<Inner>>;

/// Fault injection handle of a [`pair`]. Cheap to clone.
#[derive(Clone)]
pub struct Control {
    inner: SharedInner,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = self.inner.lock_or_recover();
        f.debug_struct("Control")
            .field("cut", &i.cut)
            .field("stalled", &i.stalled)
            .field("carried", &i.carried)
            .finish()
    }
}

impl Control {
    /// Cut the connection now: bytes in flight are lost, both ends see EOF on read and
    /// `BrokenPipe` on write.
    pub fn cut(&self) {
        let mut i = self.inner.lock_or_recover();
        i.cut = true;
        for d in &mut i.dirs {
            d.buf.clear();
        }
        i.wake_all();
    }

    /// Same as [`Control::cut`]; named after the seam in Zed's remote connection tests.
    pub fn simulate_disconnect(&self) {
        self.cut();
    }

    /// Let `bytes` more bytes through (counting both directions), then cut. Bytes written
    /// before the cut point stay readable; the write that crosses it is truncated there.
    pub fn cut_after(&self, bytes: u64) {
        let mut i = self.inner.lock_or_recover();
        if bytes == 0 {
            i.cut = true;
            i.wake_all();
        } else {
            i.budget = Some(bytes);
        }
    }

    /// Stop the flow silently: reads wait, writes fill the buffer and then wait.
    pub fn stall(&self) {
        self.inner.lock_or_recover().stalled = true;
    }

    /// Let bytes flow again after [`Control::stall`].
    pub fn unstall(&self) {
        let mut i = self.inner.lock_or_recover();
        i.stalled = false;
        i.wake_all();
    }

    /// Make every byte written from now on vanish (writes still succeed), and stop
    /// delivering what is buffered: a route that silently drops packets.
    pub fn blackhole(&self) {
        let mut i = self.inner.lock_or_recover();
        i.blackhole = true;
        for d in &mut i.dirs {
            d.buf.clear();
        }
    }

    /// True once the connection was cut (by [`Control::cut`] or a [`Control::cut_after`]).
    pub fn is_cut(&self) -> bool {
        self.inner.lock_or_recover().cut
    }

    /// Bytes carried so far, both directions together.
    pub fn carried(&self) -> u64 {
        self.inner.lock_or_recover().carried
    }
}

/// The reading half of one end.
pub struct MemReader {
    inner: SharedInner,
    dir: usize,
}

/// The writing half of one end.
pub struct MemWriter {
    inner: SharedInner,
    dir: usize,
}

/// One end of a [`pair`]: reads what the other end writes and vice versa.
pub struct MemStream {
    reader: MemReader,
    writer: MemWriter,
}

impl std::fmt::Debug for MemReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemReader").field("dir", &self.dir).finish()
    }
}

impl std::fmt::Debug for MemWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemWriter").field("dir", &self.dir).finish()
    }
}

impl std::fmt::Debug for MemStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemStream").finish_non_exhaustive()
    }
}

impl MemStream {
    /// Split into halves that can move to different tasks (what `run_transport` takes).
    pub fn into_split(self) -> (MemReader, MemWriter) {
        (self.reader, self.writer)
    }
}

/// Two connected in-memory streams and their fault control, with
/// [`DEFAULT_CAPACITY`] bytes of buffer per direction.
pub fn pair() -> (MemStream, MemStream, Control) {
    pair_with_capacity(DEFAULT_CAPACITY)
}

/// [`pair`] with `capacity` bytes of buffer per direction (at least 1).
pub fn pair_with_capacity(capacity: usize) -> (MemStream, MemStream, Control) {
    let inner = Arc::new(Mutex::new(Inner {
        dirs: [Direction::default(), Direction::default()],
        capacity: capacity.max(1),
        cut: false,
        stalled: false,
        blackhole: false,
        budget: None,
        carried: 0,
    }));
    let a = MemStream {
        reader: MemReader {
            inner: Arc::clone(&inner),
            dir: 1,
        },
        writer: MemWriter {
            inner: Arc::clone(&inner),
            dir: 0,
        },
    };
    let b = MemStream {
        reader: MemReader {
            inner: Arc::clone(&inner),
            dir: 0,
        },
        writer: MemWriter {
            inner: Arc::clone(&inner),
            dir: 1,
        },
    };
    (a, b, Control { inner })
}

impl AsyncRead for MemReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut i = self.inner.lock_or_recover();
        let dir = self.dir;
        if i.stalled || i.blackhole {
            if i.cut {
                return Poll::Ready(Ok(()));
            }
            i.dirs[dir].read_waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let d = &mut i.dirs[dir];
        if !d.buf.is_empty() {
            let n = d.buf.len().min(out.remaining());
            let (front, back) = d.buf.as_slices();
            let from_front = n.min(front.len());
            out.put_slice(&front[..from_front]);
            out.put_slice(&back[..n - from_front]);
            d.buf.drain(..n);
            if let Some(w) = d.write_waker.take() {
                w.wake();
            }
            return Poll::Ready(Ok(()));
        }
        if i.cut || i.dirs[dir].writer_gone {
            return Poll::Ready(Ok(())); // EOF
        }
        i.dirs[dir].read_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl AsyncWrite for MemWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut i = self.inner.lock_or_recover();
        let dir = self.dir;
        if i.cut || i.dirs[dir].reader_gone || i.dirs[dir].writer_gone {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "in-memory transport cut",
            )));
        }
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if i.blackhole {
            return Poll::Ready(Ok(data.len()));
        }
        let capacity = i.capacity;
        let space = capacity.saturating_sub(i.dirs[dir].buf.len());
        if space == 0 {
            i.dirs[dir].write_waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let mut n = space.min(data.len());
        let mut cut_now = false;
        if let Some(budget) = i.budget {
            // `budget` is > 0 here: a zero budget is turned into a cut at once.
            let allowed = usize::try_from(budget).unwrap_or(usize::MAX);
            if n >= allowed {
                n = allowed;
                cut_now = true;
            }
            i.budget = Some(budget - n as u64);
        }
        i.dirs[dir].buf.extend(&data[..n]);
        i.carried += n as u64;
        if cut_now {
            // Keep what was written before the cut point readable; EOF follows it.
            i.cut = true;
            i.budget = None;
            i.wake_all();
        } else if let Some(w) = i.dirs[dir].read_waker.take() {
            w.wake();
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut i = self.inner.lock_or_recover();
        let dir = self.dir;
        i.dirs[dir].writer_gone = true;
        if let Some(w) = i.dirs[dir].read_waker.take() {
            w.wake();
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for MemWriter {
    fn drop(&mut self) {
        let mut i = self.inner.lock_or_recover();
        let dir = self.dir;
        i.dirs[dir].writer_gone = true;
        if let Some(w) = i.dirs[dir].read_waker.take() {
            w.wake();
        }
    }
}

impl Drop for MemReader {
    fn drop(&mut self) {
        let mut i = self.inner.lock_or_recover();
        let dir = self.dir;
        i.dirs[dir].reader_gone = true;
        i.dirs[dir].buf.clear();
        if let Some(w) = i.dirs[dir].write_waker.take() {
            w.wake();
        }
    }
}

impl AsyncRead for MemStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.reader).poll_read(cx, out)
    }
}

impl AsyncWrite for MemStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.writer).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.writer).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.writer).poll_shutdown(cx)
    }
}

/// A transport running between two links (see [`connect`]).
#[derive(Debug)]
pub struct Connection {
    /// Fault control of the in-memory pair underneath.
    pub control: Control,
    /// `run_transport` of the first link; yields why it ended.
    pub a: tokio::task::JoinHandle<LinkError>,
    /// `run_transport` of the second link.
    pub b: tokio::task::JoinHandle<LinkError>,
}

impl Connection {
    /// Cut the pair and wait for both `run_transport` calls to return.
    pub async fn cut_and_join(self) -> (LinkError, LinkError) {
        self.control.cut();
        self.join().await
    }

    /// Wait for both `run_transport` calls to return (a panic there becomes a
    /// `TransportClosed` naming it).
    pub async fn join(self) -> (LinkError, LinkError) {
        let a = self
            .a
            .await
            .unwrap_or_else(|e| LinkError::TransportClosed(format!("transport task failed: {e}")));
        let b = self
            .b
            .await
            .unwrap_or_else(|e| LinkError::TransportClosed(format!("transport task failed: {e}")));
        (a, b)
    }
}

/// Attach `a` and `b` to a fresh in-memory pair and run both transports in tasks, each
/// resuming from the other's `received()` (what the handshake would exchange). Skips the
/// preamble and `Hello`/`Welcome`: use it for link-level tests.
pub fn connect(a: &Link, b: &Link) -> Connection {
    connect_with_capacity(a, b, DEFAULT_CAPACITY)
}

/// [`connect`] with `capacity` bytes of buffer per direction.
pub fn connect_with_capacity(a: &Link, b: &Link, capacity: usize) -> Connection {
    let (sa, sb, control) = pair_with_capacity(capacity);
    let (ra, wa) = sa.into_split();
    let (rb, wb) = sb.into_split();
    let a_received = a.received();
    let b_received = b.received();
    // `start_transport` claims the links now, so a later `connect` always wins even if
    // these tasks have not run yet.
    Connection {
        control,
        a: tokio::spawn(a.start_transport(ra, wa, b_received)),
        b: tokio::spawn(b.start_transport(rb, wb, a_received)),
    }
}
