//! The turn runner: model steps, tool calls and approvals of one turn.

use super::*;

impl Session {
    /// Run a turn. `admitted` is the durability point of a fresh turn's `UserTurn` event
    /// (`None` when a paused turn continues): the model is not asked before it holds.
    pub(super) async fn run_turn(
        self: Arc<Self>,
        cancel: CancellationToken,
        admitted: Option<Barrier>,
    ) {
        let mut admitted = admitted;
        let barrier = loop {
            let (outcome, detail) = self.turn_steps(&cancel, admitted.take()).await;
            self.notice_mcp_tool_changes();
            if let Some(barrier) = self.end_turn(outcome, detail) {
                break barrier;
            }
        };
        if let Err(e) = barrier.wait().await {
            // The events stay queued and are written at the next durability point that
            // succeeds; say so, since a daemon crash before then would lose them.
            self.record(EventKind::Notice {
                text: self.journal_failure("this turn is not saved on the host yet", &e),
            });
        }
    }

    /// Close the turn with `outcome`, or return `None` when a steer arrived after the last
    /// step looked: the turn then goes on with it (decided under the lock that ends the
    /// turn, so no steer falls in between).
    fn end_turn(&self, outcome: TurnOutcome, detail: Option<String>) -> Option<Barrier> {
        let mut inner = self.lock();
        if outcome == TurnOutcome::Completed && !inner.pending.steers.is_empty() {
            return None;
        }
        let new_state = if outcome == TurnOutcome::Paused {
            TurnState::Paused
        } else {
            TurnState::Idle
        };
        if new_state == TurnState::Idle {
            self.drop_pending_steers(&mut inner, outcome);
        }
        self.emit(&mut inner, EventKind::TurnFinished { outcome, detail });
        if new_state == TurnState::Idle {
            inner.cancel = None;
        }
        // Under the same lock as the TurnFinished event: a client that submits the next
        // turn as soon as it sees this one finish must find the session idle, not busy.
        self.set_state_locked(&mut inner, new_state, None);
        // Durability point: the turn's end.
        Some(inner.journal.barrier())
    }

