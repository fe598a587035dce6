//! Wire types of host terminals (PTYs owned by the workspace daemon).
//!
//! A client follows a terminal through a channel ([`crate::channel`]) it opens with
//! [`PtyOpen`] (start a shell, or attach to a running one): the daemon accepts with the
//! terminal's [`PtyInfo`], then sends the shell's output as [`PtyData::Output`] (and, when it
//! cannot be replayed byte for byte, one [`PtyData::Screen`]); the client sends keystrokes
//! and sizes as [`PtyData::Input`] / [`PtyData::Resize`]. Closing the channel detaches
//! (the shell keeps running). Every output byte has an *offset* in the PTY's output stream,
//! counted from 0 when the shell started, so a client that re-attaches on a new link can say
//! what it already shows. Within one link, the link's own seq/ack replay makes input and
//! output exactly-once across transport drops (see `docs/PROTOCOL.md`, "Terminals").
//! Listing and ending terminals are plain requests ([`PtyRequest`]).

use base64::Engine;
use serde::{Deserialize, Serialize};

/// Most output bytes in one [`PtyNotification::Output`].
pub const OUTPUT_CHUNK_MAX: usize = 64 * 1024;

/// Bytes that travel base64-encoded (standard alphabet, padded) inside the JSON envelope.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PtyBytes(pub Vec<u8>);

impl Serialize for PtyBytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for PtyBytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(s.as_bytes())
            .map(PtyBytes)
            .map_err(|e| serde::de::Error::custom(format!("terminal bytes are not base64: {e}")))
    }
}

/// Size of a terminal in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtySize {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

crate::proto_serde::tagged_enum! {
    PtyOpenDe, "p";
    /// What a terminal channel opens (client -> daemon), inside
    /// [`crate::channel::ChannelOpen::Pty`]. Accepted with
    /// [`crate::channel::ChannelAccepted::Pty`].
    #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
    #[serde(tag = "p", rename_all = "snake_case")]
    pub enum PtyOpen {
        /// Start the host user's login shell on a new PTY in the workspace; output from offset
        /// 0 follows on the channel.
        Open {
            /// Initial size.
            size: PtySize,
            /// `TERM` for the shell (the laptop terminal's); `xterm-256color` when empty.
            term: String,
        },
        /// Follow a running terminal. Output follows on the channel: raw from `have` when the
        /// daemon still holds those bytes, otherwise one [`PtyData::Screen`] (the current screen)
        /// and the output after it.
        Attach {
            /// Terminal id.
            pty: u64,
            /// Output offset this client already shows (it had this terminal before), if any.
            have: Option<u64>,
            /// The client's size; the terminal is resized to it.
            size: PtySize,
        },
    }
}

crate::proto_serde::tagged_enum! {
    PtyRequestDe, "p";
    /// Requests about terminals (client -> daemon), inside [`crate::proto::Request::Pty`].
    #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
    #[serde(tag = "p", rename_all = "snake_case")]
    pub enum PtyRequest {
        /// The workspace's terminals. Answered with [`PtyResponse::List`].
        List,
        /// End a terminal: its shell gets SIGHUP, then SIGKILL if it is still there after 2 s.
        /// Answered with [`PtyResponse::Done`].
        Close {
            /// Terminal id.
            pty: u64,
        },
    }
}

crate::proto_serde::tagged_enum! {
    PtyResponseDe, "p";
    /// Answers to [`PtyRequest`]s, inside [`crate::proto::Response::Pty`].
    #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
    #[serde(tag = "p", rename_all = "snake_case")]
    pub enum PtyResponse {
        /// Answer to `List`: every terminal, oldest first.
        List {
            /// The terminals.
            ptys: Vec<PtyInfo>,
        },
        /// Answer to `Close`.
        Done,
    }
}

/// One terminal as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtyInfo {
    /// Terminal id (per daemon, from 1).
    pub id: u64,
    /// Process id of the shell.
    pub pid: u32,
    /// The shell program.
    pub shell: String,
    /// Current size.
    pub size: PtySize,
    /// RFC 3339 start time.
    pub started: String,
    /// Links attached to it now.
    pub clients: u32,
    /// Output bytes produced so far (the offset of the next byte).
    pub output_end: u64,
    /// Set once the shell exited: how.
    pub exited: Option<String>,
}

