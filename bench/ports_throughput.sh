#!/bin/sh
# Forwarded HTTP: `reasonix ports` against `ssh -L`, both to the same host user over a real
# sshd behind the testkit delay proxy inside a private network namespace (needs root,
# iproute2, openssh, python3). Downloads a 20 MB file (best of 3) and times 50 small requests.
# Usage: bench/ports_throughput.sh [DELAY_MS]
#   DELAY_MS latency added each way (default 25, i.e. 50 ms round trip; no rate limit: no tc
#            netem here)
# Prints a final "RESULT ports_throughput: ..." line with both figures and their ratio.
set -eu
cd "$(dirname "$0")/.."
cargo build --quiet --workspace --bins
cargo build --quiet -p reasonix-remote --target x86_64-unknown-linux-musl
BENCH_DELAY_MS="${1:-25}" \
  cargo test --quiet -p reasonix --test ports_bench -- --ignored --nocapture --test-threads 1 2>&1 \
  | grep -E '^(RESULT|thread|test result|---- )|panicked'
