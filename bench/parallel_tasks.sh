#!/usr/bin/env bash
# `parallel_tasks` of 4 children, each running `sleep 3` in bash, through the real binaries
# and the mock provider: prints the tool's time (its start to its end in the session
# journal) over the slowest child's (its first to its last event), measured in the same
# run. Target: ratio <= 1.5.
# Usage: bench/parallel_tasks.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0
cargo build -q --workspace --bins
cargo test -q -p reasonix --test e2e_fleet -- --ignored --nocapture bench_parallel_tasks 2>&1 \
  | grep -E "parallel_tasks:|panicked|error" || true
