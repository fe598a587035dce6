//! The wire form of channels: [`ChannelMsg`] inside [`crate::proto::Envelope::Channel`].
//!
//! A channel is opened with a typed [`ChannelOpen`] (its kind and the kind's parameters),
//! answered with a typed [`ChannelAccepted`] or a refusal, and then carries ordered
//! [`ChannelData`] in both directions under credit ([`ChannelMsg::Credit`]). See
//! `docs/PROTOCOL.md`, "Channels".

use serde::Serialize;

use crate::agent::AgentOpen;
use crate::copy::{CopyAccepted, CopyOpen};
use crate::ports::PortOpen;
use crate::proto::{ProviderChunk, ProviderRequest, PtyBytes, PtyInfo, RpcError};
use crate::pty::{PtyData, PtyOpen};

crate::proto_serde::tagged_enum! {
    ChannelMsgDe, "c";
    /// One message about one channel. `ch` is the channel's id: the side that opened it chose
    /// it (the client odd ids, the daemon even ones), so the two sides never pick the same.
    #[derive(Debug, Clone, PartialEq, Serialize)]
    #[serde(tag = "c", rename_all = "snake_case")]
    pub enum ChannelMsg {
        /// Open channel `ch` (opener -> acceptor). `window` is the opener's receive window: the
        /// acceptor may send that much before it needs credit.
        Open {
            /// The new channel's id.
            ch: u64,
            /// Bytes of data the opener takes before it grants credit.
            window: u32,
            /// What to open.
            open: ChannelOpen,
        },
        /// The acceptor took the channel (acceptor -> opener); data may follow at once.
        Accept {
            /// The channel.
            ch: u64,
            /// The acceptor's receive window.
            window: u32,
            /// What the acceptor says about it.
            accepted: ChannelAccepted,
        },
        /// The acceptor refused the channel (acceptor -> opener); the channel is gone.
        Refuse {
            /// The channel.
            ch: u64,
            /// Why, with a code the opener acts on.
            error: RpcError,
        },
        /// Data, in order, costing the sender credit ([`ChannelData::cost`]).
        Data {
            /// The channel.
            ch: u64,
            /// The data.
            data: ChannelData,
        },
        /// The receiver's consumer took `bytes` more of the sender's data: it may send that much
        /// more.
        Credit {
            /// The channel.
            ch: u64,
            /// Credit granted back.
            bytes: u64,
        },
        /// Half-close: the sender sends nothing more on this channel (it still receives).
        Close {
            /// The channel.
            ch: u64,
            /// Why it stopped, when that matters to the other side (an MCP server's exit).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            reason: Option<String>,
        },
        /// Abort both directions: the channel is gone. Data that arrived before it is still
        /// delivered; data after it is dropped.
        Cancel {
            /// The channel.
            ch: u64,
            /// Why, for the user.
            reason: String,
        },
    }
}

impl ChannelMsg {
    /// The channel this message is about.
    pub fn ch(&self) -> u64 {
        match self {
            ChannelMsg::Open { ch, .. }
            | ChannelMsg::Accept { ch, .. }
            | ChannelMsg::Refuse { ch, .. }
            | ChannelMsg::Data { ch, .. }
            | ChannelMsg::Credit { ch, .. }
            | ChannelMsg::Close { ch, .. }
            | ChannelMsg::Cancel { ch, .. } => *ch,
        }
    }
}

crate::proto_serde::tagged_enum! {
    ChannelOpenDe, "k";
    /// What a channel is for, and its parameters.
    #[derive(Debug, Clone, PartialEq, Serialize)]
    #[serde(tag = "k", rename_all = "snake_case")]
    pub enum ChannelOpen {
        /// A chat completion through the laptop's gateway (daemon -> client). The laptop sends
        /// the stream's [`ChannelData::Provider`] chunks and closes after `Done` or `Error`.
        Provider(ProviderRequest),
        /// A laptop-side MCP server (daemon -> client): JSON-RPC lines both ways as
        /// [`ChannelData::Line`] pieces. Opening starts the server (a previous instance of it is
        /// killed first); the laptop closes its direction, with the exit status and stderr tail as
        /// the reason, when the server exits.
        Mcp {
            /// Server name from the laptop's config.
            server: String,
        },
        /// A host terminal (client -> daemon): [`ChannelData::Pty`] both ways.
        Pty(PtyOpen),
        /// A TCP connection to a port on the host (client -> daemon): [`ChannelData::Bytes`]
        /// both ways; each side closes its direction when its end of the socket does.
        Port(PortOpen),
        /// A file copy between laptop and host (client -> daemon, issue #36 §3): control lines
        /// and file bytes both ways, see [`crate::copy`].
        Copy(CopyOpen),
        /// One connection to the host's forwarded `SSH_AUTH_SOCK` (daemon -> client, #36 §2):
        /// agent messages as [`ChannelData::Bytes`] both ways, to the laptop's own agent.
        Agent(AgentOpen),
    }
}

