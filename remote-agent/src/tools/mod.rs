//! Built-in host tools: the file readers and writers, search, bash with background jobs, and
//! the plan. Every tool implements [`Tool`]; the agent looks them up in a [`ToolRegistry`],
//! asks the permission policy, then calls [`Tool::run`] with a [`ToolContext`].
//!
//! The observable contract (parameters, limits, output shapes, error texts) is written down in
//! `docs/TOOL_CONTRACT.md`; a test keeps that file and [`ToolRegistry::schemas`] in step.

mod bash;
mod confine;
pub mod deny_guard;
mod edit;
mod exit_plan;
mod history;
mod jobs;
pub mod notebook;
mod read;
mod search;
mod todo;
mod update_goal;
pub mod web_fetch;
mod write;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

pub use bash::{
    with_output_stream, BashOutputTool, BashTool, KillShellTool, OutputSink, WaitTool,
    STREAM_PIECE, STREAM_TOTAL,
};
pub use confine::{confine_write, writable_roots, ConfineError, RootList, WriteTarget};
pub use deny_guard::DenyGuard;
pub use edit::{EditFileTool, MultiEditTool};
pub use exit_plan::ExitPlanModeTool;
pub use history::HistoryTool;
pub use jobs::{Job, JobId, JobStatus, JobTable};
pub use notebook::NotebookEditTool;
pub use read::ReadFileTool;
pub use search::{GlobTool, GrepTool, LsTool};
pub use todo::TodoWriteTool;
pub use update_goal::UpdateGoalTool;
pub use web_fetch::{NoWebGateway, WebFetchTool, WebGateway};
pub use write::{MoveFileTool, WriteFileTool};

use crate::sandbox::Sandbox;

/// What a tool hands back to the model: text, and whether it describes a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The text the model sees (before [`bound_for_context`]).
    pub text: String,
    /// True when the call failed; the text then says why and what to do instead.
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: false,
        }
    }

    /// A failed result; tool errors go back to the model, they never abort the loop.
    pub fn err(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: true,
        }
    }
}

/// One tool the model can call.
#[async_trait::async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls it by (`read_file`, `bash`, `mcp__srv__x`).
    fn name(&self) -> &'static str;
    /// One paragraph telling the model what the tool does and its limits.
    fn description(&self) -> &'static str;
    /// JSON schema of the arguments object.
    fn parameters(&self) -> Value;
    /// True when the tool never changes the workspace or the host; the policy lets read-only
    /// tools run without a rule.
    fn read_only(&self) -> bool;
    /// Runs the tool. Permission has already been decided by the caller.
    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput;
}

/// Called by every writer, once per path, right before the path changes. Checkpoints plug in
/// here to save the prior state (the file may be absent, which is itself a state to restore).
pub trait MutationHook: Send + Sync {
    /// `path` is absolute and symlink-resolved; it may not exist yet.
    fn before_write(&self, path: &Path);
}

/// A hook that does nothing (no checkpoints).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopHook;

impl MutationHook for NoopHook {
    fn before_write(&self, _path: &Path) {}
}

/// Where a tool tells the user something besides its result: a notice in the session's
/// journal and transcript (the deny-rule check reports undone writes this way, also for a
/// background job that ends between turns).
pub trait NoticeSink: Send + Sync {
    /// Records `text` as a notice.
    fn notice(&self, text: String);
}

/// A sink that drops notices (outside a session).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoNotices;

impl NoticeSink for NoNotices {
    fn notice(&self, _text: String) {}
}

