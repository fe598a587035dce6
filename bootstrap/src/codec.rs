//! Compression of uploads to the host: the laptop compresses with the best codec the host can
//! undo with a tool it already has (`xz`, then `zstd`, then `gzip`; plain bytes when it has
//! none), so the host needs nothing installed.
//!
//! Order: for static Rust executables `xz` (LZMA2, preset 9e) gives the smallest files, `zstd`
//! at level 19 is a few percent larger, gzip about 35 % larger (figures in docs/REMOTE.md).
//! Decompression on the host takes tens of milliseconds for any of them, so the smallest wins.

use std::io::{self, Read, Write};

/// One way to put bytes on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    /// `.xz` (LZMA2), undone with `xz -dc`.
    Xz,
    /// `.zst`, undone with `zstd -dcq`.
    Zstd,
    /// `.gz`, undone with `gzip -dc`.
    Gzip,
    /// Uncompressed.
    Raw,
}

/// Above this size an input is compressed with fast settings: such binaries are debug builds
/// (a release host binary is a few MiB), and the strongest settings would take tens of
/// seconds on them for little gain on a development machine's loopback.
const STRONG_LIMIT: usize = 24 << 20;

impl Codec {
    /// Every codec, best first.
    pub const BEST_FIRST: [Codec; 4] = [Codec::Xz, Codec::Zstd, Codec::Gzip, Codec::Raw];

    /// Short name (progress lines, logs, docs).
    pub fn name(self) -> &'static str {
        match self {
            Codec::Xz => "xz",
            Codec::Zstd => "zstd",
            Codec::Gzip => "gzip",
            Codec::Raw => "uncompressed",
        }
    }

    /// File name suffix of a payload in this codec (`""` for raw).
    pub fn suffix(self) -> &'static str {
        match self {
            Codec::Xz => ".xz",
            Codec::Zstd => ".zst",
            Codec::Gzip => ".gz",
            Codec::Raw => "",
        }
    }

    /// The host command that writes the decompressed bytes of the file named after it to
    /// stdout (`None` for raw: the file is the data).
    pub(crate) fn host_decoder(self) -> Option<&'static str> {
        match self {
            Codec::Xz => Some("xz -dc"),
            Codec::Zstd => Some("zstd -dcq"),
            Codec::Gzip => Some("gzip -dc"),
            Codec::Raw => None,
        }
    }

    /// Compress `data` (strong settings for release-sized inputs, fast ones above 24 MiB).
    pub fn compress(self, data: &[u8]) -> io::Result<Vec<u8>> {
        let strong = data.len() <= STRONG_LIMIT;
        match self {
            Codec::Xz => {
                use liblzma::stream::{Check, Filters, LzmaOptions, Stream};
                let preset = if strong {
                    9 | liblzma::stream::PRESET_EXTREME
                } else {
                    1
                };
                let mut filters = Filters::new();
                // The x86 branch filter turns relative call targets absolute, which LZMA2
                // then finds repeated: about 3 % off an x86_64 host binary. Every xz since
                // 5.0 undoes it. (The ARM64 filter needs xz 5.4 on the host: not used.)
                if strong && is_x86_64_elf(data) {
                    filters.x86();
                }
                filters.lzma2(&LzmaOptions::new_preset(preset).map_err(io::Error::other)?);
                let stream =
                    Stream::new_stream_encoder(&filters, Check::Crc64).map_err(io::Error::other)?;
                let mut enc = liblzma::write::XzEncoder::new_stream(Vec::new(), stream);
                enc.write_all(data)?;
                enc.finish()
            }
            Codec::Zstd => {
                // Level 19 keeps the default 8 MiB window, which `zstd -d` accepts without
                // `--long`/`--memory` flags on the host.
                zstd::bulk::compress(data, if strong { 19 } else { 3 })
            }
            Codec::Gzip => {
                let level = if strong { 9 } else { 6 };
                let mut enc =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
                enc.write_all(data)?;
                enc.finish()
            }
            Codec::Raw => Ok(data.to_vec()),
        }
    }

    /// Undo [`Codec::compress`] (used to check shipped and cached payloads on the laptop).
    pub fn decompress(self, data: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        match self {
            Codec::Xz => {
                liblzma::read::XzDecoder::new(data).read_to_end(&mut out)?;
            }
            Codec::Zstd => {
                zstd::stream::read::Decoder::new(data)?.read_to_end(&mut out)?;
            }
            Codec::Gzip => {
                flate2::read::GzDecoder::new(data).read_to_end(&mut out)?;
            }
            Codec::Raw => out.extend_from_slice(data),
        }
        Ok(out)
    }
}

