//! Laptop MCP servers over channels: JSON-RPC lines as [`ChannelData::Line`] pieces.
//!
//! The host opens a [`crate::channel::ChannelOpen::Mcp`] channel; both sides then run
//! [`send_lines`] for their direction and [`recv_lines`] for the other. A line longer than
//! [`crate::content::MCP_LINE_PIECE`] goes in pieces ([`split_line`]), which the receiver
//! joins. Flow control is the channel's: each direction has a window of [`WINDOW`], so a slow
//! consumer (an MCP server that stopped reading its stdin, a host MCP client that is behind)
//! slows its producer down across the link instead of growing a queue, and never holds up
//! the link. Pieces are credited as they are joined (a line is delivered whole, so it must
//! be held whole anyway), so a line longer than the window crosses; a line is at most
//! [`LINE_MAX`] bytes ([`FlowError::LineTooLong`]). One channel holds at most a window plus
//! one line in memory on the receiving side.

use tokio::sync::mpsc;

use crate::channel::{ChannelData, ChannelEnd, ChannelError, ChannelReceiver, ChannelSender};
use crate::content::{split_line, LineJoiner};

/// Receive window of each direction of an MCP channel.
pub const WINDOW: u32 = 8 * 1024 * 1024;

/// Longest line a channel joins (the bound of an MCP child's stdout line).
pub const LINE_MAX: usize = crate::child::STDOUT_LINE_MAX;

/// A peer that broke the line protocol; its channel is cancelled with this as the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    /// The peer's line grew past [`LINE_MAX`] without ending.
    #[error("a line on MCP channel {channel} grew past {} MiB without ending; the channel was closed", LINE_MAX / (1024 * 1024))]
    LineTooLong {
        /// The channel.
        channel: u64,
    },
    /// The peer sent something that is not a line piece.
    #[error("the other side sent something other than lines on MCP channel {channel}; the channel was closed")]
    NotALine {
        /// The channel.
        channel: u64,
    },
}

/// Why [`recv_lines`] returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinesEnd {
    /// The channel ended: the peer finished (with its reason, e.g. the server's exit), it
    /// or this side cancelled, or the link closed.
    Channel(ChannelEnd),
    /// The consumer of the lines is gone.
    ConsumerGone,
    /// The peer broke the line protocol; the channel was cancelled.
    Broken(FlowError),
}

/// Send every line `lines` yields on the channel, in pieces, each after its credit. Returns
/// when `lines` ends (the caller then closes the channel, with a reason if it has one), or
/// why the channel cannot take more.
pub async fn send_lines(
    tx: &ChannelSender,
    lines: &mut mpsc::Receiver<String>,
) -> Result<(), ChannelError> {
    while let Some(line) = lines.recv().await {
        for (line, more) in split_line(line) {
            tx.send(ChannelData::Line { line, more }).await?;
        }
    }
    Ok(())
}