/// Everything a tool may need from its session. Cloning is cheap: the shared parts sit
/// behind `Arc`s, the paths are small.
#[derive(Clone)]
pub struct ToolContext {
    /// Canonical workspace root; relative paths are resolved against it.
    pub workspace: PathBuf,
    /// Extra roots writers may change besides the workspace (`[sandbox] allow_write`).
    pub allow_write: Vec<PathBuf>,
    /// Paths the readers refuse (`[sandbox] forbid_read`: `~/.ssh`, `~/.aws`, ...).
    pub forbid_read: Vec<PathBuf>,
    /// Foreground bash timeout (`tools.bash_timeout_seconds`, default 120 s).
    pub bash_timeout: Duration,
    /// Limit of one MCP `tools/call` (the session policy's `timeouts.mcp_call_seconds`,
    /// default 300 s); a server's own timeout may only be shorter.
    pub mcp_call_timeout: Duration,
    /// How bash commands are confined.
    pub sandbox: Arc<Sandbox>,
    /// Background bash jobs; owned by the daemon session so they outlive client links.
    pub jobs: Arc<JobTable>,
    /// Prior-state capture before every write (checkpoints).
    pub mutation_hook: Arc<dyn MutationHook>,
    /// The current plan written by `todo_write` (one JSON object per item).
    pub todos: Arc<Mutex<Vec<Value>>>,
    /// The session's searchable history (the `history` tool); empty outside a session.
    pub history: Arc<dyn crate::compaction::history::HistorySource>,
    /// Paths the walkers (`ls`, `glob`, `grep`) neither enter nor report, from the
    /// session's path rules (the call's own root argument is decided by the policy).
    pub read_filter: Arc<dyn ReadFilter>,
    /// Holds the session's deny rules on file writers for bash (read-only mounts, and the
    /// after-call check that undoes covered writes); `None` when there is no such rule, and
    /// bash then pays nothing for it.
    pub deny_guard: Option<Arc<DenyGuard>>,
    /// Where tools send notices for the user (the session's journal).
    pub notices: Arc<dyn NoticeSink>,
    /// Where `web_fetch` sends its requests (the session's driving laptop).
    pub web: Arc<dyn WebGateway>,
    /// The session's plan mode (`exit_plan_mode` proposes through it).
    pub plan: Arc<dyn crate::plan::PlanSink>,
    /// The session's goal (`update_goal` reports through it).
    pub goal: Arc<dyn crate::goal::GoalSink>,
    /// The session's memory (project store, the laptop's global facts); `None` outside a
    /// daemon session.
    pub memory: Option<Arc<crate::memory::Memory>>,
    /// Who answers an MCP server's `elicitation/create` during one of its tool calls (the
    /// session's user); outside a session every elicitation is declined.
    pub elicit: Arc<dyn crate::mcp::Elicitor>,
    /// The delegation scope of the conversation running the tool (`task`, `fleet`, …);
    /// `None` outside a daemon session.
    pub delegate: Option<crate::delegate::Scope>,
    /// A child's `write_paths` (canonical): every writer refuses a path outside them, on
    /// top of the writable roots. `None`: the writable roots alone.
    pub write_only: Option<Arc<Vec<PathBuf>>>,
}

/// Which paths a walking reader must skip. Implemented by the permission policy.
pub trait ReadFilter: Send + Sync {
    /// True when `tool` may not show or read `path` (an absolute path) on its own.
    fn hides(&self, tool: &str, path: &Path) -> bool;
}

/// A filter that hides nothing (no path rules).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoReadFilter;

impl ReadFilter for NoReadFilter {
    fn hides(&self, _tool: &str, _path: &Path) -> bool {
        false
    }
}

