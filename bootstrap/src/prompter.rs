//! The seam between the SSH code and whoever talks to the user.
//!
//! `bootstrap` never prints or reads a terminal itself: every question (host key, passphrase,
//! password, keyboard-interactive round) and every piece of feedback (banner, progress) goes
//! through a [`Prompter`] it is handed. The TUI, a plain terminal ([`TerminalPrompter`]) and
//! headless runs ([`NonInteractivePrompter`]) each implement it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use zeroize::Zeroizing;

/// The stage of a connection or bootstrap; used for progress events and to say where an error
/// happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Name resolution and the TCP connection (including ProxyJump tunnels).
    Connect,
    /// SSH version exchange and key exchange.
    Kex,
    /// Checking the server's host key against known_hosts.
    HostKey,
    /// User authentication.
    Auth,
    /// Probing the host (architecture, home, existing installs, tools).
    Probe,
    /// Uploading the host binary.
    Upload,
    /// Verifying the uploaded binary.
    Verify,
    /// Starting `reasonix-remote` on the host.
    Launch,
    /// Attaching to the daemon over the exec channel.
    Attach,
}

impl Stage {
    /// Short lowercase name, as shown in error messages and progress lines.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Connect => "dns/tcp",
            Stage::Kex => "kex",
            Stage::HostKey => "host key",
            Stage::Auth => "auth",
            Stage::Probe => "probe",
            Stage::Upload => "upload",
            Stage::Verify => "verify",
            Stage::Launch => "launch",
            Stage::Attach => "attach",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What known_hosts says about the key a server presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKeyStatus {
    /// No entry names this host in any known_hosts file.
    Unknown,
    /// known_hosts has other keys for this host but not the presented one (of the same type
    /// or, as OpenSSH also treats it, only of other types).
    Changed {
        /// `SHA256:...` fingerprint of the key on record.
        old_fingerprint: String,
        /// Algorithm of the key on record, e.g. `ssh-ed25519`.
        old_key_type: String,
        /// The known_hosts file holding the old key.
        known_hosts_file: PathBuf,
        /// 1-based line number of the old entry in that file.
        line: usize,
    },
    /// The presented key is marked `@revoked`.
    Revoked {
        /// The known_hosts file holding the `@revoked` line.
        known_hosts_file: PathBuf,
        /// 1-based line number of that line.
        line: usize,
    },
}

/// A decision about a server host key, asked before any credential is sent.
///
/// Only [`HostKeyStatus::Unknown`] keys are put to the prompter; changed and revoked keys are
/// a hard stop and come back as [`crate::BootstrapError::HostKey`] carrying this same struct.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostKeyQuestion {
    /// Host name as used for known_hosts (after `HostName` substitution).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Algorithm of the presented key, e.g. `ssh-ed25519`.
    pub key_type: String,
    /// `SHA256:...` fingerprint of the presented key, as OpenSSH prints it.
    pub fingerprint_sha256: String,
    /// What known_hosts says.
    pub status: HostKeyStatus,
}

/// The user's answer to a [`HostKeyQuestion`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostKeyAnswer {
    /// Trust the key and append it to the user's known_hosts.
    AcceptAndSave,
    /// Trust the key for this connection only.
    AcceptOnce,
    /// Do not connect.
    Reject,
}

/// Why a secret is being asked for; lets a UI word the question and decides whether the answer
/// may be cached for reconnects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretPurpose {
    /// Passphrase of an encrypted private key file.
    Passphrase {
        /// The identity file.
        path: PathBuf,
    },
    /// Password for `password` authentication.
    Password {
        /// Remote user.
        user: String,
        /// Remote host.
        host: String,
    },
    /// A single keyboard-interactive answer (only used by prompters that split rounds).
    KeyboardInteractive,
}

/// A request for one secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretPrompt {
    /// Text to show, e.g. `Enter passphrase for key '/home/me/.ssh/id_ed25519': `.
    pub prompt: String,
    /// Whether the answer may be shown while typed (false for passwords).
    pub echo: bool,
    /// What the secret is for.
    pub purpose: SecretPurpose,
}

/// One keyboard-interactive round as sent by the server (RFC 4256).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KbdRound {
    /// Remote user.
    pub user: String,
    /// Remote host.
    pub host: String,
    /// Round name from the server (often empty).
    pub name: String,
    /// Instructions from the server (often empty).
    pub instructions: String,
    /// Prompts, each with its echo flag.
    pub prompts: Vec<(String, bool)>,
}

