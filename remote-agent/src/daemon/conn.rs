//! One client link of the daemon ([`Conn`]): the session it has open, and the
//! [`DriverLink`] the session's turns use to reach the laptop through it ([`ConnLink`]):
//! provider streams (with the messages the laptop holds for the next request,
//! `reasonix_forward::prefix`) and laptop MCP servers, each a channel on the link.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use reasonix_forward::channel::{
    Channel, ChannelData, ChannelEnd, ChannelHandle, ChannelKind, ChannelOpen,
};
use reasonix_forward::link::Link;
use reasonix_forward::proto::{
    ClientRole, ProviderChunk, ProviderRequest, Request, SessionSettings,
};
use reasonix_forward::rpc::{CallError, Rpc};
use reasonix_forward::sync::LockExt;
use tokio::sync::mpsc;

use crate::content::TransientContent;
use crate::session::{DriverLink, ProviderStream, Session, PROVIDER_CHUNK_BUFFER};

/// One client link.
pub(super) struct Conn {
    pub(super) id: u64,
    pub(super) link_id: String,
    pub(super) rpc: Rpc,
    pub(super) link: Link,
    /// Provider request messages too big for a frame, until the laptop has fetched them.
    pub(super) transient: TransientContent,
    /// The messages of the last provider request the laptop accepted on this link: the next
    /// request that extends them is sent as its new messages only.
    pub(super) sent_messages: reasonix_forward::prefix::SentMessages,
    pub(super) session: Mutex<Option<(Arc<Session>, ClientRole)>>,
    pub(super) headless: Mutex<bool>,
    /// The settings of this client's last `OpenSession`: what it enforces when it drives,
    /// including after a `Takeover`.
    pub(super) settings: Mutex<Option<SessionSettings>>,
    /// The hooks and trust records of that open (#34), adopted again at a `Takeover`.
    pub(super) hooks: Mutex<reasonix_forward::hooks::HookSettings>,
    /// Bumped on every transport attach; a grace timer only closes the link when no newer
    /// transport arrived.
    pub(super) generation: AtomicU64,
    /// Bumped on every `OpenSession`: an event forwarder of an earlier open stops, even
    /// when the link opened the same session again meanwhile (A, B, then A).
    pub(super) opens: AtomicU64,
    /// Set once this link watches the workspace's ports ([`Request::WatchPorts`]).
    pub(super) watches_ports: std::sync::atomic::AtomicBool,
    /// When this link's laptop offered its ssh-agent (an order among offers; 0: never).
    pub(super) agent_offer: super::agent::OfferSeq,
}

impl DriverLink for ConnLink {
    fn start_stream(&self, request: ProviderRequest) -> ProviderStream {
        let (tx, rx) = mpsc::channel(PROVIDER_CHUNK_BUFFER);
        let opened = Arc::new(Mutex::new(None::<ChannelHandle>));
        let task = tokio::spawn(Arc::clone(&self.0).relay_stream(request, tx, Arc::clone(&opened)));
        ProviderStream::new(rx, move || {
            // The turn let go before the end (cancelled): stop paying for tokens. Before
            // the laptop answered, dropping the open cancels it.
            if let Some(channel) = opened.lock_or_recover().take() {
                channel.cancel("the turn no longer wants this reply");
            }
            task.abort();
        })
    }

    fn conn_id(&self) -> u64 {
        self.0.id
    }

    fn link_state(&self) -> tokio::sync::watch::Receiver<bool> {
        self.0.link.watch_connected()
    }

