//! The laptop's cache of host binaries and of what was made from them (compressed payloads,
//! deltas), so a second host or a second bootstrap does not compress again, and an upgrade can
//! send a delta against the build the host already has (the laptop must keep that build: the
//! host's copy is never downloaded).
//!
//! Layout of the directory (created 0700, files 0600; default
//! `~/.reasonix/cache/host-binaries`, set by the `reasonix` binary):
//! - `bin-<sha256>`: a host binary that was installed on some host;
//! - `<sha256>.<xz|zst|gz>`: its compressed payload;
//! - `delta-<base sha256>-<target sha256>.<ext>`: a compressed delta between two of them;
//! - `attached-<hash of the host>`: the build this laptop last linked with on that host (a
//!   hint: without it, the SFTP session for an install opens beside the first attach).
//!
//! Every file is checked before use (binaries by SHA-256, payloads by decompressing and
//! hashing), so a damaged cache costs time, never a wrong install. At most [`KEEP_BINARIES`]
//! binaries are kept (least recently used go first, with everything made from them).

use std::io::Write;
use std::path::{Path, PathBuf};

use reasonix_sftpfs::mode;
use sha2::{Digest, Sha256};

use crate::codec::Codec;

/// How many host binaries the cache keeps (each a few MiB for release builds).
pub const KEEP_BINARIES: usize = 6;

/// Binaries larger than this are not cached (debug builds of tens of MiB; deltas are for
/// release-sized binaries).
pub const MAX_CACHED: u64 = 64 << 20;

/// A cache directory on the laptop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostBinaryCache {
    dir: PathBuf,
}

/// SHA-256 (hex) of `data`.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

impl HostBinaryCache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The build this laptop last linked with on `host` (any string naming the host), as
    /// recorded by [`record_attached`](Self::record_attached). A hint only: a client that
    /// finds none opens the SFTP session for an install beside its first attach.
    pub fn attached_build(&self, host: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.attached_path(host)).ok()?;
        let build = text.trim();
        (!build.is_empty() && build.len() <= 128).then(|| build.to_string())
    }

    /// Remember that this laptop linked with `build` on `host`.
    pub fn record_attached(&self, host: &str, build: &str) {
        if self.attached_build(host).as_deref() == Some(build) {
            return;
        }
        if let Err(e) = self.write_atomic(&self.attached_path(host), build.as_bytes()) {
            tracing::debug!(error = %e, "cannot record the attached build");
        }
    }

    fn attached_path(&self, host: &str) -> PathBuf {
        self.dir
            .join(format!("attached-{}", &sha256_hex(host.as_bytes())[..32]))
    }

    fn bin_path(&self, sha: &str) -> PathBuf {
        self.dir.join(format!("bin-{sha}"))
    }

    fn payload_path(&self, sha: &str, codec: Codec) -> PathBuf {
        self.dir.join(format!("{sha}{}", codec.suffix()))
    }

    fn delta_path(&self, base: &str, target: &str, codec: Codec) -> PathBuf {
        self.dir
            .join(format!("delta-{base}-{target}{}", codec.suffix()))
    }

    /// The binary with SHA-256 `sha`, if cached and intact (a damaged file is removed).
    pub fn binary(&self, sha: &str) -> Option<Vec<u8>> {
        let p = self.bin_path(sha);
        let data = std::fs::read(&p).ok()?;
        if sha256_hex(&data) != sha {
            tracing::warn!(path = %p.display(), "cached host binary is damaged; removing it");
            let _ = std::fs::remove_file(&p);
            return None;
        }
        // Mark as recently used for pruning.
        let _ = filetime_touch(&p);
        Some(data)
    }

    /// True if the binary `sha` is in the cache (not checked).
    pub fn has_binary(&self, sha: &str) -> bool {
        self.bin_path(sha).is_file()
    }

    /// Keep `data` (SHA-256 `sha`) for later deltas; prune old entries.
    pub fn store_binary(&self, sha: &str, data: &[u8]) {
        if data.len() as u64 > MAX_CACHED {
            return;
        }
        let p = self.bin_path(sha);
        if p.is_file() {
            let _ = filetime_touch(&p);
            return;
        }
        if let Err(e) = self.write_atomic(&p, data) {
            tracing::warn!(path = %p.display(), error = %e, "cannot cache the host binary");
            return;
        }
        self.prune();
    }

    /// A cached compressed payload of binary `sha`, checked against the binary's hash.
    pub fn payload(&self, sha: &str, codec: Codec) -> Option<Vec<u8>> {
        let p = self.payload_path(sha, codec);
        let data = std::fs::read(&p).ok()?;
        match codec.decompress(&data) {
            Ok(raw) if sha256_hex(&raw) == sha => Some(data),
            _ => {
                let _ = std::fs::remove_file(&p);
                None
            }
        }
    }

    /// Keep a compressed payload of binary `sha`.
    pub fn store_payload(&self, sha: &str, codec: Codec, data: &[u8]) {
        let _ = self.write_atomic(&self.payload_path(sha, codec), data);
    }

    /// A cached compressed delta from `base` to `target` (checked by the caller, who has
    /// both binaries).
    pub fn delta(&self, base: &str, target: &str, codec: Codec) -> Option<Vec<u8>> {
        std::fs::read(self.delta_path(base, target, codec)).ok()
    }

    /// Keep a compressed delta.
    pub fn store_delta(&self, base: &str, target: &str, codec: Codec, data: &[u8]) {
        let _ = self.write_atomic(&self.delta_path(base, target, codec), data);
    }

    /// Remove a cached delta (it did not verify).
    pub fn forget_delta(&self, base: &str, target: &str, codec: Codec) {
        let _ = std::fs::remove_file(self.delta_path(base, target, codec));
    }

    fn write_atomic(&self, path: &Path, data: &[u8]) -> std::io::Result<()> {
        let mut dirs = std::fs::DirBuilder::new();
        dirs.recursive(true);
        mode::dirs_with_mode(&mut dirs, 0o700);
        dirs.create(&self.dir)?;
        let tmp = self
            .dir
            .join(format!(".tmp-{:016x}", rand::random::<u64>()));
        let res = (|| {
            let mut opts = std::fs::OpenOptions::new();
            opts.write(true).create_new(true);
            mode::create_with_mode(&mut opts, 0o600);
            let mut f = opts.open(&tmp)?;
            f.write_all(data)?;
            std::fs::rename(&tmp, path)
        })();
        if res.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        res
    }

    /// Keep the [`KEEP_BINARIES`] most recently used binaries and what was made from them.
    fn prune(&self) {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut bins = Vec::new();
        let mut others = Vec::new();
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let mtime = e
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(std::time::SystemTime::UNIX_EPOCH);
            match name.strip_prefix("bin-") {
                Some(sha) => bins.push((mtime, sha.to_string())),
                None => others.push(name),
            }
        }
        bins.sort_by_key(|b| std::cmp::Reverse(b.0));
        let keep: Vec<String> = bins
            .iter()
            .take(KEEP_BINARIES)
            .map(|(_, s)| s.clone())
            .collect();
        for (_, sha) in bins.iter().skip(KEEP_BINARIES) {
            let _ = std::fs::remove_file(self.bin_path(sha));
        }
        for name in others {
            // `<sha>.<ext>` and `delta-<a>-<b>.<ext>`: drop those naming a binary not kept.
            let shas: Vec<&str> = name
                .trim_start_matches("delta-")
                .split(['-', '.'])
                .filter(|s| s.len() == 64)
                .collect();
            if !shas.is_empty() && shas.iter().any(|s| !keep.iter().any(|k| k == s)) {
                let _ = std::fs::remove_file(self.dir.join(&name));
            }
        }
    }
}

