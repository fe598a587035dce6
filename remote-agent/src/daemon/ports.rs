//! A link watching the workspace's listening ports (#36 §1): the list now, then a
//! [`Notification::Ports`] on every change until the link closes.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use reasonix_forward::proto::{Notification, Response};

use super::conn::Conn;
use super::Daemon;

impl Daemon {
    pub(super) async fn watch_ports(&self, conn: &Arc<Conn>) -> Response {
        let watch = Arc::clone(self.ports.get_or_init(crate::ports::PortWatch::start));
        let (ports, mut rx) = watch.watch().await;
        // A second watch on the same link answers the list without a second forwarder.
        if !conn.watches_ports.swap(true, Ordering::SeqCst) {
            let conn = Arc::clone(conn);
            tokio::spawn(async move {
                loop {
                    // Checked now and then, so a closed link's watch ends without a change.
                    let every = std::time::Duration::from_secs(5);
                    match tokio::time::timeout(every, rx.changed()).await {
                        Ok(Err(_)) => return,
                        Err(_) if conn.link.is_closed() => return,
                        Err(_) => continue,
                        Ok(Ok(())) if conn.link.is_closed() => return,
                        Ok(Ok(())) => {}
                    }
                    let ports = rx.borrow_and_update().clone();
                    if conn
                        .rpc
                        .notify(Notification::Ports { ports })
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
        Response::Ports { ports }
    }
}
