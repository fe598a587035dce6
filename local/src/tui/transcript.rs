//! The transcript model: entries built from journal events, each laid out (wrapped) lazily and
//! cached per width, and a bottom-anchored scroll model so a frame only lays out the entries in
//! view — the cost of a frame does not grow with the length of the session.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use reasonix_forward::content::ContentRef;
use reasonix_forward::proto::{ApprovalDecision, EventKind, TurnOutcome};
use serde_json::Value;

use super::diff;
use super::markdown;
use super::theme;
use super::wrap::{sanitize, truncate, width as text_width, wrap_line, wrap_text};

/// How serious a notice is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    /// Informational (dim).
    Info,
    /// Needs attention (yellow).
    Warn,
    /// Something failed (red).
    Error,
}

/// Life cycle of a tool call card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ToolState {
    /// Requested by the model, not started (maybe waiting for approval).
    Queued,
    /// Running.
    Running,
    /// Finished.
    Done {
        /// True when the tool reported an error.
        is_error: bool,
    },
}

/// One tool call.
#[derive(Debug, Clone)]
pub(crate) struct ToolCard {
    pub(crate) name: String,
    pub(crate) arguments: String,
    pub(crate) state: ToolState,
    pub(crate) output: String,
    /// Set when the output is a preview of a larger one kept on the host (`/output` fetches
    /// the whole of it).
    pub(crate) output_ref: Option<ContentRef>,
    pub(crate) progress: String,
    /// Wall-clock milliseconds (from event timestamps) when it started / finished.
    pub(crate) started_ms: Option<i64>,
    pub(crate) finished_ms: Option<i64>,
    pub(crate) approval_id: Option<String>,
    pub(crate) awaiting_approval: bool,
    pub(crate) decision: Option<ApprovalDecision>,
}

/// What an entry shows.
#[derive(Debug, Clone)]
pub(crate) enum EntryKind {
    /// A user turn.
    User { text: String, turn: u64 },
    /// Assistant text (Markdown).
    Assistant { text: String, streaming: bool },
    /// Model reasoning.
    Reasoning { text: String, streaming: bool },
    /// A tool call.
    Tool(ToolCard),
    /// A notice.
    Notice { text: String, level: Level },
    /// A steer the user sent while the turn ran; `delivered` once the model got it.
    Steer {
        request_id: String,
        text: String,
        delivered: bool,
    },
    /// A `!command` the user ran, with its output.
    Shell {
        command: String,
        output: String,
        is_error: bool,
        added_to_context: bool,
        /// Still running: `output` is what has streamed so far.
        running: bool,
    },
}

/// Everything layout depends on besides the entry itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LayoutCtx {
    /// Columns available.
    pub(crate) width: usize,
    /// Show reasoning blocks expanded.
    pub(crate) show_reasoning: bool,
    /// Wall clock now, in ms since the epoch (running tools show elapsed time).
    pub(crate) now_ms: i64,
    /// Spinner frame counter.
    pub(crate) frame: u64,
}

struct Cached {
    width: usize,
    show_reasoning: bool,
    lines: Arc<Vec<Line<'static>>>,
}

/// One transcript entry with its layout cache.
pub(crate) struct Entry {
    pub(crate) kind: EntryKind,
    cache: RefCell<Option<Cached>>,
}

impl Entry {
    fn new(kind: EntryKind) -> Self {
        Self {
            kind,
            cache: RefCell::new(None),
        }
    }

    /// Drop the cached layout after a change.
    fn touch(&mut self) {
        *self.cache.get_mut() = None;
    }

    /// Entries whose look changes with the clock are never cached.
    fn animated(&self) -> bool {
        matches!(&self.kind, EntryKind::Tool(c) if c.state == ToolState::Running)
    }
}

/// A position in the transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scroll {
    /// Stick to the bottom (follow the stream).
    Follow,
    /// The top row of the view is row `line` of entry `entry`.
    Anchor {
        /// Entry index.
        entry: usize,
        /// Row within that entry.
        line: usize,
    },
}

/// The transcript.
#[derive(Default)]
pub(crate) struct Transcript {
    entries: Vec<Entry>,
    by_call: HashMap<String, usize>,
    /// `!` commands this client sent that have not streamed yet: request id -> (command,
    /// added to context).
    pending_shells: HashMap<String, (String, bool)>,
    /// `!` commands streaming into an entry: request id -> entry index.
    shells: HashMap<String, usize>,
    /// Text and reasoning entries of the model step in progress.
    streaming_text: Option<usize>,
    streaming_reasoning: Option<usize>,
}

impl Transcript {
    /// Number of entries.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there is nothing to show.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Remove everything.
    pub(crate) fn clear(&mut self) {
        *self = Transcript::default();
    }

    fn push(&mut self, kind: EntryKind) -> usize {
        self.entries.push(Entry::new(kind));
        self.entries.len() - 1
    }

    /// Add a notice.
    pub(crate) fn notice(&mut self, text: impl Into<String>, level: Level) {
        self.push(EntryKind::Notice {
            text: text.into(),
            level,
        });
    }

