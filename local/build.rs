//! Builds the static host binaries (`reasonix-remote` for `x86_64-unknown-linux-musl` and
//! `aarch64-unknown-linux-musl`) as part of a release build of `reasonix`, and places them
//! next to `reasonix` as `reasonix-remote-<triple>`, where `reasonix ssh` finds them, together
//! with compressed copies (`.xz`, `.zst`, `.gz`) so the first upload to a host does not have
//! to compress first.
//!
//! The host binaries use the size-optimised `host` profile of the workspace (see the root
//! `Cargo.toml`) and are linked by the toolchain's own `rust-lld` with the musl targets'
//! self-contained C runtime (`.cargo/config.toml`), so rustup's default toolchain plus the two
//! Rust targets is all they need: no musl-gcc, no cross gcc. A missing target is installed
//! with `rustup target add` for the toolchain this build runs with (rustup's own automatic
//! installs would update that whole toolchain; this adds the two standard libraries only),
//! unless `RUSTUP_AUTO_INSTALL=0` says not to. What is still missing is a warning, not an
//! error, ending in one command that fixes it (the same one `reasonix ssh` prints when a
//! host's binary is missing); SSH installs on such hosts fail until then.
//!
//! Debug builds skip all this (set `REASONIX_BUILD_HOST=1` to force it, `=0` to skip it in
//! release builds; `REASONIX_HOST_TARGETS=x86_64-unknown-linux-musl` limits the targets).
//!
//! While a host binary could not be built, the script runs again on every build (it names
//! the missing binary and target as inputs), so the first `cargo build --release` after the
//! user's fix completes what an earlier one could not.

use sha2::Digest;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The laptop's own compression code (filters and levels), so a shipped copy is exactly what
/// the laptop would make at run time.
#[allow(dead_code)]
#[path = "../bootstrap/src/codec.rs"]
mod codec;

/// The command this script and `reasonix ssh` print for a missing host binary.
#[allow(dead_code)]
#[path = "../bootstrap/src/build_hint.rs"]
mod build_hint;

const TRIPLES: [&str; 2] = ["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl"];
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
    // The host targets' linker and link flags (rust-lld, RELR relocations for x86_64).
    println!("cargo:rerun-if-changed=../.cargo/config.toml");
    println!("cargo:rerun-if-changed=../bootstrap/src/codec.rs");
    println!("cargo:rerun-if-changed=../bootstrap/src/build_hint.rs");
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
    let dest_of = |triple: &str| profile_dir.join(format!("reasonix-remote-{triple}"));

    let toolchain = Toolchain::find();
    let mut unbuilt: Vec<(String, String)> = Vec::new();
    let mut ready: Vec<String> = Vec::new();
    match &toolchain {
        Err(why) => unbuilt.extend(wanted.iter().map(|t| (t.clone(), why.clone()))),
        Ok(tc) => {
            let missing: Vec<&str> = wanted
                .iter()
                .filter(|t| !tc.has_target(t))
                .map(String::as_str)
                .collect();
            let install = if missing.is_empty() {
                Ok(None)
            } else {
                tc.install_targets(&missing)
            };
            if let Ok(Some(toolchain)) = &install {
                // (Cargo shows this again on builds that do not run the script: it says
                // what the script did when it last ran.)
                println!(
                    "cargo:warning=added the Rust target(s) {} to the toolchain {toolchain} (`rustup target add`), for the host binaries `reasonix ssh` uploads",
                    missing.join(" ")
                );
            }
            for triple in &wanted {
                if tc.has_target(triple) {
                    ready.push(triple.clone());
                } else {
                    let why = match &install {
                        Err(why) => why.clone(),
                        Ok(_) => "its Rust target is not installed".into(),
                    };
                    unbuilt.push((triple.clone(), why));
                }
            }
        }
    }

    if !ready.is_empty() {
        let host_target_dir = target_root.join("host-musl");
        match build(&ready, &host_target_dir) {
            Ok(()) => {
                for triple in &ready {
                    let built = host_target_dir
                        .join(triple)
                        .join(PROFILE)
                        .join("reasonix-remote");
                    if let Err(e) = place(&built, &dest_of(triple)) {
                        unbuilt.push((
                            triple.clone(),
                            format!("could not place it at {}: {e}", dest_of(triple).display()),
                        ));
                    }
                }
            }
            Err(why) => {
                unbuilt.extend(ready.iter().map(|t| (t.clone(), format!("cargo {why}"))));
            }
        }
    }

    if !unbuilt.is_empty() {
        for (triple, why) in &unbuilt {
            // Paths that do not exist (yet): cargo runs this script again on every build
            // until they do, so the build after the user's fix completes the job (and each
            // build until then says what is missing). Only for what is missing: a path this
            // run wrote or installed would be newer than the run's start, and cargo would run
            // the script, and compile `reasonix` again, on the next build for nothing.
            if let Ok(tc) = &toolchain {
                if !tc.has_target(triple) {
                    println!("cargo:rerun-if-changed={}", tc.target_dir(triple).display());
                }
            }
            println!("cargo:rerun-if-changed={}", dest_of(triple).display());
            // A binary of an earlier build left there would not match this `reasonix`;
            // without it `reasonix ssh` says what to run instead of failing at the handshake.
            remove_placed(&dest_of(triple));
            println!(
                "cargo:warning=no {triple} host binary (`reasonix ssh` cannot install on such hosts): {why}"
            );
        }
        let triples: Vec<&str> = unbuilt.iter().map(|(t, _)| t.as_str()).collect();
        println!(
            "cargo:warning=to build them, run in this folder: {}",
            build_hint::build_host_binaries_command(&triples)
        );
    }
}

