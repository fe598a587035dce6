//! One client link of the daemon ([`Conn`]): its provider streams (and the messages the
//! laptop holds for the next request, `reasonix_forward::prefix`), tunnelled laptop MCP
//! channels, the session it has open, and the [`DriverLink`] the session's turns use to reach
//! the model through it ([`ConnLink`]).

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use reasonix_forward::link::Link;
use reasonix_forward::proto::{
    ClientRole, Notification, ProviderChunk, ProviderRequest, Request, SessionSettings,
};
use reasonix_forward::rpc::Rpc;
use reasonix_forward::sync::LockExt;
use tokio::sync::mpsc;

use crate::content::TransientContent;
use crate::session::{DriverLink, ProviderStream, Session, PROVIDER_CHUNK_BUFFER};

/// Where the lines of one tunnelled laptop MCP server go on the host.
pub(super) struct McpRoute {
    /// Into the server's line channel, bounded by the channel's flow-control window (see
    /// [`reasonix_forward::tunnel`]), so a slow MCP client never stalls the link's receive
    /// loop and never lets a queue grow.
    pub(super) inlet: reasonix_forward::tunnel::LineInlet,
    /// Filled with the laptop's reason when the channel closes, for the tool error.
    pub(super) diagnostics: Arc<crate::mcp::Diagnostics>,
}

/// Where the chunks of one provider stream go on the host.
pub(super) struct StreamRoute {
    /// Into the turn runner's [`ProviderStream`] (bounded: the link's receive loop waits).
    pub(super) chunks: mpsc::Sender<ProviderChunk>,
    /// Messages held in [`Conn::transient`] for this request, released when it ends.
    pub(super) held: Option<String>,
}

/// One client link.
pub(super) struct Conn {
    pub(super) id: u64,
    pub(super) link_id: String,
    pub(super) rpc: Rpc,
    pub(super) link: Link,
    pub(super) streams: Mutex<HashMap<String, StreamRoute>>,
    /// Provider request messages too big for a frame, until the laptop has fetched them.
    pub(super) transient: TransientContent,
    /// The messages of the last provider request the laptop accepted on this link: the next
    /// request that extends them is sent as its new messages only.
    pub(super) sent_messages: reasonix_forward::prefix::SentMessages,
    /// When each provider stream was asked for, until its first chunk arrives (logged as
    /// `ttft_us`: the time to first token through the link, read by `bench/ttft_bench.sh`).
    pub(super) stream_started: Mutex<HashMap<String, Instant>>,
    /// Lines from tunnelled laptop MCP servers, by channel.
    pub(super) mcp_channels: Mutex<HashMap<u64, McpRoute>>,
    pub(super) session: Mutex<Option<(Arc<Session>, ClientRole)>>,
    pub(super) headless: Mutex<bool>,
    /// The settings of this client's last `OpenSession`: what it enforces when it drives,
    /// including after a `Takeover`.
    pub(super) settings: Mutex<Option<SessionSettings>>,
    /// Bumped on every transport attach; a grace timer only closes the link when no newer
    /// transport arrived.
    pub(super) generation: AtomicU64,
    /// Bumped on every `OpenSession`: an event forwarder of an earlier open stops, even
    /// when the link opened the same session again meanwhile (A, B, then A).
    pub(super) opens: AtomicU64,
    /// Terminals this link follows.
    pub(super) terminals: crate::pty::attach::LinkTerminals,
}