    fn end_streams(&mut self) {
        for idx in [self.streaming_text.take(), self.streaming_reasoning.take()]
            .into_iter()
            .flatten()
        {
            if let Some(e) = self.entries.get_mut(idx) {
                match &mut e.kind {
                    EntryKind::Assistant { streaming, .. }
                    | EntryKind::Reasoning { streaming, .. } => *streaming = false,
                    EntryKind::User { .. }
                    | EntryKind::Tool(_)
                    | EntryKind::Notice { .. }
                    | EntryKind::Steer { .. }
                    | EntryKind::Shell { .. } => {}
                }
                e.touch();
            }
        }
    }

    fn card_mut(&mut self, call_id: &str) -> Option<&mut Entry> {
        let idx = *self.by_call.get(call_id)?;
        self.entries.get_mut(idx)
    }

    /// Apply one journal event. `ts_ms` is its timestamp (ms since the epoch) when known.
    pub(crate) fn apply(&mut self, kind: &EventKind, ts_ms: Option<i64>, turn: u64) {
        match kind {
            // A steer the planner took (#38 §2) was given to a model like the executor's.
            EventKind::Planner { event } if matches!(**event, EventKind::SteerInjected { .. }) => {
                self.apply(event, ts_ms, turn)
            }
            // Children's events (#33) get their own panel, not the parent's transcript.
            EventKind::SessionStarted { .. }
            | EventKind::Checkpoint { .. }
            | EventKind::ElicitationAnswered { .. }
            | EventKind::Usage { .. }
            | EventKind::Subagent { .. }
            | EventKind::Planner { .. } => {}
            EventKind::ElicitationRequested {
                server, message, ..
            } => {
                self.notice(
                    format!("MCP server `{server}` asks for input: {}", message.trim()),
                    Level::Info,
                );
            }
            EventKind::UserTurn { text, .. } => {
                self.end_streams();
                self.push(EntryKind::User {
                    text: text.clone(),
                    turn,
                });
            }
            EventKind::TextDelta { text } => {
                // Text after reasoning ends the reasoning block (it stays this step's).
                if let Some(r) = self.streaming_reasoning {
                    if let Some(e) = self.entries.get_mut(r) {
                        if let EntryKind::Reasoning { streaming, .. } = &mut e.kind {
                            *streaming = false;
                        }
                        e.touch();
                    }
                }
                let idx = match self.streaming_text {
                    Some(i) => i,
                    None => {
                        let i = self.push(EntryKind::Assistant {
                            text: String::new(),
                            streaming: true,
                        });
                        self.streaming_text = Some(i);
                        i
                    }
                };
                if let Some(e) = self.entries.get_mut(idx) {
                    if let EntryKind::Assistant { text: t, .. } = &mut e.kind {
                        t.push_str(text);
                    }
                    e.touch();
                }
            }
            EventKind::ReasoningDelta { text } => {
                let idx = match self.streaming_reasoning {
                    Some(i) => i,
                    None => {
                        let i = self.push(EntryKind::Reasoning {
                            text: String::new(),
                            streaming: true,
                        });
                        self.streaming_reasoning = Some(i);
                        i
                    }
                };
                if let Some(e) = self.entries.get_mut(idx) {
                    if let EntryKind::Reasoning { text: t, .. } = &mut e.kind {
                        t.push_str(text);
                    }
                    e.touch();
                }
            }
            EventKind::AssistantMessage {
                content,
                reasoning,
                tool_calls,
                ..
            } => {
                // The complete message is authoritative over the deltas seen (a catch-up may
                // have started mid-stream).
                match (self.streaming_reasoning, reasoning) {
                    (Some(i), Some(r)) => {
                        if let Some(e) = self.entries.get_mut(i) {
                            if let EntryKind::Reasoning { text, .. } = &mut e.kind {
                                *text = r.clone();
                            }
                        }
                    }
                    (None, Some(r)) if !r.trim().is_empty() => {
                        self.push(EntryKind::Reasoning {
                            text: r.clone(),
                            streaming: false,
                        });
                    }
                    _ => {}
                }
                match self.streaming_text {
                    Some(i) => {
                        if let Some(e) = self.entries.get_mut(i) {
                            if let EntryKind::Assistant { text, .. } = &mut e.kind {
                                *text = content.clone();
                            }
                        }
                    }
                    None if !content.trim().is_empty() => {
                        self.push(EntryKind::Assistant {
                            text: content.clone(),
                            streaming: false,
                        });
                    }
                    None => {}
                }
                self.end_streams();
                for call in tool_calls {
                    if self.by_call.contains_key(&call.id) {
                        continue;
                    }
                    let i = self.push(EntryKind::Tool(ToolCard {
                        name: call.name.clone(),
                        arguments: call.arguments.clone(),
                        state: ToolState::Queued,
                        output: String::new(),
                        output_ref: None,
                        progress: String::new(),
                        started_ms: None,
                        finished_ms: None,
                        approval_id: None,
                        awaiting_approval: false,
                        decision: None,
                    }));
                    self.by_call.insert(call.id.clone(), i);
                }
            }
            EventKind::ToolStarted {
                call_id,
                name,
                arguments,
            } => {
                self.end_streams();
                if !self.by_call.contains_key(call_id) {
                    let i = self.push(EntryKind::Tool(ToolCard {
                        name: name.clone(),
                        arguments: arguments.clone(),
                        state: ToolState::Queued,
                        output: String::new(),
                        output_ref: None,
                        progress: String::new(),
                        started_ms: None,
                        finished_ms: None,
                        approval_id: None,
                        awaiting_approval: false,
                        decision: None,
                    }));
                    self.by_call.insert(call_id.clone(), i);
                }
                if let Some(e) = self.card_mut(call_id) {
                    if let EntryKind::Tool(c) = &mut e.kind {
                        c.state = ToolState::Running;
                        c.started_ms = ts_ms;
                        c.awaiting_approval = false;
                    }
                    e.touch();
                }
            }
            EventKind::ToolFinished {
                call_id,
                name,
                is_error,
                output,
                output_ref,
                denied: _,
                context_bytes: _,
            } => {
                if !self.by_call.contains_key(call_id) {
                    let i = self.push(EntryKind::Tool(ToolCard {
                        name: name.clone(),
                        arguments: String::new(),
                        state: ToolState::Queued,
                        output: String::new(),
                        output_ref: None,
                        progress: String::new(),
                        started_ms: None,
                        finished_ms: None,
                        approval_id: None,
                        awaiting_approval: false,
                        decision: None,
                    }));
                    self.by_call.insert(call_id.clone(), i);
                }
                if let Some(e) = self.card_mut(call_id) {
                    if let EntryKind::Tool(c) = &mut e.kind {
                        c.state = ToolState::Done {
                            is_error: *is_error,
                        };
                        c.output = output.clone();
                        c.output_ref = output_ref.clone();
                        c.finished_ms = ts_ms;
                        c.awaiting_approval = false;
                    }
                    e.touch();
                }
            }
            EventKind::ApprovalRequested {
                approval_id,
                call_id,
                tool,
                arguments,
                ..
            } => {
                // Mark the queued card this approval is about: the call it names, or (journals
                // older than `call_id`) the queued one with the same tool and arguments.
                let unasked = |e: &Entry| {
                    matches!(&e.kind, EntryKind::Tool(c) if c.state == ToolState::Queued
                        && c.approval_id.is_none())
                };
                let found = match call_id.as_deref() {
                    Some(id) => self.card_mut(id).filter(|e| unasked(e)),
                    None => self.entries.iter_mut().rev().find(|e| {
                        unasked(e)
                            && matches!(&e.kind, EntryKind::Tool(c)
                                if c.name == *tool && c.arguments == *arguments)
                    }),
                };
                if let Some(e) = found {
                    if let EntryKind::Tool(c) = &mut e.kind {
                        c.approval_id = Some(approval_id.clone());
                        c.awaiting_approval = true;
                    }
                    e.touch();
                }
            }
            EventKind::ApprovalAnswered {
                approval_id,
                decision,
                ..
            } => {
                let found = self.entries.iter_mut().rev().find(|e| {
                    matches!(&e.kind, EntryKind::Tool(c) if c.approval_id.as_deref() == Some(approval_id))
                });
                if let Some(e) = found {
                    if let EntryKind::Tool(c) = &mut e.kind {
                        c.awaiting_approval = false;
                        c.decision = Some(*decision);
                    }
                    e.touch();
                }
            }
            EventKind::TurnFinished { outcome, detail } => {
                self.end_streams();
                // Cards that never ran stop spinning.
                for e in self.entries.iter_mut() {
                    if let EntryKind::Tool(c) = &mut e.kind {
                        if matches!(c.state, ToolState::Queued | ToolState::Running) {
                            c.state = ToolState::Done { is_error: true };
                            if c.output.is_empty() {
                                c.output = format!("not finished: turn {outcome}");
                            }
                            c.awaiting_approval = false;
                            e.cache.replace(None);
                        }
                    }
                }
                let detail = detail
                    .as_ref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default();
                match outcome {
                    TurnOutcome::Completed => {}
                    TurnOutcome::Paused => self.notice(
                        format!("turn paused{detail} — type /continue to go on"),
                        Level::Warn,
                    ),
                    TurnOutcome::Cancelled => {
                        self.notice(format!("turn cancelled{detail}"), Level::Warn)
                    }
                    TurnOutcome::Interrupted | TurnOutcome::Failed | TurnOutcome::Unknown => {
                        self.notice(format!("turn {outcome}{detail}"), Level::Error)
                    }
                }
            }
            EventKind::Notice { text } => self.notice(text.clone(), Level::Info),
            EventKind::Plan(p) => {
                use reasonix_forward::proto::PlanEvent;
                match p {
                    PlanEvent::Mode { on } => self.notice(
                        if *on {
                            "plan mode on: nothing changes until you approve a plan".to_string()
                        } else {
                            "plan mode off".to_string()
                        },
                        Level::Info,
                    ),
                    PlanEvent::Proposed { plan, steps, .. } => {
                        self.end_streams();
                        self.push(EntryKind::Assistant {
                            text: format!("**Proposed plan** ({} steps)\n\n{plan}", steps.len()),
                            streaming: false,
                        });
                    }
                    PlanEvent::Routed {
                        route,
                        depth,
                        reason,
                    } => self.notice(
                        crate::plan_lines::route_line(route, depth, reason),
                        Level::Info,
                    ),
                    PlanEvent::Handoff { model, text } => {
                        self.end_streams();
                        self.push(EntryKind::Assistant {
                            text: format!("**Planner handoff** ({model})\n\n{text}"),
                            streaming: false,
                        });
                    }
                    PlanEvent::PlannerFailed {
                        reason,
                        handed_over,
                    } => self.notice(
                        crate::plan_lines::planner_failed_line(reason, *handed_over),
                        Level::Warn,
                    ),
                    PlanEvent::Decided {
                        decision, comment, ..
                    } => self.notice(
                        match comment {
                            Some(c) => format!("plan: {} ({c})", decision.as_str()),
                            None => format!("plan: {}", decision.as_str()),
                        },
                        Level::Info,
                    ),
                }
            }
            EventKind::Goal(g) => self.notice(crate::goal::event_line(g), Level::Info),
            // Mid-stream: the streaming entry keeps taking the deltas.
            EventKind::Steer { request_id, text } => {
                self.push(EntryKind::Steer {
                    request_id: request_id.clone(),
                    text: text.clone(),
                    delivered: false,
                });
            }
            EventKind::SteerInjected { request_ids, .. } => {
                for e in self.entries.iter_mut().rev() {
                    if let EntryKind::Steer {
                        request_id,
                        delivered,
                        ..
                    } = &mut e.kind
                    {
                        if request_ids.contains(request_id) {
                            *delivered = true;
                            e.touch();
                        }
                    }
                }
            }
            EventKind::ShellRan {
                request_id,
                command,
                output,
                is_error,
                added_to_context,
            } => {
                self.pending_shells.remove(request_id);
                let done = EntryKind::Shell {
                    command: command.clone(),
                    output: output.clone(),
                    is_error: *is_error,
                    added_to_context: *added_to_context,
                    running: false,
                };
                match self
                    .shells
                    .remove(request_id)
                    .and_then(|i| self.entries.get_mut(i))
                {
                    // The streamed entry gets the bounded result.
                    Some(e) if matches!(e.kind, EntryKind::Shell { .. }) => {
                        e.kind = done;
                        e.touch();
                    }
                    _ => {
                        self.end_streams();
                        self.push(done);
                    }
                }
            }
            EventKind::ProviderRetry(r) => {
                self.notice(r.describe(r.delay_ms.div_ceil(1000)), Level::Warn)
            }
            EventKind::Compacted {
                kind,
                trigger,
                tokens_before,
                tokens_after,
                snipped,
                archived,
                ..
            } => self.notice(
                crate::context::compaction_line(
                    *kind,
                    *trigger,
                    *tokens_before,
                    *tokens_after,
                    snipped.len().max(archived.len()),
                ),
                Level::Info,
            ),
        }
    }

