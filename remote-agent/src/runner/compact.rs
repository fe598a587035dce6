//! A runner's side of the compaction ladder ([`crate::compaction`]): measuring the next
//! request, archiving what a rewrite removes, asking the model for a summary through the
//! driving laptop's gateway, and journaling the rewrite as a declared cache reset.

use reasonix_forward::proto::{
    CompactionKind, CompactionTrigger, EventKind, ProviderChunk, ProviderRequest, SnippedResult,
    TurnState,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::conversation::{request_bytes_of, request_messages, Conversation};
use super::Runner;
use crate::compaction::{self, archive, estimate, Level, Rewrite, Thresholds};

/// What a snip now would leave, in estimated tokens.
struct SnipOutlook {
    /// The next request.
    tokens: u64,
    /// The part before the tail a snip cannot shorten and a summary would fold (everything
    /// but the user turns it keeps).
    unfoldable_before_tail: u64,
}

/// How a compaction attempt ended when it could not rewrite.
pub(crate) enum CompactEnd {
    /// The turn was cancelled meanwhile.
    Cancelled,
    /// Every rung ran and the next request is still over the window: it is not sent, and
    /// the turn ends with this text (the window and what does not fit).
    OverWindow(String),
}

/// The visible bound of a tool result entering a conversation of a `window`-token context,
/// when that window makes it smaller than the usual one (`None` otherwise, and always without
/// compaction): journaled with the result so a replay bounds it the same way.
pub(crate) fn small_window_bound(conv: &Conversation, window: u64) -> Option<u64> {
    let bound = crate::tools::context_bound_bytes(window, conv.context.estimator.tokens_per_byte());
    (bound < crate::tools::CONTEXT_BOUND_BYTES).then_some(bound as u64)
}

impl Runner<'_> {
    /// Before a model request: run the ladder's rungs the next request calls for.
    /// `turn_start` is true for the first request of a user turn.
    pub(crate) async fn keep_in_window(
        &self,
        cancel: &CancellationToken,
        turn_start: bool,
    ) -> Result<(), CompactEnd> {
        let (thresholds, tokens, id) = {
            let Some(t) = Thresholds::of(&self.host.context_settings()) else {
                return Ok(());
            };
            let conv = self.conversation();
            (t, conv.next_request_tokens().1, conv.id.clone())
        };
        tracing::debug!(
            conversation = %id,
            tokens,
            window = thresholds.window,
            turn_start,
            "context before a model request"
        );
        let trigger = if tokens >= thresholds.force {
            CompactionTrigger::Forced
        } else {
            CompactionTrigger::Threshold
        };
        let mut summarised = false;
        match thresholds.level(tokens, turn_start) {
            Level::None => {}
            level @ (Level::Snip | Level::Summary) => {
                // Snip when that is enough: it needs no model call. It is not enough when
                // it would leave the request over the snip rung at the compact rung (or
                // when forced), nor when what it cannot shorten before the tail (the
                // placeholders of earlier snips, assistant steps) has grown to
                // `fold_worth`: each snip would then free a little, be back within a turn
                // or two and cost a cache miss of the tail each time, where a summary folds
                // all of it. Otherwise summarise first: the summary request is then the
                // history the provider has cached (a snip before it would make the whole
                // request after the first placeholder a miss), and the summary replaces
                // the old results the snip would have replaced.
                let outlook = self.snip_outlook(&thresholds);
                let enough = level == Level::Snip || outlook.tokens < thresholds.snip;
                if enough && outlook.unfoldable_before_tail < thresholds.fold_worth {
                    self.snip(&thresholds, trigger).await;
                } else {
                    summarised = self.summarise(&thresholds, trigger, None, cancel).await?;
                    // A summary that did not run (or left old results) falls back to the snip.
                    let now = self.conversation().next_request_tokens().1;
                    if now >= thresholds.snip {
                        self.snip(&thresholds, trigger).await;
                    }
                }
            }
        }
        self.force_under_window(&thresholds, summarised, cancel)
            .await
    }

    /// The forced rung's promise: whatever the rungs above chose, a request at or over the
    /// force ratio gets both rewrites (the snip first, so the summary request itself fits
    /// the window), and a request still over the window is never sent: the turn ends with
    /// a message naming the window and what does not fit.
    async fn force_under_window(
        &self,
        t: &Thresholds,
        summarised: bool,
        cancel: &CancellationToken,
    ) -> Result<(), CompactEnd> {
        let now = || self.conversation().next_request_tokens().1;
        if now() >= t.force {
            self.snip(t, CompactionTrigger::Forced).await;
            if now() >= t.force && !summarised {
                self.summarise(t, CompactionTrigger::Forced, None, cancel)
                    .await?;
                self.snip(t, CompactionTrigger::Forced).await;
            }
        }
        let tokens = now();
        if tokens < t.window {
            return Ok(());
        }
        let report = self.over_window_report(&self.conversation(), t, tokens);
        Err(CompactEnd::OverWindow(report))
    }

    /// What does not fit, for the error that ends a turn whose next request would be over
    /// the window after every rung ran.
    fn over_window_report(&self, conv: &Conversation, t: &Thresholds, tokens: u64) -> String {
        let est = &conv.context.estimator;
        let prefix_tokens = est.tokens(request_bytes_of(&conv.prefix, &[]));
        let largest = conv
            .messages
            .iter()
            .enumerate()
            .max_by_key(|(_, m)| estimate::message_bytes(m))
            .map(|(i, m)| {
                let role = m.get("role").and_then(Value::as_str).unwrap_or("message");
                let what = if role == "tool" { "tool result" } else { role };
                (i, what, est.tokens(estimate::message_bytes(m)))
            });
        let model = self.host.model().unwrap_or_default();
        let mut text = format!(
            "the next request needs about {tokens} tokens, over the context window of {} tokens{}, even after compaction: the system prompt and tool schemas take about {prefix_tokens}, the recent part kept verbatim the rest",
            t.window,
            if model.is_empty() {
                String::new()
            } else {
                format!(" of {model}")
            },
        );
        if let Some((i, what, n)) = largest {
            text.push_str(&format!(
                "; the largest message is a {what} of about {n} tokens (message {})",
                i + 1
            ));
        }
        text.push_str(". Nothing was sent. Use a model with a bigger window (or raise `context_window` if this model has one), start a new session, or /rewind to before the large message.");
        text
    }

    /// `/compact [focus]` on this conversation: snip and summarise now, whatever the size;
    /// `focus` steers what the summary keeps. Returns the next request's estimated tokens
    /// before and after, and how the summary ended.
    pub(crate) async fn compact_now(
        &self,
        focus: Option<&str>,
        cancel: &CancellationToken,
    ) -> (u64, u64, Result<bool, CompactEnd>) {
        let (thresholds, before) = {
            let inner = self.conversation();
            let ctx = self.host.context_settings();
            let before = inner.next_request_tokens().1;
            // Asked for explicitly, the summary must have something to replace even in a
            // conversation shorter than the configured tail: the tail kept verbatim is then
            // at most a quarter of what the conversation holds.
            let conversation = before.saturating_sub(
                inner
                    .context
                    .estimator
                    .tokens(request_bytes_of(&inner.prefix, &[])),
            );
            let tail = ctx.tail_tokens.min(conversation / 4);
            let mut t = Thresholds::of(&ctx).unwrap_or(Thresholds {
                window: u64::MAX,
                snip: 0,
                fold_worth: u64::MAX,
                compact: 0,
                force: u64::MAX,
                tail,
            });
            t.tail = t.tail.min(tail);
            (t, before)
        };
        self.snip(&thresholds, CompactionTrigger::User).await;
        let ended = self
            .summarise(&thresholds, CompactionTrigger::User, focus, cancel)
            .await;
        let after = self.conversation().next_request_tokens().1;
        (before, after, ended)
    }

    /// What a snip now would leave (nothing is changed).
    fn snip_outlook(&self, t: &Thresholds) -> SnipOutlook {
        let inner = self.conversation();
        let tail = compaction::tail_start(&inner.messages, &inner.context.estimator, t.tail);
        let (bytes, _) = inner.next_request_tokens();
        let freed: usize = compaction::plan_snip(&inner.messages, tail)
            .iter()
            .enumerate()
            .map(|(n, (i, id, bytes))| {
                let next = inner.context.archive_next.unwrap_or(0);
                let kept = compaction::placeholder(&SnippedResult {
                    call_id: id.clone(),
                    archive_id: archive::record_id(next + n as u64),
                    bytes: *bytes as u64,
                    index: Some(*i as u64),
                });
                bytes.saturating_sub(kept.len())
            })
            .sum();
        let before_tail: usize = inner.messages[..tail]
            .iter()
            .map(estimate::message_bytes)
            .sum();
        let est = &inner.context.estimator;
        SnipOutlook {
            tokens: est.tokens(bytes.saturating_sub(freed)),
            unfoldable_before_tail: est.tokens(
                before_tail
                    .saturating_sub(freed)
                    .saturating_sub(compaction::summary_keeps_bytes(&inner.messages, tail)),
            ),
        }
    }

    /// Snip old tool results outside the tail. Archive first (durably), then journal.
    async fn snip(&self, t: &Thresholds, trigger: CompactionTrigger) {
        let turn = self.host.turn();
        let (plan, before) = {
            let inner = self.conversation();
            let tail = compaction::tail_start(&inner.messages, &inner.context.estimator, t.tail);
            let plan = compaction::plan_snip(&inner.messages, tail);
            let originals: Vec<Value> = plan
                .iter()
                .map(|(i, _, _)| inner.messages[*i].clone())
                .collect();
            (
                plan.into_iter().zip(originals).collect::<Vec<_>>(),
                inner.next_request_tokens().1,
            )
        };
        if plan.is_empty() {
            return;
        }
        let ids = match self.archive_ids(plan.len()).await {
            Ok(ids) => ids,
            Err(e) => {
                self.not_compacted(&e);
                return;
            }
        };
        let mut snips = Vec::new();
        let mut records = Vec::new();
        for (((index, call_id, bytes), original), archive_id) in plan.into_iter().zip(ids) {
            records.push(archive::ArchivedMessage {
                id: archive_id.clone(),
                turn,
                kind: "snip".into(),
                message: original,
            });
            snips.push(SnippedResult {
                call_id,
                archive_id,
                bytes: bytes as u64,
                index: Some(index as u64),
            });
        }
        if let Err(e) = self.archive(records).await {
            self.not_compacted(&e);
            return;
        }
        let mut inner = self.conversation();
        compaction::apply(&mut inner.messages, Rewrite::Snip(&snips));
        let after = inner.next_request_tokens().1;
        self.emit_compacted(
            &mut inner,
            CompactionKind::Snip,
            trigger,
            (before, after),
            snips,
            None,
            Vec::new(),
        );
    }

    /// Summarise the middle before the tail with the session's model.
    async fn summarise(
        &self,
        t: &Thresholds,
        trigger: CompactionTrigger,
        focus: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<bool, CompactEnd> {
        let turn = self.host.turn();
        let (range, request, originals, before, stream_id) = {
            let inner = self.conversation();
            let tail = compaction::tail_start(&inner.messages, &inner.context.estimator, t.tail);
            let Some(range) = summary_range(&inner, t, tail) else {
                return Ok(false);
            };
            let prefix = &inner.prefix;
            // A prefix of the request the provider has seen: served from cache.
            let mut messages = request_messages(prefix, &inner.messages[..range.1]);
            crate::agent::push_request_message(
                &mut messages,
                compaction::summary_instruction(focus),
            );
            (
                range,
                ProviderRequest {
                    stream_id: String::new(),
                    model: self.host.model(),
                    messages,
                    tools: prefix.tools.clone(),
                    temperature: None,
                    messages_ref: None,
                    messages_base: None,
                    effort: self.host.effort(),
                },
                compaction::summarised_messages(&inner.messages, range),
                inner.next_request_tokens().1,
                format!("{}-compact-{}", inner.id, self.host.last_seq()),
            )
        };
        self.host
            .hooks(
                crate::hooks::Input::new(reasonix_forward::hooks::HookEvent::PreCompact)
                    .with("trigger", serde_json::json!(trigger))
                    .with("custom_instructions", serde_json::json!(focus)),
            )
            .await;
        self.host.set_state(
            TurnState::Running,
            Some(
                "compacting the context: the model is summarising the older part of the session"
                    .into(),
            ),
        );
        let summary = self.summary_stream(request, stream_id, cancel).await;
        self.host.set_state(TurnState::Running, None);
        let summary = match summary {
            Ok(s) => s,
            Err(SummaryEnd::Cancelled) => return Err(CompactEnd::Cancelled),
            Err(SummaryEnd::Failed(why)) => {
                self.host.record(EventKind::Notice {
                    text: format!(
                        "summary compaction did not run ({why}); the history stays as it is"
                    ),
                });
                return Ok(false);
            }
        };
        let content = compaction::summary_content(&summary);
        // An automatic summary that would not shrink the request (the range held little
        // besides user turns kept verbatim and an earlier summary, as at a window that the
        // stable prefix mostly fills) replaces nothing: history is not traded for no room.
        // A `/compact` the user asked for is applied as asked.
        if trigger != CompactionTrigger::User {
            let mut inner = self.conversation();
            let saved = inner.messages.clone();
            let budget = self.kept_user_budget(&inner);
            let kept = compaction::kept_user_bound(&inner.messages, range, budget);
            compaction::apply(
                &mut inner.messages,
                Rewrite::Summary {
                    range: (range.0 as u64, range.1 as u64),
                    summary: &content,
                    kept_user_bytes: kept,
                },
            );
            let after = inner.next_request_tokens().1;
            inner.messages = saved;
            if after >= before {
                drop(inner);
                self.host.record(EventKind::Notice {
                    text: format!(
                        "summary compaction skipped: it would free nothing ({before} tokens before and after); the history stays as it is"
                    ),
                });
                return Ok(false);
            }
        }
        let ids = match self.archive_ids(originals.len()).await {
            Ok(ids) => ids,
            Err(e) => {
                self.not_compacted(&e);
                return Ok(false);
            }
        };
        let records: Vec<archive::ArchivedMessage> = originals
            .into_iter()
            .zip(ids)
            .map(|(message, id)| archive::ArchivedMessage {
                id,
                turn,
                kind: "summary".into(),
                message,
            })
            .collect();
        let archived: Vec<String> = records.iter().map(|r| r.id.clone()).collect();
        if let Err(e) = self.archive(records).await {
            self.not_compacted(&e);
            return Ok(false);
        }
        let mut inner = self.conversation();
        let budget = self.kept_user_budget(&inner);
        let kept_user_bytes = compaction::kept_user_bound(&inner.messages, range, budget);
        let range = (range.0 as u64, range.1 as u64);
        compaction::apply(
            &mut inner.messages,
            Rewrite::Summary {
                range,
                summary: &content,
                kept_user_bytes,
            },
        );
        let after = inner.next_request_tokens().1;
        self.emit_compacted(
            &mut inner,
            CompactionKind::Summary,
            trigger,
            (before, after),
            Vec::new(),
            Some((range, content, kept_user_bytes)),
            archived,
        );
        Ok(true)
    }

    /// Bytes of user turns a summary keeps verbatim: at most an eighth of the window, so a
    /// long session cannot outgrow its window with them (no bound without a window).
    fn kept_user_budget(&self, inner: &Conversation) -> usize {
        let window = self.host.context_settings().window;
        if window == 0 {
            usize::MAX
        } else {
            ((window / 8) as f64 / inner.context.estimator.tokens_per_byte()) as usize
        }
    }

    #[allow(clippy::too_many_arguments)] // one journal event's fields
    fn emit_compacted(
        &self,
        inner: &mut Conversation,
        kind: CompactionKind,
        trigger: CompactionTrigger,
        (tokens_before, tokens_after): (u64, u64),
        snipped: Vec<SnippedResult>,
        summary: Option<((u64, u64), String, Option<u64>)>,
        archived: Vec<String>,
    ) {
        let what = match kind {
            CompactionKind::Snip => "compaction (snip)",
            CompactionKind::Summary => "compaction (summary)",
        };
        inner.context.pending_rewrite = Some(what.to_string());
        let (replaced, summary, kept_user_bytes) = match summary {
            Some((r, s, k)) => (Some(r), Some(s), k),
            None => (None, None, None),
        };
        self.host.record(EventKind::Compacted {
            kind,
            trigger,
            tokens_before,
            tokens_after,
            snipped,
            replaced,
            summary,
            archived,
            archive: inner.archive_name(),
            kept_user_bytes,
        });
    }

    /// Ids for `n` new archive records (`a<N>`, numbered on from the archive's last; the
    /// archive is read once per conversation to find where the numbers stand).
    async fn archive_ids(&self, n: usize) -> Result<Vec<String>, String> {
        let (known, path) = {
            let conv = self.conversation();
            (conv.context.archive_next, conv.archive.clone())
        };
        let next = match known {
            Some(next) => next,
            None => tokio::task::spawn_blocking(move || archive::next_number(&path))
                .await
                .map_err(|e| format!("archive task failed: {e}"))?
                .map_err(|e| e.to_string())?,
        };
        let mut inner = self.conversation();
        let first = inner.context.archive_next.unwrap_or(next).max(next);
        inner.context.archive_next = Some(first + n as u64);
        Ok((first..first + n as u64).map(archive::record_id).collect())
    }

    /// The archive could not be written: the history stays as it is, and the user is told.
    fn not_compacted(&self, why: &str) {
        self.host.record(EventKind::Notice {
            text: format!("context not compacted: {why}; the history stays as it is"),
        });
    }

    /// Append to the conversation's archive off the async threads.
    async fn archive(&self, records: Vec<archive::ArchivedMessage>) -> Result<(), String> {
        let path = self.conversation().archive.clone();
        tokio::task::spawn_blocking(move || archive::append(&path, &records))
            .await
            .map_err(|e| format!("archive task failed: {e}"))?
            .map_err(|e| e.to_string())
    }

    /// Run the summary request through the driving gateway and collect its text. The
    /// stream survives a link drop (the laptop keeps reading it and the link replays it), so
    /// a drop never issues the request twice. When the gateway is gone for good (the client
    /// died) nothing of the partial summary was used: the request is issued again, once,
    /// through the next client that attaches, like a turn's model request.
    async fn summary_stream(
        &self,
        request: ProviderRequest,
        stream_id: String,
        cancel: &CancellationToken,
    ) -> Result<String, SummaryEnd> {
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let Some(gateway) = self.host.wait_gateway(cancel).await else {
                return Err(SummaryEnd::Cancelled);
            };
            self.host.set_state(
                TurnState::Running,
                Some(
                    "compacting the context: the model is summarising the older part of the session"
                        .into(),
                ),
            );
            let mut req = request.clone();
            // Attempt 1 keeps the historic id; a re-issue gets a fresh one.
            req.stream_id = if attempt == 1 {
                stream_id.clone()
            } else {
                format!("{stream_id}-{attempt}")
            };
            let mut stream = gateway.start_stream(req);
            let mut text = String::new();
            loop {
                let chunk = tokio::select! {
                    _ = cancel.cancelled() => return Err(SummaryEnd::Cancelled),
                    chunk = stream.recv() => chunk,
                };
                match chunk {
                    None => {
                        self.host.record(EventKind::Notice {
                            text: "the laptop disconnected during the summary request of a compaction; it will be re-issued when a client attaches".into(),
                        });
                        self.host.release_driver(gateway.conn_id());
                        break;
                    }
                    Some(ProviderChunk::Text { text: t }) => text.push_str(&t),
                    Some(ProviderChunk::Reasoning { .. })
                    | Some(ProviderChunk::ToolCall(_))
                    | Some(ProviderChunk::Replay { .. }) => {}
                    Some(ProviderChunk::Retrying(r)) => {
                        self.host.record(EventKind::ProviderRetry(r));
                    }
                    Some(ProviderChunk::Usage(u)) => {
                        let prefix = std::sync::Arc::clone(&self.conversation().prefix);
                        let model = self.host.model().unwrap_or_default();
                        self.host.record(EventKind::Usage {
                            usage: u,
                            model,
                            system_hash: prefix.system_hash.clone(),
                            tools_hash: prefix.tools_hash.clone(),
                            cache_note: Some("summary request of a compaction".into()),
                        });
                    }
                    Some(ProviderChunk::Done { .. }) => {
                        if text.trim().is_empty() {
                            return Err(SummaryEnd::Failed(
                                "the model returned an empty summary".into(),
                            ));
                        }
                        return Ok(text);
                    }
                    Some(ProviderChunk::Error { message, .. }) => {
                        return Err(SummaryEnd::Failed(format!(
                            "the model refused it: {message}"
                        )))
                    }
                }
            }
        }
    }
}

