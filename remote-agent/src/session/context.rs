//! `/compact` and `/context` on the session's main conversation: the request side (dedup,
//! state, durability) here, the compaction itself in the runner ([`crate::runner`]).

use super::*;
use crate::compaction::estimate;
use crate::runner::{request_bytes_of, CompactEnd};
use reasonix_forward::proto::CompactionKind;

impl Session {
    /// `/compact [focus]`: snip and summarise now, whatever the size; `focus` steers what the
    /// summary keeps. `Ok(None)` for a repeated `request_id` (nothing runs twice). The
    /// session is busy meanwhile (a turn submitted now is refused, `/cancel` stops it), and
    /// the summary request survives a link drop or a new client like a turn's request does.
    pub async fn compact_now(
        &self,
        request_id: &str,
        focus: Option<&str>,
    ) -> Result<Option<String>, String> {
        let cancel = CancellationToken::new();
        let (compactions, resume) = {
            let mut inner = self.lock();
            if inner.seen_requests.contains(request_id) {
                return Ok(None);
            }
            let resume = inner.state;
            if !matches!(resume, TurnState::Idle | TurnState::Paused) {
                return Err("a turn is running; compact after it ends (or cancel it)".into());
            }
            inner.seen_requests.insert(request_id.to_string());
            inner.cancel = Some(cancel.clone());
            self.set_state_locked(
                &mut inner,
                TurnState::Running,
                Some("compacting the context (/compact)".into()),
            );
            (compaction_count(&inner.events), resume)
        };
        let (before, after, ended) = self.runner().compact_now(focus, &cancel).await;
        let done = {
            let mut inner = self.lock();
            inner.cancel = None;
            let state = if resume == TurnState::Paused {
                TurnState::Paused
            } else {
                TurnState::Idle
            };
            self.set_state_locked(&mut inner, state, None);
            compaction_count(&inner.events) - compactions
        };
        // A rewrite is a durability point: the summary was paid for, so it is on disk before
        // the client hears that it is done (a daemon crash then cannot make it run again).
        if done > 0 {
            if let Err(e) = self.flush_journal().await {
                return Err(format!("the compaction could not be journaled: {e}"));
            }
        }
        Ok(Some(match ended {
            Err(CompactEnd::Cancelled) if done == 0 => {
                "compaction cancelled; the history stays as it is".to_string()
            }
            Err(CompactEnd::Cancelled) => format!(
                "summary cancelled; old tool results were snipped: about {before} → {after} tokens"
            ),
            // (The summary rung itself never ends a request as over the window.)
            Err(CompactEnd::OverWindow(why)) => why,
            Ok(_) if done == 0 => format!(
                "nothing to compact: the conversation (about {before} tokens) has no older part to summarise"
            ),
            Ok(_) => format!(
                "compacted: about {before} → {after} tokens; the next request misses the cache once"
            ),
        }))
    }

    /// `/context`: the next request's prompt split by part, in estimated tokens, with the
    /// planner's conversation when there is one (#38 §2) and the usage per model.
    pub fn context_report(&self) -> reasonix_forward::proto::ContextReport {
        let planner = self.planner_context();
        let mut report = self.executor_context();
        report.planner = planner;
        report
    }

    /// The executor's (main conversation's) part of [`Session::context_report`].
    fn executor_context(&self) -> reasonix_forward::proto::ContextReport {
        // Lock order: the conversation before the session.
        let conv = self.main.lock_or_recover();
        let inner = self.lock();
        let prefix = &conv.prefix;
        let est = &conv.context.estimator;
        let system_bytes = request_bytes_of(prefix, &[])
            - prefix.tools.iter().map(estimate::json_len).sum::<usize>();
        let instructions_bytes = crate::agent::instruction_bytes(&prefix.system).min(system_bytes);
        let tools_bytes: usize = prefix.tools.iter().map(estimate::json_len).sum();
        let (mut conversation, mut results) = (0usize, 0usize);
        for m in &conv.messages {
            let b = estimate::message_bytes(m);
            if m.get("role").and_then(Value::as_str) == Some("tool") {
                results += b;
            } else {
                conversation += b;
            }
        }
        let (mut snips, mut summaries) = (0, 0);
        for e in &inner.events {
            if let EventKind::Compacted { kind, .. } = &e.kind {
                match kind {
                    CompactionKind::Snip => snips += 1,
                    CompactionKind::Summary => summaries += 1,
                }
            }
        }
        reasonix_forward::proto::ContextReport {
            settings: inner.settings.context,
            system_tokens: est.tokens(system_bytes - instructions_bytes),
            instructions_tokens: est.tokens(instructions_bytes),
            tools_tokens: est.tokens(tools_bytes),
            conversation_tokens: est.tokens(conversation),
            tool_result_tokens: est.tokens(results),
            messages: conv.messages.len() as u64,
            compactions: (snips, summaries),
            tokens_per_byte: est.tokens_per_byte(),
            planner: None,
            usage_by_model: usage_by_model(&inner.events),
            recall: last_recall(&inner.events).map(|(facts, bytes)| {
                reasonix_forward::proto::RecallReport {
                    facts,
                    tokens: est.tokens(bytes),
                }
            }),
        }
    }
}

