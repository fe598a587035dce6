#!/bin/sh
# Forwarded HTTP: `reasonix ports` against `ssh -L` in the same run, both to the same host
# user over a real sshd behind the testkit delay proxy inside a private network namespace
# (needs root, iproute2 with tc, openssh, python3). Downloads a 20 MB file (best of
# BENCH_RUNS, default 3) and times 50 small requests.
# Usage: bench/ports_throughput.sh [DELAY_MS]
#   DELAY_MS    latency added each way (default 25, i.e. 50 ms round trip)
#   BENCH_RATE  rate limit of the laptop<->proxy hop (tc htb; default 20mbit; "none" for an
#               unshaped link, delay only)
#   RELEASE=0   measure the debug builds instead of release ones (bench/lib/bench_bins.sh)
# Prints a final "RESULT ports_throughput: ..." line with both figures and their ratio
# (goal: throughput ratio >= 0.90, small-request difference <= +2 ms).
set -eu
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0
. bench/lib/bench_bins.sh
BENCH_DELAY_MS="${1:-25}" \
  cargo test --quiet -p reasonix --test ports_bench -- --ignored --nocapture --test-threads 1 2>&1 \
  | grep -E '^(RESULT|thread|test result|---- )|panicked'
