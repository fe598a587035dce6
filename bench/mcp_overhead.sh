#!/bin/sh
# MCP overhead benchmark: per-call latency of the same real MCP server placed on the host
# (workspace reasonix.toml [[mcp]]) and on the laptop (run_on = "laptop", tunnelled over the
# SSH link), in one `reasonix run --ssh` session through a delay proxy, with a real sshd,
# client and mock provider inside a private network namespace (needs root, iproute2,
# iptables, openssh).
# Usage: bench/mcp_overhead.sh [CALLS] [DELAY_MS]
#   CALLS    measured calls per placement (default 20)
#   DELAY_MS latency added each way (default 25, i.e. a 50 ms RTT; no tc netem here)
# Server: mcp-server-time (get_current_time) when the python3 on PATH has it: its installed
# files are copied to target/mcp-bench/site so the throwaway host user can read them, and both
# placements run `/usr/bin/python3 -m mcp_server_time` from that copy (set BENCH_MCP_PYTHON
# for another interpreter of the same version). Otherwise mcp-server-everything (get-sum).
# Prints per-placement medians and a final "RESULT mcp-overhead: ..." line.
set -eu
cd "$(dirname "$0")/.."
cargo build --quiet --workspace --bins
cargo build --quiet -p reasonix-remote --target x86_64-unknown-linux-musl
site="$PWD/target/mcp-bench/site"
if python3 -c 'import mcp_server_time' 2>/dev/null; then
  rm -rf "$site"
  mkdir -p "$site"
  # Copy the files of mcp-server-time and its installed requirements (not their extras).
  python3 - "$site" <<'PY'
import importlib.metadata as md, pathlib, re, shutil, sys
dest = pathlib.Path(sys.argv[1])
seen, todo = set(), ["mcp-server-time"]
while todo:
    name = todo.pop()
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in seen:
        continue
    seen.add(key)
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        continue  # optional or other-platform requirement, not installed
    for req in dist.requires or []:
        if ";" in req and "extra" in req.split(";", 1)[1]:
            continue
        todo.append(re.match(r"[A-Za-z0-9_.-]+", req).group(0))
    for f in dist.files or []:
        src = pathlib.Path(f.locate())
        if not str(f).startswith("..") and src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)
PY
  chmod -R a+rX "$site"
  export BENCH_MCP_SITE="$site"
  export BENCH_MCP_PYTHON="${BENCH_MCP_PYTHON:-/usr/bin/python3}"
else
  echo "mcp-server-time not importable by python3: using mcp-server-everything"
fi
BENCH_CALLS="${1:-20}" BENCH_DELAY_MS="${2:-25}" \
  cargo test --quiet -p reasonix --test reconnect_mcp_bench -- --ignored --nocapture --test-threads 1 2>&1 \
  | grep -E '^(host|laptop|RESULT|thread|test result|---- )|panicked|assert'
