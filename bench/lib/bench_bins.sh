# Sourced by bench/ports_throughput.sh and bench/cp_throughput.sh: builds what the bench
# runs. RELEASE=1 (the default) measures release binaries: `reasonix` in release and the
# static host binary in the size-optimised `host` profile, as shipped (local/build.rs, x86_64
# only), handed to the bench test as BENCH_RX / BENCH_HOST_BIN; RELEASE=0 measures the debug
# builds the test itself was built with.
if [ "${RELEASE:-1}" = 1 ]; then
  REASONIX_HOST_TARGETS=x86_64-unknown-linux-musl cargo build --quiet --release -p reasonix --bin reasonix
  export BENCH_RX="$PWD/target/release/reasonix"
  export BENCH_HOST_BIN="$PWD/target/release/reasonix-remote-x86_64-unknown-linux-musl"
  # The test binary itself (the HTTP client, the proxies) stays a debug build.
  cargo build --quiet -p reasonix --bin reasonix
else
  cargo build --quiet --workspace --bins
  cargo build --quiet -p reasonix-remote --target x86_64-unknown-linux-musl
fi
