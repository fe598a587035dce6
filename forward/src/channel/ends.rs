//! The two halves of a channel and the handle that cancels it (see [`super`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::{
    half, ChannelData, ChannelEnd, ChannelError, ChannelMsg, Inbox, SendState, Shared, EARLY_WINDOW,
};
use crate::link::LinkError;
use crate::proto::Envelope;
use crate::sync::LockExt;

/// Cancels a channel from anywhere (a turn that lets go of a stream, a takeover). Cheap to
/// clone.
#[derive(Clone)]
pub struct ChannelHandle {
    pub(super) shared: Arc<Shared>,
    pub(super) ch: u64,
}

impl std::fmt::Debug for ChannelHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelHandle")
            .field("ch", &self.ch)
            .finish()
    }
}

impl ChannelHandle {
    /// Stop both directions now and tell the peer `reason`; false when the channel had
    /// ended already.
    pub fn cancel(&self, reason: impl Into<String>) -> bool {
        self.shared.cancel(self.ch, reason.into())
    }

    /// [`ChannelHandle::cancel`], waiting until the peer's notice is queued on the link
    /// (then [`crate::link::Link::flush`] waits for it to arrive), for a process about to
    /// exit.
    pub async fn cancel_queued(&self, reason: impl Into<String>) -> bool {
        let reason = reason.into();
        let live = self
            .shared
            .finish(self.ch, ChannelEnd::Cancelled(reason.clone()));
        if live {
            let msg = ChannelMsg::Cancel {
                ch: self.ch,
                reason,
            };
            if let Err(e) = self.shared.link.send(Envelope::Channel(msg)).await {
                tracing::debug!(ch = self.ch, "cancel not sent: {e}");
            }
        }
        live
    }

    /// The channel's id (logs).
    pub fn id(&self) -> u64 {
        self.ch
    }
}

/// The sending half of a channel. Dropping it half-closes the channel.
pub struct ChannelSender {
    pub(super) shared: Arc<Shared>,
    pub(super) ch: u64,
    pub(super) state: Arc<SendState>,
    pub(super) closed: bool,
}

impl std::fmt::Debug for ChannelSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelSender")
            .field("ch", &self.ch)
            .field("credit", &self.state.credit.available_permits())
            .finish()
    }
}

impl ChannelSender {
    /// Send one piece, after waiting for its credit. Fails once the channel was cancelled
    /// (either side) or its link closed. Dropping the future while it waits for credit
    /// sends nothing.
    pub async fn send(&self, data: ChannelData) -> Result<(), ChannelError> {
        // Before the answer (early data), a piece whose cost would differ between the early
        // window and the real one waits for the real one.
        if !*self.state.answered.borrow() && data.content_len() >= half(EARLY_WINDOW) as usize {
            let mut answered = self.state.answered.subscribe();
            let mut end = self.state.end.subscribe();
            tokio::select! {
                _ = answered.wait_for(|a| *a) => {}
                _ = end.wait_for(|e| e.is_some()) => {
                    return Err(ChannelError::Ended(self.end()));
                }
            }
        }
        let cost = data.cost(self.state.peer_window.load(Ordering::Acquire));
        match self.state.credit.acquire_many(cost).await {
            Ok(permit) => permit.forget(),
            Err(_) => return Err(ChannelError::Ended(self.end())),
        }
        let msg = ChannelMsg::Data { ch: self.ch, data };
        match self.shared.link.send(Envelope::Channel(msg)).await {
            Ok(()) => Ok(()),
            Err(LinkError::Closed) => Err(ChannelError::Ended(ChannelEnd::LinkClosed)),
            Err(e) => {
                // Not sent: the credit is still this side's.
                self.state.credit.add_permits(cost as usize);
                Err(ChannelError::Link(e))
            }
        }
    }

    /// Half-close: send nothing more, telling the peer `reason` (if any). Waits only for
    /// the link to queue it.
    pub async fn close(mut self, reason: Option<String>) {
        self.closed = true;
        if self.mark_closed() {
            let msg = ChannelMsg::Close {
                ch: self.ch,
                reason,
            };
            if let Err(e) = self.shared.link.send(Envelope::Channel(msg)).await {
                tracing::debug!(ch = self.ch, "close not sent: {e}");
            }
        }
    }

