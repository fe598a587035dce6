//! The client side of the link: a supervisor that keeps one resumable link to the host
//! alive across transport losses, serves the host's provider requests through the local
//! gateway, and turns everything the host says into [`ClientEvent`]s for a UI.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use reasonix_forward::channel::{Channel, ChannelAccepted, ChannelOpen, IncomingChannel};
use reasonix_forward::handshake::{client_handshake, client_handshake_pipelined};
use reasonix_forward::link::{Link, LinkConfig};
use reasonix_forward::proto::{
    ClientRole, ErrorCode, Event, Hello, Notification, Request, Response, ResumeRequest, TurnState,
    PROTOCOL_VERSION,
};
use reasonix_forward::rpc::{CallError, Incoming, Rpc};
use reasonix_forward::sync::LockExt;
use tokio::sync::{mpsc, watch};

use crate::always_scope::AlwaysScope;
use crate::connect::{ConnectError, Connector};
use crate::gateway::Gateway;

/// Connection state as shown to the user.
#[derive(Debug, Clone, PartialEq)]
pub enum ConnState {
    /// Connecting for the first time.
    Connecting,
    /// Connected; `resumed` is true when the previous link was resumed.
    Connected {
        /// True when the link was resumed (nothing lost).
        resumed: bool,
    },
    /// The transport is gone; retrying.
    Reconnecting {
        /// Attempt number (from 1).
        attempt: u32,
        /// Time until the next attempt.
        next_in: Duration,
        /// Seconds since the host was last heard from.
        last_contact_secs: u64,
        /// Why the last transport ended or the last attempt failed.
        reason: String,
    },
    /// Gave up: retrying cannot help.
    Failed {
        /// Why.
        reason: String,
        /// The workspace folder does not exist and the client waits: a yes
        /// ([`Client::create_workspace`]) creates it and connects again.
        can_create: bool,
    },
}

/// What the client reports to its UI.
#[derive(Debug, Clone)]
pub enum ClientEvent {
    /// The connection changed state.
    Connection(ConnState),
    /// A journal event of the open session.
    Event(Event),
    /// A host process asks the forwarded ssh-agent to sign, and `[sandbox] ssh_agent =
    /// "confirm"`: the front end asks the user and answers ([`crate::agent_confirm`]). Not
    /// answering refuses.
    AgentSign(crate::agent_confirm::AgentSignAsk),
    /// The session's turn state changed.
    State {
        /// New state.
        state: TurnState,
        /// Detail text.
        detail: Option<String>,
    },
    /// This client's role changed.
    Role {
        /// New role.
        role: ClientRole,
        /// Why.
        reason: String,
    },
    /// Progress of a running tool.
    ToolProgress {
        /// Call id.
        call_id: String,
        /// Text.
        message: String,
    },
    /// The link could not be resumed and a fresh one was made: re-open the session and
    /// catch up from the journal.
    Reattached {
        /// Why the resume was refused.
        reason: String,
    },
}

/// Options of the supervisor.
#[derive(Clone)]
pub struct ClientOptions {
    /// Laptop-side MCP servers the host may open through the link.
    pub laptop_mcp: Option<Arc<crate::mcp_host::McpHost>>,
    /// Reasonix home: "always allow" rules are saved to its `config.toml`.
    pub config_home: Option<std::path::PathBuf>,
    /// The workspace "always allow" rules are stored under by default (`None`: globally).
    pub workspace_key: Option<String>,
    /// Link tunables.
    pub link: LinkConfig,
    /// First reconnect delay.
    pub backoff_start: Duration,
    /// Largest reconnect delay (kept low so a restored network is noticed fast).
    pub backoff_cap: Duration,
    /// A missing workspace folder is reported with `can_create` and the client waits for
    /// [`Client::create_workspace`] instead of ending (the TUI's prompt).
    pub offer_mkdir: bool,
    /// `[[hooks]]` of the user config, sent with every session open together with the
    /// workspace's trust records (read from `config_home` at each open).
    pub user_hooks: Vec<reasonix_forward::hooks::HookDecl>,
    /// Forward the host's ports (#36 §1): every new link watches the workspace's ports and
    /// these forwards follow the announcements; notices arrive as `Notice` events.
    pub ports: Option<Arc<crate::ports::Forwards>>,
    /// `[sandbox] ssh_agent = "confirm"` and the pre-approved keys: signing requests on the
    /// forwarded agent ask the front end first ([`ClientEvent::AgentSign`]).
    pub agent_confirm: crate::agent_confirm::AgentConfirm,
}

