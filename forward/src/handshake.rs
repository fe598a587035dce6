//! The preamble line and the `Hello`/`Welcome` exchange that open every transport.
//!
//! Sequence (see `docs/PROTOCOL.md`):
//! 1. server writes `REASONIX-LINK/2 <build-id>\n` ([`server_accept`]);
//! 2. client skips everything before it (shell noise), then sends a `Hello` frame
//!    ([`client_handshake`]);
//! 3. server reads the `Hello`, decides whether the link resumes, sends a `Welcome` frame
//!    ([`server_welcome`]);
//! 4. both sides call [`crate::link::Link::run_transport`] with the peer's `received`.
//!
//! None of these functions has a timeout of its own: wrap them in `tokio::time::timeout`.

use bytes::Bytes;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use crate::frame::{read_frame, write_frame, Frame, FrameKind};
use crate::link::LinkError;
use crate::proto::{Hello, Welcome, PREAMBLE_MAGIC, PROTOCOL_VERSION};

/// Largest `Hello`/`Welcome` frame accepted during the handshake.
pub const HANDSHAKE_MAX_FRAME: usize = 1024 * 1024;

/// Longest build id accepted on the preamble line.
const MAX_BUILD_ID: usize = 256;

/// How much of the skipped output is quoted in error messages.
const QUOTE_BYTES: usize = 300;

/// Default bound for the bytes a client skips before the preamble (`max_garbage`).
pub const DEFAULT_MAX_GARBAGE: usize = 64 * 1024;

/// `REASONIX-LINK/` : the part of the magic before the version number. Finding it with
/// another version number is a protocol mismatch, not garbage.
fn magic_prefix() -> &'static str {
    match PREAMBLE_MAGIC.rfind('/') {
        Some(i) => &PREAMBLE_MAGIC[..=i],
        None => PREAMBLE_MAGIC,
    }
}

/// Client side: skip every byte before the preamble line (shell banners, rc-file noise, at
/// most `max_garbage` bytes), check it, send `hello`, and read the `Welcome`. Returns the
/// buffered reader (any bytes read past the welcome stay in it) and the welcome.
///
/// Errors: [`LinkError::Handshake`] when the preamble does not come (with the skipped output
/// quoted), [`LinkError::ProtocolMismatch`] when the server speaks another protocol version.
/// Comparing build ids is left to the caller (see [`check_build_id`]).
pub async fn client_handshake<R, W>(
    reader: R,
    writer: &mut W,
    hello: &Hello,
    max_garbage: usize,
) -> Result<(BufReader<R>, Welcome), LinkError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut reader = BufReader::new(reader);
    read_checked_preamble(&mut reader, max_garbage).await?;
    writer
        .write_all(&hello_frame(hello)?)
        .await
        .map_err(|e| LinkError::TransportClosed(format!("sending the hello: {e}")))?;
    writer
        .flush()
        .await
        .map_err(|e| LinkError::TransportClosed(format!("sending the hello: {e}")))?;
    let welcome = read_welcome(&mut reader).await?;
    Ok((reader, welcome))
}

/// The encoded `Hello` frame, for a client that pipelines it: sends it before the server's
/// preamble arrived (handed to the host bridge with the attach command, see
/// `docs/PROTOCOL.md` §3) and then finishes with [`client_handshake_pipelined`].
pub fn hello_frame(hello: &Hello) -> Result<Vec<u8>, LinkError> {
    let payload = serde_json::to_vec(hello)
        .map_err(|e| LinkError::Handshake(format!("cannot encode the hello: {e}")))?;
    let frame = Frame {
        kind: FrameKind::Hello,
        seq: 0,
        ack: 0,
        payload: Bytes::from(payload),
    };
    let mut out = bytes::BytesMut::with_capacity(frame.wire_len());
    frame.encode_into(&mut out);
    Ok(out.to_vec())
}

/// Client side of a pipelined handshake: the `Hello` (from [`hello_frame`]) already went
/// out, so only the preamble (after any noise) and the `Welcome` are read. Saves the round
/// trip between the preamble and the `Hello`. Errors as [`client_handshake`].
pub async fn client_handshake_pipelined<R>(
    reader: R,
    max_garbage: usize,
) -> Result<(BufReader<R>, Welcome), LinkError>
where
    R: AsyncRead + Unpin,
{
    let mut reader = BufReader::new(reader);
    read_checked_preamble(&mut reader, max_garbage).await?;
    let welcome = read_welcome(&mut reader).await?;
    Ok((reader, welcome))
}

