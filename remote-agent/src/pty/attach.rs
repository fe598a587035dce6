//! A client's terminal channel, as an adapter over `reasonix_forward::channel`: the client
//! opens one per terminal it shows ([`PtyOpen`]); the daemon starts or finds the terminal,
//! accepts with its [`reasonix_forward::proto::PtyInfo`], then writes the client's keystrokes
//! to it and follows its output by offset.
//!
//! The follower sends output as channel data under the channel's credit, and the link's
//! replay carries it across transport drops (nothing lost or doubled). When the client is
//! behind (or its link is down) the follower waits for credit, never the shell: if the
//! terminal's ring moves past the follower meanwhile, it sends the current screen and goes
//! on from there. Closing or cancelling the channel detaches; the shell keeps running.

use std::sync::Arc;

use reasonix_forward::channel::{Channel, ChannelAccepted, ChannelData, ChannelEnd, Offer};
use reasonix_forward::channel::{ChannelReceiver, ChannelSender};
use reasonix_forward::link::Link;
use reasonix_forward::proto::{ErrorCode, PtyBytes, PtyData, PtyOpen, RpcError};
use reasonix_forward::pty::OUTPUT_CHUNK_MAX;

use super::{Next, PtyError, Start, Terminal, Terminals};

/// Bytes of keystrokes and sizes the daemon takes on a terminal channel before it grants
/// credit (a paste bigger than this waits for the shell to read).
pub const INPUT_WINDOW: u32 = 1024 * 1024;

/// Tells the terminal's clients apart (one key per channel).
static NEXT_KEY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl From<PtyError> for RpcError {
    fn from(e: PtyError) -> RpcError {
        let code = match &e {
            PtyError::Spawn { .. } => ErrorCode::Pty,
            PtyError::NotFound(_) => ErrorCode::NotFound,
            PtyError::BadSize { .. } => ErrorCode::BadRequest,
        };
        RpcError::new(code, e.to_string())
    }
}

/// The terminal to follow and where to start, for what the client asked.
fn open(terminals: &Terminals, open: PtyOpen) -> Result<(Arc<Terminal>, Start), PtyError> {
    match open {
        PtyOpen::Open { size, term } => Ok((terminals.open(size, &term)?, Start::Replay(0))),
        PtyOpen::Attach { pty, have, size } => {
            let t = terminals.get(pty)?;
            t.resize(size)?;
            let start = t.start(have);
            Ok((t, start))
        }
    }
}

/// Counts a channel among a terminal's clients while it lives.
struct Client {
    terminal: Arc<Terminal>,
    key: u64,
}

impl Drop for Client {
    fn drop(&mut self) {
        self.terminal.client_delta(self.key, None);
    }
}

/// Serve a terminal channel the client opened on `link`: accept it with the terminal's
/// info (or refuse it with why), then keystrokes in and output out until the shell exits
/// and the client lets go, or the channel ends.
pub async fn serve(terminals: Arc<Terminals>, request: PtyOpen, offer: Offer, link: Link) {
    let (terminal, start) = match open(&terminals, request) {
        Ok(x) => x,
        Err(e) => {
            offer.refuse(e.into()).await;
            return;
        }
    };
    // Queued on the link before the first output, so the client knows the terminal first.
    let accepted = ChannelAccepted::Pty(terminal.info());
    let Channel { tx, rx } = match offer.accept(accepted, INPUT_WINDOW).await {
        Ok(channel) => channel,
        Err(e) => {
            tracing::debug!(pty = terminal.id, "terminal channel not accepted: {e}");
            return;
        }
    };
    let key = NEXT_KEY.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    terminal.client_delta(key, Some(link));
    let _client = Client {
        terminal: Arc::clone(&terminal),
        key,
    };
    let mut input = tokio::spawn(keystrokes(Arc::clone(&terminal), rx));
    let exited = tokio::select! {
        exited = follow(&tx, &terminal, start) => exited,
        // The client let go or cancelled: stop following.
        _ = &mut input => false,
    };
    if exited {
        tx.close(None).await;
        // Until the client closes its side too (or the channel ends).
        let _ = input.await;
    } else {
        input.abort();
    }
}

/// The client's keystrokes and sizes, in order, until its side ends.
async fn keystrokes(t: Arc<Terminal>, mut rx: ChannelReceiver) {
    while let Some(data) = rx.recv().await {
        match data {
            ChannelData::Pty(PtyData::Input { data }) => t.write(data.0),
            ChannelData::Pty(PtyData::Resize { size }) => {
                if let Err(e) = t.resize(size) {
                    tracing::debug!(pty = t.id, "resize ignored: {e}");
                }
            }
            ChannelData::Pty(
                PtyData::Output { .. } | PtyData::Screen { .. } | PtyData::Exited { .. },
            )
            | ChannelData::Bytes { .. }
            | ChannelData::Line { .. }
            | ChannelData::Provider(_) => {
                rx.handle()
                    .cancel("the client sent something other than keystrokes or a size");
                return;
            }
        }
    }
    if let Some(end @ (ChannelEnd::Cancelled(_) | ChannelEnd::CancelledByPeer(_))) = rx.end() {
        tracing::debug!(pty = t.id, "terminal channel ended: {end}");
    }
}

/// Send `t`'s output from `start` on the channel; true when the shell exited (its exit was
/// sent), false when the channel stopped.
async fn follow(tx: &ChannelSender, t: &Terminal, start: Start) -> bool {
    let pty = t.id;
    let mut watch = t.watch();
    let send = |data: PtyData| tx.send(ChannelData::Pty(data));
    let mut cursor = match start {
        Start::Replay(from) => from,
        Start::Screen { offset, size, data } => {
            let screen = PtyData::Screen {
                offset,
                size,
                data: PtyBytes(data),
            };
            if send(screen).await.is_err() {
                return false;
            }
            offset
        }
    };
    loop {
        // Marked seen before looking, so output that lands after the look wakes the wait.
        watch.borrow_and_update();
        let data = match t.next(cursor, OUTPUT_CHUNK_MAX) {
            Next::Bytes { offset, data } => {
                cursor = offset + data.len() as u64;
                PtyData::Output {
                    offset,
                    data: PtyBytes(data),
                }
            }
            Next::Screen { offset, size, data } => {
                tracing::info!(
                    pty,
                    behind = offset - cursor,
                    "follower fell behind; sending the screen"
                );
                cursor = offset;
                PtyData::Screen {
                    offset,
                    size,
                    data: PtyBytes(data),
                }
            }
            Next::Exited(status) => return send(PtyData::Exited { status }).await.is_ok(),
            Next::Wait => {
                tokio::select! {
                    changed = watch.changed() => {
                        if changed.is_err() {
                            return false;
                        }
                    }
                    _ = tx.stopped() => return false,
                }
                continue;
            }
        };
        // Waits for credit while the client is behind; fails once the channel stopped.
        if send(data).await.is_err() {
            return false;
        }
    }
}
