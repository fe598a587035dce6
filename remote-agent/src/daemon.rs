//! The per-(user, workspace) daemon: accepts clients on a private unix socket, resumes their
//! links, and serves sessions.

use std::collections::HashMap;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reasonix_forward::handshake::{server_accept, server_welcome};
use reasonix_forward::link::{Link, LinkConfig};
use reasonix_forward::proto::{
    ClientRole, DaemonStatus, DirEntry, McpServerInfo, Notification, OpenSession, ProviderChunk,
    ProviderRequest, Request, Response, RpcError, SessionOpened, SessionSettings, Welcome,
    PROTOCOL_VERSION,
};
use reasonix_forward::rpc::{Incoming, Rpc};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;

use crate::content::{ContentStore, TransientContent};
use crate::paths::HostPaths;
use crate::session::{Gateway, ProviderStream, Runtime, Session, PROVIDER_CHUNK_BUFFER};

/// Daemon tunables.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// Exit after this long with no client and no running work.
    pub idle_timeout: Duration,
    /// Keep a link whose transport died this long for a resume.
    pub link_grace: Duration,
    /// Link tunables.
    pub link: LinkConfig,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(30 * 60),
            link_grace: Duration::from_secs(30 * 60),
            link: LinkConfig::default(),
        }
    }
}

/// Errors that stop the daemon from starting.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Another daemon holds the lock.
    #[error("another reasonix-remote daemon already serves this workspace (lock {0})")]
    AlreadyRunning(String),
    /// I/O failure while setting up.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: io::Error,
    },
}

fn io_ctx(context: impl Into<String>) -> impl FnOnce(io::Error) -> DaemonError {
    let context = context.into();
    move |source| DaemonError::Io { context, source }
}

/// Previous-run marker stored next to the journals.
#[derive(serde::Serialize, serde::Deserialize)]
struct DaemonMarker {
    pid: u32,
    started: String,
    clean: bool,
}

/// The running daemon.
pub struct Daemon {
    paths: HostPaths,
    config: DaemonConfig,
    runtime: Arc<Runtime>,
    sandbox_status: String,
    started: Instant,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    links: Mutex<HashMap<String, Arc<Conn>>>,
    next_conn: AtomicU64,
    unclean: Option<String>,
    last_activity: Mutex<Instant>,
    /// The workspace's terminals; they outlive every link.
    terminals: Arc<crate::pty::Terminals>,
    /// Held while a session is loaded from its journal, so two links opening the same
    /// session at once load it once.
    loading: tokio::sync::Mutex<()>,
    /// The workspace's prompt history, shared by every client.
    history: Arc<crate::prompt_history::PromptHistory>,
}

mod conn;
use conn::{Conn, ConnGateway, McpRoute};

