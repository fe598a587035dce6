//! The error type of every connection and bootstrap step: each says the stage, the host and
//! what the user can try.

use std::path::PathBuf;

use crate::prompter::{HostKeyQuestion, HostKeyStatus, Stage};

/// Why the host key was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostKeyRefusal {
    /// The key differs from the one on record (hard stop).
    Changed,
    /// The key is `@revoked` (hard stop).
    Revoked,
    /// Unknown key and `StrictHostKeyChecking yes`.
    StrictRefusedUnknown,
    /// Unknown key and the prompter (user or non-interactive policy) said no.
    RejectedByUser,
}

/// An error from [`crate::connect`], [`crate::install`] or a remote command.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// Options or config files were invalid.
    #[error("ssh options: {0}")]
    Config(#[from] crate::config::ConfigError),

    /// Name resolution or the TCP connection failed.
    #[error("[dns/tcp] cannot reach {host}:{port}: {reason}. Check the host name, the port (-p) and that sshd is running; ProxyJump hops need AllowTcpForwarding on the jump host.")]
    Connect {
        /// Host (as dialled).
        host: String,
        /// Port.
        port: u16,
        /// What failed.
        reason: String,
    },

    /// A stage did not finish within its time limit.
    #[error("[{stage}] {host}: timed out after {secs} s. The host may be unreachable or overloaded; raise ConnectTimeout or check the network.")]
    Timeout {
        /// Stage that timed out.
        stage: Stage,
        /// Host.
        host: String,
        /// Limit in seconds.
        secs: u64,
    },

    /// The SSH handshake failed (not because of the host key).
    #[error("[kex] SSH handshake with {host} failed: {reason}. Is this an SSH server, and does it offer a modern key exchange?")]
    Kex {
        /// Host.
        host: String,
        /// russh's description.
        reason: String,
    },

    /// The host key was not accepted. No credential was sent.
    #[error("{}", host_key_message(question, refusal))]
    HostKey {
        /// The host, key and what known_hosts says.
        question: Box<HostKeyQuestion>,
        /// Why it was refused.
        refusal: HostKeyRefusal,
    },

    /// No authentication method succeeded.
    #[error("[auth] {user}@{host}: permission denied (tried: {tried}; server allows: {allowed}). {hint}")]
    Auth {
        /// Remote user.
        user: String,
        /// Host.
        host: String,
        /// Methods we tried, comma-separated.
        tried: String,
        /// Methods the server still allowed.
        allowed: String,
        /// What to try.
        hint: String,
    },

    /// The user cancelled a prompt.
    #[error("[{stage}] {host}: cancelled")]
    Cancelled {
        /// Stage during which the prompt was cancelled.
        stage: Stage,
        /// Host.
        host: String,
    },

    /// An SSH protocol operation failed after login (channel open, exec, sftp...).
    #[error("[{stage}] {host}: {what}: {reason}")]
    Ssh {
        /// Stage.
        stage: Stage,
        /// Host.
        host: String,
        /// The operation.
        what: String,
        /// Underlying error.
        reason: String,
    },

    /// The host's OS/architecture has no shipped binary.
    #[error("[probe] {host}: unsupported platform '{os} {arch}'. Reasonix ships host binaries for Linux x86_64 and aarch64 only.")]
    UnsupportedPlatform {
        /// Host.
        host: String,
        /// `uname -s`.
        os: String,
        /// `uname -m`.
        arch: String,
    },

    /// No binary for the target was found next to `reasonix`.
    /// The remedy is the same one command the release build prints when it cannot build a
    /// host binary ([`crate::build_hint`]).
    #[error("[upload] no reasonix-remote binary for {target} (looked in: {}). Build it in the Reasonix source folder with `{}` (it lands next to {}/reasonix; use that `reasonix`), or set REASONIX_REMOTE_BIN_{} to one.", searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "), crate::build_hint::build_host_binaries_command(&[target.as_str()]), crate::build_hint::RELEASE_DIR, target.replace('-', "_").to_uppercase())]
    MissingBinary {
        /// Target triple.
        target: String,
        /// Paths tried.
        searched: Vec<PathBuf>,
    },

    /// A remote step (probe, upload, verify, launch) failed.
    #[error("[{stage}] {host}: {message}")]
    Remote {
        /// Stage.
        stage: Stage,
        /// Host.
        host: String,
        /// What happened and what to try.
        message: String,
    },

    /// The host workspace (or the state folder) cannot be used; the bridge started nothing.
    /// Never retried: the user has to change the path, the host or `--mkdir`.
    #[error("[attach] {host}: {path}: {} ({detail}). {}", problem.what(), problem.fix())]
    Workspace {
        /// Host.
        host: String,
        /// What is wrong.
        problem: reasonix_forward::attach::WorkspaceProblem,
        /// The path concerned, as the host sees it.
        path: String,
        /// The operating system's words.
        detail: String,
    },

    /// A local file could not be read.
    #[error("[{stage}] cannot read {path}: {reason}")]
    Local {
        /// Stage.
        stage: Stage,
        /// File.
        path: PathBuf,
        /// I/O error.
        reason: String,
    },
}

