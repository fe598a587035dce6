#!/bin/sh
# Reconnect benchmark: median time from network restoration to "connected (resumed)" over
# N blackhole drops of a running `reasonix run --ssh`, with a real sshd, client and mock
# provider inside a private network namespace (needs root, iproute2, iptables, openssh).
# Usage: bench/reconnect_bench.sh [DROPS] [HOLD_MS] [DELAY_MS]
#   DROPS    number of blackhole drops (default 10)
#   HOLD_MS  how long the blackhole stays after the client declared the link dead, plus a
#            random 0-3 s (default 3000)
#   DELAY_MS latency added each way by the testkit delay proxy (default 0; no tc netem here)
# Prints one line per drop and a final "RESULT reconnect: ..." line.
set -eu
cd "$(dirname "$0")/.."
cargo build --quiet --workspace --bins
cargo build --quiet -p reasonix-remote --target x86_64-unknown-linux-musl
BENCH_DROPS="${1:-10}" BENCH_HOLD_MS="${2:-3000}" BENCH_DELAY_MS="${3:-0}" \
  cargo test --quiet -p reasonix --test reconnect_bench -- --ignored --nocapture --test-threads 1 2>&1 \
  | grep -E '^(drop |RESULT|thread|test result|---- )|panicked'