enum SummaryEnd {
    Cancelled,
    Failed(String),
}

/// The range a summary replaces: everything before the tail, cut back (at message boundaries
/// that do not separate a call from its results) until the summary request, that range plus
/// the instruction, fits under the force ratio. `None` when nothing that fits is worth
/// summarising.
fn summary_range(conv: &Conversation, t: &Thresholds, tail: usize) -> Option<(usize, usize)> {
    let (start, mut end) = compaction::plan_summary(&conv.messages, tail)?;
    let est = &conv.context.estimator;
    let fixed = request_bytes_of(&conv.prefix, &[])
        + estimate::message_bytes(&compaction::summary_instruction(None))
        // the focus text a user may add, and the summary's own answer
        + 4096;
    let mut bytes: usize = fixed
        + conv.messages[start..end]
            .iter()
            .map(estimate::message_bytes)
            .sum::<usize>();
    let is_result = |m: &Value| m.get("role").and_then(Value::as_str) == Some("tool");
    while est.tokens(bytes) >= t.force && end > start + 2 {
        end -= 1;
        bytes -= estimate::message_bytes(&conv.messages[end]);
        while end > start + 2 && is_result(&conv.messages[end]) {
            end -= 1;
            bytes -= estimate::message_bytes(&conv.messages[end]);
        }
    }
    (est.tokens(bytes) < t.force && end >= start + 2).then_some((start, end))
}
