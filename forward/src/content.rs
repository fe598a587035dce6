//! Large content by reference.
//!
//! A frame carries at most [`crate::link::LinkConfig::max_frame_bytes`] (16 MiB), and JSON
//! encoding can double a payload (`"` becomes `\"`) or worse. So no field that can grow
//! without bound travels inline: the host stores it in a content-addressed store (named by
//! its SHA-256) and the event carries a [`ContentRef`]; a client that wants the whole of it
//! asks for it in chunks of at most [`FETCH_CHUNK_MAX`] bytes with
//! [`crate::proto::Request::FetchContent`] and checks the SHA-256 ([`fetch_all`]).
//!
//! The same mechanism carries provider requests whose conversation is too big for one frame
//! (the laptop fetches the messages from the host), and [`split_line`] cuts long tunnelled
//! MCP lines into pieces that each fit a frame.

use std::future::Future;

use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Fields longer than this many bytes are stored by reference instead of travelling inline.
pub const EXTERNALIZE_OVER: usize = 64 * 1024;

/// Largest chunk a [`crate::proto::Request::FetchContent`] answers with, in bytes of content
/// (base64 makes it 4/3 of that on the wire, far below the frame limit).
pub const FETCH_CHUNK_MAX: u32 = 1024 * 1024;

/// A provider request whose JSON is longer than this is sent with its messages by reference.
pub const PROVIDER_INLINE_MAX: usize = 4 * 1024 * 1024;

/// Tunnelled MCP lines longer than this many bytes are sent in pieces.
pub const MCP_LINE_PIECE: usize = 1024 * 1024;

/// A reference to content kept on the host.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ContentRef {
    /// Lower-case hex SHA-256 of the content; also its name in the store.
    pub sha256: String,
    /// Size of the whole content in bytes.
    pub bytes: u64,
}

impl ContentRef {
    /// The reference of `content`.
    pub fn of(content: &[u8]) -> ContentRef {
        ContentRef {
            sha256: sha256_hex(content),
            bytes: content.len() as u64,
        }
    }
}

/// One piece of stored content, the answer to a fetch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContentChunk {
    /// Which content.
    pub sha256: String,
    /// Byte offset of this piece.
    pub offset: u64,
    /// Size of the whole content.
    pub total: u64,
    /// The bytes of this piece, base64 (standard alphabet, padded).
    pub data: String,
}

impl ContentChunk {
    /// A chunk of `content` (whose SHA-256 is `sha256`) starting at `offset`, at most `len`
    /// bytes (clamped to [`FETCH_CHUNK_MAX`]); empty past the end.
    pub fn slice(sha256: &str, content: &[u8], offset: u64, len: u32) -> ContentChunk {
        let start = (offset.min(content.len() as u64)) as usize;
        let end = start + (len.min(FETCH_CHUNK_MAX) as usize).min(content.len() - start);
        ContentChunk {
            sha256: sha256.to_string(),
            offset: start as u64,
            total: content.len() as u64,
            data: encode_bytes(&content[start..end]),
        }
    }
}

/// Why content could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum ContentError {
    /// The request for a chunk failed.
    #[error("fetching content {sha256} at byte {offset} failed: {message}")]
    Fetch {
        /// Which content.
        sha256: String,
        /// Where.
        offset: u64,
        /// The peer's or the link's error.
        message: String,
    },
    /// A chunk did not decode or did not fit.
    #[error("content {sha256}: bad chunk at byte {offset}: {problem}")]
    BadChunk {
        /// Which content.
        sha256: String,
        /// Where.
        offset: u64,
        /// What was wrong.
        problem: String,
    },
    /// The bytes received do not hash to the reference.
    #[error("content {expected} arrived with SHA-256 {got}: it was corrupted or changed; fetch it again")]
    Mismatch {
        /// The reference.
        expected: String,
        /// What the bytes hash to.
        got: String,
    },
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// True when `s` looks like a SHA-256 name (64 lower-case hex digits), so it is safe as a
/// file name.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Base64 of `bytes` (the chunk encoding).
pub fn encode_bytes(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Bytes of a base64 chunk.
pub fn decode_bytes(data: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| format!("not base64: {e}"))
}

