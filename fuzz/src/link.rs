//! The link layer (`reasonix_forward`): frame decoder, preamble scanner, handshake and a
//! running link fed hostile frames.

use std::time::Duration;

use bytes::BytesMut;
use reasonix_forward::frame::{Frame, FrameDecoder, FrameKind};
use reasonix_forward::handshake::{check_build_id, client_handshake, server_accept};
use reasonix_forward::link::{Link, LinkConfig};
use reasonix_forward::proto::{Envelope, Hello, Notification, Welcome, PROTOCOL_VERSION};

use crate::runtime;

/// Frame limit of the decoder targets: small, so the oversize path is reachable.
const MAX_FRAME: usize = 4096;

/// Decodes everything `bytes` holds, fed `step` bytes at a time. Returns the frames and
/// whether decoding stopped on an error.
fn decode_all(bytes: &[u8], step: usize) -> (Vec<Frame>, bool) {
    let mut dec = FrameDecoder::new(MAX_FRAME);
    let mut frames = Vec::new();
    for chunk in bytes.chunks(step.max(1)) {
        dec.buffer_mut().extend_from_slice(chunk);
        loop {
            match dec.next_frame() {
                Ok(Some(f)) => frames.push(f),
                Ok(None) => break,
                Err(_) => return (frames, true),
            }
        }
    }
    (frames, false)
}

/// Frame decoder: byte 0 picks the chunk size, the rest is the stream. Decoding in chunks
/// must give exactly what decoding at once gives, every frame must re-encode to the bytes
/// it came from, and payloads are handed to the JSON decoders the link uses.
pub fn frame(data: &[u8]) {
    let Some((&step, stream)) = data.split_first() else {
        return;
    };
    let whole = decode_all(stream, stream.len());
    let chunked = decode_all(stream, usize::from(step % 64) + 1);
    assert_eq!(whole, chunked, "chunking changed what was decoded");
    let mut offset = 0;
    for f in &whole.0 {
        let mut out = BytesMut::new();
        f.encode_into(&mut out);
        assert_eq!(out.len(), f.wire_len());
        assert_eq!(
            &stream[offset..offset + out.len()],
            &out[..],
            "a decoded frame re-encodes to other bytes"
        );
        offset += out.len();
        match f.kind {
            FrameKind::Data => {
                if let Ok(env) = serde_json::from_slice::<Envelope>(&f.payload) {
                    round_trips(&env);
                }
            }
            FrameKind::Hello => {
                if let Ok(h) = serde_json::from_slice::<Hello>(&f.payload) {
                    round_trips(&h);
                }
            }
            FrameKind::Welcome => {
                if let Ok(w) = serde_json::from_slice::<Welcome>(&f.payload) {
                    round_trips(&w);
                }
            }
            FrameKind::Bytes => {
                // Channel bytes: decoded, re-encoded raw, the same payload again.
                if let Ok(env) = reasonix_forward::payload::decode(f.kind, &f.payload) {
                    let again = reasonix_forward::payload::encode(&env, true)
                        .unwrap_or_else(|e| panic!("cannot re-encode: {e}"));
                    assert_eq!(again, (FrameKind::Bytes, f.payload.to_vec()));
                    round_trips(&env);
                }
            }
            FrameKind::Ack | FrameKind::Ping | FrameKind::Pong | FrameKind::Close => {}
        }
    }
}

/// What we decoded, we must be able to encode and decode again (a wire type whose output
/// its own decoder refuses would lose that message on the way to the peer).
fn round_trips<T>(v: &T)
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let again = serde_json::to_vec(v).unwrap_or_else(|e| panic!("cannot re-encode: {e}"));
    if let Err(e) = serde_json::from_slice::<T>(&again) {
        panic!(
            "re-encoded form does not decode ({e}): {}",
            String::from_utf8_lossy(&again)
        );
    }
}

fn hello() -> Hello {
    Hello {
        protocol: PROTOCOL_VERSION,
        build_id: "fuzz".into(),
        client_id: "fuzz-client".into(),
        resume: None,
        bytes_frames: true,
        early_data: true,
    }
}

/// Client side of the opening: the preamble scanner (shell noise, partial magic, other
/// protocol versions, overlong lines) and the welcome that follows, all from `data`.
pub fn preamble(data: &[u8]) {
    runtime().block_on(async {
        let mut sink = tokio::io::sink();
        if let Ok((_rest, welcome)) = client_handshake(data, &mut sink, &hello(), 4096).await {
            let _ = check_build_id("fuzz", &welcome.build_id, "the fuzzer");
        }
    });
}

/// Server side of the opening: the client's first frame (must be a valid `Hello`).
pub fn handshake(data: &[u8]) {
    runtime().block_on(async {
        let mut sink = tokio::io::sink();
        let _ = server_accept(data, &mut sink, "fuzz").await;
    });
}

/// A running link fed `data` as its whole inbound stream after three envelopes of its own
/// were queued: acks beyond what was sent, sequence gaps, repeats, pings, closes and junk
/// payloads. It must end (EOF) with an error, never panic, and deliver each inbound seq at
/// most once.
pub fn link(data: &[u8]) {
    runtime().block_on(async {
        let (link, mut inbound) = Link::new(LinkConfig {
            heartbeat_interval: Duration::from_secs(30),
            dead_after: Duration::from_secs(60),
            replay_limit_bytes: 64 * 1024,
            max_frame_bytes: MAX_FRAME,
        });
        for i in 0..3 {
            let env = Envelope::Notify {
                body: Notification::ToolProgress {
                    call_id: format!("c{i}"),
                    message: "x".repeat(i * 10),
                },
            };
            if link.send(env).await.is_err() {
                return;
            }
        }
        let peer_received = data.first().map_or(0, |b| u64::from(b % 5));
        let reader = data.get(1..).unwrap_or_default().to_vec();
        let _why = link
            .run_transport(
                std::io::Cursor::new(reader),
                tokio::io::sink(),
                peer_received,
            )
            .await;
        let data_frames = count_data_frames(data.get(1..).unwrap_or_default());
        let mut delivered = 0u64;
        while inbound.try_recv().is_ok() {
            delivered += 1;
        }
        assert!(
            delivered <= data_frames,
            "{delivered} envelopes delivered from {data_frames} data frames"
        );
        // Data seqs must be consecutive from 1, so the highest one taken cannot exceed the
        // number of data frames that arrived.
        assert!(
            link.received() <= data_frames,
            "received seq {} from {data_frames} data frames",
            link.received()
        );
        link.close();
    });
}

/// Data frames a stream holds before its first decode error (an upper bound for what a link
/// may deliver from it).
fn count_data_frames(stream: &[u8]) -> u64 {
    let (frames, _) = decode_all(stream, stream.len());
    // `Bytes` frames (channel bytes without JSON) are numbered in the same sequence as
    // `Data` frames and delivered as envelopes too.
    frames
        .iter()
        .filter(|f| matches!(f.kind, FrameKind::Data | FrameKind::Bytes))
        .count() as u64
}
