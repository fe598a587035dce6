//! Channels: the one stream primitive of the link.
//!
//! Provider streams, laptop MCP servers and host terminals are all channels; each user is a
//! small adapter over the same five operations:
//!
//! - **open** with a typed [`ChannelOpen`] (kind + parameters), answered by a typed
//!   [`ChannelAccepted`] or a refusal ([`Channels::open`], [`IncomingChannel`]);
//! - **ordered data** ([`ChannelData`]: bytes, line pieces, provider chunks, terminal
//!   traffic) in both directions, under **credit**: each side states a receive window, a
//!   sender spends credit for every piece ([`ChannelData::cost`]) and waits when it has none,
//!   and the receiver grants credit back once its consumer has taken half a window. So a
//!   slow consumer slows its own producer across the link and nothing else: the link's
//!   receive loop never waits for a channel (no head-of-line blocking between channels), no
//!   queue grows without bound, and a peer that sends more than it was granted has its
//!   channel cancelled with a reason naming it;
//! - **early data** ([`Channels::open_eager`]): when the peer said in the handshake that it
//!   takes it, the opener may send up to [`EARLY_WINDOW`] before the answer to its open
//!   arrives (as if the acceptor had announced that window), so a forwarded connection's
//!   first request crosses with its open instead of one round trip later; a refusal ends
//!   the channel and the acceptor drops what came early;
//! - **half-close** ([`ChannelSender::close`], also when a sender is dropped): this side
//!   sends nothing more, the other side's receiver ends after the data before it;
//! - **cancel** ([`ChannelHandle::cancel`], also when a receiver is dropped before the other
//!   side finished): both directions stop at once, the other side hears why;
//! - **resume**: every channel message is a data frame of the [`Link`], so a transport drop
//!   and resume loses, repeats and reorders nothing; the channels' state lives here, above
//!   the link, and is untouched by it. Only when the link closes for good do its channels
//!   end ([`ChannelEnd::LinkClosed`]).
//!
//! A [`Channels`] belongs to one link's [`crate::rpc::Rpc`]: the RPC dispatcher hands it every
//! [`ChannelMsg`], and channels the peer opens come out of the RPC's incoming stream as
//! [`crate::rpc::Incoming::Channel`]. Ids need no map in any adapter: a channel is its pair
//! of handles. See `docs/PROTOCOL.md`, "Channels", for the wire form.

mod ends;
mod wire;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot, watch, Semaphore};

use crate::link::{Link, LinkError};
use crate::proto::{Envelope, ErrorCode, RpcError};
use crate::rpc::CallError;
use crate::sync::LockExt;

pub use ends::{ChannelHandle, ChannelReceiver, ChannelSender};
pub use wire::{half, ChannelAccepted, ChannelData, ChannelKind, ChannelMsg, ChannelOpen};

/// What an opener may send before the answer to its open, on a link whose peer takes early
/// data ([`crate::link::Link::early_data`]): the acceptor counts that much as its window
/// until it answers, and answers with a window at least this big. A piece bigger than half
/// of it (its cost would depend on which window applies) waits for the answer.
pub const EARLY_WINDOW: u32 = 128 * 1024;

/// Which end of the link this is; decides the ids of the channels it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The laptop (`reasonix`): opens odd channel ids.
    Client,
    /// The host daemon: opens even channel ids.
    Server,
}

impl Side {
    fn first_id(self) -> u64 {
        match self {
            Side::Client => 1,
            Side::Server => 2,
        }
    }

    /// Whether this side opened channel `ch`.
    fn opened(self, ch: u64) -> bool {
        (ch % 2 == 1) == (self == Side::Client)
    }
}

/// How a channel ended for a receiver, or why a sender cannot send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelEnd {
    /// The other side finished sending (half-close), with its reason if it gave one.
    Closed(Option<String>),
    /// The other side cancelled the channel.
    CancelledByPeer(String),
    /// This side cancelled it (an adapter, a dropped receiver, or a peer that overran its
    /// window or broke the protocol).
    Cancelled(String),
    /// The link closed for good.
    LinkClosed,
}

