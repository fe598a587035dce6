//! Approvals: a runner asks (the question is journaled before anyone sees it), a client
//! answers once (deduplicated), and "allow for the session" widens the session's policy.

use super::*;

/// An approval question waiting for its answer.
pub(super) struct PendingApproval {
    answer: oneshot::Sender<ApprovalDecision>,
    tool: String,
    args: Value,
}

impl Session {
    /// Nobody can answer an approval question: the driving client is headless.
    /// While a goal runs with no client attached, a question waits for the next client
    /// instead (the session shows "waiting for approval").
    pub(super) fn headless(&self) -> bool {
        let driver = self.driver.borrow().as_ref().map(|g| g.headless());
        let inner = self.lock();
        match driver {
            Some(h) => h || inner.settings.headless,
            None => inner.settings.headless && !inner.goal.running(),
        }
    }

    /// Ask the user to approve `call`: journaled durably before anyone is asked, answered
    /// with [`Session::approve`]. `Ok(None)` when nobody answered: the driving client is
    /// headless, or the turn was cancelled meanwhile.
    pub(super) async fn ask_approval(
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
                    always_rule: Policy::always_rule(&call.name, args),
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
        self.approval_hooks(&call.name);
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

    /// Answer a pending approval. Deduplicated by `request_id`; answering an approval that
    /// was already answered is reported as `Ok(false)`.
    ///
    /// The answer is fsynced before the call returns (a durability point); when the journal
    /// cannot be written the turn still gets the answer (its next durability point, before
    /// the tool starts, then fails the turn cleanly) and the caller gets the journal error.
    pub async fn approve(
        &self,
        request_id: &str,
        approval_id: &str,
        decision: ApprovalDecision,
    ) -> Result<bool, SessionError> {
        let barrier = self.approve_locked(request_id, approval_id, decision)?;
        match barrier {
            None => Ok(false),
            Some(b) => {
                b.wait().await?;
                Ok(true)
            }
        }
    }

    fn approve_locked(
        &self,
        request_id: &str,
        approval_id: &str,
        decision: ApprovalDecision,
    ) -> Result<Option<Barrier>, SessionError> {
        let mut inner = self.lock();
        if inner.seen_requests.contains(request_id) {
            return Ok(None);
        }
        let Some(pending) = inner.approvals.remove(approval_id) else {
            let answered = inner.events.iter().any(|e| {
                matches!(&e.kind, EventKind::ApprovalAnswered { approval_id: a, .. } if a == approval_id)
            });
            if answered {
                return Ok(None);
            }
            return Err(SessionError::NoSuchApproval(approval_id.to_string()));
        };
        inner.seen_requests.insert(request_id.to_string());
        if matches!(
            decision,
            ApprovalDecision::AllowSession | ApprovalDecision::AllowAlways
        ) {
            inner.policy.allow_for_session(&pending.tool, &pending.args);
        }
        let rule = match decision {
            ApprovalDecision::AllowAlways => Policy::always_rule(&pending.tool, &pending.args),
            ApprovalDecision::AllowOnce
            | ApprovalDecision::AllowSession
            | ApprovalDecision::Deny => None,
        };
        if decision == ApprovalDecision::AllowAlways && rule.is_none() {
            self.emit(
                &mut inner,
                EventKind::Notice {
                    text: format!(
                        "{} is too dangerous to allow forever; it is allowed for this session only",
                        pending.tool
                    ),
                },
            );
        }
        self.emit(
            &mut inner,
            EventKind::ApprovalAnswered {
                approval_id: approval_id.to_string(),
                decision,
                rule,
            },
        );
        let barrier = inner.journal.barrier();
        let _ = pending.answer.send(decision);
        Ok(Some(barrier))
    }
}