/// Feedback and questions from the SSH/bootstrap code to the user.
///
/// Implementations must be cheap to call from async code; the questions may take as long as
/// the user needs. Returning `None` from a question means "cancelled".
#[async_trait]
pub trait Prompter: Send + Sync {
    /// Decide about an unknown host key.
    async fn host_key(&self, question: &HostKeyQuestion) -> HostKeyAnswer;
    /// Ask for one secret (passphrase or password). `None` = cancelled.
    async fn secret(&self, prompt: &SecretPrompt) -> Option<Zeroizing<String>>;
    /// Answer one keyboard-interactive round; the answers must match `round.prompts` in number.
    /// `None` = cancelled.
    async fn keyboard_interactive(&self, round: &KbdRound) -> Option<Vec<Zeroizing<String>>>;
    /// Show the server's pre-authentication banner.
    fn banner(&self, text: &str);
    /// Report progress of a stage; `amount` is `(done, total)` where it makes sense (bytes
    /// uploaded).
    fn progress(&self, stage: Stage, detail: &str, amount: Option<(u64, u64)>);
    /// A daemon of another build runs a turn in the workspace: upgrade (interrupting it),
    /// attach to it read-only, or wait. The default refuses (headless front ends).
    async fn upgrade(&self, question: &UpgradeQuestion) -> UpgradeAnswer {
        tracing::info!(running = %question.running_build, "not replacing a busy daemon of another build (no one to ask)");
        UpgradeAnswer::Refuse
    }
}

/// The question of [`Prompter::upgrade`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeQuestion {
    /// Where (`user@host:path` or `local:path`).
    pub place: String,
    /// Build of the daemon that runs the turn.
    pub running_build: String,
    /// Build of this client.
    pub our_build: String,
    /// Sessions with a turn in progress: (id, state name, title).
    pub sessions: Vec<(String, String, String)>,
}

/// The answer to [`Prompter::upgrade`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpgradeAnswer {
    /// Stop the old daemon now (the turn is interrupted; its journal keeps it) and start
    /// this build's.
    UpgradeNow,
    /// Leave it running and attach to it read-only.
    AttachReadOnly,
    /// Wait until its turn ends, then upgrade.
    Wait,
    /// Do nothing and give up.
    Refuse,
}

/// Refuses every question; for headless runs. Host keys are accepted only through
/// `-o StrictHostKeyChecking=accept-new` (which never asks).
#[derive(Debug, Default, Clone)]
pub struct NonInteractivePrompter;

/// Message used when a headless run meets an unknown host key.
pub const NON_INTERACTIVE_HOST_KEY_HINT: &str =
    "no one can confirm the host key in a non-interactive run; add it to known_hosts first \
     (ssh-keyscan or a manual ssh), or pass -o StrictHostKeyChecking=accept-new";

#[async_trait]
impl Prompter for NonInteractivePrompter {
    async fn host_key(&self, question: &HostKeyQuestion) -> HostKeyAnswer {
        tracing::warn!(
            host = %question.host,
            port = question.port,
            fingerprint = %question.fingerprint_sha256,
            "unknown host key refused: {NON_INTERACTIVE_HOST_KEY_HINT}"
        );
        HostKeyAnswer::Reject
    }

    async fn secret(&self, prompt: &SecretPrompt) -> Option<Zeroizing<String>> {
        tracing::debug!(prompt = %prompt.prompt, "secret refused (non-interactive)");
        None
    }

    async fn keyboard_interactive(&self, round: &KbdRound) -> Option<Vec<Zeroizing<String>>> {
        // A round without prompts needs no user; answering it keeps servers that send an
        // empty final round (PAM) working headless.
        if round.prompts.is_empty() {
            return Some(Vec::new());
        }
        None
    }

    fn banner(&self, text: &str) {
        tracing::info!(banner = %text, "server banner");
    }

    fn progress(&self, stage: Stage, detail: &str, amount: Option<(u64, u64)>) {
        tracing::debug!(%stage, detail, ?amount, "progress");
    }
}

/// Asks on the controlling terminal (`/dev/tty`), with echo off for secrets; for
/// `reasonix run --ssh` on a TTY.
#[derive(Debug, Default, Clone)]
pub struct TerminalPrompter {
    /// Print progress lines to the terminal (off by default: the caller may draw its own).
    pub show_progress: bool,
}

impl TerminalPrompter {
    /// A prompter that asks on `/dev/tty` and shows progress lines when `show_progress`.
    pub fn new(show_progress: bool) -> Self {
        Self { show_progress }
    }
}

/// Blocking terminal I/O on the user's terminal (`/dev/tty`, the Windows console); run
/// through `spawn_blocking`.
mod tty {
    use super::*;
    use crate::platform::console::open_terminal;

