#!/usr/bin/env bash
# Two-model cache economics (issue 38 §2): a session of TURNS turns (default 50; every other
# turn planned by the planner model, the rest direct questions) through the real binaries and
# the caching OpenAI-wire mock, with default_model and [agent] planner_model two models of one
# provider. Checks that each model's requests extend its own previous request byte for byte
# (switching between them never invalidates either cache) and prints, per model, the share of
# prompt tokens served from the cache (the bar: at least 90 % each).
# Usage: bench/planner_cache.sh [TURNS]
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_TURNS=${1:-50}
export CARGO_INCREMENTAL=0
cargo build -q -p reasonix-remote --bin reasonix-remote
cargo test -q -p reasonix --test e2e_planner -- --ignored --nocapture bench_planner_cache_share 2>&1 \
  | grep -E "planner cache|panicked|error" || true
