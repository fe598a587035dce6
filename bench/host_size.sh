#!/usr/bin/env bash
# Size of the static x86_64 host binary (what `reasonix ssh` uploads) at the `host` profile's
# size-oriented opt-levels "s" and "z", and what "z" costs in speed: the host's most
# CPU-bound work (the grep and glob tools over a generated tree, the same code the agent
# runs) timed with binaries built both ways, in the same run.
#   bench/host_size.sh [files=20000]
# Prints stripped, xz (as uploaded: x86 filter + preset 9e), zstd -19 and gzip -9 sizes for
# each, and the z/s ratios of the median times (runs of the two builds alternated).
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=${1:-20000}
REPS=11
TRIPLE=x86_64-unknown-linux-musl
DIR=$(mktemp -d /var/tmp/reasonix-size.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
for OPT in s z; do
  CARGO_TARGET_DIR=target/host-size-$OPT CARGO_PROFILE_HOST_OPT_LEVEL=$OPT \
    cargo build -q --profile host -p reasonix-remote --target $TRIPLE --bin reasonix-remote --example tool_bench
done
python3 - "$DIR" "$FILES" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
body = "".join(f"    let value_{i} = compute({i}); // some ordinary source text\n" for i in range(30))
for i in range(n):
    d = os.path.join(root, "src", f"m{i // 100:04d}")
    os.makedirs(d, exist_ok=True)
    extra = "    needle_marker();\n" if i % 50 == 0 else ""
    with open(os.path.join(d, f"f{i:06d}.rs"), "w") as f:
        f.write("fn main() {\n" + body + extra + "}\n")
PY
# Median wall time in ms of each build's command, the two builds' runs alternated (so a
# change in the machine's load hits both alike).
declare -A SIZES
for OPT in s z; do
  B=target/host-size-$OPT/$TRIPLE/host/reasonix-remote
  raw=$(stat -c %s "$B")
  # As uploaded: LZMA2 preset 9e after the x86 branch filter (bootstrap/src/codec.rs).
  xzs=$(xz -T1 --x86 --lzma2=preset=9e -c "$B" | wc -c)
  zst=$(zstd -19 -q -c "$B" | wc -c)
  gzs=$(gzip -9 -c "$B" | wc -c)
  echo "opt-level $OPT: stripped $raw bytes, xz $xzs, zstd $zst, gzip $gzs"
  target/host-size-$OPT/$TRIPLE/host/examples/tool_bench grep needle_marker "$DIR" >/dev/null  # warm the cache
done
median_pair() {  # $1 = tool args...; prints "median_s median_z"
  local -a S Z
  for _ in $(seq $REPS); do
    for OPT in s z; do
      local st=$(date +%s%N)
      target/host-size-$OPT/$TRIPLE/host/examples/tool_bench "$@" >/dev/null 2>&1 || true
      local ms=$(( ($(date +%s%N) - st) / 1000000 ))
      if [ $OPT = s ]; then S+=("$ms"); else Z+=("$ms"); fi
    done
  done
  python3 -c "import statistics,sys; s=[int(x) for x in sys.argv[1].split()]; z=[int(x) for x in sys.argv[2].split()]; print(statistics.median(s), statistics.median(z))" "${S[*]}" "${Z[*]}"
}
read -r gs gz < <(median_pair grep needle_marker "$DIR")
read -r ls lz < <(median_pair glob '**/*.rs' "$DIR")
echo "grep: s ${gs} ms, z ${gz} ms; glob: s ${ls} ms, z ${lz} ms (medians of $REPS alternated runs, $FILES files)"
python3 -c "print(f'RESULT z/s time: grep {$gz/max($gs,1):.2f}, glob {$lz/max($ls,1):.2f}')"
