//! The ssh-agent `confirm` mode over ACP (#36 §2): a host process's signing request is put to
//! the editor as a `session/request_permission` naming the key and the process. Anything but
//! "Allow once" (a rejection, a cancelled prompt, an editor that cannot answer, no session
//! yet) refuses the signature.

use super::*;
use crate::agent_confirm::AgentSignAsk;

const SIGN_ALLOW: &str = "agent_sign_allow";
const SIGN_REJECT: &str = "agent_sign_reject";

impl Actor {
    pub(super) fn ask_agent_sign(&self, ask: AgentSignAsk) {
        let Some(session) = self.session.clone() else {
            ask.answer.answer(false);
            return;
        };
        let call = acp::ToolCallUpdate::new(
            format!("agent-sign-{:016x}", rand::random::<u64>()),
            acp::ToolCallUpdateFields::new().title(format!("ssh-agent: {}", ask.question())),
        );
        let options = vec![
            acp::PermissionOption::new(
                SIGN_ALLOW,
                "Allow once",
                acp::PermissionOptionKind::AllowOnce,
            ),
            acp::PermissionOption::new(
                SIGN_REJECT,
                "Reject",
                acp::PermissionOptionKind::RejectOnce,
            ),
        ];
        let request = acp::RequestPermissionRequest::new(session, call, options);
        let peer = self.peer.clone();
        tokio::spawn(async move {
            let answer = peer.request("session/request_permission", &request).await;
            let allowed = matches!(
                answer.ok().and_then(|v| serde_json::from_value::<acp::RequestPermissionResponse>(v).ok()),
                Some(r) if matches!(&r.outcome, acp::RequestPermissionOutcome::Selected(s) if s.option_id.0.as_ref() == SIGN_ALLOW)
            );
            ask.answer.answer(allowed);
        });
    }
}
