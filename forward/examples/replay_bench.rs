//! Replay throughput: queue many small envelopes while disconnected, then attach a
//! transport and measure how fast the backlog is delivered.
//!
//! `cargo run --release -p reasonix-forward --example replay_bench [-- N]`
//!
//! Runs twice: over the in-memory test transport and over a unix socket pair (real kernel
//! I/O), printing frames/s for each.

use std::time::Instant;

use reasonix_forward::link::{Link, LinkConfig};
use reasonix_forward::proto::{Envelope, Notification};

fn envelope(i: u64) -> Envelope {
    Envelope::Notify {
        body: Notification::ToolProgress {
            call_id: i.to_string(),
            message: "progress line of a running tool".into(),
        },
    }
}

async fn queue(link: &Link, n: u64) -> Result<usize, Box<dyn std::error::Error>> {
    for i in 1..=n {
        link.send(envelope(i)).await?;
    }
    Ok(link.stats().buffered_bytes)
}

async fn drain(rx: &mut tokio::sync::mpsc::Receiver<Envelope>, n: u64) -> Result<(), String> {
    for i in 1..=n {
        match rx.recv().await {
            Some(Envelope::Notify {
                body: Notification::ToolProgress { call_id, .. },
            }) if call_id == i.to_string() => {}
            other => return Err(format!("envelope {i}: unexpected {other:?}")),
        }
    }
    Ok(())
}

fn report(what: &str, n: u64, bytes: usize, secs: f64) {
    println!(
        "{what}: {n} envelopes ({:.1} MiB of payload) replayed in {:.3} s = {:.0} frames/s",
        bytes as f64 / (1024.0 * 1024.0),
        secs,
        n as f64 / secs
    );
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(100_000);

    // In-memory transport.
    let (a, _a_rx) = Link::new(LinkConfig::default());
    let (b, mut b_rx) = Link::new(LinkConfig::default());
    let t = Instant::now();
    let bytes = queue(&a, n).await?;
    println!(
        "queued {n} envelopes while disconnected in {:.3} s",
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let conn = reasonix_forward::testing::connect_with_capacity(&a, &b, 1024 * 1024);
    drain(&mut b_rx, n).await?;
    report("in-memory transport", n, bytes, t.elapsed().as_secs_f64());
    a.flush().await?;
    conn.cut_and_join().await;

    // Unix socket pair.
    let (a, _a_rx) = Link::new(LinkConfig::default());
    let (b, mut b_rx) = Link::new(LinkConfig::default());
    let bytes = queue(&a, n).await?;
    let (sa, sb) = tokio::net::UnixStream::pair()?;
    let (ra, wa) = sa.into_split();
    let (rb, wb) = sb.into_split();
    let t = Instant::now();
    let (la, lb) = (a.clone(), b.clone());
    let ta = tokio::spawn(async move { la.run_transport(ra, wa, 0).await });
    let tb = tokio::spawn(async move { lb.run_transport(rb, wb, 0).await });
    drain(&mut b_rx, n).await?;
    report("unix socket pair", n, bytes, t.elapsed().as_secs_f64());
    a.flush().await?;
    println!("sender stats after delivery: {:?}", a.stats());
    a.close();
    let _ = ta.await;
    let _ = tb.await;
    Ok(())
}
