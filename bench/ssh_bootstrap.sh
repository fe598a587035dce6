#!/usr/bin/env bash
# Cold bootstrap and warm attach over SSH, as ratios against OpenSSH baselines measured in the
# same run, on a shaped link inside a private network namespace:
#   - 20 Mbit/s (tc tbf on the namespace loopback) and ~50 ms RTT (this kernel has no
#     `tc netem`, so a small delaying TCP proxy adds 25 ms each way);
#   - cold: `reasonix remote ping` on a host with nothing of ours (upload + verify + launch +
#     attach + handshake + one request)  vs  `scp` of the same uncompressed binary;
#   - warm: the same command with the binary installed and the daemon running  vs
#     `ssh host true`.
# A warm attach is one exec since #17: the attach script checks the build and `exec`s the
# bridge with the client's Hello (see docs/REMOTE.md, "Attach"); `WARM_ONLY=1` skips the cold
# runs (one install, then N warm attaches against N `ssh host true`).
# Usage (as root, after `cargo build --release --workspace --bins`): bench/ssh_bootstrap.sh [N]
#   TRACE=FILE  also one traced cold run, its laptop debug log copied to FILE
#   RX=path/to/reasonix BIN=path/to/reasonix-remote-<musl>  other binaries (e.g. a debug build:
#   RX=target/debug/reasonix BIN=target/x86_64-unknown-linux-musl/debug/reasonix-remote)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-5}
ROOT=$PWD
RX=${RX:-$ROOT/target/release/reasonix}
BIN=${BIN:-$ROOT/target/release/reasonix-remote-x86_64-unknown-linux-musl}
WARM_ONLY=${WARM_ONLY:-0}
[ -x "$RX" ] && [ -f "$BIN" ] || { echo "build first: cargo build --release --workspace --bins"; exit 2; }
export REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL=$BIN
NS=rxbench$$
U=rxb$$
T=$(mktemp -d)
. bench/lib/shaped_link.sh
trap shaped_link_down EXIT
shaped_link_up
install -d -m 700 -o $U -g $U /home/$U/ws
SSHO=("${RXO[@]}" -o BatchMode=yes)
median() { python3 -c 'import sys,statistics; print(f"{statistics.median(map(float,sys.argv[1:])):.3f}")' "$@"; }
# Time one command; a command that fails stops the bench (a failure is fast, and timing it
# would report a figure for something that did not happen).
t() {
  local s=$(date +%s.%N) err
  if ! err=$("$@" 2>&1 >/dev/null); then echo "FAILED: $* : $err" >&2; exit 1; fi
  local e=$(date +%s.%N); echo "$e - $s" | bc
}
cold=(); scpt=(); warm=(); sshtrue=()
if [ "$WARM_ONLY" = 1 ]; then
  ns "$RX" remote ping "$U@127.0.0.1:ws" -F none "${RXO[@]}" >/dev/null
fi
for i in $(seq $N); do
  if [ "$WARM_ONLY" != 1 ]; then
    # Stop the daemon (by the pids the user's processes have in the namespace), then wipe.
    for p in $(ip netns pids $NS); do
      [ "$(stat -c %U /proc/$p 2>/dev/null)" = "$U" ] && kill $p 2>/dev/null || true
    done
    sleep 0.3; rm -rf /home/$U/.reasonix "$T/home/.reasonix/cache"
    cold+=($(t ns "$RX" remote ping "$U@127.0.0.1:ws" -F none "${RXO[@]}" ))
    scpt+=($(t ns scp -q -P 2223 -i "$T/home/.ssh/id" -o UserKnownHostsFile="$T/home/.ssh/known_hosts" -o BatchMode=yes "$BIN" "$U@127.0.0.1:scp-copy-$i"))
  fi
  warm+=($(t ns "$RX" remote ping "$U@127.0.0.1:ws" -F none "${RXO[@]}"))
  sshtrue+=($(t ns ssh "${SSHO[@]}" "$U@127.0.0.1" true))
  if [ "$WARM_ONLY" != 1 ]; then echo -n "run $i: cold ${cold[-1]}s scp ${scpt[-1]}s "; else echo -n "run $i: "; fi
  echo "warm ${warm[-1]}s ssh-true ${sshtrue[-1]}s"
done
# TRACE=FILE: one more cold run with the laptop's debug trace, copied to FILE (timestamps of
# every SSH message, exec and upload step).
if [ -n "${TRACE:-}" ] && [ "$WARM_ONLY" != 1 ]; then
  for p in $(ip netns pids $NS); do
    [ "$(stat -c %U /proc/$p 2>/dev/null)" = "$U" ] && kill $p 2>/dev/null || true
  done
  sleep 0.3; rm -rf /home/$U/.reasonix "$T/home/.reasonix"
  echo "traced cold run: $(t ns env RUST_LOG="${TRACE_FILTER:-debug}" REASONIX_HOME="$T/home/.reasonix" "$RX" remote ping "$U@127.0.0.1:ws" -F none "${RXO[@]}")s"
  cp "$T/home/.reasonix/logs/reasonix.log" "$TRACE"
fi
# A sanity run that must succeed (prints the daemon status).
ns "$RX" remote ping "$U@127.0.0.1:ws" -F none "${RXO[@]}" | head -3
w=$(median "${warm[@]}"); b=$(median "${sshtrue[@]}")
echo "binary: $(stat -c %s "$BIN") bytes (as uploaded: xz $(stat -c %s "$BIN.xz" 2>/dev/null || echo -), zstd $(stat -c %s "$BIN.zst" 2>/dev/null || echo -), gzip $(stat -c %s "$BIN.gz" 2>/dev/null || echo -)); link: 20 Mbit/s, +${DELAY_MS:-25} ms each way; median of $N"
if [ "$WARM_ONLY" != 1 ]; then
  c=$(median "${cold[@]}"); s=$(median "${scpt[@]}")
  echo "cold bootstrap (remote ping, fresh host): ${c}s   scp of the binary: ${s}s   ratio $(echo "scale=3; $c / $s" | bc)"
fi
echo "warm attach   (remote ping, installed)  : ${w}s   ssh host true    : ${b}s   ratio $(echo "scale=3; $w / $b" | bc)"
