#!/bin/sh
# Checkpoint cost on a generated 10k-file workspace with a 3-file change per turn.
# Usage: bench/checkpoint_bench.sh [FILES] [TURNS]
set -eu
cd "$(dirname "$0")/.."
echo "git: $(git --version 2>/dev/null || echo 'not installed')"
cargo run --quiet --release -p reasonix-remote --example checkpoint_bench -- "${1:-10000}" "${2:-10}"
