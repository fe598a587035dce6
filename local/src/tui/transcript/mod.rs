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

mod apply;
mod render;
mod scroll;

pub(crate) use render::key_arg;

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
}

#[cfg(test)]
mod test_support {
    use ratatui::text::Line;

    use super::LayoutCtx;

    pub(super) fn ctx(width: usize) -> LayoutCtx {
        LayoutCtx {
            width,
            show_reasoning: false,
            now_ms: 0,
            frame: 0,
        }
    }

    pub(super) fn text(lines: &[Line<'_>]) -> Vec<String> {
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
}
