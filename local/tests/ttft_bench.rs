//! Model forwarding overhead (ignored by default; run by `bench/ttft_bench.sh`): time to first
//! token of a provider request made on the host and forwarded through the link (host daemon
//! → SSH link → laptop gateway → mock provider → back over the link), against the same
//! request made directly from the laptop's gateway to the mock, in the same run.
//!
//! The link runs through the testkit delay proxy (`BENCH_DELAY_MS` each way, default 25,
//! i.e. a 50 ms RTT) inside a private network namespace with a real sshd. The host side
//! logs `ttft_us` for every stream (daemon log, `first provider chunk`); the direct side is
//! timed here with the same gateway code and the request bodies the mock recorded.
//! Each turn is a `reasonix run` (a link of its own) of two model requests: one that asks
//! for a `read_file`, then the answer. The first request of a link goes by prefix against
//! the base the daemon handed the laptop when the link opened the session (in full when that
//! base had not arrived yet, or the session was empty), the second extends the first and goes
//! by prefix (only its new messages cross the link). With
//! `BENCH_PAD_KB` > 0 every prompt carries that much text and the turns continue one
//! session, so the conversation grows by that much per turn (a long session's requests).
//! Environment: `BENCH_TURNS` (default 10), `BENCH_DELAY_MS` (default 25), `BENCH_PAD_KB`
//! (default 0).

mod reconnect_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use reasonix_forward::proto::{ProviderChunk, ProviderRequest};
use reasonix_local::config::{Config, LoadOptions};
use reasonix_local::gateway::Gateway;
use reasonix_testkit::mock_provider::MockReply;
use reasonix_testkit::netfault::DelayProxy;
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

