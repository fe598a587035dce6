//! Builds the static host binary (`reasonix-remote` for x86_64-unknown-linux-musl) as part of
//! a release build of `reasonix`, and places it next to `reasonix` as
//! `reasonix-remote-x86_64-unknown-linux-musl`, where `reasonix ssh` finds it.
//!
//! Debug builds skip this (set `REASONIX_BUILD_HOST=1` to force it); the test command builds
//! the musl binary explicitly. A missing musl target is a warning, not an error: SSH installs
//! then fail with a message that says how to build the host binary.

use std::path::PathBuf;
use std::process::Command;

const TRIPLE: &str = "x86_64-unknown-linux-musl";

fn main() {
    println!("cargo:rerun-if-env-changed=REASONIX_BUILD_HOST");
    println!("cargo:rerun-if-changed=../remote-agent/src");
    println!("cargo:rerun-if-changed=../forward/src");
    println!("cargo:rerun-if-changed=../remote-agent/Cargo.toml");
    let profile = std::env::var("PROFILE").unwrap_or_default();
    let forced = std::env::var("REASONIX_BUILD_HOST")
        .map(|v| v == "1")
        .unwrap_or(false);
    let skip = std::env::var("REASONIX_BUILD_HOST")
        .map(|v| v == "0")
        .unwrap_or(false);
    if skip || (profile != "release" && !forced) {
        return;
    }
    let Ok(out_dir) = std::env::var("OUT_DIR").map(PathBuf::from) else {
        return;
    };
    // OUT_DIR = <target>/<profile>/build/reasonix-<hash>/out
    let Some(profile_dir) = out_dir.ancestors().nth(3).map(PathBuf::from) else {
        return;
    };
    let Some(target_root) = profile_dir.parent().map(PathBuf::from) else {
        return;
    };
    let host_target_dir = target_root.join("host-musl");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join("..")
        .join("Cargo.toml");
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--release",
        "-p",
        "reasonix-remote",
        "--bin",
        "reasonix-remote",
    ])
    .args(["--target", TRIPLE])
    .arg("--manifest-path")
    .arg(&manifest)
    .arg("--target-dir")
    .arg(&host_target_dir);
    // Flags meant for the outer build (and its jobserver) must not leak into this one.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
        "CARGO_TARGET_DIR",
    ] {
        cmd.env_remove(var);
    }
    match cmd.status() {
        Ok(s) if s.success() => {
            let built = host_target_dir.join(TRIPLE).join("release").join("reasonix-remote");
            let dest = profile_dir.join(format!("reasonix-remote-{TRIPLE}"));
            if let Err(e) = std::fs::copy(&built, &dest) {
                println!("cargo:warning=could not place the host binary at {}: {e}", dest.display());
            }
        }
        Ok(s) => println!(
            "cargo:warning=building the static host binary failed ({s}); `reasonix ssh` needs it: run `rustup target add {TRIPLE}` and `apt-get install musl-tools`"
        ),
        Err(e) => println!("cargo:warning=could not run cargo to build the host binary: {e}"),
    }
}
