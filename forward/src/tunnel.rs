//! Tunnelled line channels (laptop MCP servers) with credit-based flow control.
//!
//! A channel carries JSON-RPC lines in both directions as [`Notification::McpLine`] pieces
//! (see [`crate::content::split_line`]). Each direction has a window of [`WINDOW`] bytes: the
//! sender spends credit for every piece it sends ([`SendWindow::spend`] waits when it has
//! none left) and the receiver grants credit back with [`Notification::McpCredit`] once its
//! consumer has taken half a window's worth. So
//!
//! - the link's receive loop never waits for one slow consumer (an MCP server that stopped
//!   reading its stdin, a host MCP client that is behind): it queues the piece, which the
//!   window bounds;
//! - a slow consumer slows its producer down, across the link, instead of growing a queue;
//! - a peer that sends more than it was granted is cut off with a named reason
//!   ([`FlowError::Overrun`]): what a channel can hold in memory does not depend on trusting
//!   the other side.
//!
//! A line longer than the window is still carried: the pieces of a line being joined are
//! credited back as they are joined (a line is delivered whole, so it must be held whole
//! anyway), and a line is at most [`LINE_MAX`] bytes ([`FlowError::LineTooLong`]). So one
//! channel holds at most a window plus one line in memory on the receiving side.
//!
//! Both sides keep a [`LineInlet`] per channel in their link loop's routes (it joins pieces,
//! checks the window and queues whole lines) and run [`send_lines`] for their own direction.

use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, Semaphore};

use crate::content::{split_line, LineJoiner};
use crate::proto::Notification;
use crate::rpc::Rpc;
use crate::sync::LockExt;

/// Bytes one direction of a channel may have in flight (sent, not yet granted back).
pub const WINDOW: u32 = 8 * 1024 * 1024;

/// Longest line a channel joins (the bound of an MCP child's stdout line).
pub const LINE_MAX: usize = crate::child::STDOUT_LINE_MAX;

/// Consumed bytes the receiver collects before it grants them back in one message. Half the
/// window: the sender of a consumer that keeps up never waits (its credit never drops below
/// `WINDOW - GRANT_AT`, more than the biggest piece), and grants are rare.
const GRANT_AT: u64 = (WINDOW / 2) as u64;

/// What one piece costs in credit: its bytes plus one, so empty pieces are not free.
pub fn cost(piece: &str) -> u32 {
    u32::try_from(piece.len())
        .unwrap_or(u32::MAX)
        .saturating_add(1)
}

/// A channel whose flow control failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    /// The peer sent more than the window allows without waiting for credit.
    #[error("the other side sent {outstanding} bytes on MCP channel {channel} without waiting for credit (the window is {WINDOW}); the channel was closed")]
    Overrun {
        /// The channel.
        channel: u64,
        /// Bytes received and not yet granted back.
        outstanding: u64,
    },
    /// The peer's line grew past [`LINE_MAX`] without ending.
    #[error("a line on MCP channel {channel} grew past {} MiB without ending; the channel was closed", LINE_MAX / (1024 * 1024))]
    LineTooLong {
        /// The channel.
        channel: u64,
    },
    /// The channel closed (its route is gone) while a piece waited for credit.
    #[error("MCP channel {0} closed")]
    Closed(u64),
}

/// The sending direction's credit.
#[derive(Debug, Clone)]
pub struct SendWindow {
    credit: Arc<Semaphore>,
    channel: u64,
}

impl SendWindow {
    fn new(channel: u64) -> Self {
        SendWindow {
            credit: Arc::new(Semaphore::new(WINDOW as usize)),
            channel,
        }
    }

    /// Wait for `n` bytes of credit and spend them.
    pub async fn spend(&self, n: u32) -> Result<(), FlowError> {
        match self.credit.acquire_many(n.min(WINDOW)).await {
            Ok(permit) => {
                permit.forget();
                Ok(())
            }
            Err(_) => Err(FlowError::Closed(self.channel)),
        }
    }

    /// Credit granted back by the receiver (never more than a window in total).
    pub fn grant(&self, bytes: u64) {
        let room = (WINDOW as usize).saturating_sub(self.credit.available_permits());
        self.credit
            .add_permits(usize::try_from(bytes).unwrap_or(usize::MAX).min(room));
    }

    /// Credit available now (tests, diagnostics).
    pub fn available(&self) -> usize {
        self.credit.available_permits()
    }

    fn close(&self) {
        self.credit.close();
    }
}

/// The receiving direction's accounting, shared by the link loop and the drain task.
#[derive(Debug, Default)]
struct RecvWindow {
    /// Received from the peer and not yet granted back.
    outstanding: u64,
    /// Of that, taken by the consumer.
    consumed: u64,
}

