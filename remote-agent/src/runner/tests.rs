//! The runner without a session: two conversations with their own prefixes, driven at the
//! same time through one host (a real journal and real tools in a temp dir, a scripted
//! driver). What a session adds (dedup, turn state, approvals, replay at open) is tested
//! through `Session` in `tests/turn_runner.rs`.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use reasonix_forward::proto::{
    ApprovalDecision, ContextSettings, Event, EventKind, ProviderChunk, ProviderRequest, ToolCall,
    TurnOutcome, TurnState,
};
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::{Conversation, Host, Runner};
use crate::agent::{self, Prefix};
use crate::content::ContentStore;
use crate::journal::{Barrier, Journal, JournalError, JournalWriter};
use crate::policy::Decision;
use crate::sandbox::Sandbox;
use crate::session::{DriverLink, ProviderStream};
use crate::tools::{Tool, ToolContext, ToolRegistry};

/// Replies per conversation, told apart by the system prompt of the request.
struct ScriptedDriver {
    replies: Mutex<HashMap<String, VecDeque<Vec<ProviderChunk>>>>,
    requests: Mutex<Vec<ProviderRequest>>,
    link: watch::Sender<bool>,
}

impl DriverLink for ScriptedDriver {
    fn start_stream(&self, request: ProviderRequest) -> ProviderStream {
        let system = request.messages[0]["content"].as_str().unwrap().to_string();
        self.requests.lock().unwrap().push(request);
        let chunks = self
            .replies
            .lock()
            .unwrap()
            .get_mut(&system)
            .and_then(VecDeque::pop_front)
            .unwrap_or_else(|| {
                vec![ProviderChunk::Error {
                    message: format!("no reply left for {system:?}"),
                    retryable: false,
                }]
            });
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            for c in chunks {
                if tx.send(c).await.is_err() {
                    return;
                }
            }
        });
        ProviderStream::new(rx, || {})
    }

    fn open_mcp(
        &self,
        server: &str,
    ) -> Pin<Box<dyn Future<Output = Result<crate::mcp::LineChannels, String>> + Send>> {
        let msg = format!("no laptop MCP server here ({server})");
        Box::pin(async move { Err(msg) })
    }

    fn conn_id(&self) -> u64 {
        1
    }

    fn link_state(&self) -> watch::Receiver<bool> {
        self.link.subscribe()
    }

    fn headless(&self) -> bool {
        false
    }
}

/// A host with a real journal writer and the built-in tools; every call is allowed.
struct TestHost {
    journal: Mutex<JournalWriter>,
    driver: Arc<ScriptedDriver>,
    tools: ToolRegistry,
    ctx: ToolContext,
    content: ContentStore,
}

impl Host for TestHost {
    fn turn(&self) -> u64 {
        1
    }
    fn model(&self) -> Option<String> {
        Some("scripted".into())
    }
    fn max_steps(&self) -> u32 {
        8
    }
    fn context_settings(&self) -> ContextSettings {
        ContextSettings::default()
    }
    fn effort(&self) -> Option<reasonix_forward::proto::ReasoningEffort> {
        None
    }
    fn record(&self, kind: EventKind) -> Event {
        self.journal.lock().unwrap().append(1, kind)
    }
    fn record_durable(&self, kind: EventKind) -> Barrier {
        let mut journal = self.journal.lock().unwrap();
        journal.append(1, kind);
        journal.barrier()
    }
    fn record_delta(&self, kind: EventKind) -> Option<Barrier> {
        self.record(kind);
        None
    }
    fn last_seq(&self) -> u64 {
        self.journal.lock().unwrap().last_seq()
    }
    fn journal_failure(&self, what: &str, e: &JournalError) -> String {
        format!("{what}: {e}")
    }
    fn set_state(&self, _state: TurnState, _detail: Option<String>) {}
    fn wait_gateway<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
    ) -> crate::runner::HostFuture<'a, Option<Arc<dyn DriverLink>>> {
        Box::pin(async move { Some(Arc::clone(&self.driver) as Arc<dyn DriverLink>) })
    }
    fn release_driver(&self, _conn_id: u64) {}
    fn inject_steers(&self, _estimator: &crate::compaction::Estimator) -> Option<Value> {
        None
    }
    fn steers_pending(&self) -> bool {
        false
    }
    fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.get(name)
    }
    fn decide(&self, _tool: &str, _args: &Value, _read_only: bool) -> Decision {
        Decision::Allow
    }
    fn headless(&self) -> bool {
        false
    }
    fn ask_approval<'a>(
        &'a self,
        _call: &'a ToolCall,
        _args: &'a Value,
        _reason: String,
        _cancel: &'a CancellationToken,
    ) -> crate::runner::HostFuture<'a, Result<Option<ApprovalDecision>, JournalError>> {
        Box::pin(async move { Ok(None) })
    }
    fn tool_ctx(&self) -> ToolContext {
        self.ctx.clone()
    }
    fn tool_progress(&self, _call_id: &str) -> crate::mcp::ProgressSink {
        Arc::new(|_| {})
    }
    fn content_store(&self) -> ContentStore {
        self.content.clone()
    }
}

