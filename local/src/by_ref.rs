//! Events that arrive by reference. The host sends a journal event too big for one frame as
//! [`Notification::EventByRef`]; this stage fetches it from the host's content store (checking
//! its SHA-256) and hands it to the front end in its place, keeping the order of everything
//! the link delivered: events after it wait until it is fetched.
//!
//! The stage runs on a task of its own because fetching makes calls on the link, whose
//! answers arrive through the loop that feeds this stage.

use reasonix_forward::content::{ContentError, ContentRef};
use reasonix_forward::proto::{Event, EventKind, Request, Response};
use reasonix_forward::rpc::Rpc;
use tokio::sync::mpsc;

use crate::client::ClientEvent;

enum Item {
    Ready(ClientEvent),
    ByRef(EventRef),
}

/// What [`Notification::EventByRef`](reasonix_forward::proto::Notification::EventByRef)
/// carries.
pub(crate) struct EventRef {
    /// The event's seq.
    pub seq: u64,
    /// Its timestamp.
    pub ts: String,
    /// Its turn.
    pub turn: u64,
    /// Its wire type, for the notice when it cannot be fetched.
    pub kind: String,
    /// The encoded event in the host's content store.
    pub event_ref: ContentRef,
}

/// The front end stopped listening.
#[derive(Debug)]
pub(crate) struct StageGone;

/// The ordered sender of one link's client events.
pub(crate) struct OrderedEvents {
    tx: mpsc::UnboundedSender<Item>,
}

impl OrderedEvents {
    /// Start the stage for the link of `rpc`, delivering to `out`.
    pub(crate) fn spawn(rpc: Rpc, out: mpsc::UnboundedSender<ClientEvent>) -> OrderedEvents {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(deliver(rpc, rx, out));
        OrderedEvents { tx }
    }

    /// Deliver `ev` after everything sent before it; an error when the stage is gone (the
    /// front end stopped listening).
    pub(crate) fn send(&self, ev: ClientEvent) -> Result<(), StageGone> {
        self.tx.send(Item::Ready(ev)).map_err(|_| StageGone)
    }

    /// Fetch the event `r` refers to and deliver it in this place of the order.
    pub(crate) fn send_by_ref(&self, r: EventRef) {
        let _ = self.tx.send(Item::ByRef(r));
    }
}

async fn deliver(
    rpc: Rpc,
    mut rx: mpsc::UnboundedReceiver<Item>,
    out: mpsc::UnboundedSender<ClientEvent>,
) {
    while let Some(item) = rx.recv().await {
        let ev = match item {
            Item::Ready(ev) => ev,
            Item::ByRef(r) => match fetch_event(&rpc, &r).await {
                Ok(ev) => ClientEvent::Event(ev),
                // The link closed under the fetch: deliver nothing more from it. The front end
                // has not seen this seq, so its catch-up on the next link asks for it again.
                Err(_) if rpc.link().is_closed() => return,
                Err(e) => {
                    tracing::error!(
                        seq = r.seq,
                        kind = r.kind,
                        "event could not be fetched: {e}"
                    );
                    ClientEvent::Event(not_fetched(&r, &e))
                }
            },
        };
        if out.send(ev).is_err() {
            return;
        }
    }
}

/// Fetch and decode the event, and check it is the one announced.
async fn fetch_event(rpc: &Rpc, r: &EventRef) -> Result<Event, String> {
    let bytes = fetch_over(rpc, &r.event_ref)
        .await
        .map_err(|e| e.to_string())?;
    let ev: Event = serde_json::from_slice(&bytes)
        .map_err(|e| format!("the stored event does not decode: {e}"))?;
    if ev.seq != r.seq {
        return Err(format!(
            "the stored event has seq {}, expected {}",
            ev.seq, r.seq
        ));
    }
    Ok(ev)
}

/// The notice a front end gets in the place of an event that could not be fetched, so its
/// view has no silent hole.
fn not_fetched(r: &EventRef, why: &str) -> Event {
    Event {
        seq: r.seq,
        ts: r.ts.clone(),
        turn: r.turn,
        kind: EventKind::Notice {
            text: format!(
                "error: event {} ({}, {} bytes) was too big for the link and could not be fetched from the host: {why}. It is kept in the session journal on the host; the session goes on.",
                r.seq, r.kind, r.event_ref.bytes
            ),
        },
    }
}

/// Fetch content stored on the host by reference over `rpc`, chunk by chunk, checking its
/// SHA-256.
pub(crate) async fn fetch_over(rpc: &Rpc, r: &ContentRef) -> Result<Vec<u8>, ContentError> {
    fetch_with(r, |req| {
        let rpc = rpc.clone();
        async move { rpc.request(req).await.map_err(|e| e.to_string()) }
    })
    .await
}

/// Fetch content stored on the host by reference, making each `FetchContent` call with
/// `call` (a bare link, or a client that follows reconnects), checking its SHA-256.
pub(crate) async fn fetch_with<F, Fut>(r: &ContentRef, call: F) -> Result<Vec<u8>, ContentError>
where
    F: Fn(Request) -> Fut,
    Fut: std::future::Future<Output = Result<Response, String>>,
{
    reasonix_forward::content::fetch_all(r, |offset, len| {
        let answer = call(Request::FetchContent {
            sha256: r.sha256.clone(),
            offset,
            len,
        });
        async move {
            match answer.await? {
                Response::Content(chunk) => Ok(chunk),
                other => Err(format!("unexpected answer {other:?}")),
            }
        }
    })
    .await
}
