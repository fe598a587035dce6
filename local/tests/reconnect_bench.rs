//! Reconnect benchmark (ignored by default; run by `bench/reconnect_bench.sh`): the median
//! time from network restoration to "connected (resumed)" over N blackhole drops of one
//! running `reasonix run --ssh`, inside a private network namespace with a real sshd.
//!
//! Each drop: iptables blackhole on the sshd port; wait until the client reports
//! "reconnecting" (it declared the link dead); keep the blackhole `BENCH_HOLD_MS` plus a
//! random 0–3 s longer (so reconnect attempts are in flight at a random phase, as after real
//! Wi-Fi loss; a fixed hold would line up with the 3 s connect timeout); lift it and time until the
//! client prints `{"type":"connection","state":"connected","resumed":true}` — the link is
//! resumed and every unacknowledged frame replayed. A model reply streams the whole time.
//!
//! Environment: `BENCH_DROPS` (default 10), `BENCH_HOLD_MS` (default 3000), `BENCH_DELAY_MS`
//! (default 0): when set, the client reaches sshd through the testkit delay proxy adding that
//! latency each way (standing in for `tc netem delay`, which the CI kernel lacks), and the
//! blackhole is applied to the proxied leg.

mod reconnect_common;

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reasonix_testkit::mock_provider::MockReply;
use reasonix_testkit::netfault::{DelayProxy, Fault};
use reconnect_common::*;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[test]
#[ignore = "benchmark: run bench/reconnect_bench.sh"]
fn reconnect_after_blackhole_median() {
    let drops = env_u64("BENCH_DROPS", 10).max(1) as usize;
    let hold = Duration::from_millis(env_u64("BENCH_HOLD_MS", 3000));
    let delay = Duration::from_millis(env_u64("BENCH_DELAY_MS", 0));
    in_netns(|ns| async move {
        // A reply that streams for longer than the whole run (one chunk every 200 ms).
        let chunks: Vec<String> = (0..5000).map(|i| format!("t{i} ")).collect();
        let rig = Rig::new(
            Arc::clone(&ns),
            vec![MockReply::text(&chunks).slow(Duration::from_millis(200))],
        )
        .await;
        // Connect and install without delay; the shaped latency applies to the measured part.
        let proxy = DelayProxy::start(([127, 0, 0, 1], rig.sshd.port()).into(), Duration::ZERO)
            .await
            .expect("delay proxy");
        rig.trust_port(proxy.port());
        let port = if delay.is_zero() {
            rig.sshd.port()
        } else {
            proxy.port()
        };

        let mut c = rig.spawn_client(
            port,
            (HEARTBEAT_MS, DEAD_AFTER_MS),
            &[],
            "stream for a long time",
        );
        let (mut from, _) = c
            .wait_for(0, Duration::from_secs(120), "the first text", |v| {
                v["type"] == "text"
            })
            .await;
        proxy.set_delay(delay);
        // Baseline in the same run, over the same path and latency: OpenSSH connect + `true`.
        let mut base = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            let st = Command::new("ssh")
                .args([
                    "-F",
                    "none",
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    "IdentityAgent=none",
                ])
                .arg("-o")
                .arg(format!(
                    "UserKnownHostsFile={}",
                    rig.home().join(".ssh/known_hosts").display()
                ))
                .arg("-i")
                .arg(&rig.key.private)
                .args(["-p", &port.to_string()])
                .arg(format!("{}@127.0.0.1", rig.user.name))
                .arg("true")
                .status()
                .expect("ssh");
            assert!(st.success(), "baseline ssh failed");
            base.push(t.elapsed().as_secs_f64());
        }

        let mut samples = Vec::new();
        let mut detect = Vec::new();
        for n in 1..=drops {
            let fault = ns.fault(Fault::Blackhole, port).expect("blackhole");
            let cut = fault.since();
            let (i, rec) = c
                .wait_for(from, Duration::from_secs(60), "reconnecting", |v| {
                    is_conn(v, "reconnecting")
                })
                .await;
            detect.push(rec.at.duration_since(cut).as_secs_f64());
            let jitter = Duration::from_millis(rand::random::<u64>() % 3000);
            tokio::time::sleep(hold + jitter).await;
            fault.lift().expect("lift");
            let restored = Instant::now();
            let (j, ok) = c
                .wait_for(
                    i,
                    Duration::from_secs(60),
                    "connected (resumed)",
                    is_resumed,
                )
                .await;
            let secs = ok.at.duration_since(restored).as_secs_f64();
            println!(
                "drop {n:2}: restored -> resumed {secs:.3} s (dead declared after {:.3} s)",
                detect[n - 1]
            );
            samples.push(secs);
            from = j + 1;
            // Let the stream flow again before the next drop.
            c.wait_for(from, Duration::from_secs(30), "text after resume", |v| {
                v["type"] == "text"
            })
            .await;
        }
        let all_resumed = !c.values().iter().any(|v| {
            v["type"] == "notice" && v["text"].as_str().unwrap_or("").contains("re-attaching")
        });
        let mut sorted = samples.clone();
        let med = median(&mut sorted);
        let (min, max) = (sorted[0], sorted[sorted.len() - 1]);
        let base_med = median(&mut base);
        let det_med = median(&mut detect);
        println!(
            "RESULT reconnect: drops={drops} delay={}ms hold={}ms+0..3000ms median={med:.3}s min={min:.3}s max={max:.3}s \
             (dead declared median {det_med:.3}s with heartbeat {HEARTBEAT_MS}ms/dead {DEAD_AFTER_MS}ms; \
             baseline ssh connect+true median {base_med:.3}s; resumed without re-attach: {all_resumed})",
            delay.as_millis(),
            hold.as_millis()
        );
        assert!(
            all_resumed,
            "a drop needed a re-attach:\n{}",
            c.transcript()
        );
        c.kill9();
    });
}