impl Default for ClientOptions {
    fn default() -> Self {
        let mut link = LinkConfig::default();
        if let Some(ms) = env_ms("REASONIX_HEARTBEAT_MS") {
            link.heartbeat_interval = ms;
        }
        if let Some(ms) = env_ms("REASONIX_DEAD_AFTER_MS") {
            link.dead_after = ms;
        }
        Self {
            laptop_mcp: None,
            config_home: None,
            workspace_key: None,
            link,
            backoff_start: Duration::from_millis(200),
            backoff_cap: Duration::from_millis(1500),
            offer_mkdir: false,
            user_hooks: Vec::new(),
            ports: None,
            agent_confirm: Default::default(),
        }
    }
}

fn env_ms(name: &str) -> Option<Duration> {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis)
}

/// A handle to the running client. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    rpc: watch::Receiver<Option<Rpc>>,
    retry_now: Arc<tokio::sync::Notify>,
    create: Arc<std::sync::atomic::AtomicBool>,
    /// The current transport goes to another build's daemon the user chose to watch:
    /// sessions are opened read-only whatever the front end asks.
    read_only: Arc<std::sync::atomic::AtomicBool>,
    answered_always: AnsweredAlways,
    hooks: Arc<HookSource>,
}

/// Where a client's hook settings come from (#34).
struct HookSource {
    home: Option<std::path::PathBuf>,
    workspace_key: Option<String>,
    user: Vec<reasonix_forward::hooks::HookDecl>,
}

/// Approval ids this client answered with "always allow", and where each rule goes: only
/// the client whose user answered saves the rule, never a spectator or a client replaying
/// the journal. `None` = the default scope (this workspace when known).
type AnsweredAlways = Arc<Mutex<std::collections::HashMap<String, Option<AlwaysScope>>>>;

impl Client {
    /// Start the supervisor. Events arrive on the returned receiver.
    pub fn start(
        connector: Arc<dyn Connector>,
        gateway: Arc<Gateway>,
        options: ClientOptions,
    ) -> (Client, mpsc::UnboundedReceiver<ClientEvent>) {
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (rpc_tx, rpc_rx) = watch::channel(None);
        let retry_now = Arc::new(tokio::sync::Notify::new());
        let create = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let read_only = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let answered_always = AnsweredAlways::default();
        let hooks = Arc::new(HookSource {
            home: options.config_home.clone(),
            workspace_key: options.workspace_key.clone(),
            user: options.user_hooks.clone(),
        });
        let sup = Supervisor {
            read_only: Arc::clone(&read_only),
            answered_always: Arc::clone(&answered_always),
            connector,
            gateway,
            options,
            events: events_tx,
            rpc: rpc_tx,
            retry_now: Arc::clone(&retry_now),
            create: Arc::clone(&create),
            last_contact: Arc::new(Mutex::new(Instant::now())),
        };
        let ports = sup.options.ports.clone();
        tokio::spawn(sup.run());
        let client = Client {
            rpc: rpc_rx,
            retry_now,
            create,
            read_only,
            answered_always,
            hooks,
        };
        if let Some(ports) = ports {
            ports.attach(client.clone());
        }
        (client, events_rx)
    }

    /// Store the rule of an "always allow" answer to `approval_id` in `scope` instead of the
    /// default (this workspace). Call before sending the answer.
    pub fn remember_always_scope(&self, approval_id: &str, scope: AlwaysScope) {
        self.answered_always
            .lock_or_recover()
            .insert(approval_id.to_string(), Some(scope));
    }

    /// Send a request to the host on the current link (waiting for a link if none yet).
    pub async fn request(&self, body: Request) -> Result<Response, CallError> {
        if let Request::Approve {
            approval_id,
            decision: reasonix_forward::proto::ApprovalDecision::AllowAlways,
            ..
        } = &body
        {
            self.answered_always
                .lock_or_recover()
                .entry(approval_id.clone())
                .or_insert(None);
        }
        let mut rx = self.rpc.clone();
        let rpc = loop {
            if let Some(r) = rx.borrow_and_update().clone() {
                break r;
            }
            if rx.changed().await.is_err() {
                return Err(CallError::Link(reasonix_forward::link::LinkError::Closed));
            }
        };
        let body = self.with_hooks(body);
        // Decided once a link is there (a request made before it waited for it).
        let body = match body {
            Request::OpenSession(mut open)
                if self.read_only.load(std::sync::atomic::Ordering::SeqCst) =>
            {
                open.read_only = true;
                open.takeover = false;
                // Read-only on another build's daemon (its turn is what the user chose to
                // watch): the workspace's latest session, not a new one nobody could type in.
                if open.new && open.session.is_none() {
                    open.new = false;
                }
                Request::OpenSession(open)
            }
            other => other,
        };
        rpc.request(body).await
    }

