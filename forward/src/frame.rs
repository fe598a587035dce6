//! Length-prefixed frames carrying `seq` and `ack`. See `docs/PROTOCOL.md`.
//!
//! Byte layout of one frame (all integers big-endian):
//!
//! ```text
//! u32 len | u8 kind | u64 seq | u64 ack | payload (len - 17 bytes)
//! ```
//!
//! `len` counts the body (kind, seq, ack and payload), never itself. A body shorter than
//! [`HEADER_LEN`] or longer than the configured maximum ends the transport.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::link::LinkError;

/// Bytes of the body before the payload: kind (1), seq (8), ack (8).
pub const HEADER_LEN: usize = 17;

/// Bytes of the length prefix.
pub const PREFIX_LEN: usize = 4;

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    /// Client's first frame; payload = JSON of [`crate::proto::Hello`].
    Hello = 1,
    /// Server's answer; payload = JSON of [`crate::proto::Welcome`].
    Welcome = 2,
    /// One envelope; payload = JSON of [`crate::proto::Envelope`]; `seq >= 1`, consecutive.
    Data = 3,
    /// Acknowledgement only (the `ack` field); no payload.
    Ack = 4,
    /// Heartbeat request; no payload.
    Ping = 5,
    /// Heartbeat answer; no payload.
    Pong = 6,
    /// The sender closes the link for good; payload = UTF-8 reason.
    Close = 7,
    /// One envelope that is a piece of channel bytes, without JSON: payload = `u64 ch` and
    /// the raw bytes ([`crate::payload`]); numbered like `Data`, in the same sequence.
    Bytes = 8,
}

impl FrameKind {
    /// The kind for a wire byte, if it is one we know.
    pub fn from_byte(b: u8) -> Option<FrameKind> {
        Some(match b {
            1 => FrameKind::Hello,
            2 => FrameKind::Welcome,
            3 => FrameKind::Data,
            4 => FrameKind::Ack,
            5 => FrameKind::Ping,
            6 => FrameKind::Pong,
            7 => FrameKind::Close,
            8 => FrameKind::Bytes,
            _ => return None,
        })
    }

    /// Lower-case name for messages.
    pub fn name(self) -> &'static str {
        match self {
            FrameKind::Hello => "hello",
            FrameKind::Welcome => "welcome",
            FrameKind::Data => "data",
            FrameKind::Ack => "ack",
            FrameKind::Ping => "ping",
            FrameKind::Pong => "pong",
            FrameKind::Close => "close",
            FrameKind::Bytes => "bytes",
        }
    }
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// What the frame is.
    pub kind: FrameKind,
    /// Data sequence number (`Data` frames only; 0 otherwise).
    pub seq: u64,
    /// The sender's highest received data `seq`.
    pub ack: u64,
    /// Kind-specific payload.
    pub payload: Bytes,
}

impl Frame {
    /// A frame without payload.
    pub fn control(kind: FrameKind, ack: u64) -> Frame {
        Frame {
            kind,
            seq: 0,
            ack,
            payload: Bytes::new(),
        }
    }

    /// Size of this frame on the wire, prefix included.
    pub fn wire_len(&self) -> usize {
        PREFIX_LEN + HEADER_LEN + self.payload.len()
    }

    /// Append the wire form of this frame to `out`.
    pub fn encode_into(&self, out: &mut BytesMut) {
        encode_parts(self.kind, self.seq, self.ack, &self.payload, out);
    }
}

/// Append one frame built from its parts to `out` (avoids building a [`Frame`]).
pub fn encode_parts(kind: FrameKind, seq: u64, ack: u64, payload: &[u8], out: &mut BytesMut) {
    out.reserve(PREFIX_LEN + HEADER_LEN + payload.len());
    // A payload over 4 GiB cannot be framed; senders check against max_frame_bytes
    // (at most u32::MAX in practice) before they get here, so the cast cannot truncate.
    out.put_u32((HEADER_LEN + payload.len()) as u32);
    out.put_u8(kind as u8);
    out.put_u64(seq);
    out.put_u64(ack);
    out.put_slice(payload);
}

/// Incremental decoder: feed bytes with [`FrameDecoder::buffer_mut`], take frames with
/// [`FrameDecoder::next_frame`]. Checks the length prefix as soon as it is complete, so an
/// oversized frame is refused before its body is read.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: BytesMut,
    max_frame_bytes: usize,
}

impl FrameDecoder {
    /// A decoder refusing bodies longer than `max_frame_bytes`.
    pub fn new(max_frame_bytes: usize) -> Self {
        Self {
            buf: BytesMut::with_capacity(64 * 1024),
            max_frame_bytes,
        }
    }

