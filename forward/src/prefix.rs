//! Provider requests by prefix: a session's model requests extend each other byte for byte
//! (the cache-first rule), so after the first one the host sends only the messages that are
//! new, naming the earlier request they follow ([`MessagesBase`]), and the laptop puts that
//! request's messages in front. The bytes on the link per request are then those of the new
//! messages, not of the whole conversation.
//!
//! Each side keeps what it needs for one link:
//! - the host, [`SentMessages`]: the messages of the last request the laptop accepted on
//!   this link (it answers `ProviderAccepted` only after it stored them);
//! - the laptop, [`MessageBases`]: the messages of its last few requests on this link.
//!
//! A laptop that does not hold the base refuses the request with
//! [`UNKNOWN_MESSAGES_BASE`](crate::proto::UNKNOWN_MESSAGES_BASE); the host forgets its base
//! and sends the request again in full. Nothing reaches the provider until the laptop has
//! the whole request, so that costs a round trip, never a second model call.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::proto::MessagesBase;

/// Largest conversation (bytes of JSON messages) the daemon hands the laptop as a base when a
/// link starts to drive a session. It crosses the link at once, before any request, so a
/// client that only looks at a long session over a slow link is not made to wait behind it;
/// a larger conversation's first request goes in full as before.
pub const PROVIDED_BASE_MAX: usize = 1024 * 1024;

/// How many requests' messages the laptop keeps per link. The host only ever names the
/// last one it saw accepted; a few more cover requests that overlap.
pub const BASES_KEPT: usize = 4;

/// The host side: the messages of the last request the laptop accepted on a link.
#[derive(Debug, Default)]
pub struct SentMessages {
    last: Mutex<Option<(String, Arc<Vec<Value>>)>>,
}

impl SentMessages {
    /// The base `messages` can be sent against: the last accepted request, when all its
    /// messages are the start of `messages` and at least one of them is (an empty base
    /// saves nothing).
    pub fn base_for(&self, messages: &[Value]) -> Option<MessagesBase> {
        let last = self.lock();
        let (stream_id, prev) = last.as_ref()?;
        let starts_with = !prev.is_empty()
            && prev.len() <= messages.len()
            && prev.iter().zip(messages).all(|(a, b)| a == b);
        starts_with.then(|| MessagesBase {
            stream_id: stream_id.clone(),
            count: prev.len(),
        })
    }

    /// The laptop accepted the request `stream_id` with all of `messages`.
    pub fn accepted(&self, stream_id: &str, messages: Arc<Vec<Value>>) {
        *self.lock() = Some((stream_id.to_string(), messages));
    }

    /// The laptop stored `messages` as a base named `stream_id` (a
    /// [`ProviderBase`](crate::proto::Request::ProviderBase)): kept unless a request was
    /// accepted meanwhile (that one is the better base).
    pub fn based(&self, stream_id: &str, messages: Arc<Vec<Value>>) {
        let mut last = self.lock();
        if last.is_none() {
            *last = Some((stream_id.to_string(), messages));
        }
    }

