//! Delegation (#33 §1): child conversations on the host. `task` runs one child and returns
//! its answer; `read_only_task` one that only reads; `parallel_tasks` several at once;
//! `fleet` a dependency graph of them; `read_subagent_result` and `list_subagents` see
//! children started with `run_in_background`.
//!
//! A child is another runner ([`crate::runner::Runner`]) of the same session, never a copy
//! of the step loop: it has its own [`Conversation`] (a child system prompt and tool subset,
//! both byte-stable) and a [`host::ChildHost`] that forwards to the session's journal,
//! gateway, policy and approvals. What the child records is journaled in the session's
//! journal wrapped in [`EventKind::Subagent`] (its parent's call id and its own id), so every
//! child step is one provider request over the same link and each of its tool calls is
//! started durably and run once, exactly as the main conversation's.
//!
//! The pure core — graph validation, admission limits ([`fleet`]) and write-path
//! canonicalisation and overlap ([`paths`]) — has no session in it.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use reasonix_forward::proto::{EventKind, ReasoningEffort, TurnOutcome, Usage};
use reasonix_forward::sync::LockExt;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::runner::{Conversation, Host, Runner};
use crate::session::Session;
use crate::tools::{ToolContext, ToolRegistry};

mod board;
pub mod fleet;
mod host;
pub mod paths;
pub mod profile;
mod restart;
pub(crate) mod tools;

pub use board::{Board, ChildStatus};
use fleet::{Claim, Limits, Slots};
use profile::Profile;
pub(crate) use restart::close_interrupted_children;

/// Tools a child never gets: the parent's plan and todo list, and memory writes.
const NOT_FOR_CHILDREN: &[&str] = &["exit_plan_mode", "todo_write", "remember", "forget"];

/// Delegation tools that start writing children: a read-only child gets `read_only_task`
/// instead (its children would be read-only anyway; the schema should not suggest writes).
const WRITING_DELEGATION: &[&str] = &["task", "parallel_tasks", "fleet"];

/// Bytes of a child's answer returned as the tool result (the whole transcript stays in
/// the journal and `read_subagent_result{transcript: true}`).
pub const ANSWER_BOUND: usize = 16 * 1024;

/// Adds the delegation tools to `registry`.
pub fn register_tools(registry: &mut ToolRegistry) {
    tools::register(registry);
}

/// Where a conversation stands for delegation: the session, how deep it is, the route its
/// events are wrapped in, the call now running, its running children, and what it may do
/// (children only ever narrow it). Carried in [`ToolContext::delegate`].
#[derive(Clone)]
pub struct Scope {
    session: Weak<Session>,
    /// 0 for the main conversation, 1 for its children, ….
    depth: u32,
    /// `(parent call id, child id)` from the main conversation down to this one.
    route: Vec<(String, String)>,
    /// The tool call being run (set by the runner for each call).
    pub call_id: String,
    /// The children of this conversation running now.
    slots: Arc<Slots>,
    /// Every child of the session.
    board: Arc<Board>,
    /// This conversation may only read.
    read_only: bool,
    /// The tools this conversation has (`None`: all of the session's).
    tools: Option<Arc<BTreeSet<String>>>,
    /// This conversation's write paths (`None`: the writable roots).
    write_paths: Option<Arc<Vec<PathBuf>>>,
    /// Where this conversation's children add their token use (`None`: the main
    /// conversation, whose children's usage is journaled with their events).
    usage: Option<Arc<Mutex<UsageSum>>>,
}

impl Scope {
    /// The scope of a session's main conversation.
    pub(crate) fn root(session: Weak<Session>) -> Scope {
        Scope {
            session,
            depth: 0,
            route: Vec::new(),
            call_id: String::new(),
            slots: Arc::new(Slots::default()),
            board: Arc::new(Board::default()),
            read_only: false,
            tools: None,
            write_paths: None,
            usage: None,
        }
    }

    /// The session's children.
    pub fn board(&self) -> &Arc<Board> {
        &self.board
    }
}

/// What the model asked a child to do (`task`'s arguments, checked).
#[derive(Debug, Clone, Default)]
pub struct ChildSpec {
    /// The task, the child's first user message.
    pub prompt: String,
    /// A few words naming the task (shown to the user and in approvals).
    pub description: String,
    /// The profile's name (`None`: `general`).
    pub profile: Option<String>,
    /// Model label for the child (`None`: the profile's, else the session's).
    pub model: Option<String>,
    /// Effort for the child.
    pub effort: Option<ReasoningEffort>,
    /// Tool subset (must lie within what the profile allows).
    pub tools: Option<Vec<String>>,
    /// Paths the child may write (canonicalised against the parent's).
    pub write_paths: Option<Vec<String>>,
    /// The child's step limit (at most the session's).
    pub max_steps: Option<u32>,
    /// Force a read-only child (`read_only_task`).
    pub read_only: bool,
}

