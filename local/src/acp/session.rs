//! One ACP session: a [`Client`] on one daemon session, driven by the editor's prompts, its
//! events streamed back as `session/update`s, its approvals asked through
//! `session/request_permission`.
//!
//! The actor owns everything mutable of the session; the dispatcher talks to it through
//! [`SessionHandle`]. Link drops are the client's business (it resumes or re-attaches); the
//! editor sees a notice, the prompt goes on, and because every submit carries one request id
//! nothing runs twice.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::v1::schema as acp;
use reasonix_forward::proto::{
    ApprovalDecision, ClientRole, ErrorCode, EventKind, OpenSession, Request, Response,
    RewindScope, SessionOpened, SessionSettings, TurnOutcome, TurnState,
};
use reasonix_forward::rpc::CallError;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::rpc::Peer;
use super::translate::{chunk, Translator};
use crate::client::{Client, ClientEvent, ConnState};
use crate::config::Config;
use crate::connect::Connector;
use crate::gateway::Gateway;

mod agent_sign;
mod cancel_child;
mod elicit;
mod plan;
mod rewind_memory;
pub(crate) use plan::modes;

/// Everything a session needs to start.
pub struct SessionSpec {
    /// The laptop configuration (provider keys stay here).
    pub config: Config,
    /// How to reach the workspace daemon.
    pub connector: Arc<dyn Connector>,
    /// The workspace root as the editor named it; replaced by the host's own path once the
    /// session says it (`SessionStarted`).
    pub workspace: PathBuf,
    /// Model label chosen on the command line.
    pub model: Option<String>,
    /// Adds what the user can do to a failure reason (SSH: the prompts the editor could not
    /// answer).
    pub explain: Option<Explain>,
}

/// See [`SessionSpec::explain`].
pub type Explain = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// Whether to start a session or resume one.
#[derive(Debug, Clone)]
pub enum Opening {
    /// `session/new`.
    New,
    /// `session/load` of this session id.
    Load(String),
}

/// The dispatcher's handle on a running session.
pub struct SessionHandle {
    tx: mpsc::UnboundedSender<Cmd>,
    client: Client,
    home: PathBuf,
    /// Plan mode is on in the session (as its events said so far).
    plan_on: Arc<std::sync::atomic::AtomicBool>,
}

impl SessionHandle {
    /// Read the custom commands (the user's files here, the workspace's from the host),
    /// hand them to the session so its prompts expand them, and return them for
    /// `available_commands_update`.
    pub async fn load_commands(&self) -> crate::commands::CommandSet {
        let set = crate::commands::load(
            &self.client,
            &self.home,
            &crate::tui::builtin_command_names(),
        )
        .await;
        let _ = self.tx.send(Cmd::Commands(set.clone()));
        set
    }

    /// Run a prompt; the answer goes to `id` when the turn ends.
    pub fn prompt(&self, id: Value, text: String) -> Result<(), acp::Error> {
        self.tx.send(Cmd::Prompt { id, text }).map_err(|_| gone())
    }

    /// Cancel the running prompt, if any.
    pub fn cancel(&self) {
        let _ = self.tx.send(Cmd::Cancel);
    }

