//! `reasonix rewind` and memory (#32): a rewind to just before turn N offers, like the TUI
//! and ACP, to forget the facts that `remember` calls of turn N and later wrote. Headless
//! there is no one to ask, so the offer is a flag: `--forget-memory` archives them
//! (recoverable with `reasonix memory restore ID`); without it they are kept and listed with
//! the command that forgets them.

use reasonix_forward::memory::rewind::remembered_since;
use reasonix_forward::proto::Event;

use super::access::Access;
use super::command::Stores;
use crate::client::Client;

/// What `reasonix rewind` prints about the facts of the rewound turns (`events`: the
/// session's journal as the host sent it at the open), forgetting them when `forget`;
/// `None` when those turns remembered nothing. The `bool` is true when a forget failed.
pub async fn offer(
    client: &Client,
    home: &std::path::Path,
    events: &[Event],
    to_turn: u64,
    dry_run: bool,
    forget: bool,
) -> Option<(String, bool)> {
    let facts = remembered_since(events, to_turn);
    if facts.is_empty() {
        return None;
    }
    let list = facts.join(", ");
    if dry_run {
        return Some((
            format!(
                "the rewound turns remembered {} fact(s): {list}; --forget-memory would archive them",
                facts.len()
            ),
            false,
        ));
    }
    if !forget {
        return Some((
            format!(
                "the rewound turns remembered {} fact(s), kept: {list}; forget them with `reasonix memory forget ID`, or rewind with --forget-memory",
                facts.len()
            ),
            false,
        ));
    }
    let stores = Stores {
        project: Access::Remote(client.clone()),
        global: Access::Local(super::global_store(home)),
    };
    Some(stores.forget(&facts).await)
}