impl std::fmt::Display for ChannelEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChannelEnd::Closed(None) => f.write_str("the other side finished"),
            ChannelEnd::Closed(Some(r)) => write!(f, "the other side finished: {r}"),
            ChannelEnd::CancelledByPeer(r) => write!(f, "cancelled by the other side: {r}"),
            ChannelEnd::Cancelled(r) => write!(f, "cancelled: {r}"),
            ChannelEnd::LinkClosed => f.write_str("the link closed"),
        }
    }
}

/// Why a piece could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The channel ended (cancelled, or its link closed).
    #[error("the channel ended: {0}")]
    Ended(ChannelEnd),
    /// The link refused the piece (too big for a frame).
    #[error(transparent)]
    Link(LinkError),
}

/// What the local receiver takes, in order.
#[derive(Debug)]
enum Inbox {
    /// A piece and the credit it cost.
    Data(ChannelData, u32),
    /// The end; nothing follows.
    End(ChannelEnd),
}

/// The sending half's state, shared by the sender and the table.
#[derive(Debug)]
struct SendState {
    /// Credit left; starts empty until the peer's window is known.
    credit: Semaphore,
    /// The peer's receive window (what a piece's cost is capped against).
    peer_window: AtomicU32,
    /// Set when nothing can be sent any more (cancelled, link closed).
    end: watch::Sender<Option<ChannelEnd>>,
    /// The peer answered the open (always true on the accepting side); until then the
    /// credit is the early window, if any.
    answered: watch::Sender<bool>,
    /// Credit this side started with before the answer (0, or [`EARLY_WINDOW`]).
    initial: u32,
}

impl SendState {
    fn new(peer_window: u32) -> Arc<Self> {
        Self::build(peer_window, true)
    }

    /// An opener's state before the answer, with `early` credit.
    fn opening(early: u32) -> Arc<Self> {
        Self::build(early, false)
    }

    fn build(peer_window: u32, answered: bool) -> Arc<Self> {
        Arc::new(SendState {
            credit: Semaphore::new(peer_window as usize),
            peer_window: AtomicU32::new(peer_window),
            end: watch::channel(None).0,
            answered: watch::channel(answered).0,
            initial: if answered { 0 } else { peer_window },
        })
    }

    /// The peer accepted with `window`: the rest of the window becomes credit.
    fn accepted(&self, window: u32) {
        self.peer_window.store(window, Ordering::Release);
        self.credit
            .add_permits(window.saturating_sub(self.initial) as usize);
        self.answered.send_replace(true);
    }

    fn stop(&self, end: ChannelEnd) {
        self.credit.close();
        self.end.send_if_modified(|e| {
            if e.is_none() {
                *e = Some(end);
                true
            } else {
                false
            }
        });
    }
}

/// One channel in the table.
struct Slot {
    kind: ChannelKind,
    inbox: mpsc::UnboundedSender<Inbox>,
    /// This side's receive window (0 on the accepting side until it accepts: data before
    /// that is an overrun).
    recv_window: u32,
    /// Cost received and not yet granted back.
    outstanding: u64,
    send: Arc<SendState>,
    sent_close: bool,
    got_close: bool,
    /// Opener side: where the answer goes.
    answer: Option<oneshot::Sender<Result<ChannelAccepted, RpcError>>>,
}

#[derive(Default)]
struct Table {
    slots: HashMap<u64, Slot>,
    /// The link closed: no channel opens any more.
    shut: bool,
}

struct Shared {
    link: Link,
    side: Side,
    next: AtomicU64,
    table: Mutex<Table>,
}

impl Shared {
    /// Queue `msg` on the link from code that cannot wait (drops, the dispatcher). Credits
    /// and cancels commute with everything else on their channel, so their order relative
    /// to other messages does not matter.
    fn send_later(&self, msg: ChannelMsg) {
        let link = self.link.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Err(e) = link.send(Envelope::Channel(msg)).await {
                    tracing::debug!("channel message not sent: {e}");
                }
            });
        }
    }

    /// End channel `ch` on this side with `end` (the receiver gets it after what it already
    /// has; the sender stops); true when it was still there.
    fn finish(&self, ch: u64, end: ChannelEnd) -> bool {
        let slot = self.table.lock_or_recover().slots.remove(&ch);
        match slot {
            Some(slot) => {
                slot.send.stop(end.clone());
                let _ = slot.inbox.send(Inbox::End(end.clone()));
                // An open still waiting hears why; for a closed link dropping the answer
                // says so (`CallError::Link`).
                if let (Some(answer), false) = (slot.answer, end == ChannelEnd::LinkClosed) {
                    let reason = end.to_string();
                    let _ = answer.send(Err(RpcError::new(ErrorCode::Internal, reason)));
                }
                true
            }
            None => false,
        }
    }

    /// Cancel channel `ch` from this side and tell the peer.
    fn cancel(&self, ch: u64, reason: String) -> bool {
        let live = self.finish(ch, ChannelEnd::Cancelled(reason.clone()));
        if live {
            self.send_later(ChannelMsg::Cancel { ch, reason });
        }
        live
    }
}

