//! Opening a session on a link and who drives it: `OpenSession`, the driver and spectator
//! roles, takeover, and the policy a driver's turns run under.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use reasonix_forward::channel::ChannelKind;
use reasonix_forward::proto::{
    ClientRole, ErrorCode, Notification, OpenSession, Response, RpcError, SessionOpened,
    SessionSettings,
};
use reasonix_forward::sync::LockExt;

use super::conn::{Conn, ConnLink};
use super::Daemon;
use crate::session::Session;

impl Daemon {
    pub(super) fn driven_session(&self, conn: &Arc<Conn>) -> Result<Arc<Session>, RpcError> {
        match conn.session.lock_or_recover().as_ref() {
            Some((s, ClientRole::Driver)) if s.driver_id() == Some(conn.id) => Ok(Arc::clone(s)),
            Some(_) => Err(RpcError::new(
                ErrorCode::ReadOnly,
                "this client is attached read-only; another client drives the session (start with --takeover to take it over)",
            )),
            None => Err(no_session()),
        }
    }

    /// The driver's policy tightened by the workspace's project file as it is now.
    pub(super) fn enforce(
        &self,
        settings: &SessionSettings,
    ) -> Result<crate::project::Enforced, RpcError> {
        crate::project::enforce(
            &settings.policy,
            &self.paths.workspace,
            &self.runtime.tool_ctx,
        )
        .map_err(|e| RpcError::new(ErrorCode::BadConfig, e.to_string()))
    }

    pub(super) fn make_driver(
        &self,
        conn: &Arc<Conn>,
        session: &Arc<Session>,
        settings: Option<(SessionSettings, crate::project::Enforced)>,
    ) {
        let old_conn = session
            .driver_id()
            .filter(|id| *id != conn.id)
            .and_then(|old| {
                self.links
                    .lock_or_recover()
                    .values()
                    .find(|c| c.id == old)
                    .cloned()
            });
        if let Some(old_conn) = &old_conn {
            if let Some(entry) = old_conn.session.lock_or_recover().as_mut() {
                entry.1 = ClientRole::Spectator;
            }
        }
        if let Some(entry) = conn.session.lock_or_recover().as_mut() {
            entry.1 = ClientRole::Driver;
        }
        // The new driver is in place before anything of the old one is ended: a turn woken
        // by an ended call or stream sends its next request through the new driver, never
        // through the old one (where it would wait for that link to expire).
        session.set_driver(Some(Arc::new(ConnLink(Arc::clone(conn)))), settings);
        let Some(old_conn) = old_conn else { return };
        // Laptop MCP servers run on the driver's laptop: close the old driver's channels, so
        // a call in flight there ends as a tool error at once (never re-sent: it may have
        // run) instead of waiting for that link to expire, and the servers start again
        // through the new driver on next use.
        let reason = "the driving client changed; laptop MCP servers run on the driver's laptop and start again there on next use";
        old_conn
            .rpc
            .channels()
            .cancel_kind(ChannelKind::Mcp, reason);
        let rpc = old_conn.rpc.clone();
        tokio::spawn(async move {
            let _ = rpc
                .notify(Notification::Role {
                    role: ClientRole::Spectator,
                    reason: "another client took over this session; you are now read-only".into(),
                })
                .await;
        });
        // Provider streams waiting on a driver whose transport is gone (its client was
        // killed or lost the network) would only end when that link expires: end them now so
        // the step re-issues its request through the new driver (nothing of a cut stream was
        // acted on).
        if !old_conn.link.is_connected() {
            old_conn.end_all_streams("another client took over the session");
        }
    }

