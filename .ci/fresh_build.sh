#!/usr/bin/env bash
# Issue 31: README's first command, on a fresh machine, gives a `reasonix` that reaches hosts.
#
# The fresh machine, imitated (docs/TESTING.md of the design notes): a clean clone of this
# checkout (with its uncommitted changes applied, so the build is of the tree under test);
# RUSTUP_HOME = the default toolchain only, with the musl targets removed (its big files
# hard-linked from the real one, rustup's own records copied, so nothing done here reaches
# the real toolchain); an empty CARGO_HOME (crates come from the registry); the cross gcc
# and musl-gcc hidden (bwrap binds an empty file over them); a minimal environment without
# RUSTUP_AUTO_INSTALL. Then README's first command's build, timed, within a budget; the
# release binaries' sizes, checked against the limits; then local/tests/fresh_build.rs runs
# that build's `reasonix` (a local turn, `reasonix run --ssh` to an x86_64 and an aarch64
# host of the test sshd, and the missing-binary message).
#
#   .ci/fresh_build.sh [--keep] [--aarch64-out PATH] [--fallback]
#     --keep             leave the work folder (clone, homes, build log) for a look
#     --aarch64-out PATH copy the aarch64 host binary it built there (CI's tests use it)
#     --fallback         then also the way without automatic installs (two more compiles of
#                        `reasonix`, so not in CI): with a target missing and
#                        RUSTUP_AUTO_INSTALL=0 the build prints one command, and running
#                        that command brings the host binary back
#   FRESH_BUILD_BUDGET   seconds the build may take (default 2700: 585 s measured on 2 idle
#                        cores, 1057 s at load 6, over 2400 s at load 10)
# Needs root (or user namespaces) for bwrap, and network (crates.io, static.rust-lang.org).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUDGET=${FRESH_BUILD_BUDGET:-2700}
KEEP=0
FALLBACK=0
ARM_OUT=
while [ $# -gt 0 ]; do
  case $1 in
    --keep) KEEP=1 ;;
    --aarch64-out) ARM_OUT=$(realpath -m "$2"); shift ;;
    --fallback) FALLBACK=1 ;;
    *) echo "usage: $0 [--keep] [--aarch64-out PATH] [--fallback]" >&2; exit 2 ;;
  esac
  shift
done
MUSL=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl)
# Goals for what `reasonix ssh` uploads (issue 17; docs/REMOTE.md "Architectures"). Wave 3
# grew the host past them; the host was slimmed back under them (both architectures), so a
# binary over them fails the stage again (after the RESULT lines naming it).
MAX_STRIPPED=6000000
MAX_XZ=2000000

WORK=$(mktemp -d /var/tmp/reasonix-fresh.XXXXXX)
cleanup() { if [ $KEEP = 1 ]; then echo "fresh build: kept $WORK"; else rm -rf "$WORK"; fi; }
trap cleanup EXIT
say() { echo "fresh build: $*"; }

# --- the toolchain homes -------------------------------------------------------------------
REAL_RUSTUP_HOME=$(rustup show home)
DEFAULT=$(rustup default | cut -d' ' -f1)
SRC_TC=$(readlink -f "$REAL_RUSTUP_HOME/toolchains/$DEFAULT")
RH=$WORK/rustup
CH=$WORK/cargo
mkdir -p "$RH/toolchains" "$RH/update-hashes" "$CH/bin" "$WORK/home"
printf 'version = "12"\ndefault_toolchain = "%s"\nprofile = "default"\n' "$DEFAULT" >"$RH/settings.toml"
cp "$REAL_RUSTUP_HOME/update-hashes/$DEFAULT" "$RH/update-hashes/" 2>/dev/null || true
# Hard links for the toolchain's files (1.8 GB; rustup only ever removes or adds those), real
# copies of the records it rewrites in place (lib/rustlib/components, manifests).
cp -al "$SRC_TC" "$RH/toolchains/$DEFAULT" 2>/dev/null || cp -a "$SRC_TC" "$RH/toolchains/$DEFAULT"
for f in "$RH/toolchains/$DEFAULT/lib/rustlib/"*; do
  [ -f "$f" ] && cp --remove-destination "$SRC_TC/lib/rustlib/$(basename "$f")" "$f"
done
cp "$(readlink -f "$(command -v rustup)")" "$CH/bin/rustup"
for p in cargo rustc rustdoc rustfmt cargo-fmt cargo-clippy clippy-driver; do ln -s rustup "$CH/bin/$p"; done

