#!/usr/bin/env bash
# Builds (compiles and links) the laptop binary `reasonix` for the laptop systems other than
# Linux, in the debug profile: Windows (x86_64-pc-windows-gnu, mingw-w64), macOS
# (x86_64/aarch64-apple-darwin, cargo zigbuild with zig's libSystem stubs, no Apple SDK) and
# Windows on Arm (aarch64-pc-windows-gnullvm, cargo zigbuild: zig's clang and lld; it cannot
# run here, there is no Arm Windows emulation).
# Then runs the Windows build's `--version` and `--help` under wine when wine is there.
# Release archives are dist/build.sh's job; this keeps every target building in CI.
#
# Only the x86_64 Windows build runs here (under wine, .ci/run's last stage); the others are
# built to prove that they compile and link, with the dependencies at opt-level 0 instead of
# the dev profile's 1 (about a third less CPU: x86_64 macOS took 239 CPU s instead of 377).
#
# Each target gets CROSS_SECONDS (default 600) of wall time; the script exits non-zero when a
# target fails or runs out of time, naming it.
set -uo pipefail
cd "$(dirname "$0")/.."
retry() { "$@" || { sleep 5; "$@"; } || { sleep 15; "$@"; }; }
BUDGET=${CROSS_SECONDS:-600}
stage() { echo "== ${SECONDS}s: $*"; }

stage "cross tools"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  dpkg -s mingw-w64 wine64 >/dev/null 2>&1 \
    || apt-get install -y -qq --no-install-recommends mingw-w64 wine64 wine >/dev/null
fi
python3 -c 'import ziglang' 2>/dev/null || retry pip install -q ziglang || echo "warning: could not install ziglang"
command -v cargo-zigbuild >/dev/null || retry cargo install -q cargo-zigbuild --locked \
  || echo "warning: could not install cargo-zigbuild"
TARGETS=${CROSS_TARGETS:-x86_64-pc-windows-gnu aarch64-apple-darwin x86_64-apple-darwin aarch64-pc-windows-gnullvm}
# shellcheck disable=SC2086
rustup target add $TARGETS >/dev/null 2>&1 || true

failed=()
one() {
  local target=$1; shift
  stage "$target"
  # Debug info is not needed to prove a target builds and links.
  local deps=()
  [ "$target" = x86_64-pc-windows-gnu ] || deps=(--config 'profile.dev.package."*".opt-level=0')
  if CARGO_PROFILE_DEV_DEBUG=0 REASONIX_BUILD_HOST=0 timeout "$BUDGET" "$@" "${deps[@]}" -p reasonix --bin reasonix --target "$target"; then
    echo "ok: $target"
  else
    echo "FAILED: $target (exit $?)"
    failed+=("$target")
  fi
}
# CROSS_TARGETS picks the targets (default: the four above, Windows x86_64 first: the wine
# stage waits for it). mingw-w64 links the `-gnu` Windows target; every other target
# (`-gnullvm` included) goes through zig.
for target in $TARGETS; do
  case $target in
    *-windows-gnu) one "$target" cargo build ;;
    *) one "$target" cargo zigbuild ;;
  esac
done

exe=${CARGO_TARGET_DIR:-target}/x86_64-pc-windows-gnu/debug/reasonix.exe
if [ -f "$exe" ] && command -v wine >/dev/null; then
  stage "wine: reasonix.exe --version / --help"
  export WINEDEBUG=-all WINEPREFIX=${WINEPREFIX:-$PWD/target/wineprefix}
  # Debian 12's wine 8.0 has no bcryptprimitives.dll, where Rust's std gets random bytes:
  # a test-only stand-in goes into the prefix (.ci/wine/bcryptprimitives.c).
  timeout 120 wine cmd /c exit 0 >/dev/null 2>&1 || true   # creates the prefix
  x86_64-w64-mingw32-gcc -shared -O2 -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" \
    .ci/wine/bcryptprimitives.c .ci/wine/bcryptprimitives.def -ladvapi32
  if timeout 120 wine "$exe" --version && timeout 60 wine "$exe" --help >/dev/null; then
    echo "ok: reasonix.exe runs under wine"
  else
    echo "FAILED: reasonix.exe under wine"
    failed+=("wine")
  fi
fi
stage "done"
if [ ${#failed[@]} -gt 0 ]; then
  echo "cross builds failed: ${failed[*]}"
  exit 1
fi
