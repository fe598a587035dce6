//! Early data on channels (`Channels::open_eager`): the opener sends before the answer to
//! its open, within `EARLY_WINDOW`, when the link's peer said it takes that; a refusal ends
//! the channel with the reason; a peer that predates early data gets a plain open. The
//! random cuts of `channels.rs` cover early data across drops.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::guard;
use reasonix_forward::channel::{
    ChannelAccepted, ChannelData, ChannelEnd, ChannelError, ChannelOpen, IncomingChannel, Side,
    EARLY_WINDOW,
};
use reasonix_forward::link::{Link, LinkConfig};
use reasonix_forward::proto::{ErrorCode, PtyBytes, RpcError};
use reasonix_forward::rpc::{CallError, Incoming, Rpc};
use reasonix_forward::testing::connect;
use tokio::sync::mpsc;

struct Ends {
    a: Rpc,
    b: Rpc,
    a_link: Link,
    b_link: Link,
    /// Channels A opened, arriving at B.
    at_b: mpsc::UnboundedReceiver<IncomingChannel>,
}

fn channels_of(mut incoming: mpsc::Receiver<Incoming>) -> mpsc::UnboundedReceiver<IncomingChannel> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(msg) = incoming.recv().await {
            if let Incoming::Channel(c) = msg {
                let _ = tx.send(c);
            }
        }
    });
    rx
}

/// Two linked ends; `early`: each peer takes early data (both, as the product negotiates).
fn ends(early: bool) -> Ends {
    let (a_link, a_in) = Link::new(LinkConfig::default());
    let (b_link, b_in) = Link::new(LinkConfig::default());
    if early {
        a_link.enable_early_data();
        b_link.enable_early_data();
    }
    let (a, _a_incoming) = Rpc::new(a_link.clone(), a_in, Side::Client);
    let (b, b_incoming) = Rpc::new(b_link.clone(), b_in, Side::Server);
    Ends {
        at_b: channels_of(b_incoming),
        a,
        b,
        a_link,
        b_link,
    }
}

fn kind(label: &str) -> ChannelOpen {
    ChannelOpen::Mcp {
        server: label.into(),
    }
}

fn byte_at(k: u64) -> u8 {
    (k.wrapping_mul(31) % 251) as u8
}

fn piece(from: u64, len: usize) -> ChannelData {
    ChannelData::Bytes {
        data: PtyBytes((0..len as u64).map(|i| byte_at(from + i)).collect()),
    }
}