    /// Resolves once nothing can be sent any more: the channel was cancelled (either side)
    /// or the link closed. A peer's half-close does not count: it still receives.
    pub async fn stopped(&self) -> ChannelEnd {
        let mut rx = self.state.end.subscribe();
        let end = match rx.wait_for(|e| e.is_some()).await {
            Ok(end) => end.clone(),
            Err(_) => None,
        };
        end.unwrap_or(ChannelEnd::LinkClosed)
    }

    /// A handle that cancels this channel.
    pub fn handle(&self) -> ChannelHandle {
        ChannelHandle {
            shared: Arc::clone(&self.shared),
            ch: self.ch,
        }
    }

    /// Credit left now (tests, diagnostics).
    pub fn credit(&self) -> usize {
        self.state.credit.available_permits()
    }

    fn end(&self) -> ChannelEnd {
        self.state
            .end
            .borrow()
            .clone()
            .unwrap_or(ChannelEnd::LinkClosed)
    }

    /// Record this side's half-close; true when a `Close` should go out.
    fn mark_closed(&self) -> bool {
        let mut t = self.shared.table.lock_or_recover();
        match t.slots.get_mut(&self.ch) {
            Some(slot) if !slot.sent_close => {
                slot.sent_close = true;
                if slot.got_close {
                    t.slots.remove(&self.ch);
                }
                true
            }
            Some(_) | None => false,
        }
    }
}

impl Drop for ChannelSender {
    fn drop(&mut self) {
        if !self.closed && self.mark_closed() {
            self.shared.send_later(ChannelMsg::Close {
                ch: self.ch,
                reason: None,
            });
        }
    }
}

/// The receiving half of a channel. Dropping it before the other side finished sending
/// cancels the channel (nobody would take what it sends).
pub struct ChannelReceiver {
    shared: Arc<Shared>,
    ch: u64,
    inbox: mpsc::UnboundedReceiver<Inbox>,
    /// Consumed since the last grant.
    consumed: u64,
    grant_at: u64,
    end: Option<ChannelEnd>,
}

impl std::fmt::Debug for ChannelReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelReceiver")
            .field("ch", &self.ch)
            .field("end", &self.end)
            .finish()
    }
}

impl ChannelReceiver {
    pub(super) fn new(
        shared: Arc<Shared>,
        ch: u64,
        inbox: mpsc::UnboundedReceiver<Inbox>,
        window: u32,
    ) -> Self {
        ChannelReceiver {
            shared,
            ch,
            inbox,
            consumed: 0,
            grant_at: u64::from(half(window)),
            end: None,
        }
    }

    /// The next piece, in order; `None` at the end ([`ChannelReceiver::end`] says which).
    /// Taking a piece is what earns the sender its credit back. Cancel-safe.
    pub async fn recv(&mut self) -> Option<ChannelData> {
        if self.end.is_some() {
            return None;
        }
        match self.inbox.recv().await {
            Some(Inbox::Data(data, cost)) => {
                self.consumed += u64::from(cost);
                if self.consumed >= self.grant_at {
                    self.grant();
                }
                Some(data)
            }
            Some(Inbox::End(end)) => {
                self.end = Some(end);
                None
            }
            None => {
                self.end = Some(ChannelEnd::LinkClosed);
                None
            }
        }
    }

    /// How the channel ended, once [`ChannelReceiver::recv`] returned `None`.
    pub fn end(&self) -> Option<&ChannelEnd> {
        self.end.as_ref()
    }

    /// A handle that cancels this channel.
    pub fn handle(&self) -> ChannelHandle {
        ChannelHandle {
            shared: Arc::clone(&self.shared),
            ch: self.ch,
        }
    }

    fn grant(&mut self) {
        let bytes = std::mem::take(&mut self.consumed);
        let live = match self.shared.table.lock_or_recover().slots.get_mut(&self.ch) {
            Some(slot) => {
                slot.outstanding = slot.outstanding.saturating_sub(bytes);
                !slot.got_close
            }
            None => false,
        };
        if live {
            self.shared
                .send_later(ChannelMsg::Credit { ch: self.ch, bytes });
        }
    }
}

impl Drop for ChannelReceiver {
    fn drop(&mut self) {
        if self.end.is_some() {
            return;
        }
        let unfinished = self
            .shared
            .table
            .lock_or_recover()
            .slots
            .get(&self.ch)
            .is_some_and(|s| !s.got_close);
        if unfinished {
            self.shared
                .cancel(self.ch, "the receiving side stopped reading".into());
        }
    }
}