    fn open_mcp(
        &self,
        server: &str,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<crate::mcp::LineChannels, String>> + Send>,
    > {
        let conn = Arc::clone(&self.0);
        let server = server.to_string();
        Box::pin(async move { conn.open_laptop_mcp(server).await })
    }

    fn headless(&self) -> bool {
        *self.0.headless.lock_or_recover()
    }

    fn web_fetch(
        &self,
        request: reasonix_forward::proto::WebFetchRequest,
    ) -> crate::tools::web_fetch::FetchFuture {
        let rpc = self.0.rpc.clone();
        Box::pin(async move {
            // The laptop caps a fetch at 30 s; the rest is for a link that is down a while.
            let answer = tokio::time::timeout(
                std::time::Duration::from_secs(120),
                rpc.request(Request::WebFetch(request)),
            )
            .await
            .map_err(|_| "the laptop did not answer within 120 s".to_string())?;
            match answer {
                Ok(reasonix_forward::proto::Response::WebFetch(reply)) => Ok(reply),
                Ok(other) => Err(format!("the laptop answered {other:?}")),
                Err(CallError::Remote(e)) => Err(e.message),
                Err(e) => Err(format!("the link to the laptop failed: {e}")),
            }
        })
    }

    fn provide_base(&self, messages: Vec<serde_json::Value>) {
        // A long conversation is not sent ahead of any request (see `PROVIDED_BASE_MAX`).
        let size: usize = messages
            .iter()
            .map(crate::compaction::estimate::json_len)
            .sum();
        if size > reasonix_forward::prefix::PROVIDED_BASE_MAX {
            return;
        }
        let conn = Arc::clone(&self.0);
        let stream_id = format!("base-{}-{:x}", conn.id, rand::random::<u32>());
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        rt.spawn(async move {
            let messages = Arc::new(messages);
            let request = Request::ProviderBase {
                stream_id: stream_id.clone(),
                messages: Arc::clone(&messages),
            };
            match conn.rpc.request(request).await {
                Ok(_) => {
                    tracing::debug!(
                        messages = messages.len(),
                        "the laptop holds the base of the next request"
                    );
                    conn.sent_messages.based(&stream_id, messages);
                }
                Err(e) => tracing::debug!("the laptop did not take the next request's base: {e}"),
            }
        });
    }
}

pub(super) struct ConnLink(pub(super) Arc<Conn>);

/// Bytes of provider chunks the host takes before it grants the laptop more: far more than
/// a turn runner that keeps up ever holds, and a bound when it does not.
const PROVIDER_WINDOW: u32 = 4 * 1024 * 1024;

impl Conn {
    /// One provider stream, as a channel adapter: open a provider channel on the laptop (by
    /// prefix, and again in full when the laptop no longer holds the base), then hand its
    /// chunks to the turn runner's `chunks` until the laptop closes it. Ending without a
    /// `Done`/`Error` chunk (the link closed, the open failed) makes the step re-issue.
    async fn relay_stream(
        self: Arc<Self>,
        mut request: ProviderRequest,
        chunks: mpsc::Sender<ProviderChunk>,
        opened: Arc<Mutex<Option<ChannelHandle>>>,
    ) {
        let started = Instant::now();
        let all = Arc::new(std::mem::take(&mut request.messages));
        let id = request.stream_id.clone();
        // Messages held for the laptop to fetch, released when the stream ends however it
        // ends (also when this task is aborted).
        let mut held = Held {
            transient: self.transient.clone(),
            sha: None,
        };
        // By prefix when the laptop holds the start of these messages (see
        // `reasonix_forward::prefix`); in full when it answers that it does not.
        let mut by_prefix = true;
        let Channel { tx, mut rx } = loop {
            let (wire, sha) = self.wire_request(&request, &all, by_prefix);
            held.replace(sha);
            let (inline, based) = (wire.messages_ref.is_none(), wire.messages_base.is_some());
            let sent = wire.messages.len();
            let open = ChannelOpen::Provider(wire);
            match self.rpc.open_channel(open, PROVIDER_WINDOW).await {
                Ok((_, channel)) => {
                    tracing::info!(
                        stream_id = %id,
                        messages = all.len(),
                        sent,
                        by_prefix = based,
                        "provider request accepted"
                    );
                    if inline {
                        self.sent_messages.accepted(&id, Arc::clone(&all));
                    } else {
                        self.sent_messages.forget();
                    }
                    break channel;
                }
                Err(CallError::Remote(e))
                    if based
                        && e.code == reasonix_forward::proto::ErrorCode::UnknownMessagesBase =>
                {
                    tracing::info!("provider request {id}: {}; sending it in full", e.message);
                    self.sent_messages.forget();
                    by_prefix = false;
                }
                Err(e) => {
                    // Dropping `chunks` ends the stream without Done: the step re-issues.
                    tracing::warn!("provider request {id} failed on the link: {e}");
                    return;
                }
            }
        };
        *opened.lock_or_recover() = Some(rx.handle());
        // Nothing goes to the laptop on this channel.
        drop(tx);
        let mut first = true;
        while let Some(data) = rx.recv().await {
            let ChannelData::Provider(chunk) = data else {
                rx.handle()
                    .cancel("the laptop sent something other than provider chunks");
                return;
            };
            if std::mem::take(&mut first) {
                tracing::info!(
                    stream_id = %id,
                    ttft_us = started.elapsed().as_micros() as u64,
                    "first provider chunk"
                );
            }
            // Waits while the turn runner is behind: the channel then stops granting the
            // laptop credit, which holds its relay (never the link).
            if chunks.send(chunk).await.is_err() {
                return;
            }
        }
        // Finished, refused or cut: the receiver let go or the channel says why.
        if let Some(end) = rx.end() {
            tracing::debug!(stream_id = %id, "provider stream ended: {end}");
        }
    }