    /// The user's hooks and this workspace's trust records (#34), read now, so a
    /// `reasonix hooks trust` made meanwhile applies to the next open.
    pub fn hook_settings(&self) -> reasonix_forward::hooks::HookSettings {
        let h = &self.hooks;
        match &h.home {
            Some(home) => crate::hooks_trust::settings(home, h.workspace_key.as_deref(), &h.user),
            None => reasonix_forward::hooks::HookSettings {
                user: h.user.clone(),
                trusted: Vec::new(),
            },
        }
    }

    /// Every open carries the hooks; a `Hooks` request without them gets them too.
    fn with_hooks(&self, body: Request) -> Request {
        match body {
            Request::OpenSession(mut open) if open.hooks.is_empty() => {
                open.hooks = self.hook_settings();
                Request::OpenSession(open)
            }
            Request::Hooks { hooks } if hooks.is_empty() => Request::Hooks {
                hooks: self.hook_settings(),
            },
            other => other,
        }
    }

    /// Fetch content stored on the host by reference (a `ToolFinished` output), chunk by
    /// chunk, and check its SHA-256.
    pub async fn fetch_content(
        &self,
        r: &reasonix_forward::content::ContentRef,
    ) -> Result<Vec<u8>, reasonix_forward::content::ContentError> {
        crate::by_ref::fetch_with(r, |req| {
            let c = self.clone();
            async move { c.request(req).await.map_err(|e| e.to_string()) }
        })
        .await
    }

    /// Open (attach to) a session: the answer, or why not. Shared by every front end.
    pub async fn open_session(
        &self,
        open: reasonix_forward::proto::OpenSession,
    ) -> Result<reasonix_forward::proto::SessionOpened, CallError> {
        match self.request(Request::OpenSession(open)).await? {
            Response::SessionOpened(o) => Ok(o),
            other => Err(CallError::Remote(reasonix_forward::proto::RpcError::new(
                ErrorCode::BadResponse,
                format!("unexpected answer to OpenSession: {other:?}"),
            ))),
        }
    }

    /// Submit a user turn to the open session. While another turn of the session still runs
    /// (e.g. one left by a client that was killed, finishing through this gateway) the host
    /// answers `busy`: wait and resubmit; the same request id makes the retries safe.
    pub async fn submit_turn(&self, request_id: &str, text: &str) -> Result<Response, CallError> {
        self.request_while_busy(|| Request::SubmitTurn {
            request_id: request_id.to_string(),
            text: text.to_string(),
        })
        .await
    }

    /// Send a plan-mode request ([`Request::Plan`]); like [`Client::submit_turn`], waits while
    /// the host says busy (a turn still ending) and retries with the same id.
    pub async fn plan_request(
        &self,
        request_id: &str,
        action: reasonix_forward::proto::PlanAction,
    ) -> Result<Response, CallError> {
        self.request_while_busy(|| Request::Plan {
            request_id: request_id.to_string(),
            action: action.clone(),
        })
        .await
    }

    /// Send a goal request ([`Request::Goal`]); like [`Client::submit_turn`], waits while the
    /// host says busy (a turn still ending) and retries with the same id.
    pub async fn goal_request(
        &self,
        request_id: &str,
        action: reasonix_forward::proto::GoalAction,
    ) -> Result<Response, CallError> {
        self.request_while_busy(|| Request::Goal {
            request_id: request_id.to_string(),
            action: action.clone(),
        })
        .await
    }

    /// Sends the request `make` builds, again every 300 ms while the host answers `busy`
    /// (the requests carry a request id, so a retry is never a second turn).
    async fn request_while_busy(&self, make: impl Fn() -> Request) -> Result<Response, CallError> {
        loop {
            match self.request(make()).await {
                Err(CallError::Remote(e)) if e.code == ErrorCode::Busy => {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                other => return other,
            }
        }
    }

    /// Tell the host this client is done with its session (see [`Request::Leave`]), waiting
    /// briefly for the answer: a client that exits right after is then no longer the
    /// session's driver when the next one attaches. Best effort: a host that does not
    /// answer in time (or a link that is down) only makes the next client wait for the
    /// daemon to notice the link closed, as before.
    pub async fn leave(&self) {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.request(Request::Leave)).await;
    }

    /// Send a notification to the host on the current link (waiting for a link if none
    /// yet). Queued in the link's replay buffer while the transport is down, so it arrives
    /// exactly once after the resume.
    pub async fn notify(&self, body: Notification) -> Result<(), CallError> {
        let mut rx = self.rpc.clone();
        let rpc = loop {
            if let Some(r) = rx.borrow_and_update().clone() {
                break r;
            }
            if rx.changed().await.is_err() {
                return Err(CallError::Link(reasonix_forward::link::LinkError::Closed));
            }
        };
        rpc.notify(body).await.map_err(CallError::Link)
    }

