//! A laptop offering its ssh-agent (#36 §2): the daemon serves the workspace's stable
//! `SSH_AUTH_SOCK` from the first offer on, and routes each request to the laptop that
//! drives now (see `crate::agent_sock`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use reasonix_forward::agent::{AgentForwarding, AgentOffer};
use reasonix_forward::proto::{ClientRole, ErrorCode, Response, RpcError};
use reasonix_forward::sync::LockExt;

use super::conn::Conn;
use super::Daemon;
use crate::agent_sock::{AgentSocket, Route};

/// Orders offers: the latest one wins among equals.
static OFFERS: AtomicU64 = AtomicU64::new(0);

impl Daemon {
    pub(super) fn forward_agent(
        self: &Arc<Self>,
        conn: &Arc<Conn>,
        offer: AgentOffer,
    ) -> Result<Response, RpcError> {
        let sock = match self.agent.get() {
            Some(s) => Arc::clone(s),
            None => {
                let weak = Arc::downgrade(self);
                let path = crate::agent_sock::path_for(&self.paths.run_dir, &self.paths.key);
                let made =
                    AgentSocket::serve(path, Arc::new(move || pick(&weak))).map_err(|e| {
                        RpcError::new(
                            ErrorCode::Io,
                            format!("the forwarded ssh-agent socket could not be made: {e}"),
                        )
                    })?;
                Arc::clone(self.agent.get_or_init(|| made))
            }
        };
        conn.agent_offer
            .store(OFFERS.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
        tracing::info!(link = %conn.link_id, laptop_agent = %offer.laptop_agent, "the laptop forwards its ssh-agent");
        Ok(Response::AgentForwarding(AgentForwarding {
            socket: sock.path().display().to_string(),
        }))
    }
}

/// The link agent requests go to now: of the attached links whose laptop offered its agent,
/// one that drives a session, else the latest offer.
fn pick(daemon: &Weak<Daemon>) -> Option<Route> {
    let daemon = daemon.upgrade()?;
    let links = daemon.links.lock_or_recover();
    links
        .values()
        .filter(|c| c.agent_offer.load(Ordering::SeqCst) > 0 && c.link.is_connected())
        .max_by_key(|c| {
            let drives = matches!(
                c.session.lock_or_recover().as_ref(),
                Some((s, ClientRole::Driver)) if s.driver_id() == Some(c.id)
            );
            (drives, c.agent_offer.load(Ordering::SeqCst))
        })
        .map(|c| Route {
            conn: c.id,
            rpc: c.rpc.clone(),
        })
}

/// The type of [`Conn`]'s offer order.
pub(super) type OfferSeq = AtomicU64;
