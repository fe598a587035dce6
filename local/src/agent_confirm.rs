//! The ssh-agent `confirm` mode (issue #36 §2): with `[sandbox] ssh_agent = "confirm"`, every
//! signing request a host process makes on the forwarded agent is put to the user on the
//! laptop before it reaches the agent, naming the key (type, fingerprint, the agent's comment)
//! and the host process (pid, command). Listing keys is not asked about (it reveals only
//! public keys).
//!
//! The question goes to the front end as [`crate::client::ClientEvent::AgentSign`]; the front
//! end answers it ([`AgentAnswer::answer`]). An answer that never comes is a refusal: a front
//! end that drops the event (a headless run), or no answer within [`ASK_TIMEOUT`], refuses the
//! request (`SSH_AGENT_FAILURE`), so nothing signs without a person's yes. Keys listed in
//! `[sandbox] ssh_agent_approved` (fingerprints as `ssh-add -l` prints them) are pre-approved:
//! they sign without a question, also in a headless run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use reasonix_forward::agent::{frame, read_message, AgentOpen, SSH_AGENTC_REQUEST_IDENTITIES};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};

use crate::client::ClientEvent;
use reasonix_forward::sync::LockExt;

/// How long a signing request waits for the user's answer before it is refused.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(120);

/// `SSH_AGENT_IDENTITIES_ANSWER`.
const IDENTITIES_ANSWER: u8 = 12;

/// The confirm setting of the laptop (from `[sandbox] ssh_agent` and
/// `ssh_agent_approved`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentConfirm {
    /// Ask for every signing request.
    pub confirm: bool,
    /// Fingerprints (`SHA256:…`) that sign without a question.
    pub approved: Vec<String>,
}

/// One signing request put to the user.
#[derive(Debug, Clone)]
pub struct AgentSignAsk {
    /// The key: type, fingerprint and the laptop agent's comment for it, e.g.
    /// `ED25519 SHA256:abc… me@laptop`.
    pub key: String,
    /// Its fingerprint alone (`SHA256:…`), for a "always allow this key" answer.
    pub fingerprint: String,
    /// The host process that asked, when the daemon knew it.
    pub pid: Option<u32>,
    /// Its command name on the host.
    pub command: String,
    /// Where the answer goes.
    pub answer: AgentAnswer,
}

impl AgentSignAsk {
    /// One line for a prompt: which process wants which key.
    pub fn question(&self) -> String {
        let who = match (self.pid, self.command.is_empty()) {
            (Some(pid), false) => format!("{} (pid {pid})", self.command),
            (Some(pid), true) => format!("pid {pid}"),
            (None, false) => self.command.clone(),
            (None, true) => "an unknown process".into(),
        };
        format!(
            "{who} on the host asks your ssh-agent to sign with {}",
            self.key
        )
    }
}

/// The answer slot of an [`AgentSignAsk`]; the first answer counts, a dropped one refuses.
#[derive(Clone)]
pub struct AgentAnswer(Arc<Mutex<Option<oneshot::Sender<bool>>>>);

impl std::fmt::Debug for AgentAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgentAnswer")
    }
}

impl AgentAnswer {
    /// Allow (true) or refuse (false) the signing request.
    pub fn answer(&self, allow: bool) {
        if let Some(tx) = self.0.lock_or_recover().take() {
            let _ = tx.send(allow);
        }
    }
}

/// The key blob of a framed `SSH_AGENTC_SIGN_REQUEST` (length prefix, type, string blob, …).
pub fn sign_key_blob(msg: &[u8]) -> Option<&[u8]> {
    let body = msg.get(5..)?;
    read_string(body).map(|(blob, _)| blob)
}

/// `SHA256:` and the unpadded base64 of the blob's SHA-256, as `ssh-add -l` prints it.
pub fn fingerprint(blob: &[u8]) -> String {
    let digest = Sha256::digest(blob);
    format!(
        "SHA256:{}",
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(digest)
    )
}

/// The key type named in a blob (`ssh-ed25519` -> `ED25519`).
fn key_type(blob: &[u8]) -> String {
    let name = read_string(blob)
        .map(|(n, _)| String::from_utf8_lossy(n).into_owned())
        .unwrap_or_default();
    match name.as_str() {
        "ssh-ed25519" => "ED25519".into(),
        "ssh-rsa" => "RSA".into(),
        n if n.starts_with("ecdsa-sha2-") => "ECDSA".into(),
        n if n.starts_with("sk-") => "SK".into(),
        "" => "key".into(),
        n => n.to_string(),
    }
}