/// The channels of one link. Cheap to clone.
#[derive(Clone)]
pub struct Channels {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Channels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channels")
            .field("side", &self.shared.side)
            .field("open", &self.count())
            .finish()
    }
}

/// Both halves of a channel.
#[derive(Debug)]
pub struct Channel {
    /// This side's sending half.
    pub tx: ChannelSender,
    /// This side's receiving half.
    pub rx: ChannelReceiver,
}

impl Channels {
    /// No channels yet, on `link`, as `side`. Made by [`crate::rpc::Rpc::new`].
    pub(crate) fn new(link: Link, side: Side) -> Self {
        Channels {
            shared: Arc::new(Shared {
                link,
                side,
                next: AtomicU64::new(side.first_id()),
                table: Mutex::new(Table::default()),
            }),
        }
    }

    /// Open a channel; `window` is how much this side takes before it grants credit. Waits
    /// for the peer's answer: the channel and what the peer said, or its refusal
    /// ([`CallError::Remote`]), or [`CallError::Link`] when the link closed. Dropping the
    /// future before the answer cancels the channel.
    pub async fn open(
        &self,
        open: ChannelOpen,
        window: u32,
    ) -> Result<(ChannelAccepted, Channel), CallError> {
        let ch = self.shared.next.fetch_add(2, Ordering::Relaxed);
        let (answer_tx, answer_rx) = oneshot::channel();
        let (inbox, inbox_rx) = mpsc::unbounded_channel();
        let send = SendState::opening(0);
        {
            let mut t = self.shared.table.lock_or_recover();
            if t.shut {
                return Err(CallError::Link(LinkError::Closed));
            }
            t.slots.insert(
                ch,
                Slot {
                    kind: open.kind(),
                    inbox,
                    recv_window: window,
                    outstanding: 0,
                    send: Arc::clone(&send),
                    sent_close: false,
                    got_close: false,
                    answer: Some(answer_tx),
                },
            );
        }
        let mut guard = OpenGuard {
            shared: &self.shared,
            ch,
            done: false,
        };
        let msg = ChannelMsg::Open { ch, window, open };
        if let Err(e) = self.shared.link.send(Envelope::Channel(msg)).await {
            guard.done = true;
            self.shared.finish(ch, ChannelEnd::LinkClosed);
            return Err(CallError::Link(e));
        }
        let answer = answer_rx.await;
        guard.done = true;
        match answer {
            Ok(Ok(accepted)) => Ok((
                accepted,
                Channel {
                    tx: ChannelSender {
                        shared: Arc::clone(&self.shared),
                        ch,
                        state: send,
                        closed: false,
                    },
                    rx: ChannelReceiver::new(Arc::clone(&self.shared), ch, inbox_rx, window),
                },
            )),
            Ok(Err(e)) => Err(CallError::Remote(e)),
            Err(_) => Err(CallError::Link(LinkError::Closed)),
        }
    }

