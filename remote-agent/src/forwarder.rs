//! The per-link event forwarder of an open session: catch-up from the session's events, then
//! live events, in order and without gaps. A send that fails is logged and reported to the
//! user in place of the event; the forwarder only stops when the link is closed for good or
//! the link switched to another session.

use std::sync::Arc;

use reasonix_forward::link::LinkError;
use reasonix_forward::proto::{Event, EventKind, Notification, TurnState};
use reasonix_forward::rpc::Rpc;
use tokio::sync::broadcast;

use crate::session::Session;

/// The link is closed for good: nothing more can reach this client.
#[derive(Debug)]
pub(crate) struct LinkGone;

/// What the forwarder of one (link, session) pair needs.
pub(crate) struct Forwarder {
    rpc: Rpc,
    session: Arc<Session>,
    /// Highest event seq sent (or replaced by an error notice).
    sent: u64,
}

impl Forwarder {
    /// A forwarder that has sent everything up to `since`.
    pub(crate) fn new(rpc: Rpc, session: Arc<Session>, since: u64) -> Forwarder {
        Forwarder {
            rpc,
            session,
            sent: since,
        }
    }

    /// Forward catch-up `events`, the state, then live notifications until the link closes,
    /// the session's channel closes, or `still_open()` turns false.
    pub(crate) async fn run(
        mut self,
        events: Vec<Event>,
        mut live: broadcast::Receiver<Notification>,
        state: TurnState,
        detail: Option<String>,
        still_open: impl Fn() -> bool,
    ) {
        let session = self.session.id.clone();
        if let Err(LinkGone) = self.forward(events, live_loop_start(state, detail)).await {
            tracing::info!(%session, "event forwarder stopped: the link is closed");
            return;
        }
        loop {
            let next = live.recv().await;
            // Checked after the wait too: a forwarder of an earlier open must not send what
            // the current one is about to (it would come before that one's catch-up).
            if !still_open() {
                return;
            }
            let result = match next {
                Ok(Notification::Event(ev)) => self.event_in_order(ev).await,
                Ok(other) => self.notify(other).await,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    // The live channel overflowed: the events are all in the session (and its
                    // journal), so catch up from there; the current state may have been
                    // among the skipped notifications, so send it again.
                    tracing::warn!(%session, skipped = n, "slow client: catching up from the session's events");
                    let missed = self.session.events_since(self.sent);
                    let (state, detail) = (self.session.state(), None);
                    self.forward(missed, live_loop_start(state, detail)).await
                }
                Err(broadcast::error::RecvError::Closed) => return,
            };
            if let Err(LinkGone) = result {
                tracing::info!(%session, "event forwarder stopped: the link is closed");
                return;
            }
        }
    }

    async fn forward(&mut self, events: Vec<Event>, then: Notification) -> Result<(), LinkGone> {
        for ev in events {
            if ev.seq > self.sent {
                self.event(ev).await?;
            }
        }
        self.notify(then).await
    }

    /// A live event: fill any gap from the session first (nothing may be skipped).
    async fn event_in_order(&mut self, ev: Event) -> Result<(), LinkGone> {
        if ev.seq <= self.sent {
            return Ok(());
        }
        if ev.seq > self.sent + 1 {
            for missed in self.session.events_since(self.sent) {
                if missed.seq >= ev.seq {
                    break;
                }
                self.event(missed).await?;
            }
        }
        self.event(ev).await
    }

    /// Send one event. An event too big for a frame goes by reference (the client fetches
    /// it from the content store); when it cannot be sent at all (cannot be encoded, cannot
    /// be stored), the client gets a notice with the same seq saying so, so its view has no
    /// silent hole.
    async fn event(&mut self, ev: Event) -> Result<(), LinkGone> {
        let (seq, ts, turn) = (ev.seq, ev.ts.clone(), ev.turn);
        let kind = event_type(&ev.kind);
        self.sent = seq;
        // Too big for a frame: the link hands the event back, and it goes by reference.
        let sent = match self.rpc.try_notify(Notification::Event(ev)).await {
            Ok(()) => Ok(()),
            Err((LinkError::Oversized { .. }, Some(Notification::Event(ev)))) => {
                self.event_by_ref(ev, kind).await
            }
            Err((e, _)) => Err(e),
        };
        match sent {
            Ok(()) => Ok(()),
            Err(LinkError::Closed) => Err(LinkGone),
            Err(e) => {
                tracing::error!(session = %self.session.id, seq, kind, "event could not be sent to the client: {e}");
                let notice = Event {
                    seq,
                    ts,
                    turn,
                    kind: EventKind::Notice {
                        text: format!(
                            "error: event {seq} ({kind}) could not be sent to this client: {e}. It is kept in the session journal on the host (and in the daemon log); the session goes on."
                        ),
                    },
                };
                match self.rpc.notify(Notification::Event(notice)).await {
                    Ok(()) => Ok(()),
                    Err(LinkError::Closed) => Err(LinkGone),
                    Err(e) => {
                        tracing::error!(seq, "the error notice could not be sent either: {e}");
                        Ok(())
                    }
                }
            }
        }
    }

    /// Store the encoded event in the workspace's content store (off the async threads) and
    /// send its reference in its place.
    async fn event_by_ref(&mut self, ev: Event, kind: &'static str) -> Result<(), LinkError> {
        let (seq, ts, turn) = (ev.seq, ev.ts.clone(), ev.turn);
        let store = self.session.content_store();
        let stored = tokio::task::spawn_blocking(move || {
            let bytes = serde_json::to_vec(&ev).map_err(|e| e.to_string())?;
            store.put(&bytes).map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
        match stored {
            Ok(event_ref) => {
                tracing::info!(session = %self.session.id, seq, kind, bytes = event_ref.bytes, "event too big for a frame: sent by reference");
                self.rpc
                    .notify(Notification::EventByRef {
                        seq,
                        ts,
                        turn,
                        kind: kind.to_string(),
                        event_ref,
                    })
                    .await
            }
            Err(e) => Err(LinkError::Malformed(format!(
                "too big for a frame, and it could not be stored for fetching: {e}"
            ))),
        }
    }

    /// Send a notification that is not an event (state, progress); one that cannot be sent is
    /// logged and skipped (they are transient by nature).
    async fn notify(&mut self, n: Notification) -> Result<(), LinkGone> {
        match self.rpc.notify(n).await {
            Ok(()) => Ok(()),
            Err(LinkError::Closed) => Err(LinkGone),
            Err(e) => {
                tracing::error!(session = %self.session.id, "notification could not be sent to the client: {e}");
                Ok(())
            }
        }
    }
}

fn live_loop_start(state: TurnState, detail: Option<String>) -> Notification {
    Notification::State { state, detail }
}

/// The wire name of an event's type, for messages.
fn event_type(kind: &EventKind) -> &'static str {
    match kind {
        EventKind::SessionStarted { .. } => "session_started",
        EventKind::UserTurn { .. } => "user_turn",
        EventKind::TextDelta { .. } => "text_delta",
        EventKind::ReasoningDelta { .. } => "reasoning_delta",
        EventKind::AssistantMessage { .. } => "assistant_message",
        EventKind::ToolStarted { .. } => "tool_started",
        EventKind::ToolFinished { .. } => "tool_finished",
        EventKind::ApprovalRequested { .. } => "approval_requested",
        EventKind::ApprovalAnswered { .. } => "approval_answered",
        EventKind::ElicitationRequested { .. } => "elicitation_requested",
        EventKind::ElicitationAnswered { .. } => "elicitation_answered",
        EventKind::Usage { .. } => "usage",
        EventKind::TurnFinished { .. } => "turn_finished",
        EventKind::Notice { .. } => "notice",
        EventKind::ProviderRetry(_) => "provider_retry",
        EventKind::Plan(_) => "plan",
        EventKind::Goal(_) => "goal",
        EventKind::Checkpoint { .. } => "checkpoint",
        EventKind::Compacted { .. } => "compacted",
        EventKind::Steer { .. } => "steer",
        EventKind::SteerInjected { .. } => "steer_injected",
        EventKind::ShellRan { .. } => "shell_ran",
        EventKind::Subagent { .. } => "subagent",
        EventKind::Planner { .. } => "planner",
    }
}
