//! Computes the build id shared by `reasonix` and `reasonix-remote`: the crate version plus
//! the git commit of the tree, so a laptop binary and the host binary built from the same
//! tree agree, and any other pairing is detected at the handshake.

use std::process::Command;

fn main() {
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_else(|_| "0.0.0".into());
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "nogit".into());
    // An explicit override wins (release builds, reproducible packaging).
    let id = std::env::var("REASONIX_BUILD_ID_OVERRIDE").unwrap_or(format!("{version}-{commit}"));
    println!("cargo:rustc-env=REASONIX_BUILD_ID={id}");
    println!("cargo:rerun-if-env-changed=REASONIX_BUILD_ID_OVERRIDE");
    for p in ["../.git/HEAD", "../.git/refs/heads"] {
        if std::path::Path::new(p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}
