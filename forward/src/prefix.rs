//! Provider requests by prefix: a session's model requests extend each other byte for byte
//! (the cache-first rule), so after the first one the host sends only the messages that are
//! new, naming the earlier request they follow and how many of its messages this one starts
//! with ([`MessagesBase`]), and the laptop puts those in front. The bytes on the link per
//! request are then those of the new messages, not of the whole conversation; after a
//! rewrite of the history (a compaction), those from the first rewritten message on.
//!
//! The laptop holds a request's messages as [`SharedMessages`]: runs shared with the bases
//! they came from, so rebuilding a request copies no message.
//!
//! Each side keeps what it needs for one link:
//! - the host, [`SentMessages`]: the messages of the last request the laptop accepted on
//!   this link (it accepts the provider channel only after it stored them);
//! - the laptop, [`MessageBases`]: the messages of its last few requests on this link.
//!
//! A laptop that does not hold the base refuses the request with
//! [`ErrorCode::UnknownMessagesBase`](crate::proto::ErrorCode::UnknownMessagesBase); the host
//! forgets its base and sends the request again in full. Nothing reaches the provider until
//! the laptop has the whole request, so that costs a round trip, never a second model call.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::proto::MessagesBase;
use crate::sync::LockExt;

/// Largest conversation (bytes of JSON messages) the daemon hands the laptop as a base when a
/// link starts to drive a session. It crosses the link at once, before any request, so a
/// client that only looks at a long session over a slow link is not made to wait behind it;
/// a larger conversation's first request goes in full as before.
pub const PROVIDED_BASE_MAX: usize = 1024 * 1024;

/// How many requests' messages the laptop keeps per link. The host only ever names the
/// last one it saw accepted; a few more cover requests that overlap.
pub const BASES_KEPT: usize = 4;

/// Most runs a [`SharedMessages`] keeps before it is copied into one (once every this many
/// requests of a link, so walking the runs stays cheap).
pub const MAX_RUNS: usize = 64;

/// A request's messages, as runs shared with the earlier requests they came from (the first
/// `used` messages of each run, in order). Cloning one, taking a prefix of it or adding the
/// new messages of the next request copies no message.
#[derive(Debug, Clone, Default)]
pub struct SharedMessages {
    runs: Vec<(Arc<Vec<Value>>, usize)>,
    len: usize,
}

impl From<Arc<Vec<Value>>> for SharedMessages {
    fn from(messages: Arc<Vec<Value>>) -> SharedMessages {
        let len = messages.len();
        SharedMessages {
            runs: if len == 0 {
                Vec::new()
            } else {
                vec![(messages, len)]
            },
            len,
        }
    }
}

impl From<Vec<Value>> for SharedMessages {
    fn from(messages: Vec<Value>) -> SharedMessages {
        SharedMessages::default().extended(messages)
    }
}

impl SharedMessages {
    /// How many messages.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No message at all.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The messages in order.
    pub fn iter(&self) -> impl Iterator<Item = &Value> + '_ {
        self.runs.iter().flat_map(|(run, used)| run[..*used].iter())
    }

    /// The first `count` messages; `None` when there are fewer.
    pub fn prefix(&self, count: usize) -> Option<SharedMessages> {
        if count > self.len {
            return None;
        }
        let mut out = SharedMessages::default();
        for (run, used) in &self.runs {
            if out.len == count {
                break;
            }
            let take = (*used).min(count - out.len);
            out.runs.push((Arc::clone(run), take));
            out.len += take;
        }
        Some(out)
    }

    /// These messages, then `tail`. Past [`MAX_RUNS`] runs they are copied into one.
    pub fn extended(mut self, tail: Vec<Value>) -> SharedMessages {
        if !tail.is_empty() {
            let used = tail.len();
            self.len += used;
            self.runs.push((Arc::new(tail), used));
        }
        if self.runs.len() > MAX_RUNS {
            let all: Vec<Value> = self.iter().cloned().collect();
            self.runs = vec![(Arc::new(all), self.len)];
        }
        self
    }

    /// A copy of the messages.
    pub fn to_vec(&self) -> Vec<Value> {
        self.iter().cloned().collect()
    }
}

/// The host side: the messages of the last request the laptop accepted on a link.
#[derive(Debug, Default)]
pub struct SentMessages {
    last: Mutex<Option<(String, Arc<Vec<Value>>)>>,
}