    pub(super) fn write(text: &str) {
        match open_terminal() {
            Ok(mut tty) => {
                let _ = tty.output.write_all(text.as_bytes());
                let _ = tty.output.flush();
            }
            Err(_) => {
                let mut err = std::io::stderr();
                let _ = err.write_all(text.as_bytes());
            }
        }
    }

    /// Print `prompt` and read one line; `None` when there is no terminal or on EOF.
    pub(super) fn ask(prompt: &str, echo: bool) -> Option<Zeroizing<String>> {
        let mut tty = open_terminal().ok()?;
        tty.output.write_all(prompt.as_bytes()).ok()?;
        tty.output.flush().ok()?;
        let guard = if echo { None } else { tty.echo_off() };
        let mut reader = BufReader::new(tty.input.try_clone().ok()?);
        let mut line = Zeroizing::new(String::new());
        let n = reader.read_line(&mut line).ok()?;
        drop(guard);
        if !echo {
            let _ = tty.output.write_all(b"\n");
        }
        if n == 0 {
            return None;
        }
        while line.ends_with('\n') || line.ends_with('\r') {
            line.pop();
        }
        Some(line)
    }
}

#[async_trait]
impl Prompter for TerminalPrompter {
    async fn host_key(&self, q: &HostKeyQuestion) -> HostKeyAnswer {
        let q = q.clone();
        let answer = tokio::task::spawn_blocking(move || {
            let name = if q.port == 22 {
                q.host.clone()
            } else {
                format!("[{}]:{}", q.host, q.port)
            };
            let mut text = format!(
                "The authenticity of host '{name}' can't be established.\n{} key fingerprint is {}.\n",
                q.key_type, q.fingerprint_sha256
            );
            text.push_str("Are you sure you want to continue connecting (yes/once/no/[fingerprint])? ");
            let mut prompt = text;
            loop {
                let Some(line) = tty::ask(&prompt, true) else {
                    return HostKeyAnswer::Reject;
                };
                let answer = line.trim().to_ascii_lowercase();
                match answer.as_str() {
                    "yes" | "y" => return HostKeyAnswer::AcceptAndSave,
                    "once" => return HostKeyAnswer::AcceptOnce,
                    "no" | "n" | "" => return HostKeyAnswer::Reject,
                    _ if line.trim() == q.fingerprint_sha256 => {
                        return HostKeyAnswer::AcceptAndSave
                    }
                    _ => prompt = "Please type 'yes', 'once', 'no' or the fingerprint: ".into(),
                }
            }
        })
        .await;
        answer.unwrap_or(HostKeyAnswer::Reject)
    }

    async fn secret(&self, p: &SecretPrompt) -> Option<Zeroizing<String>> {
        let prompt = p.prompt.clone();
        let echo = p.echo;
        tokio::task::spawn_blocking(move || tty::ask(&prompt, echo))
            .await
            .ok()
            .flatten()
    }

    async fn keyboard_interactive(&self, round: &KbdRound) -> Option<Vec<Zeroizing<String>>> {
        let round = round.clone();
        tokio::task::spawn_blocking(move || {
            let mut header = String::new();
            if !round.name.is_empty() {
                header.push_str(&round.name);
                header.push('\n');
            }
            if !round.instructions.is_empty() {
                header.push_str(&round.instructions);
                header.push('\n');
            }
            if !header.is_empty() {
                tty::write(&header);
            }
            let mut answers = Vec::with_capacity(round.prompts.len());
            for (prompt, echo) in &round.prompts {
                answers.push(tty::ask(prompt, *echo)?);
            }
            Some(answers)
        })
        .await
        .ok()
        .flatten()
    }

    fn banner(&self, text: &str) {
        let mut text = text.to_string();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        tty::write(&text);
    }

    fn progress(&self, stage: Stage, detail: &str, amount: Option<(u64, u64)>) {
        tracing::debug!(%stage, detail, ?amount, "progress");
        if self.show_progress {
            let line = match amount {
                Some((done, total)) if total > 0 => {
                    format!("[{stage}] {detail} {}%\n", done.saturating_mul(100) / total)
                }
                _ => format!("[{stage}] {detail}\n"),
            };
            tty::write(&line);
        }
    }

