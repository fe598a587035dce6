//! What a data frame's payload holds: an [`Envelope`] as JSON (frame kind 3, `Data`), or a
//! piece of channel bytes without JSON or base64 (frame kind 8, `Bytes`). Both kinds share
//! the link's one data sequence, replay and acks. See `docs/PROTOCOL.md`, "Frames".
//!
//! A `Bytes` payload is `u64 ch (big-endian) | the bytes`, and means exactly
//! `Envelope::Channel(ChannelMsg::Data { ch, data: ChannelData::Bytes { data } })`. A side
//! sends it only when the peer said in the handshake that it reads it
//! ([`crate::proto::Hello::bytes_frames`], [`crate::proto::Welcome::bytes_frames`]); every
//! side reads both kinds, and the JSON form of the same message stays valid.

use crate::channel::{ChannelData, ChannelMsg};
use crate::frame::FrameKind;
use crate::proto::{Envelope, PtyBytes};

/// Bytes of a `Bytes` payload before the data: the channel id.
pub const BYTES_HEADER_LEN: usize = 8;

/// The frame kind and payload for `envelope`: channel bytes as a `Bytes` frame when
/// `bytes_frames` (the peer reads them), everything else as JSON in a `Data` frame.
pub fn encode(envelope: &Envelope, bytes_frames: bool) -> serde_json::Result<(FrameKind, Vec<u8>)> {
    if bytes_frames {
        if let Envelope::Channel(ChannelMsg::Data {
            ch,
            data: ChannelData::Bytes { data },
        }) = envelope
        {
            let mut out = Vec::with_capacity(BYTES_HEADER_LEN + data.0.len());
            out.extend_from_slice(&ch.to_be_bytes());
            out.extend_from_slice(&data.0);
            return Ok((FrameKind::Bytes, out));
        }
    }
    Ok((FrameKind::Data, serde_json::to_vec(envelope)?))
}

/// The envelope a data frame of `kind` carries; an error says what is wrong with it.
pub fn decode(kind: FrameKind, payload: &[u8]) -> Result<Envelope, String> {
    match kind {
        FrameKind::Data => serde_json::from_slice(payload).map_err(|e| e.to_string()),
        FrameKind::Bytes => {
            let Some((ch, data)) = payload.split_first_chunk::<BYTES_HEADER_LEN>() else {
                return Err(format!(
                    "a bytes frame of {} bytes is shorter than its {BYTES_HEADER_LEN}-byte channel id",
                    payload.len()
                ));
            };
            Ok(Envelope::Channel(ChannelMsg::Data {
                ch: u64::from_be_bytes(*ch),
                data: ChannelData::Bytes {
                    data: PtyBytes(data.to_vec()),
                },
            }))
        }
        other => Err(format!("a {} frame carries no envelope", other.name())),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn bytes(ch: u64, data: &[u8]) -> Envelope {
        Envelope::Channel(ChannelMsg::Data {
            ch,
            data: ChannelData::Bytes {
                data: PtyBytes(data.to_vec()),
            },
        })
    }

    #[test]
    fn channel_bytes_go_raw_only_when_the_peer_reads_them() {
        let e = bytes(0x0102_0304_0506_0708, &[0, 255, b'{']);
        let (kind, payload) = encode(&e, true).unwrap();
        assert_eq!(kind, FrameKind::Bytes);
        assert_eq!(payload, [1, 2, 3, 4, 5, 6, 7, 8, 0, 255, b'{']);
        assert_eq!(decode(kind, &payload).unwrap(), e);
        // Without the peer's word: JSON (base64), still decoded to the same envelope.
        let (kind, payload) = encode(&e, false).unwrap();
        assert_eq!(kind, FrameKind::Data);
        assert!(payload.starts_with(b"{"));
        assert_eq!(decode(kind, &payload).unwrap(), e);
    }

    #[test]
    fn other_envelopes_stay_json_and_short_or_wrong_frames_are_refused() {
        let credit = Envelope::Channel(ChannelMsg::Credit { ch: 3, bytes: 9 });
        let (kind, payload) = encode(&credit, true).unwrap();
        assert_eq!(kind, FrameKind::Data);
        assert_eq!(decode(kind, &payload).unwrap(), credit);
        assert_eq!(decode(FrameKind::Bytes, &[0; 8]).unwrap(), bytes(0, &[]));
        let short = decode(FrameKind::Bytes, &[0; 7]).unwrap_err();
        assert!(short.contains("shorter"), "{short}");
        assert!(decode(FrameKind::Ack, b"{}").is_err());
    }
}
