//! Helpers shared by the link tests.
#![allow(dead_code)]

use std::time::Duration;

use reasonix_forward::proto::{Envelope, Notification};

/// Hang guard for anything that should finish quickly.
pub const GUARD: Duration = Duration::from_secs(20);

/// A numbered notification; `numbered_index` reads the number back.
pub fn numbered(i: u64, pad: usize) -> Envelope {
    Envelope::Notify {
        body: Notification::ToolProgress {
            call_id: i.to_string(),
            message: "x".repeat(pad),
        },
    }
}

/// The number of an envelope made by [`numbered`].
pub fn numbered_index(e: &Envelope) -> u64 {
    match e {
        Envelope::Notify {
            body: Notification::ToolProgress { call_id, .. },
        } => call_id.parse().expect("numbered envelope"),
        other => panic!("not a numbered envelope: {other:?}"),
    }
}

/// Run `f` with the hang guard.
pub async fn guard<F: std::future::Future>(what: &str, f: F) -> F::Output {
    match tokio::time::timeout(GUARD, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out: {what}"),
    }
}