/// Fetch the whole of `r` chunk by chunk with `fetch(offset, len)` and check its SHA-256.
/// `fetch` is typically a [`crate::proto::Request::FetchContent`] call on the link.
pub async fn fetch_all<F, Fut>(r: &ContentRef, mut fetch: F) -> Result<Vec<u8>, ContentError>
where
    F: FnMut(u64, u32) -> Fut,
    Fut: Future<Output = Result<ContentChunk, String>>,
{
    let mut out = Vec::with_capacity(r.bytes.min(1 << 30) as usize);
    loop {
        let offset = out.len() as u64;
        if offset >= r.bytes {
            break;
        }
        let chunk =
            fetch(offset, FETCH_CHUNK_MAX)
                .await
                .map_err(|message| ContentError::Fetch {
                    sha256: r.sha256.clone(),
                    offset,
                    message,
                })?;
        let bad = |problem: String| ContentError::BadChunk {
            sha256: r.sha256.clone(),
            offset,
            problem,
        };
        if chunk.offset != offset || chunk.total != r.bytes {
            return Err(bad(format!(
                "answer is for byte {} of {} bytes, expected byte {offset} of {}",
                chunk.offset, chunk.total, r.bytes
            )));
        }
        let data = decode_bytes(&chunk.data).map_err(bad)?;
        if data.is_empty() {
            return Err(bad("empty chunk before the end".into()));
        }
        if offset + data.len() as u64 > r.bytes {
            return Err(bad("chunk runs past the end".into()));
        }
        out.extend_from_slice(&data);
    }
    let got = sha256_hex(&out);
    if got != r.sha256 {
        return Err(ContentError::Mismatch {
            expected: r.sha256.clone(),
            got,
        });
    }
    Ok(out)
}

/// `line` cut into pieces of at most [`MCP_LINE_PIECE`] bytes (at char boundaries); a line
/// that fits is one piece. The receiver joins pieces until one arrives with `more == false`.
pub fn split_line(line: String) -> Vec<(String, bool)> {
    if line.len() <= MCP_LINE_PIECE {
        return vec![(line, false)];
    }
    let mut out = Vec::new();
    let mut rest = line.as_str();
    while !rest.is_empty() {
        let mut cut = rest.len().min(MCP_LINE_PIECE);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (piece, tail) = rest.split_at(cut);
        out.push((piece.to_string(), !tail.is_empty()));
        rest = tail;
    }
    out
}

/// Joins line pieces (from [`split_line`]) back into lines.
#[derive(Debug, Default)]
pub struct LineJoiner {
    partial: String,
}

impl LineJoiner {
    /// Feed one piece; the whole line when this was its last piece.
    pub fn push(&mut self, piece: String, more: bool) -> Option<String> {
        if !more && self.partial.is_empty() {
            return Some(piece);
        }
        self.partial.push_str(&piece);
        if more {
            None
        } else {
            Some(std::mem::take(&mut self.partial))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fetch_all_reassembles_and_checks_the_hash() {
        let content: Vec<u8> = (0..(3 * FETCH_CHUNK_MAX as usize + 17))
            .map(|i| (i % 251) as u8)
            .collect();
        let r = ContentRef::of(&content);
        let mut calls = 0;
        let got = fetch_all(&r, |off, len| {
            calls += 1;
            let c = ContentChunk::slice(&r.sha256, &content, off, len);
            async move { Ok(c) }
        })
        .await
        .unwrap();
        assert_eq!(got, content);
        assert_eq!(calls, 4);

        // A store that serves other bytes under the same name is caught.
        let mut wrong = content.clone();
        wrong[5] ^= 1;
        let err = fetch_all(&r, |off, len| {
            let c = ContentChunk::slice(&r.sha256, &wrong, off, len);
            async move { Ok(c) }
        })
        .await
        .unwrap_err();
        assert!(matches!(err, ContentError::Mismatch { .. }), "{err}");
    }

    #[tokio::test]
    async fn empty_content_needs_no_fetch_and_errors_name_the_offset() {
        let r = ContentRef::of(b"");
        let got = fetch_all(&r, |_, _| async { Err("never".to_string()) })
            .await
            .unwrap();
        assert!(got.is_empty());
        let r = ContentRef::of(b"abc");
        let err = fetch_all(&r, |_, _| async { Err("gone".to_string()) })
            .await
            .unwrap_err();
        assert!(err.to_string().contains("at byte 0"), "{err}");
    }

    #[test]
    fn slices_clamp_to_the_content() {
        let c = ContentChunk::slice("x", b"hello", 3, 100);
        assert_eq!(decode_bytes(&c.data).unwrap(), b"lo");
        assert_eq!(c.total, 5);
        let c = ContentChunk::slice("x", b"hello", 9, 100);
        assert_eq!((c.offset, c.data.as_str()), (5, ""));
    }

    #[test]
    fn long_lines_split_at_char_boundaries_and_join_back() {
        let line = "é".repeat(MCP_LINE_PIECE); // 2 bytes each
        let pieces = split_line(line.clone());
        assert_eq!(pieces.len(), 2);
        assert!(pieces.iter().all(|(p, _)| p.len() <= MCP_LINE_PIECE));
        let mut j = LineJoiner::default();
        let mut out = None;
        for (p, more) in pieces {
            out = j.push(p, more);
        }
        assert_eq!(out.as_deref(), Some(line.as_str()));
        assert_eq!(
            split_line("short".into()),
            vec![("short".to_string(), false)]
        );
        assert_eq!(j.push("x".into(), false).as_deref(), Some("x"));
    }

    #[test]
    fn sha_names_are_checked() {
        assert!(is_sha256_hex(&sha256_hex(b"x")));
        assert!(!is_sha256_hex("../../etc/passwd"));
        assert!(!is_sha256_hex(&"A".repeat(64)));
    }
}