/// A child ready to run: checked against the limits and the parent's scope.
pub(crate) struct Prepared {
    session: Arc<Session>,
    spec: ChildSpec,
    profile: Profile,
    read_only: bool,
    tools: ToolRegistry,
    write_paths: Option<Arc<Vec<PathBuf>>>,
    limits: Limits,
    parent: Scope,
}

impl Prepared {
    /// Add `text` to the child's task (a fleet item gets its dependencies' answers).
    pub(crate) fn append_prompt(&mut self, text: &str) {
        self.spec.prompt.push_str(text);
    }

    /// What this child claims while it runs (for the admission limits).
    pub(crate) fn claim(&self) -> Claim {
        Claim {
            writer: !self.read_only,
            write_paths: self.write_paths.as_ref().map(|p| p.to_vec()),
        }
    }
}

/// The session's limits.
fn limits_of(session: &Session) -> Limits {
    let d = session.delegation();
    Limits {
        max_depth: d.max_depth,
        max_children: d.max_children as usize,
        max_writers: d.max_writers as usize,
    }
}

/// Check `spec` against the parent's scope and the limits: depth, profile, tools, write
/// paths. `Err` is the text the model sees; nothing ran.
pub(crate) fn prepare(ctx: &ToolContext, spec: ChildSpec) -> Result<Prepared, String> {
    let Some(scope) = ctx.delegate.clone() else {
        return Err("subagents run only inside a host session".into());
    };
    let Some(session) = scope.session.upgrade() else {
        return Err("the session is closing; no subagent was started".into());
    };
    let limits = limits_of(&session);
    if scope.depth + 1 > limits.max_depth {
        return Err(format!(
            "refused: a subagent here would be at depth {}, past the limit of {} (`[agent] max_subagent_depth`); do the work yourself",
            scope.depth + 1,
            limits.max_depth
        ));
    }
    if spec.prompt.trim().is_empty() {
        return Err("prompt is empty; say what the subagent should do".into());
    }
    let skills = match spec.profile.as_deref() {
        Some(name) if !profile::builtins().iter().any(|p| p.name == name) => {
            session.skills().skills
        }
        _ => Vec::new(),
    };
    let profile = profile::lookup_with(spec.profile.as_deref(), &skills, &session.skill_models())?;
    let read_only = spec.read_only || profile.read_only || scope.read_only;
    // The tools: the parent's, minus what children never get, minus writers for a read-only
    // child, narrowed by the profile and then by the call.
    let base: Vec<String> = match &scope.tools {
        Some(t) => t.iter().cloned().collect(),
        None => session.tool_names(),
    };
    let mut allowed: Vec<(String, Arc<dyn crate::tools::Tool>)> = Vec::new();
    for name in base {
        if NOT_FOR_CHILDREN.contains(&name.as_str()) {
            continue;
        }
        let Some(tool) = Host::tool(&*session, &name) else {
            continue;
        };
        if read_only && (!tool.read_only() || WRITING_DELEGATION.contains(&name.as_str())) {
            continue;
        }
        if let Some(p) = &profile.allowed_tools {
            if !p.contains(&name) {
                continue;
            }
        }
        allowed.push((name, tool));
    }
    if let Some(wanted) = &spec.tools {
        for w in wanted {
            if !allowed.iter().any(|(n, _)| n == w) {
                let names: Vec<&str> = allowed.iter().map(|(n, _)| n.as_str()).collect();
                return Err(format!(
                    "tool {w:?} is not available to this subagent; it may have: {}",
                    names.join(", ")
                ));
            }
        }
        allowed.retain(|(n, _)| wanted.contains(n));
    }
    let mut tools = ToolRegistry::new();
    for (_, t) in allowed {
        tools.register(t);
    }
    let write_paths = match (&spec.write_paths, read_only) {
        (Some(_), true) => {
            return Err("write_paths given for a read-only subagent; leave them out, or use a profile that may write".into())
        }
        (Some(raws), false) => {
            let parent_roots: Vec<PathBuf> = match &scope.write_paths {
                Some(p) => p.to_vec(),
                None => crate::tools::writable_roots(ctx),
            };
            Some(Arc::new(paths::canonical_write_paths(
                &ctx.workspace,
                raws,
                &parent_roots,
            )?))
        }
        // A writer under a parent with write paths keeps the parent's.
        (None, false) => scope.write_paths.clone(),
        (None, true) => None,
    };
    Ok(Prepared {
        session,
        spec,
        profile,
        read_only,
        tools,
        write_paths,
        limits,
        parent: scope,
    })
}