    /// Send the next request in full (the laptop did not hold the base).
    pub fn forget(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(String, Arc<Vec<Value>>)>> {
        self.last.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The laptop side: the messages of the last [`BASES_KEPT`] requests of a link.
#[derive(Debug, Default)]
pub struct MessageBases {
    kept: VecDeque<(String, Arc<Vec<Value>>)>,
}

impl MessageBases {
    /// All the messages of a request: those of `base` (when set), then `tail`. `None` when
    /// the base is not held here, or held with another count.
    pub fn resolve(
        &self,
        base: Option<&MessagesBase>,
        tail: Vec<Value>,
    ) -> Option<Arc<Vec<Value>>> {
        let Some(base) = base else {
            return Some(Arc::new(tail));
        };
        let (_, prev) = self
            .kept
            .iter()
            .rev()
            .find(|(id, m)| *id == base.stream_id && m.len() == base.count)?;
        let mut all = Vec::with_capacity(prev.len() + tail.len());
        all.extend(prev.iter().cloned());
        all.extend(tail);
        Some(Arc::new(all))
    }

    /// Keep `messages` as the request `stream_id`'s, dropping the oldest beyond
    /// [`BASES_KEPT`].
    pub fn remember(&mut self, stream_id: &str, messages: Arc<Vec<Value>>) {
        self.kept.retain(|(id, _)| id != stream_id);
        self.kept.push_back((stream_id.to_string(), messages));
        while self.kept.len() > BASES_KEPT {
            self.kept.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msgs(n: usize) -> Vec<Value> {
        (0..n)
            .map(|i| json!({"role": "user", "content": format!("m{i}")}))
            .collect()
    }

    #[test]
    fn a_request_that_extends_the_accepted_one_is_sent_as_its_new_messages() {
        let host = SentMessages::default();
        let mut laptop = MessageBases::default();
        // First request: no base, sent in full.
        let first = msgs(3);
        assert_eq!(host.base_for(&first), None);
        let got = laptop.resolve(None, first.clone()).expect("no base needed");
        laptop.remember("s1", Arc::clone(&got));
        host.accepted("s1", Arc::new(first.clone()));
        // Second: extends the first.
        let second = msgs(5);
        let base = host.base_for(&second).expect("extends the first");
        assert_eq!(
            base,
            MessagesBase {
                stream_id: "s1".into(),
                count: 3
            }
        );
        let tail = second[base.count..].to_vec();
        assert_eq!(tail.len(), 2);
        let got = laptop.resolve(Some(&base), tail).expect("base held");
        assert_eq!(*got, second, "the laptop rebuilds the request exactly");
    }

    #[test]
    fn a_base_handed_over_first_serves_the_first_request_unless_one_was_accepted() {
        let host = SentMessages::default();
        let mut laptop = MessageBases::default();
        laptop.remember("base-1", Arc::new(msgs(3)));
        host.based("base-1", Arc::new(msgs(3)));
        let first = msgs(4);
        let base = host.base_for(&first).expect("the handed base");
        assert_eq!(base.stream_id, "base-1");
        let got = laptop
            .resolve(Some(&base), first[base.count..].to_vec())
            .expect("held");
        assert_eq!(*got, first);
        // A request accepted before the base's answer arrived is the better base.
        let host = SentMessages::default();
        host.accepted("s1", Arc::new(msgs(5)));
        host.based("base-1", Arc::new(msgs(3)));
        assert_eq!(host.base_for(&msgs(6)).expect("s1").stream_id, "s1");
    }

    #[test]
    fn a_rewritten_history_is_sent_in_full() {
        let host = SentMessages::default();
        host.accepted("s1", Arc::new(msgs(4)));
        let mut rewritten = msgs(6);
        rewritten[2] = json!({"role": "user", "content": "summary"});
        assert_eq!(host.base_for(&rewritten), None, "a changed message");
        assert_eq!(host.base_for(&msgs(3)), None, "shorter than the base");
        assert!(
            host.base_for(&msgs(4)).is_some(),
            "same messages (a re-issue)"
        );
        host.forget();
        assert_eq!(host.base_for(&msgs(6)), None, "forgotten");
    }

    #[test]
    fn the_laptop_refuses_a_base_it_does_not_hold() {
        let mut laptop = MessageBases::default();
        laptop.remember("s1", Arc::new(msgs(2)));
        let wrong_count = MessagesBase {
            stream_id: "s1".into(),
            count: 3,
        };
        assert!(laptop.resolve(Some(&wrong_count), msgs(1)).is_none());
        let unknown = MessagesBase {
            stream_id: "nope".into(),
            count: 2,
        };
        assert!(laptop.resolve(Some(&unknown), msgs(1)).is_none());
        // Only the last BASES_KEPT are kept.
        for i in 0..BASES_KEPT {
            laptop.remember(&format!("t{i}"), Arc::new(msgs(1)));
        }
        let evicted = MessagesBase {
            stream_id: "s1".into(),
            count: 2,
        };
        assert!(laptop.resolve(Some(&evicted), msgs(1)).is_none());
        let kept = MessagesBase {
            stream_id: format!("t{}", BASES_KEPT - 1),
            count: 1,
        };
        assert_eq!(laptop.resolve(Some(&kept), msgs(2)).expect("kept").len(), 3);
    }
}