    /// Open a channel to the host on the current link (waiting for a link if none yet):
    /// what the host answered and the channel, or its refusal. The channel lives as long as
    /// that link: when the link is replaced (the host could not resume it) the channel ends
    /// with [`reasonix_forward::channel::ChannelEnd::LinkClosed`] and the caller opens
    /// another.
    pub async fn open_channel(
        &self,
        open: ChannelOpen,
        window: u32,
    ) -> Result<(ChannelAccepted, Channel), CallError> {
        self.current_rpc().await?.open_channel(open, window).await
    }

    /// Open a channel on the current link, sending early data when the host takes it
    /// ([`reasonix_forward::channel::Channels::open_eager`]).
    pub async fn open_channel_eager(
        &self,
        open: ChannelOpen,
        window: u32,
    ) -> Result<(Channel, reasonix_forward::channel::Acceptance), CallError> {
        self.current_rpc()
            .await?
            .open_channel_eager(open, window)
            .await
    }

    /// Wait until the host has received everything sent so far on the current link (for a
    /// front end about to exit).
    pub async fn flush(&self) -> Result<(), CallError> {
        let rpc = self.current_rpc().await?;
        rpc.link().flush().await.map_err(CallError::Link)
    }

    /// The current link's RPC, waiting for a link if none yet.
    async fn current_rpc(&self) -> Result<Rpc, CallError> {
        let mut rx = self.rpc.clone();
        loop {
            if let Some(r) = rx.borrow_and_update().clone() {
                return Ok(r);
            }
            if rx.changed().await.is_err() {
                return Err(CallError::Link(reasonix_forward::link::LinkError::Closed));
            }
        }
    }

    /// Skip the current backoff delay and try to reconnect at once.
    pub fn retry_now(&self) {
        self.retry_now.notify_one();
    }

    /// The answer to a [`ConnState::Failed`] with `can_create`: create the workspace folder
    /// (`--mkdir`) and connect again.
    pub fn create_workspace(&self) {
        self.create.store(true, std::sync::atomic::Ordering::SeqCst);
        self.retry_now.notify_one();
    }
}

struct Supervisor {
    answered_always: AnsweredAlways,
    connector: Arc<dyn Connector>,
    gateway: Arc<Gateway>,
    options: ClientOptions,
    events: mpsc::UnboundedSender<ClientEvent>,
    rpc: watch::Sender<Option<Rpc>>,
    retry_now: Arc<tokio::sync::Notify>,
    create: Arc<std::sync::atomic::AtomicBool>,
    last_contact: Arc<Mutex<Instant>>,
    read_only: Arc<std::sync::atomic::AtomicBool>,
}

impl Supervisor {
    fn emit(&self, ev: ClientEvent) {
        let _ = self.events.send(ev);
    }

