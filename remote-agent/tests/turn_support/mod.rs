//! In-process rig for the turn runner: a real [`Session`] (real journal, tools, policy and
//! workspace in temp dirs) driven by a scripted fake of the host-side [`DriverLink`], so the
//! turn logic is tested without a laptop, a link or a provider.
//!
//! The fake answers each `start_stream` with the next scripted [`Reply`] and records every
//! [`ProviderRequest`] it was given, so a test can assert on exactly what the model saw.

#![allow(dead_code, clippy::unwrap_used)] // shared by the turn tests; tests may unwrap

use std::collections::VecDeque;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reasonix_forward::policy::{BashSandbox, PermissionMode, SessionPolicy};
use reasonix_forward::proto::{
    Event, EventKind, ProviderChunk, ProviderRequest, SessionSettings, ToolCall, TurnOutcome,
    TurnState, Usage,
};
use reasonix_remote::paths::HostPaths;
use reasonix_remote::session::{DriverLink, ProviderStream, Session, PROVIDER_CHUNK_BUFFER};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

/// How long any wait of a test may take before it fails with the events so far.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// A point in a scripted reply where the fake waits until the test opens it.
#[derive(Clone)]
pub struct Gate(Arc<watch::Sender<bool>>);

impl Gate {
    pub fn new() -> Gate {
        Gate(Arc::new(watch::channel(false).0))
    }

    /// Let the reply go on past this point.
    pub fn open(&self) {
        self.0.send_replace(true);
    }
}

impl Default for Gate {
    fn default() -> Self {
        Gate::new()
    }
}

enum Step {
    Chunk(ProviderChunk),
    Gate(Gate),
    /// Keep the stream open without sending anything until the session lets go of it.
    Hang,
}

/// One scripted provider reply: the chunks the stream yields, in order. A reply that ends
/// without `done`, `error` or `hang` ends the stream the way a gateway whose link is gone
/// for good does (the channel closes without a final chunk).
#[derive(Default)]
pub struct Reply {
    steps: Vec<Step>,
}

impl Reply {
    pub fn new() -> Reply {
        Reply::default()
    }

    /// A final answer: one text chunk, then `done`.
    pub fn answer(text: &str) -> Reply {
        Reply::new().text(text).done()
    }

    /// One tool call, then `done`.
    pub fn call(id: &str, name: &str, args: Value) -> Reply {
        Reply::new().tool(id, name, args).done()
    }

    pub fn text(mut self, text: &str) -> Reply {
        self.steps
            .push(Step::Chunk(ProviderChunk::Text { text: text.into() }));
        self
    }

    pub fn tool(mut self, id: &str, name: &str, args: Value) -> Reply {
        self.steps
            .push(Step::Chunk(ProviderChunk::ToolCall(ToolCall {
                id: id.into(),
                name: name.into(),
                arguments: args.to_string(),
            })));
        self
    }

    /// A tool call whose arguments are `arguments` verbatim (possibly not JSON).
    pub fn raw_tool(mut self, id: &str, name: &str, arguments: &str) -> Reply {
        self.steps
            .push(Step::Chunk(ProviderChunk::ToolCall(ToolCall {
                id: id.into(),
                name: name.into(),
                arguments: arguments.into(),
            })));
        self
    }

    pub fn usage(mut self, usage: Usage) -> Reply {
        self.steps.push(Step::Chunk(ProviderChunk::Usage(usage)));
        self
    }

    pub fn done(mut self) -> Reply {
        self.steps.push(Step::Chunk(ProviderChunk::Done {
            finish_reason: Some("stop".into()),
            model: "fake-model-v1".into(),
        }));
        self
    }

    /// `done`, reporting `model` as the model that answered.
    pub fn done_as(mut self, model: &str) -> Reply {
        self.steps.push(Step::Chunk(ProviderChunk::Done {
            finish_reason: Some("stop".into()),
            model: model.into(),
        }));
        self
    }

