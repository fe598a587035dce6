//! The laptop's ends of the channels the host opens on the link: provider streams (the
//! gateway's chunks relayed to the host) and laptop MCP servers (their stdio lines tunnelled
//! to the host's MCP client). Each is a small adapter over `reasonix_forward::channel`.

use std::sync::Arc;

use reasonix_forward::channel::{Channel, ChannelAccepted, ChannelData, ChannelEnd, Offer};
use reasonix_forward::proto::{ErrorCode, RpcError};
use reasonix_forward::rpc::Rpc;
use reasonix_forward::tunnel::{recv_lines, send_lines, LinesEnd};

use crate::gateway::Gateway;

/// Bytes of data the laptop takes on a provider channel before it grants credit: the host
/// sends nothing on one, so this is nominal.
const PROVIDER_LAPTOP_WINDOW: u32 = 64 * 1024;

/// One provider channel, as an adapter: accept it, run the request through the gateway and
/// send its chunks on the channel, then close it. Messages sent by reference are fetched
/// from the host first (and checked against their SHA-256). The gateway keeps reading the
/// HTTP stream into its own buffer whatever happens to the link; the channel's credit holds
/// this relay when the host is behind, and the link buffers chunks while it is down. When
/// the host cancels the channel (the turn let go), the relay stops at once, which drops the
/// gateway's receiver and closes the HTTP stream.
pub(crate) async fn relay_provider_stream(
    rpc: Rpc,
    gateway: Arc<Gateway>,
    offer: Offer,
    mut req: reasonix_forward::proto::ProviderRequest,
    mut messages: reasonix_forward::prefix::SharedMessages,
) {
    let stream_id = req.stream_id.clone();
    let Channel { tx, rx } = match offer
        .accept(ChannelAccepted::Provider, PROVIDER_LAPTOP_WINDOW)
        .await
    {
        Ok(channel) => channel,
        Err(e) => {
            tracing::warn!(stream_id, "provider stream not accepted: {e}");
            return;
        }
    };
    // Kept until the end: dropping it early would cancel the channel.
    let _rx = rx;
    if let Some(r) = req.messages_ref.take() {
        let fetched = crate::by_ref::fetch_over(&rpc, &r)
            .await
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                serde_json::from_slice::<Vec<serde_json::Value>>(&bytes)
                    .map_err(|e| format!("the messages are not a JSON array: {e}"))
            });
        match fetched {
            // After the base's messages, when the request had one.
            Ok(fetched) => messages = messages.extended(fetched),
            Err(e) => {
                tracing::warn!(stream_id, "provider messages could not be fetched: {e}");
                let chunk = reasonix_forward::proto::ProviderChunk::Error {
                    message: format!(
                        "the laptop could not fetch this request's messages from the host: {e}"
                    ),
                    retryable: true,
                };
                let _ = tx.send(ChannelData::Provider(chunk)).await;
                tx.close(None).await;
                return;
            }
        }
    }
    let mut chunks = gateway.stream_shared(req, messages);
    loop {
        let chunk = tokio::select! {
            end = tx.stopped() => {
                tracing::info!(stream_id, "provider stream stopped: {end}");
                return;
            }
            chunk = chunks.recv() => chunk,
        };
        let Some(chunk) = chunk else { break };
        if let Err(e) = tx.send(ChannelData::Provider(chunk)).await {
            tracing::warn!(stream_id, "provider chunk not sent to the host: {e}");
            return;
        }
    }
    tx.close(None).await;
}

/// A laptop MCP server for the host, as an adapter: start it (a previous instance of it is
/// killed first) and accept the channel, or refuse naming why it could not start; then its
/// stdout lines go to the host and the host's lines to its stdin. When its stdout ends (it
/// exited) the laptop closes its direction with the exit status and stderr tail; when the
/// host closes or cancels the channel, the server's stdin is closed, which ends it.
pub(crate) fn open_laptop_mcp(
    host: Option<&Arc<crate::mcp_host::McpHost>>,
    server: &str,
    offer: Offer,
) {
    let started = host
        .ok_or_else(|| format!("no laptop MCP servers are configured (asked for {server})"))
        .and_then(|host| host.open(server).map_err(|e| e.to_string()));
    let chans = match started {
        Ok(chans) => chans,
        Err(e) => {
            tokio::spawn(offer.refuse(RpcError::new(ErrorCode::Mcp, e)));
            return;
        }
    };
    let server = server.to_string();
    tokio::spawn(async move {
        let Channel { tx, mut rx } = match offer
            .accept(ChannelAccepted::Mcp, reasonix_forward::tunnel::WINDOW)
            .await
        {
            Ok(channel) => channel,
            Err(e) => {
                tracing::warn!(server, "laptop MCP channel not accepted: {e}");
                return;
            }
        };
        let to_server = chans.to_server;
        // The host's lines into the server's stdin; the receiver is handed back so it lives
        // until the server's own lines are done (dropping it early would cancel them).
        let inbound = tokio::spawn(async move {
            let end = recv_lines(&mut rx, &to_server).await;
            (rx, end)
        });
        let mut from = chans.from_server;
        match send_lines(&tx, &mut from).await {
            Ok(()) => {
                let reason = format!(
                    "{}; stderr: {}",
                    chans.diagnostics.exit().unwrap_or_else(|| "closed".into()),
                    chans.diagnostics.stderr_tail()
                );
                tx.close(Some(reason)).await;
            }
            Err(e) => tracing::info!(server, "MCP lines to the host stopped: {e}"),
        }
        match inbound.await {
            Ok((_rx, LinesEnd::Channel(ChannelEnd::Closed(_)) | LinesEnd::ConsumerGone)) => {}
            Ok((_rx, end)) => tracing::info!(server, "host ended the laptop MCP channel: {end:?}"),
            Err(e) => tracing::warn!(server, "laptop MCP channel task failed: {e}"),
        }
    });
}