/// Token use of one child, summed over its steps (and its own children's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageSum {
    /// Model steps that reported usage.
    pub steps: u32,
    /// Prompt tokens.
    pub prompt: u64,
    /// Completion tokens.
    pub completion: u64,
    /// Prompt tokens served from the provider's cache.
    pub cache_hit: u64,
}

impl UsageSum {
    fn add(&mut self, u: &Usage) {
        self.steps += 1;
        self.prompt += u.prompt_tokens;
        self.completion += u.completion_tokens;
        self.cache_hit += u.cache_hit_tokens;
    }

    fn add_sum(&mut self, o: &UsageSum) {
        self.steps += o.steps;
        self.prompt += o.prompt;
        self.completion += o.completion;
        self.cache_hit += o.cache_hit;
    }
}

/// How a child ended.
#[derive(Debug, Clone)]
pub struct ChildResult {
    /// The child's id.
    pub id: String,
    /// Its profile's name.
    pub profile: String,
    /// How it ended.
    pub status: ChildStatus,
    /// Its answer (the last assistant text; partial when it stopped early), unbounded.
    pub answer: String,
    /// Its token use.
    pub usage: UsageSum,
}

impl ChildResult {
    /// True when the child finished with an answer.
    pub fn ok(&self) -> bool {
        self.status == ChildStatus::Completed
    }

    /// The tool result text: a header naming the child, how it ended and its usage, then
    /// its answer bounded to [`ANSWER_BOUND`].
    pub fn render(&self) -> String {
        let how = match &self.status {
            ChildStatus::Completed => "completed".to_string(),
            ChildStatus::Failed(why) => format!("failed: {why}"),
            other => other.label(),
        };
        let u = &self.usage;
        let answer = if self.answer.trim().is_empty() {
            "(no answer)".to_string()
        } else {
            crate::tools::bound_to(&self.answer, ANSWER_BOUND)
        };
        format!(
            "[subagent {} ({}) {how}; {} model steps, {} prompt + {} completion tokens ({} cached); transcript: read_subagent_result{{id: \"{}\", transcript: true}}]\n{answer}",
            self.id, self.profile, u.steps, u.prompt, u.completion, u.cache_hit, self.id
        )
    }
}

/// Wrap `kind` in the [`EventKind::Subagent`] layers of `route` (outermost first).
fn wrap(route: &[(String, String)], kind: EventKind) -> EventKind {
    route
        .iter()
        .rev()
        .fold(kind, |event, (call_id, child)| EventKind::Subagent {
            call_id: call_id.clone(),
            child: child.clone(),
            event: Box::new(event),
        })
}

/// The byte-stable system prompt of a child of `profile` in `workspace` with `tools`.
fn child_prefix(
    session: &Session,
    profile: &Profile,
    tools: &ToolRegistry,
) -> crate::agent::Prefix {
    let mut prefix = crate::agent::Prefix::build(session.workspace_dir(), tools.schemas());
    prefix.system.push_str(&format!(
        "\n<subagent profile=\"{}\">\n{}\n</subagent>\n",
        profile.name, profile.system
    ));
    prefix.system_hash = crate::agent::short_hash(prefix.system.as_bytes());
    prefix
}

/// The child's first message: the task, and the paths it may write.
fn first_message(spec: &ChildSpec, write_paths: Option<&[PathBuf]>, read_only: bool) -> Value {
    let mut text = spec.prompt.clone();
    if read_only {
        text.push_str("\n\n(You are read-only: you cannot change files or run commands.)");
    } else if let Some(paths) = write_paths {
        let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        text.push_str(&format!(
            "\n\n(You may change only these paths: {}. Writes elsewhere are refused.)",
            list.join(", ")
        ));
    }
    json!({"role": "user", "content": text})
}

/// Run a prepared child to its end: wait for a place among the running children, run its
/// conversation, and return its answer. Everything it does is journaled in the session's
/// journal under the parent's call id.
pub(crate) async fn run_child(p: Prepared, cancel: CancellationToken) -> ChildResult {
    let id = p
        .parent
        .board
        .register(&p.spec.description, &p.profile.name, &p.parent.call_id);
    run_registered(p, id, cancel).await
}

/// Register a prepared child on the board (for a background start), returning its id.
pub(crate) fn register(p: &Prepared) -> String {
    p.parent
        .board
        .register(&p.spec.description, &p.profile.name, &p.parent.call_id)
}