/// The Rust toolchain this build runs with.
struct Toolchain {
    sysroot: PathBuf,
}

impl Toolchain {
    /// The sysroot of `$RUSTC`, and a check that it can link the host binaries.
    fn find() -> Result<Toolchain, String> {
        let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
        let out = Command::new(&rustc)
            .args(["--print", "sysroot"])
            .output()
            .map_err(|e| format!("cannot run {rustc}: {e}"))?;
        let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        // `.cargo/config.toml` links with rust-lld, which rustc finds here (it puts this
        // folder on the linker's PATH). Distribution-packaged toolchains may lack it.
        let host = std::env::var("HOST").unwrap_or_default();
        let lld = sysroot.join("lib/rustlib").join(&host).join("bin/rust-lld");
        if !lld.is_file() {
            return Err(format!(
                "this Rust toolchain ({}) has no rust-lld, which links the host binaries; use rustup's (https://rustup.rs)",
                sysroot.display()
            ));
        }
        Ok(Toolchain { sysroot })
    }

    fn target_dir(&self, triple: &str) -> PathBuf {
        self.sysroot.join("lib/rustlib").join(triple)
    }

    fn has_target(&self, triple: &str) -> bool {
        self.target_dir(triple).join("lib").is_dir()
    }

    /// `rustup target add` for the toolchain cargo runs (`RUSTUP_TOOLCHAIN`, set by rustup's
    /// proxies): it fetches the standard libraries of that toolchain's own version, where an
    /// install through `rust-toolchain.toml` would update the whole channel first. Returns
    /// the toolchain's name.
    fn install_targets(&self, triples: &[&str]) -> Result<Option<String>, String> {
        let not_added = |why: &str| format!("its Rust target is not installed, and {why}");
        if std::env::var("RUSTUP_AUTO_INSTALL").as_deref() == Ok("0") {
            return Err(not_added(
                "RUSTUP_AUTO_INSTALL=0 asks not to install it here",
            ));
        }
        let Ok(name) = std::env::var("RUSTUP_TOOLCHAIN") else {
            return Err(not_added("this toolchain is not run by rustup"));
        };
        let rustup = std::env::var_os("CARGO_HOME")
            .map(|h| PathBuf::from(h).join("bin/rustup"))
            .filter(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("rustup"));
        let out = Command::new(&rustup)
            .args(["target", "add", "--toolchain", &name])
            .args(triples)
            .env_remove("RUSTUP_TOOLCHAIN")
            .output()
            .map_err(|e| not_added(&format!("{} could not run: {e}", rustup.display())))?;
        if out.status.success() {
            return Ok(Some(name));
        }
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        Err(not_added(&format!(
            "`rustup target add` failed ({}): {}",
            out.status,
            last.trim()
        )))
    }
}

/// One cargo run for all the targets: the two links (fat LTO, one codegen unit: minutes each)
/// then run side by side.
fn build(triples: &[String], host_target_dir: &Path) -> Result<(), String> {
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
    ]);
    for triple in triples {
        cmd.args(["--target", triple]);
    }
    cmd.arg("--manifest-path")
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
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("build failed ({s})")),
        Err(e) => Err(format!("could not run: {e}")),
    }
}

/// Remove a placed binary and its compressed copies, if there.
fn remove_placed(dest: &Path) {
    let mut paths = vec![dest.to_path_buf()];
    for c in [codec::Codec::Xz, codec::Codec::Zstd, codec::Codec::Gzip] {
        for suffix in [c.suffix().to_string(), format!("{}.sha256", c.suffix())] {
            let mut p = dest.as_os_str().to_os_string();
            p.push(suffix);
            paths.push(PathBuf::from(p));
        }
    }
    for p in paths {
        // Absent is the goal; a file that cannot be removed shows up at the handshake.
        let _ = std::fs::remove_file(p);
    }
}

/// Copy the binary next to `reasonix` and write its compressed copies beside it, unless
/// what is there already is this binary with its copies (a rerun of this script after a
/// change that left the host binary as it was: xz -9e takes seconds).
fn place(built: &Path, dest: &Path) -> std::io::Result<()> {
    let data = std::fs::read(built)?;
    let with_suffix = |s: &str| {
        let mut p = dest.as_os_str().to_os_string();
        p.push(s);
        PathBuf::from(p)
    };
    let raw_sha = hex::encode(sha2::Sha256::digest(&data));
    let codecs = [codec::Codec::Xz, codec::Codec::Zstd, codec::Codec::Gzip];
    let copy_current = |c: codec::Codec| -> bool {
        let Ok(sums) = std::fs::read_to_string(with_suffix(&format!("{}.sha256", c.suffix())))
        else {
            return false;
        };
        let Ok(copy) = std::fs::read(with_suffix(c.suffix())) else {
            return false;
        };
        sums.trim() == format!("{} {raw_sha}", hex::encode(sha2::Sha256::digest(&copy)))
    };
    if std::fs::read(dest).is_ok_and(|d| d == data) && codecs.into_iter().all(copy_current) {
        return Ok(());
    }
    std::fs::copy(built, dest)?;
    // The laptop checks each copy against the binary before use: by the hashes in the
    // `.sha256` beside it (the copy's own, then the binary's), else by decompressing it.
    for c in codecs {
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
