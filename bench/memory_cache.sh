#!/usr/bin/env bash
# Recall and the cache (issue 32): a session of TURNS turns (default 50) through the real
# binaries and the caching OpenAI-wire mock, every turn recalling a different fact from the
# laptop's global store into its user message. Checks that every request extends the previous
# one byte for byte (recall never touches the prefix) and prints the share of prompt tokens
# served from the cache (the bar: at least 90 %).
# Usage: bench/memory_cache.sh [TURNS]
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_TURNS=${1:-50}
export CARGO_INCREMENTAL=0
cargo build -q -p reasonix-remote --bin reasonix-remote
cargo test -q -p reasonix --test e2e_memory -- --ignored --nocapture bench_memory_recall_cache_share 2>&1 \
  | grep -E "memory cache|panicked|error" || true
