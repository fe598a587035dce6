//! The channel primitive over the in-memory transport: credit backpressure, ordering,
//! half-close, cancel, many channels without head-of-line blocking, and exactly-once
//! delivery across random cuts, stalls and blackholes.
//!
//! The channels here are opened with the MCP kind only because a channel needs a kind; the
//! primitive does not look at it, and the pieces are raw bytes. `REASONIX_CHANNEL_ITERS`
//! overrides the number of random scenarios (default 150), `REASONIX_CHANNEL_SEED` the
//! first seed.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::guard;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reasonix_forward::channel::{
    Channel, ChannelAccepted, ChannelData, ChannelEnd, ChannelError, ChannelMsg, ChannelOpen,
    IncomingChannel, Side,
};
use reasonix_forward::link::{Link, LinkConfig};
use reasonix_forward::proto::{Envelope, ErrorCode, PtyBytes, Request, Response, RpcError};
use reasonix_forward::rpc::{CallError, Incoming, Rpc};
use reasonix_forward::testing::{connect, connect_with_capacity};
use tokio::sync::mpsc;

/// Both ends of a link: RPCs, links, and the channels each side's peer opens.
struct Ends {
    a: Rpc,
    b: Rpc,
    a_link: Link,
    b_link: Link,
    /// Channels B opened, arriving at A.
    at_a: mpsc::UnboundedReceiver<IncomingChannel>,
    /// Channels A opened, arriving at B.
    at_b: mpsc::UnboundedReceiver<IncomingChannel>,
}

/// Serve `incoming`: requests are answered `Ok`, channels go to the test.
fn serve(
    rpc: Rpc,
    mut incoming: mpsc::Receiver<Incoming>,
) -> mpsc::UnboundedReceiver<IncomingChannel> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(msg) = incoming.recv().await {
            match msg {
                Incoming::Request { id, .. } => {
                    let rpc = rpc.clone();
                    tokio::spawn(async move {
                        let _ = rpc.respond(id, Ok(Response::Ok)).await;
                    });
                }
                Incoming::Notify(_) => {}
                Incoming::Channel(c) => {
                    let _ = tx.send(c);
                }
            }
        }
    });
    rx
}

