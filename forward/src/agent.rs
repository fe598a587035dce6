//! ssh-agent forwarding over the link (issue #36 §2): the wire types and the pure core both
//! ends share.
//!
//! A laptop with `ForwardAgent` on for its host offers its agent to the daemon
//! ([`crate::proto::Request::ForwardAgent`]). The daemon then serves one stable
//! `SSH_AUTH_SOCK` for the workspace's processes; each connection to it becomes one agent
//! channel ([`crate::channel::ChannelOpen::Agent`], daemon -> client) to the laptop that
//! drives now, whose data are the agent protocol's messages as
//! [`crate::channel::ChannelData::Bytes`] both ways. The laptop connects the channel to its
//! own agent and passes on only the requests in [`allowed`] (list keys, sign); anything else
//! is answered [`SSH_AGENT_FAILURE`] without reaching the agent. Key material never crosses:
//! the agent only ever hands out public keys and signatures.
//!
//! The agent protocol (draft-miller-ssh-agent) is request/answer: every message is a 4-byte
//! big-endian length and that many bytes, the first of which is the message type.

use serde::{Deserialize, Serialize};

/// `SSH_AGENT_FAILURE`: the generic refusal.
pub const SSH_AGENT_FAILURE: u8 = 5;
/// `SSH_AGENTC_REQUEST_IDENTITIES`: list the keys.
pub const SSH_AGENTC_REQUEST_IDENTITIES: u8 = 11;
/// `SSH_AGENTC_SIGN_REQUEST`: sign data with one key.
pub const SSH_AGENTC_SIGN_REQUEST: u8 = 13;
/// `SSH_AGENTC_EXTENSION`: an extension request (`session-bind@openssh.com` and others).
pub const SSH_AGENTC_EXTENSION: u8 = 27;

/// The largest agent message either side takes (OpenSSH's own limit is 256 KiB).
pub const MAX_MESSAGE: usize = 256 * 1024;

/// Receive window of an agent channel (either side): one whole message of the biggest size.
pub const AGENT_WINDOW: u32 = 2 * MAX_MESSAGE as u32;

/// What an agent channel asks for (daemon -> client): which host process uses the agent,
/// for the laptop's log and a confirmation prompt. Never anything secret.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AgentOpen {
    /// The connecting process's id on the host, when the kernel told it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Its command name (`/proc/<pid>/comm`), when known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
}

/// A laptop's offer of its agent (client -> daemon, inside
/// [`crate::proto::Request::ForwardAgent`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AgentOffer {
    /// Where the agent is on the laptop, for the daemon's log and `/status` only (a socket
    /// path or a pipe name; never used on the host).
    #[serde(default)]
    pub laptop_agent: String,
}

/// The daemon's answer to an offer: the `SSH_AUTH_SOCK` its workspace processes get.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentForwarding {
    /// The socket's path on the host.
    pub socket: String,
}

/// `[sandbox] ssh_agent` as written: `false`, `true`, or `"confirm"` (true, and every
/// signing request is put to the user on the laptop first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentSetting {
    /// `false`: the bash tool does not get the agent.
    Off,
    /// `true`: it does.
    On,
    /// `"confirm"`: it does, and each signing request asks the user on the laptop.
    Confirm,
}

impl AgentSetting {
    /// Whether the bash tool gets the agent.
    pub fn on(self) -> bool {
        self != AgentSetting::Off
    }
}

impl Serialize for AgentSetting {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            AgentSetting::Off => s.serialize_bool(false),
            AgentSetting::On => s.serialize_bool(true),
            AgentSetting::Confirm => s.serialize_str("confirm"),
        }
    }
}