    async fn run(self) {
        let client_id = format!("{:016x}", rand::random::<u64>());
        // Decided once per process, from the host's ssh_config and `-A` (#36 §2).
        let agent = self.connector.forward_agent().map(Arc::new);
        let mut current: Option<(Link, String)> = None;
        let mut attempt: u32 = 0;
        let mut reason = String::new();
        self.emit(ClientEvent::Connection(ConnState::Connecting));
        loop {
            if attempt > 0 {
                let delay = backoff(
                    attempt,
                    self.options.backoff_start,
                    self.options.backoff_cap,
                );
                let last = self
                    .last_contact
                    .lock()
                    .map(|t| t.elapsed().as_secs())
                    .unwrap_or(0);
                self.emit(ClientEvent::Connection(ConnState::Reconnecting {
                    attempt,
                    next_in: delay,
                    last_contact_secs: last,
                    reason: reason.clone(),
                }));
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = self.retry_now.notified() => {}
                }
            }
            attempt += 1;
            // The Hello is made before connecting so a connector can send it with the attach
            // command (one round trip less on every attach and reconnect).
            let hello = Hello {
                protocol: PROTOCOL_VERSION,
                build_id: reasonix_forward::build_id().to_string(),
                client_id: client_id.clone(),
                resume: current.as_ref().map(|(link, id)| ResumeRequest {
                    link_id: id.clone(),
                    received: link.received(),
                }),
                bytes_frames: true,
                early_data: true,
            };
            let transport = match self.connector.connect(&hello).await {
                Ok(t) => t,
                Err(ConnectError::Fatal(msg)) => {
                    self.emit(ClientEvent::Connection(ConnState::Failed {
                        reason: msg,
                        can_create: false,
                    }));
                    return;
                }
                Err(ConnectError::WorkspaceMissing(msg)) => {
                    let asked_before = self.create.load(std::sync::atomic::Ordering::SeqCst);
                    if !self.options.offer_mkdir || asked_before {
                        self.emit(ClientEvent::Connection(ConnState::Failed {
                            reason: msg,
                            can_create: false,
                        }));
                        return;
                    }
                    self.emit(ClientEvent::Connection(ConnState::Failed {
                        reason: msg.clone(),
                        can_create: true,
                    }));
                    // Wait for the user's yes (a no ends the front end, and with it us).
                    while !self.create.load(std::sync::atomic::Ordering::SeqCst) {
                        self.retry_now.notified().await;
                    }
                    if !self.connector.create_workspace() {
                        self.emit(ClientEvent::Connection(ConnState::Failed {
                            reason: msg,
                            can_create: false,
                        }));
                        return;
                    }
                    self.emit(ClientEvent::Connection(ConnState::Connecting));
                    attempt = 0;
                    continue;
                }
                Err(ConnectError::Transient(msg)) => {
                    reason = msg;
                    continue;
                }
            };
            let mut writer = transport.writer;
            let handshake = tokio::time::timeout(Duration::from_secs(30), async {
                if transport.hello_sent {
                    client_handshake_pipelined(transport.reader, 256 * 1024).await
                } else {
                    client_handshake(transport.reader, &mut writer, &hello, 256 * 1024).await
                }
            })
            .await;
            let (reader, welcome) = match handshake {
                Ok(Ok(x)) => x,
                Ok(Err(e)) => {
                    let diag = tail(&transport.diagnostics);
                    let msg = if diag.is_empty() {
                        format!("handshake with the host failed: {e}")
                    } else {
                        format!("handshake with the host failed: {e}; host said: {diag}")
                    };
                    if matches!(
                        e,
                        reasonix_forward::link::LinkError::ProtocolMismatch { .. }
                    ) {
                        self.emit(ClientEvent::Connection(ConnState::Failed {
                            reason: msg,
                            can_create: false,
                        }));
                        return;
                    }
                    reason = msg;
                    continue;
                }
                Err(_) => {
                    reason = "the host did not answer the handshake within 30 s".into();
                    continue;
                }
            };
            let accepted = transport.accept_build.as_deref() == Some(welcome.build_id.as_str());
            if welcome.build_id != reasonix_forward::build_id() && !accepted {
                let reason = if hello.resume.is_some() {
                    format!(
                        "the workspace daemon was replaced by build {} while this reasonix (build {}) was away (another client upgraded it); start this session again with that build's reasonix",
                        welcome.build_id,
                        reasonix_forward::build_id()
                    )
                } else {
                    format!(
                        "build mismatch: reasonix is build {} but the host's reasonix-remote is build {}; rebuild both from the same tree (`cargo build --release`) or let `reasonix ssh` install the matching host binary",
                        reasonix_forward::build_id(),
                        welcome.build_id
                    )
                };
                self.emit(ClientEvent::Connection(ConnState::Failed {
                    reason,
                    can_create: false,
                }));
                return;
            }
            if let Some(refused) = welcome
                .resume_refused
                .clone()
                .filter(|_| welcome.link_id.is_empty())
            {
                self.emit(ClientEvent::Connection(ConnState::Failed {
                    reason: refused,
                    can_create: false,
                }));
                return;
            }
            let resumed = match &current {
                Some((_, id)) if welcome.resumed && *id == welcome.link_id => true,
                Some((old, _)) => {
                    old.close();
                    current = None;
                    false
                }
                None => false,
            };
            // Before the link is published: a request waiting for it (the TUI's first open)
            // must see whether this link is read-only.
            self.read_only.store(
                transport.read_only && welcome.build_id != reasonix_forward::build_id(),
                std::sync::atomic::Ordering::SeqCst,
            );
            let link = match &current {
                Some((link, _)) => link.clone(),
                None => {
                    let (link, inbound) = Link::new(self.options.link.clone());
                    let (rpc, incoming) = Rpc::new(
                        link.clone(),
                        inbound,
                        reasonix_forward::channel::Side::Client,
                    );
                    // Offered before the link is published, so it goes ahead of what a front
                    // end sends (a terminal opened at once gets the agent).
                    if let Some(agent) = &agent {
                        tokio::spawn(crate::agent_fwd::offer(
                            rpc.clone(),
                            Arc::clone(agent),
                            self.events.clone(),
                        ));
                    }
                    self.rpc.send_replace(Some(rpc.clone()));
                    tokio::spawn(serve_incoming(
                        rpc.clone(),
                        incoming,
                        LinkServices {
                            laptop_mcp: self.options.laptop_mcp.clone(),
                            save_rules: SaveRules {
                                home: self.options.config_home.clone(),
                                workspace_key: self.options.workspace_key.clone(),
                                answered_always: Arc::clone(&self.answered_always),
                            },
                            gateway: Arc::clone(&self.gateway),
                            events: self.events.clone(),
                            last_contact: Arc::clone(&self.last_contact),
                            ports: self.options.ports.clone(),
                            laptop_hooks: Arc::new(crate::hooks_laptop::laptop_hooks(
                                &self.options.user_hooks,
                            )),
                            agent: agent.clone(),
                            agent_confirm: Arc::new(self.options.agent_confirm.clone()),
                        },
                    ));
                    if let Some(ports) = self.options.ports.clone() {
                        tokio::spawn(crate::ports::watch(rpc, ports, self.events.clone()));
                    }
                    let had_link = hello.resume.is_some();
                    current = Some((link.clone(), welcome.link_id.clone()));
                    if had_link {
                        self.emit(ClientEvent::Reattached {
                            reason: welcome
                                .resume_refused
                                .clone()
                                .unwrap_or_else(|| "the host could not resume the link".into()),
                        });
                    }
                    link
                }
            };
            if welcome.bytes_frames {
                link.enable_bytes_frames();
            }
            if welcome.early_data {
                link.enable_early_data();
            }
            *self.last_contact.lock_or_recover() = Instant::now();
            self.emit(ClientEvent::Connection(ConnState::Connected { resumed }));
            if let Some(text) = transport.notice.clone() {
                self.emit(ClientEvent::Event(Event {
                    seq: 0,
                    ts: String::new(),
                    turn: 0,
                    kind: reasonix_forward::proto::EventKind::Notice { text },
                }));
            }
            if accepted && welcome.build_id != reasonix_forward::build_id() && transport.read_only {
                self.emit(ClientEvent::Event(Event {
                    seq: 0,
                    ts: String::new(),
                    turn: 0,
                    kind: reasonix_forward::proto::EventKind::Notice {
                        text: format!(
                            "attached read-only to the running daemon of build {} (this is build {}); reconnect after its turn ends to upgrade",
                            welcome.build_id,
                            reasonix_forward::build_id()
                        ),
                    },
                }));
            }
            let err = link.run_transport(reader, writer, welcome.received).await;
            reason = match tail(&transport.diagnostics) {
                d if d.is_empty() => err.to_string(),
                d => format!("{err}; host said: {d}"),
            };
            attempt = 1;
        }
    }
}