    /// A laptop MCP server, as a channel adapter: open an MCP channel (the laptop starts the
    /// server) and pump the MCP client's lines over it both ways. The laptop's reason for
    /// the end (the server's exit and stderr tail), a cancel (a takeover) or the link's
    /// expiry goes into the diagnostics before the client sees the end of the lines.
    async fn open_laptop_mcp(
        self: Arc<Self>,
        server: String,
    ) -> Result<crate::mcp::LineChannels, String> {
        let open = ChannelOpen::Mcp {
            server: server.clone(),
        };
        let (_, Channel { tx, mut rx }) = self
            .rpc
            .open_channel(open, reasonix_forward::tunnel::WINDOW)
            .await
            .map_err(|e| format!("the laptop could not start MCP server {server}: {e}"))?;
        let ch = rx.handle().id();
        // Few lines queued for the MCP client: what waits is bounded by the window.
        let (from_tx, from_rx) = mpsc::channel::<String>(16);
        let (to_tx, mut to_rx) = mpsc::channel::<String>(1024);
        let diagnostics = crate::mcp::Diagnostics::new();
        tokio::spawn(async move {
            match reasonix_forward::tunnel::send_lines(&tx, &mut to_rx).await {
                // The MCP client let go of the server: closing lets the laptop end it.
                Ok(()) => tx.close(None).await,
                Err(e) => tracing::debug!(ch, "MCP lines to the laptop stopped: {e}"),
            }
        });
        let diag = Arc::clone(&diagnostics);
        tokio::spawn(async move {
            use reasonix_forward::tunnel::LinesEnd;
            let why = match reasonix_forward::tunnel::recv_lines(&mut rx, &from_tx).await {
                LinesEnd::Channel(ChannelEnd::Closed(reason)) => format!(
                    "the laptop server ended: {}",
                    reason.as_deref().unwrap_or("closed")
                ),
                LinesEnd::Channel(ChannelEnd::LinkClosed) => {
                    "the link to the laptop running this server expired".to_string()
                }
                LinesEnd::Channel(
                    ChannelEnd::Cancelled(reason) | ChannelEnd::CancelledByPeer(reason),
                ) => reason,
                LinesEnd::Broken(e) => e.to_string(),
                // The client let go; dropping the receiver tells the laptop.
                LinesEnd::ConsumerGone => return,
            };
            tracing::info!(ch, "laptop MCP server closed: {why}");
            diag.set_exit(why);
            // `from_tx` goes now, after the reason is in place.
        });
        Ok(crate::mcp::LineChannels {
            to_server: to_tx,
            from_server: from_rx,
            diagnostics: Some(diagnostics),
        })
    }

    /// The provider request `meta` with the messages `all` as it goes on the link: only the
    /// messages after the last accepted request's when they start with those (and
    /// `by_prefix`), and by reference when too big for a frame (then with the held
    /// content's name, to release when the stream ends).
    fn wire_request(
        &self,
        meta: &ProviderRequest,
        all: &[serde_json::Value],
        by_prefix: bool,
    ) -> (ProviderRequest, Option<String>) {
        let base = by_prefix
            .then(|| self.sent_messages.base_for(all))
            .flatten();
        let skip = base.as_ref().map_or(0, |b| b.count);
        let mut wire = ProviderRequest {
            messages: all[skip..].to_vec(),
            messages_base: base,
            messages_ref: None,
            ..meta.clone()
        };
        let held = hold_large_messages(&self.transient, &mut wire);
        (wire, held)
    }

    /// Nothing of a session hangs on this link: no session, terminal, laptop MCP channel
    /// or provider stream. (Answers the client has not received yet may be lost with it: a
    /// client resuming late finds the link gone and asks again.)
    pub(super) fn holds_nothing(&self) -> bool {
        self.session.lock_or_recover().is_none() && self.rpc.channels().count() == 0
    }

    /// End every provider stream (their turns see the end and re-issue; the laptop stops
    /// them too if it ever hears of it).
    pub(super) fn end_all_streams(&self, reason: &str) {
        self.rpc
            .channels()
            .cancel_kind(ChannelKind::Provider, reason);
    }
}

/// Provider messages held in the link's transient content for the laptop to fetch;
/// released when dropped.
struct Held {
    transient: TransientContent,
    sha: Option<String>,
}

impl Held {
    fn replace(&mut self, sha: Option<String>) {
        if let Some(old) = std::mem::replace(&mut self.sha, sha) {
            self.transient.release(&old);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.replace(None);
    }
}

/// When `request` is too big for one frame, hold its messages for the laptop to fetch and
/// send a reference instead; returns the held content's name.
fn hold_large_messages(
    transient: &TransientContent,
    request: &mut ProviderRequest,
) -> Option<String> {
    let size: usize = request
        .messages
        .iter()
        .map(|m| serde_json::to_vec(m).map(|b| b.len()).unwrap_or(0))
        .sum();
    if size <= reasonix_forward::content::PROVIDER_INLINE_MAX {
        return None;
    }
    let messages = std::mem::take(&mut request.messages);
    match serde_json::to_vec(&messages) {
        Ok(bytes) => {
            let r = transient.hold(bytes);
            tracing::info!(
                stream = %request.stream_id,
                bytes = r.bytes,
                "provider request sent with its messages by reference"
            );
            let sha = r.sha256.clone();
            request.messages_ref = Some(r);
            Some(sha)
        }
        Err(e) => {
            // Cannot happen for values that came from JSON; keep them inline and let the
            // link report the size if it must.
            tracing::error!("cannot encode provider messages: {e}");
            request.messages = messages;
            None
        }
    }
}