/// Before any answer: the opener's whole early window goes out (four pieces costing a
/// quarter each), the next piece (a big one, which waits for the answer anyway) does not;
/// after the acceptor takes the channel, with a window smaller than the early one (raised
/// to it), every byte arrives in order and the big piece follows under the normal credit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_data_crosses_before_the_answer_in_order_within_the_early_window() {
    let mut e = ends(true);
    let _conn = connect(&e.a_link, &e.b_link);
    let (ch, answer) = guard(
        "open returns at once",
        e.a.open_channel_eager(kind("early"), 4096),
    )
    .await
    .unwrap();
    let quarter = (EARLY_WINDOW / 4 - 1) as usize;
    let mut at = 0u64;
    for _ in 0..4 {
        guard(
            "early pieces need no answer",
            ch.tx.send(piece(at, quarter)),
        )
        .await
        .unwrap();
        at += quarter as u64;
    }
    assert_eq!(ch.tx.credit(), 0, "the early window is spent");
    let big = EARLY_WINDOW as usize / 2 + 10;
    let tx = ch.tx;
    let late = tokio::spawn(async move {
        tx.send(piece(at, big)).await.unwrap();
        tx.close(None).await;
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !late.is_finished(),
        "a piece beyond the early window went before the answer"
    );
    let offer = guard("the open arrives", e.at_b.recv()).await.unwrap();
    assert_eq!(offer.open, kind("early"));
    let mut at_b = offer
        .offer
        .accept(ChannelAccepted::Mcp, 1000)
        .await
        .unwrap();
    assert_eq!(
        guard("answer", answer.wait()).await.unwrap(),
        ChannelAccepted::Mcp
    );
    let mut got = Vec::new();
    while let Some(d) = guard("receive", at_b.rx.recv()).await {
        match d {
            ChannelData::Bytes { data } => got.extend_from_slice(&data.0),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(at_b.rx.end(), Some(&ChannelEnd::Closed(None)));
    let total = 4 * quarter + big;
    assert_eq!(got.len(), total);
    assert!(got.iter().enumerate().all(|(k, b)| *b == byte_at(k as u64)));
    guard("late piece", late).await.unwrap();
    assert_eq!(e.b.channels().count(), 1, "A's direction is still open");
}

/// A refused eager open: the opener's receiver ends with the refusal's reason, its sender
/// stops, the answer is the refusal, and the acceptor keeps nothing of what came early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_eager_open_ends_the_channel_with_the_reason() {
    let mut e = ends(true);
    let _conn = connect(&e.a_link, &e.b_link);
    let (mut ch, answer) = e.a.open_channel_eager(kind("nothing"), 4096).await.unwrap();
    ch.tx.send(piece(0, 100)).await.unwrap();
    let offer = guard("the open arrives", e.at_b.recv()).await.unwrap();
    offer
        .offer
        .refuse(RpcError::new(ErrorCode::NotFound, "nothing answers there"))
        .await;
    assert!(guard("receiver ends", ch.rx.recv()).await.is_none());
    assert_eq!(
        ch.rx.end(),
        Some(&ChannelEnd::CancelledByPeer("nothing answers there".into()))
    );
    match guard("answer", answer.wait()).await {
        Err(CallError::Remote(r)) => assert_eq!(r.code, ErrorCode::NotFound),
        other => panic!("{other:?}"),
    }
    match ch.tx.send(piece(100, 10)).await {
        Err(ChannelError::Ended(ChannelEnd::CancelledByPeer(r))) => {
            assert_eq!(r, "nothing answers there")
        }
        other => panic!("{other:?}"),
    }
    ch.tx.send(piece(0, 1)).await.unwrap_err();
    assert_eq!(e.a.channels().count(), 0);
    assert_eq!(e.b.channels().count(), 0);
}

/// A peer that did not say it takes early data: `open_eager` waits for the answer like
/// `open`, and a refusal is its error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_early_data_an_eager_open_waits_for_the_answer() {
    let mut e = ends(false);
    let _conn = connect(&e.a_link, &e.b_link);
    let a = e.a.clone();
    let open = tokio::spawn(async move { a.open_channel_eager(kind("plain"), 4096).await });
    let offer = guard("the open arrives", e.at_b.recv()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!open.is_finished(), "returned before the answer");
    let mut at_b = offer
        .offer
        .accept(ChannelAccepted::Mcp, 1000)
        .await
        .unwrap();
    let (ch, answer) = guard("opened", open).await.unwrap().unwrap();
    assert_eq!(answer.wait().await.unwrap(), ChannelAccepted::Mcp);
    assert_eq!(
        ch.tx.credit(),
        1000,
        "the acceptor's own window, not the early one"
    );
    ch.tx.send(piece(0, 10)).await.unwrap();
    assert!(guard("data", at_b.rx.recv()).await.is_some());

    let a = e.a.clone();
    let open = tokio::spawn(async move { a.open_channel_eager(kind("refused"), 4096).await });
    let offer = guard("the open arrives", e.at_b.recv()).await.unwrap();
    offer
        .offer
        .refuse(RpcError::new(ErrorCode::NotFound, "no"))
        .await;
    match guard("refused", open).await.unwrap() {
        Err(CallError::Remote(r)) => assert_eq!(r.code, ErrorCode::NotFound),
        other => panic!("{other:?}"),
    }
}

/// An eager opener that gives up before the acceptor took the channel (a forwarded
/// connection whose wait for the host ran out): the late acceptor's channel is ended with
/// the reason and hands over nothing of what came early, and nothing is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_data_of_a_channel_cancelled_before_the_answer_is_dropped() {
    let mut e = ends(true);
    let _conn = connect(&e.a_link, &e.b_link);
    let (ch, _answer) = e.a.open_channel_eager(kind("gave-up"), 4096).await.unwrap();
    ch.tx.send(piece(0, 100)).await.unwrap();
    let offer = guard("the open arrives", e.at_b.recv()).await.unwrap();
    assert!(ch.tx.handle().cancel("waited too long"));
    wait_until_gone(&e.b).await;
    let mut late = offer
        .offer
        .accept(ChannelAccepted::Mcp, 1000)
        .await
        .unwrap();
    assert!(
        guard("ended", late.rx.recv()).await.is_none(),
        "early data was handed over"
    );
    assert_eq!(
        late.rx.end(),
        Some(&ChannelEnd::CancelledByPeer("waited too long".into()))
    );
    assert_eq!(e.a.channels().count(), 0);
}

async fn wait_until_gone(rpc: &Rpc) {
    guard("the cancel arrives", async {
        while rpc.channels().count() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}
