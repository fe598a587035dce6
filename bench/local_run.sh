#!/usr/bin/env bash
# Foundation figures, measured in one run on this machine:
#  - size of the static (musl, stripped) reasonix-remote,
#  - idle RSS of the daemon after serving turns,
#  - wall time of `reasonix run` for a one-tool turn against the mock provider in local mode,
#    as a ratio against spawning `reasonix-remote --version` (process start baseline).
# Usage: bench/local_run.sh [RUNS]   (needs `cargo build --release --workspace --bins`)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-10}
REL=target/release
ROOT=$PWD
[ -x $REL/reasonix ] || { echo "build first: cargo build --release --workspace --bins"; exit 2; }
MUSL=$(ls $PWD/target/host-musl/x86_64-unknown-linux-musl/release/reasonix-remote \
          $PWD/target/x86_64-unknown-linux-musl/release/reasonix-remote 2>/dev/null | head -1 || true)
tmp=$(mktemp -d); trap 'kill $mockpid 2>/dev/null; [ -n "${dpid:-}" ] && kill $dpid 2>/dev/null; rm -rf "$tmp"' EXIT
python3 - "$RUNS" > "$tmp/script.json" <<'PY'
import json, sys
runs = int(sys.argv[1]) + 1
out = []
for i in range(runs):
    out.append({"type": "tool_calls", "calls": [{"id": f"c{i}", "name": "ls", "arguments": "{\"path\": \".\"}"}], "split": 4})
    out.append({"type": "text", "chunks": ["listed ", "the folder"]})
print(json.dumps(out))
PY
cargo build -q --release -p reasonix-testkit --bin mock-provider
$REL/mock-provider "$tmp/script.json" > "$tmp/mock.url" 2>/dev/null &
mockpid=$!
for _ in $(seq 50); do [ -s "$tmp/mock.url" ] && break; sleep 0.1; done
url=$(head -1 "$tmp/mock.url")
mkdir -p "$tmp/home" "$tmp/ws"
cat > "$tmp/home/config.toml" <<TOML
default_model = "mock/m"
[[providers]]
name = "mock"
kind = "openai"
base_url = "$url"
models = ["m"]
default = "m"
api_key_env = "BENCH_KEY"
TOML
export REASONIX_HOME="$tmp/home" BENCH_KEY=sk-bench
unset XDG_RUNTIME_DIR
cd "$tmp/ws"
# Warm-up (starts the daemon).
$ROOT/$REL/reasonix run --yolo "list the folder" >/dev/null 2>&1
python3 - "$RUNS" "$ROOT/$REL" <<'PY'
import subprocess, sys, time, statistics
runs, rel = int(sys.argv[1]), sys.argv[2]
def timeit(cmd):
    t = []
    for _ in range(runs):
        s = time.perf_counter(); subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True); t.append(time.perf_counter() - s)
    return statistics.median(t)
base = timeit([f"{rel}/reasonix-remote", "--version"])
turn = timeit([f"{rel}/reasonix", "run", "--yolo", "list the folder"])
print(f"baseline  reasonix-remote --version : {base*1000:8.1f} ms (median of {runs})")
print(f"one-tool turn  reasonix run (local) : {turn*1000:8.1f} ms (median of {runs})  ratio {turn/base:.1f}x")
PY
dpid=$(python3 -c "import json,glob; print(json.load(open(glob.glob('$tmp/home/sessions/*/daemon.json')[0]))['pid'])")
sleep 1
echo "daemon idle RSS                       : $(awk '/VmRSS/{print $2" "$3}' /proc/$dpid/status)"
if [ -n "$MUSL" ]; then
  echo "static reasonix-remote (musl, stripped): $(stat -c %s "$MUSL") bytes ($(file -b "$MUSL" | cut -c1-60))"
fi