    pub fn error(mut self, message: &str, retryable: bool) -> Reply {
        self.steps.push(Step::Chunk(ProviderChunk::Error {
            message: message.into(),
            retryable,
        }));
        self
    }

    /// Wait here until `gate` is opened.
    pub fn gate(mut self, gate: &Gate) -> Reply {
        self.steps.push(Step::Gate(gate.clone()));
        self
    }

    /// Keep the stream open, sending nothing more.
    pub fn hang(mut self) -> Reply {
        self.steps.push(Step::Hang);
        self
    }
}

/// A scripted [`DriverLink`]: each provider stream plays the next [`Reply`] of its queue.
pub struct FakeGateway {
    id: u64,
    script: Mutex<VecDeque<Reply>>,
    /// Replies for requests whose first user message contains a key (subagents, which ask
    /// in no fixed order), checked before `script`.
    routes: Mutex<Vec<(String, VecDeque<Reply>)>>,
    requests: Mutex<Vec<ProviderRequest>>,
    request_count: watch::Sender<usize>,
    bases: Mutex<Vec<Vec<Value>>>,
    abandoned: Arc<AtomicUsize>,
    headless: AtomicBool,
    link: watch::Sender<bool>,
}

impl FakeGateway {
    pub fn new(id: u64, script: Vec<Reply>) -> Arc<FakeGateway> {
        Arc::new(FakeGateway {
            id,
            script: Mutex::new(script.into()),
            routes: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
            request_count: watch::channel(0).0,
            bases: Mutex::new(Vec::new()),
            abandoned: Arc::new(AtomicUsize::new(0)),
            headless: AtomicBool::new(false),
            link: watch::channel(true).0,
        })
    }

    /// Answer requests whose first user message contains `key` with `replies`, in order
    /// (a subagent's conversation starts with its task).
    pub fn route(&self, key: &str, replies: Vec<Reply>) {
        self.routes
            .lock()
            .unwrap()
            .push((key.to_string(), replies.into()));
    }

    /// Queue more replies.
    pub fn push(&self, reply: Reply) {
        self.script.lock().unwrap().push_back(reply);
    }

    pub fn set_headless(&self, headless: bool) {
        self.headless.store(headless, Ordering::SeqCst);
    }

    /// Flip the link's transport up or down (what `link_state` reports).
    pub fn set_link(&self, up: bool) {
        self.link.send_replace(up);
    }

    /// Every provider request so far, in order.
    pub fn requests(&self) -> Vec<ProviderRequest> {
        self.requests.lock().unwrap().clone()
    }

    /// Every base handed over with `provide_base`, in order.
    pub fn bases(&self) -> Vec<Vec<Value>> {
        self.bases.lock().unwrap().clone()
    }

    /// Streams the session dropped before their end (each would send `ProviderCancel`).
    pub fn abandoned(&self) -> usize {
        self.abandoned.load(Ordering::SeqCst)
    }

    /// Replies not played yet.
    pub fn unplayed(&self) -> usize {
        self.script.lock().unwrap().len()
    }

    /// Wait until at least `n` provider requests arrived.
    pub async fn wait_requests(&self, n: usize) {
        let mut rx = self.request_count.subscribe();
        let waited = tokio::time::timeout(PATIENCE, rx.wait_for(|c| *c >= n)).await;
        assert!(
            matches!(waited, Ok(Ok(_))),
            "timed out waiting for provider request {n}; got {}",
            self.requests.lock().unwrap().len()
        );
    }
}

async fn play(steps: Vec<Step>, tx: mpsc::Sender<ProviderChunk>) {
    for step in steps {
        match step {
            Step::Chunk(c) => {
                if tx.send(c).await.is_err() {
                    return;
                }
            }
            Step::Gate(g) => {
                let mut rx = g.0.subscribe();
                tokio::select! {
                    _ = rx.wait_for(|open| *open) => {}
                    _ = tx.closed() => return,
                }
            }
            Step::Hang => {
                tx.closed().await;
                return;
            }
        }
    }
}

