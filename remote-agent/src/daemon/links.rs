//! A client's transport: the handshake, resuming its link (or making a new one), the grace
//! a cut link is kept for, and the loop serving what arrives on a link (requests, and the
//! terminal channels the client opens; the channels' own traffic never passes here).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use reasonix_forward::channel::{ChannelOpen, IncomingChannel};
use reasonix_forward::handshake::{server_accept, server_welcome};
use reasonix_forward::link::Link;
use reasonix_forward::proto::{Welcome, PROTOCOL_VERSION};
use reasonix_forward::rpc::{Incoming, Rpc};
use reasonix_forward::sync::LockExt;
use tokio::net::UnixStream;
use tokio::sync::mpsc;

use super::conn::Conn;
use super::Daemon;
use crate::content::TransientContent;

impl Daemon {
    pub(super) async fn handle_transport(
        self: Arc<Self>,
        stream: UnixStream,
    ) -> Result<(), String> {
        let (reader, mut writer) = stream.into_split();
        let (reader, hello) = server_accept(reader, &mut writer, reasonix_forward::build_id())
            .await
            .map_err(|e| e.to_string())?;
        // `server_accept` has refused another protocol (and told the client) already.
        let existing = hello
            .resume
            .as_ref()
            .and_then(|r| self.links.lock_or_recover().get(&r.link_id).cloned());
        let (conn, peer_received, resumed, refused) = match existing {
            Some(conn) => {
                let received = hello.resume.as_ref().map(|r| r.received).unwrap_or(0);
                (conn, received, true, None)
            }
            None => {
                let conn = self.new_conn();
                let refused = hello.resume.as_ref().map(|r| {
                    format!("link {} is unknown to this daemon (it restarted or the link expired); catching up from the journal", r.link_id)
                });
                (conn, 0, false, refused)
            }
        };
        let welcome = Welcome {
            protocol: PROTOCOL_VERSION,
            build_id: reasonix_forward::build_id().to_string(),
            link_id: conn.link_id.clone(),
            resumed,
            received: conn.link.received(),
            resume_refused: refused,
            bytes_frames: true,
            early_data: true,
        };
        if hello.bytes_frames {
            conn.link.enable_bytes_frames();
        }
        if hello.early_data {
            conn.link.enable_early_data();
        }
        server_welcome(&mut writer, &welcome)
            .await
            .map_err(|e| e.to_string())?;
        let generation = conn.generation.fetch_add(1, Ordering::SeqCst) + 1;
        tracing::info!(link = %conn.link_id, resumed, "transport attached");
        if resumed {
            self.keeper_transport_changed(&conn);
        }
        let err = conn.link.run_transport(reader, writer, peer_received).await;
        tracing::info!(link = %conn.link_id, "transport ended: {err}");
        self.touch();
        self.keeper_transport_changed(&conn);
        // Keep the link for a resume; close it if no new transport came within the grace.
        // A link that holds nothing a resume would save (a client that only said hello or
        // asked for a status) is kept for a thirtieth of it (60 s by default).
        let grace = if conn.holds_nothing() {
            self.config.link_grace / 30
        } else {
            self.config.link_grace
        };
        let me = Arc::clone(&self);
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            if conn.generation.load(Ordering::SeqCst) == generation && !conn.link.is_connected() {
                me.drop_conn(&conn);
            }
        });
        Ok(())
    }

    fn drop_conn(&self, conn: &Arc<Conn>) {
        tracing::info!(link = %conn.link_id, "link expired");
        self.links.lock_or_recover().remove(&conn.link_id);
        self.runtime.mcp.laptop_tokens().detach(conn.id);
        conn.link.close();
        // Every channel of the link (provider streams, laptop MCP servers) ends with it.
        if let Some((session, _)) = conn.session.lock_or_recover().take() {
            session.release_driver(conn.id);
        }
    }

    fn new_conn(self: &Arc<Self>) -> Arc<Conn> {
        let (link, inbound) = Link::new(self.config.link.clone());
        let (rpc, incoming) = Rpc::new(
            link.clone(),
            inbound,
            reasonix_forward::channel::Side::Server,
        );
        let id = self.next_conn.fetch_add(1, Ordering::SeqCst);
        let link_id = format!("{:016x}{:08x}", rand::random::<u64>(), id);
        let conn = Arc::new(Conn {
            id,
            link_id: link_id.clone(),
            rpc: rpc.clone(),
            link,
            transient: TransientContent::default(),
            sent_messages: Default::default(),
            session: Mutex::new(None),
            headless: Mutex::new(false),
            settings: Mutex::new(None),
            hooks: Mutex::default(),
            generation: AtomicU64::new(0),
            opens: AtomicU64::new(0),
            watches_ports: Default::default(),
            agent_offer: Default::default(),
        });
        self.links
            .lock_or_recover()
            .insert(link_id, Arc::clone(&conn));
        self.runtime.mcp.laptop_tokens().attach(id, rpc);
        let me = Arc::clone(self);
        let c = Arc::clone(&conn);
        tokio::spawn(async move { me.serve_conn(c, incoming).await });
        conn
    }

    async fn serve_conn(self: Arc<Self>, conn: Arc<Conn>, mut incoming: mpsc::Receiver<Incoming>) {
        while let Some(msg) = incoming.recv().await {
            match msg {
                Incoming::Notify(other) => {
                    tracing::debug!("ignored notification from client: {other:?}");
                }
                Incoming::Channel(IncomingChannel {
                    open: ChannelOpen::Pty(open),
                    offer,
                }) => {
                    tokio::spawn(crate::pty::attach::serve(
                        Arc::clone(&self.terminals),
                        open,
                        offer,
                        conn.link.clone(),
                    ));
                }
                Incoming::Channel(IncomingChannel {
                    open: ChannelOpen::Port(open),
                    offer,
                }) => {
                    tokio::spawn(crate::ports::serve(open, offer));
                }
                Incoming::Channel(IncomingChannel {
                    open: ChannelOpen::Copy(open),
                    offer,
                }) => {
                    let (ws, base) = (self.paths.workspace.clone(), self.runtime.tool_ctx.clone());
                    tokio::spawn(crate::copy::serve(open, offer, ws, base));
                }
                Incoming::Channel(IncomingChannel { open, offer }) => {
                    let refusal = reasonix_forward::proto::RpcError::new(
                        reasonix_forward::proto::ErrorCode::BadRequest,
                        format!("the daemon does not serve {} channels", open.kind()),
                    );
                    tokio::spawn(offer.refuse(refusal));
                }
                Incoming::Request { id, body } => {
                    let me = Arc::clone(&self);
                    let c = Arc::clone(&conn);
                    tokio::spawn(async move {
                        let result = me.handle_request(&c, body).await;
                        if let Err(e) = c.rpc.respond(id, result).await {
                            tracing::warn!("could not answer request {id}: {e}");
                        }
                    });
                }
            }
        }
    }
}
