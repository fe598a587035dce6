//! The forced rung's promise, in process: a request the compaction ladder cannot bring under
//! the context window is never sent; the turn ends with an error that names the window and
//! what does not fit. And a tool result entering a small window is bounded to an eighth of
//! it, the same way when the journal is replayed.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod turn_support;

use std::sync::Arc;

use reasonix_forward::proto::{ContextSettings, EventKind, TurnOutcome};
use serde_json::json;
use turn_support::{settings, tool_result, Reply, Rig};

/// Tokens of the session's fixed prefix (system prompt, instructions, tool schemas).
fn prefix_tokens(rig: &Rig) -> u64 {
    let r = rig.session.context_report();
    r.system_tokens + r.instructions_tokens + r.tools_tokens
}

#[tokio::test]
async fn a_message_bigger_than_the_window_ends_the_turn_and_nothing_is_sent() {
    let rig = Rig::start(settings(), Vec::new()).await;
    let window = prefix_tokens(&rig) * 2;
    let mut s = settings();
    s.context = ContextSettings {
        window,
        ..ContextSettings::default()
    };
    rig.drive(Arc::clone(&rig.gateway), s);
    // One user message of about the whole window (4 bytes a token).
    rig.submit(&"word ".repeat((window * 4 / 5) as usize));
    let (outcome, detail) = rig.finished(1).await;
    assert_eq!(outcome, TurnOutcome::Failed);
    let detail = detail.unwrap();
    assert!(
        detail.contains(&format!("over the context window of {window} tokens")),
        "{detail}"
    );
    assert!(detail.contains("the largest message is a user"), "{detail}");
    assert!(detail.contains("Nothing was sent"), "{detail}");
    assert!(
        rig.gateway.requests().is_empty(),
        "no request over the window reached the provider"
    );
}

#[tokio::test]
async fn a_result_entering_a_small_window_is_bounded_to_an_eighth_of_it() {
    let rig = Rig::start(settings(), Vec::new()).await;
    let window = prefix_tokens(&rig) * 4;
    let mut s = settings();
    s.context = ContextSettings {
        window,
        ..ContextSettings::default()
    };
    // 64 KiB of text: bounded to about window/8 tokens (bytes at the default 4 a token).
    let text: String = (0..1024)
        .map(|n| format!("line {n:04} of a long file, padded to sixty-four bytes....\n"))
        .collect();
    rig.write("big.txt", &text);
    rig.gateway
        .push(Reply::call("c1", "read_file", json!({"path": "big.txt"})));
    rig.gateway.push(Reply::answer("read"));
    rig.drive(Arc::clone(&rig.gateway), s.clone());
    rig.submit("read big.txt");
    assert_eq!(rig.finished(1).await.0, TurnOutcome::Completed);
    let reqs = rig.gateway.requests();
    let seen = tool_result(&reqs[1].messages, "c1").unwrap().to_string();
    let bound = (window / 8 * 4) as usize;
    assert!(
        seen.len() <= bound + 300 && seen.len() >= bound / 2,
        "{} bytes seen for a bound of {bound}",
        seen.len()
    );
    assert!(
        seen.contains("cut from the middle"),
        "the marker says what was cut"
    );
    let context_bytes = rig
        .events()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::ToolFinished { context_bytes, .. } => context_bytes,
            _ => None,
        })
        .expect("the bound is journaled with the result");
    assert_eq!(context_bytes as usize, bound);
    // A replay of the journal gives the model the same bytes.
    let (copy, copy_gateway) = rig
        .load_copy("s1-copy", s, vec![Reply::answer("again")])
        .await;
    assert!(copy.submit("copy-req", "and again").unwrap());
    copy_gateway.wait_requests(1).await;
    let replayed = copy_gateway.requests().pop().unwrap();
    assert_eq!(tool_result(&replayed.messages, "c1").unwrap(), seen);
}
