//! The workspace's sessions: listing them (open ones from memory, the others from their
//! journals), loading one from its journal, deleting into the trash and listing the trash.

use std::collections::HashMap;
use std::sync::Arc;

use reasonix_forward::proto::{ErrorCode, Response, RpcError};
use reasonix_forward::sync::LockExt;

use super::conn::Conn;
use super::Daemon;
use crate::session::Session;

impl Daemon {
    pub(super) fn list_session_ids(&self) -> Vec<(String, std::time::SystemTime)> {
        let mut out = Vec::new();
        if let Ok(rd) = std::fs::read_dir(&self.paths.sessions_dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(id) = name.strip_suffix(".jsonl") {
                    let mtime = e
                        .metadata()
                        .and_then(|m| m.modified())
                        .unwrap_or(std::time::UNIX_EPOCH);
                    out.push((id.to_string(), mtime));
                }
            }
        }
        reasonix_forward::sort::sort_by(&mut out, |a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
        out
    }

    /// Every session of the workspace, newest first: open ones from memory, the others from
    /// their journal's head and tail (nothing is loaded or kept).
    pub(super) async fn list_sessions(&self) -> Vec<reasonix_forward::proto::SessionInfo> {
        let ids = self.list_session_ids();
        let open: HashMap<String, Arc<Session>> = self.sessions.lock_or_recover().clone();
        let dir = self.paths.sessions_dir.clone();
        let mut out = Vec::with_capacity(ids.len());
        let mut closed = Vec::new();
        let catalog = crate::catalog::Catalog::new(&self.paths.sessions_dir);
        for (id, _) in ids {
            match open.get(&id) {
                Some(s) => {
                    let mut info = s.info();
                    (info.driver_attached, info.clients) = self.attachment(s);
                    let keepers = s.standby_live_count();
                    info.keeper_attached = keepers > 0;
                    // A keeper is no client a person uses: not counted in the listing.
                    info.clients = info.clients.saturating_sub(keepers);
                    if let Some(t) = catalog.title(&id) {
                        info.title = t;
                    }
                    out.push(Some(info));
                }
                None => {
                    closed.push((out.len(), id));
                    out.push(None);
                }
            }
        }
        let catalog = catalog.clone();
        let read = tokio::task::spawn_blocking(move || {
            closed
                .into_iter()
                .filter_map(|(slot, id)| {
                    match crate::journal::summarize(&dir.join(format!("{id}.jsonl"))) {
                        Ok(sum) => Some((
                            slot,
                            reasonix_forward::proto::SessionInfo {
                                title: catalog.title(&id).unwrap_or(sum.title),
                                id,
                                created: sum.created,
                                turns: sum.turns,
                                last_seq: sum.last_seq,
                                state: reasonix_forward::proto::TurnState::Idle,
                                last_activity: sum.last_ts,
                                driver_attached: false,
                                clients: 0,
                                goal: None,
                                keeper_attached: false,
                            },
                        )),
                        Err(e) => {
                            tracing::warn!("session {id} left out of the list: {e}");
                            None
                        }
                    }
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        for (slot, info) in read {
            out[slot] = Some(info);
        }
        out.into_iter().flatten().collect()
    }

    /// Whether a client with a live link drives `session`, and how many links have it open.
    fn attachment(&self, session: &Arc<Session>) -> (bool, u32) {
        let driver = session.driver_id();
        let links: Vec<Arc<Conn>> = self.links.lock_or_recover().values().cloned().collect();
        let mut driver_live = false;
        let mut clients = 0;
        for c in links {
            let has = c
                .session
                .lock_or_recover()
                .as_ref()
                .map(|(s, _)| Arc::ptr_eq(s, session))
                .unwrap_or(false);
            // A link in its reconnect grace (the client exited or lost the network) does not
            // count: a `run` that just ended must not block a delete.
            if has && c.link.is_connected() {
                clients += 1;
                if Some(c.id) == driver {
                    driver_live = true;
                }
            }
        }
        (driver_live, clients)
    }

    /// `DeleteSession`: refused while a turn runs (the user cancels it first: a delete never
    /// stops work by itself) and while any client has the session open (it would keep
    /// writing a journal that is gone from the listing).
    pub(super) async fn delete_session(&self, id: String) -> Result<Response, RpcError> {
        crate::catalog::check_id(&id)
            .map_err(|e| RpcError::new(ErrorCode::BadRequest, e.to_string()))?;
        // No load of any session runs meanwhile (it would read a journal being moved).
        let _loading = self.loading.lock().await;
        // Held across the check and the move: an open of this id waits for it (the open
        // then finds no journal and answers `not_found`).
        let mut sessions = self.sessions.lock_or_recover();
        if let Some(s) = sessions.get(&id).cloned() {
            let state = s.state();
            if reasonix_forward::workspaces::state_busy(state) || s.jobs_running() {
                return Err(RpcError::new(
                    ErrorCode::Busy,
                    format!("session {id} is running a turn or a background job ({state:?}); cancel it first (Esc in the TUI), then delete it"),
                ));
            }
            let (_, clients) = self.attachment(&s);
            if clients > 0 {
                return Err(RpcError::new(
                    ErrorCode::Attached,
                    format!("session {id} is open in {clients} client(s); switch them to another session or close them, then delete it"),
                ));
            }
            // Links in their grace let go of it; one that resumes later finds no session
            // open and opens another.
            for c in self.links.lock_or_recover().values() {
                let mut open = c.session.lock_or_recover();
                if open.as_ref().is_some_and(|(x, _)| Arc::ptr_eq(x, &s)) {
                    *open = None;
                    s.release_driver(c.id);
                }
            }
            sessions.remove(&id);
        }
        let catalog = crate::catalog::Catalog::new(&self.paths.sessions_dir);
        let result = catalog.trash(&id, crate::catalog::now_secs());
        drop(sessions);
        result.map(|()| Response::Ok).map_err(catalog_error)
    }

    /// `ListTrash`: purges what is older than the keep period first, then lists the rest
    /// from each journal's head and tail.
    pub(super) async fn list_trash(&self) -> Result<Response, RpcError> {
        use reasonix_forward::proto::{SessionInfo, TrashedSession, TurnState, TRASH_KEEP_DAYS};
        let catalog = crate::catalog::Catalog::new(&self.paths.sessions_dir);
        let sessions = tokio::task::spawn_blocking(move || {
            let now = crate::catalog::now_secs();
            for id in catalog.expire(now) {
                tracing::info!("session {id} purged from the trash after {TRASH_KEEP_DAYS} days");
            }
            catalog
                .list_trash()
                .into_iter()
                .filter_map(|e| {
                    let sum = match crate::journal::summarize(&e.journal) {
                        Ok(sum) => sum,
                        Err(err) => {
                            tracing::warn!("trashed session {} left out: {err}", e.id);
                            return None;
                        }
                    };
                    let rfc = crate::clock::rfc3339_secs;
                    Some(TrashedSession {
                        info: SessionInfo {
                            title: catalog.trashed_title(&e.id).unwrap_or(sum.title),
                            id: e.id,
                            created: sum.created,
                            turns: sum.turns,
                            last_seq: sum.last_seq,
                            state: TurnState::Idle,
                            last_activity: sum.last_ts,
                            driver_attached: false,
                            clients: 0,
                            goal: None,
                            keeper_attached: false,
                        },
                        deleted: rfc(e.deleted),
                        purge_after: rfc(e.deleted + TRASH_KEEP_DAYS * 86_400),
                    })
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| RpcError::new(ErrorCode::Internal, format!("trash listing failed: {e}")))?;
        Ok(Response::Trash { sessions })
    }

    /// The session `id`, loaded from its journal if it is not open yet. Reading a journal
    /// (and repairing what a crash left) is file I/O on a blocking thread, not a runtime
    /// worker. A session brought into memory now gets the workspace MCP servers as declared
    /// now; one already in memory keeps its own.
    pub(super) async fn load_session(
        &self,
        id: &str,
    ) -> Result<(Arc<Session>, Option<String>), RpcError> {
        if let Some(s) = self.sessions.lock_or_recover().get(id) {
            return Ok((Arc::clone(s), None));
        }
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(RpcError::new(
                ErrorCode::BadRequest,
                format!("invalid session id {id:?}"),
            ));
        }
        let _loading = self.loading.lock().await;
        let snapshot = self.runtime.mcp.refresh().await;
        // Another link may have loaded it while this one waited.
        if let Some(s) = self.sessions.lock_or_recover().get(id) {
            return Ok((Arc::clone(s), None));
        }
        let path = self.paths.sessions_dir.join(format!("{id}.jsonl"));
        let (runtime, workspace) = (Arc::clone(&self.runtime), self.paths.workspace.clone());
        let owned_id = id.to_string();
        // What was wrong with the workspace's MCP declarations reaches the user with the
        // session's opening notice, not only the daemon's log (over SSH the laptop never
        // reads the host's files itself).
        let mcp_notes: Vec<String> = snapshot
            .warnings
            .iter()
            .map(|w| format!("workspace MCP servers: {w}"))
            .collect();
        let (session, notice) = tokio::task::spawn_blocking(move || {
            Session::open(&owned_id, &path, runtime, &workspace, snapshot.manager)
        })
        .await
        .map_err(|e| {
            RpcError::new(
                ErrorCode::Journal,
                format!("loading the session failed: {e}"),
            )
        })?
        .map_err(|e| RpcError::new(ErrorCode::Journal, e.to_string()))?;
        self.sessions
            .lock_or_recover()
            .insert(id.to_string(), Arc::clone(&session));
        let notice: Vec<String> = notice.into_iter().chain(mcp_notes).collect();
        Ok((session, (!notice.is_empty()).then(|| notice.join("\n"))))
    }
}

pub(super) fn catalog_error(e: crate::catalog::CatalogError) -> RpcError {
    use crate::catalog::CatalogError;
    let code = match &e {
        CatalogError::BadId(_) => ErrorCode::BadRequest,
        CatalogError::NotFound(_) => ErrorCode::NotFound,
        CatalogError::Exists(_) => ErrorCode::Exists,
        CatalogError::Io { .. } => ErrorCode::Io,
    };
    RpcError::new(code, e.to_string())
}