    /// Open a channel and return it at once when the peer takes early data: this side may
    /// send up to [`EARLY_WINDOW`] before the answer (a bigger piece waits for it), so the
    /// first bytes cross with the open instead of a round trip later. The [`Acceptance`]
    /// says what the peer answered; a refusal also ends the channel (the sender stops, the
    /// receiver ends with [`ChannelEnd::CancelledByPeer`] naming the reason) and the peer
    /// drops what came early. With a peer that predates early data this is
    /// [`Channels::open`] (waits for the answer; a refusal is the error).
    pub async fn open_eager(
        &self,
        open: ChannelOpen,
        window: u32,
    ) -> Result<(Channel, Acceptance), CallError> {
        if !self.shared.link.early_data() {
            let (accepted, channel) = self.open(open, window).await?;
            return Ok((channel, Acceptance(AcceptanceState::Ready(accepted))));
        }
        let ch = self.shared.next.fetch_add(2, Ordering::Relaxed);
        let (answer_tx, answer_rx) = oneshot::channel();
        let (inbox, inbox_rx) = mpsc::unbounded_channel();
        let send = SendState::opening(EARLY_WINDOW);
        {
            let mut t = self.shared.table.lock_or_recover();
            if t.shut {
                return Err(CallError::Link(LinkError::Closed));
            }
            t.slots.insert(
                ch,
                Slot {
                    kind: open.kind(),
                    inbox,
                    recv_window: window,
                    outstanding: 0,
                    send: Arc::clone(&send),
                    sent_close: false,
                    got_close: false,
                    answer: Some(answer_tx),
                },
            );
        }
        let msg = ChannelMsg::Open { ch, window, open };
        if let Err(e) = self.shared.link.send(Envelope::Channel(msg)).await {
            self.shared.finish(ch, ChannelEnd::LinkClosed);
            return Err(CallError::Link(e));
        }
        let channel = Channel {
            tx: ChannelSender {
                shared: Arc::clone(&self.shared),
                ch,
                state: send,
                closed: false,
            },
            rx: ChannelReceiver::new(Arc::clone(&self.shared), ch, inbox_rx, window),
        };
        Ok((channel, Acceptance(AcceptanceState::Waiting(answer_rx))))
    }

    /// Take one channel message from the peer. Never waits: data goes into the channel's
    /// queue (bounded by its window), so one slow consumer cannot hold up the link. A
    /// channel the peer opens comes back for the caller to accept or refuse.
    pub(crate) fn receive(&self, msg: ChannelMsg) -> Option<IncomingChannel> {
        let shared = &self.shared;
        match msg {
            ChannelMsg::Open { ch, window, open } => {
                if shared.side.opened(ch) {
                    shared.send_later(ChannelMsg::Refuse {
                        ch,
                        error: RpcError::new(
                            ErrorCode::BadRequest,
                            format!("channel id {ch} belongs to the other side's numbering"),
                        ),
                    });
                    return None;
                }
                let (inbox, inbox_rx) = mpsc::unbounded_channel();
                let send = SendState::new(window);
                // A peer that sends early data may do so within the early window.
                let early = if shared.link.early_data() {
                    EARLY_WINDOW
                } else {
                    0
                };
                {
                    let mut t = shared.table.lock_or_recover();
                    if t.shut {
                        return None;
                    }
                    if t.slots.contains_key(&ch) {
                        drop(t);
                        shared.cancel(ch, format!("channel {ch} was opened twice"));
                        return None;
                    }
                    t.slots.insert(
                        ch,
                        Slot {
                            kind: open.kind(),
                            inbox,
                            recv_window: early,
                            outstanding: 0,
                            send: Arc::clone(&send),
                            sent_close: false,
                            got_close: false,
                            answer: None,
                        },
                    );
                }
                Some(IncomingChannel {
                    open,
                    offer: Offer {
                        parts: Some(OfferParts {
                            shared: Arc::clone(shared),
                            ch,
                            inbox: inbox_rx,
                            send,
                        }),
                    },
                })
            }
            ChannelMsg::Accept {
                ch,
                window,
                accepted,
            } => {
                let mut t = shared.table.lock_or_recover();
                // Unknown: the opener gave up and cancelled it already. Answered already:
                // a second accept grants nothing.
                if let Some(slot) = t.slots.get_mut(&ch) {
                    if let Some(answer) = slot.answer.take() {
                        slot.send.accepted(window);
                        let _ = answer.send(Ok(accepted));
                    }
                }
                None
            }
            ChannelMsg::Refuse { ch, error } => {
                let slot = shared.table.lock_or_recover().slots.remove(&ch);
                if let Some(mut slot) = slot {
                    let end = ChannelEnd::CancelledByPeer(error.message.clone());
                    slot.send.stop(end.clone());
                    // An eager opener's receiver exists already: it ends with the reason.
                    let _ = slot.inbox.send(Inbox::End(end));
                    if let Some(answer) = slot.answer.take() {
                        let _ = answer.send(Err(error));
                    }
                }
                None
            }
            ChannelMsg::Data { ch, data } => {
                let mut t = shared.table.lock_or_recover();
                let Some(slot) = t.slots.get_mut(&ch) else {
                    tracing::debug!(ch, "data for a channel that is gone");
                    return None;
                };
                let cost = data.cost(slot.recv_window);
                slot.outstanding += u64::from(cost);
                let problem = if slot.got_close {
                    Some(format!(
                        "the other side sent data on {} channel {ch} after closing it",
                        slot.kind
                    ))
                } else if slot.outstanding > u64::from(slot.recv_window) {
                    Some(format!(
                        "the other side sent {} bytes on {} channel {ch} without waiting for credit (the window is {}); the channel was closed",
                        slot.outstanding, slot.kind, slot.recv_window
                    ))
                } else {
                    None
                };
                match problem {
                    None => {
                        let _ = slot.inbox.send(Inbox::Data(data, cost));
                    }
                    Some(reason) => {
                        drop(t);
                        tracing::warn!(ch, "{reason}");
                        shared.cancel(ch, reason);
                    }
                }
                None
            }
            ChannelMsg::Credit { ch, bytes } => {
                let t = shared.table.lock_or_recover();
                if let Some(slot) = t.slots.get(&ch) {
                    let window = slot.send.peer_window.load(Ordering::Acquire) as usize;
                    let room = window.saturating_sub(slot.send.credit.available_permits());
                    slot.send
                        .credit
                        .add_permits(usize::try_from(bytes).unwrap_or(usize::MAX).min(room));
                }
                None
            }
            ChannelMsg::Close { ch, reason } => {
                let mut t = shared.table.lock_or_recover();
                if let Some(slot) = t.slots.get_mut(&ch) {
                    slot.got_close = true;
                    let _ = slot.inbox.send(Inbox::End(ChannelEnd::Closed(reason)));
                    if slot.sent_close {
                        t.slots.remove(&ch);
                    }
                }
                None
            }
            ChannelMsg::Cancel { ch, reason } => {
                shared.finish(ch, ChannelEnd::CancelledByPeer(reason));
                None
            }
        }
    }