async fn read_checked_preamble<R>(
    reader: &mut BufReader<R>,
    max_garbage: usize,
) -> Result<(), LinkError>
where
    R: AsyncRead + Unpin,
{
    let preamble = read_preamble(reader, max_garbage).await?;
    if preamble.protocol != PROTOCOL_VERSION {
        return Err(LinkError::ProtocolMismatch {
            ours: PROTOCOL_VERSION,
            theirs: preamble.protocol,
        });
    }
    Ok(())
}

async fn read_welcome<R>(reader: &mut BufReader<R>) -> Result<Welcome, LinkError>
where
    R: AsyncRead + Unpin,
{
    let frame = read_frame(reader, HANDSHAKE_MAX_FRAME).await?;
    let welcome: Welcome = match frame.kind {
        FrameKind::Welcome => serde_json::from_slice(&frame.payload).map_err(|e| {
            LinkError::Malformed(format!("the welcome frame is not valid JSON: {e}"))
        })?,
        FrameKind::Close => {
            return Err(LinkError::Handshake(format!(
                "the host refused the connection: {}",
                String::from_utf8_lossy(&frame.payload)
            )))
        }
        other => {
            return Err(LinkError::Malformed(format!(
                "expected a welcome frame, got a {} frame",
                other.name()
            )))
        }
    };
    if welcome.protocol != PROTOCOL_VERSION {
        return Err(LinkError::ProtocolMismatch {
            ours: PROTOCOL_VERSION,
            theirs: welcome.protocol,
        });
    }
    Ok(welcome)
}

/// What the preamble line said (its build id is repeated in the `Welcome`).
struct Preamble {
    protocol: u32,
}

/// Skip up to `max_garbage` bytes until `REASONIX-LINK/<n> ` and read the rest of that line.
/// The magic may follow garbage on the same line (a banner printed without a newline).
async fn read_preamble<R>(
    reader: &mut BufReader<R>,
    max_garbage: usize,
) -> Result<Preamble, LinkError>
where
    R: AsyncRead + Unpin,
{
    let prefix = magic_prefix().as_bytes();
    // Everything read so far that is not yet known to be garbage (a possible start of the
    // magic), plus the first bytes of the garbage for error messages.
    let mut skipped: usize = 0;
    let mut quote: Vec<u8> = Vec::new();
    let mut window: Vec<u8> = Vec::with_capacity(prefix.len());
    loop {
        let chunk = reader
            .fill_buf()
            .await
            .map_err(|e| LinkError::TransportClosed(format!("waiting for the preamble: {e}")))?;
        if chunk.is_empty() {
            return Err(LinkError::Handshake(format!(
                "the remote side closed the connection before sending the {PREAMBLE_MAGIC} \
                 preamble; is reasonix-remote installed and runnable on the host? {}",
                describe_output(skipped + window.len(), &quote, &window)
            )));
        }
        let mut used = 0;
        let mut found = false;
        for &b in chunk {
            used += 1;
            window.push(b);
            // Keep `window` a prefix of the magic; everything dropped from it is garbage.
            while !window.is_empty() && !prefix.starts_with(&window) {
                let g = window.remove(0);
                skipped += 1;
                if quote.len() < QUOTE_BYTES {
                    quote.push(g);
                }
            }
            if window.len() == prefix.len() {
                found = true;
                break;
            }
            if skipped > max_garbage {
                break;
            }
        }
        reader.consume(used);
        if skipped > max_garbage {
            return Err(LinkError::Handshake(format!(
                "more than {max_garbage} bytes arrived before the {PREAMBLE_MAGIC} preamble: a \
                 shell rc file on the host prints too much, or the remote program is not \
                 reasonix-remote. {}",
                describe_output(skipped, &quote, &[])
            )));
        }
        if found {
            break;
        }
    }
    // Rest of the line: "<version> <build-id>\n".
    let mut line = Vec::new();
    loop {
        let chunk = reader
            .fill_buf()
            .await
            .map_err(|e| LinkError::TransportClosed(format!("reading the preamble: {e}")))?;
        if chunk.is_empty() {
            return Err(LinkError::Handshake(
                "the connection closed in the middle of the preamble line".into(),
            ));
        }
        let (used, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        line.extend_from_slice(&chunk[..used]);
        reader.consume(used);
        if done {
            break;
        }
        if line.len() > MAX_BUILD_ID + 16 {
            return Err(LinkError::Handshake(format!(
                "the {PREAMBLE_MAGIC} preamble line is longer than {} bytes",
                MAX_BUILD_ID + 16
            )));
        }
    }
    let line = String::from_utf8_lossy(&line);
    let line = line.trim_end_matches(['\n', '\r']);
    let version = line.split_once(' ').map_or(line, |(v, _build_id)| v);
    let protocol: u32 = version.parse().map_err(|_| {
        LinkError::Handshake(format!(
            "the preamble line `{}{line}` has no valid protocol version",
            magic_prefix()
        ))
    })?;
    Ok(Preamble { protocol })
}

/// "N bytes of output were skipped: `...`" for error messages.
fn describe_output(total: usize, quote: &[u8], tail: &[u8]) -> String {
    if total == 0 {
        return "(it printed nothing)".into();
    }
    let mut shown = quote.to_vec();
    if shown.len() < QUOTE_BYTES {
        shown.extend_from_slice(&tail[..tail.len().min(QUOTE_BYTES - shown.len())]);
    }
    let more = if total > shown.len() { " …" } else { "" };
    format!(
        "It printed {total} bytes: {:?}{more}",
        String::from_utf8_lossy(&shown)
    )
}

/// Server side: write the preamble line with `build_id`, then read the client's `Hello`.
///
/// When the client speaks another protocol version the server still answers with a
/// `Welcome` carrying its own version (so the client can name both versions) and returns
/// [`LinkError::ProtocolMismatch`].
pub async fn server_accept<R, W>(
    reader: R,
    writer: &mut W,
    build_id: &str,
) -> Result<(BufReader<R>, Hello), LinkError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let line = format!("{PREAMBLE_MAGIC} {build_id}\n");
    writer
        .write_all(line.as_bytes())
        .await
        .map_err(|e| LinkError::TransportClosed(format!("writing the preamble: {e}")))?;
    writer
        .flush()
        .await
        .map_err(|e| LinkError::TransportClosed(format!("writing the preamble: {e}")))?;
    let mut reader = BufReader::new(reader);
    let frame = read_frame(&mut reader, HANDSHAKE_MAX_FRAME).await?;
    let hello: Hello = match frame.kind {
        FrameKind::Hello => serde_json::from_slice(&frame.payload)
            .map_err(|e| LinkError::Malformed(format!("the hello frame is not valid JSON: {e}")))?,
        other => {
            return Err(LinkError::Malformed(format!(
                "expected a hello frame, got a {} frame",
                other.name()
            )))
        }
    };
    if hello.protocol != PROTOCOL_VERSION {
        let refusal = Welcome {
            protocol: PROTOCOL_VERSION,
            build_id: build_id.to_string(),
            link_id: String::new(),
            resumed: false,
            received: 0,
            resume_refused: Some(format!(
                "protocol mismatch: host speaks {PROTOCOL_VERSION}, client speaks {}",
                hello.protocol
            )),
            bytes_frames: false,
            early_data: false,
        };
        // Best effort: the client learns our version; our error is what matters here.
        let _ = server_welcome(writer, &refusal).await;
        return Err(LinkError::ProtocolMismatch {
            ours: PROTOCOL_VERSION,
            theirs: hello.protocol,
        });
    }
    Ok((reader, hello))
}