fn tail(diag: &Arc<Mutex<String>>) -> String {
    let d = diag.lock_or_recover();
    let t = d.trim();
    let start = t.len().saturating_sub(400);
    let mut s = start;
    while !t.is_char_boundary(s) {
        s += 1;
    }
    t[s..].to_string()
}

/// Delay before attempt `attempt` (>= 1): grows from `start` by 1.6x with ±20% jitter, capped.
pub fn backoff(attempt: u32, start: Duration, cap: Duration) -> Duration {
    let base = start.as_secs_f64() * 1.6f64.powi(attempt.saturating_sub(1).min(20) as i32);
    let jitter = rand::thread_rng().gen_range(0.8..1.2);
    Duration::from_secs_f64((base * jitter).min(cap.as_secs_f64()))
}

/// Where "always allow" rules are saved, and which answers were this client's.
struct SaveRules {
    home: Option<std::path::PathBuf>,
    workspace_key: Option<String>,
    answered_always: AnsweredAlways,
}

/// What the traffic of one link reaches on the laptop ([`serve_incoming`]).
struct LinkServices {
    /// The laptop's MCP servers, when the user config has any.
    laptop_mcp: Option<Arc<crate::mcp_host::McpHost>>,
    /// Where "always allow" rules are saved.
    save_rules: SaveRules,
    /// Model requests and web fetches.
    gateway: Arc<Gateway>,
    /// The front end's events.
    events: mpsc::UnboundedSender<ClientEvent>,
    /// Set at every message from the host (liveness).
    last_contact: Arc<Mutex<Instant>>,
    /// Forwarding of the host's ports, when on.
    ports: Option<Arc<crate::ports::Forwards>>,
    /// The user config's hooks that run on the laptop.
    laptop_hooks: Arc<Vec<reasonix_forward::hooks::HookDecl>>,
    /// The laptop's ssh-agent socket, when forwarded.
    agent: Option<Arc<std::path::PathBuf>>,
    /// Whether and how its signing requests are confirmed.
    agent_confirm: Arc<crate::agent_confirm::AgentConfirm>,
}