    /// Append streamed progress of a running tool.
    /// This client sent `!command` as `request_id`: its streamed output (`ToolProgress` with
    /// that id) shows in a running shell entry until `ShellRan` completes it.
    pub(crate) fn expect_shell(&mut self, request_id: &str, command: &str, added_to_context: bool) {
        self.pending_shells.insert(
            request_id.to_string(),
            (command.to_string(), added_to_context),
        );
    }

    /// Streamed output of a `!` command; false when `request_id` is not one.
    fn shell_progress(&mut self, request_id: &str, message: &str) -> bool {
        if let Some((command, added_to_context)) = self.pending_shells.remove(request_id) {
            self.end_streams();
            let i = self.push(EntryKind::Shell {
                command,
                output: String::new(),
                is_error: false,
                added_to_context,
                running: true,
            });
            self.shells.insert(request_id.to_string(), i);
        }
        let Some(&i) = self.shells.get(request_id) else {
            return false;
        };
        if let Some(e) = self.entries.get_mut(i) {
            if let EntryKind::Shell { output, .. } = &mut e.kind {
                output.push_str(message);
                // Only the tail is shown; keep memory bounded.
                if output.len() > 16 * 1024 {
                    let mut cut = output.len() - 8 * 1024;
                    while !output.is_char_boundary(cut) {
                        cut += 1;
                    }
                    output.drain(..cut);
                }
            }
            e.touch();
        }
        true
    }

