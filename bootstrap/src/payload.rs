//! What an install sends: the whole host binary compressed with the host's best codec, or a
//! delta against a build the host already has.
//!
//! Sources of a full payload, in order: a compressed copy shipped next to the binary
//! (`reasonix-remote-<triple>.xz` / `.zst` / `.gz`, written by the release build), the
//! laptop's [`HostBinaryCache`], else compressed now (and cached). A shipped copy is checked
//! against the hashes the release build wrote beside it (`<copy>.sha256`: the copy's SHA-256,
//! then the binary's); without them, and for cached copies, the copy is decompressed and
//! hashed on the laptop (about a tenth of a second). A stale or damaged copy is never sent.
//!
//! A delta ([`reasonix_forward::delta`]) is a `bidiff` patch from the base binary (which the
//! laptop must have in its cache) to the new one, compressed the same way.

use std::path::Path;

use reasonix_forward::delta::DeltaHeader;
use sha2::{Digest, Sha256};

use crate::cache::{sha256_hex, HostBinaryCache};
use crate::codec::Codec;

/// Largest binary we make deltas for: the suffix sort needs about 5 bytes per input byte
/// and a few seconds per ten MiB; larger (debug) binaries are sent whole.
pub const MAX_DELTA_INPUT: usize = 64 << 20;

/// The full payload of `raw` (SHA-256 `sha`, read from `local`) in `codec`.
pub(crate) fn full(
    local: &Path,
    raw: &[u8],
    sha: &str,
    codec: Codec,
    cache: Option<&HostBinaryCache>,
) -> std::io::Result<Vec<u8>> {
    if codec == Codec::Raw {
        return Ok(raw.to_vec());
    }
    let mut shipped = local.as_os_str().to_os_string();
    shipped.push(codec.suffix());
    if let Ok(data) = std::fs::read(&shipped) {
        // The release build writes the copy's hash and the binary's beside it: checking
        // those costs milliseconds where decompressing costs a tenth of a second, on the
        // way to the first upload.
        let mut sums = shipped.clone();
        sums.push(".sha256");
        if let Ok(text) = std::fs::read_to_string(&sums) {
            let mut words = text.split_whitespace();
            if let (Some(copy_sha), Some(raw_sha)) = (words.next(), words.next()) {
                if raw_sha == sha && sha256_hex(&data) == copy_sha {
                    return Ok(data);
                }
            }
        }
        match codec.decompress(&data) {
            Ok(d) if sha256_hex(&d) == sha => return Ok(data),
            _ => tracing::warn!(
                path = %Path::new(&shipped).display(),
                "the shipped compressed host binary does not match the binary; compressing again"
            ),
        }
    }
    if let Some(data) = cache.and_then(|c| c.payload(sha, codec)) {
        return Ok(data);
    }
    let data = codec.compress(raw)?;
    if let Some(c) = cache {
        if raw.len() as u64 <= crate::cache::MAX_CACHED {
            c.store_payload(sha, codec, &data);
        }
    }
    Ok(data)
}

/// A compressed delta from `base` (SHA-256 `base_sha`) to `target` (SHA-256 `target_sha`).
pub(crate) fn delta(
    base: &[u8],
    base_sha: &str,
    target: &[u8],
    target_sha: &str,
    codec: Codec,
    cache: Option<&HostBinaryCache>,
) -> std::io::Result<Vec<u8>> {
    if let Some(data) = cache.and_then(|c| c.delta(base_sha, target_sha, codec)) {
        return Ok(data);
    }
    let raw = raw_delta(base, target)?;
    let data = codec.compress(&raw)?;
    if let Some(c) = cache {
        c.store_delta(base_sha, target_sha, codec, &data);
    }
    Ok(data)
}