impl ChannelOpen {
    /// The kind, without the parameters.
    pub fn kind(&self) -> ChannelKind {
        match self {
            ChannelOpen::Provider(_) => ChannelKind::Provider,
            ChannelOpen::Mcp { .. } => ChannelKind::Mcp,
            ChannelOpen::Pty(_) => ChannelKind::Pty,
            ChannelOpen::Port(_) => ChannelKind::Port,
            ChannelOpen::Copy(_) => ChannelKind::Copy,
            ChannelOpen::Agent(_) => ChannelKind::Agent,
        }
    }
}

/// The kind of a channel (for bookkeeping: counting, cancelling all of one kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChannelKind {
    /// [`ChannelOpen::Provider`].
    Provider,
    /// [`ChannelOpen::Mcp`].
    Mcp,
    /// [`ChannelOpen::Pty`].
    Pty,
    /// [`ChannelOpen::Port`].
    Port,
    /// [`ChannelOpen::Copy`].
    Copy,
    /// [`ChannelOpen::Agent`].
    Agent,
}

impl std::fmt::Display for ChannelKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ChannelKind::Provider => "provider",
            ChannelKind::Mcp => "MCP",
            ChannelKind::Pty => "terminal",
            ChannelKind::Port => "port",
            ChannelKind::Copy => "file copy",
            ChannelKind::Agent => "ssh-agent",
        })
    }
}

crate::proto_serde::tagged_enum! {
    ChannelAcceptedDe, "k";
    /// The acceptor's answer to a [`ChannelOpen`], by kind.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
    #[serde(tag = "k", rename_all = "snake_case")]
    pub enum ChannelAccepted {
        /// The gateway took the provider request (it has every message).
        Provider,
        /// The MCP server was started.
        Mcp,
        /// The terminal opened or attached; its output follows on the channel.
        Pty(PtyInfo),
        /// The daemon connected to the port.
        Port,
        /// The daemon checked the host path and takes the copy.
        Copy(CopyAccepted),
        /// The laptop connected to its agent.
        Agent,
    }
}

crate::proto_serde::tagged_enum! {
    ChannelDataDe, "d";
    /// One piece of ordered data on a channel.
    #[derive(Debug, Clone, PartialEq, Serialize)]
    #[serde(tag = "d", rename_all = "snake_case")]
    pub enum ChannelData {
        /// Raw bytes (standard padded base64 on the wire).
        Bytes {
            /// The bytes.
            data: PtyBytes,
        },
        /// A text line without its newline, or one piece of it: a line longer than
        /// [`crate::content::MCP_LINE_PIECE`] goes in pieces, all but the last with `more`.
        Line {
            /// The line or piece.
            line: String,
            /// True when more pieces of this line follow.
            #[serde(default, skip_serializing_if = "std::ops::Not::not")]
            more: bool,
        },
        /// A chunk of a provider stream.
        Provider(ProviderChunk),
        /// Terminal traffic.
        Pty(PtyData),
    }
}

