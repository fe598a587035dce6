//! MCP elicitations of the session's tool calls: the question is journaled
//! (`ElicitationRequested`), the driving client answers it once (`AnswerElicitation`,
//! deduplicated), and the answer goes back to the server. A headless run declines with a
//! notice; a cancelled turn cancels the question.

use std::sync::Weak;

use reasonix_forward::proto::ElicitAction;

use super::*;
use crate::mcp::{ElicitAnswer, ElicitFuture, ElicitRequest, Elicitor};

/// The session as the MCP client's [`Elicitor`].
pub(super) struct SessionElicitor(pub(super) Weak<Session>);

impl Elicitor for SessionElicitor {
    fn elicit(&self, request: ElicitRequest) -> ElicitFuture {
        let session = self.0.upgrade();
        Box::pin(async move {
            match session {
                Some(s) => s.ask_elicitation(request).await,
                None => ElicitAnswer::Cancel,
            }
        })
    }
}

impl Session {
    async fn ask_elicitation(&self, request: ElicitRequest) -> ElicitAnswer {
        if self.headless() {
            self.record(EventKind::Notice {
                text: format!(
                    "MCP server `{}` asked for input ({}); a headless run declines it",
                    request.server,
                    request.message.trim()
                ),
            });
            return ElicitAnswer::Decline;
        }
        let elicitation_id = format!("el-{:016x}", rand::random::<u64>());
        let (tx, rx) = oneshot::channel();
        let cancel = {
            let mut inner = self.lock();
            self.emit(
                &mut inner,
                EventKind::ElicitationRequested {
                    elicitation_id: elicitation_id.clone(),
                    server: request.server.clone(),
                    message: request.message.clone(),
                    schema: request.schema.to_string(),
                },
            );
            inner.elicitations.insert(elicitation_id.clone(), tx);
            inner.cancel.clone()
        };
        self.set_state(
            TurnState::WaitingForApproval,
            Some(format!("MCP server `{}` asks for input", request.server)),
        );
        let answer = match cancel {
            Some(c) => tokio::select! {
                a = rx => a.ok(),
                _ = c.cancelled() => None,
            },
            None => rx.await.ok(),
        };
        self.lock().elicitations.remove(&elicitation_id);
        self.set_state(TurnState::Running, None);
        answer.unwrap_or(ElicitAnswer::Cancel)
    }

    /// Answer a pending elicitation. Deduplicated by `request_id`; `Ok(false)` for a
    /// repeated request or an elicitation already answered.
    pub fn answer_elicitation(
        &self,
        request_id: &str,
        elicitation_id: &str,
        action: ElicitAction,
        content: Option<serde_json::Map<String, Value>>,
    ) -> Result<bool, SessionError> {
        let mut inner = self.lock();
        if inner.seen_requests.contains(request_id) {
            return Ok(false);
        }
        let Some(pending) = inner.elicitations.remove(elicitation_id) else {
            let answered = inner.events.iter().any(|e| {
                matches!(&e.kind, EventKind::ElicitationAnswered { elicitation_id: a, .. } if a == elicitation_id)
            });
            if answered {
                return Ok(false);
            }
            return Err(SessionError::NoSuchApproval(elicitation_id.to_string()));
        };
        inner.seen_requests.insert(request_id.to_string());
        self.emit(
            &mut inner,
            EventKind::ElicitationAnswered {
                elicitation_id: elicitation_id.to_string(),
                action,
            },
        );
        let answer = match action {
            ElicitAction::Accept => ElicitAnswer::Accept(content.unwrap_or_default()),
            ElicitAction::Decline => ElicitAnswer::Decline,
            ElicitAction::Cancel => ElicitAnswer::Cancel,
        };
        let _ = pending.send(answer);
        Ok(true)
    }
}
