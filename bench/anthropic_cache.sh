#!/usr/bin/env bash
# Cache economics on the Anthropic Messages wire: a scripted session of TURNS turns (default
# 50; each one read_file of a 5–20 KB file, then an answer; 128k window) through the real
# binaries and the Anthropic-like mock, whose cache reads only prefixes an earlier request's
# cache_control breakpoint wrote. Prints the share of prompt tokens read from the cache,
# written to it and sent uncached, and the input cost against an uncached session at
# Anthropic's list ratios (a write costs 1.25x input, a read 0.1x).
# Usage: bench/anthropic_cache.sh [TURNS]
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_TURNS=${1:-50}
cargo build -q -p reasonix-remote --bin reasonix-remote
cargo test -q -p reasonix --test e2e_anthropic -- --ignored --nocapture bench_anthropic_cache_share 2>&1 \
  | grep -E "anthropic cache|panicked|error" || true
