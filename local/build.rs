//! Builds the static host binaries (`reasonix-remote` for `x86_64-unknown-linux-musl` and
//! `aarch64-unknown-linux-musl`) as part of a release build of `reasonix`, and places them
//! next to `reasonix` as `reasonix-remote-<triple>`, where `reasonix ssh` finds them, together
//! with compressed copies (`.xz`, `.zst`, `.gz`) so the first upload to a host does not have
//! to compress first.
//!
//! The host binaries use the size-optimised `host` profile of the workspace (see the root
//! `Cargo.toml`). Debug builds skip all this (set `REASONIX_BUILD_HOST=1` to force it, `=0`
//! to skip it in release builds; `REASONIX_HOST_TARGETS=x86_64-unknown-linux-musl` limits the
//! targets). A target whose toolchain is missing (rustup target, or the aarch64 cross linker
//! named in `.cargo/config.toml`) is a warning, not an error: SSH installs on such hosts then
//! fail with a message that says how to build the binary.

use sha2::Digest;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The laptop's own compression code (filters and levels), so a shipped copy is exactly what
/// the laptop would make at run time.
#[allow(dead_code)]
#[path = "../bootstrap/src/codec.rs"]
mod codec;

const TRIPLES: [&str; 2] = ["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl"];
/// The cross linker `.cargo/config.toml` names for aarch64.
const AARCH64_LINKER: &str = "aarch64-linux-gnu-gcc";
const PROFILE: &str = "host";

fn main() {
    println!("cargo:rerun-if-env-changed=REASONIX_BUILD_HOST");
    println!("cargo:rerun-if-env-changed=REASONIX_HOST_TARGETS");
    println!("cargo:rerun-if-changed=../remote-agent/src");
    println!("cargo:rerun-if-changed=../forward/src");
    println!("cargo:rerun-if-changed=../remote-agent/Cargo.toml");
    println!("cargo:rerun-if-changed=../Cargo.toml");
    println!("cargo:rerun-if-changed=../Cargo.lock");
    println!("cargo:rerun-if-changed=../forward/Cargo.toml");
    // The host targets' linker and link flags (RELR relocations for x86_64).
    println!("cargo:rerun-if-changed=../.cargo/config.toml");
    println!("cargo:rerun-if-changed=../bootstrap/src/codec.rs");
    let profile = std::env::var("PROFILE").unwrap_or_default();
    let setting = std::env::var("REASONIX_BUILD_HOST").unwrap_or_default();
    if setting == "0" || (profile != "release" && setting != "1") {
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
    let wanted: Vec<String> = match std::env::var("REASONIX_HOST_TARGETS") {
        Ok(v) if !v.trim().is_empty() => v.split(',').map(|s| s.trim().to_string()).collect(),
        _ => TRIPLES.iter().map(|s| s.to_string()).collect(),
    };
    let host_target_dir = target_root.join("host-musl");
    for triple in wanted {
        if let Err(why) = toolchain_ready(&triple) {
            println!(
                "cargo:warning=not building the {triple} host binary: {why}; `reasonix ssh` cannot install on such hosts"
            );
            continue;
        }
        match build(&triple, &host_target_dir) {
            Ok(built) => {
                let dest = profile_dir.join(format!("reasonix-remote-{triple}"));
                if let Err(e) = place(&built, &dest) {
                    println!(
                        "cargo:warning=could not place the host binary at {}: {e}",
                        dest.display()
                    );
                }
            }
            Err(why) => println!(
                "cargo:warning=building the {triple} host binary failed ({why}); `reasonix ssh` needs it: run `rustup target add {triple}`{}",
                if triple.starts_with("aarch64") {
                    format!(" and install {AARCH64_LINKER} (Debian: gcc-aarch64-linux-gnu)")
                } else {
                    String::new()
                }
            ),
        }
    }
}

/// Cheap checks that save minutes of compiling before a link that cannot work.
fn toolchain_ready(triple: &str) -> Result<(), String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("cannot run rustc: {e}"))?;
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
    if !Path::new(&sysroot)
        .join("lib/rustlib")
        .join(triple)
        .is_dir()
    {
        return Err(format!(
            "the Rust target is not installed (`rustup target add {triple}`)"
        ));
    }
    if triple.starts_with("aarch64") && !on_path(AARCH64_LINKER) {
        let configured = std::env::var_os("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER");
        if configured.is_none() {
            return Err(format!(
                "the cross linker {AARCH64_LINKER} is not on PATH (Debian: `apt-get install gcc-aarch64-linux-gnu`)"
            ));
        }
    }
    Ok(())
}

fn on_path(exe: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(exe).is_file()))
        .unwrap_or(false)
}

fn build(triple: &str, host_target_dir: &Path) -> Result<PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join("..")
        .join("Cargo.toml");
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--profile",
        PROFILE,
        "-p",
        "reasonix-remote",
        "--bin",
        "reasonix-remote",
    ])
    .args(["--target", triple])
    .arg("--manifest-path")
    .arg(&manifest)
    .arg("--target-dir")
    .arg(host_target_dir);
    // Flags meant for the outer build (and its jobserver) must not leak into this one.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_PROFILE_RELEASE_LTO",
    ] {
        cmd.env_remove(var);
    }
    match cmd.status() {
        Ok(s) if s.success() => Ok(host_target_dir
            .join(triple)
            .join(PROFILE)
            .join("reasonix-remote")),
        Ok(s) => Err(s.to_string()),
        Err(e) => Err(format!("could not run cargo: {e}")),
    }
}

/// Copy the binary next to `reasonix` and write its compressed copies beside it.
fn place(built: &Path, dest: &Path) -> std::io::Result<()> {
    std::fs::copy(built, dest)?;
    let data = std::fs::read(built)?;
    let with_suffix = |s: &str| {
        let mut p = dest.as_os_str().to_os_string();
        p.push(s);
        PathBuf::from(p)
    };
    // The laptop checks each copy against the binary before use: by the hashes in the
    // `.sha256` beside it (the copy's own, then the binary's), else by decompressing it.
    let raw_sha = hex::encode(sha2::Sha256::digest(&data));
    for c in [codec::Codec::Xz, codec::Codec::Zstd, codec::Codec::Gzip] {
        let copy = c.compress(&data)?;
        let copy_sha = hex::encode(sha2::Sha256::digest(&copy));
        std::fs::write(with_suffix(c.suffix()), &copy)?;
        std::fs::write(
            with_suffix(&format!("{}.sha256", c.suffix())),
            format!("{copy_sha} {raw_sha}\n"),
        )?;
    }
    Ok(())
}
