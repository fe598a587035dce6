#!/usr/bin/env bash
# Builds the laptop binary `reasonix` for every laptop system and writes one archive per
# target plus SHA256SUMS into dist/out/ (or $DIST_OUT):
#
#   reasonix-<version>-<target>.tar.gz   Linux and macOS
#   reasonix-<version>-<target>.zip      Windows (x86_64-pc-windows-gnu, aarch64-pc-windows-gnullvm)
#
# Each archive holds `reasonix` (`reasonix.exe`) and, beside it, the Linux host binaries
# `reasonix ssh` uploads (reasonix-remote-{x86_64,aarch64}-unknown-linux-musl with their
# .xz/.zst/.gz copies and .sha256 files): the host side is Linux-only, the same files in every
# archive. They are built once, by the native release build (local/build.rs), and copied.
#
# Needs: rustup; for macOS, Linux aarch64 and Windows on Arm `cargo zigbuild` (`cargo install
# cargo-zigbuild`, `pip install ziglang`); for Windows x86_64 the mingw-w64 toolchain
# (`apt-get install mingw-w64`). Windows on Arm is the `gnullvm` target (LLVM's mingw ABI):
# zig's clang and lld build and link it, no Arm mingw gcc exists in Debian.
# A target whose tools are missing is reported and skipped; the exit status is non-zero when
# any asked-for target failed.
#
# Usage: dist/build.sh [TARGET...]    (default: all of them)
#   DIST_PROFILE=release (default) or another cargo profile, e.g. `dev` for a quick check.
set -uo pipefail
cd "$(dirname "$0")/.."

ALL_TARGETS=(
  x86_64-unknown-linux-gnu
  aarch64-unknown-linux-gnu
  x86_64-apple-darwin
  aarch64-apple-darwin
  x86_64-pc-windows-gnu
  aarch64-pc-windows-gnullvm
)
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL_TARGETS[@]}")
PROFILE=${DIST_PROFILE:-release}
OUT=${DIST_OUT:-dist/out}
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
NATIVE=$(rustc -vV | sed -n 's/^host: //p')
profile_dir() { if [ "$PROFILE" = dev ]; then echo debug; else echo "$PROFILE"; fi; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
stage() { echo "== ${SECONDS}s: $*"; }
failed=()

# 1. The host binaries, through the native release build (local/build.rs builds, places and
#    compresses them next to target/release/reasonix).
stage "host binaries (native $PROFILE build of reasonix)"
HOSTS_DIR=target/$(profile_dir)
if ! REASONIX_BUILD_HOST=1 cargo build --profile "$PROFILE" -p reasonix --bin reasonix; then
  echo "the native build failed: no host binaries to ship" >&2
  exit 1
fi
host_files=()
for t in x86_64-unknown-linux-musl aarch64-unknown-linux-musl; do
  for f in "$HOSTS_DIR/reasonix-remote-$t" "$HOSTS_DIR/reasonix-remote-$t".{xz,zst,gz}{,.sha256}; do
    if [ -f "$f" ]; then host_files+=("$f"); else echo "missing host file $f" >&2; exit 1; fi
  done
done

# 2. One laptop build per target; the host binaries are not rebuilt for each.
build_one() {
  local target=$1
  rustup target add "$target" >/dev/null 2>&1 || true
  case "$target" in
    "$NATIVE")
      return 0 ;;  # built above
    *-windows-gnu)
      command -v x86_64-w64-mingw32-gcc >/dev/null || { echo "no mingw-w64 (apt-get install mingw-w64)"; return 1; }
      REASONIX_BUILD_HOST=0 cargo build --profile "$PROFILE" -p reasonix --bin reasonix --target "$target" ;;
    *)  # macOS, Linux aarch64, aarch64-pc-windows-gnullvm
      command -v cargo-zigbuild >/dev/null || { echo "no cargo-zigbuild (cargo install cargo-zigbuild; pip install ziglang)"; return 1; }
      REASONIX_BUILD_HOST=0 cargo zigbuild --profile "$PROFILE" -p reasonix --bin reasonix --target "$target" ;;
  esac
}

package() {
  local target=$1 bin_dir exe name stage_dir
  if [ "$target" = "$NATIVE" ]; then bin_dir=target/$(profile_dir); else bin_dir=target/$target/$(profile_dir); fi
  exe=reasonix; case "$target" in *windows*) exe=reasonix.exe ;; esac
  [ -f "$bin_dir/$exe" ] || { echo "no $bin_dir/$exe"; return 1; }
  name=reasonix-$VERSION-$target
  stage_dir=$(mktemp -d)/$name
  mkdir -p "$stage_dir"
  cp "$bin_dir/$exe" "${host_files[@]}" README.md docs/INSTALL.md "$stage_dir/"
  case "$target" in
    *windows*)
      rm -f "$OUT/$name.zip"
      (cd "$(dirname "$stage_dir")" && python3 -m zipfile -c "$OUT/$name.zip" "$name") ;;
    *)
      tar -C "$(dirname "$stage_dir")" -czf "$OUT/$name.tar.gz" "$name" ;;
  esac
  rm -rf "$(dirname "$stage_dir")"
}

for t in "${TARGETS[@]}"; do
  stage "$t"
  if build_one "$t" && package "$t"; then
    echo "ok: $t"
  else
    echo "FAILED: $t"
    failed+=("$t")
  fi
done

(cd "$OUT" && rm -f SHA256SUMS && sha256sum reasonix-"$VERSION"-*.{tar.gz,zip} 2>/dev/null > SHA256SUMS)
stage "done: $OUT"
cat "$OUT/SHA256SUMS"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed targets: ${failed[*]}" >&2
  exit 1
fi
