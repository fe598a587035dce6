//! How steers and `!` shell outputs enter the conversation (shared by the live session and
//! the journal replay, so both build byte-identical messages).
//!
//! - A steer is journaled when it arrives ([`EventKind::Steer`]) and becomes a user message
//!   only where the turn runner injected it ([`EventKind::SteerInjected`]): after the last
//!   tool result of a step, before the next model request. Appending keeps the request an
//!   extension of the previous one, so the provider's cached prefix survives.
//! - A `!` output the user chose to share ([`EventKind::ShellRan`] with `added_to_context`)
//!   rides the next user turn's message, never the system prefix.

use std::collections::HashMap;

use reasonix_forward::proto::{Attachment, EventKind};
use serde_json::{json, Value};

/// A `!` command and its output (already bounded like a tool result), waiting for the next
/// user turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellContext {
    /// The command line.
    pub command: String,
    /// Its output as journaled.
    pub output: String,
}

/// The user message of injected steers (several steers of one step are one message, in
/// the order they arrived).
pub fn steer_message(texts: &[&str]) -> Value {
    json!({"role": "user", "content": texts.join("\n\n")})
}

/// A user turn's message: shared `!` outputs first (what the user looked at before
/// asking), then the text and its attachments ([`crate::agent::user_message`]).
pub fn user_message_with_shell(
    text: &str,
    attachments: &[Attachment],
    shell: &[ShellContext],
) -> Value {
    let mut msg = crate::agent::user_message(text, attachments);
    if shell.is_empty() {
        return msg;
    }
    let mut content = String::new();
    for s in shell {
        content.push_str(&format!(
            "<shell-output command=\"{}\">\n{}\n</shell-output>\n\n",
            s.command.replace('"', "&quot;"),
            s.output
        ));
    }
    content.push_str(msg["content"].as_str().unwrap_or_default());
    msg["content"] = Value::String(content);
    msg
}

/// Replays steer and shell events in journal order.
#[derive(Debug, Default)]
pub struct Replay {
    steers: HashMap<String, String>,
    shell: Vec<ShellContext>,
}

impl Replay {
    /// Feed one steer/shell event; returns the message an injection adds.
    pub fn observe(&mut self, kind: &EventKind) -> Option<Value> {
        match kind {
            EventKind::Steer { request_id, text } => {
                self.steers.insert(request_id.clone(), text.clone());
                None
            }
            EventKind::SteerInjected { request_ids, .. } => {
                let texts: Vec<String> = request_ids
                    .iter()
                    .filter_map(|id| self.steers.remove(id))
                    .collect();
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                (!refs.is_empty()).then(|| steer_message(&refs))
            }
            EventKind::ShellRan {
                command,
                output,
                added_to_context: true,
                ..
            } => {
                self.shell.push(ShellContext {
                    command: command.clone(),
                    output: output.clone(),
                });
                None
            }
            _ => None,
        }
    }

    /// The shared `!` outputs for the user turn that starts now.
    pub fn take_shell(&mut self) -> Vec<ShellContext> {
        std::mem::take(&mut self.shell)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injection_places_the_steer_and_shell_rides_the_next_turn() {
        let mut r = Replay::default();
        assert!(r
            .observe(&EventKind::Steer {
                request_id: "s1".into(),
                text: "use tabs".into()
            })
            .is_none());
        assert!(r
            .observe(&EventKind::Steer {
                request_id: "s2".into(),
                text: "and tests".into()
            })
            .is_none());
        let msg = r
            .observe(&EventKind::SteerInjected {
                request_ids: vec!["s1".into(), "s2".into()],
                est_tokens: 3,
            })
            .expect("message");
        assert_eq!(msg["content"], "use tabs\n\nand tests");
        assert_eq!(msg["role"], "user");
        // Injected once only.
        assert!(r
            .observe(&EventKind::SteerInjected {
                request_ids: vec!["s1".into()],
                est_tokens: 1,
            })
            .is_none());
        r.observe(&EventKind::ShellRan {
            request_id: "x".into(),
            command: "ls \"a\"".into(),
            is_error: false,
            output: "a.txt".into(),
            added_to_context: true,
        });
        r.observe(&EventKind::ShellRan {
            request_id: "y".into(),
            command: "env".into(),
            is_error: false,
            output: "SECRET".into(),
            added_to_context: false,
        });
        let shell = r.take_shell();
        let m = user_message_with_shell("what is there?", &[], &shell);
        assert_eq!(
            m["content"],
            "<shell-output command=\"ls &quot;a&quot;\">\na.txt\n</shell-output>\n\nwhat is there?"
        );
        assert!(r.take_shell().is_empty());
    }
}