fn prefix(system: &str) -> Prefix {
    Prefix {
        system: system.into(),
        tools: ToolRegistry::builtin().schemas(),
        system_hash: agent::short_hash(system.as_bytes()),
        tools_hash: "t".into(),
    }
}

fn call(id: &str, name: &str, args: Value) -> ProviderChunk {
    ProviderChunk::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.to_string(),
    })
}

fn text(t: &str) -> ProviderChunk {
    ProviderChunk::Text { text: t.into() }
}

fn done() -> ProviderChunk {
    ProviderChunk::Done {
        finish_reason: Some("stop".into()),
        model: "scripted".into(),
    }
}

/// A conversation `id` under `system` whose user asked `question` (journaled as a user turn
/// through `host`, as a session's submit does for its main conversation).
fn conversation(
    host: &TestHost,
    dir: &Path,
    id: &str,
    system: &str,
    question: &str,
) -> Mutex<Conversation> {
    host.record(EventKind::UserTurn {
        request_id: format!("{id}-q"),
        text: question.into(),
        attachments: Vec::new(),
    });
    let messages = vec![agent::user_message(question, &[])];
    Mutex::new(Conversation::new(id, prefix(system), messages, dir))
}

#[tokio::test]
async fn two_conversations_run_side_by_side_each_with_its_own_requests() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(ws.join("b.txt"), "beta\n").unwrap();
    let path = dir.path().join("s1.jsonl");
    let (journal, _) = Journal::open(&path).unwrap();
    let writer = JournalWriter::start(&path, 0, Box::new(journal)).unwrap();
    let mut replies = HashMap::new();
    replies.insert(
        "main system".to_string(),
        VecDeque::from([
            vec![call("m1", "read_file", json!({"path": "a.txt"})), done()],
            vec![text("a.txt says alpha"), done()],
        ]),
    );
    replies.insert(
        "child system".to_string(),
        VecDeque::from([
            vec![call("c1", "read_file", json!({"path": "b.txt"})), done()],
            vec![text("b.txt says beta"), done()],
        ]),
    );
    let host = TestHost {
        journal: Mutex::new(writer),
        driver: Arc::new(ScriptedDriver {
            replies: Mutex::new(replies),
            requests: Mutex::new(Vec::new()),
            link: watch::channel(true).0,
        }),
        tools: ToolRegistry::builtin(),
        ctx: ToolContext::new(&ws, Arc::new(Sandbox::off(&ws))),
        content: ContentStore::for_sessions(dir.path()),
    };
    let main = conversation(&host, dir.path(), "s1", "main system", "what is in a.txt?");
    let child = conversation(&host, dir.path(), "s1-c1", "child system", "and b.txt?");
    let cancel = CancellationToken::new();
    let (main_runner, child_runner) = (Runner::new(&host, &main), Runner::new(&host, &child));
    let (a, b) = tokio::join!(
        main_runner.run(&cancel, true),
        child_runner.run(&cancel, true)
    );
    assert_eq!(a, (TurnOutcome::Completed, None));
    assert_eq!(b, (TurnOutcome::Completed, None));

    // Each conversation's requests carry only its own messages, under its own prefix, and
    // the second extends the first byte for byte; stream ids name the conversation.
    let requests = host.driver.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 4);
    for (id, system, question, file, answer) in [
        (
            "s1",
            "main system",
            "what is in a.txt?",
            "alpha",
            "a.txt says alpha",
        ),
        (
            "s1-c1",
            "child system",
            "and b.txt?",
            "beta",
            "b.txt says beta",
        ),
    ] {
        let mine: Vec<&ProviderRequest> = requests
            .iter()
            .filter(|r| r.messages[0]["content"] == system)
            .collect();
        assert_eq!(mine.len(), 2, "{id}: {mine:#?}");
        let (first, second) = (&mine[0].messages, &mine[1].messages);
        assert_eq!(first.len(), 2, "{id}: {first:#?}");
        assert_eq!(first[1]["content"], question);
        assert_eq!(
            second[..2],
            first[..],
            "{id}: the second request extends the first"
        );
        let result = second[3]["content"].as_str().unwrap();
        assert!(result.contains(file), "{id}: {result}");
        assert!(
            mine.iter()
                .all(|r| r.stream_id.starts_with(&format!("{id}-1-"))),
            "{id}: {mine:#?}"
        );
        let conv = if id == "s1" { &main } else { &child };
        let conv = conv.lock().unwrap();
        assert_eq!(conv.messages.len(), 4, "{id}: {:#?}", conv.messages);
        assert_eq!(conv.messages[3]["content"], answer);
    }

    // Both conversations journaled through the one host: every call started and finished
    // once, and each conversation's events rebuild exactly its messages.
    let flushed = host.journal.lock().unwrap().barrier();
    flushed.wait().await.unwrap();
    let (events, _) = crate::journal::read_events(&path).unwrap();
    for (id, calls, conv) in [("s1", "m1", &main), ("s1-c1", "c1", &child)] {
        let started = events
            .iter()
            .filter(
                |e| matches!(&e.kind, EventKind::ToolStarted { call_id, .. } if call_id == calls),
            )
            .count();
        assert_eq!(started, 1, "{id}");
        let own: Vec<Event> = events
            .iter()
            .filter(|e| belongs_to(&e.kind, &conv.lock().unwrap()))
            .cloned()
            .collect();
        assert_eq!(
            agent::messages_from_events(&own),
            conv.lock().unwrap().messages,
            "{id}: replaying its events gives its conversation"
        );
    }
}

