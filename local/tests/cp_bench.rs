//! `reasonix cp` against `scp`, both to the same host user over the same real sshd behind
//! the testkit delay proxy, on a 20 Mbit/s, 50 ms link by default (`bench_link`:
//! `BENCH_RATE=none` for unshaped, `BENCH_DELAY_MS`): the time to copy a 50 MB file up and
//! down (best of `BENCH_RUNS`, default 3, each, as MB/s; each run is a whole command,
//! connection included, and `reasonix cp` has its daemon warm from a first small copy, as it
//! has after a session). Run by `bench/cp_throughput.sh` (ignored in the normal test run: it
//! is a measurement).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bench_link;
mod reconnect_common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use reasonix_testkit::netfault::DelayProxy;
use reconnect_common::*;

const BIG: usize = 50 * 1024 * 1024;

fn best_of_3(mut run: impl FnMut() -> bool) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..bench_link::runs() {
        let t0 = Instant::now();
        assert!(run(), "a copy failed");
        best = best.min(t0.elapsed().as_secs_f64());
    }
    BIG as f64 / 1e6 / best
}

fn ok(mut c: Command) -> bool {
    let out = c.output().expect("spawn");
    if !out.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    }
    out.status.success()
}

#[test]
#[ignore = "benchmark: run by bench/cp_throughput.sh"]
fn reasonix_cp_against_scp() {
    let delay_ms = bench_link::delay_ms();
    in_netns(|ns| async move {
        let rig = Rig::new(ns, vec![]).await;
        let target = format!("127.0.0.1:{}", rig.sshd.port()).parse().unwrap();
        let proxy = DelayProxy::start(target, Duration::from_millis(delay_ms))
            .await
            .expect("proxy");
        rig.trust_port(proxy.port());
        bench_link::shape(&rig.ns, &[proxy.port()]);
        let key = rig.key.private.display().to_string();
        let port = proxy.port().to_string();
        let lap = rig.laptop.path().to_path_buf();
        // Random bytes: no holes, nothing for compression to win.
        let big: Vec<u8> = {
            let mut x = 0x9e3779b97f4a7c15u64;
            (0..BIG)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        };
        std::fs::write(lap.join("big.bin"), &big).unwrap();
        std::fs::write(lap.join("warm.txt"), b"warm\n").unwrap();
        std::fs::create_dir_all(lap.join("down")).unwrap();

        let (rig_ref, key_ref, port_ref) = (&rig, &key, &port);
        let reasonix = |args: &[&str]| {
            let mut c = rig_ref.ns.command(bench_link::reasonix_bin());
            c.args(["cp", "--ssh", &rig_ref.dest()])
                .args(["-p", port_ref, "-F", "none", "-i", key_ref])
                .args(["-o", "IdentityAgent=none"])
                .args(args)
                .current_dir(rig_ref.laptop.path())
                .env("HOME", rig_ref.home())
                .env("REASONIX_HOME", rig_ref.rx_home())
                .env(
                    "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
                    bench_link::host_bin(),
                )
                .env("REASONIX_IDLE_TIMEOUT_SECS", "120")
                .env_remove("SSH_AUTH_SOCK")
                .stdin(std::process::Stdio::null());
            c
        };
        let scp = |from: &str, to: &str| {
            let mut c = rig_ref.ns.command("scp");
            c.args(["-q", "-O", "-P", port_ref, "-i", key_ref, "-F", "/dev/null"])
                .args(["-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"])
                .args(["-o", "StrictHostKeyChecking=no"])
                .args(["-o", "UserKnownHostsFile=/dev/null"])
                .args([from, to])
                .current_dir(rig_ref.laptop.path())
                .env("HOME", rig_ref.home())
                .env_remove("SSH_AUTH_SOCK");
            c
        };
        // Install and start the host side once.
        assert!(ok(reasonix(&["warm.txt", ":"])), "warm-up copy");
        let remote = |p: &str| format!("{}@127.0.0.1:ws/{p}", rig.user.name);

        let scp_up = best_of_3(|| ok(scp("big.bin", &remote("scp.bin"))));
        let rx_up = best_of_3(|| {
            let _ = std::fs::remove_file(rig.host_file("big.bin"));
            ok(reasonix(&["big.bin", ":"]))
        });
        assert_eq!(std::fs::read(rig.host_file("big.bin")).unwrap(), big);
        let scp_down = best_of_3(|| ok(scp(&remote("scp.bin"), "down/scp.bin")));
        let rx_down = best_of_3(|| {
            let _ = std::fs::remove_file(Path::new(&lap).join("down/big.bin"));
            ok(reasonix(&[":big.bin", "down/"]))
        });
        assert_eq!(std::fs::read(lap.join("down/big.bin")).unwrap(), big);
        println!(
            "RESULT cp_throughput: {}, 50 MB best of {}: up scp {scp_up:.1} MB/s, reasonix cp {rx_up:.1} MB/s (ratio {:.2}); down scp {scp_down:.1} MB/s, reasonix cp {rx_down:.1} MB/s (ratio {:.2})",
            bench_link::describe(),
            bench_link::runs(),
            rx_up / scp_up,
            rx_down / scp_down
        );
    });
}
