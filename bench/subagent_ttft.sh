#!/bin/sh
# Six children streaming at once over one link (#33): the time to first token of each of 6
# `parallel_tasks` children whose requests cross the link together, against a lone `task`
# child's in the same run (the host daemon's `ttft_us` log: request start on the host to
# its first chunk back over the link). A real sshd, client and mock provider inside a
# private network namespace, the link through the testkit delay proxy (needs root,
# iproute2, openssh).
# Usage: bench/subagent_ttft.sh [ROUNDS] [DELAY_MS]
#   ROUNDS   rounds of (one lone child, six at once) (default 5)
#   DELAY_MS latency added each way (default 25, i.e. a 50 ms RTT)
#   PROFILE=debug  measure debug builds instead of release builds (both ends)
# Prints the series and a final "RESULT subagent ttft: ..." line (ratios and differences
# over the lone child's median; the goal: every child within RTT + 10 ms of it).
set -eu
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0
if [ "${PROFILE:-release}" = debug ]; then
  cargo build --quiet --workspace --bins
  cargo build --quiet -p reasonix-remote --target x86_64-unknown-linux-musl
  REL=
else
  # As bench/ttft_bench.sh: local/build.rs builds the static host binary for the test.
  export REASONIX_HOST_TARGETS=x86_64-unknown-linux-musl
  REL=--release
fi
BENCH_ROUNDS="${1:-5}" BENCH_DELAY_MS="${2:-25}" \
  cargo test --quiet $REL -p reasonix --test subagent_ttft_bench -- --ignored --nocapture --test-threads 1 2>&1 \
  | grep -E '^(lone|round|RESULT|thread|test result|---- )|panicked'
