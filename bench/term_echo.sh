#!/bin/sh
# Keystroke-echo latency: median time from typing one character to seeing the host shell's
# echo of it, through `reasonix term` and through plain `ssh -tt`, to the same real sshd behind
# the testkit delay proxy inside a private network namespace (needs root, iproute2, openssh).
# Usage: bench/term_echo.sh [DELAY_MS] [CHARS]
#   DELAY_MS latency added each way (default 25, i.e. 50 ms round trip; no tc netem here)
#   CHARS    characters typed one at a time (default 100)
# Prints a final "RESULT term_echo: ..." line with both medians and their difference.
set -eu
cd "$(dirname "$0")/.."
cargo build --quiet --workspace --bins
cargo build --quiet -p reasonix-remote --target x86_64-unknown-linux-musl
BENCH_DELAY_MS="${1:-25}" BENCH_CHARS="${2:-100}" \
  cargo test --quiet -p reasonix --test term_echo_bench -- --ignored --nocapture --test-threads 1 2>&1 \
  | grep -E '^(RESULT|thread|test result|---- )|panicked'
