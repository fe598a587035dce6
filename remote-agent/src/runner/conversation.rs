//! One conversation as a runner drives it: its messages, the byte-stable prefix they are sent
//! under, and the accounting that decides when the compaction ladder runs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::agent::Prefix;
use crate::compaction::{self, archive, estimate};

/// The conversation's context accounting.
#[derive(Debug, Default)]
pub(crate) struct ContextState {
    /// Byte → token ratio, calibrated by usage reports.
    pub(crate) estimator: compaction::Estimator,
    /// Bytes of the last request sent (calibrated against its reported `prompt_tokens`).
    pub(crate) last_bytes: usize,
    /// A rewrite since the last request: names it in the next usage's cache note.
    pub(crate) pending_rewrite: Option<String>,
    /// The number of the archive's next record, once read from the archive.
    pub(crate) archive_next: Option<u64>,
}

/// One conversation of a session. The main conversation is rebuilt from the journal
/// ([`crate::agent::messages_from_events`]); each conversation has its own prefix, so its
/// requests extend each other byte for byte whatever other conversations do.
#[derive(Debug)]
pub(crate) struct Conversation {
    /// Names the conversation's provider streams (`<id>-<turn>-<n>`) and its archive. The
    /// main conversation's id is the session's, so its stream ids and archive name are the
    /// ones journals already hold.
    pub(crate) id: String,
    /// System prompt and tool schemas, fixed for the conversation's life (replaced only when
    /// the laptop's MCP tools join, before the first request).
    pub(crate) prefix: Arc<Prefix>,
    /// The messages after the system prompt, as the model saw them (compactions applied).
    pub(crate) messages: Vec<Value>,
    /// Prompt-size accounting for the compaction ladder.
    pub(crate) context: ContextState,
    /// The prefix hashes and cache-hit tokens of the last request (explains a drop in cache
    /// hits in the next usage event).
    pub(crate) prev_prefix: Option<(String, String, u64)>,
    /// The file compaction archives what it removes from this conversation to.
    pub(crate) archive: PathBuf,
}

impl Conversation {
    /// A conversation `id` holding `messages` under `prefix`, archiving next to the journal
    /// in `sessions_dir`.
    pub(crate) fn new(
        id: &str,
        prefix: Prefix,
        messages: Vec<Value>,
        sessions_dir: &Path,
    ) -> Conversation {
        Conversation {
            id: id.to_string(),
            prefix: Arc::new(prefix),
            messages,
            context: ContextState::default(),
            prev_prefix: None,
            archive: archive::archive_path(sessions_dir, id),
        }
    }

    /// The archive's name as compaction events carry it.
    pub(crate) fn archive_name(&self) -> String {
        archive::archive_name(&self.id)
    }

    /// The messages of the next provider request.
    pub(crate) fn request_messages(&self) -> Vec<Value> {
        request_messages(&self.prefix, &self.messages)
    }

    /// Bytes of the next request (what the usage report calibrates).
    pub(crate) fn request_bytes(&self) -> usize {
        request_bytes_of(&self.prefix, &self.messages)
    }

    /// Estimated prompt tokens of the next request as the conversation stands: (bytes,
    /// tokens).
    pub(crate) fn next_request_tokens(&self) -> (usize, u64) {
        let bytes = self.request_bytes();
        (bytes, self.context.estimator.tokens(bytes))
    }
}

/// The messages of a provider request: the system prompt, then the conversation (successive
/// user messages joined, [`crate::agent::push_request_message`]).
pub(crate) fn request_messages(prefix: &Prefix, conversation: &[Value]) -> Vec<Value> {
    let mut messages = Vec::with_capacity(conversation.len() + 1);
    messages.push(json!({"role": "system", "content": prefix.system}));
    for m in conversation {
        crate::agent::push_request_message(&mut messages, m.clone());
    }
    messages
}

/// Bytes of a request of `messages` under `prefix` (what the usage report calibrates).
pub(crate) fn request_bytes_of(prefix: &Prefix, messages: &[Value]) -> usize {
    estimate::request_bytes(&prefix.system, &prefix.tools, messages)
}
