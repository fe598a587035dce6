//! The session's side of the compaction ladder ([`crate::compaction`]): measuring the next
//! request, archiving what a rewrite removes, asking the model for a summary through the
//! driving laptop's gateway, and journaling the rewrite as a declared cache reset.

use super::*;
use crate::compaction::{self, archive, estimate, Level, Rewrite, Thresholds};
use reasonix_forward::proto::{CompactionKind, CompactionTrigger, SnippedResult};

/// The session's context accounting.
#[derive(Debug, Default)]
pub(super) struct ContextState {
    /// Byte → token ratio, calibrated by usage reports.
    pub(super) estimator: compaction::Estimator,
    /// Bytes of the last request sent (calibrated against its reported `prompt_tokens`).
    pub(super) last_bytes: usize,
    /// A rewrite since the last request: names it in the next usage's cache note.
    pub(super) pending_rewrite: Option<String>,
    /// The number of the archive's next record, once read from the archive.
    pub(super) archive_next: Option<u64>,
}

/// What a snip now would leave, in estimated tokens.
struct SnipOutlook {
    /// The next request.
    tokens: u64,
    /// The part before the tail a snip cannot shorten and a summary would fold (everything
    /// but the user turns it keeps).
    unfoldable_before_tail: u64,
}

/// How a compaction attempt ended when it could not rewrite.
pub(super) enum CompactEnd {
    /// The turn was cancelled meanwhile.
    Cancelled,
    /// Every rung ran and the next request is still over the window: it is not sent, and
    /// the turn ends with this text (the window and what does not fit).
    OverWindow(String),
}

/// The visible bound of a tool result entering this session's context, when its window
/// makes it smaller than the usual one (`None` otherwise, and always for sessions without
/// compaction): journaled with the result so a replay bounds it the same way.
pub(super) fn small_window_bound(inner: &Inner) -> Option<u64> {
    let window = inner.settings.context.window;
    let bound =
        crate::tools::context_bound_bytes(window, inner.context.estimator.tokens_per_byte());
    (bound < crate::tools::CONTEXT_BOUND_BYTES).then_some(bound as u64)
}

impl Session {
    /// Estimated prompt tokens of the next request as the conversation stands.
    pub(super) fn next_request_tokens(&self, inner: &Inner) -> (usize, u64) {
        let prefix = self.prefix();
        let bytes = estimate::request_bytes(&prefix.system, &prefix.tools, &inner.messages);
        (bytes, inner.context.estimator.tokens(bytes))
    }