fn host_key_message(q: &HostKeyQuestion, refusal: &HostKeyRefusal) -> String {
    let name = crate::known_hosts::host_port_name(&q.host, q.port);
    match (refusal, &q.status) {
        (
            HostKeyRefusal::Changed,
            HostKeyStatus::Changed {
                old_fingerprint,
                old_key_type,
                known_hosts_file,
                line,
            },
        ) => format!(
            "[host key] REMOTE HOST IDENTIFICATION HAS CHANGED for {name}! Someone could be \
             eavesdropping (man-in-the-middle), or the host key was just replaced. \
             Recorded key: {old_key_type} {old_fingerprint} ({}:{line}). \
             Presented key: {} {}.{} Nothing was sent. If the change is expected, remove the old \
             entry (ssh-keygen -R '{name}' or delete line {line} of {}) and connect again.",
            known_hosts_file.display(),
            q.key_type,
            q.fingerprint_sha256,
            if *old_key_type == q.key_type {
                String::new()
            } else {
                format!(
                    " The server did not offer a {old_key_type} key although it was asked for \
                     the recorded key types first."
                )
            },
            known_hosts_file.display(),
        ),
        (HostKeyRefusal::Revoked, HostKeyStatus::Revoked { known_hosts_file, line }) => format!(
            "[host key] the {} key {} presented by {name} is REVOKED ({}:{line}). Nothing was sent.",
            q.key_type,
            q.fingerprint_sha256,
            known_hosts_file.display()
        ),
        (HostKeyRefusal::StrictRefusedUnknown, _) => format!(
            "[host key] no {} key for {name} in known_hosts and StrictHostKeyChecking is yes \
             (presented {}). Add the key to known_hosts or use -o StrictHostKeyChecking=accept-new.",
            q.key_type, q.fingerprint_sha256
        ),
        (HostKeyRefusal::RejectedByUser, _) => format!(
            "[host key] unknown {} key {} for {name} was not accepted. {}",
            q.key_type,
            q.fingerprint_sha256,
            crate::prompter::NON_INTERACTIVE_HOST_KEY_HINT
        ),
        (HostKeyRefusal::Changed | HostKeyRefusal::Revoked, _) => format!(
            "[host key] {} key {} for {name} refused",
            q.key_type, q.fingerprint_sha256
        ),
    }
}

impl BootstrapError {
    /// The stage that failed.
    pub fn stage(&self) -> Stage {
        match self {
            BootstrapError::Config(_) | BootstrapError::Connect { .. } => Stage::Connect,
            BootstrapError::Timeout { stage, .. }
            | BootstrapError::Cancelled { stage, .. }
            | BootstrapError::Ssh { stage, .. }
            | BootstrapError::Remote { stage, .. }
            | BootstrapError::Local { stage, .. } => *stage,
            BootstrapError::Workspace { .. } => Stage::Attach,
            BootstrapError::Kex { .. } => Stage::Kex,
            BootstrapError::HostKey { .. } => Stage::HostKey,
            BootstrapError::Auth { .. } => Stage::Auth,
            BootstrapError::UnsupportedPlatform { .. } => Stage::Probe,
            BootstrapError::MissingBinary { .. } => Stage::Upload,
        }
    }

    pub(crate) fn ssh(
        stage: Stage,
        host: &str,
        what: &str,
        reason: impl std::fmt::Display,
    ) -> Self {
        BootstrapError::Ssh {
            stage,
            host: host.to_string(),
            what: what.to_string(),
            reason: reason.to_string(),
        }
    }

    pub(crate) fn remote(stage: Stage, host: &str, message: impl Into<String>) -> Self {
        BootstrapError::Remote {
            stage,
            host: host.to_string(),
            message: message.into(),
        }
    }
}