/// Whether `kind` is one of `conv`'s events (told apart here by content: the journal has
/// no conversation field yet, and this test's two conversations share no text or call id).
fn belongs_to(kind: &EventKind, conv: &Conversation) -> bool {
    let texts: Vec<String> = conv.messages.iter().map(Value::to_string).collect();
    let has = |s: &str| texts.iter().any(|t| t.contains(s));
    match kind {
        EventKind::UserTurn { text, .. } => has(text),
        EventKind::AssistantMessage {
            content,
            tool_calls,
            ..
        } => tool_calls.iter().any(|c| has(&c.id)) || (!content.is_empty() && has(content)),
        EventKind::ToolFinished { call_id, .. } => has(call_id),
        EventKind::SessionStarted { .. }
        | EventKind::TextDelta { .. }
        | EventKind::ReasoningDelta { .. }
        | EventKind::ToolStarted { .. }
        | EventKind::ApprovalRequested { .. }
        | EventKind::ApprovalAnswered { .. }
        | EventKind::Usage { .. }
        | EventKind::TurnFinished { .. }
        | EventKind::Notice { .. }
        | EventKind::ProviderRetry(_)
        | EventKind::Plan(_)
        | EventKind::Goal(_)
        | EventKind::Checkpoint { .. }
        | EventKind::Compacted { .. }
        | EventKind::Steer { .. }
        | EventKind::SteerInjected { .. }
        | EventKind::ElicitationRequested { .. }
        | EventKind::ElicitationAnswered { .. }
        | EventKind::ShellRan { .. }
        | EventKind::Subagent { .. }
        | EventKind::Planner { .. } => false,
    }
}