/// An ELF file for x86_64 (`e_machine` 62).
fn is_x86_64_elf(data: &[u8]) -> bool {
    data.len() > 20 && data.starts_with(b"\x7fELF") && data[18] == 62 && data[19] == 0
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The decompressors found on the host by the probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HostCodecs {
    /// `xz` is on the host's PATH.
    pub xz: bool,
    /// `zstd` is on the host's PATH.
    pub zstd: bool,
    /// `gzip` is on the host's PATH.
    pub gzip: bool,
}

impl HostCodecs {
    /// True if the host can undo `codec`.
    pub fn supports(self, codec: Codec) -> bool {
        match codec {
            Codec::Xz => self.xz,
            Codec::Zstd => self.zstd,
            Codec::Gzip => self.gzip,
            Codec::Raw => true,
        }
    }

    /// The best codec the host can undo for an input of `len` bytes.
    pub fn best(self, len: usize) -> Codec {
        Codec::order(len)
            .into_iter()
            .find(|c| self.supports(*c))
            .unwrap_or(Codec::Raw)
    }

    /// The next codec after `failed` for an input of `len` bytes: what to try when `failed`
    /// did not work on the host (`Raw` at the end).
    pub fn after(self, len: usize, failed: Codec) -> Codec {
        Codec::order(len)
            .into_iter()
            .skip_while(|c| *c != failed)
            .skip(1)
            .find(|c| self.supports(*c))
            .unwrap_or(Codec::Raw)
    }
}

impl Codec {
    /// Preference for an input of `len` bytes: smallest result first for release-sized
    /// binaries; for large (debug) ones the fastest good one first (zstd -3 compresses a
    /// 37 MB debug build in a fraction of the time xz needs, and better than gzip).
    fn order(len: usize) -> [Codec; 4] {
        if len > STRONG_LIMIT {
            [Codec::Zstd, Codec::Gzip, Codec::Xz, Codec::Raw]
        } else {
            Codec::BEST_FIRST
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn round_trips_and_order() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for c in Codec::BEST_FIRST {
            let z = c.compress(&data).unwrap();
            assert_eq!(c.decompress(&z).unwrap(), data, "{c}");
            if c != Codec::Raw {
                assert!(z.len() < data.len() / 4, "{c}: {}", z.len());
            }
        }
        let all = HostCodecs {
            xz: true,
            zstd: true,
            gzip: true,
        };
        let small = 5 << 20;
        let big = 40 << 20;
        assert_eq!(all.best(small), Codec::Xz);
        assert_eq!(all.after(small, Codec::Xz), Codec::Zstd);
        assert_eq!(all.after(small, Codec::Gzip), Codec::Raw);
        assert_eq!(all.after(small, Codec::Raw), Codec::Raw);
        assert_eq!(all.best(big), Codec::Zstd);
        assert_eq!(all.after(big, Codec::Zstd), Codec::Gzip);
        let gz = HostCodecs {
            gzip: true,
            ..HostCodecs::default()
        };
        assert_eq!(gz.best(small), Codec::Gzip);
        assert_eq!(gz.best(big), Codec::Gzip);
        assert_eq!(gz.after(small, Codec::Gzip), Codec::Raw);
        assert_eq!(HostCodecs::default().best(small), Codec::Raw);
        let zs = HostCodecs {
            zstd: true,
            gzip: true,
            ..HostCodecs::default()
        };
        assert_eq!(zs.best(small), Codec::Zstd);
        assert_eq!(zs.after(small, Codec::Zstd), Codec::Gzip);
    }

    /// An x86_64 executable goes through the x86 branch filter, and the host's tool (the
    /// real `xz -dc`, as the finishing script runs it) gives back the exact bytes.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn x86_64_executables_use_the_branch_filter_and_xz_undoes_it() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let part = &exe[..exe.len().min(4 << 20)];
        assert!(is_x86_64_elf(part), "this test binary is an x86_64 ELF");
        let filtered = Codec::Xz.compress(part).unwrap();
        let mut plain =
            liblzma::write::XzEncoder::new(Vec::new(), 9 | liblzma::stream::PRESET_EXTREME);
        plain.write_all(part).unwrap();
        let plain = plain.finish().unwrap();
        assert!(
            filtered.len() < plain.len(),
            "the filter saves bytes: {} vs {}",
            filtered.len(),
            plain.len()
        );
        let mut child = std::process::Command::new("xz")
            .arg("-dc")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("xz on PATH (.ci/run installs xz-utils)");
        let mut stdin = child.stdin.take().unwrap();
        let feed = std::thread::spawn(move || stdin.write_all(&filtered));
        let out = child.wait_with_output().unwrap();
        feed.join().unwrap().unwrap();
        assert!(out.status.success());
        assert!(out.stdout == part, "xz -dc gives back the input");
        // Not an x86_64 ELF (an aarch64 header): no filter, same bytes as plain LZMA2.
        let mut arm = part.to_vec();
        arm[18] = 183;
        assert!(!is_x86_64_elf(&arm));
        assert_eq!(
            Codec::Xz
                .decompress(&Codec::Xz.compress(&arm).unwrap())
                .unwrap(),
            arm
        );
    }
}
