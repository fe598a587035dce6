//! Where the tests find the static host binaries the build made.

use std::path::{Path, PathBuf};

/// The static aarch64 `reasonix-remote` under the workspace's `target` folder: in CI the one
/// its fresh-machine release build ships (`.ci/fresh_build.sh --aarch64-out`, copied to the
/// `host` profile's place), else one built with `cargo build --profile host -p
/// reasonix-remote --target aarch64-unknown-linux-musl` (linked by rust-lld, no cross gcc
/// needed) or by a release build. Missing in CI (`CI` set) is a failure; elsewhere the test
/// says loudly that it did not run, and gets `None`.
pub fn aarch64_host_binary() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let candidates = [
        root.join("aarch64-unknown-linux-musl/host/reasonix-remote"),
        root.join("release/reasonix-remote-aarch64-unknown-linux-musl"),
        root.join("aarch64-unknown-linux-musl/release/reasonix-remote"),
        root.join("aarch64-unknown-linux-musl/debug/reasonix-remote"),
    ];
    if let Some(p) = candidates.iter().find(|p| p.is_file()) {
        return Some(p.clone());
    }
    let msg = format!(
        "no aarch64 host binary (looked at {candidates:?}); build it with \
         `cargo build --profile host -p reasonix-remote --target aarch64-unknown-linux-musl`"
    );
    if std::env::var_os("CI").is_some() {
        panic!("{msg}");
    }
    eprintln!("\n*** SKIPPED (not in CI): {msg} ***\n");
    None
}