impl ChannelData {
    /// Bytes of content this piece carries (text, bytes; 0 for pure markers). Both sides
    /// compute it from the decoded value, so they agree on the credit it costs.
    pub fn content_len(&self) -> usize {
        match self {
            ChannelData::Bytes { data } => data.0.len(),
            ChannelData::Line { line, .. } => line.len(),
            ChannelData::Provider(chunk) => match chunk {
                ProviderChunk::Text { text } | ProviderChunk::Reasoning { text } => text.len(),
                ProviderChunk::ToolCall(call) => {
                    call.id.len() + call.name.len() + call.arguments.len()
                }
                ProviderChunk::Usage(_) => 0,
                ProviderChunk::Replay { data } => data.to_string().len(),
                ProviderChunk::Done { model, .. } => model.len(),
                ProviderChunk::Error { message, .. } => message.len(),
                ProviderChunk::Retrying(r) => r.reason.len(),
            },
            ChannelData::Pty(p) => match p {
                PtyData::Input { data }
                | PtyData::Output { data, .. }
                | PtyData::Screen { data, .. } => data.0.len(),
                PtyData::Resize { .. } => 0,
                PtyData::Exited { status } => status.len(),
            },
        }
    }

    /// The credit this piece costs on a channel whose receiver has a window of `window`:
    /// its content plus one (so empty pieces are not free), but never more than half the
    /// window. The cap means a sender whose receiver keeps up never waits for a piece (a
    /// receiver grants credit back in halves of its window), and a piece bigger than that
    /// still crosses.
    pub fn cost(&self, window: u32) -> u32 {
        let content = u32::try_from(self.content_len()).unwrap_or(u32::MAX);
        content.saturating_add(1).min(half(window))
    }
}

/// Half a window, at least 1: the most one piece costs and the credit a receiver collects
/// before it grants it back.
pub fn half(window: u32) -> u32 {
    (window / 2).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Envelope;
    use crate::pty::PtySize;

    #[test]
    fn channel_messages_round_trip_in_envelopes() {
        let cases = vec![
            ChannelMsg::Open {
                ch: 1,
                window: 10,
                open: ChannelOpen::Mcp {
                    server: "time".into(),
                },
            },
            ChannelMsg::Open {
                ch: 3,
                window: 10,
                open: ChannelOpen::Pty(PtyOpen::Attach {
                    pty: 2,
                    have: Some(5),
                    size: PtySize { cols: 80, rows: 24 },
                }),
            },
            ChannelMsg::Accept {
                ch: 1,
                window: 7,
                accepted: ChannelAccepted::Mcp,
            },
            ChannelMsg::Refuse {
                ch: 2,
                error: RpcError::new(crate::proto::ErrorCode::Mcp, "no such server"),
            },
            ChannelMsg::Data {
                ch: 2,
                data: ChannelData::Line {
                    line: "{}".into(),
                    more: true,
                },
            },
            ChannelMsg::Data {
                ch: 2,
                data: ChannelData::Provider(ProviderChunk::Text { text: "hi".into() }),
            },
            ChannelMsg::Data {
                ch: 4,
                data: ChannelData::Pty(PtyData::Output {
                    offset: 9,
                    data: PtyBytes(vec![0, 255, b'\n']),
                }),
            },
            ChannelMsg::Data {
                ch: 4,
                data: ChannelData::Bytes {
                    data: PtyBytes(vec![1, 2, 3]),
                },
            },
            ChannelMsg::Credit { ch: 4, bytes: 99 },
            ChannelMsg::Close {
                ch: 4,
                reason: None,
            },
            ChannelMsg::Close {
                ch: 4,
                reason: Some("exit status 1".into()),
            },
            ChannelMsg::Cancel {
                ch: 4,
                reason: "gone".into(),
            },
        ];
        for msg in cases {
            let e = Envelope::Channel(msg.clone());
            let json = serde_json::to_string(&e).expect("encode");
            let back: Envelope = serde_json::from_str(&json).expect("decode");
            assert_eq!(back, e, "{json}");
            assert_eq!(msg.ch(), msg.ch());
        }
    }

    #[test]
    fn a_piece_costs_its_content_plus_one_and_at_most_half_the_window() {
        let line = |n: usize| ChannelData::Line {
            line: "x".repeat(n),
            more: false,
        };
        assert_eq!(line(0).cost(100), 1);
        assert_eq!(line(10).cost(100), 11);
        assert_eq!(line(1000).cost(100), 50);
        assert_eq!(
            line(1000).cost(1),
            1,
            "a window of one still lets a piece cost 1"
        );
        let exited = ChannelData::Pty(PtyData::Exited {
            status: "exit 0".into(),
        });
        assert_eq!(exited.cost(1 << 20), 7);
    }
}