/// One channel's end in a link loop's routes: takes the peer's pieces, hands whole lines to
/// the consumer in order (through a queue the window bounds) and holds this side's
/// [`SendWindow`], so [`Notification::McpCredit`] from the peer finds it. Dropping it closes
/// the channel: the consumer sees the end of its lines and a [`send_lines`] waiting for
/// credit returns.
#[derive(Debug)]
pub struct LineInlet {
    channel: u64,
    queue: mpsc::UnboundedSender<Queued>,
    window: Arc<Mutex<RecvWindow>>,
    joiner: LineJoiner,
    /// Bytes of the line being joined.
    partial: usize,
    send: SendWindow,
}

/// What the drain task takes, in order.
#[derive(Debug)]
enum Queued {
    /// A whole line for the consumer, and the cost of its last piece.
    Line(String, u64),
    /// The cost of a piece taken into the line being joined (consumed as it is joined).
    Joined(u64),
}

impl LineInlet {
    /// Open channel `channel`: whole lines go to `consumer` in order; credit for them goes
    /// back to the peer over `rpc` as the consumer takes them. Returns the inlet (for the
    /// routes) and the window [`send_lines`] spends for the other direction.
    pub fn open(rpc: &Rpc, channel: u64, consumer: mpsc::Sender<String>) -> (Self, SendWindow) {
        let (queue, mut lines) = mpsc::unbounded_channel::<Queued>();
        let window = Arc::new(Mutex::new(RecvWindow::default()));
        let send = SendWindow::new(channel);
        let drain_window = Arc::clone(&window);
        let rpc = rpc.clone();
        tokio::spawn(async move {
            while let Some(item) = lines.recv().await {
                let cost = match item {
                    Queued::Line(line, cost) => {
                        if consumer.send(line).await.is_err() {
                            return;
                        }
                        cost
                    }
                    Queued::Joined(cost) => cost,
                };
                let grant = {
                    let mut w = drain_window.lock_or_recover();
                    w.consumed += cost;
                    (w.consumed >= GRANT_AT).then(|| {
                        let g = std::mem::take(&mut w.consumed);
                        w.outstanding = w.outstanding.saturating_sub(g);
                        g
                    })
                };
                if let Some(bytes) = grant {
                    if let Err(e) = rpc.notify(Notification::McpCredit { channel, bytes }).await {
                        tracing::warn!(channel, "MCP credit not sent: {e}");
                        return;
                    }
                }
            }
        });
        let inlet = LineInlet {
            channel,
            queue,
            window,
            joiner: LineJoiner::default(),
            partial: 0,
            send: send.clone(),
        };
        (inlet, send)
    }

    /// One piece from the peer. An error means the peer overran its window: drop the inlet
    /// (closing the channel) and tell the user why.
    pub fn piece(&mut self, piece: String, more: bool) -> Result<(), FlowError> {
        let c = u64::from(cost(&piece));
        {
            let mut w = self.window.lock_or_recover();
            w.outstanding += c;
            if w.outstanding > u64::from(WINDOW) {
                return Err(FlowError::Overrun {
                    channel: self.channel,
                    outstanding: w.outstanding,
                });
            }
        }
        self.partial += piece.len();
        if self.partial > LINE_MAX {
            return Err(FlowError::LineTooLong {
                channel: self.channel,
            });
        }
        // The consumer is gone when a send fails; the route is removed by its owner.
        match self.joiner.push(piece, more) {
            Some(line) => {
                self.partial = 0;
                let _ = self.queue.send(Queued::Line(line, c));
            }
            None => {
                let _ = self.queue.send(Queued::Joined(c));
            }
        }
        Ok(())
    }

    /// Credit the peer granted for this side's direction.
    pub fn credit(&self, bytes: u64) {
        self.send.grant(bytes);
    }
}

impl Drop for LineInlet {
    fn drop(&mut self) {
        self.send.close();
    }
}

/// Tell the peer that this side closed `channel` (an overrun or an endless line of its,
/// [`FlowError`]), without waiting: called from a link's receive loop, which must not
/// wait on its own link.
pub fn tell_closed(rpc: &Rpc, channel: u64, reason: String) {
    let rpc = rpc.clone();
    tokio::spawn(async move {
        let _ = rpc
            .notify(Notification::McpClosed { channel, reason })
            .await;
    });
}

