//! `web_fetch` reaches the laptop through whichever client drives the session, waiting a
//! while for one when none is attached (like laptop MCP servers).

use std::sync::Arc;
use std::time::Duration;

use reasonix_forward::proto::WebFetchRequest;
use tokio::sync::watch;

use super::DriverLink;
use crate::tools::web_fetch::{FetchFuture, WebGateway};

/// How long a fetch waits for a laptop to attach.
const WAIT_FOR_LAPTOP: Duration = Duration::from_secs(60);

/// The session's driver, as `web_fetch` sees it.
pub(super) struct SessionWeb(pub(super) watch::Receiver<Option<Arc<dyn DriverLink>>>);

impl WebGateway for SessionWeb {
    fn fetch(&self, request: WebFetchRequest) -> FetchFuture {
        let mut rx = self.0.clone();
        Box::pin(async move {
            let driver = tokio::time::timeout(WAIT_FOR_LAPTOP, async {
                loop {
                    if let Some(d) = rx.borrow_and_update().clone() {
                        return Some(d);
                    }
                    if rx.changed().await.is_err() {
                        return None;
                    }
                }
            })
            .await
            .ok()
            .flatten()
            .ok_or(
                "no laptop is attached to fetch with (pages are fetched with the laptop's network)",
            )?;
            driver.web_fetch(request).await
        })
    }
}
