#!/bin/sh
# Goal benchmark: a 20-turn goal (`reasonix run --ssh --goal`) across a 25 s blackhole of the
# link, with a real sshd, client and mock provider inside a private network namespace (needs
# root, iproute2, iptables, openssh). Reports requests per model step and command runs per
# bash call (both 1.00 when nothing was asked or run twice) and the wall time.
# With a third argument `kill` the client is killed as the blackhole starts and the laptop's
# goal keeper carries the goal (no client attached) across it to the end.
# Usage: bench/goal_blackhole.sh [TURNS] [BLACKHOLE_SECS] [kill]
set -eu
cd "$(dirname "$0")/.."
cargo build --quiet --workspace --bins
cargo build --quiet -p reasonix-remote --target x86_64-unknown-linux-musl
KILL=0; [ "${3:-}" = kill ] && KILL=1
BENCH_TURNS="${1:-20}" BENCH_BLACKHOLE_SECS="${2:-25}" BENCH_KILL_CLIENT="$KILL" \
  cargo test --quiet -p reasonix --test goal_blackhole_bench -- --ignored --nocapture --test-threads 1 2>&1 \
  | grep -E '^(RESULT|thread|test result|---- )|panicked'