impl DriverLink for FakeGateway {
    fn start_stream(&self, request: ProviderRequest) -> ProviderStream {
        let first_user = request
            .messages
            .iter()
            .find(|m| m["role"] == "user")
            .map(|m| m["content"].to_string())
            .unwrap_or_default();
        let routed = self
            .routes
            .lock()
            .unwrap()
            .iter_mut()
            .find(|(k, _)| first_user.contains(k.as_str()))
            .map(|(_, q)| q.pop_front());
        let scripted = match routed {
            Some(r) => r,
            None => self.script.lock().unwrap().pop_front(),
        };
        let reply = scripted.unwrap_or_else(|| {
            Reply::new().error(
                "fake gateway: no scripted reply left for this request",
                false,
            )
        });
        self.requests.lock().unwrap().push(request);
        self.request_count.send_modify(|c| *c += 1);
        let (tx, rx) = mpsc::channel(PROVIDER_CHUNK_BUFFER);
        tokio::spawn(play(reply.steps, tx));
        let abandoned = Arc::clone(&self.abandoned);
        ProviderStream::new(rx, move || {
            abandoned.fetch_add(1, Ordering::SeqCst);
        })
    }

    fn open_mcp(
        &self,
        server: &str,
    ) -> Pin<Box<dyn Future<Output = Result<reasonix_remote::mcp::LineChannels, String>> + Send>>
    {
        let msg = format!("the fake gateway runs no laptop MCP server ({server})");
        Box::pin(async move { Err(msg) })
    }

    fn conn_id(&self) -> u64 {
        self.id
    }

    fn link_state(&self) -> watch::Receiver<bool> {
        self.link.subscribe()
    }

    fn headless(&self) -> bool {
        self.headless.load(Ordering::SeqCst)
    }

    fn provide_base(&self, messages: Vec<Value>) {
        self.bases.lock().unwrap().push(messages);
    }
}

/// Settings as a laptop sends them by default: permission mode `ask`, bash sandboxed.
pub fn settings() -> SessionSettings {
    SessionSettings {
        model: Some("fake-model".into()),
        ..SessionSettings::default()
    }
}

/// Settings that never ask and run bash unconfined (no bubblewrap needed).
pub fn yolo_unconfined() -> SessionSettings {
    let mut s = settings();
    s.policy = SessionPolicy {
        mode: PermissionMode::Yolo,
        ..SessionPolicy::default()
    };
    s.policy.sandbox.bash = BashSandbox::Off;
    s
}

/// A session in a temp workspace, driven by a [`FakeGateway`], built as the daemon builds it:
/// [`reasonix_remote::runtime::build`], the workspace MCP snapshot, [`Session::open`], then
/// `set_driver` with what [`reasonix_remote::project::enforce`] makes of the settings.
pub struct Rig {
    _workspace_dir: tempfile::TempDir,
    _home_dir: tempfile::TempDir,
    pub paths: HostPaths,
    pub runtime: Arc<reasonix_remote::session::Runtime>,
    pub session: Arc<Session>,
    pub gateway: Arc<FakeGateway>,
    requests: AtomicUsize,
}

impl Rig {
    pub async fn start(settings: SessionSettings, script: Vec<Reply>) -> Rig {
        let workspace_dir = tempfile::tempdir().unwrap();
        let home_dir = tempfile::tempdir().unwrap();
        let workspace = workspace_dir.path().canonicalize().unwrap();
        let home = home_dir.path().canonicalize().unwrap();
        let paths = HostPaths::for_workspace_in(&home, &workspace).unwrap();
        let runtime = Arc::new(reasonix_remote::runtime::build(&paths).await);
        let snapshot = runtime.mcp.refresh().await;
        let journal = paths.sessions_dir.join("s1.jsonl");
        let (session, notice) = Session::open(
            "s1",
            &journal,
            Arc::clone(&runtime),
            &paths.workspace,
            snapshot.manager,
        )
        .unwrap();
        assert_eq!(notice, None, "a new session has nothing to repair");
        let gateway = FakeGateway::new(1, script);
        let rig = Rig {
            _workspace_dir: workspace_dir,
            _home_dir: home_dir,
            paths,
            runtime,
            session,
            gateway,
            requests: AtomicUsize::new(0),
        };
        rig.drive(Arc::clone(&rig.gateway), settings);
        rig
    }