/// The recalled-memory block of the last user turn in `events`: the fact ids and its size
/// in bytes (`None`: that turn recalled nothing). The block is journaled with the turn, so
/// this holds after a daemon restart too.
fn last_recall(events: &[Event]) -> Option<(Vec<String>, usize)> {
    let attachments = events.iter().rev().find_map(|e| match &e.kind {
        EventKind::UserTurn { attachments, .. } => Some(attachments),
        _ => None,
    })?;
    let block = attachments
        .iter()
        .find(|a| a.path == crate::memory::RECALL_PATH)?;
    Some((recalled_ids(&block.content), block.content.len()))
}

/// The fact ids in a recalled-memory block: each fact opens with `[ID · scope · type …]`.
fn recalled_ids(block: &str) -> Vec<String> {
    block
        .lines()
        .filter_map(|l| {
            let inner = l.strip_prefix('[')?;
            let (id, rest) = inner.split_once(" · ")?;
            (rest.ends_with(']') && !id.is_empty()).then(|| id.to_string())
        })
        .collect()
}

/// Usage per model over `events`, summed, in first-use order.
fn usage_by_model(events: &[Event]) -> Vec<reasonix_forward::proto::ModelUsage> {
    let mut out: Vec<reasonix_forward::proto::ModelUsage> = Vec::new();
    for e in events {
        let EventKind::Usage { usage, model, .. } = &e.kind else {
            continue;
        };
        let i = match out.iter().position(|m| m.model == *model) {
            Some(i) => i,
            None => {
                out.push(reasonix_forward::proto::ModelUsage {
                    model: model.clone(),
                    ..Default::default()
                });
                out.len() - 1
            }
        };
        let m = &mut out[i];
        m.requests += 1;
        m.usage.prompt_tokens += usage.prompt_tokens;
        m.usage.completion_tokens += usage.completion_tokens;
        m.usage.cache_hit_tokens += usage.cache_hit_tokens;
        m.usage.cache_miss_tokens += usage.cache_miss_tokens;
        m.usage.reasoning_tokens += usage.reasoning_tokens;
    }
    out
}

/// Compaction events in the journal so far.
fn compaction_count(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Compacted { .. }))
        .count()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_last_turns_recall_block_names_its_facts() {
        use reasonix_forward::memory::recall::render_block;
        let fact = |id: &str, body: &str| {
            reasonix_forward::memory::Fact::parse(format!(
                "---\nid: {id}\nrevision: 1\ntype: project\nscope: project\ncreated: 2026-12-01T00:00:00Z\nupdated: 2026-12-02T00:00:00Z\n---\n{body}\n"
            ).as_bytes())
            .unwrap()
        };
        let (a, b) = (
            fact("p-tabs", "Tabs, not spaces."),
            fact("p-db", "[x · y] Postgres 16."),
        );
        let block = render_block(&[&a, &b]);
        assert_eq!(recalled_ids(&block), ["p-tabs", "p-db"]);
        let turn = |attachments: Vec<reasonix_forward::proto::Attachment>| Event {
            seq: 1,
            ts: String::new(),
            turn: 1,
            kind: EventKind::UserTurn {
                request_id: "r".into(),
                text: "t".into(),
                attachments,
            },
        };
        let recall = reasonix_forward::proto::Attachment {
            path: crate::memory::RECALL_PATH.into(),
            content: block.clone(),
            truncated: false,
        };
        // The last turn counts: one that recalled nothing after one that did says nothing.
        assert_eq!(
            last_recall(&[turn(vec![recall.clone()])]),
            Some((vec!["p-tabs".to_string(), "p-db".to_string()], block.len()))
        );
        assert_eq!(last_recall(&[turn(vec![recall]), turn(vec![])]), None);
        assert_eq!(last_recall(&[]), None);
    }
}