    pub(crate) fn tool_progress(&mut self, call_id: &str, message: &str) {
        if self.shell_progress(call_id, message) {
            return;
        }
        if let Some(e) = self.card_mut(call_id) {
            if let EntryKind::Tool(c) = &mut e.kind {
                c.progress.push_str(message);
                if !message.ends_with('\n') {
                    c.progress.push('\n');
                }
                // Only the tail is ever shown; keep memory bounded.
                if c.progress.len() > 16 * 1024 {
                    let mut cut = c.progress.len() - 8 * 1024;
                    while !c.progress.is_char_boundary(cut) {
                        cut += 1;
                    }
                    c.progress.drain(..cut);
                }
            }
            e.touch();
        }
    }

    /// (turn, first line) of the user turns, oldest first.
    pub(crate) fn user_turns(&self) -> Vec<(u64, String)> {
        self.entries
            .iter()
            .filter_map(|e| match &e.kind {
                EntryKind::User { text, turn } => {
                    Some((*turn, text.lines().next().unwrap_or("").to_string()))
                }
                _ => None,
            })
            .collect()
    }

    /// Ids of the facts that `remember` calls of turn `turn` and later wrote (from their
    /// results: `remembered project fact ID (…` / `remembered global fact ID (…`).
    pub(crate) fn remembered_since(&self, turn: u64) -> Vec<String> {
        let mut current = 0;
        let mut out = Vec::new();
        for e in &self.entries {
            match &e.kind {
                EntryKind::User { turn: t, .. } => current = *t,
                EntryKind::Tool(c)
                    if current >= turn
                        && c.name == "remember"
                        && c.state == (ToolState::Done { is_error: false }) =>
                {
                    let mut w = c.output.split_whitespace();
                    if let (Some("remembered"), Some(_), Some("fact"), Some(id)) =
                        (w.next(), w.next(), w.next(), w.next())
                    {
                        if !out.iter().any(|o| o == id) {
                            out.push(id.to_string());
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// Text of the last assistant answer.
    /// The `n`-th most recent tool call that finished (1 = the last): its name, output and
    /// the reference to its full output when the output is a preview.
    pub(crate) fn nth_tool_output(&self, n: usize) -> Option<(String, String, Option<ContentRef>)> {
        self.entries
            .iter()
            .rev()
            .filter_map(|e| match &e.kind {
                EntryKind::Tool(c) if matches!(c.state, ToolState::Done { .. }) => {
                    Some((c.name.clone(), c.output.clone(), c.output_ref.clone()))
                }
                _ => None,
            })
            .nth(n.saturating_sub(1))
    }

    pub(crate) fn last_answer(&self) -> Option<String> {
        self.entries.iter().rev().find_map(|e| match &e.kind {
            EntryKind::Assistant { text, .. } if !text.trim().is_empty() => Some(text.clone()),
            _ => None,
        })
    }

    /// Body of the last fenced code block of any assistant answer.
    pub(crate) fn last_code_block(&self) -> Option<String> {
        self.entries.iter().rev().find_map(|e| match &e.kind {
            EntryKind::Assistant { text, .. } => {
                let mut blocks = Vec::new();
                let mut cur: Option<String> = None;
                for l in text.lines() {
                    if l.trim_start().starts_with("```") {
                        match cur.take() {
                            Some(b) => blocks.push(b),
                            None => cur = Some(String::new()),
                        }
                    } else if let Some(b) = cur.as_mut() {
                        b.push_str(l);
                        b.push('\n');
                    }
                }
                blocks.pop()
            }
            _ => None,
        })
    }

    /// Rows of entry `i` (cached when not animated).
    pub(crate) fn lines_of(&self, i: usize, ctx: &LayoutCtx) -> Arc<Vec<Line<'static>>> {
        let Some(e) = self.entries.get(i) else {
            return Arc::new(Vec::new());
        };
        if !e.animated() {
            if let Some(c) = e.cache.borrow().as_ref() {
                if c.width == ctx.width && c.show_reasoning == ctx.show_reasoning {
                    return Arc::clone(&c.lines);
                }
            }
        }
        let lines = Arc::new(layout(&e.kind, ctx));
        if !e.animated() {
            *e.cache.borrow_mut() = Some(Cached {
                width: ctx.width,
                show_reasoning: ctx.show_reasoning,
                lines: Arc::clone(&lines),
            });
        }
        lines
    }

    fn height_of(&self, i: usize, ctx: &LayoutCtx) -> usize {
        self.lines_of(i, ctx).len()
    }

    /// The anchor of the top row when following the bottom; `None` when everything fits.
    fn follow_anchor(&self, ctx: &LayoutCtx, height: usize) -> Option<(usize, usize)> {
        let mut acc = 0usize;
        for i in (0..self.entries.len()).rev() {
            acc += self.height_of(i, ctx);
            if acc >= height {
                return Some((i, acc - height));
            }
        }
        None
    }

    /// Rows from (entry, line) to the end, counting no further than `limit`.
    fn rows_from(&self, ctx: &LayoutCtx, entry: usize, line: usize, limit: usize) -> usize {
        let mut acc = 0usize;
        for i in entry..self.entries.len() {
            let h = self.height_of(i, ctx);
            acc += if i == entry {
                h.saturating_sub(line)
            } else {
                h
            };
            if acc > limit {
                break;
            }
        }
        acc
    }

    /// Scroll up by `n` rows.
    pub(crate) fn scroll_up(
        &self,
        ctx: &LayoutCtx,
        height: usize,
        from: Scroll,
        n: usize,
    ) -> Scroll {
        let (mut entry, line) = match from {
            Scroll::Follow => match self.follow_anchor(ctx, height) {
                Some(a) => a,
                None => return Scroll::Follow,
            },
            Scroll::Anchor { entry, line } => {
                (entry.min(self.entries.len().saturating_sub(1)), line)
            }
        };
        let mut line = line as isize - n as isize;
        while line < 0 && entry > 0 {
            entry -= 1;
            line += self.height_of(entry, ctx) as isize;
        }
        Scroll::Anchor {
            entry,
            line: line.max(0) as usize,
        }
    }

    /// Scroll down by `n` rows; back to following once the bottom is in view.
    pub(crate) fn scroll_down(
        &self,
        ctx: &LayoutCtx,
        height: usize,
        from: Scroll,
        n: usize,
    ) -> Scroll {
        let Scroll::Anchor { mut entry, line } = from else {
            return Scroll::Follow;
        };
        if entry >= self.entries.len() {
            return Scroll::Follow;
        }
        let mut line = line + n;
        loop {
            let h = self.height_of(entry, ctx);
            if line < h || entry + 1 >= self.entries.len() {
                break;
            }
            line -= h;
            entry += 1;
        }
        if self.rows_from(ctx, entry, line, height) <= height {
            Scroll::Follow
        } else {
            Scroll::Anchor { entry, line }
        }
    }

    /// The visible rows for a view of `height` rows at `scroll`. Only entries in (or just
    /// above) the window are laid out.
    pub(crate) fn window(
        &self,
        ctx: &LayoutCtx,
        height: usize,
        scroll: Scroll,
    ) -> Vec<Line<'static>> {
        let mut rows: Vec<Line<'static>> = Vec::with_capacity(height);
        match scroll {
            Scroll::Follow => {
                let mut chunks: Vec<Arc<Vec<Line<'static>>>> = Vec::new();
                let mut acc = 0usize;
                for i in (0..self.entries.len()).rev() {
                    let l = self.lines_of(i, ctx);
                    acc += l.len();
                    chunks.push(l);
                    if acc >= height {
                        break;
                    }
                }
                let skip = acc.saturating_sub(height);
                let mut skipped = 0usize;
                for chunk in chunks.iter().rev() {
                    for l in chunk.iter() {
                        if skipped < skip {
                            skipped += 1;
                            continue;
                        }
                        rows.push(l.clone());
                    }
                }
            }
            Scroll::Anchor { entry, line } => {
                let mut skip = line;
                for i in entry..self.entries.len() {
                    for l in self.lines_of(i, ctx).iter() {
                        if skip > 0 {
                            skip -= 1;
                            continue;
                        }
                        rows.push(l.clone());
                        if rows.len() >= height {
                            return rows;
                        }
                    }
                }
            }
        }
        rows
    }
}

/// Lay out one entry. Every entry starts with a blank separator row.
fn layout(kind: &EntryKind, ctx: &LayoutCtx) -> Vec<Line<'static>> {
    let w = ctx.width.max(8);
    let mut out = vec![Line::default()];
    match kind {
        EntryKind::User { text, .. } => {
            let first = [Span::styled("> ", theme::user_marker())];
            let rest = [Span::raw("  ")];
            for (n, l) in text.split('\n').enumerate() {
                let spans = [Span::styled(
                    sanitize(l),
                    theme::text().add_modifier(Modifier::BOLD),
                )];
                out.extend(wrap_line(
                    &spans,
                    w,
                    if n == 0 { &first } else { &rest },
                    &rest,
                ));
            }
        }
        EntryKind::Assistant { text, .. } => {
            for l in markdown::render(text, w.saturating_sub(2)) {
                let mut spans = vec![Span::raw("  ")];
                spans.extend(l.spans);
                out.push(Line::from(spans));
            }
            if out.len() == 1 {
                out.push(Line::from(Span::styled("  …", theme::dim())));
            }
        }
        EntryKind::Reasoning { text, streaming } => {
            let style = theme::dim().add_modifier(Modifier::ITALIC);
            let n_lines = text.trim().lines().count();
            let gutter = [Span::styled("  ┊ ", theme::gutter())];
            if *streaming && !ctx.show_reasoning {
                out.push(Line::from(Span::styled("  thinking…", style)));
                let wrapped = wrap_text(text.trim(), w, style, &gutter);
                let start = wrapped.len().saturating_sub(4);
                out.extend(wrapped.into_iter().skip(start));
            } else if ctx.show_reasoning {
                out.push(Line::from(Span::styled(
                    if *streaming {
                        "  thinking…"
                    } else {
                        "  thought"
                    },
                    style,
                )));
                out.extend(wrap_text(text.trim(), w, style, &gutter));
            } else {
                out.push(Line::from(Span::styled(
                    format!(
                        "  thought · {n_lines} line{} (Ctrl-O to show)",
                        if n_lines == 1 { "" } else { "s" }
                    ),
                    style,
                )));
            }
        }
        EntryKind::Tool(card) => out.extend(tool_card(card, ctx, w)),
        EntryKind::Steer {
            text, delivered, ..
        } => out.extend(super::workbench::steer_lines(text, *delivered, w)),
        EntryKind::Shell {
            command,
            output,
            is_error,
            added_to_context,
            running,
        } => out.extend(super::workbench::shell_lines(
            command,
            output,
            *is_error,
            *added_to_context,
            *running,
            w,
        )),
        EntryKind::Notice { text, level } => {
            let (mark, style) = match level {
                Level::Info => ("  · ", theme::dim()),
                Level::Warn => ("  ! ", theme::warn()),
                Level::Error => ("  x ", theme::error()),
            };
            let first = [Span::styled(mark, style)];
            let rest = [Span::raw("    ")];
            for (n, l) in text.split('\n').enumerate() {
                out.extend(wrap_line(
                    &[Span::styled(sanitize(l), style)],
                    w,
                    if n == 0 { &first } else { &rest },
                    &rest,
                ));
            }
        }
    }
    out
}

/// The argument worth showing next to a tool's name.
pub(crate) fn key_arg(tool: &str, arguments: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(arguments) else {
        return sanitize(arguments.lines().next().unwrap_or(""));
    };
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let pick = match tool {
        "move_file" => match (s("source_path"), s("destination_path")) {
            (Some(a), Some(b)) => Some(format!("{a} → {b}")),
            (a, b) => a.or(b),
        },
        "grep" => s("pattern").map(|p| match s("path") {
            Some(path) if path != "." => format!("{p}  in {path}"),
            _ => p,
        }),
        _ => None,
    };
    let pick = pick
        .or_else(|| {
            [
                "command",
                "path",
                "file_path",
                "pattern",
                "query",
                "url",
                "job_id",
                "name",
            ]
            .iter()
            .find_map(|k| s(k))
        })
        .or_else(|| {
            v.as_object()
                .and_then(|o| o.values().find_map(|x| x.as_str().map(str::to_string)))
        })
        .unwrap_or_default();
    let first = pick.lines().next().unwrap_or("").to_string();
    let more = pick.lines().count() > 1;
    sanitize(&if more { format!("{first} …") } else { first })
}

fn fmt_elapsed(ms: i64) -> String {
    let s = ms.max(0) as f64 / 1000.0;
    if s < 60.0 {
        format!("{s:.1}s")
    } else {
        format!("{}m{:02}s", (s / 60.0) as u64, (s as u64) % 60)
    }
}

fn tool_card(card: &ToolCard, ctx: &LayoutCtx, w: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let (glyph, glyph_style, status, status_style) = match &card.state {
        ToolState::Queued if card.awaiting_approval => (
            "○",
            theme::warn(),
            "waiting for approval".to_string(),
            theme::warn(),
        ),
        ToolState::Queued => ("○", theme::dim(), "queued".to_string(), theme::dim()),
        ToolState::Running => {
            let spin = theme::spinner(ctx.frame);
            let el = card
                .started_ms
                .map(|s| format!(" {}", fmt_elapsed(ctx.now_ms - s)))
                .unwrap_or_default();
            (spin, theme::warn(), format!("running{el}"), theme::warn())
        }
        ToolState::Done { is_error: false } => {
            let el = match (card.started_ms, card.finished_ms) {
                (Some(a), Some(b)) => fmt_elapsed(b - a),
                _ => "done".into(),
            };
            ("●", theme::ok(), el, theme::dim())
        }
        ToolState::Done { is_error: true } => {
            let label = if card.decision == Some(ApprovalDecision::Deny) {
                "denied"
            } else {
                "failed"
            };
            ("●", theme::error(), label.to_string(), theme::error())
        }
    };
    let decision = match card.decision {
        Some(ApprovalDecision::AllowOnce) => " · allowed once",
        Some(ApprovalDecision::AllowSession) => " · allowed for session",
        Some(ApprovalDecision::AllowAlways) => " · always allowed",
        Some(ApprovalDecision::Deny) | None => "",
    };
    let status = format!("{status}{decision}");
    let arg = key_arg(&card.name, &card.arguments);
    let fixed = 2 + 2 + text_width(&card.name) + 1 + 2 + text_width(&status);
    let arg = truncate(&arg, w.saturating_sub(fixed).max(4));
    out.push(Line::from(vec![
        Span::raw("  "),
        Span::styled(format!("{glyph} "), glyph_style),
        Span::styled(card.name.clone(), theme::tool_name()),
        Span::raw(" "),
        Span::raw(arg),
        Span::raw("  "),
        Span::styled(status, status_style),
    ]));
    let indent = "    ";
    let gutter = [Span::styled("    │ ", theme::gutter())];
    let is_edit = diff::is_edit_tool(&card.name);
    if is_edit {
        if let Some(rows) = diff::rows_from_args(&card.name, &card.arguments) {
            // The file header repeats the path shown on the card; skip it.
            let rows: Vec<_> = rows.into_iter().skip(1).collect();
            out.extend(diff::render(&rows, w, indent, 24));
        }
    }
    match &card.state {
        ToolState::Queued => {}
        ToolState::Running => {
            let tail: Vec<&str> = card.progress.lines().collect();
            let start = tail.len().saturating_sub(3);
            for l in &tail[start..] {
                out.extend(wrap_line(
                    &[Span::styled(sanitize(l), theme::dim())],
                    w,
                    &gutter,
                    &gutter,
                ));
            }
        }
        ToolState::Done { is_error } => {
            let style = if *is_error {
                theme::error()
            } else {
                theme::dim()
            };
            let max = if *is_error {
                8
            } else if is_edit {
                1
            } else {
                5
            };
            let lines: Vec<&str> = card.output.trim_end().lines().collect();
            if lines.is_empty() && !is_error {
                out.push(Line::from(vec![
                    gutter[0].clone(),
                    Span::styled("(no output)", theme::dim()),
                ]));
            }
            for l in lines.iter().take(max) {
                let mut rows = wrap_line(&[Span::styled(sanitize(l), style)], w, &gutter, &gutter);
                rows.truncate(3);
                out.extend(rows);
            }
            if lines.len() > max {
                out.push(Line::from(vec![
                    gutter[0].clone(),
                    Span::styled(format!("… {} more lines", lines.len() - max), theme::dim()),
                ]));
            }
            if let Some(r) = &card.output_ref {
                out.push(Line::from(vec![
                    gutter[0].clone(),
                    Span::styled(
                        format!(
                            "… {} in full on the host; /output saves it to a file",
                            reasonix_forward::units::bytes(r.bytes)
                        ),
                        theme::dim(),
                    ),
                ]));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use reasonix_forward::proto::ToolCall;

    fn ctx(width: usize) -> LayoutCtx {
        LayoutCtx {
            width,
            show_reasoning: false,
            now_ms: 0,
            frame: 0,
        }
    }

    fn many(n: usize) -> Transcript {
        let mut t = Transcript::default();
        for i in 0..n {
            t.notice(format!("notice {i}"), Level::Info);
        }
        t
    }

    fn text(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| {
                l.spans
                    .iter()
                    .map(|s| s.content.as_ref())
                    .collect::<String>()
            })
            .collect()
    }

    #[test]
    fn follow_shows_the_bottom_and_scrolling_moves_by_rows() {
        let t = many(10); // each notice: blank + 1 row = 2 rows; 20 rows total
        let c = ctx(40);
        let w = t.window(&c, 5, Scroll::Follow);
        assert_eq!(
            text(&w),
            vec!["  · notice 7", "", "  · notice 8", "", "  · notice 9"]
        );
        let up = t.scroll_up(&c, 5, Scroll::Follow, 3);
        assert_eq!(up, Scroll::Anchor { entry: 6, line: 0 });
        assert_eq!(text(&t.window(&c, 5, up))[1], "  · notice 6");
        // Scrolling down past the bottom returns to following.
        assert_eq!(
            t.scroll_down(&c, 5, up, 2),
            Scroll::Anchor { entry: 7, line: 0 }
        );
        assert_eq!(t.scroll_down(&c, 5, up, 3), Scroll::Follow);
        // Up past the top clamps.
        assert_eq!(
            t.scroll_up(&c, 5, up, 1000),
            Scroll::Anchor { entry: 0, line: 0 }
        );
    }

    #[test]
    fn a_steer_the_planner_took_is_shown_given_to_the_model() {
        let mut t = Transcript::default();
        t.apply(
            &EventKind::Steer {
                request_id: "s1".into(),
                text: "use tabs".into(),
            },
            None,
            1,
        );
        let delivered = |t: &Transcript| {
            t.entries.iter().any(|e| {
                matches!(e.kind, EntryKind::Steer { delivered: true, ref request_id, .. } if request_id == "s1")
            })
        };
        assert!(!delivered(&t));
        // Another planner event changes nothing in the transcript.
        t.apply(
            &EventKind::Planner {
                event: Box::new(EventKind::ToolStarted {
                    call_id: "p1".into(),
                    name: "read_file".into(),
                    arguments: "{}".into(),
                }),
            },
            None,
            1,
        );
        assert!(!delivered(&t));
        t.apply(
            &EventKind::Planner {
                event: Box::new(EventKind::SteerInjected {
                    request_ids: vec!["s1".into()],
                    est_tokens: 3,
                }),
            },
            None,
            1,
        );
        assert!(delivered(&t));
    }

    #[test]
    fn stream_then_message_then_tools() {
        let mut t = Transcript::default();
        t.apply(
            &EventKind::UserTurn {
                attachments: Vec::new(),
                request_id: "r".into(),
                text: "hi".into(),
            },
            None,
            1,
        );
        t.apply(&EventKind::ReasoningDelta { text: "hmm".into() }, None, 1);
        t.apply(&EventKind::TextDelta { text: "Hel".into() }, None, 1);
        t.apply(&EventKind::TextDelta { text: "lo".into() }, None, 1);
        t.apply(
            &EventKind::AssistantMessage {
                content: "Hello".into(),
                reasoning: Some("hmm".into()),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "bash".into(),
                    arguments: "{\"command\":\"ls\"}".into(),
                }],
                provider_replay: None,
            },
            None,
            1,
        );
        t.apply(
            &EventKind::ToolStarted {
                call_id: "c1".into(),
                name: "bash".into(),
                arguments: "{\"command\":\"ls\"}".into(),
            },
            Some(1000),
            1,
        );
        t.apply(
            &EventKind::ToolFinished {
                call_id: "c1".into(),
                name: "bash".into(),
                is_error: false,
                output: "a\nb".into(),
                output_ref: None,
                denied: None,
                context_bytes: None,
            },
            Some(3500),
            1,
        );
        assert_eq!(t.len(), 4);
        assert_eq!(t.last_answer().as_deref(), Some("Hello"));
        let all = text(&t.window(&ctx(60), 100, Scroll::Follow));
        assert!(all.contains(&"  ● bash ls  2.5s".to_string()), "{all:?}");
        assert!(all.contains(&"    │ a".to_string()));
        assert!(all.contains(&"  thought · 1 line (Ctrl-O to show)".to_string()));
    }

    #[test]
    fn key_args() {
        assert_eq!(
            key_arg("bash", r#"{"command":"cargo test\n-p x"}"#),
            "cargo test …"
        );
        assert_eq!(
            key_arg("read_file", r#"{"path":"a.rs","offset":3}"#),
            "a.rs"
        );
        assert_eq!(
            key_arg("move_file", r#"{"source_path":"a","destination_path":"b"}"#),
            "a → b"
        );
        assert_eq!(key_arg("weird", "not json"), "not json");
    }
}