mod workbench;
use workbench::WorkbenchRequest;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Daemon {
    /// Prepare a daemon for `paths` (does not bind yet).
    pub fn new(
        paths: HostPaths,
        config: DaemonConfig,
        runtime: Arc<Runtime>,
        sandbox_status: String,
    ) -> Arc<Daemon> {
        let unclean = match std::fs::read(&paths.daemon_state)
            .ok()
            .and_then(|b| serde_json::from_slice::<DaemonMarker>(&b).ok())
        {
            Some(m) if !m.clean && !pid_alive(m.pid) => Some(format!(
                "the previous reasonix-remote daemon (pid {}, started {}) did not shut down cleanly: it was killed or crashed. If the host kills processes when you log out (systemd KillUserProcesses=yes), run `loginctl enable-linger $USER` on the host so sessions keep running.",
                m.pid, m.started
            )),
            _ => None,
        };
        let terminals = crate::pty::Terminals::new(paths.workspace.clone());
        let history = Arc::new(crate::prompt_history::PromptHistory::new(
            &paths.sessions_dir,
        ));
        Arc::new(Daemon {
            terminals,
            loading: tokio::sync::Mutex::new(()),
            history,
            paths,
            config,
            runtime,
            sandbox_status,
            started: Instant::now(),
            sessions: Mutex::new(HashMap::new()),
            links: Mutex::new(HashMap::new()),
            next_conn: AtomicU64::new(1),
            unclean,
            last_activity: Mutex::new(Instant::now()),
        })
    }

    fn write_marker(&self, clean: bool) {
        let marker = DaemonMarker {
            pid: std::process::id(),
            started: crate::journal::now_rfc3339(),
            clean,
        };
        if let Ok(b) = serde_json::to_vec(&marker) {
            let _ = std::fs::write(&self.paths.daemon_state, b);
        }
    }

    /// Bind the socket (holding the workspace lock) and serve until idle.
    pub async fn serve(self: Arc<Self>) -> Result<(), DaemonError> {
        let lock_file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.paths.lock)
            .map_err(io_ctx(format!("open lock {}", self.paths.lock.display())))?;
        // SAFETY: flock on a valid fd owned by lock_file, which lives until serve returns.
        let rc = unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&lock_file),
                libc::LOCK_EX | libc::LOCK_NB,
            )
        };
        if rc != 0 {
            return Err(DaemonError::AlreadyRunning(
                self.paths.lock.display().to_string(),
            ));
        }
        let _ = std::fs::remove_file(&self.paths.socket);
        let listener = UnixListener::bind(&self.paths.socket)
            .map_err(io_ctx(format!("bind {}", self.paths.socket.display())))?;
        std::fs::set_permissions(&self.paths.socket, std::fs::Permissions::from_mode(0o600))
            .map_err(io_ctx("chmod socket"))?;
        self.write_marker(false);
        // Deleted sessions older than the keep period go at each start (and at each trash
        // listing), so a daemon that rarely lists the trash still purges it.
        for id in crate::catalog::Catalog::new(&self.paths.sessions_dir)
            .expire(crate::catalog::now_secs())
        {
            tracing::info!("session {id} purged from the trash after its keep period");
        }
        tracing::info!(socket = %self.paths.socket.display(), "daemon listening");
        let my_uid = unsafe { libc::getuid() };
        let mut tick = tokio::time::interval(Duration::from_secs(1).min(self.config.idle_timeout));
        loop {
            tokio::select! {
                acc = listener.accept() => {
                    let (stream, _) = match acc {
                        Ok(s) => s,
                        Err(e) => { tracing::warn!("accept failed: {e}"); continue; }
                    };
                    match stream.peer_cred() {
                        Ok(cred) if cred.uid() == my_uid => {}
                        Ok(cred) => {
                            tracing::warn!("refused a client with uid {} (daemon uid {my_uid})", cred.uid());
                            continue;
                        }
                        Err(e) => { tracing::warn!("peer credentials unavailable: {e}"); continue; }
                    }
                    self.touch();
                    let me = Arc::clone(&self);
                    tokio::spawn(async move {
                        if let Err(e) = me.handle_transport(stream).await {
                            tracing::warn!("client transport ended: {e}");
                        }
                    });
                }
                _ = tick.tick() => {
                    if self.idle_expired() {
                        tracing::info!("idle timeout reached; exiting");
                        break;
                    }
                }
                _ = shutdown_signal() => {
                    tracing::info!("signal received; exiting");
                    break;
                }
            }
        }
        let _ = std::fs::remove_file(&self.paths.socket);
        self.terminals.close_all();
        // Durability point: every session's journal is written and fsynced before exit.
        let open: Vec<Arc<Session>> = lock(&self.sessions).values().cloned().collect();
        for session in open {
            if let Err(e) = session.flush_journal().await {
                tracing::error!("session {}: {e}", session.id);
            }
        }
        self.write_marker(true);
        drop(lock_file);
        Ok(())
    }

    fn touch(&self) {
        *lock(&self.last_activity) = Instant::now();
    }

    fn idle_expired(&self) -> bool {
        let connected = lock(&self.links).values().any(|c| c.link.is_connected());
        let busy = lock(&self.sessions)
            .values()
            .any(|s| s.busy() || s.jobs_running());
        // A running shell is work: the user's terminal outlives its clients.
        if connected || busy || self.terminals.any_running() {
            self.touch();
            return false;
        }
        lock(&self.last_activity).elapsed() >= self.config.idle_timeout
    }

    async fn handle_transport(self: Arc<Self>, stream: UnixStream) -> Result<(), String> {
        let (reader, mut writer) = stream.into_split();
        let (reader, hello) = server_accept(reader, &mut writer, reasonix_forward::build_id())
            .await
            .map_err(|e| e.to_string())?;
        if hello.protocol != PROTOCOL_VERSION {
            let welcome = Welcome {
                protocol: PROTOCOL_VERSION,
                build_id: reasonix_forward::build_id().to_string(),
                link_id: String::new(),
                resumed: false,
                received: 0,
                resume_refused: Some(format!(
                    "protocol mismatch: host speaks {PROTOCOL_VERSION}, client speaks {}",
                    hello.protocol
                )),
            };
            let _ = server_welcome(&mut writer, &welcome).await;
            return Err("protocol mismatch".into());
        }
        let existing = hello
            .resume
            .as_ref()
            .and_then(|r| lock(&self.links).get(&r.link_id).cloned());
        let (conn, peer_received, resumed, refused) = match existing {
            Some(conn) => {
                let received = hello.resume.as_ref().map(|r| r.received).unwrap_or(0);
                (conn, received, true, None)
            }
            None => {
                let conn = self.new_conn();
                let refused = hello.resume.as_ref().map(|r| {
                    format!("link {} is unknown to this daemon (it restarted or the link expired); catching up from the journal", r.link_id)
                });
                (conn, 0, false, refused)
            }
        };
        let welcome = Welcome {
            protocol: PROTOCOL_VERSION,
            build_id: reasonix_forward::build_id().to_string(),
            link_id: conn.link_id.clone(),
            resumed,
            received: conn.link.received(),
            resume_refused: refused,
        };
        server_welcome(&mut writer, &welcome)
            .await
            .map_err(|e| e.to_string())?;
        let generation = conn.generation.fetch_add(1, Ordering::SeqCst) + 1;
        tracing::info!(link = %conn.link_id, resumed, "transport attached");
        let err = conn.link.run_transport(reader, writer, peer_received).await;
        tracing::info!(link = %conn.link_id, "transport ended: {err}");
        self.touch();
        // Keep the link for a resume; close it if no new transport came within the grace.
        // A link that holds nothing a resume would save (a client that only said hello or
        // asked for a status) is kept for a thirtieth of it (60 s by default).
        let grace = if conn.holds_nothing() {
            self.config.link_grace / 30
        } else {
            self.config.link_grace
        };
        let me = Arc::clone(&self);
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            if conn.generation.load(Ordering::SeqCst) == generation && !conn.link.is_connected() {
                me.drop_conn(&conn);
            }
        });
        Ok(())
    }

    fn drop_conn(&self, conn: &Arc<Conn>) {
        tracing::info!(link = %conn.link_id, "link expired");
        lock(&self.links).remove(&conn.link_id);
        conn.link.close();
        conn.terminals.detach_all();
        conn.end_all_streams();
        for (_, route) in lock(&conn.mcp_channels).drain() {
            route
                .diagnostics
                .set_exit("the link to the laptop running this server expired");
        }
        if let Some((session, _)) = lock(&conn.session).take() {
            session.release_driver(conn.id);
        }
    }

    fn new_conn(self: &Arc<Self>) -> Arc<Conn> {
        let (link, inbound) = Link::new(self.config.link.clone());
        let (rpc, incoming) = Rpc::new(link.clone(), inbound);
        let id = self.next_conn.fetch_add(1, Ordering::SeqCst);
        let link_id = format!("{:016x}{:08x}", rand::random::<u64>(), id);
        let conn = Arc::new(Conn {
            id,
            link_id: link_id.clone(),
            rpc: rpc.clone(),
            link,
            streams: Mutex::new(HashMap::new()),
            transient: TransientContent::default(),
            sent_messages: Default::default(),
            stream_started: Mutex::new(HashMap::new()),
            mcp_channels: Mutex::new(HashMap::new()),
            session: Mutex::new(None),
            headless: Mutex::new(false),
            settings: Mutex::new(None),
            generation: AtomicU64::new(0),
            terminals: crate::pty::attach::LinkTerminals::new(
                Arc::clone(&self.terminals),
                rpc.clone(),
            ),
        });
        lock(&self.links).insert(link_id, Arc::clone(&conn));
        let me = Arc::clone(self);
        let c = Arc::clone(&conn);
        tokio::spawn(async move { me.serve_conn(c, incoming).await });
        conn
    }

    async fn serve_conn(self: Arc<Self>, conn: Arc<Conn>, mut incoming: mpsc::Receiver<Incoming>) {
        while let Some(msg) = incoming.recv().await {
            match msg {
                Incoming::Notify(Notification::ProviderChunk { stream_id, chunk }) => {
                    let finished = matches!(
                        chunk,
                        ProviderChunk::Done { .. } | ProviderChunk::Error { .. }
                    );
                    if let Some(t0) = lock(&conn.stream_started).remove(&stream_id) {
                        tracing::info!(
                            stream_id = %stream_id,
                            ttft_us = t0.elapsed().as_micros() as u64,
                            "first provider chunk"
                        );
                    }
                    let tx = lock(&conn.streams)
                        .get(&stream_id)
                        .map(|r| r.chunks.clone());
                    if let Some(tx) = tx {
                        // Waits while the turn runner is behind (backpressure through the
                        // link); fails at once when the runner let go of the stream.
                        let _ = tx.send(chunk).await;
                    }
                    if finished {
                        conn.end_stream(&stream_id);
                    }
                }
                Incoming::Notify(Notification::McpLine {
                    channel,
                    line,
                    more,
                }) => {
                    let mut routes = lock(&conn.mcp_channels);
                    let Some(route) = routes.get_mut(&channel) else {
                        continue;
                    };
                    if let Err(e) = route.inlet.piece(line, more) {
                        tracing::warn!(channel, "{e}");
                        if let Some(route) = routes.remove(&channel) {
                            route.diagnostics.set_exit(e.to_string());
                        }
                        drop(routes);
                        reasonix_forward::tunnel::tell_closed(&conn.rpc, channel, e.to_string());
                    }
                }
                Incoming::Notify(Notification::McpCredit { channel, bytes }) => {
                    if let Some(route) = lock(&conn.mcp_channels).get(&channel) {
                        route.inlet.credit(bytes);
                    }
                }
                Incoming::Notify(Notification::McpClosed { channel, reason }) => {
                    tracing::info!(channel, "laptop MCP server closed: {reason}");
                    if let Some(route) = lock(&conn.mcp_channels).remove(&channel) {
                        route
                            .diagnostics
                            .set_exit(format!("the laptop server ended: {reason}"));
                    }
                }
                Incoming::Notify(Notification::Pty(n)) => conn.terminals.notify(n),
                Incoming::Notify(other) => {
                    tracing::debug!("ignored notification from client: {other:?}");
                }
                Incoming::Request {
                    id,
                    body: Request::Pty(req),
                } => {
                    // Answered by the terminals themselves: an attach's output must follow
                    // its answer on the link.
                    let c = Arc::clone(&conn);
                    tokio::spawn(async move { c.terminals.request(id, req).await });
                }
                Incoming::Request { id, body } => {
                    let me = Arc::clone(&self);
                    let c = Arc::clone(&conn);
                    tokio::spawn(async move {
                        let result = me.handle_request(&c, body).await;
                        if let Err(e) = c.rpc.respond(id, result).await {
                            tracing::warn!("could not answer request {id}: {e}");
                        }
                    });
                }
            }
        }
    }

    /// The daemon's status as `asking` sees it: its own link counts as connected (it just
    /// sent the request, even if its transport is still being set up).
    fn status(&self, asking: &Conn) -> DaemonStatus {
        let (clients, links) = {
            let links = lock(&self.links);
            let connected = links
                .values()
                .filter(|c| c.id == asking.id || c.link.is_connected())
                .count();
            (connected as u32, links.len() as u32)
        };
        DaemonStatus {
            build_id: reasonix_forward::build_id().to_string(),
            pid: std::process::id(),
            uptime_secs: self.started.elapsed().as_secs(),
            workspace: self.paths.workspace.display().to_string(),
            sandbox: self.sandbox_status.clone(),
            clients,
            links,
            sessions: self.list_session_ids().len() as u32,
            unclean_previous_shutdown: self.unclean.clone(),
        }
    }

    fn list_session_ids(&self) -> Vec<(String, std::time::SystemTime)> {
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
        out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
        out
    }

    /// Every session of the workspace, newest first: open ones from memory, the others from
    /// their journal's head and tail (nothing is loaded or kept).
    async fn list_sessions(&self) -> Vec<reasonix_forward::proto::SessionInfo> {
        let ids = self.list_session_ids();
        let open: HashMap<String, Arc<Session>> = lock(&self.sessions).clone();
        let dir = self.paths.sessions_dir.clone();
        let mut out = Vec::with_capacity(ids.len());
        let mut closed = Vec::new();
        let catalog = crate::catalog::Catalog::new(&self.paths.sessions_dir);
        for (id, _) in ids {
            match open.get(&id) {
                Some(s) => {
                    let mut info = s.info();
                    (info.driver_attached, info.clients) = self.attachment(s);
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
        let links: Vec<Arc<Conn>> = lock(&self.links).values().cloned().collect();
        let mut driver_live = false;
        let mut clients = 0;
        for c in links {
            let has = lock(&c.session)
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
    async fn delete_session(&self, id: String) -> Result<Response, RpcError> {
        crate::catalog::check_id(&id).map_err(|e| RpcError::new("bad_request", e.to_string()))?;
        // No load of any session runs meanwhile (it would read a journal being moved).
        let _loading = self.loading.lock().await;
        // Held across the check and the move: an open of this id waits for it (the open
        // then finds no journal and answers `not_found`).
        let mut sessions = lock(&self.sessions);
        if let Some(s) = sessions.get(&id).cloned() {
            let state = s.state();
            if reasonix_forward::workspaces::state_busy(state) || s.jobs_running() {
                return Err(RpcError::new(
                    "busy",
                    format!("session {id} is running a turn or a background job ({state:?}); cancel it first (Esc in the TUI), then delete it"),
                ));
            }
            let (_, clients) = self.attachment(&s);
            if clients > 0 {
                return Err(RpcError::new(
                    "attached",
                    format!("session {id} is open in {clients} client(s); switch them to another session or close them, then delete it"),
                ));
            }
            // Links in their grace let go of it; one that resumes later finds no session
            // open and opens another.
            for c in lock(&self.links).values() {
                let mut open = lock(&c.session);
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
    async fn list_trash(&self) -> Result<Response, RpcError> {
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
                    let rfc = |secs: u64| crate::journal::format_rfc3339(secs as i64, 0);
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
                        },
                        deleted: rfc(e.deleted),
                        purge_after: rfc(e.deleted + TRASH_KEEP_DAYS * 86_400),
                    })
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| RpcError::new("internal", format!("trash listing failed: {e}")))?;
        Ok(Response::Trash { sessions })
    }

    /// The session `id`, loaded from its journal if it is not open yet. Reading a journal
    /// (and repairing what a crash left) is file I/O on a blocking thread, not a runtime
    /// worker. A session brought into memory now gets the workspace MCP servers as declared
    /// now; one already in memory keeps its own.
    async fn load_session(&self, id: &str) -> Result<(Arc<Session>, Option<String>), RpcError> {
        if let Some(s) = lock(&self.sessions).get(id) {
            return Ok((Arc::clone(s), None));
        }
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(RpcError::new(
                "bad_request",
                format!("invalid session id {id:?}"),
            ));
        }
        let _loading = self.loading.lock().await;
        let snapshot = self.runtime.mcp.refresh().await;
        // Another link may have loaded it while this one waited.
        if let Some(s) = lock(&self.sessions).get(id) {
            return Ok((Arc::clone(s), None));
        }
        let path = self.paths.sessions_dir.join(format!("{id}.jsonl"));
        let (runtime, workspace) = (Arc::clone(&self.runtime), self.paths.workspace.clone());
        let owned_id = id.to_string();
        let (session, notice) = tokio::task::spawn_blocking(move || {
            Session::open(&owned_id, &path, runtime, &workspace, snapshot.manager)
        })
        .await
        .map_err(|e| RpcError::new("journal", format!("loading the session failed: {e}")))?
        .map_err(|e| RpcError::new("journal", e.to_string()))?;
        lock(&self.sessions).insert(id.to_string(), Arc::clone(&session));
        Ok((session, notice))
    }

    async fn handle_request(&self, conn: &Arc<Conn>, body: Request) -> Result<Response, RpcError> {
        self.touch();
        match body {
            Request::Status => Ok(Response::Status(self.status(conn))),
            Request::ListSessions => Ok(Response::Sessions {
                sessions: self.list_sessions().await,
            }),
            Request::OpenSession(open) => self.open_session(conn, open).await,
            Request::SubmitTurn { request_id, text } => {
                let session = self.driven_session(conn)?;
                // Only a text that may name an MCP prompt or resource waits for the servers.
                let managers = if crate::mcp::prompt::may_use_mcp(&text) {
                    session.mcp_managers().await
                } else {
                    Vec::new()
                };
                // Terminal screens and MCP resources are attached only when the user typed
                // the mention: a server's prompt text cannot make the host attach them.
                let mut screens = crate::pty::mention::resolve(&self.terminals, &text);
                let (resources, notices) =
                    crate::mcp::prompt::resolve_resources(&managers, &text).await;
                // `/mcp__<server>__<prompt> args`: the prompt's text is the turn.
                let text = match crate::mcp::prompt::expand_command(&managers, &text).await {
                    None => text,
                    Some(Ok(expanded)) => expanded,
                    Some(Err(e)) => return Err(RpcError::new("mcp_prompt", e)),
                };
                screens.extend(resources);
                match session.submit_with(&request_id, &text, screens, notices) {
                    Ok(true) => Ok(Response::Ok),
                    Ok(false) => Ok(Response::Duplicate),
                    Err(e) => Err(RpcError::new("busy", e.to_string())),
                }
            }
            Request::ContinueTurn { request_id } => {
                let session = self.driven_session(conn)?;
                match session.continue_turn(&request_id) {
                    Ok(true) => Ok(Response::Ok),
                    Ok(false) => Ok(Response::Duplicate),
                    Err(e) => Err(RpcError::new("not_paused", e.to_string())),
                }
            }
            Request::Cancel { request_id } => {
                let session = self.driven_session(conn)?;
                Ok(if session.cancel(&request_id) {
                    Response::Ok
                } else {
                    Response::Duplicate
                })
            }
            Request::Approve {
                request_id,
                approval_id,
                decision,
            } => {
                let session = self.driven_session(conn)?;
                match session.approve(&request_id, &approval_id, decision).await {
                    Ok(true) => Ok(Response::Ok),
                    Ok(false) => Ok(Response::Duplicate),
                    Err(e @ crate::session::SessionError::Journal(_)) => {
                        Err(RpcError::new("journal", e.to_string()))
                    }
                    Err(e) => Err(RpcError::new("not_found", e.to_string())),
                }
            }
            Request::Takeover => {
                let session = lock(&conn.session)
                    .as_ref()
                    .map(|(s, _)| Arc::clone(s))
                    .ok_or_else(no_session)?;
                // The taker's own settings replace the previous driver's (a TUI taking over
                // from a headless run gets its approvals asked, in its own mode and rules).
                let settings = lock(&conn.settings).clone().unwrap_or_default();
                let enforced = self.enforce(&settings)?;
                self.make_driver(conn, &session, Some((settings, enforced)));
                Ok(Response::Ok)
            }
            Request::Rewind {
                request_id,
                to_turn,
                scope,
                dry_run,
            } => {
                let session = self.driven_session(conn)?;
                session
                    .rewind(&request_id, to_turn, scope, dry_run)
                    .await
                    .map(|(summary, paths)| Response::Rewound { summary, paths })
                    .map_err(|e| RpcError::new("rewind", e))
            }
            Request::Steer { request_id, text } => {
                self.handle_workbench(conn, WorkbenchRequest::Steer { request_id, text })
                    .await
            }
            Request::Shell {
                request_id,
                command,
                add_to_context,
            } => {
                self.handle_workbench(
                    conn,
                    WorkbenchRequest::Shell {
                        request_id,
                        command,
                        add_to_context,
                    },
                )
                .await
            }
            Request::HistoryList => {
                self.handle_workbench(conn, WorkbenchRequest::HistoryList)
                    .await
            }
            Request::HistoryAppend { text } => {
                self.handle_workbench(conn, WorkbenchRequest::HistoryAppend { text })
                    .await
            }
            // #14: `/compact` runs on the request's own task (requests are spawned), so the
            // link keeps carrying the summary's provider stream meanwhile.
            Request::Compact { request_id, focus } => {
                let session = self.driven_session(conn)?;
                let focus = focus.filter(|f| !f.trim().is_empty());
                match session.compact_now(&request_id, focus.as_deref()).await {
                    Ok(Some(summary)) => Ok(Response::CompactDone {
                        summary,
                        last_seq: session.last_seq(),
                    }),
                    Ok(None) => Ok(Response::Duplicate),
                    Err(e) => Err(RpcError::new("busy", e)),
                }
            }
            Request::ContextReport => {
                let session = lock(&conn.session)
                    .as_ref()
                    .map(|(s, _)| Arc::clone(s))
                    .ok_or_else(no_session)?;
                Ok(Response::Context(session.context_report()))
            }
            Request::ListDir { path } => self.list_dir(&path),
            Request::RenameSession { session, title } => {
                crate::catalog::Catalog::new(&self.paths.sessions_dir)
                    .set_title(&session, &title)
                    .map(|()| Response::Ok)
                    .map_err(catalog_error)
            }
            Request::DeleteSession { session } => self.delete_session(session).await,
            Request::RestoreSession { session } => {
                crate::catalog::Catalog::new(&self.paths.sessions_dir)
                    .restore(&session)
                    .map(|()| Response::Ok)
                    .map_err(catalog_error)
            }
            Request::PurgeSessions { session } => {
                crate::catalog::Catalog::new(&self.paths.sessions_dir)
                    .purge(session.as_deref())
                    .map(|sessions| Response::Purged { sessions })
                    .map_err(catalog_error)
            }
            Request::ListTrash => self.list_trash().await,
            Request::ListCommandFiles => {
                let workspace = self.paths.workspace.clone();
                tokio::task::spawn_blocking(move || crate::commands::read_command_files(&workspace))
                    .await
                    .map(|(files, skipped)| Response::CommandFiles { files, skipped })
                    .map_err(|e| RpcError::new("internal", format!("command listing failed: {e}")))
            }
            Request::McpStatus { laptop } => Ok(self.mcp_status(conn, &laptop).await),
            Request::McpPrompts => {
                let managers = self.mcp_managers(conn).await;
                let (prompts, problems) = crate::mcp::prompt::list_prompts(&managers).await;
                Ok(Response::McpPrompts { prompts, problems })
            }
            Request::McpResources { server } => {
                let managers = self.mcp_managers(conn).await;
                crate::mcp::prompt::list_resources(&managers, &server)
                    .await
                    .map(|resources| Response::McpResources { resources })
                    .map_err(|e| RpcError::new("not_found", e))
            }
            Request::FetchContent {
                sha256,
                offset,
                len,
            } => self.fetch_content(conn, sha256, offset, len).await,
            Request::Pty(_) => Err(RpcError::new(
                "bad_request",
                "terminal requests are served by the link's terminals",
            )),
            Request::McpOpen { .. } => Err(RpcError::new(
                "bad_request",
                "MCP servers are opened by the host on the laptop, not the other way round",
            )),
            Request::Provider(_) | Request::ProviderBase { .. } => Err(RpcError::new(
                "bad_request",
                "the host has no provider gateway; provider requests go from host to laptop",
            )),
        }
    }

    /// A chunk of content by reference: provider messages this link holds, else the
    /// workspace's content store (read off the async threads).
    async fn fetch_content(
        &self,
        conn: &Arc<Conn>,
        sha256: String,
        offset: u64,
        len: u32,
    ) -> Result<Response, RpcError> {
        if let Some(chunk) = conn.transient.read_chunk(&sha256, offset, len) {
            return Ok(Response::Content(chunk));
        }
        let store = ContentStore::for_sessions(&self.paths.sessions_dir);
        let read = tokio::task::spawn_blocking(move || store.read_chunk(&sha256, offset, len))
            .await
            .map_err(|e| RpcError::new("internal", format!("content read task failed: {e}")))?;
        match read {
            Ok(chunk) => Ok(Response::Content(chunk)),
            Err(e @ crate::content::ContentStoreError::BadName(_)) => {
                Err(RpcError::new("bad_request", e.to_string()))
            }
            Err(e @ crate::content::ContentStoreError::NotFound(_)) => {
                Err(RpcError::new("not_found", e.to_string()))
            }
            Err(e @ crate::content::ContentStoreError::Io { .. }) => {
                tracing::error!("{e}");
                Err(RpcError::new("io", e.to_string()))
            }
        }
    }

    /// `/mcp` and `reasonix mcp list`: the host servers and the laptop servers of the open
    /// session (the set it was opened with), or, with no session open, the host servers a
    /// session opened now would get and the laptop servers `laptop` started through this
    /// link for this answer only.
    async fn mcp_status(&self, conn: &Arc<Conn>, laptop: &[String]) -> Response {
        let session = lock(&conn.session).as_ref().map(|(s, _)| Arc::clone(s));
        let host_status = match &session {
            Some(session) => session.workspace_mcp_status().await,
            None => {
                // No session: the servers a session opened now would get.
                self.runtime.mcp.refresh().await.manager.status()
            }
        };
        let mut servers: Vec<McpServerInfo> = host_status.iter().map(|s| s.to_info()).collect();
        let laptop_status = match session {
            Some(session) => session.laptop_mcp_status().await,
            None => probe_laptop_mcp(conn, laptop).await,
        };
        servers.extend(laptop_status.iter().map(|s| s.to_info()));
        Response::McpServers { servers }
    }

    /// The MCP servers of the link's session, or (no session) the workspace's latest.
    async fn mcp_managers(&self, conn: &Arc<Conn>) -> Vec<Arc<crate::mcp::McpManager>> {
        let session = lock(&conn.session).as_ref().map(|(s, _)| Arc::clone(s));
        match session {
            Some(s) => s.mcp_managers().await,
            // No session: the servers a session opened now would get.
            None => vec![self.runtime.mcp.refresh().await.manager],
        }
    }

    fn driven_session(&self, conn: &Arc<Conn>) -> Result<Arc<Session>, RpcError> {
        match lock(&conn.session).as_ref() {
            Some((s, ClientRole::Driver)) if s.driver_id() == Some(conn.id) => Ok(Arc::clone(s)),
            Some(_) => Err(RpcError::new(
                "read_only",
                "this client is attached read-only; another client drives the session (start with --takeover to take it over)",
            )),
            None => Err(no_session()),
        }
    }

    /// The driver's policy tightened by the workspace's project file as it is now.
    fn enforce(&self, settings: &SessionSettings) -> Result<crate::project::Enforced, RpcError> {
        crate::project::enforce(
            &settings.policy,
            &self.paths.workspace,
            &self.runtime.tool_ctx,
        )
        .map_err(|e| RpcError::new("bad_config", e.to_string()))
    }

    fn make_driver(
        &self,
        conn: &Arc<Conn>,
        session: &Arc<Session>,
        settings: Option<(SessionSettings, crate::project::Enforced)>,
    ) {
        let old_conn = session
            .driver_id()
            .filter(|id| *id != conn.id)
            .and_then(|old| lock(&self.links).values().find(|c| c.id == old).cloned());
        if let Some(old_conn) = &old_conn {
            if let Some(entry) = lock(&old_conn.session).as_mut() {
                entry.1 = ClientRole::Spectator;
            }
        }
        if let Some(entry) = lock(&conn.session).as_mut() {
            entry.1 = ClientRole::Driver;
        }
        // The new driver is in place before anything of the old one is ended: a turn woken
        // by an ended call or stream sends its next request through the new driver, never
        // through the old one (where it would wait for that link to expire).
        session.set_driver(Some(Arc::new(ConnGateway(Arc::clone(conn)))), settings);
        let Some(old_conn) = old_conn else { return };
        // Laptop MCP servers run on the driver's laptop: close the old driver's channels, so
        // a call in flight there ends as a tool error at once (never re-sent: it may have
        // run) instead of waiting for that link to expire, and the servers start again
        // through the new driver on next use.
        let routes: Vec<(u64, McpRoute)> = lock(&old_conn.mcp_channels).drain().collect();
        let reason = "the driving client changed; laptop MCP servers run on the driver's laptop and start again there on next use";
        for (_, route) in &routes {
            route.diagnostics.set_exit(reason);
        }
        let rpc = old_conn.rpc.clone();
        tokio::spawn(async move {
            let _ = rpc
                .notify(Notification::Role {
                    role: ClientRole::Spectator,
                    reason: "another client took over this session; you are now read-only".into(),
                })
                .await;
            for (channel, _) in routes {
                let _ = rpc
                    .notify(Notification::McpClosed {
                        channel,
                        reason: reason.into(),
                    })
                    .await;
            }
        });
        // Provider streams waiting on a driver whose transport is gone (its client was
        // killed or lost the network) would only end when that link expires: end them now so
        // the step re-issues its request through the new driver (nothing of a cut stream was
        // acted on).
        if !old_conn.link.is_connected() {
            old_conn.end_all_streams();
        }
    }

    async fn open_session(
        &self,
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
            && !lock(&self.sessions).contains_key(&id)
            && !self.paths.sessions_dir.join(format!("{id}.jsonl")).exists()
        {
            return Err(RpcError::new(
                "not_found",
                format!("no session {id} in this workspace; list them with /sessions or `reasonix run --continue`"),
            ));
        }
        let (session, load_notice) = self.load_session(&id).await?;
        // Before anything changes: a project file that cannot be applied refuses the open.
        let mut enforced = if open.read_only {
            None
        } else {
            Some(self.enforce(&open.settings)?)
        };
        *lock(&conn.headless) = open.settings.headless;
        *lock(&conn.settings) = Some(open.settings.clone());
        // Detach from a previously open session.
        if let Some((old, _)) = lock(&conn.session).take() {
            old.release_driver(conn.id);
        }
        *lock(&conn.session) = Some((Arc::clone(&session), ClientRole::Spectator));
        let current = session.driver_id();
        let current_live = current
            .and_then(|d| lock(&self.links).values().find(|c| c.id == d).cloned())
            .map(|c| c.link.is_connected())
            .unwrap_or(false);
        let mut ignored = Vec::new();
        let role = if open.read_only || (current_live && current != Some(conn.id) && !open.takeover)
        {
            ClientRole::Spectator
        } else {
            let enforced = match enforced.take() {
                Some(e) => e,
                None => self.enforce(&open.settings)?,
            };
            ignored = enforced.ignored.clone();
            self.make_driver(conn, &session, Some((open.settings.clone(), enforced)));
            ClientRole::Driver
        };
        if role == ClientRole::Driver {
            session.setup_laptop_mcp(&open.settings.laptop_mcp).await;
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
        // Stop forwarding when this link switched to another session.
        let still_open = move || {
            lock(&my_conn.session)
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

    fn list_dir(&self, rel: &str) -> Result<Response, RpcError> {
        let rel = Path::new(rel);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(RpcError::new(
                "outside_workspace",
                "only paths inside the workspace can be listed",
            ));
        }
        let dir = self.paths.workspace.join(rel);
        let rd = std::fs::read_dir(&dir)
            .map_err(|e| RpcError::new("io", format!("cannot list {}: {e}", dir.display())))?;
        let mut entries: Vec<DirEntry> = rd
            .flatten()
            .map(|e| DirEntry {
                name: e.file_name().to_string_lossy().into_owned(),
                is_dir: e.file_type().map(|t| t.is_dir()).unwrap_or(false),
            })
            .collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Response::DirEntries { entries })
    }
}

/// Starts the laptop servers `names` through `conn` (as a session would), reports them and
/// stops them again.
async fn probe_laptop_mcp(conn: &Arc<Conn>, names: &[String]) -> Vec<crate::mcp::McpServerStatus> {
    if names.is_empty() {
        return Vec::new();
    }
    let manager = crate::mcp::McpManager::laptop(names, |name| {
        let conn = Arc::clone(conn);
        let server = name.to_string();
        Arc::new(move || ConnGateway(Arc::clone(&conn)).open_mcp(&server))
    });
    manager.start_all().await;
    let status = manager.status();
    manager.shutdown().await;
    status
}

fn catalog_error(e: crate::catalog::CatalogError) -> RpcError {
    use crate::catalog::CatalogError;
    let code = match &e {
        CatalogError::BadId(_) => "bad_request",
        CatalogError::NotFound(_) => "not_found",
        CatalogError::Exists(_) => "exists",
        CatalogError::Io { .. } => "io",
    };
    RpcError::new(code, e.to_string())
}

fn no_session() -> RpcError {
    RpcError::new("no_session", "open a session first")
}

fn new_session_id() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    format!("{now:x}-{:06x}", rand::random::<u32>() & 0xff_ffff)
}

/// True when a process with this pid exists.
pub fn pid_alive(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence/permission.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut t), Ok(mut i)) => {
            tokio::select! {
                _ = t.recv() => {}
                _ = i.recv() => {}
            }
        }
        _ => std::future::pending::<()>().await,
    }
}