    /// The link closed for good: every channel ends with [`ChannelEnd::LinkClosed`] and no
    /// new one opens.
    pub(crate) fn shutdown(&self) {
        let ids: Vec<u64> = {
            let mut t = self.shared.table.lock_or_recover();
            t.shut = true;
            t.slots.keys().copied().collect()
        };
        for ch in ids {
            self.shared.finish(ch, ChannelEnd::LinkClosed);
        }
    }

    /// Channels open now (opening, open, or half-closed).
    pub fn count(&self) -> usize {
        self.shared.table.lock_or_recover().slots.len()
    }

    /// Channels of `kind` open now.
    pub fn count_kind(&self, kind: ChannelKind) -> usize {
        self.shared
            .table
            .lock_or_recover()
            .slots
            .values()
            .filter(|s| s.kind == kind)
            .count()
    }

    /// Cancel every channel of `kind` (both sides hear `reason`); returns how many.
    pub fn cancel_kind(&self, kind: ChannelKind, reason: &str) -> usize {
        let ids: Vec<u64> = self
            .shared
            .table
            .lock_or_recover()
            .slots
            .iter()
            .filter(|(_, s)| s.kind == kind)
            .map(|(ch, _)| *ch)
            .collect();
        ids.into_iter()
            .filter(|ch| self.shared.cancel(*ch, reason.to_string()))
            .count()
    }
}

/// The answer to an [`Channels::open_eager`]. Dropping it changes nothing.
#[derive(Debug)]
pub struct Acceptance(AcceptanceState);

#[derive(Debug)]
enum AcceptanceState {
    Ready(ChannelAccepted),
    Waiting(oneshot::Receiver<Result<ChannelAccepted, RpcError>>),
}

