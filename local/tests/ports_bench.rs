//! Forwarded HTTP through `reasonix ports` against `ssh -L`, both to the same host user over
//! a real sshd behind the testkit delay proxy, on a 20 Mbit/s, 50 ms link by default
//! (`bench_link`: `BENCH_RATE=none` for unshaped, `BENCH_DELAY_MS`): the time to download a
//! 20 MB file (best of `BENCH_RUNS`, default 3, as MB/s) and the median time of 50 small
//! requests. Run by `bench/ports_throughput.sh` (ignored in the normal test run: it is a
//! measurement).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bench_link;
mod reconnect_common;

use std::time::{Duration, Instant};

use reasonix_testkit::netfault::DelayProxy;
use reasonix_testkit::sshd::{Sshd, SshdConfig};
use reconnect_common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const HOST_PORT: u16 = 18080;
const REASONIX_LOCAL: u16 = 28080;
const SSH_LOCAL: u16 = 38080;
const BIG: usize = 20 * 1024 * 1024;

async fn get(port: u16, path: &str) -> Vec<u8> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .await
        .expect("request");
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.expect("response");
    out
}

async fn try_get(port: u16, path: &str) -> std::io::Result<Vec<u8>> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .await?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).await?;
    Ok(out)
}

async fn wait_served(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let r = tokio::time::timeout(Duration::from_secs(15), try_get(port, "/small")).await;
        if matches!(r, Ok(Ok(ref b)) if b.starts_with(b"HTTP/1.0 200")) {
            return;
        }
        assert!(Instant::now() < deadline, "port {port} never served");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// (best MB/s of 3 downloads of BIG, median ms of `n` small requests)
async fn measure(port: u16, n: usize) -> (f64, f64) {
    let mut best = f64::MAX;
    for _ in 0..bench_link::runs() {
        let t0 = Instant::now();
        let r = get(port, "/big").await;
        assert!(r.len() > BIG, "short download: {}", r.len());
        best = best.min(t0.elapsed().as_secs_f64());
    }
    let mut times = Vec::new();
    for _ in 0..n {
        let t0 = Instant::now();
        let r = get(port, "/small").await;
        assert!(r.starts_with(b"HTTP/1.0 200"));
        times.push(t0.elapsed().as_secs_f64());
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (BIG as f64 / 1e6 / best, times[times.len() / 2] * 1e3)
}

#[test]
#[ignore = "benchmark: run by bench/ports_throughput.sh"]
fn forwarded_http_against_ssh_l() {
    let delay_ms = bench_link::delay_ms();
    in_netns(|ns| async move {
        let rig = Rig::new(ns, vec![]).await;
        // The served files, and the server (a plain process: `--add` forwards any port).
        let www = tempfile::tempdir().unwrap();
        std::fs::write(www.path().join("small"), b"hello\n").unwrap();
        let big: Vec<u8> = (0..BIG).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(www.path().join("big"), &big).unwrap();
        let mut server = rig
            .ns
            .command("python3")
            .args([
                "-m",
                "http.server",
                &HOST_PORT.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .current_dir(www.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("http.server");

        // reasonix ports through a delay proxy to the rig's sshd (AllowTcpForwarding no).
        let target = format!("127.0.0.1:{}", rig.sshd.port()).parse().unwrap();
        let proxy = DelayProxy::start(target, Duration::from_millis(delay_ms))
            .await
            .expect("proxy");
        rig.trust_port(proxy.port());
        let key = rig.key.private.display().to_string();
        let mut ours = rig
            .ns
            .command(bench_link::reasonix_bin())
            .args(["ports", "--ssh", &rig.dest(), "--no-auto"])
            .args(["--add", &format!("{HOST_PORT}={REASONIX_LOCAL}")])
            .args(["-p", &proxy.port().to_string(), "-F", "none", "-i", &key])
            .args(["-o", "IdentityAgent=none"])
            .current_dir(rig.laptop.path())
            .env("HOME", rig.home())
            .env("REASONIX_HOME", rig.rx_home())
            .env(
                "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
                bench_link::host_bin(),
            )
            .env("REASONIX_IDLE_TIMEOUT_SECS", "60")
            .env_remove("SSH_AUTH_SOCK")
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("reasonix ports");

        // ssh -L through its own delay proxy to a second sshd that allows forwarding.
        let sshd2 = Sshd::start(SshdConfig {
            netns: Some(rig.ns.name().to_string()),
            allow_tcp_forwarding: true,
            ..SshdConfig::default()
        })
        .expect("sshd with forwarding");
        let target2 = format!("127.0.0.1:{}", sshd2.port()).parse().unwrap();
        let proxy2 = DelayProxy::start(target2, Duration::from_millis(delay_ms))
            .await
            .expect("proxy");
        let user_host = format!("{}@127.0.0.1", rig.user.name);
        let mut ssh = rig
            .ns
            .command("ssh")
            .args(["-N", "-L", &format!("{SSH_LOCAL}:127.0.0.1:{HOST_PORT}")])
            .args([
                "-p",
                &proxy2.port().to_string(),
                "-i",
                &key,
                "-F",
                "/dev/null",
            ])
            .args(["-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"])
            .args([
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
            ])
            .arg(&user_host)
            .env("HOME", rig.home())
            .env_remove("SSH_AUTH_SOCK")
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("ssh -L");

        bench_link::shape(&rig.ns, &[proxy.port(), proxy2.port()]);
        wait_served(REASONIX_LOCAL).await;
        wait_served(SSH_LOCAL).await;
        let (ssh_mbs, ssh_ms) = measure(SSH_LOCAL, 50).await;
        let (rx_mbs, rx_ms) = measure(REASONIX_LOCAL, 50).await;
        for c in [&mut ours, &mut ssh, &mut server] {
            let _ = c.kill();
            let _ = c.wait();
        }
        drop(sshd2);
        println!(
            "RESULT ports_throughput: {}, 20 MB best of {}: ssh -L {ssh_mbs:.1} MB/s, reasonix ports {rx_mbs:.1} MB/s (ratio {:.2}); small request median: ssh -L {ssh_ms:.1} ms, reasonix ports {rx_ms:.1} ms (difference {:+.1} ms)",
            bench_link::describe(),
            bench_link::runs(),
            rx_mbs / ssh_mbs,
            rx_ms - ssh_ms
        );
    });
}
