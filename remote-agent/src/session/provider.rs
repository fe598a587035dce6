//! One provider stream as the turn runner sees it: a bounded channel of chunks that tells the
//! laptop to stop the HTTP stream when the runner lets go of it before the end.

use reasonix_forward::proto::ProviderChunk;
use tokio::sync::mpsc;

/// Chunks a provider stream may buffer between the link and the turn runner. When the runner
/// falls behind, the stream's channel stops granting credit, which pushes back on the laptop
/// (whose gateway keeps draining the HTTP stream into its own buffer).
pub const PROVIDER_CHUNK_BUFFER: usize = 1024;

/// Chunks of one provider stream. Dropping it before a `Done`/`Error` chunk (the turn was
/// cancelled, or gave up on this attempt) runs its cancel action, which asks the laptop to
/// close the provider connection so no more tokens are paid for.
pub struct ProviderStream {
    rx: mpsc::Receiver<ProviderChunk>,
    on_abandon: Option<Box<dyn FnOnce() + Send>>,
}

impl std::fmt::Debug for ProviderStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderStream")
            .field("open", &self.on_abandon.is_some())
            .finish()
    }
}

impl ProviderStream {
    /// A stream reading `rx`; `on_abandon` runs if it is dropped before its end.
    pub fn new(
        rx: mpsc::Receiver<ProviderChunk>,
        on_abandon: impl FnOnce() + Send + 'static,
    ) -> ProviderStream {
        ProviderStream {
            rx,
            on_abandon: Some(Box::new(on_abandon)),
        }
    }

    /// The next chunk; `None` when the gateway's link is gone for good (no cancel is sent
    /// then: there is nobody to tell).
    pub async fn recv(&mut self) -> Option<ProviderChunk> {
        let chunk = self.rx.recv().await;
        match &chunk {
            Some(ProviderChunk::Done { .. }) | Some(ProviderChunk::Error { .. }) | None => {
                self.on_abandon = None;
            }
            Some(ProviderChunk::Text { .. })
            | Some(ProviderChunk::Reasoning { .. })
            | Some(ProviderChunk::ToolCall(_))
            | Some(ProviderChunk::Replay { .. })
            | Some(ProviderChunk::Usage(_))
            | Some(ProviderChunk::Retrying(_)) => {}
        }
        chunk
    }
}

impl Drop for ProviderStream {
    fn drop(&mut self) {
        if let Some(f) = self.on_abandon.take() {
            f();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn abandoning_cancels_and_finishing_does_not() {
        let cancels = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel(4);
        let c = Arc::clone(&cancels);
        let mut s = ProviderStream::new(rx, move || {
            c.fetch_add(1, Ordering::SeqCst);
        });
        tx.send(ProviderChunk::Text { text: "a".into() })
            .await
            .expect("send");
        assert!(s.recv().await.is_some());
        drop(s);
        assert_eq!(cancels.load(Ordering::SeqCst), 1);

        let (tx, rx) = mpsc::channel(4);
        let c = Arc::clone(&cancels);
        let mut s = ProviderStream::new(rx, move || {
            c.fetch_add(1, Ordering::SeqCst);
        });
        tx.send(ProviderChunk::Done {
            finish_reason: None,
            model: "m".into(),
        })
        .await
        .expect("send");
        assert!(s.recv().await.is_some());
        drop(s);
        assert_eq!(
            cancels.load(Ordering::SeqCst),
            1,
            "a finished stream is not cancelled"
        );
    }
}