    /// Make `gateway` the driver with `settings`, as the daemon's `make_driver` does.
    pub fn drive(&self, gateway: Arc<FakeGateway>, settings: SessionSettings) {
        let enforced = reasonix_remote::project::enforce(
            &settings.policy,
            &self.paths.workspace,
            &self.runtime.tool_ctx,
        )
        .unwrap();
        self.session.set_driver(
            Some(gateway as Arc<dyn DriverLink>),
            Some((settings, enforced)),
        );
    }

    /// A second session `id` loaded from a copy of this session's journal, as a restarted
    /// daemon loads it, driven by a new fake gateway playing `script` with `settings`.
    pub async fn load_copy(
        &self,
        id: &str,
        settings: SessionSettings,
        script: Vec<Reply>,
    ) -> (Arc<Session>, Arc<FakeGateway>) {
        self.session.flush_journal().await.unwrap();
        let journal = self.paths.sessions_dir.join(format!("{id}.jsonl"));
        std::fs::copy(self.paths.sessions_dir.join("s1.jsonl"), &journal).unwrap();
        let snapshot = self.runtime.mcp.refresh().await;
        let (session, notice) = Session::open(
            id,
            &journal,
            Arc::clone(&self.runtime),
            &self.paths.workspace,
            snapshot.manager,
        )
        .unwrap();
        assert_eq!(notice, None, "the copy was taken between turns");
        let gateway = FakeGateway::new(100, script);
        let enforced = reasonix_remote::project::enforce(
            &settings.policy,
            &self.paths.workspace,
            &self.runtime.tool_ctx,
        )
        .unwrap();
        session.set_driver(
            Some(Arc::clone(&gateway) as Arc<dyn DriverLink>),
            Some((settings, enforced)),
        );
        (session, gateway)
    }

    pub fn workspace(&self) -> &Path {
        &self.paths.workspace
    }

    /// Write a file into the workspace.
    pub fn write(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.paths.workspace.join(rel);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(&p, content).unwrap();
        p
    }

    /// Submit a user turn with a fresh request id.
    pub fn submit(&self, text: &str) {
        let n = self.requests.fetch_add(1, Ordering::SeqCst);
        assert!(self.session.submit(&format!("req-{n}"), text).unwrap());
    }

    /// A fresh request id.
    pub fn request_id(&self) -> String {
        let n = self.requests.fetch_add(1, Ordering::SeqCst);
        format!("req-{n}")
    }

    pub fn events(&self) -> Vec<Event> {
        self.session.events_since(0)
    }

    /// Wait until `cond` holds (checked at every notification of the session).
    pub async fn wait_until(&self, what: &str, cond: impl Fn() -> bool) {
        let deadline = Instant::now() + PATIENCE;
        let (_, mut live, _, _) = self.session.subscribe(u64::MAX);
        while !cond() {
            if Instant::now() > deadline {
                panic!(
                    "timed out waiting for {what} (state {:?}); events:\n{}",
                    self.session.state(),
                    self.dump()
                );
            }
            // Woken by any notification; the bound covers a lagged receiver.
            let _ = tokio::time::timeout(Duration::from_millis(50), live.recv()).await;
        }
    }

    /// The first event (from the start of the session) matching `pred`, waiting for it.
    pub async fn wait_for(&self, what: &str, pred: impl Fn(&Event) -> bool) -> Event {
        self.wait_until(what, || self.events().iter().any(&pred))
            .await;
        self.events().into_iter().find(|e| pred(e)).unwrap()
    }

    /// How turn `turn` ended, waiting for it.
    pub async fn finished(&self, turn: u64) -> (TurnOutcome, Option<String>) {
        self.finished_nth(turn, 1).await
    }