/// Server side: send the `Welcome` (after deciding whether the link resumes).
pub async fn server_welcome<W>(writer: &mut W, welcome: &Welcome) -> Result<(), LinkError>
where
    W: AsyncWrite + Unpin,
{
    let payload = serde_json::to_vec(welcome)
        .map_err(|e| LinkError::Handshake(format!("cannot encode the welcome: {e}")))?;
    let frame = Frame {
        kind: FrameKind::Welcome,
        seq: 0,
        ack: 0,
        payload: Bytes::from(payload),
    };
    write_frame(writer, &frame).await
}

/// Server side: refuse a client with a reason it will show (e.g. "another build is
/// running"). Sends a `Close` frame instead of a `Welcome`.
pub async fn server_refuse<W>(writer: &mut W, reason: &str) -> Result<(), LinkError>
where
    W: AsyncWrite + Unpin,
{
    let frame = Frame {
        kind: FrameKind::Close,
        seq: 0,
        ack: 0,
        payload: Bytes::from(reason.as_bytes().to_vec()),
    };
    write_frame(writer, &frame).await
}

/// Compare the peer's build id with ours; the error names both and says what to do.
/// `peer_role` names the other program in the message, e.g. `"reasonix-remote on the host"`.
pub fn check_build_id(ours: &str, theirs: &str, peer_role: &str) -> Result<(), LinkError> {
    if ours == theirs {
        return Ok(());
    }
    Err(LinkError::Handshake(build_mismatch_message(
        ours, theirs, peer_role,
    )))
}

/// The message used by [`check_build_id`], for callers that want to warn instead of fail.
pub fn build_mismatch_message(ours: &str, theirs: &str, peer_role: &str) -> String {
    format!(
        "build mismatch: this program is build {ours}, {peer_role} is build {theirs}; \
         reinstall so both come from the same build"
    )
}
