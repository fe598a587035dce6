//! The compaction ladder: keeping a long session inside its model's context window while
//! rewriting the history as rarely as possible (every rewrite costs one cache miss).
//!
//! - below the snip ratio the history is never rewritten;
//! - at a turn start at or over the snip ratio, old tool results outside the recent tail are
//!   replaced by a placeholder naming the archived original ([`plan_snip`]); when what a
//!   snip cannot shorten before the tail (placeholders, assistant steps) has grown to a
//!   third of the snip ratio ([`Thresholds::fold_worth`]), snips would come back every turn
//!   or two, so the rung summarises instead;
//! - at a turn start at or over the compact ratio, the old middle is replaced by a
//!   model-written summary ([`plan_summary`]; the session asks the model with the cached,
//!   unsnipped history), unless a snip alone brings the request under the snip ratio (and
//!   the same test finds nothing worth folding);
//! - before any request (also mid-turn) at or over the force ratio, both run as needed.
//!
//! The rewrite itself ([`apply`]) is a pure function of the conversation and the journaled
//! `Compacted` event, so the live session and a journal replay produce the same bytes.
//! This module holds no I/O except the archive file ([`archive`]); the runner glue in
//! `runner/compact.rs` calls the model and journals the result.

pub mod archive;
pub mod estimate;
pub mod history;

use reasonix_forward::proto::{CompactionKind, ContextSettings, SnippedResult};
use serde_json::{json, Value};

pub use estimate::Estimator;

/// Placeholders start with this, so a snipped result is never snipped again.
pub const SNIP_MARK: &str = "[snipped tool result:";

/// The summary message starts with this tag.
pub const SUMMARY_OPEN: &str = "<compaction-summary>";

/// Tool results at most this long are not worth a placeholder.
const SNIP_MIN_BYTES: usize = 512;

/// User messages at most this long are "normal-sized" and kept verbatim by a summary.
pub const USER_KEEP_BYTES: usize = 4096;

/// What the ladder asks for before a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Leave the history alone.
    None,
    /// Snip old tool results.
    Snip,
    /// Summarise (or only snip, when that is enough).
    Summary,
}

/// The thresholds of a session in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Context window (never 0 here).
    pub window: u64,
    /// Snip from here.
    pub snip: u64,
    /// At the snip rung, summarise instead of snipping when what a snip would leave before
    /// the tail, besides the user turns a summary keeps, is at least this (a third of
    /// `snip`): see `runner/compact.rs`.
    pub fold_worth: u64,
    /// Summarise from here (at a turn start).
    pub compact: u64,
    /// Force from here (before any request).
    pub force: u64,
    /// Recent tokens kept verbatim.
    pub tail: u64,
}

impl Thresholds {
    /// The thresholds of `ctx`; `None` when compaction is disabled (`window = 0`). The tail
    /// is the configured one, but at most a quarter of the window: a tail as big as the snip
    /// threshold would leave nothing to compact, and every rewrite would free too little to
    /// be worth its cache miss.
    pub fn of(ctx: &ContextSettings) -> Option<Thresholds> {
        if ctx.window == 0 {
            return None;
        }
        let at = |permille: u32| ctx.window * u64::from(permille.min(1000)) / 1000;
        Some(Thresholds {
            window: ctx.window,
            snip: at(ctx.snip_permille),
            fold_worth: at(ctx.snip_permille) / 3,
            compact: at(ctx.compact_permille),
            force: at(ctx.force_permille),
            tail: ctx.tail_tokens.min(ctx.window / 4),
        })
    }

    /// The level for a request of `tokens`; `turn_start` when it is the first request of a
    /// user turn (the only point where the unforced rungs run).
    pub fn level(&self, tokens: u64, turn_start: bool) -> Level {
        if tokens >= self.force || (turn_start && tokens >= self.compact) {
            Level::Summary
        } else if turn_start && tokens >= self.snip {
            Level::Snip
        } else {
            Level::None
        }
    }
}

