#!/usr/bin/env bash
# Recall over N facts (default 10,000; English and Chinese text): the time of one recall (BM25
# over the cached index and the selection within 4 facts / 2,400 characters) as median and p95
# over 300 queries, the time to build the index (paid once per store change), and the index's
# approximate heap size. Targets (issue #32): median <= 5 ms on the host, index <= 20 MB.
# Runs in the test profile (unoptimised): compare runs with each other, not with the target.
# Usage: bench/memory_recall.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_FACTS=${1:-10000}
cargo test -q -p reasonix-forward --test memory_bench -- --ignored --nocapture bench_memory_recall_10000 2>&1 \
  | grep -E "memory recall|panicked|error" || true