fn ends(config: LinkConfig) -> Ends {
    let (a_link, a_in) = Link::new(config.clone());
    let (b_link, b_in) = Link::new(config);
    let (a, a_incoming) = Rpc::new(a_link.clone(), a_in, Side::Client);
    let (b, b_incoming) = Rpc::new(b_link.clone(), b_in, Side::Server);
    Ends {
        at_a: serve(a.clone(), a_incoming),
        at_b: serve(b.clone(), b_incoming),
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

/// Byte `k` of channel `tag`'s stream: every byte is checkable where it lands.
fn byte_at(tag: u64, k: u64) -> u8 {
    (k.wrapping_mul(31).wrapping_add(tag.wrapping_mul(7)) % 251) as u8
}

fn piece(tag: u64, from: u64, len: usize) -> ChannelData {
    ChannelData::Bytes {
        data: PtyBytes((0..len as u64).map(|i| byte_at(tag, from + i)).collect()),
    }
}

fn bytes_of(d: ChannelData) -> Vec<u8> {
    match d {
        ChannelData::Bytes { data } => data.0,
        other => panic!("not bytes: {other:?}"),
    }
}

/// Open a channel from `opener` and accept it on the other side with `window` each way.
async fn open_pair(
    opener: &Rpc,
    arrivals: &mut mpsc::UnboundedReceiver<IncomingChannel>,
    label: &str,
    opener_window: u32,
    acceptor_window: u32,
) -> (Channel, Channel) {
    let open = opener.open_channel(kind(label), opener_window);
    let accept = async {
        let c = arrivals.recv().await.expect("an incoming channel");
        assert_eq!(c.open, kind(label));
        c.offer
            .accept(ChannelAccepted::Mcp, acceptor_window)
            .await
            .unwrap()
    };
    let (opened, accepted) = guard("open", async { tokio::join!(open, accept) }).await;
    let (answer, opened) = opened.unwrap();
    assert_eq!(answer, ChannelAccepted::Mcp);
    (opened, accepted)
}

async fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    guard(what, async {
        while !f() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pieces_arrive_in_order_and_half_close_leaves_the_other_direction_open() {
    let mut e = ends(LinkConfig::default());
    let _conn = connect(&e.a_link, &e.b_link);
    let (at_a, mut at_b) = open_pair(&e.a, &mut e.at_b, "order", 4096, 4096).await;
    let sizes: Vec<usize> = (0..500).map(|i| (i * 37) % 300).collect();
    let total: u64 = sizes.iter().map(|s| *s as u64).sum();
    let Channel {
        tx: a_tx,
        rx: mut a_rx,
    } = at_a;
    // A sends everything and half-closes with a reason; windows of 4 KiB make it wait for
    // credit many times.
    let sender = tokio::spawn(async move {
        let mut at = 0u64;
        for s in sizes {
            a_tx.send(piece(1, at, s)).await.unwrap();
            at += s as u64;
        }
        a_tx.close(Some("all sent".into())).await;
    });
    let mut got = Vec::new();
    while let Some(d) = guard("a piece", at_b.rx.recv()).await {
        got.extend(bytes_of(d));
    }
    assert_eq!(
        at_b.rx.end(),
        Some(&ChannelEnd::Closed(Some("all sent".into())))
    );
    assert_eq!(got.len() as u64, total);
    assert!(got
        .iter()
        .enumerate()
        .all(|(k, b)| *b == byte_at(1, k as u64)));
    sender.await.unwrap();
    // B still sends after A closed its direction; then B closes too and the channel is gone
    // on both sides.
    at_b.tx.send(piece(2, 0, 10)).await.unwrap();
    at_b.tx.close(None).await;
    assert_eq!(
        bytes_of(guard("reply", a_rx.recv()).await.unwrap()),
        bytes_of(piece(2, 0, 10))
    );
    assert!(guard("reply end", a_rx.recv()).await.is_none());
    assert_eq!(a_rx.end(), Some(&ChannelEnd::Closed(None)));
    drop(at_b.rx);
    drop(a_rx);
    wait_until("both tables empty", || {
        e.a.channels().count() == 0 && e.b.channels().count() == 0
    })
    .await;
}

/// A reader that does not read holds its writer at the window: the writer waits, nothing
/// is dropped, and credit flows back as the reader catches up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_stalls_the_writer_at_the_window_and_nothing_is_lost() {
    const WINDOW: u32 = 10_000;
    const PIECE: usize = 99; // costs 100
    const PIECES: u64 = 1000; // ten windows
    let mut e = ends(LinkConfig::default());
    let _conn = connect(&e.a_link, &e.b_link);
    let (at_a, mut at_b) = open_pair(&e.a, &mut e.at_b, "slow", WINDOW, WINDOW).await;
    let sent = Arc::new(AtomicU64::new(0));
    let tx = at_a.tx;
    let counted = Arc::clone(&sent);
    let writer = tokio::spawn(async move {
        for i in 0..PIECES {
            tx.send(piece(3, i * PIECE as u64, PIECE)).await.unwrap();
            counted.fetch_add(1, Ordering::SeqCst);
        }
        tx
    });
    // Nothing is read: the writer stops after exactly one window's worth.
    wait_until("the window fills", || {
        sent.load(Ordering::SeqCst) == u64::from(WINDOW) / 100
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        sent.load(Ordering::SeqCst),
        u64::from(WINDOW) / 100,
        "the writer went past the window"
    );
    assert!(!writer.is_finished());
    // Reading less than half a window grants nothing yet; reading half of it lets the
    // writer go on by that much.
    for _ in 0..49 {
        guard("read", at_b.rx.recv()).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        sent.load(Ordering::SeqCst),
        100,
        "credit came back before half a window"
    );
    guard("read", at_b.rx.recv()).await.unwrap();
    wait_until("credit comes back", || sent.load(Ordering::SeqCst) == 150).await;
    // The rest, in order, all of it.
    let mut got = 50u64;
    while got < PIECES {
        let d = bytes_of(guard("read", at_b.rx.recv()).await.unwrap());
        assert_eq!(
            d,
            bytes_of(piece(3, got * PIECE as u64, PIECE)),
            "piece {got}"
        );
        got += 1;
    }
    let tx = guard("writer", writer).await.unwrap();
    drop(tx);
    assert!(guard("end", at_b.rx.recv()).await.is_none());
    assert_eq!(at_b.rx.end(), Some(&ChannelEnd::Closed(None)));
}

/// One channel whose reader stopped holds up no other channel (sixteen busy ones, both
/// ways) and no request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_channel_does_not_stall_the_others() {
    const WINDOW: u32 = 64 * 1024;
    let mut e = ends(LinkConfig::default());
    let _conn = connect(&e.a_link, &e.b_link);
    let (stalled_a, mut stalled_b) = open_pair(&e.a, &mut e.at_b, "stalled", WINDOW, WINDOW).await;
    let stalled_sent = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&stalled_sent);
    let stalled_tx = stalled_a.tx;
    let stalled_writer = tokio::spawn(async move {
        for i in 0..256u64 {
            stalled_tx.send(piece(4, i * 4096, 4096)).await.unwrap();
            counted.fetch_add(4096, Ordering::SeqCst);
        }
        stalled_tx.close(None).await;
    });
    wait_until("the stalled channel fills its window", || {
        stalled_sent.load(Ordering::SeqCst) >= u64::from(WINDOW) - 4096
    })
    .await;
    // Sixteen other channels, both ways, each moving 1 MiB (16 windows) at the same time,
    // read as it comes.
    let mut busy = Vec::new();
    for k in 0..16u64 {
        let (opener, arrivals) = if k % 2 == 0 {
            (&e.a, &mut e.at_b)
        } else {
            (&e.b, &mut e.at_a)
        };
        let (from, to) = open_pair(opener, arrivals, &format!("busy-{k}"), WINDOW, WINDOW).await;
        let tag = 100 + k;
        let Channel { tx, rx: mut back } = from;
        busy.push(tokio::spawn(async move {
            for i in 0..256u64 {
                tx.send(piece(tag, i * 4096, 4096)).await.unwrap();
            }
            tx.close(None).await;
            // Nothing comes back: the other side's sender is dropped (a close). Kept until
            // then, since dropping a receiver before the other side finished cancels.
            assert!(back.recv().await.is_none());
            assert_eq!(back.end(), Some(&ChannelEnd::Closed(None)));
        }));
        let Channel { mut rx, tx: _ } = to;
        busy.push(tokio::spawn(async move {
            let mut at = 0u64;
            while let Some(d) = rx.recv().await {
                let d = bytes_of(d);
                assert_eq!(d, bytes_of(piece(tag, at, d.len())), "channel {tag}");
                at += d.len() as u64;
            }
            assert_eq!(at, 256 * 4096, "channel {tag}");
        }));
    }
    for t in busy {
        guard("the busy channels", t).await.unwrap();
    }
    // A request goes through too.
    assert!(matches!(
        guard("request", e.a.request(Request::Status)).await,
        Ok(Response::Ok)
    ));
    // The stalled writer is still held at its window, and loses nothing once read.
    assert!(!stalled_writer.is_finished());
    assert!(stalled_sent.load(Ordering::SeqCst) <= u64::from(WINDOW));
    let mut at = 0u64;
    while let Some(d) = guard("the stalled channel", stalled_b.rx.recv()).await {
        let d = bytes_of(d);
        assert_eq!(d, bytes_of(piece(4, at, d.len())));
        at += d.len() as u64;
    }
    assert_eq!(at, 256 * 4096);
    guard("stalled writer", stalled_writer).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_both_directions_and_tells_the_other_side_why() {
    let mut e = ends(LinkConfig::default());
    let _conn = connect(&e.a_link, &e.b_link);
    // Cancelled by the acceptor through a handle: the opener's sender fails and its
    // `stopped` resolves; its receiver ends after what arrived before.
    let (at_a, mut at_b) = open_pair(&e.a, &mut e.at_b, "cancel", 1024, 1024).await;
    at_b.tx.send(piece(6, 0, 5)).await.unwrap();
    assert!(at_b.rx.handle().cancel("no longer wanted"));
    assert!(
        !at_b.rx.handle().cancel("twice"),
        "a second cancel is a no-op"
    );
    let Channel {
        tx: a_tx,
        rx: mut a_rx,
    } = at_a;
    let why = guard("stopped", a_tx.stopped()).await;
    assert_eq!(why, ChannelEnd::CancelledByPeer("no longer wanted".into()));
    match a_tx.send(piece(6, 0, 1)).await {
        Err(ChannelError::Ended(ChannelEnd::CancelledByPeer(r))) => {
            assert_eq!(r, "no longer wanted")
        }
        other => panic!("send after cancel: {other:?}"),
    }
    assert_eq!(
        bytes_of(guard("before", a_rx.recv()).await.unwrap()),
        bytes_of(piece(6, 0, 5))
    );
    assert!(a_rx.recv().await.is_none());
    assert_eq!(
        a_rx.end(),
        Some(&ChannelEnd::CancelledByPeer("no longer wanted".into()))
    );
    assert!(at_b.rx.recv().await.is_none());
    assert_eq!(
        at_b.rx.end(),
        Some(&ChannelEnd::Cancelled("no longer wanted".into()))
    );

    // Dropping a receiver before the end cancels too.
    let (at_a, at_b) = open_pair(&e.a, &mut e.at_b, "dropped", 1024, 1024).await;
    drop(at_b.rx);
    let why = guard("stopped", at_a.tx.stopped()).await;
    assert!(matches!(why, ChannelEnd::CancelledByPeer(r) if r.contains("stopped reading")));

    // A refusal reaches the opener with its code; an offer dropped unanswered is refused.
    let open = e.a.open_channel(kind("refused"), 1024);
    let refuse = async {
        let c = e.at_b.recv().await.unwrap();
        c.offer
            .refuse(RpcError::new(ErrorCode::NotFound, "no such thing"))
            .await;
    };
    let (opened, ()) = guard("refuse", async { tokio::join!(open, refuse) }).await;
    match opened {
        Err(CallError::Remote(e)) => {
            assert_eq!(
                (e.code, e.message.as_str()),
                (ErrorCode::NotFound, "no such thing")
            )
        }
        other => panic!("{other:?}"),
    }
    let open = e.a.open_channel(kind("ignored"), 1024);
    let ignore = async { drop(e.at_b.recv().await.unwrap()) };
    let (opened, ()) = guard("ignore", async { tokio::join!(open, ignore) }).await;
    assert!(matches!(opened, Err(CallError::Remote(e)) if e.code == ErrorCode::BadRequest));

    // An opener that stops waiting cancels: the acceptor's late channel is ended.
    let waiting = tokio::spawn({
        let a = e.a.clone();
        async move { a.open_channel(kind("abandoned"), 1024).await }
    });
    let c = guard("offer", e.at_b.recv()).await.unwrap();
    waiting.abort();
    let _ = waiting.await;
    wait_until("the opener forgot it", || e.a.channels().count() == 0).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut late = c.offer.accept(ChannelAccepted::Mcp, 1024).await.unwrap();
    assert!(guard("late end", late.rx.recv()).await.is_none());
    assert!(matches!(
        late.rx.end(),
        Some(ChannelEnd::CancelledByPeer(_))
    ));
    wait_until("both tables empty", || {
        e.a.channels().count() == 0 && e.b.channels().count() == 0
    })
    .await;
}

/// A peer that sends without credit has its channel cancelled, naming the window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_overruns_the_window_is_cut_off() {
    let mut e = ends(LinkConfig::default());
    let _conn = connect(&e.a_link, &e.b_link);
    let (mut at_a, at_b) = open_pair(&e.a, &mut e.at_b, "overrun", 1000, 1000).await;
    // B's id for the channel is A's: the first odd one. Send 3 × 400 (costing 401 each, the
    // cap is 500) straight onto the link, as a peer ignoring credit would.
    for k in 0..3u64 {
        let msg = ChannelMsg::Data {
            ch: 1,
            data: piece(7, k * 400, 400),
        };
        e.b_link.send(Envelope::Channel(msg)).await.unwrap();
    }
    // Nothing is read meanwhile (reading would grant credit back): the third piece finds
    // the window spent.
    wait_until("the channel is cancelled", || e.a.channels().count() == 0).await;
    let mut pieces = 0;
    while guard("overrun", at_a.rx.recv()).await.is_some() {
        pieces += 1;
    }
    assert_eq!(pieces, 2, "what fit the window was delivered");
    match at_a.rx.end() {
        Some(ChannelEnd::Cancelled(r)) => {
            assert!(
                r.contains("without waiting for credit") && r.contains("1000"),
                "{r}"
            )
        }
        other => panic!("{other:?}"),
    }
    let why = guard("peer hears it", at_b.tx.stopped()).await;
    assert!(matches!(why, ChannelEnd::CancelledByPeer(r) if r.contains("credit")));
}

/// Closing the link ends every channel and refuses new ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_link_ends_every_channel() {
    let mut e = ends(LinkConfig::default());
    let _conn = connect(&e.a_link, &e.b_link);
    let (mut at_a, mut at_b) = open_pair(&e.a, &mut e.at_b, "one", 1024, 1024).await;
    e.a_link.close();
    assert!(guard("a end", at_a.rx.recv()).await.is_none());
    assert_eq!(at_a.rx.end(), Some(&ChannelEnd::LinkClosed));
    assert!(guard("b end", at_b.rx.recv()).await.is_none());
    assert_eq!(at_b.rx.end(), Some(&ChannelEnd::LinkClosed));
    assert!(matches!(
        at_a.tx.send(piece(8, 0, 1)).await,
        Err(ChannelError::Ended(ChannelEnd::LinkClosed))
    ));
    assert!(matches!(
        e.a.open_channel(kind("late"), 1024).await,
        Err(CallError::Link(_))
    ));
    assert_eq!(e.a.channels().count(), 0);
    assert_eq!(e.b.channels().count(), 0);
}

// ---- exactly once across random faults ----

#[derive(Debug, Clone, Copy)]
enum Fault {
    CutAfterBytes(u64),
    CutAfterMicros(u64),
    StallThenCut(u64),
    BlackholeThenCut(u64),
}

fn random_fault(rng: &mut StdRng) -> Fault {
    match rng.gen_range(0..10) {
        0..=4 => Fault::CutAfterBytes(rng.gen_range(0..20_000)),
        5..=6 => Fault::CutAfterMicros(rng.gen_range(0..5_000)),
        7..=8 => Fault::StallThenCut(rng.gen_range(0..3_000)),
        _ => Fault::BlackholeThenCut(rng.gen_range(0..3_000)),
    }
}

/// One channel's plan: who opens it, the windows, what each side sends.
#[derive(Debug, Clone)]
struct Plan {
    tag: u64,
    from_a: bool,
    opener_window: u32,
    acceptor_window: u32,
    /// Piece sizes the opener sends, then the acceptor's.
    opener_pieces: Vec<usize>,
    acceptor_pieces: Vec<usize>,
    /// Microseconds the opener's reader sleeps between pieces (a slow consumer).
    slow_reader_us: u64,
    /// Opened with `open_eager` (early data when the link's peer takes it).
    eager: bool,
}

/// Send `pieces` of `tag`'s stream, then half-close.
async fn send_all(tx: reasonix_forward::channel::ChannelSender, tag: u64, pieces: Vec<usize>) {
    let mut at = 0u64;
    for s in pieces {
        tx.send(piece(tag, at, s)).await.expect("send");
        at += s as u64;
    }
    tx.close(None).await;
}

/// Read to the end and check every byte of `tag`'s stream arrived once, in order.
async fn check_all(
    mut rx: reasonix_forward::channel::ChannelReceiver,
    tag: u64,
    expected: u64,
    slow_us: u64,
    seed: u64,
) {
    let mut at = 0u64;
    while let Some(d) = rx.recv().await {
        let d = bytes_of(d);
        for (i, b) in d.iter().enumerate() {
            assert_eq!(
                *b,
                byte_at(tag, at + i as u64),
                "seed {seed}: channel {tag} byte {}",
                at + i as u64
            );
        }
        at += d.len() as u64;
        if slow_us > 0 {
            tokio::time::sleep(Duration::from_micros(slow_us)).await;
        }
    }
    assert_eq!(at, expected, "seed {seed}: channel {tag} length");
    assert_eq!(
        rx.end(),
        Some(&ChannelEnd::Closed(None)),
        "seed {seed}: channel {tag}"
    );
}

fn plan(rng: &mut StdRng, tag: u64) -> Plan {
    let mut window = || {
        if rng.gen_bool(0.3) {
            rng.gen_range(16..512)
        } else {
            rng.gen_range(2048..65536)
        }
    };
    let (opener_window, acceptor_window) = (window(), window());
    let mut pieces = || -> Vec<usize> {
        let n = rng.gen_range(0..60);
        (0..n)
            .map(|_| {
                if rng.gen_bool(0.1) {
                    rng.gen_range(1000..30_000)
                } else {
                    rng.gen_range(0..300)
                }
            })
            .collect()
    };
    let (opener_pieces, acceptor_pieces) = (pieces(), pieces());
    Plan {
        tag,
        from_a: rng.gen_bool(0.5),
        opener_window,
        acceptor_window,
        opener_pieces,
        acceptor_pieces,
        slow_reader_us: if rng.gen_bool(0.2) {
            rng.gen_range(10..300)
        } else {
            0
        },
        eager: rng.gen_bool(0.5),
    }
}

/// Returns the data frames resent after a cut (both sides).
async fn one_scenario(seed: u64) -> u64 {
    let mut rng = StdRng::seed_from_u64(seed);
    let replay_limit = if rng.gen_bool(0.3) {
        rng.gen_range(2_000..50_000)
    } else {
        64 * 1024 * 1024
    };
    let config = LinkConfig {
        replay_limit_bytes: replay_limit,
        ..LinkConfig::default()
    };
    let e = ends(config);
    // Channel bytes as raw `Bytes` frames on either side, both, or neither (JSON with base64,
    // what a peer that predates them gets): the same exactly-once either way.
    let raw = (rng.gen_bool(0.5), rng.gen_bool(0.5));
    if raw.0 {
        e.a_link.enable_bytes_frames();
    }
    if raw.1 {
        e.b_link.enable_bytes_frames();
    }
    // Early data (data before the open's answer), as the handshake negotiates it: both
    // sides or neither; eager openers send it when they may.
    let early = rng.gen_bool(0.5);
    if early {
        e.a_link.enable_early_data();
        e.b_link.enable_early_data();
    }
    let plans: Vec<Plan> = (0..rng.gen_range(1..7))
        .map(|t| plan(&mut rng, t + 1))
        .collect();
    let trace = format!(
        "seed {seed}: limit {replay_limit}, raw bytes {raw:?}, early data {early:?}, plans {plans:?}"
    );
    // Each side accepts what the other opens, finding the plan by the label; `accepted`
    // counts the accepting sides that checked everything.
    let accepted = Arc::new(tokio::sync::watch::channel(0usize).0);
    let mut acceptors = Vec::new();
    for mut arrivals in [e.at_b, e.at_a] {
        let plans = plans.clone();
        let accepted = Arc::clone(&accepted);
        acceptors.push(tokio::spawn(async move {
            while let Some(c) = arrivals.recv().await {
                let ChannelOpen::Mcp { server } = &c.open else {
                    panic!("unexpected kind")
                };
                let tag: u64 = server.trim_start_matches("plan-").parse().unwrap();
                let p = plans.iter().find(|p| p.tag == tag).unwrap().clone();
                let ch = c
                    .offer
                    .accept(ChannelAccepted::Mcp, p.acceptor_window)
                    .await
                    .unwrap();
                let expected: u64 = p.opener_pieces.iter().map(|s| *s as u64).sum();
                let accepted = Arc::clone(&accepted);
                tokio::spawn(async move {
                    let send = tokio::spawn(send_all(ch.tx, tag + 1000, p.acceptor_pieces));
                    check_all(ch.rx, tag, expected, 0, seed).await;
                    send.await.unwrap();
                    accepted.send_modify(|n| *n += 1);
                });
            }
        }));
    }
    let mut openers = Vec::new();
    for p in plans.clone() {
        let rpc = if p.from_a { e.a.clone() } else { e.b.clone() };
        openers.push(tokio::spawn(async move {
            let label = kind(&format!("plan-{}", p.tag));
            let ch = if p.eager {
                let (ch, answer) = rpc
                    .open_channel_eager(label, p.opener_window)
                    .await
                    .expect("open");
                tokio::spawn(async move { answer.wait().await.expect("accepted") });
                ch
            } else {
                rpc.open_channel(label, p.opener_window)
                    .await
                    .expect("open")
                    .1
            };
            let expected: u64 = p.acceptor_pieces.iter().map(|s| *s as u64).sum();
            let send = tokio::spawn(send_all(ch.tx, p.tag, p.opener_pieces));
            check_all(ch.rx, p.tag + 1000, expected, p.slow_reader_us, seed).await;
            send.await.unwrap();
        }));
    }
    let n_plans = plans.len();
    let mut accepted_rx = accepted.subscribe();
    let all_done = async {
        for o in openers {
            o.await.unwrap();
        }
        let _ = accepted_rx.wait_for(|n| *n == n_plans).await;
    };
    tokio::pin!(all_done);
    let mut faults: u32 = rng.gen_range(0..8);
    loop {
        let conn = connect_with_capacity(&e.a_link, &e.b_link, rng.gen_range(64..16_384));
        let control = conn.control.clone();
        let fault = (faults > 0).then(|| random_fault(&mut rng));
        faults = faults.saturating_sub(1);
        let wait = match fault {
            Some(Fault::CutAfterBytes(n)) => {
                control.cut_after(n);
                Duration::from_millis(30)
            }
            Some(Fault::CutAfterMicros(us)) => Duration::from_micros(us),
            Some(Fault::StallThenCut(us)) => {
                let c = control.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_micros(us)).await;
                    c.stall();
                });
                Duration::from_micros(us * 2)
            }
            Some(Fault::BlackholeThenCut(us)) => {
                let c = control.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_micros(us)).await;
                    c.blackhole();
                });
                Duration::from_micros(us * 2)
            }
            None => Duration::from_secs(15),
        };
        let finished = tokio::select! {
            _ = &mut all_done => true,
            _ = tokio::time::sleep(wait) => false,
        };
        if finished {
            e.a_link.close();
            e.b_link.close();
            conn.cut_and_join().await;
            break;
        }
        assert!(
            fault.is_some(),
            "{trace}: no progress for 15 s on a healthy transport"
        );
        conn.cut_and_join().await;
    }
    for t in acceptors {
        t.await.unwrap_or_else(|err| panic!("{trace}: {err}"));
    }
    assert_eq!(
        e.a.channels().count() + e.b.channels().count(),
        0,
        "{trace}"
    );
    e.a_link.stats().resent_frames + e.b_link.stats().resent_frames
}

fn iterations() -> u64 {
    std::env::var("REASONIX_CHANNEL_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150)
}

/// Random channels both ways (tiny and normal windows, slow readers, big and small pieces,
/// small replay buffers) over transports that are cut at random bytes and times, stalled and
/// blackholed: every byte of every channel arrives exactly once, in order, and every channel
/// ends with its sender's close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_byte_arrives_exactly_once_across_random_cuts() {
    let base: u64 = std::env::var("REASONIX_CHANNEL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    let n = iterations();
    eprintln!(
        "channel scenarios: {n}, seeds {base}..{}",
        base.wrapping_add(n)
    );
    let mut resent = 0;
    for i in 0..n {
        let seed = base.wrapping_add(i);
        match tokio::time::timeout(Duration::from_secs(60), one_scenario(seed)).await {
            Ok(r) => resent += r,
            Err(_) => panic!("seed {seed}: stuck"),
        }
    }
    eprintln!("data frames resent after cuts: {resent}");
    // The faults really cut channels mid-stream (not only between them).
    if n >= 50 {
        assert!(resent > 0, "no scenario resent anything: the faults missed");
    }
}
