//! The container of a host-binary delta upgrade, shared by the laptop (which writes it, in
//! `reasonix-bootstrap`) and the host (where the previous `reasonix-remote` applies it with
//! `reasonix-remote apply-delta`).
//!
//! Layout: a fixed [`DeltaHeader`] ([`DeltaHeader::LEN`] bytes), then a `bidiff` patch (the
//! `bipatch` crate's format) that turns the base binary into the target binary. The header
//! names both binaries by SHA-256 so the host refuses a delta made against another base
//! before doing any work, and checks the result before anything is written.

/// Capability word printed by `reasonix-remote capabilities` when the binary can apply
/// deltas in this format. The laptop sends a delta only to a base that prints it.
pub const DELTA_CAPABILITY: &str = "apply-delta=rxdelta1";

/// First bytes of every delta.
pub const DELTA_MAGIC: [u8; 8] = *b"RXDELTA1";

/// The fixed-size header in front of the patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaHeader {
    /// SHA-256 of the binary the patch applies to.
    pub base_sha256: [u8; 32],
    /// SHA-256 of the binary the patch produces.
    pub target_sha256: [u8; 32],
    /// Length in bytes of the binary the patch produces.
    pub target_len: u64,
}

/// A header that cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DeltaHeaderError {
    /// Fewer bytes than a header.
    #[error("the delta is truncated: {0} bytes, a header needs {len}", len = DeltaHeader::LEN)]
    Truncated(usize),
    /// Not a delta of this format.
    #[error("not a reasonix delta (magic {0:02x?}, expected RXDELTA1)")]
    BadMagic([u8; 8]),
}

impl DeltaHeader {
    /// Encoded length.
    pub const LEN: usize = 8 + 32 + 32 + 8;

    /// The header bytes.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        out[..8].copy_from_slice(&DELTA_MAGIC);
        out[8..40].copy_from_slice(&self.base_sha256);
        out[40..72].copy_from_slice(&self.target_sha256);
        out[72..80].copy_from_slice(&self.target_len.to_le_bytes());
        out
    }

    /// Parse the first [`Self::LEN`] bytes of `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Self, DeltaHeaderError> {
        if bytes.len() < Self::LEN {
            return Err(DeltaHeaderError::Truncated(bytes.len()));
        }
        let mut magic = [0u8; 8];
        magic.copy_from_slice(&bytes[..8]);
        if magic != DELTA_MAGIC {
            return Err(DeltaHeaderError::BadMagic(magic));
        }
        let mut base_sha256 = [0u8; 32];
        base_sha256.copy_from_slice(&bytes[8..40]);
        let mut target_sha256 = [0u8; 32];
        target_sha256.copy_from_slice(&bytes[40..72]);
        let mut len = [0u8; 8];
        len.copy_from_slice(&bytes[72..80]);
        Ok(Self {
            base_sha256,
            target_sha256,
            target_len: u64::from_le_bytes(len),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_errors() {
        let h = DeltaHeader {
            base_sha256: [1; 32],
            target_sha256: [2; 32],
            target_len: 5_000_123,
        };
        let b = h.encode();
        assert_eq!(DeltaHeader::decode(&b), Ok(h));
        assert_eq!(
            DeltaHeader::decode(&b[..10]),
            Err(DeltaHeaderError::Truncated(10))
        );
        let mut bad = b;
        bad[0] = b'X';
        assert!(matches!(
            DeltaHeader::decode(&bad),
            Err(DeltaHeaderError::BadMagic(_))
        ));
    }
}
