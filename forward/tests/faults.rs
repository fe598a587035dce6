//! Fault injection: thousands of random cuts, replacements and stalls. Whatever happens to
//! the transports, every envelope arrives exactly once and in order.
//!
//! `REASONIX_FAULT_ITERS` overrides the number of random scenarios (default 2000).

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{guard, numbered, numbered_index};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reasonix_forward::channel::Side;
use reasonix_forward::link::{Link, LinkConfig, LinkError};
use reasonix_forward::proto::{Envelope, ErrorCode, Request, Response, RpcError};
use reasonix_forward::rpc::{CallError, Incoming, Rpc};
use reasonix_forward::testing::connect_with_capacity;
use tokio::sync::{mpsc, watch};

fn iterations() -> u64 {
    std::env::var("REASONIX_FAULT_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

/// Receive `n` numbered envelopes and check they come in order, exactly once; then nothing
/// more may arrive (checked by the caller after closing).
fn spawn_receiver(
    mut rx: mpsc::Receiver<Envelope>,
    n: u64,
    seed: u64,
    done: Arc<watch::Sender<usize>>,
) -> tokio::task::JoinHandle<mpsc::Receiver<Envelope>> {
    tokio::spawn(async move {
        for expected in 1..=n {
            let got = rx
                .recv()
                .await
                .unwrap_or_else(|| panic!("seed {seed}: stream ended before {expected}"));
            assert_eq!(numbered_index(&got), expected, "seed {seed}");
        }
        // Counted under the watch's own lock: two receivers finishing at once must not
        // overwrite each other's count.
        done.send_modify(|n| *n += 1);
        rx
    })
}

fn spawn_sender(link: Link, n: u64, sizes: Vec<usize>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        for i in 1..=n {
            link.send(numbered(i, sizes[(i - 1) as usize]))
                .await
                .unwrap();
        }
    })
}

/// Like `guard`, with a shorter limit and the state of both links in the panic message.
async fn diag<F: std::future::Future>(
    what: &str,
    seed: u64,
    a: &Link,
    b: &Link,
    trace: &[String],
    f: F,
) -> F::Output {
    match tokio::time::timeout(Duration::from_secs(8), f).await {
        Ok(v) => v,
        Err(_) => panic!(
            "seed {seed}: stuck at {what}\n a: {:?} connected={}\n b: {:?} connected={}\n trace: {trace:?}",
            a.stats(),
            a.is_connected(),
            b.stats(),
            b.is_connected()
        ),
    }
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Cut after this many bytes (both directions together).
    CutAfterBytes(u64),
    /// Cut after this many microseconds.
    CutAfterMicros(u64),
    /// Attach a new transport without cutting the old one.
    Replace(u64),
    /// Stall for a while, then cut (a blackhole noticed by the caller).
    StallThenCut(u64),
}

fn random_fault(rng: &mut StdRng) -> Fault {
    match rng.gen_range(0..10) {
        0..=4 => Fault::CutAfterBytes(rng.gen_range(0..4000)),
        5..=6 => Fault::CutAfterMicros(rng.gen_range(0..3000)),
        7..=8 => Fault::Replace(rng.gen_range(0..2000)),
        _ => Fault::StallThenCut(rng.gen_range(0..2000)),
    }
}