    /// Before a model request: run the ladder's rungs the next request calls for.
    /// `turn_start` is true for the first request of a user turn.
    pub(super) async fn keep_in_window(
        &self,
        cancel: &CancellationToken,
        turn_start: bool,
    ) -> Result<(), CompactEnd> {
        let (thresholds, tokens) = {
            let inner = self.lock();
            let Some(t) = Thresholds::of(&inner.settings.context) else {
                return Ok(());
            };
            (t, self.next_request_tokens(&inner).1)
        };
        tracing::debug!(
            session = %self.id,
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
                    let now = self.next_request_tokens(&self.lock()).1;
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
        let now = || self.next_request_tokens(&self.lock()).1;
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
        let inner = self.lock();
        Err(CompactEnd::OverWindow(
            self.over_window_report(&inner, t, tokens),
        ))
    }

    /// What does not fit, for the error that ends a turn whose next request would be over
    /// the window after every rung ran.
    fn over_window_report(&self, inner: &Inner, t: &Thresholds, tokens: u64) -> String {
        let est = &inner.context.estimator;
        let prefix_tokens = est.tokens(request_bytes_of(&self.prefix(), &[]));
        let largest = inner
            .messages
            .iter()
            .enumerate()
            .max_by_key(|(_, m)| estimate::message_bytes(m))
            .map(|(i, m)| {
                let role = m.get("role").and_then(Value::as_str).unwrap_or("message");
                let what = if role == "tool" { "tool result" } else { role };
                (i, what, est.tokens(estimate::message_bytes(m)))
            });
        let model = inner.settings.model.clone().unwrap_or_default();
        let mut text = format!(
            "the next request needs about {tokens} tokens, over the context window of {} tokens{}, even after compaction: the system prompt and tool schemas take about {prefix_tokens}, the recent part kept verbatim the rest",
            t.window,
            if model.is_empty() { String::new() } else { format!(" of {model}") },
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
        let (thresholds, before, compactions, resume) = {
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
            let ctx = inner.settings.context;
            let before = self.next_request_tokens(&inner).1;
            // Asked for explicitly, the summary must have something to replace even in a
            // conversation shorter than the configured tail: the tail kept verbatim is then
            // at most a quarter of what the conversation holds.
            let conversation = before.saturating_sub(
                inner
                    .context
                    .estimator
                    .tokens(request_bytes_of(&self.prefix(), &[])),
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
            (t, before, compaction_count(&inner.events), resume)
        };
        self.snip(&thresholds, CompactionTrigger::User).await;
        let ended = self
            .summarise(&thresholds, CompactionTrigger::User, focus, &cancel)
            .await;
        let (after, done) = {
            let mut inner = self.lock();
            inner.cancel = None;
            let state = if resume == TurnState::Paused {
                TurnState::Paused
            } else {
                TurnState::Idle
            };
            self.set_state_locked(&mut inner, state, None);
            (
                self.next_request_tokens(&inner).1,
                compaction_count(&inner.events) - compactions,
            )
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

    /// `/context`: the next request's prompt split by part, in estimated tokens.
    pub fn context_report(&self) -> reasonix_forward::proto::ContextReport {
        let inner = self.lock();
        let prefix = self.prefix();
        let est = &inner.context.estimator;
        let system_bytes = request_bytes_of(&prefix, &[])
            - prefix.tools.iter().map(estimate::json_len).sum::<usize>();
        let instructions_bytes = crate::agent::instruction_bytes(&prefix.system).min(system_bytes);
        let tools_bytes: usize = prefix.tools.iter().map(estimate::json_len).sum();
        let (mut conversation, mut results) = (0usize, 0usize);
        for m in &inner.messages {
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
            messages: inner.messages.len() as u64,
            compactions: (snips, summaries),
            tokens_per_byte: est.tokens_per_byte(),
        }
    }

    /// What a snip now would leave (nothing is changed).
    fn snip_outlook(&self, t: &Thresholds) -> SnipOutlook {
        let inner = self.lock();
        let tail = compaction::tail_start(&inner.messages, &inner.context.estimator, t.tail);
        let (bytes, _) = self.next_request_tokens(&inner);
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
        let (plan, before, turn) = {
            let inner = self.lock();
            let tail = compaction::tail_start(&inner.messages, &inner.context.estimator, t.tail);
            let plan = compaction::plan_snip(&inner.messages, tail);
            let originals: Vec<Value> = plan
                .iter()
                .map(|(i, _, _)| inner.messages[*i].clone())
                .collect();
            (
                plan.into_iter().zip(originals).collect::<Vec<_>>(),
                self.next_request_tokens(&inner).1,
                inner.turn,
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
        let mut inner = self.lock();
        compaction::apply(&mut inner.messages, Rewrite::Snip(&snips));
        let after = self.next_request_tokens(&inner).1;
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
        let (range, request, originals, before, turn, stream_id) = {
            let inner = self.lock();
            let tail = compaction::tail_start(&inner.messages, &inner.context.estimator, t.tail);
            let Some(range) = self.summary_range(&inner, t, tail) else {
                return Ok(false);
            };
            let prefix = self.prefix();
            // A prefix of the request the provider has seen: served from cache.
            let mut messages = turn::request_messages(&prefix, &inner.messages[..range.1]);
            crate::agent::push_request_message(
                &mut messages,
                compaction::summary_instruction(focus),
            );
            (
                range,
                ProviderRequest {
                    stream_id: String::new(),
                    model: inner.settings.model.clone(),
                    messages,
                    tools: prefix.tools.clone(),
                    temperature: None,
                    messages_ref: None,
                    messages_base: None,
                    effort: inner.settings.effort,
                },
                compaction::summarised_messages(&inner.messages, range),
                self.next_request_tokens(&inner).1,
                inner.turn,
                format!("{}-compact-{}", self.id, inner.journal.last_seq()),
            )
        };
        self.set_state(
            TurnState::Running,
            Some(
                "compacting the context: the model is summarising the older part of the session"
                    .into(),
            ),
        );
        let summary = self.summary_stream(request, stream_id, cancel).await;
        self.set_state(TurnState::Running, None);
        let summary = match summary {
            Ok(s) => s,
            Err(SummaryEnd::Cancelled) => return Err(CompactEnd::Cancelled),
            Err(SummaryEnd::Failed(why)) => {
                self.record(EventKind::Notice {
                    text: format!(
                        "summary compaction did not run ({why}); the history stays as it is"
                    ),
                });
                return Ok(false);
            }
        };
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
        let content = compaction::summary_content(&summary);
        let mut inner = self.lock();
        let range = (range.0 as u64, range.1 as u64);
        compaction::apply(
            &mut inner.messages,
            Rewrite::Summary {
                range,
                summary: &content,
            },
        );
        let after = self.next_request_tokens(&inner).1;
        self.emit_compacted(
            &mut inner,
            CompactionKind::Summary,
            trigger,
            (before, after),
            Vec::new(),
            Some((range, content)),
            archived,
        );
        Ok(true)
    }

    /// The range a summary replaces: everything before the tail, cut back (at message
    /// boundaries that do not separate a call from its results) until the summary request,
    /// that range plus the instruction, fits under the force ratio. `None` when nothing
    /// that fits is worth summarising.
    fn summary_range(&self, inner: &Inner, t: &Thresholds, tail: usize) -> Option<(usize, usize)> {
        let (start, mut end) = compaction::plan_summary(&inner.messages, tail)?;
        let est = &inner.context.estimator;
        let fixed = request_bytes_of(&self.prefix(), &[])
            + estimate::message_bytes(&compaction::summary_instruction(None))
            // the focus text a user may add, and the summary's own answer
            + 4096;
        let mut bytes: usize = fixed
            + inner.messages[start..end]
                .iter()
                .map(estimate::message_bytes)
                .sum::<usize>();
        while est.tokens(bytes) >= t.force && end > start + 2 {
            end -= 1;
            bytes -= estimate::message_bytes(&inner.messages[end]);
            while end > start + 2
                && inner.messages[end].get("role").and_then(Value::as_str) == Some("tool")
            {
                end -= 1;
                bytes -= estimate::message_bytes(&inner.messages[end]);
            }
        }
        (est.tokens(bytes) < t.force && end >= start + 2).then_some((start, end))
    }

    #[allow(clippy::too_many_arguments)] // one journal event's fields
    fn emit_compacted(
        &self,
        inner: &mut Inner,
        kind: CompactionKind,
        trigger: CompactionTrigger,
        (tokens_before, tokens_after): (u64, u64),
        snipped: Vec<SnippedResult>,
        summary: Option<((u64, u64), String)>,
        archived: Vec<String>,
    ) {
        let what = match kind {
            CompactionKind::Snip => "compaction (snip)",
            CompactionKind::Summary => "compaction (summary)",
        };
        inner.context.pending_rewrite = Some(what.to_string());
        let (replaced, summary) = match summary {
            Some((r, s)) => (Some(r), Some(s)),
            None => (None, None),
        };
        self.emit(
            inner,
            EventKind::Compacted {
                kind,
                trigger,
                tokens_before,
                tokens_after,
                snipped,
                replaced,
                summary,
                archived,
                archive: archive::archive_name(&self.id),
            },
        );
    }

    /// Ids for `n` new archive records (`a<N>`, numbered on from the archive's last; the
    /// archive is read once per session to find where the numbers stand).
    async fn archive_ids(&self, n: usize) -> Result<Vec<String>, String> {
        let known = self.lock().context.archive_next;
        let next = match known {
            Some(next) => next,
            None => {
                let path = self.archive_path();
                tokio::task::spawn_blocking(move || archive::next_number(&path))
                    .await
                    .map_err(|e| format!("archive task failed: {e}"))?
                    .map_err(|e| e.to_string())?
            }
        };
        let mut inner = self.lock();
        let first = inner.context.archive_next.unwrap_or(next).max(next);
        inner.context.archive_next = Some(first + n as u64);
        Ok((first..first + n as u64).map(archive::record_id).collect())
    }

    /// The archive could not be written: the history stays as it is, and the user is told.
    fn not_compacted(&self, why: &str) {
        self.record(EventKind::Notice {
            text: format!("context not compacted: {why}; the history stays as it is"),
        });
    }

    /// Append to the session's archive off the async threads.
    async fn archive(&self, records: Vec<archive::ArchivedMessage>) -> Result<(), String> {
        let path = self.archive_path();
        tokio::task::spawn_blocking(move || archive::append(&path, &records))
            .await
            .map_err(|e| format!("archive task failed: {e}"))?
            .map_err(|e| e.to_string())
    }

    /// The session's archive file.
    pub(super) fn archive_path(&self) -> std::path::PathBuf {
        archive::archive_path(
            self.journal_path
                .parent()
                .unwrap_or(std::path::Path::new(".")),
            &self.id,
        )
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
            let Some(gateway) = self.wait_gateway(cancel).await else {
                return Err(SummaryEnd::Cancelled);
            };
            self.set_state(
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
                        self.record(EventKind::Notice {
                            text: "the laptop disconnected during the summary request of a compaction; it will be re-issued when a client attaches".into(),
                        });
                        self.release_driver(gateway.conn_id());
                        break;
                    }
                    Some(ProviderChunk::Text { text: t }) => text.push_str(&t),
                    Some(ProviderChunk::Reasoning { .. })
                    | Some(ProviderChunk::ToolCall(_))
                    | Some(ProviderChunk::Replay { .. }) => {}
                    Some(ProviderChunk::Retrying(r)) => {
                        self.record(EventKind::ProviderRetry(r));
                    }
                    Some(ProviderChunk::Usage(u)) => {
                        let mut inner = self.lock();
                        let model = inner.settings.model.clone().unwrap_or_default();
                        self.emit(
                            &mut inner,
                            EventKind::Usage {
                                usage: u,
                                model,
                                system_hash: self.prefix().system_hash.clone(),
                                tools_hash: self.prefix().tools_hash.clone(),
                                cache_note: Some("summary request of a compaction".into()),
                            },
                        );
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

/// Compaction events in the journal so far.
fn compaction_count(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Compacted { .. }))
        .count()
}

/// Bytes of a request of `messages` under `prefix` (what the usage report calibrates).
pub(super) fn request_bytes_of(prefix: &Prefix, messages: &[Value]) -> usize {
    estimate::request_bytes(&prefix.system, &prefix.tools, messages)
}

/// The session's history as the `history` tool searches it: every journaled user turn,
/// assistant message and tool result (the originals, before any compaction), then every
/// archived message. Holds the session weakly (the session owns the tool context).
pub(super) struct SessionHistory {
    session: std::sync::Weak<Session>,
}

impl SessionHistory {
    pub(super) fn of(session: &Arc<Session>) -> SessionHistory {
        SessionHistory {
            session: Arc::downgrade(session),
        }
    }
}

impl compaction::history::HistorySource for SessionHistory {
    fn documents(&self) -> Vec<compaction::history::HistoryDoc> {
        use compaction::history::HistoryDoc;
        let Some(session) = self.session.upgrade() else {
            return Vec::new();
        };
        let mut docs = Vec::new();
        {
            let inner = session.lock();
            for e in &inner.events {
                let (role, text) = match &e.kind {
                    EventKind::UserTurn { text, .. } => ("user".to_string(), text.clone()),
                    EventKind::AssistantMessage {
                        content,
                        tool_calls,
                        ..
                    } => {
                        let mut t = content.clone();
                        for c in tool_calls {
                            t.push_str(&format!("\n[call {} {}]", c.name, c.arguments));
                        }
                        ("assistant".to_string(), t)
                    }
                    EventKind::ToolFinished { name, output, .. } => {
                        (format!("tool {name}"), output.clone())
                    }
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
                    | EventKind::Checkpoint { .. }
                    | EventKind::Compacted { .. }
                    | EventKind::SteerInjected { .. } => continue,
                    EventKind::Steer { text, .. } => ("user (steer)".to_string(), text.clone()),
                    EventKind::ShellRan {
                        command, output, ..
                    } => (format!("shell !{command}"), output.clone()),
                };
                docs.push(HistoryDoc {
                    id: format!("e{}", e.seq),
                    turn: e.turn,
                    role,
                    text,
                });
            }
        }
        // The archive keeps what a rewind cut from the journal, too.
        if let Ok(records) = archive::read_all(&session.archive_path()) {
            for r in records {
                let text = r
                    .message
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                docs.push(HistoryDoc {
                    id: r.id,
                    turn: r.turn,
                    role: format!("archived {}", r.kind),
                    text,
                });
            }
        }
        docs
    }
}