impl ToolContext {
    /// A context with defaults: no extra roots, the default forbid list of the sandbox,
    /// 120 s bash timeout, a fresh job table, no hook, an empty plan. `workspace` is
    /// canonicalised when possible (so confinement compares resolved paths).
    pub fn new(workspace: &Path, sandbox: Arc<Sandbox>) -> Self {
        let workspace =
            std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
        Self {
            allow_write: Vec::new(),
            forbid_read: sandbox.config().forbid_read.clone(),
            workspace,
            bash_timeout: Duration::from_secs(DEFAULT_BASH_TIMEOUT_SECS),
            mcp_call_timeout: Duration::from_secs(
                reasonix_forward::policy::DEFAULT_MCP_CALL_TIMEOUT_SECS,
            ),
            sandbox,
            jobs: Arc::new(JobTable::new()),
            mutation_hook: Arc::new(NoopHook),
            todos: Arc::new(Mutex::new(Vec::new())),
            history: Arc::new(crate::compaction::history::NoHistory),
            read_filter: Arc::new(NoReadFilter),
            deny_guard: None,
            notices: Arc::new(NoNotices),
            web: Arc::new(NoWebGateway),
            plan: Arc::new(crate::plan::NoPlan),
            goal: Arc::new(crate::goal::NoGoal),
            memory: None,
            elicit: Arc::new(crate::mcp::NoElicitor),
            delegate: None,
            write_only: None,
        }
    }

    /// Absolute form of a path argument: relative paths are taken from the workspace. No
    /// symlink resolution (readers open what the path names; writers use [`confine_write`]).
    pub fn resolve(&self, raw: &str) -> PathBuf {
        let p = Path::new(raw);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.workspace.join(p)
        }
    }

    /// How a path is shown to the model: relative to the workspace when inside it.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.workspace) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }

    /// True when `path` lies in one of the `forbid_read` roots (compared after resolving
    /// symlinks, so a link into `~/.ssh` is caught too).
    pub fn is_forbidden_read(&self, path: &Path) -> bool {
        // The same walk the permission policy uses: `..`, `//`, and symlinks (even dangling
        // ones, or ones below a missing directory) resolved the way the kernel would.
        let resolved = crate::policy::paths::resolve(&self.workspace, path);
        self.forbid_read.iter().any(|root| {
            let root_c = crate::policy::paths::resolve(&self.workspace, root);
            resolved.starts_with(&root_c) || path.starts_with(root)
        })
    }
}

/// Default foreground bash timeout in seconds (`tools.bash_timeout_seconds`).
pub const DEFAULT_BASH_TIMEOUT_SECS: u64 = 120;

/// The tool set of a session, keyed by name. Iteration is by name, so the schema list (part of
/// the cached prompt prefix) never depends on registration order.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// All built-in tools.
    pub fn builtin() -> Self {
        let mut r = Self::new();
        let all: [Arc<dyn Tool>; 18] = [
            Arc::new(ExitPlanModeTool),
            Arc::new(UpdateGoalTool),
            Arc::new(HistoryTool),
            Arc::new(ReadFileTool),
            Arc::new(WriteFileTool),
            Arc::new(EditFileTool),
            Arc::new(MultiEditTool),
            Arc::new(MoveFileTool),
            Arc::new(LsTool),
            Arc::new(GlobTool),
            Arc::new(GrepTool),
            Arc::new(BashTool),
            Arc::new(BashOutputTool),
            Arc::new(KillShellTool),
            Arc::new(WaitTool),
            Arc::new(TodoWriteTool),
            Arc::new(NotebookEditTool),
            Arc::new(WebFetchTool),
        ];
        for t in all {
            r.register(t);
        }
        crate::memory::register_tools(&mut r);
        crate::delegate::register_tools(&mut r);
        r
    }

    /// Adds (or replaces) a tool; MCP tools come in this way.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.name().to_string(), tool);
    }

    /// Removes a tool (e.g. one disabled by `[tools] enabled`).
    pub fn remove(&mut self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.remove(name)
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.get(name).cloned()
    }

    /// Registered names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.tools.keys().map(String::as_str).collect()
    }

    /// Tools in the OpenAI format `{"type":"function","function":{name,description,parameters}}`,
    /// keys sorted recursively and the list sorted by name: the bytes are stable.
    pub fn schemas(&self) -> Vec<Value> {
        self.tools.values().map(|t| schema_of(t.as_ref())).collect()
    }
}

