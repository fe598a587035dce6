#!/usr/bin/env bash
# Catch-up after a lost link: a fresh client re-attaches to a session with N journal events
# (default 100k) and receives all of them in order. Prints events/s.
# Usage: bench/catchup_bench.sh [N]   (release build of the workspace binaries is used)
set -euo pipefail
cd "$(dirname "$0")/.."
export CATCHUP_EVENTS=${1:-100000}
cargo build -q --release --workspace --bins
cargo test -q --release -p reasonix --test bench_catchup -- --ignored --nocapture 2>&1 | grep -E "catch-up|panicked|error" || true
