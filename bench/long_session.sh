#!/usr/bin/env bash
# Cache economics of a long session: a scripted 100-turn session (3 read_file steps of 5–20 KB
# per turn, 128k window) through the real binaries and the DeepSeek-like caching mock.
# Prints requests, compactions, the share of prompt tokens served from cache, and the input
# cost at DeepSeek list prices against a naive baseline (prefix and history rebuilt each turn).
# Usage: bench/long_session.sh [TURNS] [STEPS] [WINDOW]
set -euo pipefail
cd "$(dirname "$0")/.."
export LONG_TURNS=${1:-100} LONG_STEPS=${2:-3} LONG_WINDOW=${3:-128000}
# `cargo test --release` builds the binaries it runs (a separate `cargo build` would use
# other dependency features and rebuild them each time).
export REASONIX_HOST_TARGETS=x86_64-unknown-linux-musl
cargo build -q --release -p reasonix-remote
cargo test -q --release -p reasonix --test e2e_compaction -- --ignored --nocapture bench_long_session 2>&1 | grep -E "long session|panicked|error" || true