async fn serve_incoming(rpc: Rpc, mut incoming: mpsc::Receiver<Incoming>, services: LinkServices) {
    let LinkServices {
        laptop_mcp,
        save_rules,
        gateway,
        events,
        last_contact,
        ports,
        laptop_hooks,
        agent,
        agent_confirm,
    } = services;
    // Everything below reaches the front end in link order, with events that came by
    // reference fetched in their place.
    let notices = events.clone();
    let events = crate::by_ref::OrderedEvents::spawn(rpc.clone(), events);
    // The messages of this link's last provider requests, which later ones extend.
    let mut bases = reasonix_forward::prefix::MessageBases::default();
    let SaveRules {
        home: config_home,
        workspace_key,
        answered_always,
    } = save_rules;
    while let Some(msg) = incoming.recv().await {
        *last_contact.lock_or_recover() = Instant::now();
        match msg {
            Incoming::Request { id, body } => match body {
                Request::ProviderBase {
                    stream_id,
                    messages,
                } => {
                    bases.remember(&stream_id, messages.into());
                    let _ = rpc.respond(id, Ok(Response::Ok)).await;
                }
                Request::McpToken { server, url } => {
                    // A refresh is an HTTP round trip: on a task of its own.
                    let (rpc, home) = (rpc.clone(), config_home.clone());
                    tokio::spawn(async move {
                        let answer =
                            crate::gateway::oauth::token_for_host(home.as_deref(), &server, &url)
                                .await
                                .map(|t| Response::McpToken {
                                    access_token: t.map(reasonix_forward::proto::BearerToken),
                                })
                                .map_err(|e| {
                                    reasonix_forward::proto::RpcError::new(ErrorCode::Mcp, e)
                                });
                        let _ = rpc.respond(id, answer).await;
                    });
                }
                Request::WebFetch(req) => {
                    // On a task of its own: a fetch takes seconds, this loop must not wait.
                    let (rpc, gateway) = (rpc.clone(), Arc::clone(&gateway));
                    tokio::spawn(async move {
                        let answer = gateway.web_fetch(req).await.map(Response::WebFetch);
                        let _ = rpc.respond(id, answer).await;
                    });
                }
                other => {
                    let _ = rpc
                        .respond(
                            id,
                            Err(reasonix_forward::proto::RpcError::new(
                                ErrorCode::BadRequest,
                                format!("the laptop does not serve {other:?}"),
                            )),
                        )
                        .await;
                }
            },
            Incoming::Channel(IncomingChannel { open, offer }) => match open {
                ChannelOpen::Provider(mut req) => {
                    // All the messages, when the host sent only those after an earlier
                    // request's (`reasonix_forward::prefix`); stored, before the channel is
                    // accepted, as the base of the next request. Messages sent by reference
                    // are completed by the relay and never become a base.
                    let tail = std::mem::take(&mut req.messages);
                    let Some(messages) = bases.resolve(req.messages_base.as_ref(), tail) else {
                        let refused = reasonix_forward::proto::RpcError::new(
                            ErrorCode::UnknownMessagesBase,
                            format!(
                                "this laptop no longer holds the messages of request {}",
                                req.messages_base
                                    .as_ref()
                                    .map_or("?", |b| b.stream_id.as_str())
                            ),
                        );
                        tokio::spawn(offer.refuse(refused));
                        continue;
                    };
                    if req.messages_ref.is_none() {
                        bases.remember(&req.stream_id, messages.clone());
                    }
                    req.messages_base = None;
                    // On a task of its own: fetching big messages makes calls on this link,
                    // which must not wait on this loop.
                    tokio::spawn(crate::laptop_channels::relay_provider_stream(
                        rpc.clone(),
                        Arc::clone(&gateway),
                        offer,
                        req,
                        messages,
                    ));
                }
                ChannelOpen::Mcp { server } => {
                    crate::laptop_channels::open_laptop_mcp(laptop_mcp.as_ref(), &server, offer);
                }
                ChannelOpen::Agent(open) => crate::agent_fwd::serve(
                    agent.clone(),
                    Arc::clone(&agent_confirm),
                    notices.clone(),
                    open,
                    offer,
                ),
                other => {
                    let refusal = reasonix_forward::proto::RpcError::new(
                        ErrorCode::BadRequest,
                        format!("the laptop does not serve {} channels", other.kind()),
                    );
                    tokio::spawn(offer.refuse(refusal));
                }
            },
            Incoming::Notify(n) => {
                let ev = match n {
                    Notification::Event(e) => {
                        // A global fact the model remembered (or forgot) with the user's
                        // approval: the laptop owns the global store and applies it.
                        if let Some(home) = &config_home {
                            crate::memory::apply_event(home, &e);
                        }
                        if let (
                            reasonix_forward::proto::EventKind::ApprovalAnswered {
                                approval_id,
                                rule: Some(rule),
                                ..
                            },
                            Some(home),
                        ) = (&e.kind, &config_home)
                        {
                            let mine = answered_always
                                .lock_or_recover()
                                .remove(approval_id);
                            let Some(scope) = mine else {
                                // Another client's answer, or a catch-up of the journal.
                                let _ = events.send(ClientEvent::Event(e));
                                continue;
                            };
                            let scope = scope.unwrap_or_else(|| match &workspace_key {
                                Some(k) => AlwaysScope::Workspace(k.clone()),
                                None => AlwaysScope::Global,
                            });
                            match crate::always_scope::persist_rule(home, rule, &scope) {
                                Ok(true) => tracing::info!("saved permission rule {rule}"),
                                Ok(false) => {}
                                Err(err) => tracing::warn!("{err}"),
                            }
                        }
                        ClientEvent::Event(e)
                    }
                    Notification::State { state, detail } => ClientEvent::State { state, detail },
                    Notification::Role { role, reason } => ClientEvent::Role { role, reason },
                    Notification::ToolProgress { call_id, message } => {
                        ClientEvent::ToolProgress { call_id, message }
                    }
                    Notification::EventByRef {
                        seq,
                        ts,
                        turn,
                        kind,
                        event_ref,
                    } => {
                        events.send_by_ref(crate::by_ref::EventRef {
                            seq,
                            ts,
                            turn,
                            kind,
                            event_ref,
                        });
                        continue;
                    }
                    Notification::Ports { ports: list } => {
                        if let Some(ports) = &ports {
                            let (ports, tx) = (Arc::clone(ports), notices.clone());
                            tokio::spawn(async move {
                                for text in ports.update(list).await {
                                    let _ = tx.send(crate::ports::notice(text));
                                }
                            });
                        }
                        continue;
                    }
                    Notification::HookNotice { input } => {
                        crate::hooks_laptop::run_all(&laptop_hooks, &input);
                        continue;
                    }
                    Notification::Dropped { frames, bytes } => {
                        ClientEvent::Event(Event {
                            seq: 0,
                            ts: String::new(),
                            turn: 0,
                            kind: reasonix_forward::proto::EventKind::Notice {
                                text: format!("{frames} frames ({bytes} bytes) were dropped because the replay window was exceeded"),
                            },
                        })
                    }
                };
                let _ = events.send(ev);
            }
        }
    }
}