impl DriverLink for ConnLink {
    fn start_stream(&self, mut request: ProviderRequest) -> ProviderStream {
        let (tx, rx) = mpsc::channel(PROVIDER_CHUNK_BUFFER);
        let all = Arc::new(std::mem::take(&mut request.messages));
        let id = request.stream_id.clone();
        self.0.streams.lock_or_recover().insert(
            id.clone(),
            StreamRoute {
                chunks: tx,
                held: None,
            },
        );
        self.0
            .stream_started
            .lock_or_recover()
            .insert(id.clone(), Instant::now());
        let rpc = self.0.rpc.clone();
        let conn = Arc::clone(&self.0);
        let stream = id.clone();
        tokio::spawn(async move {
            let id = stream;
            // By prefix when the laptop holds the start of these messages (see
            // `reasonix_forward::prefix`); in full when it answers that it does not.
            let mut by_prefix = true;
            loop {
                let wire = conn.wire_request(&request, &all, by_prefix);
                let (inline, based) = (wire.messages_ref.is_none(), wire.messages_base.is_some());
                let sent = wire.messages.len();
                match rpc.request(Request::Provider(wire)).await {
                    Ok(_) => {
                        tracing::info!(
                            stream_id = %id,
                            messages = all.len(),
                            sent,
                            by_prefix = based,
                            "provider request accepted"
                        );
                        if inline {
                            conn.sent_messages.accepted(&id, Arc::clone(&all));
                        } else {
                            conn.sent_messages.forget();
                        }
                    }
                    Err(reasonix_forward::rpc::CallError::Remote(e))
                        if based
                            && e.code
                                == reasonix_forward::proto::ErrorCode::UnknownMessagesBase =>
                    {
                        tracing::info!("provider request {id}: {}; sending it in full", e.message);
                        conn.sent_messages.forget();
                        by_prefix = false;
                        continue;
                    }
                    Err(e) => {
                        // Dropping the sender ends the stream without Done: the step re-issues.
                        tracing::warn!("provider request {id} failed on the link: {e}");
                        conn.end_stream(&id);
                    }
                }
                break;
            }
        });
        let conn = Arc::clone(&self.0);
        ProviderStream::new(rx, move || {
            // The turn let go before the end (cancelled): stop paying for tokens.
            if conn.end_stream(&id) {
                let rpc = conn.rpc.clone();
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move {
                        if let Err(e) = rpc
                            .notify(Notification::ProviderCancel {
                                stream_id: id.clone(),
                            })
                            .await
                        {
                            tracing::warn!("could not cancel provider stream {id}: {e}");
                        }
                    });
                }
            }
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
        Box::pin(async move {
            let channel = rand::random::<u64>() >> 1;
            // Few lines queued for the MCP client: what waits is bounded by the window.
            let (from_tx, from_rx) = mpsc::channel::<String>(16);
            let (to_tx, mut to_rx) = mpsc::channel::<String>(1024);
            let (inlet, window) =
                reasonix_forward::tunnel::LineInlet::open(&conn.rpc, channel, from_tx);
            let diagnostics = crate::mcp::Diagnostics::new();
            conn.mcp_channels.lock_or_recover().insert(
                channel,
                McpRoute {
                    inlet,
                    diagnostics: Arc::clone(&diagnostics),
                },
            );
            let rpc = conn.rpc.clone();
            tokio::spawn(async move {
                if let Err(e) =
                    reasonix_forward::tunnel::send_lines(&rpc, channel, &mut to_rx, &window).await
                {
                    tracing::warn!(channel, "MCP lines to the laptop stopped: {e}");
                }
            });
            match conn
                .rpc
                .request(Request::McpOpen {
                    server: server.clone(),
                    channel,
                })
                .await
            {
                Ok(_) => Ok(crate::mcp::LineChannels {
                    to_server: to_tx,
                    from_server: from_rx,
                    diagnostics: Some(diagnostics),
                }),
                Err(e) => {
                    conn.mcp_channels.lock_or_recover().remove(&channel);
                    Err(format!(
                        "the laptop could not start MCP server {server}: {e}"
                    ))
                }
            }
        })
    }

    fn headless(&self) -> bool {
        *self.0.headless.lock_or_recover()
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

impl Conn {
    /// Forget a provider stream (its chunks stop, held messages are released); true when it
    /// was still open.
    /// The provider request `meta` with the messages `all` as it goes on the link: only the
    /// messages after the last accepted request's when they start with those (and
    /// `by_prefix`), and by reference when too big for a frame (held until the stream ends).
    fn wire_request(
        &self,
        meta: &ProviderRequest,
        all: &[serde_json::Value],
        by_prefix: bool,
    ) -> ProviderRequest {
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
        if let Some(sha) = hold_large_messages(&self.transient, &mut wire) {
            let old = self
                .streams
                .lock_or_recover()
                .get_mut(&meta.stream_id)
                .and_then(|r| r.held.replace(sha));
            if let Some(old) = old {
                self.transient.release(&old);
            }
        }
        wire
    }

    pub(super) fn end_stream(&self, stream_id: &str) -> bool {
        self.stream_started.lock_or_recover().remove(stream_id);
        let route = self.streams.lock_or_recover().remove(stream_id);
        match route {
            Some(route) => {
                if let Some(sha) = route.held {
                    self.transient.release(&sha);
                }
                true
            }
            None => false,
        }
    }

    /// Nothing of a session hangs on this link: no session, terminal, laptop MCP channel
    /// or provider stream. (Answers the client has not received yet may be lost with it: a
    /// client resuming late finds the link gone and asks again.)
    pub(super) fn holds_nothing(&self) -> bool {
        self.session.lock_or_recover().is_none()
            && self.mcp_channels.lock_or_recover().is_empty()
            && self.streams.lock_or_recover().is_empty()
            && self.terminals.is_empty()
    }

    /// Forget every provider stream (their turns see the end and re-issue).
    pub(super) fn end_all_streams(&self) {
        let routes: Vec<StreamRoute> = self
            .streams
            .lock_or_recover()
            .drain()
            .map(|(_, r)| r)
            .collect();
        for r in routes {
            if let Some(sha) = r.held {
                self.transient.release(&sha);
            }
        }
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