    /// How turn `turn` ended the `n`th time (a paused turn that continues ends again).
    pub async fn finished_nth(&self, turn: u64, n: usize) -> (TurnOutcome, Option<String>) {
        let ends = || -> Vec<(TurnOutcome, Option<String>)> {
            self.events()
                .into_iter()
                .filter(|e| e.turn == turn)
                .filter_map(|e| match e.kind {
                    EventKind::TurnFinished { outcome, detail } => Some((outcome, detail)),
                    _ => None,
                })
                .collect()
        };
        self.wait_until(&format!("turn {turn} to finish ({n})"), || {
            ends().len() >= n
        })
        .await;
        ends().swap_remove(n - 1)
    }

    /// Wait until the session is in `state`.
    pub async fn wait_state(&self, state: TurnState) {
        self.wait_until(&format!("state {state:?}"), || {
            self.session.state() == state
        })
        .await;
    }

    /// Event kinds of turn `turn` without the streamed deltas and checkpoints, as short
    /// names (`user_turn`, `tool_started:c1`, `turn_finished:completed`, ...).
    pub fn outline(&self, turn: u64) -> Vec<String> {
        self.events()
            .into_iter()
            .filter(|e| e.turn == turn)
            .filter_map(|e| outline_of(&e.kind))
            .collect()
    }

    pub fn dump(&self) -> String {
        self.events()
            .iter()
            .map(|e| format!("  {} t{} {:?}", e.seq, e.turn, e.kind))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn outline_of(kind: &EventKind) -> Option<String> {
    Some(match kind {
        EventKind::UserTurn { .. } => "user_turn".into(),
        EventKind::AssistantMessage { tool_calls, .. } if tool_calls.is_empty() => {
            "assistant".into()
        }
        EventKind::AssistantMessage { tool_calls, .. } => {
            let ids: Vec<&str> = tool_calls.iter().map(|c| c.id.as_str()).collect();
            format!("assistant:calls:{}", ids.join(","))
        }
        EventKind::ToolStarted { call_id, .. } => format!("tool_started:{call_id}"),
        EventKind::ToolFinished {
            call_id, is_error, ..
        } => format!(
            "tool_finished:{call_id}{}",
            if *is_error { ":error" } else { "" }
        ),
        EventKind::ApprovalRequested { .. } => "approval_requested".into(),
        EventKind::ApprovalAnswered { decision, .. } => {
            format!("approval_answered:{decision:?}")
        }
        EventKind::Usage { .. } => "usage".into(),
        EventKind::TurnFinished { outcome, .. } => format!("turn_finished:{outcome}"),
        EventKind::Notice { .. } => "notice".into(),
        EventKind::ProviderRetry(_) => "provider_retry".into(),
        EventKind::Plan(p) => format!("plan:{p:?}"),
        EventKind::Goal(g) => format!("goal:{g:?}"),
        EventKind::Compacted { kind, .. } => format!("compacted:{kind:?}"),
        EventKind::Steer { .. } => "steer".into(),
        EventKind::SteerInjected { .. } => "steer_injected".into(),
        EventKind::ShellRan { .. } => "shell_ran".into(),
        EventKind::ElicitationRequested { server, .. } => format!("elicitation_requested:{server}"),
        EventKind::ElicitationAnswered { action, .. } => {
            format!("elicitation_answered:{}", action.as_str())
        }
        EventKind::Subagent { child, event, .. } => format!("{child}>{}", outline_of(event)?),
        EventKind::Planner { event } => format!("planner>{}", outline_of(event)?),
        EventKind::SessionStarted { .. }
        | EventKind::TextDelta { .. }
        | EventKind::ReasoningDelta { .. }
        | EventKind::Checkpoint { .. } => return None,
    })
}

/// Compact JSON text of each message (for byte-for-byte comparisons).
pub fn texts(messages: &[Value]) -> Vec<String> {
    messages.iter().map(Value::to_string).collect()
}

/// The tool result message for `call_id` in `messages`.
pub fn tool_result<'a>(messages: &'a [Value], call_id: &str) -> Option<&'a str> {
    messages
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str())
}
