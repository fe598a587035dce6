#!/usr/bin/env bash
# Delta upgrades of the host binary between two real consecutive builds:
#   A = `cargo build --profile host -p reasonix-remote --target x86_64-unknown-linux-musl` of
#       this tree; B = the same in a scratch copy of forward/ + remote-agent/ with one string
#       constant changed (a small host-side code change; the build id changes with it).
# Reports the delta size against the full compressed upload, and the time of the upgrade
# install (delta vs whole binary) over the same shaped link as bench/ssh_bootstrap.sh:
# 20 Mbit/s (tc tbf), +25 ms each way (a delaying TCP proxy; this kernel has no netem).
# Usage (as root): bench/upgrade_delta.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TRIPLE=x86_64-unknown-linux-musl
T=$(mktemp -d)
NS=rxdelta$$
U=rxd$$
. bench/lib/shaped_link.sh
trap shaped_link_down EXIT
echo "== build A (this tree)"
cargo build -q --profile host -p reasonix-remote --target $TRIPLE
cp target/$TRIPLE/host/reasonix-remote "$T/A"
echo "== build B (scratch copy, one string constant changed)"
mkdir -p "$T/src"
cp -a forward remote-agent Cargo.lock .cargo "$T/src/"
python3 - "$T/src" <<'PY'
import re, sys, pathlib
root = pathlib.Path(sys.argv[1])
ws = pathlib.Path("Cargo.toml").read_text()
ws = re.sub(r'members = \[[^\]]*\]', 'members = ["forward", "remote-agent"]', ws)
(root / "Cargo.toml").write_text(ws)
main = root / "remote-agent/src/main.rs"
s = main.read_text()
old = 'about = "Reasonix host process"'
assert old in s, "the string to change moved; update bench/upgrade_delta.sh"
main.write_text(s.replace(old, 'about = "Reasonix host process (next build)"'))
PY
# Same dependency artifacts as A (a target dir of its own so A's stays as it is).
cargo build -q --profile host -p reasonix-remote --target $TRIPLE \
  --manifest-path "$T/src/Cargo.toml" --target-dir "$ROOT/target/bench-next-build"
cp "$ROOT/target/bench-next-build/$TRIPLE/host/reasonix-remote" "$T/B"
cargo build -q --release -p reasonix-bootstrap --example upgrade_delta
EX=$ROOT/target/release/examples/upgrade_delta
echo "A: $(stat -c %s "$T/A") bytes  B: $(stat -c %s "$T/B") bytes  (cmp: $(cmp -l "$T/A" "$T/B" 2>/dev/null | wc -l) bytes differ in place)"

echo "== shaped link"
shaped_link_up
ns "$EX" "$T/A" "$T/B" "$U@127.0.0.1" \
  -p 2223 -i "$T/home/.ssh/id" -k "$T/home/.ssh/known_hosts"
