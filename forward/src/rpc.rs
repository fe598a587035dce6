//! Requests, responses, notifications and channels multiplexed on one [`Link`].
//!
//! Request ids are per sender: each side numbers its own requests from 1, and a
//! [`Envelope::Response`] carries the id of the request it answers, so the two id spaces
//! never meet. Pending calls live here, above the link, so they survive transport drops.
//! Channel messages go to the link's [`Channels`] without waiting (see [`crate::channel`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use crate::channel::{
    Acceptance, Channel, ChannelAccepted, ChannelOpen, Channels, IncomingChannel, Side,
};
use crate::link::{Link, LinkError};
use crate::proto::{Envelope, Notification, Request, Response, RpcError};
use crate::sync::LockExt;

/// Capacity of the [`Incoming`] channel. The dispatcher waits when it is full (which in
/// turn stops the link reader), so a handler that makes its own calls should run in its own
/// task rather than block the loop that drains this channel.
const INCOMING_CAPACITY: usize = 4096;

/// Something the peer sent that this side must handle.
// As for `Request`: each is built once and moved to its handler; boxing the request would
// only add an allocation to every one.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Incoming {
    /// A request; answer it with [`Rpc::respond`] using the same id.
    Request {
        /// Request id.
        id: u64,
        /// Body.
        body: Request,
    },
    /// A notification.
    Notify(Notification),
    /// A channel the peer opened: accept or refuse its [`IncomingChannel::offer`].
    Channel(IncomingChannel),
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The peer answered with an error.
    #[error("{0}")]
    Remote(RpcError),
    /// The link failed or closed before an answer came.
    #[error(transparent)]
    Link(#[from] LinkError),
}

type Reply = oneshot::Sender<Result<Response, RpcError>>;

struct Pending {
    calls: HashMap<u64, Reply>,
    /// Set when the link's inbound stream ended: no answer can come any more.
    closed: bool,
}

struct Inner {
    link: Link,
    channels: Channels,
    next_id: AtomicU64,
    pending: Arc<Mutex<Pending>>,
}

/// The RPC layer over a link. Cheap to clone.
#[derive(Clone)]
pub struct Rpc {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Rpc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rpc")
            .field("pending", &self.inner.pending.lock_or_recover().calls.len())
            .finish()
    }
}

/// Removes a call from the pending map if the caller stops waiting (future dropped).
struct PendingGuard<'a> {
    pending: &'a Mutex<Pending>,
    id: u64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.pending.lock_or_recover().calls.remove(&self.id);
    }
}

impl Rpc {
    /// Wrap a link and its inbound receiver; `side` is which end of the link this is (it
    /// numbers the channels this side opens). Requests, notifications and channels the
    /// peer opens come out of the returned receiver; responses are routed to the waiting
    /// callers, channel traffic to its channels.
    ///
    /// Spawns the dispatcher task (needs a Tokio runtime). It ends when the link closes;
    /// then every pending call fails with [`LinkError::Closed`], every channel ends and the
    /// [`Incoming`] receiver ends.
    pub fn new(
        link: Link,
        inbound: mpsc::Receiver<Envelope>,
        side: Side,
    ) -> (Rpc, mpsc::Receiver<Incoming>) {
        let (tx, rx) = mpsc::channel(INCOMING_CAPACITY);
        let pending = Arc::new(Mutex::new(Pending {
            calls: HashMap::new(),
            closed: false,
        }));
        let channels = Channels::new(link.clone(), side);
        tokio::spawn(dispatch(
            inbound,
            Arc::clone(&pending),
            channels.clone(),
            tx,
        ));
        let inner = Inner {
            link,
            channels,
            next_id: AtomicU64::new(1),
            pending,
        };
        (
            Rpc {
                inner: Arc::new(inner),
            },
            rx,
        )
    }

