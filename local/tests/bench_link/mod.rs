//! The link of the ports and cp benchmarks: the testkit delay proxies (`BENCH_DELAY_MS` each
//! way, default 25: a 50 ms round trip) and, unless `BENCH_RATE=none`, a rate limit
//! (`BENCH_RATE`, default `20mbit`) on the laptop side of those proxies only: an `htb`
//! class on the namespace's loopback that takes the packets from and to the proxies' ports
//! (this kernel has no `tc netem` and no `prio` qdisc; htb and u32 filters it has). The
//! other hops (sshd to the proxy, the host's HTTP server, the laptop's own client) stay
//! unshaped, so both tools cross one 20 Mbit/s, 50 ms link, as between two machines.
//! `BENCH_RX` / `BENCH_HOST_BIN` run other binaries (a release build) than the test's.
#![allow(dead_code)]

use std::path::PathBuf;

use reasonix_testkit::netfault::NetNs;

/// Added latency each way, in milliseconds.
pub fn delay_ms() -> u64 {
    std::env::var("BENCH_DELAY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25)
}

/// The rate limit (`tc` syntax), or None when unshaped.
pub fn rate() -> Option<String> {
    match std::env::var("BENCH_RATE") {
        Ok(r) if r == "none" || r == "0" || r.is_empty() => None,
        Ok(r) => Some(r),
        Err(_) => Some("20mbit".into()),
    }
}

/// The link, for the result line.
pub fn describe() -> String {
    format!(
        "{}, rtt {} ms",
        rate().unwrap_or_else(|| "unshaped".into()),
        2 * delay_ms()
    )
}

/// Shape the traffic to and from the given proxy ports inside `ns` to [`rate`] (and give
/// the loopback an Ethernet MTU). Nothing when unshaped.
pub fn shape(ns: &NetNs, proxy_ports: &[u16]) {
    let Some(rate) = rate() else { return };
    let run = |argv: &[&str]| {
        ns.exec(argv)
            .unwrap_or_else(|e| panic!("shaping the link ({argv:?}): {e}"));
    };
    run(&["ip", "link", "set", "lo", "mtu", "1500"]);
    run(&[
        "tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "20",
    ]);
    run(&[
        "tc", "class", "add", "dev", "lo", "parent", "1:", "classid", "1:10", "htb", "rate", &rate,
        "ceil", &rate,
    ]);
    run(&[
        "tc", "class", "add", "dev", "lo", "parent", "1:", "classid", "1:20", "htb", "rate",
        "10gbit",
    ]);
    for port in proxy_ports {
        let port = port.to_string();
        for dir in ["sport", "dport"] {
            run(&[
                "tc", "filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip", "prio", "1",
                "u32", "match", "ip", dir, &port, "0xffff", "flowid", "1:10",
            ]);
        }
    }
}

/// The laptop binary to run.
pub fn reasonix_bin() -> PathBuf {
    std::env::var_os("BENCH_RX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_reasonix")))
}

/// The static host binary to install.
pub fn host_bin() -> PathBuf {
    std::env::var_os("BENCH_HOST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(super::reconnect_common::musl_host_binary)
}

/// Runs per figure (best of), `BENCH_RUNS`, default 3.
pub fn runs() -> usize {
    std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1)
}
