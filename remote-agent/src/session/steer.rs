//! Steering a running turn and `!` shell commands (see [`crate::steer`] for how both enter
//! the conversation).

use super::*;
use crate::steer::ShellContext;

/// Steers received and not yet given to the model, with `!` outputs waiting for the next
/// user turn.
#[derive(Debug, Default)]
pub(super) struct Pending {
    /// (request id, text), in arrival order.
    pub(super) steers: Vec<(String, String)>,
    /// Shared `!` outputs for the next user turn.
    pub(super) shell: Vec<ShellContext>,
}

impl Pending {
    /// What a journal left pending: `!` outputs shared after the last user turn. (Steers
    /// never outlive their turn: a turn left open by a crash is closed as interrupted.)
    pub(super) fn from_events(events: &[Event]) -> Pending {
        let mut replay = crate::steer::Replay::default();
        for e in events {
            match &e.kind {
                EventKind::UserTurn { .. } => {
                    replay.take_shell();
                }
                k @ EventKind::ShellRan { .. } => {
                    replay.observe(k);
                }
                _ => {}
            }
        }
        Pending {
            steers: Vec::new(),
            shell: replay.take_shell(),
        }
    }
}

impl Session {
    /// Steer the running turn. Journaled at once; `Ok(false)` for a repeated `request_id`.
    /// The returned future resolves when the steer is on disk.
    pub async fn steer(&self, request_id: &str, text: &str) -> Result<bool, SessionError> {
        let barrier = {
            let mut inner = self.lock();
            if inner.seen_requests.contains(request_id) {
                return Ok(false);
            }
            match inner.state {
                TurnState::Running
                | TurnState::WaitingForLaptop
                | TurnState::WaitingForApproval => {}
                TurnState::Idle | TurnState::Paused => return Err(SessionError::NotRunning),
            }
            if text.trim().is_empty() {
                return Err(SessionError::EmptySteer);
            }
            inner.seen_requests.insert(request_id.to_string());
            inner
                .pending
                .steers
                .push((request_id.to_string(), text.to_string()));
            self.emit(
                &mut inner,
                EventKind::Steer {
                    request_id: request_id.to_string(),
                    text: text.to_string(),
                },
            );
            inner.journal.barrier()
        };
        // Durability point: a steer the client saw accepted survives a daemon crash in the
        // journal (and shows on replay) even if no model step took it.
        barrier.wait().await?;
        Ok(true)
    }

    /// True while steers wait for a model step.
    pub(super) fn steers_pending(&self) -> bool {
        !self.lock().pending.steers.is_empty()
    }

    /// Give the pending steers to the model: one user message for the runner to append after
    /// the last message, announced with [`EventKind::SteerInjected`] (its size estimated with
    /// `estimator`). Called before each model step, under the conversation's lock.
    pub(super) fn inject_steers(&self, estimator: &crate::compaction::Estimator) -> Option<Value> {
        self.take_steers(estimator, |k| k).map(|(msg, _)| msg)
    }

    /// [`inject_steers`](Self::inject_steers) for any conversation of the session: the
    /// `steer_injected` event goes through `wrap` (the planner's is journaled as its own,
    /// #38 §2); also returns the steers taken, (request id, text) in arrival order.
    pub(super) fn take_steers(
        &self,
        estimator: &crate::compaction::Estimator,
        wrap: impl FnOnce(EventKind) -> EventKind,
    ) -> Option<(Value, Vec<(String, String)>)> {
        let mut inner = self.lock();
        if inner.pending.steers.is_empty() {
            return None;
        }
        let steers = std::mem::take(&mut inner.pending.steers);
        let texts: Vec<&str> = steers.iter().map(|(_, t)| t.as_str()).collect();
        let msg = crate::steer::steer_message(&texts);
        let bytes = msg["content"].as_str().map(str::len).unwrap_or(0);
        let est_tokens = estimator.tokens(bytes);
        let request_ids = steers.iter().map(|(id, _)| id.clone()).collect();
        self.emit(
            &mut inner,
            wrap(EventKind::SteerInjected {
                request_ids,
                est_tokens,
            }),
        );
        Some((msg, steers))
    }

    /// The turn ended without another model step: steers still pending were not delivered;
    /// say so (their text is in the journal and the transcript).
    pub(super) fn drop_pending_steers(&self, inner: &mut Inner, outcome: TurnOutcome) {
        if inner.pending.steers.is_empty() {
            return;
        }
        let steers = std::mem::take(&mut inner.pending.steers);
        let n = steers.len();
        self.emit(
            inner,
            EventKind::Notice {
                text: format!(
                    "{n} steer message(s) were not given to the model: the turn ended ({outcome}) first; send them again as a new message if they still matter"
                ),
            },
        );
    }

    /// Run `command` (typed as `!command`) in the workspace under the session's sandbox and
    /// its `bash` policy: a denied command is refused; one the policy would ask about runs,
    /// since the user typed it. Its output streams as `ToolProgress{call_id: request_id}`.
    /// `Ok(false)` for a repeated `request_id`.
    pub async fn shell(
        &self,
        request_id: &str,
        command: &str,
        add_to_context: bool,
    ) -> Result<bool, SessionError> {
        if command.trim().is_empty() {
            return Err(SessionError::Shell(
                "the command is empty; type !command".into(),
            ));
        }
        let args = json!({"command": command});
        {
            let mut inner = self.lock();
            if inner.seen_requests.contains(request_id) {
                return Ok(false);
            }
            if !matches!(inner.state, TurnState::Idle | TurnState::Paused) {
                return Err(SessionError::Busy);
            }
            match inner.policy.decide("bash", &args, false) {
                Decision::Deny { reason } => {
                    return Err(SessionError::ShellDenied(reason));
                }
                Decision::Allow | Decision::Ask { .. } => {}
            }
            inner.seen_requests.insert(request_id.to_string());
        }
        let Some(bash) = self.runtime.registry.get("bash") else {
            return Err(SessionError::Shell(
                "the bash tool is not available on this host".into(),
            ));
        };
        let ctx = self.tool_ctx();
        // Streamed to every client as `ToolProgress{call_id: request_id}` while it runs (not
        // journaled: the journaled `ShellRan` below carries the bounded result).
        let live = self.live.clone();
        let call_id = request_id.to_string();
        let sink: crate::tools::OutputSink = Arc::new(move |piece: &str| {
            let _ = live.send(Notification::ToolProgress {
                call_id: call_id.clone(),
                message: piece.to_string(),
            });
        });
        let out = crate::tools::with_output_stream(sink, bash.run(args, &ctx)).await;
        let barrier = {
            let mut inner = self.lock();
            // Bounded as a tool result is when it enters the context, so the event fits a
            // frame and the tail stays small.
            let output = crate::tools::bound_for_context(&out.text);
            if add_to_context {
                inner.pending.shell.push(ShellContext {
                    command: command.to_string(),
                    output: output.clone(),
                });
            }
            self.emit(
                &mut inner,
                EventKind::ShellRan {
                    request_id: request_id.to_string(),
                    command: command.to_string(),
                    is_error: out.is_error,
                    output,
                    added_to_context: add_to_context,
                },
            );
            inner.journal.barrier()
        };
        barrier.wait().await?;
        Ok(true)
    }
}