    /// The buffer to read more bytes into.
    pub fn buffer_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Bytes received but not yet decoded.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next complete frame, `Ok(None)` when more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, LinkError> {
        if self.buf.len() < PREFIX_LEN {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        check_len(len, self.max_frame_bytes)?;
        if self.buf.len() < PREFIX_LEN + len {
            // Make room once for the whole body instead of growing step by step.
            self.buf.reserve(PREFIX_LEN + len - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(PREFIX_LEN);
        let body = self.buf.split_to(len).freeze();
        decode_body(body).map(Some)
    }
}

fn check_len(len: usize, max: usize) -> Result<(), LinkError> {
    if len > max {
        return Err(LinkError::Oversized {
            size: len,
            limit: max,
        });
    }
    if len < HEADER_LEN {
        return Err(LinkError::Malformed(format!(
            "frame body of {len} bytes is shorter than the {HEADER_LEN}-byte header"
        )));
    }
    Ok(())
}

fn decode_body(mut body: Bytes) -> Result<Frame, LinkError> {
    let kind_byte = body.get_u8();
    let kind = FrameKind::from_byte(kind_byte)
        .ok_or_else(|| LinkError::Malformed(format!("unknown frame kind 0x{kind_byte:02x}")))?;
    let seq = body.get_u64();
    let ack = body.get_u64();
    Ok(Frame {
        kind,
        seq,
        ack,
        payload: body,
    })
}

/// Read exactly one frame from `reader` (used by the handshake; the link uses
/// [`FrameDecoder`]). EOF before a complete frame is [`LinkError::TransportClosed`].
pub async fn read_frame<R>(reader: &mut R, max_frame_bytes: usize) -> Result<Frame, LinkError>
where
    R: AsyncRead + Unpin,
{
    let mut prefix = [0u8; PREFIX_LEN];
    reader
        .read_exact(&mut prefix)
        .await
        .map_err(|e| io_closed("reading a frame length", &e))?;
    let len = u32::from_be_bytes(prefix) as usize;
    check_len(len, max_frame_bytes)?;
    let mut body = vec![0u8; len];
    reader
        .read_exact(&mut body)
        .await
        .map_err(|e| io_closed("reading a frame body", &e))?;
    decode_body(Bytes::from(body))
}

/// Write one frame and flush.
pub async fn write_frame<W>(writer: &mut W, frame: &Frame) -> Result<(), LinkError>
where
    W: AsyncWrite + Unpin,
{
    let mut out = BytesMut::with_capacity(frame.wire_len());
    frame.encode_into(&mut out);
    writer
        .write_all(&out)
        .await
        .map_err(|e| io_closed("writing a frame", &e))?;
    writer
        .flush()
        .await
        .map_err(|e| io_closed("flushing a frame", &e))
}

/// Map an I/O error to [`LinkError::TransportClosed`] saying what we were doing.
pub(crate) fn io_closed(doing: &str, e: &std::io::Error) -> LinkError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        LinkError::TransportClosed(format!("end of stream while {doing}"))
    } else {
        LinkError::TransportClosed(format!("{doing}: {e}"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_partial_input() {
        let f = Frame {
            kind: FrameKind::Data,
            seq: 7,
            ack: 3,
            payload: Bytes::from_static(b"{\"x\":1}"),
        };
        let mut wire = BytesMut::new();
        f.encode_into(&mut wire);
        assert_eq!(wire.len(), f.wire_len());
        let mut d = FrameDecoder::new(1024);
        // Feed one byte at a time: no frame until the last byte.
        for (i, b) in wire.iter().enumerate() {
            d.buffer_mut().put_u8(*b);
            let got = d.next_frame().unwrap();
            if i + 1 < wire.len() {
                assert!(got.is_none());
            } else {
                assert_eq!(got, Some(f.clone()));
            }
        }
    }

    #[test]
    fn oversized_refused_from_prefix_alone() {
        let mut d = FrameDecoder::new(100);
        d.buffer_mut().put_u32(101);
        match d.next_frame() {
            Err(LinkError::Oversized { size, limit }) => assert_eq!((size, limit), (101, 100)),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn short_body_and_unknown_kind_are_malformed() {
        let mut d = FrameDecoder::new(100);
        d.buffer_mut().put_u32(3);
        assert!(matches!(d.next_frame(), Err(LinkError::Malformed(m)) if m.contains("shorter")));
        let mut d = FrameDecoder::new(100);
        d.buffer_mut().put_u32(17);
        d.buffer_mut().put_u8(0xee);
        d.buffer_mut().put_slice(&[0u8; 16]);
        assert!(matches!(d.next_frame(), Err(LinkError::Malformed(m)) if m.contains("0xee")));
    }
}
