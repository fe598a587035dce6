//! The laptop's goal keeper on the daemon side (issue 38 §3): a link that opened its session
//! with [`reasonix_forward::proto::OpenSession::keeper`] becomes the session's standby
//! gateway ([`crate::session::Session::add_standby`]), never its driver. When the driver's
//! client is gone (killed, its terminal closed) while a model reply streams through it, the
//! reply would wait for that link's resume until the link expires (30 minutes by default):
//! once the keeper's link is up and the driver's has stayed down for a dead-after interval,
//! the driver's streams are ended so the step re-issues its request through the keeper
//! (nothing of a cut stream was acted on).

use std::sync::Arc;

use reasonix_forward::sync::LockExt;

use super::conn::{Conn, ConnLink};
use super::Daemon;
use crate::session::Session;

impl Daemon {
    /// Make `conn` the keeper of `session`.
    pub(super) fn make_keeper(self: &Arc<Self>, conn: &Arc<Conn>, session: &Arc<Session>) {
        session.add_standby(Arc::new(ConnLink(Arc::clone(conn))));
        tracing::info!(session = %session.id, conn = conn.id, "goal keeper attached");
        self.keeper_check_later(session);
    }

    /// After a transport of `conn` came or went: if it is a session's driver or keeper, check
    /// a little later whether the keeper should stand in for a driver that is gone.
    pub(super) fn keeper_transport_changed(self: &Arc<Self>, conn: &Arc<Conn>) {
        let session = conn
            .session
            .lock_or_recover()
            .as_ref()
            .map(|(s, _)| Arc::clone(s));
        let Some(session) = session else { return };
        if session.driver_id() == Some(conn.id) || session.is_standby(conn.id) {
            self.keeper_check_later(&session);
        }
    }

    /// After one dead-after interval (a network drop cuts the keeper's link too, and is
    /// noticed within it): a driver whose link is still down while the keeper's is up has
    /// its provider streams ended, so the step goes on through the keeper.
    fn keeper_check_later(self: &Arc<Self>, session: &Arc<Session>) {
        let me = Arc::clone(self);
        let session = Arc::clone(session);
        let wait = self.config.link.dead_after;
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            let Some(driver) = session.driver_id() else {
                return;
            };
            if !session.standby_live() {
                return;
            }
            let conn = me
                .links
                .lock_or_recover()
                .values()
                .find(|c| c.id == driver)
                .cloned();
            let Some(conn) = conn else { return };
            if conn.link.is_connected() {
                return;
            }
            tracing::info!(session = %session.id, "the driver's link is down; the goal keeper carries on");
            conn.end_all_streams(
                "the driving client's link is down; the laptop's goal keeper carries the goal on",
            );
        });
    }
}