// A visitor, not an untagged enum: serde decodes untagged enums by buffering the value in its
// `Content` tree, code the static host binary does without (see `crate::proto_serde`).
impl<'de> Deserialize<'de> for AgentSetting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = AgentSetting;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("true, false or \"confirm\"")
            }
            fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<AgentSetting, E> {
                Ok(if b {
                    AgentSetting::On
                } else {
                    AgentSetting::Off
                })
            }
            fn visit_str<E: serde::de::Error>(self, t: &str) -> Result<AgentSetting, E> {
                match t {
                    "confirm" => Ok(AgentSetting::Confirm),
                    _ => Err(E::custom(format!(
                        "ssh_agent is true, false or \"confirm\", not \"{t}\""
                    ))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// The answer `SSH_AGENT_FAILURE`, framed.
pub fn failure() -> Vec<u8> {
    frame(&[SSH_AGENT_FAILURE])
}

/// `body` with its 4-byte length in front.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// Whether the laptop passes a request of type `kind` on to its agent: listing keys,
/// signing, and extensions (OpenSSH's `session-bind@openssh.com`, which only restricts
/// what a key may be used for). Adding, removing and locking keys stay with the laptop's
/// user: the host cannot change the laptop's agent.
pub fn allowed(kind: u8) -> bool {
    matches!(
        kind,
        SSH_AGENTC_REQUEST_IDENTITIES | SSH_AGENTC_SIGN_REQUEST | SSH_AGENTC_EXTENSION
    )
}

/// A short name of a request type, for logs (no content).
pub fn kind_name(kind: u8) -> &'static str {
    match kind {
        SSH_AGENTC_REQUEST_IDENTITIES => "list keys",
        SSH_AGENTC_SIGN_REQUEST => "sign",
        SSH_AGENTC_EXTENSION => "extension",
        17 | 25 => "add key",
        18 => "remove key",
        19 => "remove all keys",
        22 => "lock",
        23 => "unlock",
        _ => "other",
    }
}

/// Cuts a byte stream into agent messages (each returned with its length prefix).
#[derive(Debug, Default)]
pub struct Frames {
    buf: Vec<u8>,
}

impl Frames {
    /// Nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Append bytes that arrived.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// True when part of a message is buffered.
    pub fn is_partial(&self) -> bool {
        !self.buf.is_empty()
    }

    /// The next whole message (length prefix included), `Ok(None)` when more bytes are
    /// needed, or an error naming a length over [`MAX_MESSAGE`] or an empty message.
    pub fn next_message(&mut self) -> Result<Option<Vec<u8>>, String> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if len == 0 {
            return Err("an empty agent message".into());
        }
        if len > MAX_MESSAGE {
            return Err(format!(
                "an agent message of {len} bytes (the limit is {MAX_MESSAGE})"
            ));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let rest = self.buf.split_off(4 + len);
        Ok(Some(std::mem::replace(&mut self.buf, rest)))
    }
}

/// The type byte of a framed message (0 when there is none).
pub fn message_kind(msg: &[u8]) -> u8 {
    msg.get(4).copied().unwrap_or(0)
}

/// Read one whole agent message (length prefix included) from `r`; `Ok(None)` at a clean
/// end of stream before a message starts.
pub async fn read_message<R: tokio::io::AsyncRead + Unpin>(
    r: &mut R,
) -> std::io::Result<Option<Vec<u8>>> {
    use tokio::io::AsyncReadExt;
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = r.read(&mut len[got..]).await?;
        if n == 0 {
            return if got == 0 {
                Ok(None)
            } else {
                Err(std::io::ErrorKind::UnexpectedEof.into())
            };
        }
        got += n;
    }
    let n = u32::from_be_bytes(len) as usize;
    if n == 0 || n > MAX_MESSAGE {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("an agent message of {n} bytes (the limit is {MAX_MESSAGE})"),
        ));
    }
    let mut msg = vec![0u8; 4 + n];
    msg[..4].copy_from_slice(&len);
    r.read_exact(&mut msg[4..]).await?;
    Ok(Some(msg))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    #[test]
    fn ssh_agent_setting_is_true_false_or_confirm() {
        let de = |j: &str| serde_json::from_str::<AgentSetting>(j);
        assert_eq!(de("false").unwrap(), AgentSetting::Off);
        assert_eq!(de("true").unwrap(), AgentSetting::On);
        assert_eq!(de("\"confirm\"").unwrap(), AgentSetting::Confirm);
        let e = de("\"ask\"").unwrap_err().to_string();
        assert!(
            e.contains("ssh_agent is true, false or \"confirm\", not \"ask\""),
            "{e}"
        );
        assert!(de("1").is_err());
        for s in [AgentSetting::Off, AgentSetting::On, AgentSetting::Confirm] {
            assert_eq!(de(&serde_json::to_string(&s).unwrap()).unwrap(), s);
        }
    }

    #[test]
    fn frames_cut_a_stream_into_messages_whatever_the_pieces() {
        let a = frame(&[SSH_AGENTC_REQUEST_IDENTITIES]);
        let b = frame(&[SSH_AGENTC_SIGN_REQUEST, 1, 2, 3]);
        let stream: Vec<u8> = a.iter().chain(b.iter()).copied().collect();
        for cut in 0..stream.len() {
            let mut f = Frames::new();
            let mut out = Vec::new();
            for piece in [&stream[..cut], &stream[cut..]] {
                f.push(piece);
                while let Some(m) = f.next_message().unwrap() {
                    out.push(m);
                }
            }
            assert_eq!(out, vec![a.clone(), b.clone()], "cut at {cut}");
            assert!(!f.is_partial());
        }
        assert_eq!(message_kind(&b), SSH_AGENTC_SIGN_REQUEST);
    }

    #[test]
    fn oversized_and_empty_messages_are_errors() {
        let mut f = Frames::new();
        f.push(&u32::try_from(MAX_MESSAGE + 1).unwrap().to_be_bytes());
        assert!(f.next_message().unwrap_err().contains("limit"));
        let mut f = Frames::new();
        f.push(&[0, 0, 0, 0]);
        assert!(f.next_message().is_err());
    }

    #[test]
    fn only_listing_signing_and_extensions_reach_the_laptop_agent() {
        for k in [11, 13, 27] {
            assert!(allowed(k), "{k}");
        }
        // add identity, remove, remove all, lock, unlock, add constrained, smartcard.
        for k in [17, 18, 19, 20, 21, 22, 23, 25, 26, 0, 255] {
            assert!(!allowed(k), "{k}");
        }
        assert_eq!(failure(), vec![0, 0, 0, 1, SSH_AGENT_FAILURE]);
    }

    #[tokio::test]
    async fn read_message_reads_whole_messages_and_a_clean_end() {
        let data: Vec<u8> = [frame(&[11]), frame(&[13, 9])].concat();
        let mut r = &data[..];
        assert_eq!(read_message(&mut r).await.unwrap(), Some(frame(&[11])));
        assert_eq!(read_message(&mut r).await.unwrap(), Some(frame(&[13, 9])));
        assert_eq!(read_message(&mut r).await.unwrap(), None);
        let mut cut: &[u8] = &[0, 0];
        assert!(read_message(&mut cut).await.is_err());
    }
}