impl SentMessages {
    /// The base `messages` can be sent against: the last accepted request and how many of
    /// its first messages `messages` starts with (all of them when it extends that request;
    /// fewer after a rewrite of the history); `None` when not even the first is shared (a
    /// base of nothing saves nothing).
    pub fn base_for(&self, messages: &[Value]) -> Option<MessagesBase> {
        let last = self.lock();
        let (stream_id, prev) = last.as_ref()?;
        let count = prev
            .iter()
            .zip(messages)
            .take_while(|(a, b)| a == b)
            .count();
        (count > 0).then(|| MessagesBase {
            stream_id: stream_id.clone(),
            count,
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
        self.last.lock_or_recover()
    }
}

/// The laptop side: the messages of the last [`BASES_KEPT`] requests of a link.
#[derive(Debug, Default)]
pub struct MessageBases {
    kept: VecDeque<(String, SharedMessages)>,
}

impl MessageBases {
    /// All the messages of a request: the first `base.count` of `base` (when set), then
    /// `tail`. `None` when the base is not held here, or holds fewer messages.
    pub fn resolve(&self, base: Option<&MessagesBase>, tail: Vec<Value>) -> Option<SharedMessages> {
        let Some(base) = base else {
            return Some(SharedMessages::from(tail));
        };
        let (_, prev) = self
            .kept
            .iter()
            .rev()
            .find(|(id, _)| *id == base.stream_id)?;
        Some(prev.prefix(base.count)?.extended(tail))
    }

    /// Keep `messages` as the request `stream_id`'s, dropping the oldest beyond
    /// [`BASES_KEPT`].
    pub fn remember(&mut self, stream_id: &str, messages: SharedMessages) {
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
        laptop.remember("s1", got.clone());
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
        assert_eq!(
            got.to_vec(),
            second,
            "the laptop rebuilds the request exactly"
        );
    }

    #[test]
    fn a_base_handed_over_first_serves_the_first_request_unless_one_was_accepted() {
        let host = SentMessages::default();
        let mut laptop = MessageBases::default();
        laptop.remember("base-1", SharedMessages::from(msgs(3)));
        host.based("base-1", Arc::new(msgs(3)));
        let first = msgs(4);
        let base = host.base_for(&first).expect("the handed base");
        assert_eq!(base.stream_id, "base-1");
        let got = laptop
            .resolve(Some(&base), first[base.count..].to_vec())
            .expect("held");
        assert_eq!(got.to_vec(), first);
        // A request accepted before the base's answer arrived is the better base.
        let host = SentMessages::default();
        host.accepted("s1", Arc::new(msgs(5)));
        host.based("base-1", Arc::new(msgs(3)));
        assert_eq!(host.base_for(&msgs(6)).expect("s1").stream_id, "s1");
    }

    #[test]
    fn a_rewritten_history_is_sent_from_its_first_changed_message() {
        let host = SentMessages::default();
        let mut laptop = MessageBases::default();
        host.accepted("s1", Arc::new(msgs(4)));
        laptop.remember("s1", SharedMessages::from(msgs(4)));
        // A snip rewrote message 2: the first two are still the base's.
        let mut rewritten = msgs(6);
        rewritten[2] = json!({"role": "tool", "content": "[snipped tool result: 9 bytes]"});
        let base = host.base_for(&rewritten).expect("shares two messages");
        assert_eq!(base.count, 2);
        let got = laptop
            .resolve(Some(&base), rewritten[2..].to_vec())
            .expect("held");
        assert_eq!(got.to_vec(), rewritten);
        // A summary replaced the very first message: nothing is shared.
        let mut summarised = msgs(3);
        summarised[0] = json!({"role": "user", "content": "<compaction-summary>"});
        assert_eq!(host.base_for(&summarised), None, "a base of nothing");
        assert_eq!(host.base_for(&msgs(3)).expect("shorter").count, 3);
        assert_eq!(host.base_for(&msgs(4)).expect("a re-issue").count, 4);
        host.forget();
        assert_eq!(host.base_for(&msgs(6)), None, "forgotten");
    }

    #[test]
    fn shared_messages_copy_nothing_and_keep_their_order() {
        let mut m = SharedMessages::from(msgs(3));
        for i in 3..10 {
            m = m.extended(vec![json!({"role": "user", "content": format!("m{i}")})]);
        }
        assert_eq!(m.to_vec(), msgs(10));
        let first = m.prefix(3).expect("three");
        assert!(
            Arc::ptr_eq(&first.runs[0].0, &m.runs[0].0),
            "a prefix shares the runs"
        );
        assert_eq!(m.prefix(5).expect("five").to_vec(), msgs(5));
        assert_eq!(m.prefix(0).expect("none").len(), 0);
        assert!(m.prefix(11).is_none());
        assert_eq!(m.clone().extended(Vec::new()).len(), 10);
        let handed = Arc::new(msgs(2));
        let held = SharedMessages::from(Arc::clone(&handed));
        assert!(
            Arc::ptr_eq(&held.runs[0].0, &handed),
            "a handed base is not copied"
        );
        assert_eq!(held.to_vec(), msgs(2));
        assert!(SharedMessages::from(Arc::new(Vec::new())).runs.is_empty());
        // Past MAX_RUNS the runs are folded into one, the messages unchanged.
        let mut long = SharedMessages::default();
        for i in 0..=MAX_RUNS {
            long = long.extended(vec![json!({"role": "user", "content": format!("m{i}")})]);
        }
        assert_eq!(long.runs.len(), 1);
        assert_eq!(long.to_vec(), msgs(MAX_RUNS + 1));
    }

    #[test]
    fn the_laptop_refuses_a_base_it_does_not_hold() {
        let mut laptop = MessageBases::default();
        laptop.remember("s1", SharedMessages::from(msgs(2)));
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
            laptop.remember(&format!("t{i}"), SharedMessages::from(msgs(1)));
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
