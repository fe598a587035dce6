#!/bin/sh
# `reasonix cp` against `scp` in the same run, both to the same host user over the same real
# sshd behind the testkit delay proxy inside a private network namespace (needs root,
# iproute2 with tc, openssh). Copies a 50 MB file of random bytes up and down (best of
# BENCH_RUNS, default 3, each; whole commands, connection included; the reasonix daemon is
# warm from a first small copy).
# Usage: bench/cp_throughput.sh [DELAY_MS]
#   DELAY_MS    latency added each way (default 25, i.e. 50 ms round trip)
#   BENCH_RATE  rate limit of the laptop<->proxy hop (tc htb; default 20mbit; "none" for an
#               unshaped link, delay only)
#   RELEASE=0   measure the debug builds instead of release ones (bench/lib/bench_bins.sh)
# Prints a final "RESULT cp_throughput: ..." line with both figures and their ratio per
# direction (reasonix cp / scp: 1.0 is as fast as scp, the goal is at least 0.91, i.e. within
# 1.1x of scp's time).
set -eu
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0
. bench/lib/bench_bins.sh
BENCH_DELAY_MS="${1:-25}" \
  cargo test --quiet -p reasonix --test cp_bench -- --ignored --nocapture --test-threads 1 2>&1 \
  | grep -E '^(RESULT|thread|test result|---- )|panicked'
