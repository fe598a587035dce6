//! Where a person's memory operation runs: a store on this laptop (the global store; the
//! project store of a local workspace) or the host's project store through the link
//! ([`Request::Memory`]). `/memory`, `# note` and `reasonix memory --ssh` go through here.

use reasonix_forward::memory::fact::{new_id, now_rfc3339};
use reasonix_forward::memory::ops::{apply, MemoryOp, MemoryReply};
use reasonix_forward::memory::{Fact, FactType, Scope, Store};
use reasonix_forward::proto::{MemoryFile, Request, Response};
use reasonix_forward::rpc::CallError;

use crate::client::Client;

/// A store to run [`MemoryOp`]s on.
#[derive(Clone)]
pub enum Access {
    /// A store directory on this machine.
    Local(Store),
    /// The project store of the workspace the client is connected to.
    Remote(Client),
}

impl Access {
    /// Runs `op`; the error is the message to show.
    pub async fn run(&self, op: MemoryOp) -> Result<MemoryReply, String> {
        match self {
            Access::Local(store) => {
                let store = store.clone();
                tokio::task::spawn_blocking(move || apply(&store, &op))
                    .await
                    .map_err(|e| format!("memory operation failed: {e}"))?
            }
            Access::Remote(client) => match client.request(Request::Memory { op }).await {
                Ok(Response::Memory(r)) => Ok(r),
                Ok(other) => Err(format!("unexpected answer from the host: {other:?}")),
                Err(CallError::Remote(e)) => Err(e.message),
                Err(CallError::Link(e)) => Err(format!(
                    "the link dropped before the host answered ({e}); retry"
                )),
            },
        }
    }
}

/// A new fact a person wrote (`# note`, `reasonix memory add`).
pub fn new_fact(body: &str, kind: FactType, scope: Scope) -> Fact {
    let now = now_rfc3339();
    Fact {
        id: new_id(body),
        revision: 1,
        kind,
        scope,
        keywords: Vec::new(),
        subject: None,
        created: now.clone(),
        updated: now,
        session: None,
        pinned: false,
        expires: None,
        body: body.trim().to_string(),
    }
}

/// The file of `f` as sent in a [`MemoryOp`].
pub fn file_of(f: &Fact) -> MemoryFile {
    MemoryFile {
        name: format!("{}.md", f.id),
        text: f.to_markdown(),
    }
}
