//! Requests, responses and notifications multiplexed on one [`Link`].

use tokio::sync::mpsc;

use crate::link::{Link, LinkError};
use crate::proto::{Envelope, Notification, Request, Response, RpcError};

/// Something the peer sent that this side must handle.
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

/// The RPC layer over a link. Cheap to clone.
#[derive(Clone)]
pub struct Rpc {
    _private: (),
}

impl Rpc {
    /// Wrap a link and its inbound receiver. Requests and notifications from the peer come
    /// out of the returned receiver; responses are routed to the waiting callers.
    pub fn new(link: Link, inbound: mpsc::Receiver<Envelope>) -> (Rpc, mpsc::Receiver<Incoming>) {
        let _ = (link, inbound);
        todo!("Rpc::new")
    }

    /// Send a request and wait for its response. Survives transport drops (the link
    /// resumes underneath); fails only when the link is closed.
    pub async fn request(&self, body: Request) -> Result<Response, CallError> {
        let _ = body;
        todo!("Rpc::request")
    }

    /// Answer a request received as [`Incoming::Request`].
    pub async fn respond(&self, id: u64, result: Result<Response, RpcError>) -> Result<(), LinkError> {
        let _ = (id, result);
        todo!("Rpc::respond")
    }

    /// Send a notification.
    pub async fn notify(&self, body: Notification) -> Result<(), LinkError> {
        let _ = body;
        todo!("Rpc::notify")
    }

    /// The underlying link.
    pub fn link(&self) -> &Link {
        todo!("Rpc::link")
    }
}