/// Client options for a configuration: the laptop-side MCP servers of the user's config
/// (`[[mcp]]` with `run_on = "laptop"`, stdio only) are made available to the host.
pub fn options_for(config: &crate::config::Config) -> (ClientOptions, Vec<String>) {
    let specs: Vec<crate::mcp_host::McpHostSpec> = config
        .mcp
        .iter()
        // Every user-config entry runs on the laptop and has a command (the config loader
        // refuses anything else with the fix); project entries run on the host.
        .filter(|m| m.runs_on() == crate::config::McpRunOn::Laptop)
        .filter_map(|m| {
            m.command.as_ref().map(|command| {
                // Laptop servers inherit the laptop's environment minus the provider keys:
                // a server's output goes to the host, so it must never be able to echo a key.
                let mut env = m.env.clone();
                for p in &config.providers {
                    env.entry(p.api_key_env.clone()).or_default();
                }
                crate::mcp_host::McpHostSpec {
                    name: m.name.clone(),
                    command: command.clone(),
                    args: m.args.clone(),
                    env,
                    cwd: None,
                }
            })
        })
        .collect();
    // HTTP servers of the user's config: the laptop reaches them with its own sign-in token.
    let http: Vec<&reasonix_forward::policy::McpServerSpec> = config
        .mcp
        .iter()
        .filter(|m| m.runs_on() == crate::config::McpRunOn::Laptop && m.command.is_none())
        .filter(|m| m.url.is_some())
        .collect();
    let mut names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    names.extend(http.iter().map(|m| m.name.clone()));
    let mut opts = ClientOptions {
        config_home: Some(config.home.clone()),
        workspace_key: config.workspace_key.clone(),
        user_hooks: config.hooks.clone(),
        agent_confirm: crate::agent_confirm::AgentConfirm {
            confirm: config.sandbox.ssh_agent_confirm,
            approved: config.sandbox.ssh_agent_approved.clone(),
        },
        ..ClientOptions::default()
    };
    if !names.is_empty() {
        let mut host = crate::mcp_host::McpHost::new(specs);
        for m in http {
            let url = m.url.clone().unwrap_or_default();
            let opener = crate::gateway::mcp_http::opener(
                &m.name,
                &url,
                m.headers.clone(),
                config.home.clone(),
            );
            host = host.with_opener(&m.name, opener);
        }
        opts.laptop_mcp = Some(Arc::new(host));
    }
    (opts, names)
}