/// Index of the first message of the recent tail: the shortest suffix of at least
/// `tail_tokens`, moved back so it never starts on a tool result (a tool call and its results
/// stay together).
pub fn tail_start(messages: &[Value], est: &Estimator, tail_tokens: u64) -> usize {
    let mut acc = 0u64;
    let mut start = messages.len();
    while start > 0 && acc < tail_tokens {
        start -= 1;
        acc += est.tokens(estimate::message_bytes(&messages[start]));
    }
    while start > 0 && start < messages.len() && role(&messages[start]) == "tool" {
        start -= 1;
    }
    start
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

fn content(m: &Value) -> &str {
    m.get("content").and_then(Value::as_str).unwrap_or("")
}

/// Tool results before `tail` worth snipping: (index, call id, bytes).
pub fn plan_snip(messages: &[Value], tail: usize) -> Vec<(usize, String, usize)> {
    messages[..tail.min(messages.len())]
        .iter()
        .enumerate()
        .filter(|(_, m)| role(m) == "tool")
        .filter(|(_, m)| {
            let c = content(m);
            c.len() > SNIP_MIN_BYTES && !c.starts_with(SNIP_MARK)
        })
        .filter_map(|(i, m)| {
            let id = m.get("tool_call_id").and_then(Value::as_str)?;
            Some((i, id.to_string(), content(m).len()))
        })
        .collect()
}

/// The placeholder of a snipped result: what it was and the `history` call that reads it
/// back. Short on purpose: every placeholder stays in every later request (until a summary),
/// so its bytes are paid again and again, and what the snips cannot free decides how often
/// they come (each one a cache miss of the recent tail).
pub fn placeholder(s: &SnippedResult) -> String {
    format!(
        "{SNIP_MARK} {} bytes; history {{\"load\":\"{}\"}}]",
        s.bytes, s.archive_id
    )
}

/// The range `[start, end)` a summary replaces: everything before the tail, when that is at
/// least two messages.
pub fn plan_summary(messages: &[Value], tail: usize) -> Option<(usize, usize)> {
    let end = tail.min(messages.len());
    (end >= 2).then_some((0, end))
}

/// The instruction that ends a summary request. The request is the conversation up to the
/// tail (a byte prefix of what the provider has cached) plus this message.
pub fn summary_instruction(focus: Option<&str>) -> Value {
    let mut text = String::from(
        "<compaction-request>\nThe conversation above is being compacted to stay within the context window. \
Write a structured summary of it that lets you continue the work without it. Use these headings, \
each with short bullet points (write \"none\" when empty):\n\
## Standing facts (about the user, the repository, conventions, constraints)\n\
## Goal (what the user wants overall, and in the current turn)\n\
## Decisions (what was decided and why)\n\
## Files touched (path: what changed or what was learned)\n\
## Commands run (command: outcome)\n\
## Errors (what failed, whether it is resolved)\n\
## Pending work (what is left, next step first)\n\
Be exact about names, paths, numbers and error messages. Do not call tools; answer with the summary only.",
    );
    if let Some(f) = focus.filter(|f| !f.trim().is_empty()) {
        text.push_str(&format!(
            "\nThe user asks the summary to focus on: {}",
            f.trim()
        ));
    }
    text.push_str("\n</compaction-request>");
    json!({"role": "user", "content": text})
}

/// The summary message's content for the model's `summary` text.
pub fn summary_content(summary: &str) -> String {
    format!(
        "{SUMMARY_OPEN}\nEarlier parts of this session were compacted; the originals are archived on the host and can be searched or loaded with the history tool.\n{}\n</compaction-summary>",
        summary.trim()
    )
}

/// Bytes of the user messages before `end` that a summary would keep verbatim.
pub fn summary_keeps_bytes(messages: &[Value], end: usize) -> usize {
    kept_user_turns(messages, (0, end.min(messages.len())), None)
        .iter()
        .map(estimate::message_bytes)
        .sum()
}

/// The bound a summary of `range` puts on the user messages it keeps, when they would take
/// more than `budget` bytes (`None`: it keeps them all). A long session in a small window
/// would otherwise keep every earlier prompt forever and outgrow the window with them.
pub fn kept_user_bound(messages: &[Value], range: (usize, usize), budget: usize) -> Option<u64> {
    let end = range.1.min(messages.len());
    let all: usize = kept_user_turns(messages, (range.0.min(end), end), None)
        .iter()
        .map(estimate::message_bytes)
        .sum();
    (all > budget).then_some(budget as u64)
}

/// User messages of `range` kept verbatim by a summary: normal-sized, not an earlier
/// summary; with `bound`, only the newest of them whose bytes fit in it.
fn kept_user_turns(messages: &[Value], range: (usize, usize), bound: Option<u64>) -> Vec<Value> {
    let mut kept: Vec<Value> = messages[range.0..range.1]
        .iter()
        .filter(|m| role(m) == "user")
        .filter(|m| {
            let c = content(m);
            c.len() <= USER_KEEP_BYTES && !c.starts_with(SUMMARY_OPEN)
        })
        .cloned()
        .collect();
    if let Some(bound) = bound {
        let mut left = bound as usize;
        let mut first = kept.len();
        while first > 0 && estimate::message_bytes(&kept[first - 1]) <= left {
            first -= 1;
            left -= estimate::message_bytes(&kept[first]);
        }
        kept.drain(..first);
    }
    kept
}

/// The message a journaled snip names: the one at its index when that is a result of its
/// call, else (journals from before snips carried an index) the first result of the call
/// that is not a placeholder yet. A call id alone is not enough: providers may reuse ids
/// across turns, and a snip that replaced an earlier result of the same id again would
/// free nothing while claiming it did.
fn snipped_message(messages: &[Value], s: &SnippedResult) -> Option<usize> {
    let result_of_call = |m: &Value| {
        role(m) == "tool" && m.get("tool_call_id").and_then(Value::as_str) == Some(&s.call_id)
    };
    if let Some(i) = s.index.map(|i| i as usize) {
        return messages.get(i).is_some_and(&result_of_call).then_some(i);
    }
    messages
        .iter()
        .position(|m| result_of_call(m) && !content(m).starts_with(SNIP_MARK))
}

/// A rewrite as journaled.
#[derive(Debug, Clone, Copy)]
pub enum Rewrite<'a> {
    /// Snip these results.
    Snip(&'a [SnippedResult]),
    /// Replace `range` by the summary (then the kept user turns of the range).
    Summary {
        /// Messages replaced.
        range: (u64, u64),
        /// The summary message's content.
        summary: &'a str,
        /// The bound on the user messages kept after it ([`kept_user_bound`]).
        kept_user_bytes: Option<u64>,
    },
}

impl Rewrite<'_> {
    /// Its kind.
    pub fn kind(&self) -> CompactionKind {
        match self {
            Rewrite::Snip(_) => CompactionKind::Snip,
            Rewrite::Summary { .. } => CompactionKind::Summary,
        }
    }
}