    pub(super) async fn open_session(
        self: &Arc<Self>,
        conn: &Arc<Conn>,
        open: OpenSession,
    ) -> Result<Response, RpcError> {
        let (id, created) = match (&open.session, open.new) {
            (Some(id), _) => (id.clone(), false),
            (None, true) => (new_session_id(), true),
            (None, false) => match self.list_session_ids().first() {
                Some((id, _)) => (id.clone(), false),
                None => (new_session_id(), true),
            },
        };
        if !created
            && open.session.is_some()
            && !self.sessions.lock_or_recover().contains_key(&id)
            && !self.paths.sessions_dir.join(format!("{id}.jsonl")).exists()
        {
            return Err(RpcError::new(
                ErrorCode::NotFound,
                format!("no session {id} in this workspace; list them with /sessions or `reasonix run --continue`"),
            ));
        }
        let (session, load_notice) = self.load_session(&id).await?;
        // Before anything changes: a project file that cannot be applied refuses the open.
        // The goal keeper never drives: nothing of its settings is enforced or kept.
        let mut enforced = if open.read_only || open.keeper {
            None
        } else {
            Some(self.enforce(&open.settings)?)
        };
        *conn.headless.lock_or_recover() = open.settings.headless;
        *conn.settings.lock_or_recover() = Some(open.settings.clone());
        *conn.hooks.lock_or_recover() = open.hooks.clone();
        // Before the link's session changes: the forwarders of earlier opens stop here.
        let this_open = conn.opens.fetch_add(1, Ordering::SeqCst) + 1;
        // Detach from a previously open session.
        if let Some((old, _)) = conn.session.lock_or_recover().take() {
            old.release_driver(conn.id);
        }
        *conn.session.lock_or_recover() = Some((Arc::clone(&session), ClientRole::Spectator));
        let current = session.driver_id();
        let current_live = current
            .and_then(|d| {
                self.links
                    .lock_or_recover()
                    .values()
                    .find(|c| c.id == d)
                    .cloned()
            })
            .map(|c| c.link.is_connected())
            .unwrap_or(false);
        let mut ignored = Vec::new();
        let role = if open.read_only
            || open.keeper
            || (current_live && current != Some(conn.id) && !open.takeover)
        {
            ClientRole::Spectator
        } else {
            let enforced = match enforced.take() {
                Some(e) => e,
                None => self.enforce(&open.settings)?,
            };
            ignored = enforced.ignored.clone();
            session.set_hook_settings(open.hooks.clone());
            self.make_driver(conn, &session, Some((open.settings.clone(), enforced)));
            ClientRole::Driver
        };
        if role == ClientRole::Driver {
            session.setup_laptop_mcp(&open.settings.laptop_mcp).await;
        }
        if open.keeper {
            self.make_keeper(conn, &session);
        }
        let (events, live, state, detail) = session.subscribe(open.since);
        let last_seq = session.last_seq();
        let notice: Vec<String> = [self.unclean.clone(), load_notice]
            .into_iter()
            .flatten()
            .collect();
        let notice = (!notice.is_empty()).then(|| notice.join("\n"));
        // Catch-up, then live events, on a task of their own. Events carry their seq, so a
        // client handles them whether they arrive before or after the SessionOpened answer.
        let forwarder =
            crate::forwarder::Forwarder::new(conn.rpc.clone(), Arc::clone(&session), open.since);
        let s = Arc::clone(&session);
        let my_conn = Arc::clone(conn);
        // Stop forwarding when this link opened a session again (another one, or this one
        // with a forwarder of its own) or closed it.
        let still_open = move || {
            my_conn.opens.load(Ordering::SeqCst) == this_open
                && my_conn
                    .session
                    .lock_or_recover()
                    .as_ref()
                    .map(|(x, _)| Arc::ptr_eq(x, &s))
                    .unwrap_or(false)
        };
        tokio::spawn(forwarder.run(events, live, state, detail, still_open));
        Ok(Response::SessionOpened(SessionOpened {
            session: id,
            created,
            role,
            last_seq,
            state: session.state(),
            notice,
            sandbox: session.sandbox_status(),
            policy: session.enforced_policy(),
            ignored,
        }))
    }
}

pub(super) fn no_session() -> RpcError {
    RpcError::new(ErrorCode::NoSession, "open a session first")
}

fn new_session_id() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    format!("{now:x}-{:06x}", rand::random::<u32>() & 0xff_ffff)
}