    async fn turn_steps(
        &self,
        cancel: &CancellationToken,
        admitted: Option<Barrier>,
    ) -> (TurnOutcome, Option<String>) {
        let fresh = admitted.is_some();
        if let Some(admitted) = admitted {
            if let Err(e) = admitted.wait().await {
                return (
                    TurnOutcome::Failed,
                    Some(self.journal_failure("the turn did not start", &e)),
                );
            }
            self.checkpoint_turn().await;
        }
        let cancel = cancel.clone();
        let max_steps = {
            let inner = self.lock();
            inner.settings.max_steps.unwrap_or(DEFAULT_MAX_STEPS).max(1)
        };
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
            match self.keep_in_window(&cancel, turn_start).await {
                Ok(()) => {}
                Err(compact::CompactEnd::Cancelled) => break (TurnOutcome::Cancelled, None),
                Err(compact::CompactEnd::OverWindow(why)) => {
                    break (TurnOutcome::Failed, Some(why))
                }
            }
            let collected = match self.model_step(&cancel).await {
                Ok(c) => c,
                Err(StepEnd::Cancelled(partial)) => {
                    self.keep_partial(partial);
                    break (TurnOutcome::Cancelled, None);
                }
                Err(StepEnd::Failed(msg)) => break (TurnOutcome::Failed, Some(msg)),
            };
            {
                let mut inner = self.lock();
                self.emit(
                    &mut inner,
                    EventKind::AssistantMessage {
                        content: collected.text.clone(),
                        reasoning: collected.reasoning.clone(),
                        tool_calls: collected.calls.clone(),
                        provider_replay: collected.replay.clone(),
                    },
                );
                let msg = agent::assistant_message(
                    &collected.text,
                    collected.reasoning.as_deref(),
                    &collected.calls,
                    collected.replay.as_ref(),
                );
                inner.messages.push(msg);
                if let Some(usage) = collected.usage {
                    let bytes = inner.context.last_bytes;
                    inner.context.estimator.observe(bytes, usage.prompt_tokens);
                    let rewrite = inner.context.pending_rewrite.take();
                    let note = agent::cache_note(
                        inner
                            .prev_prefix
                            .as_ref()
                            .map(|(s, t, h)| (s.as_str(), t.as_str(), *h)),
                        &self.prefix().system_hash,
                        &self.prefix().tools_hash,
                        usage.cache_hit_tokens,
                        rewrite.as_deref(),
                    );
                    inner.prev_prefix = Some((
                        self.prefix().system_hash.clone(),
                        self.prefix().tools_hash.clone(),
                        usage.cache_hit_tokens,
                    ));
                    self.emit(
                        &mut inner,
                        EventKind::Usage {
                            usage,
                            model: collected.model.clone(),
                            system_hash: self.prefix().system_hash.clone(),
                            tools_hash: self.prefix().tools_hash.clone(),
                            cache_note: note,
                        },
                    );
                }
            }
            if collected.calls.is_empty() {
                if self.steers_pending() {
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
                if let Err(msg) = self.run_tool(call, &cancel).await {
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

    /// Wait for a driving gateway, showing "waiting for laptop" meanwhile.
    pub(super) async fn wait_gateway(
        &self,
        cancel: &CancellationToken,
    ) -> Option<Arc<dyn DriverLink>> {
        let mut rx = self.driver.subscribe();
        loop {
            if let Some(g) = rx.borrow_and_update().clone() {
                return Some(g);
            }
            self.set_state(
                TurnState::WaitingForLaptop,
                Some("waiting for laptop: the model is reached through a client's gateway".into()),
            );
            tokio::select! {
                _ = cancel.cancelled() => return None,
                r = rx.changed() => if r.is_err() { return None; },
            }
        }
    }

    /// While a model reply is awaited: `running` when the driving client's link is up,
    /// "waiting for laptop" while it is down (the laptop keeps reading the stream and the
    /// link replays it on resume, so the turn is not lost, but nothing moves until then).
    fn show_model_link(&self, up: bool) {
        if up {
            self.set_state(TurnState::Running, None);
        } else {
            self.set_state(
                TurnState::WaitingForLaptop,
                Some("waiting for laptop: the link to the driving client is down; the model reply continues when it reconnects".into()),
            );
        }
    }

    async fn model_step(&self, cancel: &CancellationToken) -> Result<Collected, StepEnd> {
        let (stream_base, request) = {
            let mut inner = self.lock();
            inner.context.last_bytes = compact::request_bytes_of(&self.prefix(), &inner.messages);
            let messages = request_messages(&self.prefix(), &inner.messages);
            (
                format!("{}-{}-{}", self.id, inner.turn, inner.messages.len()),
                ProviderRequest {
                    stream_id: String::new(),
                    model: inner.settings.model.clone(),
                    messages,
                    tools: self.prefix().tools.clone(),
                    temperature: None,
                    messages_ref: None,
                    messages_base: None,
                    effort: inner.settings.effort,
                },
            )
        };
        let mut attempt = 0u32;
        let mut provider_errors = 0u32;
        loop {
            attempt += 1;
            let Some(gateway) = self.wait_gateway(cancel).await else {
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
                        self.record(EventKind::ProviderRetry(r));
                    }
                }
            };
            match end {
                Ok(()) => return Ok(c),
                // The gateway's link is gone for good: nothing of this stream was acted
                // on (tool calls only count once the stream completed), so ask again.
                Err(None) => {
                    self.record(EventKind::Notice {
                        text: "the laptop disconnected during a model reply; the request will be re-issued when a client attaches".into(),
                    });
                    self.release_driver(gateway.conn_id());
                }
                // Only failures after the provider accepted the request are retryable (the
                // gateway has already spent its retries on the others), so this re-ask
                // cannot multiply the gateway's time budget.
                Err(Some((message, true))) if provider_errors < PROVIDER_REISSUES => {
                    provider_errors += 1;
                    self.record(EventKind::ProviderRetry(ProviderRetry {
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
        let backlog = {
            let mut inner = self.lock();
            self.emit(&mut inner, kind);
            inner
                .journal
                .over_high_water()
                .then(|| inner.journal.barrier())
        };
        if let Some(barrier) = backlog {
            barrier.wait().await.map_err(|e| {
                StepEnd::Failed(self.journal_failure("the model reply was stopped", &e))
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
        let mut inner = self.lock();
        inner.messages.push(agent::assistant_message(
            &partial.text,
            partial.reasoning.as_deref(),
            &[],
            None,
        ));
        self.emit(
            &mut inner,
            EventKind::AssistantMessage {
                content: partial.text,
                reasoning: partial.reasoning,
                tool_calls: Vec::new(),
                provider_replay: None,
            },
        );
    }

    async fn finish_tool(&self, call: &ToolCall, is_error: bool, output: String) {
        self.finish_tool_as(call, is_error, output, None).await
    }

    /// A call that was not run because it was denied (`why`): an error result for the model,
    /// and the typed reason in the event (`reasonix run` exits 4 for [`Denied::Headless`]).
    async fn finish_denied(&self, call: &ToolCall, why: Denied, output: String) {
        self.finish_tool_as(call, true, output, Some(why)).await
    }

    async fn finish_tool_as(
        &self,
        call: &ToolCall,
        is_error: bool,
        output: String,
        denied: Option<Denied>,
    ) {
        // A big output goes to the content store (off the async threads) and the event carries
        // the bounded view plus a reference, so no event is too big for a frame.
        let (output, output_ref) = if output.len() > EXTERNALIZE_OVER {
            let store = self.content.clone();
            tokio::task::spawn_blocking(move || store.externalize_output(output))
                .await
                .unwrap_or_else(|e| {
                    (
                        format!("internal error: storing the tool output failed: {e}"),
                        None,
                    )
                })
        } else {
            (output, None)
        };
        let mut inner = self.lock();
        let context_bytes = compact::small_window_bound(&inner);
        inner.messages.push(agent::tool_result_message(
            &call.id,
            &output,
            output_ref.is_some(),
            context_bytes,
        ));
        self.emit(
            &mut inner,
            EventKind::ToolFinished {
                call_id: call.id.clone(),
                name: call.name.clone(),
                is_error,
                output,
                output_ref,
                denied,
                context_bytes,
            },
        );
    }

    /// Decide, ask if needed, journal the start durably and run one tool call. `Err` carries
    /// the user-facing text when the journal could not be written at a durability point: the
    /// tool did not run and the turn must end.
    async fn run_tool(&self, call: &ToolCall, cancel: &CancellationToken) -> Result<(), String> {
        let laptop = self.laptop_tools.lock_or_recover().clone();
        let tool = self
            .tools
            .get(&call.name)
            .or_else(|| laptop.and_then(|r| r.get(&call.name)));
        let Some(tool) = tool else {
            self.finish_tool(
                call,
                true,
                format!(
                    "unknown tool {:?}; the available tools are listed in your tool definitions",
                    call.name
                ),
            )
            .await;
            return Ok(());
        };
        let args: Value = match serde_json::from_str(if call.arguments.trim().is_empty() {
            "{}"
        } else {
            &call.arguments
        }) {
            Ok(v) => v,
            Err(e) => {
                self.finish_tool(
                    call,
                    true,
                    format!("the arguments are not valid JSON ({e}); send a JSON object matching the tool's schema"),
                )
                .await;
                return Ok(());
            }
        };
        let decision = self
            .lock()
            .policy
            .decide(&call.name, &args, tool.read_only());
        match decision {
            Decision::Allow => {}
            Decision::Deny { reason } => {
                self.finish_denied(
                    call,
                    Denied::Policy,
                    format!("denied by the permission policy: {reason}"),
                )
                .await;
                return Ok(());
            }
            Decision::Ask { reason } => {
                let headless_denied = self.headless();
                let ask_reason = reason.clone();
                let answer = match self.ask_approval(call, &args, reason, cancel).await {
                    Ok(a) => a,
                    Err(e) => {
                        let msg = self.journal_failure(
                            &format!(
                                "{} was not run (its approval request could not be saved)",
                                call.name
                            ),
                            &e,
                        );
                        self.finish_tool(call, true, self.journal_failure("not run", &e))
                            .await;
                        return Err(msg);
                    }
                };
                match answer {
                    Some(ApprovalDecision::AllowOnce)
                    | Some(ApprovalDecision::AllowSession)
                    | Some(ApprovalDecision::AllowAlways) => {}
                    Some(ApprovalDecision::Deny) => {
                        self.finish_denied(call, Denied::User, "the user denied this tool call; do not retry it unchanged — ask the user or take another approach".into()).await;
                        return Ok(());
                    }
                    None if headless_denied => {
                        self.finish_denied(call, Denied::Headless, format!("denied: {} needs approval ({ask_reason}) and this run is headless, so nobody can approve it; do not retry it — finish without it or say what the user must allow", call.name)).await;
                        return Ok(());
                    }
                    None => {
                        self.finish_denied(
                            call,
                            Denied::Cancelled,
                            "cancelled before approval".into(),
                        )
                        .await;
                        return Ok(());
                    }
                }
            }
        }
        let started = {
            let mut inner = self.lock();
            self.emit(
                &mut inner,
                EventKind::ToolStarted {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                },
            );
            inner.journal.barrier()
        };
        // Durability point: the start is on disk before the tool runs, so after a crash we
        // know it may have run and never run it again. No durable start, no run.
        if let Err(e) = started.wait().await {
            let msg = self.journal_failure(&format!("{} was not run", call.name), &e);
            self.finish_tool(call, true, self.journal_failure("not run", &e))
                .await;
            return Err(msg);
        }
        let live = self.live.clone();
        let call_id = call.id.clone();
        let sink: crate::mcp::ProgressSink = Arc::new(move |p: crate::mcp::McpProgress| {
            let _ = live.send(Notification::ToolProgress {
                call_id: call_id.clone(),
                message: p.render(),
            });
        });
        let ctx = self.tool_ctx();
        let out = tokio::select! {
            out = crate::mcp::with_progress(sink, tool.run(args, &ctx)) => out,
            _ = cancel.cancelled() => {
                self.finish_tool(call, true, "cancelled by the user while running".into()).await;
                return Ok(());
            }
        };
        self.finish_tool(call, out.is_error, out.text).await;
        Ok(())
    }

    /// Nobody can answer an approval question: the driving client is headless.
    fn headless(&self) -> bool {
        self.driver
            .borrow()
            .as_ref()
            .map(|g| g.headless())
            .unwrap_or(false)
            || self.lock().settings.headless
    }

    async fn ask_approval(
        &self,
        call: &ToolCall,
        args: &Value,
        reason: String,
        cancel: &CancellationToken,
    ) -> Result<Option<ApprovalDecision>, JournalError> {
        if self.headless() {
            self.record(EventKind::Notice {
                text: format!("{} needs approval ({reason}); headless run denies it (use --auto or --yolo to allow)", call.name),
            });
            // No answer: the caller records it as denied for being headless.
            return Ok(None);
        }
        // Unique per session (and beyond): providers reuse tool-call ids across turns, and an
        // id derived from the call alone would match an approval a client already answered.
        let approval_id = format!("ap-{:016x}-{}", rand::random::<u64>(), call.id);
        let (tx, rx) = oneshot::channel();
        let requested = {
            let mut inner = self.lock();
            self.emit(
                &mut inner,
                EventKind::ApprovalRequested {
                    approval_id: approval_id.clone(),
                    call_id: Some(call.id.clone()),
                    tool: call.name.clone(),
                    arguments: call.arguments.clone(),
                    reason,
                    preview: None,
                    always_rule: crate::policy::Policy::always_rule(&call.name, args),
                },
            );
            inner.approvals.insert(
                approval_id.clone(),
                PendingApproval {
                    answer: tx,
                    tool: call.name.clone(),
                    args: args.clone(),
                },
            );
            inner.journal.barrier()
        };
        // Durability point: the question is saved before anyone is asked.
        if let Err(e) = requested.wait().await {
            self.lock().approvals.remove(&approval_id);
            return Err(e);
        }
        self.set_state(
            TurnState::WaitingForApproval,
            Some(format!("waiting for approval of {}", call.name)),
        );
        let answer = tokio::select! {
            a = rx => a.ok(),
            _ = cancel.cancelled() => None,
        };
        self.lock().approvals.remove(&approval_id);
        self.set_state(TurnState::Running, None);
        Ok(answer)
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

/// The messages of a provider request: the system prompt, then the conversation (successive
/// user messages joined, [`crate::agent::push_request_message`]).
pub(super) fn request_messages(prefix: &Prefix, conversation: &[Value]) -> Vec<Value> {
    let mut messages = Vec::with_capacity(conversation.len() + 1);
    messages.push(json!({"role": "system", "content": prefix.system}));
    for m in conversation {
        crate::agent::push_request_message(&mut messages, m.clone());
    }
    messages
}
