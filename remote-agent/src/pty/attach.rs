//! The terminals of one client link: requests, keystrokes and one output follower per
//! attached terminal.
//!
//! A follower reads the terminal's output by offset and sends it as notifications on the
//! link. The link's replay buffer carries it across transport drops (nothing lost or
//! doubled); when the link's buffer is full the follower waits, and if the terminal's ring
//! moves past it meanwhile it sends the current screen and goes on from there.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use reasonix_forward::proto::{
    ErrorCode, PtyBytes, PtyNotification, PtyRequest, PtyResponse, Response, RpcError,
};
use reasonix_forward::pty::OUTPUT_CHUNK_MAX;
use reasonix_forward::rpc::Rpc;
use reasonix_forward::sync::LockExt;
use tokio::task::AbortHandle;

use super::{Next, PtyError, Start, Terminal, Terminals};

/// Terminals attached to one link.
pub struct LinkTerminals {
    terminals: Arc<Terminals>,
    rpc: Rpc,
    /// Unique per link, so a terminal can tell its followers apart.
    key: u64,
    followers: Mutex<HashMap<u64, (AbortHandle, Arc<Terminal>)>>,
}

/// A terminal to follow after the answer went out, and where to start.
type Follow = (Arc<Terminal>, Start);

static NEXT_KEY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl From<PtyError> for RpcError {
    fn from(e: PtyError) -> RpcError {
        let code = match &e {
            PtyError::Spawn { .. } => ErrorCode::Pty,
            PtyError::NotFound(_) => ErrorCode::NotFound,
            PtyError::BadSize { .. } => ErrorCode::BadRequest,
        };
        RpcError::new(code, e.to_string())
    }
}

impl LinkTerminals {
    /// Nothing attached yet.
    pub fn new(terminals: Arc<Terminals>, rpc: Rpc) -> Self {
        Self {
            terminals,
            rpc,
            key: NEXT_KEY.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            followers: Mutex::new(HashMap::new()),
        }
    }

    /// Whether this link follows no terminal.
    pub fn is_empty(&self) -> bool {
        self.followers.lock_or_recover().is_empty()
    }

    /// Serve request `id` and answer it on the link. An attach's output is sent only after
    /// the answer, so the client knows the terminal before its bytes arrive.
    pub async fn request(&self, id: u64, req: PtyRequest) {
        let (result, follow) = self.handle(req);
        if let Err(e) = self.rpc.respond(id, result.map(Response::Pty)).await {
            tracing::warn!("could not answer terminal request {id}: {e}");
            return;
        }
        if let Some((terminal, start)) = follow {
            self.follow(terminal, start);
        }
    }

    fn handle(&self, req: PtyRequest) -> (Result<PtyResponse, RpcError>, Option<Follow>) {
        match req {
            PtyRequest::Open { size, term } => match self.terminals.open(size, &term) {
                Ok(t) => {
                    let info = t.info();
                    (Ok(PtyResponse::Attached(info)), Some((t, Start::Replay(0))))
                }
                Err(e) => (Err(e.into()), None),
            },
            PtyRequest::List => (
                Ok(PtyResponse::List {
                    ptys: self.terminals.list(),
                }),
                None,
            ),
            PtyRequest::Attach { pty, have, size } => {
                let t = match self.terminals.get(pty) {
                    Ok(t) => t,
                    Err(e) => return (Err(e.into()), None),
                };
                if let Err(e) = t.resize(size) {
                    return (Err(e.into()), None);
                }
                let start = t.start(have);
                (Ok(PtyResponse::Attached(t.info())), Some((t, start)))
            }
            PtyRequest::Detach { pty } => {
                self.detach(pty);
                (Ok(PtyResponse::Done), None)
            }
            PtyRequest::Close { pty } => {
                self.detach(pty);
                match self.terminals.close(pty) {
                    Ok(()) => (Ok(PtyResponse::Done), None),
                    Err(e) => (Err(e.into()), None),
                }
            }
        }
    }

    /// Keystrokes and sizes from the client.
    pub fn notify(&self, n: PtyNotification) {
        match n {
            PtyNotification::Input { pty, data } => match self.terminals.get(pty) {
                Ok(t) => t.write(data.0),
                Err(e) => tracing::debug!("input dropped: {e}"),
            },
            PtyNotification::Resize { pty, size } => {
                if let Err(e) = self.terminals.get(pty).and_then(|t| t.resize(size)) {
                    tracing::debug!("resize ignored: {e}");
                }
            }
            PtyNotification::Output { .. }
            | PtyNotification::Screen { .. }
            | PtyNotification::Exited { .. } => {
                tracing::debug!("ignored a daemon-side terminal notification from a client");
            }
        }
    }

    fn follow(&self, terminal: Arc<Terminal>, start: Start) {
        let rpc = self.rpc.clone();
        let t = Arc::clone(&terminal);
        let task = tokio::spawn(async move { follow(rpc, t, start).await });
        terminal.client_delta(self.key, Some(self.rpc.link().clone()));
        let old = self
            .followers
            .lock_or_recover()
            .insert(terminal.id, (task.abort_handle(), terminal));
        if let Some((task, _)) = old {
            task.abort();
        }
    }

    /// Stop following one terminal.
    pub fn detach(&self, pty: u64) {
        if let Some((task, t)) = self.followers.lock_or_recover().remove(&pty) {
            task.abort();
            t.client_delta(self.key, None);
        }
    }

    /// Stop following every terminal (the link expired or closed); the shells keep running.
    pub fn detach_all(&self) {
        for (_, (task, t)) in self.followers.lock_or_recover().drain() {
            task.abort();
            t.client_delta(self.key, None);
        }
    }
}

impl Drop for LinkTerminals {
    fn drop(&mut self) {
        self.detach_all();
    }
}

async fn follow(rpc: Rpc, t: Arc<Terminal>, start: Start) {
    let pty = t.id;
    let mut watch = t.watch();
    let mut cursor = match start {
        Start::Replay(from) => from,
        Start::Screen { offset, size, data } => {
            let n = PtyNotification::Screen {
                pty,
                offset,
                size,
                data: PtyBytes(data),
            };
            if rpc
                .notify(reasonix_forward::proto::Notification::Pty(n))
                .await
                .is_err()
            {
                return;
            }
            offset
        }
    };
    loop {
        // Marked seen before looking, so output that lands after the look wakes the wait.
        watch.borrow_and_update();
        let n = match t.next(cursor, OUTPUT_CHUNK_MAX) {
            Next::Bytes { offset, data } => {
                cursor = offset + data.len() as u64;
                PtyNotification::Output {
                    pty,
                    offset,
                    data: PtyBytes(data),
                }
            }
            Next::Screen { offset, size, data } => {
                tracing::info!(
                    pty,
                    behind = offset - cursor,
                    "follower fell behind; sending the screen"
                );
                cursor = offset;
                PtyNotification::Screen {
                    pty,
                    offset,
                    size,
                    data: PtyBytes(data),
                }
            }
            Next::Exited(status) => {
                let n = PtyNotification::Exited { pty, status };
                let _ = rpc
                    .notify(reasonix_forward::proto::Notification::Pty(n))
                    .await;
                return;
            }
            Next::Wait => {
                if watch.changed().await.is_err() {
                    return;
                }
                continue;
            }
        };
        // Waits while the link's replay buffer is full (backpressure); fails once it closed.
        if rpc
            .notify(reasonix_forward::proto::Notification::Pty(n))
            .await
            .is_err()
        {
            return;
        }
    }
}