async fn one_scenario(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let replay_limit = if rng.gen_bool(0.3) {
        rng.gen_range(200..4000)
    } else {
        64 * 1024 * 1024
    };
    let config = LinkConfig {
        replay_limit_bytes: replay_limit,
        ..LinkConfig::default()
    };
    let (a, a_rx) = Link::new(config.clone());
    let (b, b_rx) = Link::new(config);
    let n_a = rng.gen_range(0..80);
    let n_b = rng.gen_range(0..80);
    let mut sizes = |n: u64| -> Vec<usize> {
        (0..n)
            .map(|_| {
                if rng.gen_bool(0.05) {
                    rng.gen_range(2000..20000)
                } else {
                    rng.gen_range(0..200)
                }
            })
            .collect()
    };
    let sizes_a = sizes(n_a);
    let sizes_b = sizes(n_b);
    let done = Arc::new(watch::channel(0usize).0);
    let mut done_rx = done.subscribe();
    let recv_b = spawn_receiver(b_rx, n_a, seed, Arc::clone(&done));
    let recv_a = spawn_receiver(a_rx, n_b, seed, Arc::clone(&done));
    let send_a = spawn_sender(a.clone(), n_a, sizes_a);
    let send_b = spawn_sender(b.clone(), n_b, sizes_b);

    let mut faults_left = rng.gen_range(0..8);
    let mut trace: Vec<String> = vec![format!("n_a={n_a} n_b={n_b} limit={replay_limit}")];
    let mut old: Option<reasonix_forward::testing::Connection> = None;
    loop {
        if *done_rx.borrow() == 2 {
            break;
        }
        let capacity = rng.gen_range(1..8192);
        let conn = connect_with_capacity(&a, &b, capacity);
        // The transport replaced last time must have stopped by itself.
        if let Some(prev) = old.take() {
            let (ea, eb) = diag(
                "replaced transport stops",
                seed,
                &a,
                &b,
                &trace,
                prev.join(),
            )
            .await;
            for e in [ea, eb] {
                assert!(
                    matches!(e, LinkError::TransportClosed(_)),
                    "seed {seed}: {e}"
                );
            }
        }
        let control = conn.control.clone();
        let mut fault = None;
        if faults_left > 0 {
            faults_left -= 1;
            let f = random_fault(&mut rng);
            fault = Some(f);
            trace.push(format!("cap={capacity} {f:?}"));
            match f {
                Fault::CutAfterBytes(n) => control.cut_after(n),
                Fault::CutAfterMicros(us) => {
                    let c = control.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_micros(us)).await;
                        c.cut();
                    });
                }
                Fault::Replace(_) | Fault::StallThenCut(_) => {}
            }
        }
        let mut ta = conn.a;
        let mut tb = conn.b;
        let (mut ra, mut rb) = (None, None);
        match fault {
            Some(Fault::Replace(us)) => {
                tokio::select! {
                    _ = done_rx.wait_for(|n| *n == 2) => {}
                    _ = tokio::time::sleep(Duration::from_micros(us)) => {}
                }
                old = Some(reasonix_forward::testing::Connection {
                    control,
                    a: ta,
                    b: tb,
                });
                continue;
            }
            Some(Fault::StallThenCut(us)) => {
                tokio::time::sleep(Duration::from_micros(us)).await;
                control.stall();
                tokio::time::sleep(Duration::from_micros(us / 2)).await;
                control.cut();
            }
            _ => {}
        }
        if fault.is_none() {
            trace.push(format!("cap={capacity} no fault"));
        }
        diag("running", seed, &a, &b, &trace, async {
            tokio::select! {
                _ = done_rx.wait_for(|n| *n == 2) => {}
                r = &mut ta => ra = Some(r.unwrap()),
                r = &mut tb => rb = Some(r.unwrap()),
            }
        })
        .await;
        control.cut();
        let ea = match ra {
            Some(e) => e,
            None => diag("a ends", seed, &a, &b, &trace, ta).await.unwrap(),
        };
        let eb = match rb {
            Some(e) => e,
            None => diag("b ends", seed, &a, &b, &trace, tb).await.unwrap(),
        };
        trace.push(format!("ended: {ea} / {eb}"));
        for e in [ea, eb] {
            assert!(
                matches!(e, LinkError::TransportClosed(_)),
                "seed {seed}: transport ended with {e}"
            );
        }
    }
    guard("senders", send_a).await.unwrap();
    guard("senders", send_b).await.unwrap();
    let mut b_rx = guard("receiver b", recv_b).await.unwrap();
    let mut a_rx = guard("receiver a", recv_a).await.unwrap();
    if let Some(prev) = old.take() {
        prev.cut_and_join().await;
    }
    a.close();
    b.close();
    // Nothing beyond the expected envelopes was delivered.
    assert!(
        guard("a rx end", a_rx.recv()).await.is_none(),
        "seed {seed}: extra to a"
    );
    assert!(
        guard("b rx end", b_rx.recv()).await.is_none(),
        "seed {seed}: extra to b"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_cuts_deliver_exactly_once_in_order() {
    let base: u64 = std::env::var("REASONIX_FAULT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    let n = iterations();
    eprintln!(
        "fault scenarios: {n}, seeds {base}..{}",
        base.wrapping_add(n)
    );
    for i in 0..n {
        let seed = base.wrapping_add(i);
        guard(&format!("scenario with seed {seed}"), one_scenario(seed)).await;
    }
}

/// RPC over a link that keeps breaking: every call gets exactly its own answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_calls_complete_across_random_cuts() {
    let seed: u64 = rand::thread_rng().gen();
    let mut rng = StdRng::seed_from_u64(seed);
    eprintln!("rpc fault seed {seed}");
    let (a, a_rx) = Link::new(LinkConfig::default());
    let (b, b_rx) = Link::new(LinkConfig::default());
    let (client, _client_in) = Rpc::new(a.clone(), a_rx, Side::Client);
    let (server, mut server_in) = Rpc::new(b.clone(), b_rx, Side::Server);
    let handled = Arc::new(AtomicUsize::new(0));
    {
        let server = server.clone();
        let handled = Arc::clone(&handled);
        tokio::spawn(async move {
            while let Some(msg) = server_in.recv().await {
                if let Incoming::Request { id, body } = msg {
                    handled.fetch_add(1, Ordering::SeqCst);
                    let result = match body {
                        Request::ListDir { path } => Err(RpcError::new(ErrorCode::NotFound, path)),
                        _ => Ok(Response::Ok),
                    };
                    server.respond(id, result).await.unwrap();
                }
            }
        });
    }
    const CALLS: usize = 300;
    let mut calls = Vec::new();
    for i in 0..CALLS {
        let c = client.clone();
        calls.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_micros((i as u64 % 50) * 100)).await;
            c.request(Request::ListDir {
                path: format!("call-{i}"),
            })
            .await
        }));
    }
    let all_done = async {
        for (i, call) in calls.into_iter().enumerate() {
            match call.await.unwrap() {
                Err(CallError::Remote(e)) => assert_eq!(e.message, format!("call-{i}")),
                other => panic!("seed {seed}: call {i}: {other:?}"),
            }
        }
    };
    tokio::pin!(all_done);
    loop {
        let conn = connect_with_capacity(&a, &b, rng.gen_range(16..4096));
        conn.control.cut_after(rng.gen_range(0..6000));
        let finished = tokio::select! {
            _ = &mut all_done => true,
            _ = tokio::time::sleep(Duration::from_millis(20)) => false,
        };
        conn.cut_and_join().await;
        if finished {
            break;
        }
    }
    // Each request reached the handler exactly once.
    assert_eq!(handled.load(Ordering::SeqCst), CALLS, "seed {seed}");
    assert_eq!(client.pending_calls(), 0);
}
