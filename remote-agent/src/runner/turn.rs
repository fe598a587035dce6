//! The step loop of a runner: model steps, then the tool calls each step asked for, until the
//! model answers without calls, the step limit pauses the turn, or it is cancelled or fails.

use std::sync::Arc;

use reasonix_forward::proto::{
    EventKind, ProviderChunk, ProviderRequest, ProviderRetry, RetryPhase, ToolCall, TurnOutcome,
    TurnState, Usage,
};
use tokio_util::sync::CancellationToken;

use super::{CompactEnd, Runner};
use crate::agent;

/// How many times a provider error marked retryable is re-issued within one step.
const PROVIDER_REISSUES: u32 = 3;

impl Runner<'_> {
    /// Run model steps until the model answers without tool calls (`Completed`), the step
    /// limit pauses the turn, or it is cancelled or fails. `fresh` is true for a turn the
    /// user just submitted (its first request may climb the whole compaction ladder).
    pub(crate) async fn run(
        &self,
        cancel: &CancellationToken,
        fresh: bool,
    ) -> (TurnOutcome, Option<String>) {
        let max_steps = self.host.max_steps();
        let mut step = 0u32;
        loop {
            if step >= max_steps {
                break (TurnOutcome::Paused, Some(format!("the turn reached its limit of {max_steps} model steps; continue to let it go on")));
            }
            step += 1;
            // The first request of a fresh turn may climb the whole ladder; later ones only
            // when forced (the next request would cross the force ratio).
            let turn_start = step == 1 && fresh;
            self.inject_steers();
            match self.keep_in_window(cancel, turn_start).await {
                Ok(()) => {}
                Err(CompactEnd::Cancelled) => break (TurnOutcome::Cancelled, None),
                Err(CompactEnd::OverWindow(why)) => break (TurnOutcome::Failed, Some(why)),
            }
            let collected = match self.model_step(cancel).await {
                Ok(c) => c,
                Err(StepEnd::Cancelled(partial)) => {
                    self.keep_partial(partial);
                    break (TurnOutcome::Cancelled, None);
                }
                Err(StepEnd::Failed(msg)) => break (TurnOutcome::Failed, Some(msg)),
            };
            {
                let mut conv = self.conversation();
                self.host.record(EventKind::AssistantMessage {
                    content: collected.text.clone(),
                    reasoning: collected.reasoning.clone(),
                    tool_calls: collected.calls.clone(),
                    provider_replay: collected.replay.clone(),
                });
                let msg = agent::assistant_message(
                    &collected.text,
                    collected.reasoning.as_deref(),
                    &collected.calls,
                    collected.replay.as_ref(),
                );
                conv.messages.push(msg);
                if let Some(usage) = collected.usage {
                    let bytes = conv.context.last_bytes;
                    conv.context.estimator.observe(bytes, usage.prompt_tokens);
                    let rewrite = conv.context.pending_rewrite.take();
                    let prefix = Arc::clone(&conv.prefix);
                    let note = agent::cache_note(
                        conv.prev_prefix
                            .as_ref()
                            .map(|(s, t, h)| (s.as_str(), t.as_str(), *h)),
                        &prefix.system_hash,
                        &prefix.tools_hash,
                        usage.cache_hit_tokens,
                        rewrite.as_deref(),
                    );
                    conv.prev_prefix = Some((
                        prefix.system_hash.clone(),
                        prefix.tools_hash.clone(),
                        usage.cache_hit_tokens,
                    ));
                    self.host.record(EventKind::Usage {
                        usage,
                        model: collected.model.clone(),
                        system_hash: prefix.system_hash.clone(),
                        tools_hash: prefix.tools_hash.clone(),
                        cache_note: note,
                    });
                }
            }
            if collected.calls.is_empty() {
                if self.host.steers_pending() {
                    // The answer is in, but the user steered meanwhile: one more step.
                    continue;
                }
                break (TurnOutcome::Completed, None);
            }
            let mut journal_failed = None;
            for call in &collected.calls {
                if journal_failed.is_some() {
                    self.finish_tool(
                        call,
                        true,
                        "not run: an earlier call of this step could not be saved to the session journal".into(),
                    )
                    .await;
                    continue;
                }
                if cancel.is_cancelled() {
                    self.finish_tool(call, true, "cancelled by the user before it ran".into())
                        .await;
                    continue;
                }
                if let Err(msg) = self.run_tool(call, cancel).await {
                    journal_failed = Some(msg);
                }
            }
            if let Some(msg) = journal_failed {
                break (TurnOutcome::Failed, Some(msg));
            }
            if cancel.is_cancelled() {
                break (TurnOutcome::Cancelled, None);
            }
        }
    }

    /// Give the steers the user sent meanwhile to the model: one user message after the last
    /// message (journaled as injected under the same conversation lock).
    fn inject_steers(&self) {
        let mut conv = self.conversation();
        if let Some(msg) = self.host.inject_steers(&conv.context.estimator) {
            conv.messages.push(msg);
        }
    }

    /// While a model reply is awaited: `running` when the driving client's link is up,
    /// "waiting for laptop" while it is down (the laptop keeps reading the stream and the
    /// link replays it on resume, so the turn is not lost, but nothing moves until then).
    fn show_model_link(&self, up: bool) {
        if up {
            self.host.set_state(TurnState::Running, None);
        } else {
            self.host.set_state(
                TurnState::WaitingForLaptop,
                Some("waiting for laptop: the link to the driving client is down; the model reply continues when it reconnects".into()),
            );
        }
    }

    async fn model_step(&self, cancel: &CancellationToken) -> Result<Collected, StepEnd> {
        let (stream_base, request) = {
            let mut conv = self.conversation();
            conv.context.last_bytes = conv.request_bytes();
            let messages = conv.request_messages();
            (
                format!("{}-{}-{}", conv.id, self.host.turn(), conv.messages.len()),
                ProviderRequest {
                    stream_id: String::new(),
                    model: self.host.model(),
                    messages,
                    tools: conv.prefix.tools.clone(),
                    temperature: None,
                    messages_ref: None,
                    messages_base: None,
                    effort: self.host.effort(),
                },
            )
        };
        let mut attempt = 0u32;
        let mut provider_errors = 0u32;
        loop {
            attempt += 1;
            let Some(gateway) = self.host.wait_gateway(cancel).await else {
                return Err(StepEnd::Cancelled(Collected::default()));
            };
            let mut link_up = gateway.link_state();
            let mut link_watch = true;
            self.show_model_link(*link_up.borrow_and_update());
            let mut req = request.clone();
            req.stream_id = format!("{stream_base}-{attempt}");
            let mut stream = gateway.start_stream(req);
            let mut c = Collected::default();
            let end = loop {
                let chunk = tokio::select! {
                    _ = cancel.cancelled() => return Err(StepEnd::Cancelled(c)),
                    changed = link_up.changed(), if link_watch => {
                        match changed {
                            Ok(()) => self.show_model_link(*link_up.borrow_and_update()),
                            Err(_) => link_watch = false,
                        }
                        continue;
                    }
                    chunk = stream.recv() => chunk,
                };
                match chunk {
                    None => break Err(None),
                    Some(ProviderChunk::Text { text }) => {
                        c.text.push_str(&text);
                        self.record_delta(EventKind::TextDelta { text }).await?;
                    }
                    Some(ProviderChunk::Reasoning { text }) => {
                        c.reasoning.get_or_insert_with(String::new).push_str(&text);
                        self.record_delta(EventKind::ReasoningDelta { text })
                            .await?;
                    }
                    Some(ProviderChunk::ToolCall(call)) => c.calls.push(call),
                    Some(ProviderChunk::Replay { data }) => c.replay = Some(data),
                    Some(ProviderChunk::Usage(u)) => c.usage = Some(u),
                    Some(ProviderChunk::Done { model, .. }) => {
                        c.model = model;
                        break Ok(());
                    }
                    Some(ProviderChunk::Error { message, retryable }) => {
                        break Err(Some((message, retryable)))
                    }
                    Some(ProviderChunk::Retrying(r)) => {
                        self.host.record(EventKind::ProviderRetry(r));
                    }
                }
            };
            match end {
                Ok(()) => return Ok(c),
                // The gateway's link is gone for good: nothing of this stream was acted
                // on (tool calls only count once the stream completed), so ask again.
                Err(None) => {
                    self.host.record(EventKind::Notice {
                        text: "the laptop disconnected during a model reply; the request will be re-issued when a client attaches".into(),
                    });
                    self.host.release_driver(gateway.conn_id());
                }
                // Only failures after the provider accepted the request are retryable (the
                // gateway has already spent its retries on the others), so this re-ask
                // cannot multiply the gateway's time budget.
                Err(Some((message, true))) if provider_errors < PROVIDER_REISSUES => {
                    provider_errors += 1;
                    self.host.record(EventKind::ProviderRetry(ProviderRetry {
                        phase: RetryPhase::Reask,
                        attempt: provider_errors + 1,
                        max_attempts: PROVIDER_REISSUES + 1,
                        delay_ms: 0,
                        reason: format!("the reply broke off: {message}"),
                    }));
                }
                Err(Some((message, _))) => return Err(StepEnd::Failed(message)),
            }
        }
    }

    /// Journal a streamed delta; when the writer is far behind (a slow or failing disk), wait
    /// for it instead of queueing without bound, and end the step if the journal fails.
    async fn record_delta(&self, kind: EventKind) -> Result<(), StepEnd> {
        if let Some(barrier) = self.host.record_delta(kind) {
            barrier.wait().await.map_err(|e| {
                StepEnd::Failed(self.host.journal_failure("the model reply was stopped", &e))
            })?;
        }
        Ok(())
    }

    /// A cancelled model step keeps what it streamed: the partial answer becomes a message of
    /// the conversation (its deltas are journaled too), so the next turn sees what the user
    /// saw. Tool calls of an unfinished stream are never kept (they did not run).
    fn keep_partial(&self, partial: Collected) {
        if partial.text.is_empty() {
            return;
        }
        let mut conv = self.conversation();
        conv.messages.push(agent::assistant_message(
            &partial.text,
            partial.reasoning.as_deref(),
            &[],
            None,
        ));
        self.host.record(EventKind::AssistantMessage {
            content: partial.text,
            reasoning: partial.reasoning,
            tool_calls: Vec::new(),
            provider_replay: None,
        });
    }
}

#[derive(Default)]
struct Collected {
    text: String,
    reasoning: Option<String>,
    calls: Vec<ToolCall>,
    usage: Option<Usage>,
    model: String,
    /// [`ProviderChunk::Replay`] of the stream, kept with the assistant message.
    replay: Option<serde_json::Value>,
}

enum StepEnd {
    /// With what streamed before the cancel (kept in the conversation).
    Cancelled(Collected),
    Failed(String),
}