/// A u32-length-prefixed string at the start of `b`, and what follows it.
fn read_string(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = b.split_first_chunk::<4>()?;
    let len = u32::from_be_bytes(*len) as usize;
    (rest.len() >= len).then(|| rest.split_at(len))
}

/// The agent's comment for `blob`, from an identities answer.
fn comment_in(answer: &[u8], blob: &[u8]) -> Option<String> {
    let body = answer.get(4..)?;
    let (&kind, rest) = body.split_first()?;
    if kind != IDENTITIES_ANSWER {
        return None;
    }
    let (n, mut rest) = rest.split_first_chunk::<4>()?;
    for _ in 0..u32::from_be_bytes(*n) {
        let (b, r) = read_string(rest)?;
        let (c, r) = read_string(r)?;
        if b == blob {
            return Some(String::from_utf8_lossy(c).into_owned());
        }
        rest = r;
    }
    None
}

/// Whether the signing request `msg` may go to the agent: pre-approved keys yes; otherwise
/// the user is asked through `events` and a missing answer refuses. `agent` is asked for
/// its identities first, for the key's comment.
pub(crate) async fn allow_sign(
    confirm: &AgentConfirm,
    msg: &[u8],
    open: &AgentOpen,
    agent: &mut Box<dyn crate::platform::agent::AgentStream>,
    events: &mpsc::UnboundedSender<ClientEvent>,
) -> bool {
    let Some(blob) = sign_key_blob(msg) else {
        return false;
    };
    let fp = fingerprint(blob);
    if confirm.approved.iter().any(|a| a.trim() == fp) {
        tracing::info!(pid = open.pid, command = %open.command, key = %fp, "agent signing pre-approved");
        return true;
    }
    let mut key = format!("{} {fp}", key_type(blob));
    if agent
        .write_all(&frame(&[SSH_AGENTC_REQUEST_IDENTITIES]))
        .await
        .is_ok()
    {
        if let Ok(Some(answer)) = read_message(agent).await {
            if let Some(c) = comment_in(&answer, blob).filter(|c| !c.is_empty()) {
                key.push(' ');
                key.push_str(&c);
            }
        }
    }
    let (tx, rx) = oneshot::channel();
    let ask = AgentSignAsk {
        key,
        fingerprint: fp.clone(),
        pid: open.pid,
        command: open.command.clone(),
        answer: AgentAnswer(Arc::new(Mutex::new(Some(tx)))),
    };
    tracing::info!("asking the user: {}", ask.question());
    if events.send(ClientEvent::AgentSign(ask)).is_err() {
        return false;
    }
    let allowed = matches!(tokio::time::timeout(ASK_TIMEOUT, rx).await, Ok(Ok(true)));
    tracing::info!(pid = open.pid, command = %open.command, key = %fp, allowed, "agent signing answered");
    allowed
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn string(s: &[u8]) -> Vec<u8> {
        let mut v = (s.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(s);
        v
    }

    #[test]
    fn the_key_of_a_sign_request_is_found_named_and_fingerprinted() {
        let mut blob = string(b"ssh-ed25519");
        blob.extend(string(&[7; 32]));
        let mut body = vec![13];
        body.extend(string(&blob));
        body.extend(string(b"data to sign"));
        body.extend(0u32.to_be_bytes());
        let msg = frame(&body);
        assert_eq!(sign_key_blob(&msg), Some(&blob[..]));
        assert_eq!(key_type(&blob), "ED25519");
        let fp = fingerprint(&blob);
        assert!(fp.starts_with("SHA256:") && !fp.ends_with('='), "{fp}");
        assert_eq!(fp.len(), 7 + 43);
        let mut ids = vec![IDENTITIES_ANSWER];
        ids.extend(2u32.to_be_bytes());
        ids.extend(string(b"other"));
        ids.extend(string(b"not this"));
        ids.extend(string(&blob));
        ids.extend(string(b"me@laptop"));
        assert_eq!(
            comment_in(&frame(&ids), &blob).as_deref(),
            Some("me@laptop")
        );
        assert_eq!(sign_key_blob(&frame(&[13, 0, 0])), None, "truncated");
    }

    #[test]
    fn an_answer_counts_once_and_a_dropped_one_refuses() {
        let (tx, mut rx) = oneshot::channel();
        let a = AgentAnswer(Arc::new(Mutex::new(Some(tx))));
        a.clone().answer(true);
        a.answer(false);
        assert_eq!(rx.try_recv(), Ok(true));
        let (tx, rx) = oneshot::channel::<bool>();
        drop(AgentAnswer(Arc::new(Mutex::new(Some(tx)))));
        assert!(rx.blocking_recv().is_err());
    }
}