    async fn upgrade(&self, q: &UpgradeQuestion) -> UpgradeAnswer {
        let q = q.clone();
        tokio::task::spawn_blocking(move || {
            let mut text = format!(
                "The workspace daemon at {} runs build {} (this is build {}) and is in the middle of a turn:\n",
                q.place, q.running_build, q.our_build
            );
            for (id, state, title) in &q.sessions {
                text.push_str(&format!("  {id}  {state}  {title}\n"));
            }
            text.push_str("[u]pgrade now (interrupts the turn), attach [r]ead-only to the old build, [w]ait for the turn to end, or [q]uit? ");
            let mut prompt = text;
            loop {
                let Some(line) = tty::ask(&prompt, true) else {
                    return UpgradeAnswer::Refuse;
                };
                match line.trim().to_ascii_lowercase().as_str() {
                    "u" | "upgrade" => return UpgradeAnswer::UpgradeNow,
                    "r" | "read-only" => return UpgradeAnswer::AttachReadOnly,
                    "w" | "wait" => return UpgradeAnswer::Wait,
                    "q" | "quit" | "" => return UpgradeAnswer::Refuse,
                    _ => prompt = "Please type u, r, w or q: ".into(),
                }
            }
        })
        .await
        .unwrap_or(UpgradeAnswer::Refuse)
    }
}

/// In-memory store of secrets that proved correct (passphrases, passwords), so a reconnect in
/// the same process does not ask again. Values are zeroized when replaced, forgotten or
/// dropped; nothing is ever written to disk.
#[derive(Clone, Default)]
pub struct CredentialCache {
    inner: Arc<Mutex<HashMap<String, Zeroizing<String>>>>,
}

impl std::fmt::Debug for CredentialCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self.inner.lock().map(|m| m.len()).unwrap_or(0);
        f.debug_struct("CredentialCache")
            .field("entries", &count)
            .finish()
    }
}

impl CredentialCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The process-wide cache used by [`crate::connect`].
    pub fn global() -> &'static CredentialCache {
        static GLOBAL: OnceLock<CredentialCache> = OnceLock::new();
        GLOBAL.get_or_init(CredentialCache::new)
    }

    /// Cache key for a key file passphrase.
    pub(crate) fn passphrase_key(path: &std::path::Path) -> String {
        format!("passphrase\0{}", path.display())
    }

    /// Cache key for a password.
    pub(crate) fn password_key(user: &str, host: &str, port: u16) -> String {
        format!("password\0{user}\0{host}\0{port}")
    }

    /// Cache key for a keyboard-interactive prompt that asks for the account password.
    pub(crate) fn kbd_key(user: &str, host: &str, port: u16, prompt: &str) -> String {
        format!("kbd\0{user}\0{host}\0{port}\0{prompt}")
    }

    pub(crate) fn get(&self, key: &str) -> Option<Zeroizing<String>> {
        let map = self.inner.lock().ok()?;
        map.get(key).map(|v| Zeroizing::new(v.as_str().to_owned()))
    }

    pub(crate) fn put(&self, key: String, value: Zeroizing<String>) {
        if let Ok(mut map) = self.inner.lock() {
            map.insert(key, value);
        }
    }

    pub(crate) fn forget(&self, key: &str) {
        if let Ok(mut map) = self.inner.lock() {
            map.remove(key);
        }
    }

    /// Number of cached secrets (for tests and status displays; never the values).
    pub fn len(&self) -> usize {
        self.inner.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forget (and zeroize) every cached secret.
    pub fn clear(&self) {
        if let Ok(mut map) = self.inner.lock() {
            map.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn non_interactive_refuses_everything_but_empty_rounds() {
        let p = NonInteractivePrompter;
        let q = HostKeyQuestion {
            host: "h".into(),
            port: 22,
            key_type: "ssh-ed25519".into(),
            fingerprint_sha256: "SHA256:x".into(),
            status: HostKeyStatus::Unknown,
        };
        assert_eq!(p.host_key(&q).await, HostKeyAnswer::Reject);
        let s = SecretPrompt {
            prompt: "Password: ".into(),
            echo: false,
            purpose: SecretPurpose::Password {
                user: "u".into(),
                host: "h".into(),
            },
        };
        assert!(p.secret(&s).await.is_none());
        let mut round = KbdRound {
            user: "u".into(),
            host: "h".into(),
            name: String::new(),
            instructions: String::new(),
            prompts: vec![("Password: ".into(), false)],
        };
        assert!(p.keyboard_interactive(&round).await.is_none());
        round.prompts.clear();
        assert_eq!(p.keyboard_interactive(&round).await, Some(Vec::new()));
        assert!(NON_INTERACTIVE_HOST_KEY_HINT.contains("-o StrictHostKeyChecking=accept-new"));
    }

    #[test]
    fn credential_cache_stores_and_forgets() {
        let c = CredentialCache::new();
        let k = CredentialCache::password_key("u", "h", 22);
        assert!(c.get(&k).is_none());
        c.put(k.clone(), Zeroizing::new("pw".into()));
        assert_eq!(c.get(&k).as_deref().map(String::as_str), Some("pw"));
        assert_eq!(c.len(), 1);
        c.forget(&k);
        assert!(c.is_empty());
    }
}