/// The messages a summary of `range` removes from the conversation (for the archive).
pub fn summarised_messages(messages: &[Value], range: (usize, usize)) -> Vec<Value> {
    let end = range.1.min(messages.len());
    messages[range.0.min(end)..end].to_vec()
}

/// Apply a journaled rewrite to the conversation. Deterministic: the live session and a
/// replay of the journal get the same bytes. A rewrite that does not fit the conversation
/// (which a consistent journal never holds) changes nothing it cannot find.
pub fn apply(messages: &mut Vec<Value>, rewrite: Rewrite<'_>) {
    match rewrite {
        Rewrite::Snip(snips) => {
            for s in snips {
                if let Some(i) = snipped_message(messages, s) {
                    messages[i]["content"] = Value::String(placeholder(s));
                }
            }
        }
        Rewrite::Summary {
            range,
            summary,
            kept_user_bytes,
        } => {
            let end = (range.1 as usize).min(messages.len());
            let start = (range.0 as usize).min(end);
            let kept = kept_user_turns(messages, (start, end), kept_user_bytes);
            let mut replacement = vec![json!({"role": "user", "content": summary})];
            replacement.extend(kept);
            messages.splice(start..end, replacement);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv() -> Vec<Value> {
        let big = "r".repeat(4000);
        vec![
            json!({"role": "user", "content": "fix the bug"}),
            json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": big}),
            json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c2"}]}),
            json!({"role": "tool", "tool_call_id": "c2", "content": big}),
            json!({"role": "user", "content": "and now the tests"}),
            json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c3"}]}),
            json!({"role": "tool", "tool_call_id": "c3", "content": big}),
        ]
    }

    #[test]
    fn the_tail_never_starts_on_a_tool_result() {
        let m = conv();
        let est = Estimator::default();
        // ~1000 tokens reach into the last tool result only: moved back to its call.
        assert_eq!(tail_start(&m, &est, 500), 6);
        assert_eq!(tail_start(&m, &est, 0), 8);
        assert_eq!(tail_start(&m, &est, 1_000_000), 0);
    }

    #[test]
    fn snip_replaces_old_results_and_keeps_pairs() {
        let mut m = conv();
        let plan = plan_snip(&m, 6);
        assert_eq!(
            plan.iter().map(|p| p.1.as_str()).collect::<Vec<_>>(),
            ["c1", "c2"]
        );
        let snips: Vec<SnippedResult> = plan
            .iter()
            .map(|(i, id, bytes)| SnippedResult {
                call_id: id.clone(),
                archive_id: format!("a{}", &id[1..]),
                bytes: *bytes as u64,
                index: Some(*i as u64),
            })
            .collect();
        apply(&mut m, Rewrite::Snip(&snips));
        assert_eq!(
            m.len(),
            8,
            "no message removed: calls and results stay paired"
        );
        assert!(content(&m[2]).starts_with(SNIP_MARK));
        assert_eq!(
            content(&m[2]),
            format!("{SNIP_MARK} 4000 bytes; history {{\"load\":\"a1\"}}]")
        );
        assert_eq!(content(&m[7]).len(), 4000, "the tail is untouched");
        assert!(
            plan_snip(&m, 6).is_empty(),
            "a placeholder is never snipped again"
        );
    }

    /// Providers (and clients restarted per turn with the same script) may reuse call ids
    /// across turns: a second snip must replace the result it planned, not the first
    /// result of that id again (which froze the session's size at every later snip).
    #[test]
    fn a_snip_of_a_reused_call_id_replaces_the_planned_result() {
        let big = "r".repeat(4000);
        let mut m = vec![
            json!({"role": "user", "content": "turn 1"}),
            json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": big}),
            json!({"role": "user", "content": "turn 2"}),
            json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": big}),
            json!({"role": "user", "content": "turn 3"}),
        ];
        let snip_all = |m: &mut Vec<Value>, tail: usize, first_archive: usize| {
            let snips: Vec<SnippedResult> = plan_snip(m, tail)
                .into_iter()
                .enumerate()
                .map(|(n, (i, id, bytes))| SnippedResult {
                    call_id: id,
                    archive_id: format!("a{}", first_archive + n),
                    bytes: bytes as u64,
                    index: Some(i as u64),
                })
                .collect();
            apply(m, Rewrite::Snip(&snips));
            snips.len()
        };
        assert_eq!(snip_all(&mut m, 3, 0), 1);
        assert!(content(&m[2]).starts_with(SNIP_MARK));
        assert_eq!(snip_all(&mut m, 6, 1), 1);
        assert!(
            content(&m[5]).starts_with(SNIP_MARK),
            "the second c1 result is snipped"
        );
        assert!(
            content(&m[2]).contains("\"a0\""),
            "the first keeps its own archive id"
        );
        // A journal from before snips carried an index: the first unsnipped result is meant.
        let mut old = m.clone();
        old[5]["content"] = json!(big);
        let legacy = SnippedResult {
            call_id: "c1".into(),
            archive_id: "a9".into(),
            bytes: 4000,
            index: None,
        };
        apply(&mut old, Rewrite::Snip(std::slice::from_ref(&legacy)));
        assert!(content(&old[2]).contains("\"a0\""));
        assert!(content(&old[5]).contains("\"a9\""));
        // An index that does not name a result of the call changes nothing.
        let wrong = SnippedResult {
            index: Some(3),
            ..legacy
        };
        let before = old.clone();
        apply(&mut old, Rewrite::Snip(std::slice::from_ref(&wrong)));
        assert_eq!(old, before);
    }

    #[test]
    fn summary_replaces_the_middle_and_keeps_user_turns() {
        let mut m = conv();
        let range = plan_summary(&m, 6).expect("range");
        assert_eq!(range, (0, 6));
        let s = summary_content("did things");
        apply(
            &mut m,
            Rewrite::Summary {
                range: (0, 6),
                summary: &s,
                kept_user_bytes: None,
            },
        );
        assert_eq!(m.len(), 2 + 1 + 2);
        assert!(content(&m[0]).starts_with(SUMMARY_OPEN));
        assert_eq!(content(&m[1]), "fix the bug");
        assert_eq!(content(&m[2]), "and now the tests");
        assert_eq!(role(&m[3]), "assistant");
        // A second summary folds the first one in and keeps the user turns again.
        let s2 = summary_content("more");
        apply(
            &mut m,
            Rewrite::Summary {
                range: (0, 3),
                summary: &s2,
                kept_user_bytes: None,
            },
        );
        assert_eq!(content(&m[1]), "fix the bug");
        assert!(content(&m[0]).contains("more"));
        assert_eq!(m.len(), 5);
    }

    #[test]
    fn a_bounded_summary_keeps_only_the_newest_user_turns_that_fit() {
        let mut m: Vec<Value> = (0..10)
            .flat_map(|i| {
                [
                    json!({"role": "user", "content": format!("prompt number {i}")}),
                    json!({"role": "assistant", "content": "ok"}),
                ]
            })
            .collect();
        let one = estimate::message_bytes(&m[0]);
        assert_eq!(kept_user_bound(&m, (0, 20), 100 * one), None, "all fit");
        let bound = kept_user_bound(&m, (0, 20), 3 * one).expect("too many to keep");
        apply(
            &mut m,
            Rewrite::Summary {
                range: (0, 20),
                summary: &summary_content("s"),
                kept_user_bytes: Some(bound),
            },
        );
        let kept: Vec<&str> = m[1..].iter().map(content).collect();
        assert_eq!(
            kept,
            ["prompt number 7", "prompt number 8", "prompt number 9"]
        );
    }

    #[test]
    fn levels_follow_the_ratios() {
        let t = Thresholds::of(&ContextSettings {
            window: 1000,
            ..ContextSettings::default()
        })
        .expect("enabled");
        assert_eq!(
            (t.snip, t.fold_worth, t.compact, t.force, t.tail),
            (600, 200, 800, 900, 250)
        );
        assert_eq!(t.level(599, true), Level::None);
        assert_eq!(t.level(600, true), Level::Snip);
        assert_eq!(t.level(800, true), Level::Summary);
        assert_eq!(
            t.level(850, false),
            Level::None,
            "mid-turn only when forced"
        );
        assert_eq!(t.level(900, false), Level::Summary);
        assert!(Thresholds::of(&ContextSettings::default()).is_none());
    }
}