crate::proto_serde::tagged_enum! {
    PtyDataDe, "p";
    /// Terminal traffic on a terminal channel, inside [`crate::channel::ChannelData::Pty`].
    #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
    #[serde(tag = "p", rename_all = "snake_case")]
    pub enum PtyData {
        /// Keystrokes (client -> daemon), written to the PTY as they are.
        Input {
            /// The bytes.
            data: PtyBytes,
        },
        /// The client's terminal changed size (client -> daemon); the shell gets SIGWINCH.
        Resize {
            /// New size.
            size: PtySize,
        },
        /// Output of the shell (daemon -> client), consecutive from `offset`.
        Output {
            /// Offset of the first byte in the terminal's output stream.
            offset: u64,
            /// The bytes (at most [`OUTPUT_CHUNK_MAX`]).
            data: PtyBytes,
        },
        /// The terminal's current screen (daemon -> client), sent instead of raw output the
        /// client lacks and the daemon no longer holds. Writing `data` to a terminal of `size`
        /// draws the screen as it was at `offset`; output continues from `offset`.
        Screen {
            /// Output offset the screen corresponds to.
            offset: u64,
            /// Size of the screen.
            size: PtySize,
            /// Escape sequences that clear the terminal and draw the screen.
            data: PtyBytes,
        },
        /// The shell exited (daemon -> client), after its last output; the daemon closes the
        /// channel after it.
        Exited {
            /// How (exit status or signal).
            status: String,
        },
    }
}

/// Terminal traffic as a laptop front end handles it: one terminal channel's
/// [`PtyData`], tagged with the terminal it came from (front ends show several).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PtyNotification {
    /// Keystrokes (never sent to a front end; kept so every [`PtyData`] has a place).
    Input {
        /// Terminal id.
        pty: u64,
        /// The bytes.
        data: PtyBytes,
    },
    /// A size (never sent to a front end; see `Input`).
    Resize {
        /// Terminal id.
        pty: u64,
        /// New size.
        size: PtySize,
    },
    /// Output of the shell, consecutive from `offset`.
    Output {
        /// Terminal id.
        pty: u64,
        /// Offset of the first byte in the terminal's output stream.
        offset: u64,
        /// The bytes.
        data: PtyBytes,
    },
    /// The terminal's current screen as of `offset` (see [`PtyData::Screen`]).
    Screen {
        /// Terminal id.
        pty: u64,
        /// Output offset the screen corresponds to.
        offset: u64,
        /// Size of the screen.
        size: PtySize,
        /// Escape sequences that clear the terminal and draw the screen.
        data: PtyBytes,
    },
    /// The shell exited.
    Exited {
        /// Terminal id.
        pty: u64,
        /// How (exit status or signal).
        status: String,
    },
}

impl PtyNotification {
    /// Terminal `pty`'s `data`.
    pub fn from_data(pty: u64, data: PtyData) -> Self {
        match data {
            PtyData::Input { data } => PtyNotification::Input { pty, data },
            PtyData::Resize { size } => PtyNotification::Resize { pty, size },
            PtyData::Output { offset, data } => PtyNotification::Output { pty, offset, data },
            PtyData::Screen { offset, size, data } => PtyNotification::Screen {
                pty,
                offset,
                size,
                data,
            },
            PtyData::Exited { status } => PtyNotification::Exited { pty, status },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{ChannelData, ChannelMsg, ChannelOpen};
    use crate::proto::{Envelope, Request, Response};

    #[test]
    fn nested_enums_round_trip_in_envelopes() {
        let mut cases = vec![
            Envelope::Request {
                id: 1,
                body: Request::Pty(PtyRequest::Close { pty: 3 }),
            },
            Envelope::Channel(ChannelMsg::Open {
                ch: 1,
                window: 1,
                open: ChannelOpen::Pty(PtyOpen::Open {
                    size: PtySize { cols: 80, rows: 24 },
                    term: "xterm".into(),
                }),
            }),
            Envelope::Channel(ChannelMsg::Data {
                ch: 1,
                data: ChannelData::Pty(PtyData::Screen {
                    offset: 9,
                    size: PtySize { cols: 1, rows: 2 },
                    data: PtyBytes(vec![0, 1, 2, 255, b'\n']),
                }),
            }),
        ];
        // Only a client decodes the terminal answers (the `client` feature, see proto_serde).
        if cfg!(feature = "client") {
            cases.push(Envelope::Response {
                id: 2,
                result: Ok(Response::Pty(PtyResponse::List { ptys: vec![] })),
            });
        }
        for e in cases {
            let json = serde_json::to_string(&e).expect("encode");
            let back: Envelope = serde_json::from_str(&json).expect("decode");
            assert_eq!(back, e, "{json}");
        }
    }

    #[test]
    fn bad_base64_is_refused_with_a_reason() {
        let err = serde_json::from_str::<PtyBytes>("\"not base64!\"").expect_err("refused");
        assert!(err.to_string().contains("not base64"), "{err}");
    }
}