/// The round trip through a [`DelayProxy`] with `delay` each way, as the link sees it:
/// the median of 30 one-byte ping-pongs with a TCP echo server behind such a proxy.
async fn proxy_rtt_ms(delay: Duration) -> f64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let echo = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("echo server");
    let echo_port = echo.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = echo.accept().await {
            let _ = s.set_nodelay(true);
            tokio::spawn(async move {
                let mut b = [0u8; 1];
                while s.read_exact(&mut b).await.is_ok() {
                    if s.write_all(&b).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    let proxy = DelayProxy::start(([127, 0, 0, 1], echo_port).into(), delay)
        .await
        .expect("echo proxy");
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .expect("connect the echo proxy");
    s.set_nodelay(true).expect("nodelay");
    let mut rtts = Vec::new();
    let mut b = [0u8; 1];
    for _ in 0..30 {
        let t = Instant::now();
        s.write_all(b"x").await.expect("ping");
        s.read_exact(&mut b).await.expect("pong");
        rtts.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    median(&mut rtts)
}

#[test]
#[ignore = "benchmark: run bench/ttft_bench.sh"]
fn ttft_through_the_link_vs_direct() {
    let turns = env_u64("BENCH_TURNS", 10).max(1) as usize;
    let delay = Duration::from_millis(env_u64("BENCH_DELAY_MS", 25));
    in_netns(|ns| async move {
        // One warm-up turn (installs the host binary, starts the daemon), then the measured
        // ones; every reply is a short text whose first chunk is sent at once.
        let script: Vec<MockReply> = (0..=turns)
            .flat_map(|i| {
                [
                    MockReply::tool_calls(
                        vec![reasonix_testkit::mock_provider::MockToolCall::new(
                            &format!("r{i}"),
                            "read_file",
                            &serde_json::json!({"path": "small.txt"}).to_string(),
                        )],
                        64,
                    ),
                    MockReply::text(&[format!("answer {i} "), "and more".to_string()]),
                ]
            })
            .collect();
        let pad_kb = env_u64("BENCH_PAD_KB", 0) as usize;
        let rig = Rig::new(Arc::clone(&ns), script).await;
        // No compaction (`context_window = 0`): this measures forwarding. With the default
        // window a padded session reaches the summary rung after eight turns; the summary
        // requests then took the script's replies and every request after a rewrite went in
        // full, which is what had made the large-conversation figures unsteady.
        let config = rig.rx_home().join("config.toml");
        let mut text = std::fs::read_to_string(&config).expect("config");
        text.push_str("context_window = 0\n");
        std::fs::write(&config, text).expect("config");
        rig.user
            .write_file("ws/small.txt", "a small file\n", 0o644)
            .expect("small file");
        let proxy = DelayProxy::start(([127, 0, 0, 1], rig.sshd.port()).into(), delay)
            .await
            .expect("delay proxy");
        rig.trust_port(proxy.port());
        for i in 0..=turns {
            let pad = "padding text of a long prompt. ".repeat(pad_kb * 1024 / 31);
            let continued: &[&str] = if pad_kb > 0 && i > 0 {
                &["--continue"]
            } else {
                &[]
            };
            let mut c = rig.spawn_client(
                proxy.port(),
                (HEARTBEAT_MS * 10, DEAD_AFTER_MS * 10),
                continued,
                &format!("turn {i} {pad}"),
            );
            let st = c.wait_exit(Duration::from_secs(180)).await;
            assert!(st.success(), "turn {i} failed:\n{}", c.transcript());
        }
        // Host side: the daemon's log of every stream's time to first chunk.
        let mut link: Vec<f64> = Vec::new();
        let logs = rig.user.home.join(".reasonix/logs");
        for e in std::fs::read_dir(&logs).expect("daemon logs").flatten() {
            if !e.file_name().to_string_lossy().ends_with(".log") {
                continue;
            }
            for line in std::fs::read_to_string(e.path())
                .unwrap_or_default()
                .lines()
            {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                if let Some(us) = v["fields"]["ttft_us"].as_u64() {
                    link.push(us as f64 / 1000.0);
                }
            }
        }
        assert_eq!(link.len(), 2 * (turns + 1), "two ttft lines per turn");
        let link: Vec<f64> = link.into_iter().skip(2).collect();

        // Laptop side: the same requests (bodies as the mock received them) straight from
        // the gateway to the mock.
        let config = Config::load(&LoadOptions {
            home: Some(rig.rx_home()),
            project_dir: Some(rig.laptop.path().to_path_buf()),
            ..LoadOptions::default()
        })
        .expect("config");
        std::env::set_var("RX_RECONNECT_KEY", KEY);
        let gateway = Gateway::new(&config);
        let bodies: Vec<serde_json::Value> = rig
            .mock
            .requests()
            .iter()
            .skip(2)
            .map(|r| r.body.clone())
            .collect();
        rig.mock.push(
            (0..bodies.len())
                .map(|i| MockReply::text(&[format!("direct {i} "), "and more".to_string()]))
                .collect(),
        );
        let mut direct: Vec<f64> = Vec::new();
        for (i, body) in bodies.iter().enumerate() {
            let req: ProviderRequest = serde_json::from_value(serde_json::json!({
                "stream_id": format!("direct-{i}"),
                "model": "mock/m",
                "messages": body["messages"],
                "tools": body.get("tools").cloned().unwrap_or_else(|| serde_json::json!([])),
                "temperature": body["temperature"],
            }))
            .expect("provider request");
            let t = Instant::now();
            let mut rx = gateway.stream(req);
            let mut first = None;
            while let Some(chunk) = rx.recv().await {
                if first.is_none() {
                    first = Some(t.elapsed().as_secs_f64() * 1000.0);
                }
                match chunk {
                    ProviderChunk::Done { .. } => break,
                    ProviderChunk::Error { message, .. } => {
                        panic!("direct request failed: {message}")
                    }
                    _ => {}
                }
            }
            direct.push(first.expect("a first chunk"));
        }
        let rtt = 2.0 * delay.as_secs_f64() * 1000.0;
        let measured_rtt = proxy_rtt_ms(delay).await;
        println!(
            "RESULT rtt through the delay proxy: {measured_rtt:.2}ms (configured {rtt:.0}ms; what \
             is over it is the proxy's own threads and loopback)"
        );
        let kb: Vec<usize> = bodies.iter().map(|b| b.to_string().len() / 1024).collect();
        println!("link ttft ms: {link:.1?}");
        println!("direct ttft ms: {direct:.1?}");
        println!("request KiB: {kb:?}");
        // Even indexes: the first request of a link; odd: the second.
        for (name, parity) in [("all", None), ("first", Some(0)), ("second", Some(1))] {
            let pick = |v: &[f64]| -> Vec<f64> {
                v.iter()
                    .enumerate()
                    .filter(|(i, _)| parity.is_none_or(|p| i % 2 == p))
                    .map(|(_, x)| *x)
                    .collect()
            };
            let lm = median(&mut pick(&link));
            let dm = median(&mut pick(&direct));
            let over = lm - dm;
            println!(
                "RESULT ttft ({name} requests): turns={turns} pad={pad_kb}KiB rtt={rtt:.0}ms link_median={lm:.1}ms direct_median={dm:.1}ms \
                 difference={over:.1}ms (= {:.2} RTT; beyond the configured RTT {:.1}ms, beyond the measured RTT {:.1}ms; goal <= 1 RTT + 5 ms)",
                over / rtt,
                over - rtt,
                over - measured_rtt
            );
        }
    });
}