    /// Send a request and wait for its response. Survives transport drops (the link
    /// resumes underneath); fails only when the link is closed.
    pub async fn request(&self, body: Request) -> Result<Response, CallError> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut p = self.inner.pending.lock_or_recover();
            if p.closed {
                return Err(CallError::Link(LinkError::Closed));
            }
            p.calls.insert(id, tx);
        }
        let _guard = PendingGuard {
            pending: &self.inner.pending,
            id,
        };
        self.inner.link.send(Envelope::Request { id, body }).await?;
        match rx.await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => Err(CallError::Remote(e)),
            // The dispatcher dropped the sender: the link closed.
            Err(_) => Err(CallError::Link(LinkError::Closed)),
        }
    }

    /// Answer a request received as [`Incoming::Request`].
    pub async fn respond(
        &self,
        id: u64,
        result: Result<Response, RpcError>,
    ) -> Result<(), LinkError> {
        self.inner
            .link
            .send(Envelope::Response { id, result })
            .await
    }

    /// Send a notification.
    pub async fn notify(&self, body: Notification) -> Result<(), LinkError> {
        self.inner.link.send(Envelope::Notify { body }).await
    }

    /// [`Rpc::notify`], giving a notification too big for one frame back with
    /// [`LinkError::Oversized`] (see [`Link::try_send`]).
    pub async fn try_notify(
        &self,
        body: Notification,
    ) -> Result<(), (LinkError, Option<Notification>)> {
        self.inner
            .link
            .try_send(Envelope::Notify { body })
            .await
            .map_err(|(e, envelope)| match envelope {
                Some(Envelope::Notify { body }) => (e, Some(body)),
                _ => (e, None),
            })
    }

    /// The underlying link.
    pub fn link(&self) -> &Link {
        &self.inner.link
    }

    /// The link's channels (counting and cancelling them by kind).
    pub fn channels(&self) -> &Channels {
        &self.inner.channels
    }

    /// Open a channel on this link ([`Channels::open`]).
    pub async fn open_channel(
        &self,
        open: ChannelOpen,
        window: u32,
    ) -> Result<(ChannelAccepted, Channel), CallError> {
        self.inner.channels.open(open, window).await
    }

    /// Open a channel, sending early data when the peer takes it ([`Channels::open_eager`]).
    pub async fn open_channel_eager(
        &self,
        open: ChannelOpen,
        window: u32,
    ) -> Result<(Channel, Acceptance), CallError> {
        self.inner.channels.open_eager(open, window).await
    }

    /// Number of calls waiting for an answer.
    pub fn pending_calls(&self) -> usize {
        self.inner.pending.lock_or_recover().calls.len()
    }
}

async fn dispatch(
    mut inbound: mpsc::Receiver<Envelope>,
    pending: Arc<Mutex<Pending>>,
    channels: Channels,
    incoming: mpsc::Sender<Incoming>,
) {
    while let Some(envelope) = inbound.recv().await {
        match envelope {
            Envelope::Response { id, result } => {
                let reply = pending.lock_or_recover().calls.remove(&id);
                match reply {
                    // The caller may have given up meanwhile; that is fine.
                    Some(tx) => {
                        let _ = tx.send(result);
                    }
                    None => tracing::debug!(id, "response to a request nobody waits for"),
                }
            }
            Envelope::Request { id, body } => {
                if incoming.send(Incoming::Request { id, body }).await.is_err() {
                    tracing::warn!(id, "request dropped: nobody handles incoming requests");
                }
            }
            Envelope::Notify { body } => {
                if incoming.send(Incoming::Notify(body)).await.is_err() {
                    tracing::debug!("notification dropped: nobody reads incoming messages");
                }
            }
            // Never waits: a slow channel cannot hold up the others.
            Envelope::Channel(msg) => {
                if let Some(opened) = channels.receive(msg) {
                    // Dropped unanswered when nobody takes it: then it is refused.
                    let _ = incoming.send(Incoming::Channel(opened)).await;
                }
            }
        }
    }
    // The link closed: fail every waiting call (dropping a sender wakes its caller) and end
    // every channel.
    {
        let mut p = pending.lock_or_recover();
        p.closed = true;
        p.calls.clear();
    }
    channels.shutdown();
}