    /// Plan mode is on in the session (as its events said so far).
    pub fn plan_mode(&self) -> bool {
        self.plan_on.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `session/set_mode`: answered on `id` once the host applied it.
    pub fn set_mode(&self, id: Value, mode: String) -> Result<(), acp::Error> {
        self.tx.send(Cmd::SetMode { id, mode }).map_err(|_| gone())
    }
}

fn gone() -> acp::Error {
    acp::Error::internal_error()
        .data("this session's connection to the host has ended; open it again with session/load")
}

enum Cmd {
    Prompt { id: Value, text: String },
    Cancel,
    Commands(crate::commands::CommandSet),
    SetMode { id: Value, mode: String },
}

/// Results of work the actor started on tasks of their own.
enum Done {
    Opened(Result<SessionOpened, CallError>),
    /// The submit (or continue) of the running prompt failed for good.
    PromptFailed(String, acp::Error),
    /// A slash command that needs no turn finished with this text.
    Reply(Value, Result<String, acp::Error>),
    /// The user answered a plan's permission request (`None`: revise or dismissed).
    PlanAnswered(String, Option<reasonix_forward::proto::PlanDecision>),
}

/// What an approval asks about.
struct Asked {
    call_id: Option<String>,
    tool: String,
    arguments: String,
    /// The rule "always allow" would store; `None` when it can only allow for the session.
    always_rule: Option<String>,
}

/// A prompt waiting for its turn to end.
struct Prompt {
    id: Value,
    request_id: String,
    text: String,
    /// The turn number, once the host said it (`UserTurn` with our request id), or the
    /// paused turn a `/continue` resumes.
    turn: Option<u64>,
    cancel_asked: bool,
}

/// Start the session and return once it is open (for `Load`: once its history was sent as
/// updates). The answer is the session id.
pub async fn open(
    spec: SessionSpec,
    opening: Opening,
    peer: Peer,
    notices: bool,
) -> Result<(String, SessionHandle), acp::Error> {
    let gateway = Arc::new(Gateway::new(&spec.config));
    let (mut client_opts, laptop_mcp) = crate::client::options_for(&spec.config);
    // The host's ports are forwarded to the editor's machine and announced as notices.
    client_opts.ports = Some(crate::ports::Forwards::new(spec.config.ports.clone()));
    let (client, events) = Client::start(Arc::clone(&spec.connector), gateway, client_opts);
    let home = spec.config.home.clone();
    let settings = SessionSettings {
        model: spec.model.clone().or(spec.config.default_model.clone()),
        // The editor answers approvals.
        headless: false,
        max_steps: Some(spec.config.agent.max_steps),
        policy: spec.config.session_policy(),
        laptop_mcp,
        context: spec.config.context_settings(spec.model.as_deref()),
        effort: spec.config.session_effort(spec.model.as_deref()),
        memory: crate::memory::session_settings(&spec.config.home, false),
        planner_model: spec.config.agent.planner_model.clone(),
        skills: crate::skills::session_settings(&spec.config),
        delegation: spec.config.delegation_settings(),
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let (opened_tx, opened_rx) = oneshot::channel();
    let (done_tx, done_rx) = mpsc::unbounded_channel();
    let actor = Actor {
        session: match &opening {
            Opening::New => None,
            Opening::Load(id) => Some(id.clone()),
        },
        loading: matches!(opening, Opening::Load(_)),
        client: client.clone(),
        peer,
        notices,
        commands: crate::commands::CommandSet::default(),
        settings,
        translator: Translator::new(spec.workspace.clone()),
        last_seq: 0,
        catch_up_to: None,
        opened_reply: Some(opened_tx),
        prompt: None,
        unanswered: HashMap::new(),
        paused_turn: None,
        dead: None,
        done: done_tx,
        explain: spec.explain.clone(),
        plan: plan::PlanAcp::default(),
        plan_on: Arc::default(),
        goal: crate::goal::GoalView::default(),
        goal_budgets: spec.config.goal_budgets(spec.model.as_deref()),
        keeper_config: spec.config.clone(),
        remembered: Vec::new(),
        home: home.clone(),
    };
    let plan_on = Arc::clone(&actor.plan_on);
    tokio::spawn(actor.run(events, rx, done_rx));
    let id = opened_rx.await.map_err(|_| gone())??;
    Ok((
        id,
        SessionHandle {
            tx,
            client,
            home,
            plan_on,
        },
    ))
}

struct Actor {
    session: Option<String>,
    loading: bool,
    client: Client,
    peer: Peer,
    notices: bool,
    /// The custom commands prompts expand (empty until [`SessionHandle::load_commands`]).
    commands: crate::commands::CommandSet,
    settings: SessionSettings,
    translator: Translator,
    last_seq: u64,
    /// While loading: the highest journal seq at the open; the answer waits for it.
    catch_up_to: Option<u64>,
    opened_reply: Option<oneshot::Sender<Result<String, acp::Error>>>,
    prompt: Option<Prompt>,
    /// Approvals seen while catching up and not answered yet, asked once caught up.
    unanswered: HashMap<String, Asked>,
    paused_turn: Option<u64>,
    /// Why the session cannot go on (the connection failed for good).
    dead: Option<String>,
    done: mpsc::UnboundedSender<Done>,
    explain: Option<Explain>,
    /// Plan mode's permission request and the prompt answer it holds back.
    plan: plan::PlanAcp,
    /// Shared with the handle (`session/load` reports the current mode).
    plan_on: Arc<std::sync::atomic::AtomicBool>,
    /// The session's goal as its events said so far (`/goal status`).
    goal: crate::goal::GoalView,
    /// `[agent]` goal budgets, sent with `/goal OBJECTIVE`.
    goal_budgets: reasonix_forward::proto::GoalBudgets,
    /// The laptop config a goal keeper starts with ([`crate::keeper`]).
    keeper_config: Config,
    /// (turn, fact id) of every fact a `remember` of this session wrote, as its events said:
    /// a `/rewind` offers to forget those of the rewound turns.
    remembered: Vec<(u64, String)>,
    /// The laptop's config home (its global memory store).
    home: std::path::PathBuf,
}

impl Actor {
    async fn run(
        mut self,
        mut events: mpsc::UnboundedReceiver<ClientEvent>,
        mut cmds: mpsc::UnboundedReceiver<Cmd>,
        mut done: mpsc::UnboundedReceiver<Done>,
    ) {
        self.open();
        loop {
            tokio::select! {
                ev = events.recv() => match ev {
                    Some(ev) => self.client_event(ev),
                    None => {
                        self.fail("the connection to the host ended".into());
                        return;
                    }
                },
                cmd = cmds.recv() => match cmd {
                    Some(cmd) => self.command(cmd),
                    // The editor went away: nothing is left to report to.
                    None => return,
                },
                Some(d) = done.recv() => self.finished(d),
            }
            if self.opened_reply.is_none() && self.dead.is_some() && self.prompt.is_none() {
                // Keep answering prompts with the reason until the editor lets go.
                while let Some(cmd) = cmds.recv().await {
                    if let Cmd::Prompt { id, .. } = cmd {
                        self.peer.respond(
                            id,
                            Err(acp::Error::internal_error()
                                .data(self.dead.clone().unwrap_or_default())),
                        );
                    }
                }
                return;
            }
        }
    }

    fn open(&mut self) {
        let open = OpenSession {
            // Filled in by the client (user hooks and trust records).
            hooks: Default::default(),
            session: self.session.clone(),
            new: self.session.is_none(),
            since: self.last_seq,
            read_only: false,
            takeover: false,
            settings: self.settings.clone(),
            keeper: false,
        };
        let client = self.client.clone();
        let done = self.done.clone();
        tokio::spawn(async move {
            let r = client.open_session(open).await;
            let _ = done.send(Done::Opened(r));
        });
    }

    fn update(&self, update: acp::SessionUpdate) {
        let Some(id) = &self.session else { return };
        self.peer.notify(
            "session/update",
            &acp::SessionNotification::new(id.clone(), update),
        );
    }

    /// A status line for the user that is not part of the conversation: an ACP notice when
    /// the editor shows them, else a thought chunk (the one place every editor shows text
    /// that is not the answer).
    fn notice(&self, text: &str) {
        if self.notices {
            self.update(acp::SessionUpdate::Notice(acp::Notice::new(
                acp::NoticeSeverity::Info,
                text.to_string(),
            )));
        } else {
            self.update(acp::SessionUpdate::AgentThoughtChunk(chunk(&format!(
                "[reasonix] {text}\n"
            ))));
        }
    }

    fn fail(&mut self, reason: String) {
        let reason = match &self.explain {
            Some(f) => f(&reason),
            None => reason,
        };
        if let Some(tx) = self.opened_reply.take() {
            let _ = tx.send(Err(acp::Error::internal_error().data(reason.clone())));
        }
        if let Some(p) = self.prompt.take() {
            self.peer
                .respond(p.id, Err(acp::Error::internal_error().data(reason.clone())));
        }
        self.dead = Some(reason);
    }

    fn client_event(&mut self, ev: ClientEvent) {
        match ev {
            ClientEvent::Connection(ConnState::Failed { reason, .. }) => self.fail(reason),
            ClientEvent::Connection(ConnState::Reconnecting {
                attempt, reason, ..
            }) => {
                if attempt == 1 {
                    self.notice(&format!(
                        "connection to the host lost ({reason}); reconnecting, the turn goes on"
                    ));
                }
            }
            ClientEvent::Connection(ConnState::Connected { resumed: true }) => {
                self.notice("reconnected; the session resumed where it was");
            }
            ClientEvent::Connection(ConnState::Connecting | ConnState::Connected { .. }) => {}
            ClientEvent::Reattached { reason } => {
                self.notice(&format!("{reason}; re-attaching to the session"));
                self.open();
            }
            ClientEvent::AgentSign(ask) => self.ask_agent_sign(ask),
            ClientEvent::State { state, detail } => match state {
                TurnState::WaitingForLaptop => {
                    self.notice(detail.as_deref().unwrap_or("waiting for the laptop"))
                }
                TurnState::Idle
                | TurnState::Running
                | TurnState::WaitingForApproval
                | TurnState::Paused => {}
            },
            ClientEvent::Role { role, reason } => match role {
                ClientRole::Spectator => self.notice(&reason),
                ClientRole::Driver => {}
            },
            ClientEvent::ToolProgress { .. } => {}
            ClientEvent::Event(e) => {
                if e.seq == 0 {
                    if let EventKind::Notice { text } = &e.kind {
                        self.notice(text);
                    }
                    return;
                }
                if e.seq <= self.last_seq {
                    return;
                }
                self.last_seq = e.seq;
                self.journal_event(e.turn, &e.kind);
                self.maybe_caught_up();
            }
        }
    }

    fn journal_event(&mut self, turn: u64, kind: &EventKind) {
        let mut own = false;
        if let EventKind::UserTurn { request_id, .. } = kind {
            if let Some(p) = self.prompt.as_mut() {
                if *request_id == p.request_id {
                    p.turn = Some(turn);
                    own = true;
                    if p.cancel_asked {
                        self.send_cancel();
                    }
                }
            }
        }
        for u in self.translator.event(kind, own) {
            self.update(u);
        }
        self.goal.observe(kind);
        if let Some(fact) = reasonix_forward::memory::rewind::remembered_fact(kind) {
            self.remembered.push((turn, fact));
        }
        match kind {
            EventKind::ApprovalRequested {
                approval_id,
                call_id,
                tool,
                arguments,
                always_rule,
                ..
            } => {
                let asked = Asked {
                    call_id: call_id.clone(),
                    tool: tool.clone(),
                    arguments: arguments.clone(),
                    always_rule: always_rule.clone(),
                };
                if self.catch_up_to.is_some() || self.opened_reply.is_some() {
                    self.unanswered.insert(approval_id.clone(), asked);
                } else {
                    self.ask_permission(approval_id.clone(), asked);
                }
            }
            EventKind::ApprovalAnswered { approval_id, .. } => {
                self.unanswered.remove(approval_id);
            }
            EventKind::ElicitationRequested {
                elicitation_id,
                server,
                message,
                schema,
            } if self.catch_up_to.is_none() && self.opened_reply.is_none() => {
                self.ask_elicitation(elicitation_id.clone(), server, message, schema);
            }
            EventKind::Notice { text } => self.notice(text),
            EventKind::Plan(p) => self.plan_event(p),
            EventKind::ProviderRetry(r) => self.notice(&r.describe(r.delay_ms.div_ceil(1000))),
            EventKind::TurnFinished { outcome, detail } => {
                self.paused_turn = (*outcome == TurnOutcome::Paused).then_some(turn);
                if self.prompt.as_ref().and_then(|p| p.turn) == Some(turn)
                    && !self.plan_defers(*outcome, detail.as_deref())
                {
                    if let Some(p) = self.prompt.take() {
                        self.peer
                            .respond_with(p.id, stop_reason(*outcome, detail.as_deref()));
                    }
                }
            }
            EventKind::SessionStarted { .. }
            | EventKind::UserTurn { .. }
            | EventKind::TextDelta { .. }
            | EventKind::ReasoningDelta { .. }
            | EventKind::AssistantMessage { .. }
            | EventKind::ToolStarted { .. }
            | EventKind::ToolFinished { .. }
            | EventKind::Usage { .. }
            | EventKind::Checkpoint { .. }
            | EventKind::Goal(_)
            | EventKind::Steer { .. }
            | EventKind::SteerInjected { .. }
            | EventKind::ElicitationRequested { .. }
            | EventKind::ElicitationAnswered { .. }
            | EventKind::ShellRan { .. }
            | EventKind::Subagent { .. }
            | EventKind::Planner { .. } => {}
            EventKind::Compacted {
                kind,
                trigger,
                tokens_before,
                tokens_after,
                snipped,
                archived,
                ..
            } => self.notice(&crate::context::compaction_line(
                *kind,
                *trigger,
                *tokens_before,
                *tokens_after,
                snipped.len().max(archived.len()),
            )),
        }
    }

    /// Answer `session/load` once the history up to the open is out.
    fn maybe_caught_up(&mut self) {
        let Some(to) = self.catch_up_to else { return };
        if self.last_seq < to {
            return;
        }
        self.catch_up_to = None;
        if let (Some(tx), Some(id)) = (self.opened_reply.take(), self.session.clone()) {
            let _ = tx.send(Ok(id));
        }
        for (approval_id, asked) in std::mem::take(&mut self.unanswered) {
            self.ask_permission(approval_id, asked);
        }
        self.plan_caught_up();
    }

    fn opened(&mut self, opened: SessionOpened) {
        let first = self.opened_reply.is_some();
        self.session = Some(opened.session.clone());
        if let Some(n) = &opened.notice {
            self.notice(n);
        }
        if opened.role == ClientRole::Spectator {
            self.notice("another client drives this session: prompts are refused until it lets go");
        }
        if first {
            if self.loading {
                self.catch_up_to = Some(opened.last_seq);
                self.maybe_caught_up();
            } else if let Some(tx) = self.opened_reply.take() {
                let _ = tx.send(Ok(opened.session));
            }
            return;
        }
        // A re-attach: a prompt whose turn the host has not confirmed is submitted again
        // with the same request id (answered as a duplicate if it did arrive).
        if let Some(p) = &self.prompt {
            if p.turn.is_none() {
                self.submit(p.request_id.clone(), p.text.clone());
            }
        }
    }

    fn finished(&mut self, d: Done) {
        match d {
            Done::Opened(Ok(o)) => self.opened(o),
            Done::Opened(Err(CallError::Remote(e))) => {
                if self.opened_reply.is_some() {
                    let err = if e.code == ErrorCode::NotFound {
                        acp::Error::resource_not_found(None).data(e.message)
                    } else {
                        acp::Error::internal_error().data(e.message)
                    };
                    if let Some(tx) = self.opened_reply.take() {
                        let _ = tx.send(Err(err));
                    }
                    self.dead = Some("the session could not be opened".into());
                } else {
                    self.notice(&format!("re-opening the session failed: {}", e.message));
                }
            }
            // The link was replaced while opening: the Reattached event opens again.
            Done::Opened(Err(CallError::Link(_))) => {}
            Done::PromptFailed(rid, err) => {
                if self.prompt.as_ref().map(|p| p.request_id == rid) == Some(true) {
                    if let Some(p) = self.prompt.take() {
                        self.peer.respond(p.id, Err(err));
                    }
                }
            }
            Done::PlanAnswered(plan_id, choice) => self.plan_answered(plan_id, choice),
            Done::Reply(id, r) => match r {
                Ok(text) => {
                    self.update(acp::SessionUpdate::AgentMessageChunk(chunk(&text)));
                    self.peer
                        .respond_with(id, Ok(acp::PromptResponse::new(acp::StopReason::EndTurn)));
                }
                Err(e) => self.peer.respond(id, Err(e)),
            },
        }
    }

    fn command(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Commands(set) => self.commands = set,
            Cmd::SetMode { id, mode } => self.set_mode(id, mode),
            Cmd::Cancel => {
                if let Some(p) = self.prompt.as_mut() {
                    p.cancel_asked = true;
                    self.send_cancel();
                }
            }
            Cmd::Prompt { id, text } => {
                if let Some(reason) = &self.dead {
                    self.peer
                        .respond(id, Err(acp::Error::internal_error().data(reason.clone())));
                    return;
                }
                if self.prompt.is_some() {
                    self.peer.respond(
                        id,
                        Err(acp::Error::invalid_request()
                            .data("a prompt is already running in this session; cancel it first")),
                    );
                    return;
                }
                match super::commands::parse(&text) {
                    Some(Ok(cmd)) => self.slash(id, cmd),
                    Some(Err(msg)) => self
                        .peer
                        .respond(id, Err(acp::Error::invalid_params().data(msg))),
                    None => {
                        // A custom command becomes its expanded prompt, as in the TUI; other
                        // text (a path that starts with `/` included) goes as typed.
                        let text = self.commands.expand_line(text.trim()).unwrap_or(text);
                        let request_id = format!("acp-{:016x}", rand::random::<u64>());
                        self.prompt = Some(Prompt {
                            id,
                            request_id: request_id.clone(),
                            text: text.clone(),
                            turn: None,
                            cancel_asked: false,
                        });
                        self.submit(request_id, text);
                    }
                }
            }
        }
    }

    fn slash(&mut self, id: Value, cmd: super::commands::Command) {
        use super::commands::Command;
        let client = self.client.clone();
        let done = self.done.clone();
        match cmd {
            Command::Continue => {
                let Some(turn) = self.paused_turn else {
                    self.finished(Done::Reply(
                        id,
                        Ok("Nothing to continue: no turn is paused.".into()),
                    ));
                    return;
                };
                let request_id = format!("acp-continue-{:016x}", rand::random::<u64>());
                self.prompt = Some(Prompt {
                    id,
                    request_id: request_id.clone(),
                    text: String::new(),
                    turn: Some(turn),
                    cancel_asked: false,
                });
                tokio::spawn(async move {
                    let r = client
                        .request(Request::ContinueTurn {
                            request_id: request_id.clone(),
                        })
                        .await;
                    if let Err(e) = r {
                        let _ = done.send(Done::PromptFailed(request_id, rpc_error(e)));
                    }
                });
            }
            Command::Status => {
                tokio::spawn(async move {
                    let r = match client.request(Request::Status).await {
                        Ok(Response::Status(s)) => Ok(format!(
                            "Host daemon: build {}, workspace {}, up {} s, sandbox: {}, {} session(s), {} client(s) attached.",
                            s.build_id,
                            s.workspace,
                            s.uptime_secs,
                            s.sandbox,
                            s.sessions,
                            s.clients
                        )),
                        Ok(other) => Err(acp::Error::internal_error()
                            .data(format!("unexpected answer {other:?}"))),
                        Err(e) => Err(rpc_error(e)),
                    };
                    let _ = done.send(Done::Reply(id, r));
                });
            }
            Command::Goal(arg) => self.goal_command(id, &arg),
            Command::Rewind { to_turn, scope } => self.rewind_command(id, to_turn, scope),
        }
    }

    /// `/goal`: `status` answers from the events seen; anything else is a goal request.
    /// A start answers once the host took it: the goal's turns then stream in as the
    /// session's events, and go on on the host with or without this editor.
    fn goal_command(&mut self, id: Value, arg: &str) {
        use reasonix_forward::proto::GoalAction;
        let mut action = match crate::goal::parse(arg) {
            crate::goal::GoalCommand::Status => {
                let line = self.goal.line();
                self.finished(Done::Reply(id, Ok(line)));
                return;
            }
            crate::goal::GoalCommand::Act(a) => a,
        };
        if let GoalAction::Start { budgets, .. } = &mut action {
            *budgets = self.goal_budgets.clone();
        }
        let keeper = self
            .session
            .clone()
            .map(|s| (self.keeper_config.clone(), s));
        let client = self.client.clone();
        let done = self.done.clone();
        tokio::spawn(async move {
            let request_id = format!("acp-goal-{:016x}", rand::random::<u64>());
            let what = match &action {
                GoalAction::Start { objective, .. } => format!(
                    "Goal started: {objective}. It runs on the host turn after turn, also with no editor attached; /goal status shows its progress."
                ),
                GoalAction::Pause => "Goal paused; /goal resume continues.".into(),
                GoalAction::Resume => "Goal resumed.".into(),
                GoalAction::Clear => "Goal stopped.".into(),
            };
            let keeps = matches!(action, GoalAction::Start { .. } | GoalAction::Resume);
            let r = match client.goal_request(&request_id, action).await {
                // The goal goes on when the editor closes: its keeper serves the model.
                Ok(_) if keeps => match keeper {
                    Some((config, session)) => Ok(format!(
                        "{what} {}",
                        crate::keeper::start(&config, &session).line()
                    )),
                    None => Ok(what),
                },
                Ok(_) => Ok(what),
                Err(e) => Err(rpc_error(e)),
            };
            let _ = done.send(Done::Reply(id, r));
        });
    }

    fn submit(&self, request_id: String, text: String) {
        let client = self.client.clone();
        let done = self.done.clone();
        tokio::spawn(async move {
            match client.submit_turn(&request_id, &text).await {
                Ok(_) => {}
                // The link was replaced: the re-open submits again.
                Err(CallError::Link(_)) => {}
                Err(e) => {
                    let _ = done.send(Done::PromptFailed(request_id, rpc_error(e)));
                }
            }
        });
    }

    fn send_cancel(&self) {
        let client = self.client.clone();
        tokio::spawn(async move {
            let req = Request::Cancel {
                request_id: format!("acp-cancel-{:016x}", rand::random::<u64>()),
            };
            if let Err(e) = client.request(req).await {
                tracing::info!("cancel not applied: {e}");
            }
        });
    }

    fn ask_permission(&self, approval_id: String, asked: Asked) {
        let Some(session) = self.session.clone() else {
            return;
        };
        let Asked {
            call_id,
            tool,
            arguments,
            always_rule,
        } = asked;
        // The call the approval names; for journals older than `call_id`, the queued call
        // with the same tool and arguments.
        let call_id = call_id
            .or_else(|| self.translator.call_for_approval(&tool, &arguments))
            .unwrap_or_else(|| approval_id.clone());
        let request = acp::RequestPermissionRequest::new(
            session,
            self.translator.permission_call(&call_id, &tool, &arguments),
            vec![
                acp::PermissionOption::new(
                    ALLOW_ONCE,
                    "Allow once",
                    acp::PermissionOptionKind::AllowOnce,
                ),
                acp::PermissionOption::new(
                    ALLOW_ALWAYS,
                    allow_always_label(always_rule.as_deref()),
                    acp::PermissionOptionKind::AllowAlways,
                ),
                acp::PermissionOption::new(REJECT, "Reject", acp::PermissionOptionKind::RejectOnce),
            ],
        );
        let peer = self.peer.clone();
        let client = self.client.clone();
        let done = self.done.clone();
        tokio::spawn(async move {
            let answer = peer.request("session/request_permission", &request).await;
            let decision = match answer.and_then(|v| {
                serde_json::from_value::<acp::RequestPermissionResponse>(v)
                    .map_err(|e| acp::Error::invalid_params().data(e.to_string()))
            }) {
                Ok(r) => decision_of(&r.outcome),
                Err(e) => {
                    // Fail closed: an editor that cannot answer gets a denial.
                    tracing::warn!("permission request failed: {e:?}; denying");
                    ApprovalDecision::Deny
                }
            };
            let req = Request::Approve {
                request_id: format!("acp-approve-{approval_id}"),
                approval_id,
                decision,
            };
            if let Err(e) = client.request(req).await {
                tracing::info!("approval answer not applied: {e}");
            }
            drop(done);
        });
    }
}

/// The label of the `allow_always` option: the rule it saves, or, when the host would store
/// none (a dangerous call, or one whose effect is not fixed by its words), that it only
/// allows for this session, said before the user picks it.
fn allow_always_label(always_rule: Option<&str>) -> String {
    match always_rule {
        Some(rule) => {
            format!("Always allow in this workspace (saves `{rule}` to the reasonix config)")
        }
        None => "Allow for this session (this call cannot be saved as a rule)".to_string(),
    }
}

const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const REJECT: &str = "reject";

fn decision_of(outcome: &acp::RequestPermissionOutcome) -> ApprovalDecision {
    match outcome {
        acp::RequestPermissionOutcome::Selected(s) => match s.option_id.0.as_ref() {
            ALLOW_ONCE => ApprovalDecision::AllowOnce,
            ALLOW_ALWAYS => ApprovalDecision::AllowAlways,
            _ => ApprovalDecision::Deny,
        },
        acp::RequestPermissionOutcome::Cancelled => ApprovalDecision::Deny,
        // A future outcome this build does not know: fail closed.
        #[allow(unreachable_patterns)]
        _ => ApprovalDecision::Deny,
    }
}

fn rpc_error(e: CallError) -> acp::Error {
    match e {
        CallError::Remote(e) if e.code == ErrorCode::BadRequest => {
            acp::Error::invalid_params().data(e.message)
        }
        CallError::Remote(e) => acp::Error::internal_error().data(e.message),
        CallError::Link(e) => acp::Error::internal_error().data(e.to_string()),
    }
}

/// How a turn's outcome ends an ACP prompt.
fn stop_reason(
    outcome: TurnOutcome,
    detail: Option<&str>,
) -> Result<acp::PromptResponse, acp::Error> {
    let reason = match outcome {
        TurnOutcome::Completed => acp::StopReason::EndTurn,
        TurnOutcome::Cancelled => acp::StopReason::Cancelled,
        TurnOutcome::Paused => acp::StopReason::MaxTurnRequests,
        TurnOutcome::Interrupted | TurnOutcome::Failed | TurnOutcome::Unknown => {
            return Err(acp::Error::internal_error().data(format!(
                "the turn {outcome}{}",
                detail.map(|d| format!(": {d}")).unwrap_or_default()
            )))
        }
    };
    Ok(acp::PromptResponse::new(reason))
}

/// Keep the scope type in one place for the command parser.
pub(super) type Scope = RewindScope;

#[cfg(test)]
mod tests {
    use super::allow_always_label;

    #[test]
    fn the_always_option_says_what_it_saves_or_that_it_saves_nothing() {
        let saves = allow_always_label(Some("Bash(cargo test:*)"));
        assert!(saves.contains("`Bash(cargo test:*)`"), "{saves}");
        let none = allow_always_label(None);
        assert!(
            none.contains("this session") && none.contains("cannot be saved"),
            "{none}"
        );
    }
}
