#!/usr/bin/env bash
# Benchmarks the built-in grep/glob tools against rg / grep -r / find on a generated 50k-file
# tree, and sandboxed vs unsandboxed `bash true`, all in the same run on the same machine.
#
#   bench/tools_bench.sh [files=50000]
#
# Env: TOOL_BENCH_BIN=path to a prebuilt tool_bench example (else built with cargo --release),
#      BENCH_DIR=where to generate the tree (default: a temp dir, removed afterwards).
set -euo pipefail
FILES=${1:-50000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REPS=3

if [[ -z "${TOOL_BENCH_BIN:-}" ]]; then
    (cd "$ROOT" && cargo build -q --release -p reasonix-remote --example tool_bench)
    TOOL_BENCH_BIN="$ROOT/target/release/examples/tool_bench"
fi
command -v rg >/dev/null || { echo "ripgrep (rg) is needed: apt-get install -y ripgrep" >&2; exit 1; }

DIR=${BENCH_DIR:-$(mktemp -d /var/tmp/reasonix-bench.XXXXXX)}
cleanup() { [[ -z "${BENCH_DIR:-}" ]] && rm -rf "$DIR"; }
trap cleanup EXIT

# The tree: FILES files in directories of 100, three quarters .rs, one in 50 with a match,
# plus an ignored build/ directory that grep and glob must skip.
if [[ ! -f "$DIR/.generated-$FILES" ]]; then
    python3 - "$DIR" "$FILES" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
body = "".join(f"    let value_{i} = compute({i}); // some ordinary source text\n" for i in range(30))
for i in range(n):
    d = os.path.join(root, "src", f"m{i // 100:04d}")
    os.makedirs(d, exist_ok=True)
    ext = "rs" if i % 4 else "txt"
    extra = "    needle_marker();\n" if i % 50 == 0 else ""
    with open(os.path.join(d, f"f{i:06d}.{ext}"), "w") as f:
        f.write("fn main() {\n" + body + extra + "}\n")
os.makedirs(os.path.join(root, "build"), exist_ok=True)
for i in range(1000):
    with open(os.path.join(root, "build", f"gen{i}.rs"), "w") as f:
        f.write("needle_marker();\n")
with open(os.path.join(root, ".gitignore"), "w") as f:
    f.write("build/\n")
PY
    touch "$DIR/.generated-$FILES"
fi

# best-of-REPS wall time in ms of a command (output discarded). Every timed command here
# finds something, so any failure stops the benchmark instead of timing an error.
best_ms() {
    local best=
    for _ in $(seq $REPS); do
        local s e ms rc=0
        s=$(date +%s%N); "$@" >/dev/null 2>&1 || rc=$?; e=$(date +%s%N)
        if (( rc != 0 )); then echo "timed command failed (exit $rc): $*" >&2; exit 1; fi
        ms=$(( (e - s) / 1000000 ))
        if [[ -z "$best" || $ms -lt $best ]]; then best=$ms; fi
    done
    echo "$best"
}
ratio() { python3 -c "print(f'{$1/max($2,1):.2f}')"; }

echo "tree: $FILES files in $DIR ($(nproc) cores)"
"$TOOL_BENCH_BIN" grep needle_marker "$DIR" >/dev/null   # warm the page cache
rg -n needle_marker "$DIR" >/dev/null || true

ours_grep=$(best_ms "$TOOL_BENCH_BIN" grep needle_marker "$DIR")
rg_grep=$(best_ms rg -n needle_marker "$DIR")
gnu_grep=$(best_ms grep -rn needle_marker "$DIR" --exclude-dir=build)
ours_glob=$(best_ms "$TOOL_BENCH_BIN" glob '**/*.rs' "$DIR")
find_glob=$(best_ms find "$DIR" -name '*.rs' -not -path '*/build/*')
echo "grep: ours ${ours_grep} ms, rg ${rg_grep} ms, grep -r ${gnu_grep} ms  (ours/rg $(ratio "$ours_grep" "$rg_grep"), ours/grep-r $(ratio "$ours_grep" "$gnu_grep"))"
echo "glob: ours ${ours_glob} ms, find ${find_glob} ms  (ours/find $(ratio "$ours_glob" "$find_glob"))"
echo "grep result lines: ours $("$TOOL_BENCH_BIN" grep needle_marker "$DIR") (cap 200 + trailer), rg $(rg -n needle_marker "$DIR" | wc -l)"

off_ms=$("$TOOL_BENCH_BIN" bash true "$DIR" 20 off)
bwrap_ms=$("$TOOL_BENCH_BIN" bash true "$DIR" 20 enforce)
echo "bash true: sandboxed ${bwrap_ms} ms/call, unsandboxed ${off_ms} ms/call  (ratio $(ratio "$bwrap_ms" "$off_ms"))"