/// The canonical OpenAI-format schema of one tool.
pub fn schema_of(tool: &dyn Tool) -> Value {
    canonicalize(&serde_json::json!({
        "type": "function",
        "function": {
            "name": tool.name(),
            "description": tool.description(),
            "parameters": tool.parameters(),
        }
    }))
}

/// A copy of `v` whose object keys are sorted at every depth.
pub fn canonicalize(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            reasonix_forward::sort::sort(&mut keys);
            let mut out = serde_json::Map::new();
            for k in keys {
                if let Some(child) = map.get(k) {
                    out.insert(k.clone(), canonicalize(child));
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonicalize).collect()),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => v.clone(),
    }
}

/// Bytes of a tool result that stay visible in the model context.
pub const CONTEXT_BOUND_BYTES: usize = 32 * 1024;

/// Bounds a tool result once, when it enters the model context: results up to
/// [`CONTEXT_BOUND_BYTES`] pass unchanged; longer ones keep their head (3/4) and tail (1/4)
/// with a marker saying how much was cut. The full text belongs in the journal.
pub fn bound_for_context(text: &str) -> String {
    bound_to(text, CONTEXT_BOUND_BYTES)
}

/// The smallest bound a small context window can give a tool result.
const MIN_CONTEXT_BOUND_BYTES: usize = 1024;

/// The visible bound of one tool result in a context window of `window` tokens (0: no
/// window known), at `tokens_per_byte`: [`CONTEXT_BOUND_BYTES`], or an eighth of the window
/// when that is smaller, so the recent tail (a quarter of the window, kept verbatim by the
/// compaction ladder) holds a few results and one result never fills the window alone.
pub fn context_bound_bytes(window: u64, tokens_per_byte: f64) -> usize {
    if window == 0 || tokens_per_byte <= 0.0 {
        return CONTEXT_BOUND_BYTES;
    }
    let eighth = (window / 8) as f64 / tokens_per_byte;
    (eighth as usize).clamp(MIN_CONTEXT_BOUND_BYTES, CONTEXT_BOUND_BYTES)
}

/// [`bound_for_context`] with another bound (`limit` bytes, see [`context_bound_bytes`]).
pub fn bound_to(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let head_end = floor_char_boundary(text, limit * 3 / 4);
    let tail_start = ceil_char_boundary(text, text.len() - limit / 4);
    let cut = &text[head_end..tail_start];
    let cut_lines = cut.matches('\n').count();
    format!(
        "{}\n\n[… {} bytes ({} lines) cut from the middle of this {}-byte result; narrow the \
         request (offset/limit, a tighter pattern, or `| head`) to see them …]\n\n{}",
        &text[..head_end],
        cut.len(),
        cut_lines,
        text.len(),
        &text[tail_start..]
    )
}

/// Largest char boundary `<= i`.
pub(crate) fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Smallest char boundary `>= i`.
pub(crate) fn ceil_char_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i.min(s.len())
}

/// Parses a tool's arguments, or gives the error result the model should see.
pub(crate) fn parse_args<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T, ToolOutput> {
    // Some models send `null` or nothing for tools without required parameters.
    let args = if args.is_null() {
        Value::Object(serde_json::Map::new())
    } else {
        args
    };
    serde_json::from_value(args)
        .map_err(|e| ToolOutput::err(format!("invalid arguments for {tool}: {e}")))
}

/// Runs blocking filesystem work off the async threads.
pub(crate) async fn blocking<F>(f: F) -> ToolOutput
where
    F: FnOnce() -> ToolOutput + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(out) => out,
        Err(e) => ToolOutput::err(format!("internal error: tool task failed: {e}")),
    }
}

/// The writer group that a policy rule `Edit` names.
pub const WRITER_TOOLS: [&str; 5] = [
    "write_file",
    "edit_file",
    "multi_edit",
    "move_file",
    "notebook_edit",
];

/// The reader group that a policy rule `Read` names: the tools that read files by path.
pub const READER_TOOLS: [&str; 4] = ["read_file", "ls", "glob", "grep"];