/// Set a file's mtime to now (the cache's "recently used").
fn filetime_touch(p: &Path) -> std::io::Result<()> {
    let f = std::fs::OpenOptions::new().append(true).open(p)?;
    f.set_modified(std::time::SystemTime::now())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn stores_checks_and_prunes() {
        let d = tempfile::tempdir().unwrap();
        let c = HostBinaryCache::new(d.path().join("c"));
        let a = b"binary a".to_vec();
        let sa = sha256_hex(&a);
        assert!(c.binary(&sa).is_none());
        c.store_binary(&sa, &a);
        assert_eq!(c.binary(&sa).unwrap(), a);
        let z = Codec::Gzip.compress(&a).unwrap();
        c.store_payload(&sa, Codec::Gzip, &z);
        assert_eq!(c.payload(&sa, Codec::Gzip).unwrap(), z);
        // A damaged payload or binary is dropped, not used.
        std::fs::write(d.path().join(format!("c/{sa}.gz")), b"junk").unwrap();
        assert!(c.payload(&sa, Codec::Gzip).is_none());
        std::fs::write(d.path().join(format!("c/bin-{sa}")), b"binary b").unwrap();
        assert!(c.binary(&sa).is_none());
        assert!(!c.has_binary(&sa));

        // Pruning keeps the newest KEEP_BINARIES and what was made from them.
        let mut shas = Vec::new();
        for i in 0..KEEP_BINARIES + 2 {
            let data = format!("binary {i}").into_bytes();
            let s = sha256_hex(&data);
            c.store_binary(&s, &data);
            c.store_payload(&s, Codec::Gzip, &Codec::Gzip.compress(&data).unwrap());
            let past =
                std::time::SystemTime::now() - std::time::Duration::from_secs(1000 - i as u64 * 10);
            std::fs::OpenOptions::new()
                .append(true)
                .open(d.path().join(format!("c/bin-{s}")))
                .unwrap()
                .set_modified(past)
                .unwrap();
            shas.push(s);
        }
        c.store_delta(&shas[0], &shas[7], Codec::Xz, b"d");
        c.store_delta(&shas[6], &shas[7], Codec::Xz, b"d");
        // Trigger a prune with one more binary.
        let last = b"binary last".to_vec();
        c.store_binary(&sha256_hex(&last), &last);
        let names: Vec<String> = std::fs::read_dir(d.path().join("c"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        let bins = names.iter().filter(|n| n.starts_with("bin-")).count();
        assert_eq!(bins, KEEP_BINARIES, "{names:?}");
        assert!(!c.has_binary(&shas[0]) && !c.has_binary(&shas[2]));
        assert!(c.has_binary(&shas[3]) && c.has_binary(&shas[7]));
        assert!(!names.contains(&format!("{}.gz", shas[0])));
        assert!(names.contains(&format!("{}.gz", shas[7])));
        assert!(c.delta(&shas[0], &shas[7], Codec::Xz).is_none());
        assert!(c.delta(&shas[6], &shas[7], Codec::Xz).is_some());
    }
}
