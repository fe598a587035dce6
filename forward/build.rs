//! Computes the build id shared by `reasonix` and `reasonix-remote`: the crate version plus a
//! hash of everything that decides how the host side behaves (the sources of `forward/` and
//! `remote-agent/`, and `Cargo.lock`). A laptop binary and a host binary built from the same
//! sources agree; any other pairing is detected at the handshake, and `reasonix ssh`
//! installs the matching host binary. Laptop-only changes do not force a reinstall on hosts.

use std::path::{Path, PathBuf};

const INPUTS: [&str; 5] = [
    "src",
    "Cargo.toml",
    "../remote-agent/src",
    "../remote-agent/Cargo.toml",
    "../Cargo.lock",
];

fn collect(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        if let Ok(rd) = std::fs::read_dir(path) {
            for e in rd.flatten() {
                collect(&e.path(), out);
            }
        }
    } else if path.is_file() {
        out.push(path.to_path_buf());
    }
}

/// FNV-1a, 64 bit: no dependency needed, stable across platforms.
fn fnv(hash: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *hash ^= u64::from(*b);
        *hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
}

fn main() {
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_else(|_| "0.0.0".into());
    let mut files = Vec::new();
    for input in INPUTS {
        let p = Path::new(input);
        if p.exists() {
            println!("cargo:rerun-if-changed={input}");
            collect(p, &mut files);
        }
    }
    files.sort();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for f in &files {
        fnv(&mut hash, f.to_string_lossy().as_bytes());
        if let Ok(data) = std::fs::read(f) {
            fnv(&mut hash, &(data.len() as u64).to_le_bytes());
            fnv(&mut hash, &data);
        }
    }
    let id = std::env::var("REASONIX_BUILD_ID_OVERRIDE")
        .unwrap_or_else(|_| format!("{version}-{:012x}", hash & 0xffff_ffff_ffff));
    println!("cargo:rustc-env=REASONIX_BUILD_ID={id}");
    println!("cargo:rerun-if-env-changed=REASONIX_BUILD_ID_OVERRIDE");
}
