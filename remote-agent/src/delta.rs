//! `reasonix-remote apply-delta`: turn the installed binary plus a delta from the laptop into
//! the next build, so an upgrade uploads only what changed and the host needs no diff tool.
//!
//! The delta ([`reasonix_forward::delta`]) names its base and its result by SHA-256. A delta
//! for another base is refused before any work; the result is checked (length and SHA-256)
//! in memory and only then written, to a new file (never over an existing one), mode 0600.
//! The install script on the host verifies the SHA-256 again with the host's own tool before
//! it makes the file executable, and the laptop falls back to a full upload on any failure.

use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use reasonix_forward::delta::{DeltaHeader, DeltaHeaderError};
use sha2::{Digest, Sha256};

/// Why a delta was not applied.
#[derive(Debug, thiserror::Error)]
pub enum DeltaError {
    /// The delta could not be read from its input.
    #[error("cannot read the delta: {0}")]
    Input(io::Error),
    /// The header is missing or wrong.
    #[error("{0}")]
    Header(#[from] DeltaHeaderError),
    /// The base binary could not be read.
    #[error("cannot read the base binary {path}: {source}")]
    Base {
        /// Base path.
        path: PathBuf,
        /// Cause.
        source: io::Error,
    },
    /// The delta was made against another binary.
    #[error("the delta was made for base {expected}, but {path} has SHA-256 {found}")]
    WrongBase {
        /// Base path.
        path: PathBuf,
        /// SHA-256 the delta names.
        expected: String,
        /// SHA-256 of the file.
        found: String,
    },
    /// The patch stream is corrupt.
    #[error("the delta is corrupt: {0}")]
    Corrupt(String),
    /// The result is not the binary the delta promised.
    #[error("the patched binary does not match: expected {expected_len} bytes with SHA-256 {expected}, got {found_len} bytes with SHA-256 {found}")]
    Mismatch {
        /// Promised SHA-256.
        expected: String,
        /// Promised length.
        expected_len: u64,
        /// SHA-256 of the result.
        found: String,
        /// Length of the result.
        found_len: u64,
    },
    /// The result could not be written.
    #[error("cannot write {path}: {source}")]
    Output {
        /// Output path.
        path: PathBuf,
        /// Cause.
        source: io::Error,
    },
}

/// Largest result accepted (a corrupt length must not make us allocate without bound).
const MAX_TARGET: u64 = 512 << 20;

/// Apply the delta read from `delta` to `base`, writing the result to `out` (created, must not
/// exist, mode 0600). Returns the length written.
pub fn apply(base: &Path, mut delta: impl Read, out: &Path) -> Result<u64, DeltaError> {
    let mut head = [0u8; DeltaHeader::LEN];
    read_full(&mut delta, &mut head).map_err(DeltaError::Input)?;
    let header = DeltaHeader::decode(&head)?;
    let old = std::fs::read(base).map_err(|source| DeltaError::Base {
        path: base.to_path_buf(),
        source,
    })?;
    let old_sha: [u8; 32] = Sha256::digest(&old).into();
    if old_sha != header.base_sha256 {
        return Err(DeltaError::WrongBase {
            path: base.to_path_buf(),
            expected: hex::encode(header.base_sha256),
            found: hex::encode(old_sha),
        });
    }
    if header.target_len > MAX_TARGET {
        return Err(DeltaError::Corrupt(format!(
            "it promises a {} byte binary",
            header.target_len
        )));
    }
    let reader = bipatch::Reader::new(delta, io::Cursor::new(&old[..]))
        .map_err(|e| DeltaError::Corrupt(e.to_string()))?;
    let mut new = Vec::with_capacity(header.target_len as usize);
    // One byte more than promised tells "too long" apart from "exactly right".
    reader
        .take(header.target_len + 1)
        .read_to_end(&mut new)
        .map_err(|e| DeltaError::Corrupt(e.to_string()))?;
    let new_sha: [u8; 32] = Sha256::digest(&new).into();
    if new.len() as u64 != header.target_len || new_sha != header.target_sha256 {
        return Err(DeltaError::Mismatch {
            expected: hex::encode(header.target_sha256),
            expected_len: header.target_len,
            found: hex::encode(new_sha),
            found_len: new.len() as u64,
        });
    }
    let output = |source| DeltaError::Output {
        path: out.to_path_buf(),
        source,
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(out)
        .map_err(output)?;
    if let Err(e) = f.write_all(&new).and_then(|_| f.sync_all()) {
        let _ = std::fs::remove_file(out);
        return Err(output(e));
    }
    Ok(new.len() as u64)
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..])? {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("only {got} bytes, a delta header has {}", buf.len()),
                ))
            }
            n => got += n,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn make(old: &[u8], new: &[u8]) -> Vec<u8> {
        let mut patch = Vec::new();
        bidiff::simple_diff(old, new, &mut patch).unwrap();
        let header = DeltaHeader {
            base_sha256: Sha256::digest(old).into(),
            target_sha256: Sha256::digest(new).into(),
            target_len: new.len() as u64,
        };
        let mut out = header.encode().to_vec();
        out.extend_from_slice(&patch);
        out
    }

    fn sample(seed: u8, n: usize) -> Vec<u8> {
        let mut x: u32 = 0x1234_5678 ^ u32::from(seed);
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                if i % 3 == 0 {
                    x as u8
                } else {
                    (i / 7) as u8
                }
            })
            .collect()
    }

    #[test]
    fn applies_a_delta_and_refuses_bad_ones() {
        let d = tempfile::tempdir().unwrap();
        let old = sample(1, 200_000);
        let mut new = old.clone();
        new[1000..1010].copy_from_slice(b"0123456789");
        new.splice(50_000..50_000, b"inserted text".iter().copied());
        let base = d.path().join("base");
        std::fs::write(&base, &old).unwrap();
        let delta = make(&old, &new);
        // bsdiff-style: the raw patch is about as long as the result but almost all zeros
        // (what the upload codec then squeezes out).
        let nonzero = delta.iter().filter(|b| **b != 0).count();
        assert!(nonzero < new.len() / 10, "{nonzero}");

        let out = d.path().join("out");
        assert_eq!(apply(&base, &delta[..], &out).unwrap(), new.len() as u64);
        assert_eq!(std::fs::read(&out).unwrap(), new);
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&out).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // Never over an existing file.
        assert!(matches!(
            apply(&base, &delta[..], &out),
            Err(DeltaError::Output { .. })
        ));

        // Another base: refused by SHA before any work.
        let other = d.path().join("other");
        std::fs::write(&other, sample(2, 200_000)).unwrap();
        let e = apply(&other, &delta[..], &d.path().join("o2")).unwrap_err();
        assert!(matches!(e, DeltaError::WrongBase { .. }), "{e}");
        assert!(!d.path().join("o2").exists());

        // A flipped byte in the patch body: the result does not verify, nothing is written.
        let mut bad = delta.clone();
        let i = DeltaHeader::LEN + bad[DeltaHeader::LEN..].len() / 2;
        bad[i] ^= 0x55;
        let e = apply(&base, &bad[..], &d.path().join("o3")).unwrap_err();
        assert!(
            matches!(e, DeltaError::Mismatch { .. } | DeltaError::Corrupt(_)),
            "{e}"
        );
        assert!(!d.path().join("o3").exists());

        // Truncated: an error, nothing written.
        let e = apply(&base, &delta[..delta.len() - 5], &d.path().join("o4")).unwrap_err();
        assert!(
            matches!(e, DeltaError::Mismatch { .. } | DeltaError::Corrupt(_)),
            "{e}"
        );
        assert!(!d.path().join("o4").exists());
        let e = apply(&base, &delta[..20], &d.path().join("o5")).unwrap_err();
        assert!(matches!(e, DeltaError::Input(_)), "{e}");
    }
}