/// [`run_child`] for a child already on the board as `id`.
pub(crate) async fn run_registered(
    p: Prepared,
    id: String,
    cancel: CancellationToken,
) -> ChildResult {
    let board = Arc::clone(&p.parent.board);
    // The user may cancel this child alone (`Request::CancelSubagent`).
    let cancel = cancel.child_token();
    board.set_cancel(&id, cancel.clone());
    let claim = p.claim();
    let slot = tokio::select! {
        s = p.parent.slots.acquire(&claim, &p.limits) => s,
        _ = cancel.cancelled() => {
            let r = ChildResult { id: id.clone(), profile: p.profile.name.clone(), status: ChildStatus::Cancelled, answer: String::new(), usage: UsageSum::default() };
            board.finish(&id, &r, None);
            return r;
        }
    };
    board.set_status(&id, ChildStatus::Running);
    let mut route = p.parent.route.clone();
    route.push((p.parent.call_id.clone(), id.clone()));
    let session = Arc::clone(&p.session);
    let prefix = child_prefix(&session, &p.profile, &p.tools);
    let first = first_message(
        &p.spec,
        p.write_paths.as_deref().map(|v| v.as_slice()),
        p.read_only,
    );
    let usage = Arc::new(Mutex::new(UsageSum::default()));
    let tool_names: BTreeSet<String> = p.tools.names().iter().map(|s| s.to_string()).collect();
    let child_scope = Scope {
        session: Arc::downgrade(&session),
        depth: p.parent.depth + 1,
        route: route.clone(),
        call_id: String::new(),
        slots: Arc::new(Slots::default()),
        board: Arc::clone(&board),
        read_only: p.read_only,
        tools: Some(Arc::new(tool_names)),
        write_paths: p.write_paths.clone(),
        usage: Some(Arc::clone(&usage)),
    };
    let max_steps = {
        let session_max = Host::max_steps(&*session);
        p.spec
            .max_steps
            .unwrap_or(session_max)
            .clamp(1, session_max)
    };
    let host = host::ChildHost {
        session: Arc::clone(&session),
        id: id.clone(),
        profile: p.profile.name.clone(),
        description: p.spec.description.clone(),
        route,
        tools: p.tools,
        read_only: p.read_only,
        write_paths: p.write_paths,
        model: p.spec.model.clone().or(p.profile.model.clone()),
        effort: p.spec.effort.or(p.profile.effort),
        max_steps,
        scope: child_scope,
        usage: Arc::clone(&usage),
    };
    host.record(EventKind::UserTurn {
        request_id: id.clone(),
        text: first["content"].as_str().unwrap_or_default().to_string(),
        attachments: Vec::new(),
    });
    let conversation = Mutex::new(Conversation::new(
        &format!("{}-{id}", session.id),
        prefix,
        vec![first],
        &session.sessions_dir(),
    ));
    let (outcome, detail) = Runner::new(&host, &conversation).run(&cancel, true).await;
    let conv = conversation.lock_or_recover();
    let answer = last_answer(&conv.messages);
    let transcript = transcript_of(&conv.messages);
    drop(conv);
    let status = match outcome {
        TurnOutcome::Completed => ChildStatus::Completed,
        TurnOutcome::Paused => ChildStatus::StepLimit(max_steps),
        TurnOutcome::Cancelled => ChildStatus::Cancelled,
        TurnOutcome::Failed | TurnOutcome::Interrupted | TurnOutcome::Unknown => {
            ChildStatus::Failed(detail.clone().unwrap_or_else(|| outcome.to_string()))
        }
    };
    host.record(EventKind::TurnFinished { outcome, detail });
    // The place is given up only once the end is journaled: a child admitted in its stead
    // journals its start after this one's end, so the journal never shows more children at
    // once than the limits allow.
    drop(slot);
    let usage = *usage.lock_or_recover();
    if let Some(parent) = &p.parent.usage {
        parent.lock_or_recover().add_sum(&usage);
    }
    let result = ChildResult {
        id: id.clone(),
        profile: p.profile.name.clone(),
        status,
        answer,
        usage,
    };
    board.finish(&id, &result, Some(transcript));
    result
}

/// The child's answer: its last assistant text that is not empty.
fn last_answer(messages: &[Value]) -> String {
    messages
        .iter()
        .rev()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["content"].as_str())
        .find(|t| !t.trim().is_empty())
        .unwrap_or_default()
        .to_string()
}

/// A readable transcript of a child's conversation.
fn transcript_of(messages: &[Value]) -> String {
    let mut out = String::new();
    for m in messages {
        let role = m["role"].as_str().unwrap_or("?");
        let content = m["content"].as_str().unwrap_or_default();
        out.push_str(&format!("--- {role}\n"));
        if !content.is_empty() {
            out.push_str(content);
            out.push('\n');
        }
        if let Some(calls) = m["tool_calls"].as_array() {
            for c in calls {
                out.push_str(&format!(
                    "[call {} {}]\n",
                    c["function"]["name"].as_str().unwrap_or("?"),
                    c["function"]["arguments"].as_str().unwrap_or("")
                ));
            }
        }
    }
    out
}
