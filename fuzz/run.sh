#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer on the stable toolchain, from the committed corpus.
#
#   fuzz/run.sh [TARGET...]             every target (or the named ones), FUZZ_SECONDS each
#   FUZZ_SECONDS=300 fuzz/run.sh sse    a longer local run of one target
#   FUZZ_MERGE=1 fuzz/run.sh frame      also merge new coverage into fuzz/corpus/frame
#
# FUZZ_JOBS targets run at once (default 2). New inputs go to a scratch dir (the committed
# corpus is only read unless FUZZ_MERGE=1); a crash writes target/fuzz-artifacts/<target>-*,
# prints it base64-encoded (so a CI log keeps it) and makes the script fail. Commit such an
# input to fuzz/corpus/<target>/ once it is fixed: `cargo nextest run -p reasonix-fuzz`
# replays every corpus file.
#
# Only the workspace crates are instrumented (fuzz/sancov-rustc), in the dev profile at
# opt-level 2: the dependencies of the ordinary `cargo build --workspace` are reused as they
# are, and the instrumented crates get their own artifacts (another opt-level), so the normal
# build is not invalidated.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${FUZZ_SECONDS:-15}
jobs=${FUZZ_JOBS:-2}
all=(frame link preamble handshake mcp_lines ssh_config known_hosts policy_rules bash_split sse)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")

export RUSTC_WORKSPACE_WRAPPER="$PWD/fuzz/sancov-rustc"
export CARGO_PROFILE_DEV_OPT_LEVEL=2
bins=()
for t in "${targets[@]}"; do bins+=(--bin "fuzz_$t"); done
cargo build -q -p reasonix-fuzz --features libfuzzer "${bins[@]}"
unset RUSTC_WORKSPACE_WRAPPER CARGO_PROFILE_DEV_OPT_LEVEL

out=target/fuzz-runs
art=target/fuzz-artifacts
rm -rf "$out"
mkdir -p "$out" "$art"

run_one() {
  local t=$1
  local work="$out/$t.corpus"
  mkdir -p "$work"
  # libFuzzer writes new inputs to the first corpus dir only.
  set +e
  "target/debug/fuzz_$t" "$work" "fuzz/corpus/$t" \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
    -print_final_stats=1 -artifact_prefix="$art/$t-" >"$out/$t.log" 2>&1
  local rc=$?
  set -e
  echo "$rc" >"$out/$t.rc"
  if [ "${FUZZ_MERGE:-0}" = 1 ] && [ "$rc" = 0 ]; then
    "target/debug/fuzz_$t" -merge=1 "fuzz/corpus/$t" "$work" >>"$out/$t.log" 2>&1 || true
  fi
}

running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

failed=0
printf '%-14s %12s %10s %8s %s\n' target executions exec/s corpus result
for t in "${targets[@]}"; do
  log="$out/$t.log"
  rc=$(cat "$out/$t.rc")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  found=$(find "$out/$t.corpus" -type f | wc -l)
  result=ok
  if [ "$rc" != 0 ]; then
    result="FAILED (exit $rc)"
    failed=1
  fi
  printf '%-14s %12s %10s %8s %s\n' "$t" "${execs:-?}" "${rate:-?}" "+$found" "$result"
done
if [ "$failed" = 1 ]; then
  for t in "${targets[@]}"; do
    [ "$(cat "$out/$t.rc")" = 0 ] && continue
    echo "---- $t (last lines of $out/$t.log)"
    tail -40 "$out/$t.log"
    for f in "$art/$t-"*; do
      [ -f "$f" ] || continue
      echo "---- crash input $f (base64):"
      base64 -w 76 "$f"
    done
  done
  exit 1
fi