/// The uncompressed delta: header + bidiff patch.
pub fn raw_delta(base: &[u8], target: &[u8]) -> std::io::Result<Vec<u8>> {
    let header = DeltaHeader {
        base_sha256: Sha256::digest(base).into(),
        target_sha256: Sha256::digest(target).into(),
        target_len: target.len() as u64,
    };
    let mut out = header.encode().to_vec();
    bidiff::simple_diff(base, target, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn full_payload_prefers_a_valid_shipped_copy() {
        let d = tempfile::tempdir().unwrap();
        let bin = d.path().join("reasonix-remote-x");
        let raw: Vec<u8> = (0..50_000u32)
            .flat_map(|i| (i % 97).to_le_bytes())
            .collect();
        std::fs::write(&bin, &raw).unwrap();
        let sha = sha256_hex(&raw);
        // A shipped copy that is valid is used as is (recognisable by a different level).
        let shipped = Codec::Gzip.compress(&raw[..]).unwrap();
        let mut alt = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(1));
        std::io::Write::write_all(&mut alt, &raw).unwrap();
        let alt = alt.finish().unwrap();
        assert_ne!(alt, shipped);
        std::fs::write(d.path().join("reasonix-remote-x.gz"), &alt).unwrap();
        assert_eq!(full(&bin, &raw, &sha, Codec::Gzip, None).unwrap(), alt);
        // A stale one (another binary) is ignored.
        std::fs::write(
            d.path().join("reasonix-remote-x.gz"),
            Codec::Gzip.compress(b"old build").unwrap(),
        )
        .unwrap();
        let cache = HostBinaryCache::new(d.path().join("cache"));
        let got = full(&bin, &raw, &sha, Codec::Gzip, Some(&cache)).unwrap();
        assert_eq!(Codec::Gzip.decompress(&got).unwrap(), raw);
        // ... and the fresh result is cached.
        assert_eq!(cache.payload(&sha, Codec::Gzip).unwrap(), got);
    }

    #[test]
    fn a_shipped_copy_with_matching_hashes_beside_it_is_used_without_decompressing() {
        let d = tempfile::tempdir().unwrap();
        let bin = d.path().join("reasonix-remote-x");
        let raw: Vec<u8> = (0..50_000u32)
            .flat_map(|i| (i % 89).to_le_bytes())
            .collect();
        std::fs::write(&bin, &raw).unwrap();
        let sha = sha256_hex(&raw);
        let copy = Codec::Xz.compress(&raw[..]).unwrap();
        let copy_path = d.path().join("reasonix-remote-x.xz");
        let sums = d.path().join("reasonix-remote-x.xz.sha256");
        std::fs::write(&copy_path, &copy).unwrap();
        std::fs::write(&sums, format!("{} {sha}\n", sha256_hex(&copy))).unwrap();
        assert_eq!(full(&bin, &raw, &sha, Codec::Xz, None).unwrap(), copy);
        // The hashes decide: bytes that are no xz at all but match them are taken as is
        // (which shows nothing was decompressed)...
        let bogus = b"not xz".to_vec();
        std::fs::write(&copy_path, &bogus).unwrap();
        std::fs::write(&sums, format!("{} {sha}\n", sha256_hex(&bogus))).unwrap();
        assert_eq!(full(&bin, &raw, &sha, Codec::Xz, None).unwrap(), bogus);
        // ... a damaged copy (its hash differs) is checked the slow way and replaced...
        std::fs::write(&sums, format!("{} {sha}\n", sha256_hex(&copy))).unwrap();
        let got = full(&bin, &raw, &sha, Codec::Xz, None).unwrap();
        assert_eq!(Codec::Xz.decompress(&got).unwrap(), raw);
        // ... and so is a copy of another build (the binary's hash differs).
        std::fs::write(&copy_path, &copy).unwrap();
        std::fs::write(&sums, format!("{} {}\n", sha256_hex(&copy), "0".repeat(64))).unwrap();
        let other: Vec<u8> = raw.iter().rev().copied().collect();
        let got = full(&bin, &other, &sha256_hex(&other), Codec::Xz, None).unwrap();
        assert_eq!(Codec::Xz.decompress(&got).unwrap(), other);
    }
}