# The fresh machine's environment: nothing of ours, a network proxy if the machine needs one.
FRESH_ENV=(env -i "HOME=$WORK/home" "USER=${USER:-root}" LANG=C.UTF-8 TERM=dumb
  "PATH=$CH/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  "CARGO_HOME=$CH" "RUSTUP_HOME=$RH")
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  [ -n "${!v:-}" ] && FRESH_ENV+=("$v=${!v}")
done
"${FRESH_ENV[@]}" rustup target remove "${MUSL[@]}" >/dev/null 2>&1 || true
for t in "${MUSL[@]}"; do
  if "${FRESH_ENV[@]}" rustup target list --installed | grep -qx "$t"; then
    echo "fresh build: could not remove $t from the fresh toolchain" >&2; exit 1
  fi
done
say "toolchain $("${FRESH_ENV[@]}" rustc --version) with targets: $("${FRESH_ENV[@]}" rustup target list --installed | tr '\n' ' ')"

# --- tools a fresh machine does not have ---------------------------------------------------
touch "$WORK/empty"
HIDE=(--die-with-parent --dev-bind / /)
declare -A hidden=()
for t in /usr/bin/aarch64-linux-gnu-gcc /usr/bin/aarch64-linux-gnu-ld /usr/bin/musl-gcc \
  /usr/bin/x86_64-linux-musl-gcc; do
  [ -e "$t" ] || continue
  real=$(readlink -f "$t")
  [ -n "${hidden[$real]:-}" ] && continue
  hidden[$real]=1
  HIDE+=(--bind "$WORK/empty" "$real")
done
IN_FRESH=(bwrap "${HIDE[@]}" -- "${FRESH_ENV[@]}")
"${IN_FRESH[@]}" true || { echo "fresh build: bwrap cannot make the fresh machine" >&2; exit 1; }
for t in aarch64-linux-gnu-gcc musl-gcc x86_64-linux-musl-gcc; do
  if "${IN_FRESH[@]}" sh -c "$t --version" >/dev/null 2>&1; then
    echo "fresh build: $t still runs inside the fresh machine" >&2; exit 1
  fi
done
say "hidden: ${!hidden[*]}"

# --- a clean clone of the tree under test --------------------------------------------------
git clone -q --no-hardlinks "$ROOT" "$WORK/src"
changes=$( (git -C "$ROOT" diff HEAD --name-only; git -C "$ROOT" ls-files -o --exclude-standard) | wc -l)
if [ "$changes" -gt 0 ]; then
  git -C "$ROOT" diff HEAD --binary | git -C "$WORK/src" apply --binary --allow-empty
  (cd "$ROOT" && git ls-files -z -o --exclude-standard | tar --null -T - -c) | tar -C "$WORK/src" -x
  say "clone of $(git -C "$ROOT" rev-parse --short HEAD) with $changes uncommitted file(s) applied"
else
  say "clone of $(git -C "$ROOT" rev-parse --short HEAD)"
fi

# --- README's first command ----------------------------------------------------------------
FIRST=$(sed -n '/^```sh$/{n;p;q}' "$ROOT/README.md")
BUILD=${FIRST%% && *}
[ "$BUILD" = "cargo build --release --workspace --bins" ] || {
  echo "fresh build: README's first command changed ($FIRST); update this script" >&2; exit 1; }
load0=$(cut -d' ' -f1-3 /proc/loadavg)
say "running \`$BUILD\` (budget ${BUDGET} s, $(nproc) cores)"
# CPU seconds of this script's finished children (user + system), from bash's `times`: the
# wall time depends on what else the machine runs, the CPU time much less.
cpu_mark() {
  times >"$WORK/times"  # here, not in a pipeline or $(...): a subshell would report its own
  CPU=$(tail -1 "$WORK/times" | sed 's/m/ /g; s/s//g' | awk '{ printf "%d", $1 * 60 + $2 + $3 * 60 + $4 }')
}
start=$(date +%s)
cpu_mark; cpu0=$CPU
set +e
(cd "$WORK/src" && timeout "$BUDGET" "${IN_FRESH[@]}" $BUILD) >"$WORK/build.log" 2>&1
rc=$?
set -e
took=$(( $(date +%s) - start ))
cpu_mark; cpu_took=$(( CPU - cpu0 ))
grep -E '^warning: reasonix@' "$WORK/build.log" || true
if [ $rc != 0 ]; then
  tail -40 "$WORK/build.log"
  [ $rc = 124 ] && echo "fresh build: over the budget of $BUDGET s" >&2
  echo "fresh build: README's first command failed (exit $rc)" >&2; exit 1
fi
echo "RESULT fresh build: README's first command built in $took s on $(nproc) cores ($cpu_took CPU s; load average before: $load0)"
for t in "${MUSL[@]}"; do
  "${FRESH_ENV[@]}" rustup target list --installed | grep -qx "$t" \
    || { echo "fresh build: the build did not install $t" >&2; exit 1; }
done

# Built once, nothing to do the second time: the build script does not run again for what it
# installed or wrote itself.
(cd "$WORK/src" && "${IN_FRESH[@]}" $BUILD) >"$WORK/build2.log" 2>&1 \
  || { cat "$WORK/build2.log"; echo "fresh build: the second build failed" >&2; exit 1; }
if grep -E '^ *Compiling ' "$WORK/build2.log"; then
  echo "fresh build: the second build compiled again" >&2; exit 1
fi

REL=$WORK/src/target/release
over=0
for t in "${MUSL[@]}"; do
  b=$REL/reasonix-remote-$t
  [ -f "$b" ] || { echo "fresh build: no $b" >&2; exit 1; }
  raw=$(stat -c %s "$b"); xzs=$(stat -c %s "$b.xz")
  echo "RESULT fresh build: $t host binary $raw bytes stripped, $xzs bytes as uploaded (.xz)"
  [ "$raw" -le $MAX_STRIPPED ] && [ "$xzs" -le $MAX_XZ ] \
    || { echo "RESULT fresh build: GOAL MISSED: $t host binary over $MAX_STRIPPED bytes stripped / $MAX_XZ as uploaded"; over=1; }
done
[ $over = 0 ] || { echo "fresh build: a host binary is over the size goals (docs/REMOTE.md \"Architectures\")" >&2; exit 1; }
if [ -n "$ARM_OUT" ]; then
  mkdir -p "$(dirname "$ARM_OUT")"
  cp "$REL/reasonix-remote-aarch64-unknown-linux-musl" "$ARM_OUT"
fi

# --- that build reaches hosts --------------------------------------------------------------
(cd "$ROOT" && REASONIX_FRESH_RELEASE_DIR=$REL \
  cargo nextest run -p reasonix --test fresh_build --run-ignored only --no-fail-fast)

# --- without automatic installs ------------------------------------------------------------
[ $FALLBACK = 1 ] || exit 0
ARM=aarch64-unknown-linux-musl
arm_sha=$(sha256sum <"$REL/reasonix-remote-$ARM")
"${FRESH_ENV[@]}" rustup target remove $ARM >/dev/null 2>&1
# The state of a build that ran while the target was missing: its script runs again (here
# because one of its inputs changed) and cannot add the target.
touch "$WORK/src/.cargo/config.toml"
(cd "$WORK/src" && "${IN_FRESH[@]}" RUSTUP_AUTO_INSTALL=0 $BUILD) >"$WORK/fallback1.log" 2>&1 \
  || { tail -40 "$WORK/fallback1.log"; echo "fresh build: the build without $ARM failed" >&2; exit 1; }
grep -E '^warning: reasonix@' "$WORK/fallback1.log" || true
[ ! -e "$REL/reasonix-remote-$ARM" ] || { echo "fresh build: a binary for a missing target stayed" >&2; exit 1; }
cmd=$(sed -n 's/^warning: reasonix@[^:]*: to build them, run in this folder: //p' "$WORK/fallback1.log")
[ "$cmd" = "rustup target add $ARM && cargo build --release --workspace --bins" ] \
  || { echo "fresh build: the build printed '$cmd'" >&2; exit 1; }
say "running the printed command: $cmd"
(cd "$WORK/src" && "${IN_FRESH[@]}" bash -c "$cmd") >"$WORK/fallback2.log" 2>&1 \
  || { tail -40 "$WORK/fallback2.log"; echo "fresh build: the printed command failed" >&2; exit 1; }
[ "$(sha256sum <"$REL/reasonix-remote-$ARM")" = "$arm_sha" ] \
  || { echo "fresh build: the printed command did not bring the $ARM binary back" >&2; exit 1; }
(cd "$WORK/src" && "${IN_FRESH[@]}" $BUILD) >"$WORK/fallback3.log" 2>&1 \
  || { cat "$WORK/fallback3.log"; echo "fresh build: the build after the printed command failed" >&2; exit 1; }
if grep -E '^ *Compiling ' "$WORK/fallback3.log"; then
  echo "fresh build: the build after the printed command compiled again" >&2; exit 1
fi
echo "RESULT fresh build: without automatic installs the build printed one command, and it completed the build"