impl Acceptance {
    /// What the peer answered: its [`ChannelAccepted`], its refusal
    /// ([`CallError::Remote`]), or [`CallError::Link`] when the link closed (or the channel
    /// ended on this side) first.
    pub async fn wait(self) -> Result<ChannelAccepted, CallError> {
        match self.0 {
            AcceptanceState::Ready(a) => Ok(a),
            AcceptanceState::Waiting(rx) => match rx.await {
                Ok(Ok(a)) => Ok(a),
                Ok(Err(e)) => Err(CallError::Remote(e)),
                Err(_) => Err(CallError::Link(LinkError::Closed)),
            },
        }
    }
}

/// Cancels an open that was given up before its answer came.
struct OpenGuard<'a> {
    shared: &'a Arc<Shared>,
    ch: u64,
    done: bool,
}

impl Drop for OpenGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.shared
                .cancel(self.ch, "the opener stopped waiting for it".into());
        }
    }
}

/// A channel the peer opened, to accept or refuse.
#[derive(Debug)]
pub struct IncomingChannel {
    /// What the peer asked for.
    pub open: ChannelOpen,
    /// The answer to give.
    pub offer: Offer,
}

/// The answer to a channel the peer opened: [`Offer::accept`] or [`Offer::refuse`]. Dropped
/// without either, it is refused as not served.
pub struct Offer {
    parts: Option<OfferParts>,
}

struct OfferParts {
    shared: Arc<Shared>,
    ch: u64,
    inbox: mpsc::UnboundedReceiver<Inbox>,
    send: Arc<SendState>,
}

impl std::fmt::Debug for Offer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Offer")
            .field("ch", &self.parts.as_ref().map(|p| p.ch))
            .finish()
    }
}

impl Offer {
    /// Accept: this side takes `window` before it grants credit. The answer is queued on
    /// the link before anything this side sends on the channel. A channel the peer already
    /// cancelled is returned ended (its receiver says why, and gives nothing of what came
    /// early: the peer gave up before its data was taken) and nothing is sent.
    pub async fn accept(
        mut self,
        accepted: ChannelAccepted,
        window: u32,
    ) -> Result<Channel, LinkError> {
        let Some(mut p) = self.parts.take() else {
            return Err(LinkError::Closed);
        };
        // What came early was counted against the early window: the real one is not less.
        let window = if p.shared.link.early_data() {
            window.max(EARLY_WINDOW)
        } else {
            window
        };
        let live = match p.shared.table.lock_or_recover().slots.get_mut(&p.ch) {
            Some(slot) => {
                slot.recv_window = window;
                true
            }
            None => false,
        };
        if live {
            let msg = ChannelMsg::Accept {
                ch: p.ch,
                window,
                accepted,
            };
            p.shared.link.send(Envelope::Channel(msg)).await?;
        } else {
            let mut end = ChannelEnd::LinkClosed;
            while let Ok(item) = p.inbox.try_recv() {
                if let Inbox::End(e) = item {
                    end = e;
                }
            }
            let (tx, rx) = mpsc::unbounded_channel();
            let _ = tx.send(Inbox::End(end));
            p.inbox = rx;
        }
        Ok(Channel {
            tx: ChannelSender {
                shared: Arc::clone(&p.shared),
                ch: p.ch,
                state: p.send,
                closed: false,
            },
            rx: ChannelReceiver::new(p.shared, p.ch, p.inbox, window),
        })
    }

    /// Refuse, with the error the opener gets.
    pub async fn refuse(mut self, error: RpcError) {
        if let Some(p) = self.parts.take() {
            refuse(&p, error).await;
        }
    }
}

async fn refuse(p: &OfferParts, error: RpcError) {
    let live = p
        .shared
        .table
        .lock_or_recover()
        .slots
        .remove(&p.ch)
        .is_some();
    if live {
        let msg = ChannelMsg::Refuse { ch: p.ch, error };
        if let Err(e) = p.shared.link.send(Envelope::Channel(msg)).await {
            tracing::debug!(ch = p.ch, "refusal not sent: {e}");
        }
    }
}

impl Drop for Offer {
    fn drop(&mut self) {
        if let Some(p) = self.parts.take() {
            if p.shared
                .table
                .lock_or_recover()
                .slots
                .remove(&p.ch)
                .is_some()
            {
                p.shared.send_later(ChannelMsg::Refuse {
                    ch: p.ch,
                    error: RpcError::new(
                        ErrorCode::BadRequest,
                        "this side does not serve channels of that kind",
                    ),
                });
            }
        }
    }
}