/// Join the peer's pieces into lines and hand each, whole and in order, to `consumer`,
/// until the channel ends, the consumer goes away or the peer breaks the protocol (then the
/// channel is cancelled naming why).
pub async fn recv_lines(rx: &mut ChannelReceiver, consumer: &mpsc::Sender<String>) -> LinesEnd {
    let channel = rx.handle().id();
    let mut joiner = LineJoiner::default();
    let mut partial = 0usize;
    loop {
        let Some(data) = rx.recv().await else {
            return LinesEnd::Channel(rx.end().cloned().unwrap_or(ChannelEnd::LinkClosed));
        };
        let broken = match data {
            ChannelData::Line { line, more } => {
                partial += line.len();
                if partial > LINE_MAX {
                    Some(FlowError::LineTooLong { channel })
                } else {
                    if let Some(line) = joiner.push(line, more) {
                        partial = 0;
                        if consumer.send(line).await.is_err() {
                            return LinesEnd::ConsumerGone;
                        }
                    }
                    None
                }
            }
            ChannelData::Bytes { .. } | ChannelData::Provider(_) | ChannelData::Pty(_) => {
                Some(FlowError::NotALine { channel })
            }
        };
        if let Some(e) = broken {
            tracing::warn!(channel, "{e}");
            rx.handle().cancel(e.to_string());
            return LinesEnd::Broken(e);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::channel::{Channel, ChannelAccepted, ChannelOpen, Side};
    use crate::link::{Link, LinkConfig};
    use crate::rpc::{Incoming, Rpc};
    use std::time::Duration;

    /// An MCP channel between two RPC ends over an in-memory transport.
    async fn channel_pair(window: u32) -> (Channel, Channel) {
        let (a, a_in) = Link::new(LinkConfig::default());
        let (b, b_in) = Link::new(LinkConfig::default());
        let conn = crate::testing::connect(&a, &b);
        std::mem::forget(conn);
        let (ra, _ia) = Rpc::new(a, a_in, Side::Server);
        let (_rb, mut ib) = Rpc::new(b, b_in, Side::Client);
        std::mem::forget(_ia);
        let accept = tokio::spawn(async move {
            match ib.recv().await {
                Some(Incoming::Channel(c)) => {
                    let ch = c.offer.accept(ChannelAccepted::Mcp, window).await.unwrap();
                    std::mem::forget(ib);
                    ch
                }
                other => panic!("{other:?}"),
            }
        });
        let open = ChannelOpen::Mcp {
            server: "test".into(),
        };
        let (_, opened) = ra.open_channel(open, window).await.unwrap();
        (opened, accept.await.unwrap())
    }

    /// A consumer that stops reading holds the producer on the other side at the window;
    /// once it reads again every line arrives, whole and in order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stalled_consumer_holds_the_sender_at_the_window_and_nothing_is_lost() {
        let (host, laptop) = channel_pair(WINDOW).await;
        let Channel { tx, rx: _host_rx } = host;
        let Channel {
            tx: _laptop_tx,
            mut rx,
        } = laptop;
        // 40 lines of 1.5 MiB (each goes in two pieces): 60 MiB, far over the window.
        let line = |i: usize| format!("{i:04}{}", "x".repeat(3 * 512 * 1024));
        let (lines_tx, mut lines_rx) = mpsc::channel::<String>(1);
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = std::sync::Arc::clone(&sent);
        let feeder = tokio::spawn(async move {
            for i in 0..40 {
                if lines_tx.send(line(i)).await.is_err() {
                    return;
                }
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        let pump = tokio::spawn(async move { send_lines(&tx, &mut lines_rx).await });
        // A consumer of one line that is not read: after it, nothing is credited back.
        let (consumer_tx, mut consumer_rx) = mpsc::channel::<String>(1);
        let joiner = tokio::spawn(async move { recv_lines(&mut rx, &consumer_tx).await });
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // In flight at most: one line in the consumer, one being handed over, a window in
        // the channel, one line joined, one in the feeder's queue and one being split.
        let fed = sent.load(std::sync::atomic::Ordering::SeqCst);
        let bound = 4 + (WINDOW as usize).div_ceil(3 * 512 * 1024) + 1;
        assert!(fed <= bound, "{fed} lines taken, the bound is {bound}");
        assert!(!feeder.is_finished(), "the producer was not held back");
        for i in 0..40 {
            let got = tokio::time::timeout(Duration::from_secs(30), consumer_rx.recv())
                .await
                .expect("a line in time")
                .expect("a line");
            assert_eq!(got, line(i), "line {i}");
        }
        feeder.await.unwrap();
        assert!(pump.await.unwrap().is_ok());
        joiner.abort();
    }

    /// One line of 20 MiB (more than two windows) crosses whole: its pieces are credited as
    /// they are joined.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_line_longer_than_the_window_crosses_whole() {
        let (host, laptop) = channel_pair(WINDOW).await;
        let (lines_tx, mut lines_rx) = mpsc::channel::<String>(1);
        let big = "\"".repeat(20 * 1024 * 1024);
        lines_tx.send(big.clone()).await.unwrap();
        drop(lines_tx);
        let Channel { tx, rx: _keep } = host;
        let pump = tokio::spawn(async move {
            let r = send_lines(&tx, &mut lines_rx).await;
            tx.close(None).await;
            r
        });
        let Channel { mut rx, tx: _t } = laptop;
        let (consumer_tx, mut consumer_rx) = mpsc::channel::<String>(1);
        let joiner = tokio::spawn(async move { recv_lines(&mut rx, &consumer_tx).await });
        let got = tokio::time::timeout(Duration::from_secs(60), consumer_rx.recv())
            .await
            .expect("the line in time")
            .expect("a line");
        assert_eq!(got.len(), big.len());
        assert!(got == big);
        assert!(pump.await.unwrap().is_ok());
        assert_eq!(
            joiner.await.unwrap(),
            LinesEnd::Channel(ChannelEnd::Closed(None))
        );
    }

    /// A line that never ends is cut off at the line limit, and both sides hear why.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_line_that_never_ends_is_cut_off_at_the_line_limit() {
        let (host, laptop) = channel_pair(WINDOW).await;
        let Channel { tx, rx: _keep } = host;
        let piece = "z".repeat(crate::content::MCP_LINE_PIECE);
        let sender = tokio::spawn(async move {
            let mut sent = 0usize;
            loop {
                let data = ChannelData::Line {
                    line: piece.clone(),
                    more: true,
                };
                if let Err(e) = tx.send(data).await {
                    return (sent, e.to_string());
                }
                sent += piece.len();
                assert!(sent <= LINE_MAX + 2 * WINDOW as usize, "never cut off");
            }
        });
        let Channel { mut rx, tx: _t } = laptop;
        let (consumer_tx, _consumer_rx) = mpsc::channel::<String>(1);
        let end = tokio::time::timeout(Duration::from_secs(60), recv_lines(&mut rx, &consumer_tx))
            .await
            .expect("cut off in time");
        let LinesEnd::Broken(e) = end else {
            panic!("{end:?}")
        };
        assert!(matches!(e, FlowError::LineTooLong { .. }), "{e:?}");
        let (sent, why) = tokio::time::timeout(Duration::from_secs(30), sender)
            .await
            .expect("the sender hears it")
            .unwrap();
        assert!(sent >= LINE_MAX, "cut off early at {sent}");
        assert!(why.contains("without ending"), "{why}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn data_that_is_not_a_line_breaks_the_channel() {
        let (host, laptop) = channel_pair(WINDOW).await;
        let data = ChannelData::Bytes {
            data: crate::pty::PtyBytes(vec![1, 2]),
        };
        host.tx.send(data).await.unwrap();
        let Channel { mut rx, tx: _t } = laptop;
        let (consumer_tx, _consumer_rx) = mpsc::channel::<String>(1);
        let end = recv_lines(&mut rx, &consumer_tx).await;
        assert!(
            matches!(end, LinesEnd::Broken(FlowError::NotALine { .. })),
            "{end:?}"
        );
    }
}
