//! A turn whose only step is one tool call the user asked for (`reasonix subagent run`,
//! #33 §3): no model request of this conversation. The call is journaled as an assistant
//! message asking for it (so a replay rebuilds the same conversation), run like any model
//! call (policy, hooks, durable start, once), and the subagent's answer becomes the
//! turn's answer.

use reasonix_forward::proto::{EventKind, ToolCall, TurnOutcome};
use tokio_util::sync::CancellationToken;

use super::Runner;
use crate::agent;

impl Runner<'_> {
    /// Run `call` as the turn's one step and answer with the child's answer.
    pub(crate) async fn run_direct(
        &self,
        call: ToolCall,
        cancel: &CancellationToken,
    ) -> (TurnOutcome, Option<String>) {
        {
            let mut conv = self.conversation();
            self.host.record(EventKind::AssistantMessage {
                content: String::new(),
                reasoning: None,
                tool_calls: vec![call.clone()],
                provider_replay: None,
            });
            conv.messages.push(agent::assistant_message(
                "",
                None,
                std::slice::from_ref(&call),
                None,
            ));
        }
        if let Err(msg) = self.run_tool(&call, cancel).await {
            return (TurnOutcome::Failed, Some(msg));
        }
        if cancel.is_cancelled() {
            return (TurnOutcome::Cancelled, None);
        }
        let output = {
            let conv = self.conversation();
            conv.messages
                .last()
                .filter(|m| m["role"] == "tool")
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default()
                .to_string()
        };
        let (ok, answer) = split_result(&output);
        if !ok {
            return (TurnOutcome::Failed, Some(answer));
        }
        let mut conv = self.conversation();
        self.host.record(EventKind::TextDelta {
            text: answer.clone(),
        });
        self.host.record(EventKind::AssistantMessage {
            content: answer.clone(),
            reasoning: None,
            tool_calls: Vec::new(),
            provider_replay: None,
        });
        conv.messages
            .push(agent::assistant_message(&answer, None, &[], None));
        (TurnOutcome::Completed, None)
    }
}

/// A delegation tool's result: `(true, answer)` for a child that completed (or stopped at
/// its step limit with a partial answer), `(false, why)` otherwise.
fn split_result(output: &str) -> (bool, String) {
    let Some(rest) = output.strip_prefix("[subagent ") else {
        // Refused before a child started (the text says why).
        return (false, output.trim().to_string());
    };
    let (header, answer) = rest.split_once('\n').unwrap_or((rest, ""));
    let ok = header.contains(") completed;") || header.contains(") stopped at");
    if ok {
        (true, answer.to_string())
    } else {
        (false, format!("[subagent {header}"))
    }
}

#[cfg(test)]
mod tests {
    use super::split_result;

    #[test]
    fn a_child_result_splits_into_its_answer_or_why_it_failed() {
        let (ok, a) =
            split_result("[subagent sa-1 (explore) completed; 1 model steps]\nthe map\nline 2");
        assert!(ok);
        assert_eq!(a, "the map\nline 2");
        let (ok, why) =
            split_result("[subagent sa-2 (general) failed: boom; 0 model steps]\n(no answer)");
        assert!(!ok);
        assert!(why.contains("failed: boom"), "{why}");
        let (ok, why) = split_result("unknown subagent profile \"x\"");
        assert!(!ok);
        assert!(why.contains("unknown"), "{why}");
    }
}
