#!/bin/sh
# Model forwarding overhead: time to first token of a provider request made on the host and
# forwarded through the link (host daemon -> SSH link -> laptop gateway -> mock provider ->
# back over the link), against the same requests made directly from the laptop's gateway to
# the mock, in the same run; a real sshd, client and mock provider inside a private network
# namespace, the link through the testkit delay proxy (needs root, iproute2, openssh).
# Usage: bench/ttft_bench.sh [TURNS] [DELAY_MS]
#   TURNS    measured turns (default 10)
#   DELAY_MS latency added each way (default 25, i.e. a 50 ms RTT; no tc netem here)
#   PROFILE=debug  measure debug builds instead of release builds (both ends)
# Prints both series and a final "RESULT ttft: ..." line (difference link - direct, in ms and
# in RTTs; the goal is <= 1 RTT + 5 ms).
set -eu
cd "$(dirname "$0")/.."
if [ "${PROFILE:-release}" = debug ]; then
  cargo build --quiet --workspace --bins
  cargo build --quiet -p reasonix-remote --target x86_64-unknown-linux-musl
  REL=
else
  # `cargo test --release` builds `reasonix` and, through local/build.rs, the static
  # x86_64 host binary (a separate `cargo build` would use other dependency features and
  # make every run rebuild both).
  export REASONIX_HOST_TARGETS=x86_64-unknown-linux-musl
  REL=--release
fi
BENCH_TURNS="${1:-10}" BENCH_DELAY_MS="${2:-25}" \
  cargo test --quiet $REL -p reasonix --test ttft_bench -- --ignored --nocapture --test-threads 1 2>&1 \
  | grep -E '^(link|direct|request|RESULT|thread|test result|---- )|panicked'