/// Send every line `lines` yields on `channel`, in pieces, each after its credit. Returns
/// when `lines` ends (`Ok`), or with the reason the link or the channel closed.
pub async fn send_lines(
    rpc: &Rpc,
    channel: u64,
    lines: &mut mpsc::Receiver<String>,
    window: &SendWindow,
) -> Result<(), String> {
    while let Some(line) = lines.recv().await {
        for (piece, more) in split_line(line) {
            window
                .spend(cost(&piece))
                .await
                .map_err(|e| e.to_string())?;
            rpc.notify(Notification::McpLine {
                channel,
                line: piece,
                more,
            })
            .await
            .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::link::Link;
    use crate::rpc::Incoming;
    use std::time::Duration;

    /// Two RPC ends over an in-memory transport.
    fn rpc_pair() -> (Rpc, mpsc::Receiver<Incoming>, Rpc, mpsc::Receiver<Incoming>) {
        let (a, a_in) = Link::new(crate::link::LinkConfig::default());
        let (b, b_in) = Link::new(crate::link::LinkConfig::default());
        let conn = crate::testing::connect(&a, &b);
        std::mem::forget(conn);
        let (ra, ia) = Rpc::new(a, a_in, crate::channel::Side::Client);
        let (rb, ib) = Rpc::new(b, b_in, crate::channel::Side::Server);
        (ra, ia, rb, ib)
    }

    /// A consumer that stops reading slows the producer on the other side down to the window:
    /// the receiver's queue never holds more than a window, and once the consumer reads again
    /// every line arrives, whole and in order.
    #[tokio::test]
    async fn a_stalled_consumer_holds_the_sender_at_the_window_and_nothing_is_lost() {
        let (sender_rpc, mut sender_in, receiver_rpc, mut receiver_in) = rpc_pair();
        const CH: u64 = 7;
        // Receiver: a consumer channel of one line, not read until later.
        let (consumer_tx, mut consumer_rx) = mpsc::channel::<String>(1);
        let (inlet, _unused) = LineInlet::open(&receiver_rpc, CH, consumer_tx);
        // Sender: its own inlet holds the window that credits from the receiver refill.
        let (sink_tx, _sink_rx) = mpsc::channel::<String>(1);
        let (sender_inlet, window) = LineInlet::open(&sender_rpc, CH, sink_tx);
        let (lines_tx, mut lines_rx) = mpsc::channel::<String>(4);
        let pump = {
            let rpc = sender_rpc.clone();
            let window = window.clone();
            tokio::spawn(async move { send_lines(&rpc, CH, &mut lines_rx, &window).await })
        };
        // 40 lines of 1.5 MiB (each goes in two pieces): 60 MiB, far over the window.
        let line = |i: usize| format!("{i:04}{}", "x".repeat(3 * 512 * 1024));
        let feeder = tokio::spawn(async move {
            for i in 0..40 {
                if lines_tx.send(line(i)).await.is_err() {
                    return;
                }
            }
        });
        // The receiver's link loop: pieces into the inlet; the sender's: credits into its
        // window.
        let received = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = Arc::clone(&received);
        let recv_loop = tokio::spawn(async move {
            let mut inlet = inlet;
            while let Some(msg) = receiver_in.recv().await {
                if let Incoming::Notify(Notification::McpLine { line, more, .. }) = msg {
                    counted.fetch_add(u64::from(cost(&line)), std::sync::atomic::Ordering::SeqCst);
                    inlet.piece(line, more).unwrap();
                }
            }
        });
        let credit_loop = tokio::spawn(async move {
            while let Some(msg) = sender_in.recv().await {
                if let Incoming::Notify(Notification::McpCredit { bytes, .. }) = msg {
                    sender_inlet.credit(bytes);
                }
            }
        });
        // Nothing is read (the consumer's one slot is full, no credit comes back): the sender
        // sends until its credit is less than a piece, then waits.
        let full = u64::from(WINDOW) - crate::content::MCP_LINE_PIECE as u64 - 1;
        let guard = tokio::time::Instant::now() + Duration::from_secs(30);
        while received.load(std::sync::atomic::Ordering::SeqCst) < full {
            assert!(
                tokio::time::Instant::now() < guard,
                "the sender never filled the window"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let held = received.load(std::sync::atomic::Ordering::SeqCst);
        assert!(held <= u64::from(WINDOW), "{held} bytes over the window");
        assert!(!feeder.is_finished(), "the producer was not held back");
        // The consumer reads again: all 40 lines arrive in order.
        for i in 0..40 {
            let got = tokio::time::timeout(Duration::from_secs(30), consumer_rx.recv())
                .await
                .expect("a line in time")
                .expect("a line");
            assert_eq!(got, line(i), "line {i}");
        }
        feeder.await.unwrap();
        drop(pump);
        recv_loop.abort();
        credit_loop.abort();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_peer_that_ignores_the_window_is_cut_off_naming_the_channel() {
        let (rpc, _in, _peer, _peer_in) = rpc_pair();
        // A consumer that never reads: after its one slot, nothing is credited back.
        let (tx, _rx) = mpsc::channel::<String>(1);
        let (mut inlet, _w) = LineInlet::open(&rpc, 3, tx);
        let piece = "y".repeat(crate::content::MCP_LINE_PIECE);
        let mut err = None;
        for _ in 0..20 {
            if let Err(e) = inlet.piece(piece.clone(), false) {
                err = Some(e);
                break;
            }
        }
        let err = err.expect("an overrun");
        assert!(
            matches!(err, FlowError::Overrun { channel: 3, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("MCP channel 3"), "{err}");
    }

    #[tokio::test]
    async fn a_line_that_never_ends_is_cut_off_at_the_line_limit() {
        let (rpc, _in, _peer, _peer_in) = rpc_pair();
        let (tx, _rx) = mpsc::channel::<String>(1);
        let (mut inlet, _w) = LineInlet::open(&rpc, 4, tx);
        let piece = "z".repeat(crate::content::MCP_LINE_PIECE);
        let mut sent = 0;
        let err = loop {
            // Credit comes back for joined pieces; here the test plays the drain's part by
            // yielding so it can run.
            match inlet.piece(piece.clone(), true) {
                Ok(()) => sent += piece.len(),
                Err(e) => break e,
            }
            tokio::task::yield_now().await;
            assert!(sent <= LINE_MAX + piece.len(), "never cut off");
        };
        assert_eq!(err, FlowError::LineTooLong { channel: 4 });
        assert!(sent >= LINE_MAX - piece.len(), "cut off early at {sent}");
    }

    /// One line of 20 MiB (more than two windows) crosses whole: its pieces are credited as
    /// they are joined.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_line_longer_than_the_window_crosses_whole() {
        let (sender_rpc, mut sender_in, receiver_rpc, mut receiver_in) = rpc_pair();
        const CH: u64 = 9;
        let (consumer_tx, mut consumer_rx) = mpsc::channel::<String>(1);
        let (inlet, _unused) = LineInlet::open(&receiver_rpc, CH, consumer_tx);
        let (sink_tx, _sink_rx) = mpsc::channel::<String>(1);
        let (sender_inlet, window) = LineInlet::open(&sender_rpc, CH, sink_tx);
        let (lines_tx, mut lines_rx) = mpsc::channel::<String>(1);
        let big = "\"".repeat(20 * 1024 * 1024);
        lines_tx.send(big.clone()).await.unwrap();
        drop(lines_tx);
        let pump =
            tokio::spawn(async move { send_lines(&sender_rpc, CH, &mut lines_rx, &window).await });
        let recv_loop = tokio::spawn(async move {
            let mut inlet = inlet;
            while let Some(msg) = receiver_in.recv().await {
                if let Incoming::Notify(Notification::McpLine { line, more, .. }) = msg {
                    inlet.piece(line, more).unwrap();
                }
            }
        });
        let credit_loop = tokio::spawn(async move {
            while let Some(msg) = sender_in.recv().await {
                if let Incoming::Notify(Notification::McpCredit { bytes, .. }) = msg {
                    sender_inlet.credit(bytes);
                }
            }
        });
        let got = tokio::time::timeout(Duration::from_secs(60), consumer_rx.recv())
            .await
            .expect("the line in time")
            .expect("a line");
        assert_eq!(got.len(), big.len());
        assert!(got == big);
        assert_eq!(pump.await.unwrap(), Ok(()));
        recv_loop.abort();
        credit_loop.abort();
    }

    #[tokio::test]
    async fn dropping_the_inlet_releases_a_sender_waiting_for_credit() {
        let (rpc, _in, _peer, _peer_in) = rpc_pair();
        let (tx, _rx) = mpsc::channel::<String>(1);
        let (inlet, window) = LineInlet::open(&rpc, 5, tx);
        window.spend(WINDOW).await.unwrap();
        let waiting = tokio::spawn({
            let window = window.clone();
            async move { window.spend(10).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished());
        drop(inlet);
        let r = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("released")
            .unwrap();
        assert_eq!(r, Err(FlowError::Closed(5)));
    }

    #[test]
    fn grants_never_raise_credit_above_the_window() {
        let w = SendWindow::new(1);
        w.grant(u64::MAX);
        assert_eq!(w.available(), WINDOW as usize);
    }
}
