//! Transports to a host process: how a client gets a fresh byte stream to
//! `reasonix-remote attach` (child pipes locally, an SSH exec channel remotely).

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use reasonix_bootstrap::attach::{scan, OtherBuild, Scanned};
use reasonix_bootstrap::{Prompter, UpgradeAnswer, UpgradeQuestion};
use reasonix_forward::attach::{AttachReport, BusySession};
use reasonix_forward::proto::Hello;
use reasonix_forward::sync::LockExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A connected byte stream to `reasonix-remote attach`.
pub struct Transport {
    /// Bytes from the host.
    pub reader: Pin<Box<dyn AsyncRead + Send>>,
    /// Bytes to the host.
    pub writer: Pin<Box<dyn AsyncWrite + Send>>,
    /// Recent diagnostic output of the host side (stderr), for error messages.
    pub diagnostics: Arc<Mutex<String>>,
    /// The `Hello` given to [`Connector::connect`] already went out (pipelined with the
    /// attach command): read the preamble and `Welcome` only.
    pub hello_sent: bool,
    /// The daemon on the other end may be of this build instead of ours (the user chose to
    /// attach read-only to an old build, or the new build failed to start and the old one
    /// was started again).
    pub accept_build: Option<String>,
    /// Open sessions read-only on this transport (attached to another build's daemon).
    pub read_only: bool,
    /// Something the user should be told once connected.
    pub notice: Option<String>,
}

/// What a connector does when the workspace daemon is of another build and runs a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpgradePolicy {
    /// Ask the user through the prompter (TUI, terminal).
    Ask,
    /// Upgrade anyway, interrupting the turn (`--upgrade`).
    Force,
    /// Refuse with a message (headless runs without `--upgrade`).
    Refuse,
}

/// What to do after a [`AttachReport::Busy`] report.
pub(crate) enum BusyDecision {
    /// Attach again with this policy for the bridge.
    Retry(OtherBuild),
    /// Attach again with [`OtherBuild::Attach`] and open sessions read-only.
    ReadOnly,
    /// Wait a moment, then ask the bridge again.
    Wait,
}

/// How long to wait between two looks at a busy daemon of another build.
pub(crate) const BUSY_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Decide about a busy daemon of another build.
pub(crate) async fn decide_busy(
    policy: UpgradePolicy,
    prompter: Option<&dyn Prompter>,
    place: &str,
    build_id: &str,
    sessions: &[BusySession],
) -> Result<BusyDecision, ConnectError> {
    let list = sessions
        .iter()
        .map(|s| {
            if s.title.is_empty() {
                s.id.clone()
            } else {
                format!("{} ({})", s.id, s.title)
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    let refused = || {
        ConnectError::Fatal(format!(
            "the workspace daemon at {place} runs build {build_id} and is in the middle of a turn (session {list}); this reasonix is build {} and did not replace it. Rerun with --upgrade to interrupt the turn and upgrade (the session resumes from its journal), or wait until the turn ends",
            reasonix_forward::build_id()
        ))
    };
    match (policy, prompter) {
        (UpgradePolicy::Force, _) => Ok(BusyDecision::Retry(OtherBuild::Replace)),
        (UpgradePolicy::Refuse, _) | (UpgradePolicy::Ask, None) => Err(refused()),
        (UpgradePolicy::Ask, Some(p)) => {
            let q = UpgradeQuestion {
                place: place.to_string(),
                running_build: build_id.to_string(),
                our_build: reasonix_forward::build_id().to_string(),
                sessions: sessions
                    .iter()
                    .map(|s| {
                        (
                            s.id.clone(),
                            format!("{:?}", s.state).to_lowercase(),
                            s.title.clone(),
                        )
                    })
                    .collect(),
            };
            match p.upgrade(&q).await {
                UpgradeAnswer::UpgradeNow => Ok(BusyDecision::Retry(OtherBuild::Replace)),
                UpgradeAnswer::AttachReadOnly => Ok(BusyDecision::ReadOnly),
                UpgradeAnswer::Wait => {
                    p.progress(
                        reasonix_bootstrap::Stage::Attach,
                        &format!("waiting for the turn on build {build_id} to end, then upgrading"),
                        None,
                    );
                    Ok(BusyDecision::Wait)
                }
                UpgradeAnswer::Refuse => Err(refused()),
            }
        }
    }
}

/// The notice shown when the bridge fell back to the old build.
pub(crate) fn fallback_notice(report: &AttachReport) -> Option<(String, String)> {
    match report {
        AttachReport::Fallback { build_id, reason } => Some((
            build_id.clone(),
            format!(
                "the host binary of this build ({}) did not start ({reason}); the previous build {build_id} was started again and is used",
                reasonix_forward::build_id()
            ),
        )),
        AttachReport::Busy { .. } | AttachReport::Refused { .. } => None,
    }
}

/// Why a connection attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Worth retrying (network down, host unreachable, ...).
    #[error("{0}")]
    Transient(String),
    /// Retrying will not help (bad credentials, changed host key, missing binary, ...).
    #[error("{0}")]
    Fatal(String),
    /// Fatal too, but the cause is a workspace folder that does not exist: a front end may
    /// offer to create it ([`Connector::create_workspace`]) and connect again.
    #[error("{0}")]
    WorkspaceMissing(String),
}

/// Something that can open a fresh transport on demand (used for every reconnect).
#[async_trait::async_trait]
pub trait Connector: Send + Sync {
    /// Open a new transport. A connector that can pipeline `hello` (send it with the attach
    /// command, saving a round trip) does so and sets [`Transport::hello_sent`].
    async fn connect(&self, hello: &Hello) -> Result<Transport, ConnectError>;
    /// Human-readable place, e.g. `local:/path` or `me@host:/repo`.
    fn describe(&self) -> String;
    /// Create the workspace folder on the next attempts (`--mkdir`), after a
    /// [`ConnectError::WorkspaceMissing`] and the user's yes. False when this connector
    /// cannot.
    fn create_workspace(&self) -> bool {
        false
    }
    /// The laptop agent to forward to the host (#36 §2), when the user asked for it
    /// (`ForwardAgent` in ssh_config, `-A`) and this laptop has one; `None` otherwise.
    fn forward_agent(&self) -> Option<std::path::PathBuf> {
        None
    }
}

/// Environment variables a host process may inherit. Everything else (API keys in
/// particular) is withheld: the key never reaches the host, even in local mode.
const ENV_ALLOW: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TMPDIR",
    "TZ",
    "XDG_RUNTIME_DIR",
    "REASONIX_HOME",
    "REASONIX_LOG",
    "REASONIX_IDLE_TIMEOUT_SECS",
    "REASONIX_LINK_GRACE_SECS",
    "REASONIX_HEARTBEAT_MS",
    "REASONIX_DEAD_AFTER_MS",
    // Test knobs (two builds of one binary, a daemon that fails to start); see
    // `reasonix_forward::TEST_BUILD_ID_ENV`.
    "REASONIX_TEST_BUILD_ID",
    "REASONIX_TEST_DAEMON_FAIL",
];

/// Local mode: spawns `reasonix-remote attach --workspace DIR` and speaks over its pipes.
pub struct LocalConnector {
    /// The host binary.
    pub binary: PathBuf,
    /// The workspace.
    pub workspace: PathBuf,
    /// What to do about a busy daemon of another build.
    pub upgrade: UpgradePolicy,
    /// Who to ask when `upgrade` is [`UpgradePolicy::Ask`].
    pub prompter: Option<Arc<dyn Prompter>>,
    /// Create the workspace folder when it does not exist (`--mkdir`).
    pub mkdir: bool,
    /// Set when the user asked to create the missing workspace (the TUI's prompt): the next
    /// attempts pass `--mkdir`.
    pub mkdir_now: std::sync::atomic::AtomicBool,
}

impl LocalConnector {
    /// A connector for `workspace` that refuses to replace a busy daemon of another build.
    pub fn new(binary: PathBuf, workspace: PathBuf) -> Self {
        Self {
            binary,
            workspace,
            upgrade: UpgradePolicy::Refuse,
            prompter: None,
            mkdir: false,
            mkdir_now: std::sync::atomic::AtomicBool::new(false),
        }
    }

    async fn attempt(&self, hello: &[u8], other: OtherBuild) -> Result<Attempt, ConnectError> {
        let tag = format!("{:016x}", rand::random::<u64>());
        let mut cmd = tokio::process::Command::new(&self.binary);
        // One word (`--workspace=PATH`): a path starting with `-` must not read as flags.
        let mut workspace = std::ffi::OsString::from("--workspace=");
        workspace.push(&self.workspace);
        cmd.arg("attach")
            .arg(workspace)
            .args(["--tag", &tag, "--other-build", other.flag()])
            .args(
                (self.mkdir || self.mkdir_now.load(std::sync::atomic::Ordering::SeqCst))
                    .then_some("--mkdir"),
            )
            .env_clear()
            .envs(
                std::env::vars_os()
                    .filter(|(k, _)| k.to_str().map(|k| ENV_ALLOW.contains(&k)).unwrap_or(false)),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| {
            ConnectError::Fatal(format!(
                "cannot start {}: {e}; set REASONIX_REMOTE_BIN or rebuild with `cargo build --release`",
                self.binary.display()
            ))
        })?;
        let (Some(mut stdin), Some(mut stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ConnectError::Fatal("child pipes unavailable".into()));
        };
        // Pipelined: the bridge forwards stdin only once it found the right daemon, so the
        // Hello can go right away (a bridge that reports instead never reads it).
        let _ = stdin.write_all(hello).await;
        let diagnostics = Arc::new(Mutex::new(String::new()));
        let diag = Arc::clone(&diagnostics);
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut d = diag.lock_or_recover();
                d.push_str(&String::from_utf8_lossy(&buf[..n]));
                let len = d.len();
                if len > 8192 {
                    let mut cut = len - 8192;
                    while !d.is_char_boundary(cut) {
                        cut += 1;
                    }
                    d.drain(..cut);
                }
            }
            let _ = done_tx.send(());
            // Keep the child handle alive (kill_on_drop) for as long as its stderr is open.
            let _ = child.wait().await;
        });
        let scanned = scan(&mut stdout, &tag)
            .await
            .map_err(|e| ConnectError::Fatal(format!("reading from reasonix-remote: {e}")))?;
        match scanned {
            Scanned::Preamble { prefix, report } => Ok(Attempt::Linked(
                Transport {
                    reader: Box::pin(std::io::Cursor::new(prefix).chain(stdout)),
                    writer: Box::pin(stdin),
                    diagnostics,
                    hello_sent: true,
                    accept_build: None,
                    read_only: false,
                    notice: None,
                },
                report,
            )),
            Scanned::Report(AttachReport::Busy { build_id, sessions }) => {
                Ok(Attempt::Busy(build_id, sessions))
            }
            Scanned::Report(AttachReport::Refused {
                problem,
                path,
                detail,
            }) => {
                let msg = format!(
                    "[attach] local: {path}: {} ({detail}). {}",
                    problem.what(),
                    problem.fix()
                );
                Err(
                    if problem == reasonix_forward::attach::WorkspaceProblem::Missing {
                        ConnectError::WorkspaceMissing(msg)
                    } else {
                        ConnectError::Fatal(msg)
                    },
                )
            }
            Scanned::Report(AttachReport::Fallback { .. }) | Scanned::Missing(_) => Err(
                ConnectError::Fatal("reasonix-remote printed an unexpected report".into()),
            ),
            Scanned::Ended { output } | Scanned::TooMuchNoise { output } => {
                let _ = tokio::time::timeout(std::time::Duration::from_secs(2), done_rx).await;
                let stderr = diagnostics.lock_or_recover().clone();
                Err(ConnectError::Fatal(format!(
                    "reasonix-remote attach ended without a link: {}{}",
                    stderr.trim(),
                    if output.trim().is_empty() {
                        String::new()
                    } else {
                        format!(" (stdout: {})", output.trim())
                    }
                )))
            }
        }
    }
}

/// One attach attempt of a connector.
pub(crate) enum Attempt {
    /// Linked (with a fallback report, if any).
    Linked(Transport, Option<AttachReport>),
    /// A daemon of another build is busy.
    Busy(String, Vec<BusySession>),
}

#[async_trait::async_trait]
impl Connector for LocalConnector {
    async fn connect(&self, hello: &Hello) -> Result<Transport, ConnectError> {
        let frame = reasonix_forward::handshake::hello_frame(hello)
            .map_err(|e| ConnectError::Fatal(e.to_string()))?;
        let mut other = match (self.upgrade, hello.resume.is_some()) {
            // A reconnect that finds another build: someone else replaced our daemon. Never
            // replace it back; the handshake then reports the build mismatch.
            (_, true) => OtherBuild::Attach,
            (UpgradePolicy::Force, false) => OtherBuild::Replace,
            (UpgradePolicy::Ask | UpgradePolicy::Refuse, false) => OtherBuild::Ask,
        };
        let mut read_only_build: Option<String> = None;
        loop {
            match self.attempt(&frame, other).await? {
                Attempt::Linked(mut t, report) => {
                    if let Some((build, notice)) = report.as_ref().and_then(fallback_notice) {
                        t.accept_build = Some(build);
                        t.notice = Some(notice);
                    }
                    if let Some(b) = read_only_build {
                        t.accept_build = Some(b);
                        t.read_only = true;
                    }
                    return Ok(t);
                }
                Attempt::Busy(build, sessions) => {
                    match decide_busy(
                        self.upgrade,
                        self.prompter.as_deref(),
                        &self.describe(),
                        &build,
                        &sessions,
                    )
                    .await?
                    {
                        BusyDecision::Retry(o) => other = o,
                        BusyDecision::ReadOnly => {
                            other = OtherBuild::Attach;
                            read_only_build = Some(build);
                        }
                        BusyDecision::Wait => tokio::time::sleep(BUSY_POLL).await,
                    }
                }
            }
        }
    }

    fn describe(&self) -> String {
        format!("local:{}", self.workspace.display())
    }

    fn create_workspace(&self) -> bool {
        self.mkdir_now
            .store(true, std::sync::atomic::Ordering::SeqCst);
        true
    }
}

/// Find the `reasonix-remote` binary for local mode: `$REASONIX_REMOTE_BIN`, else the file
/// next to the running `reasonix` executable.
pub fn locate_host_binary() -> Result<PathBuf, String> {
    let explicit = std::env::var_os("REASONIX_REMOTE_BIN").filter(|p| !p.is_empty());
    use crate::platform::local_mode::{unavailable, System};
    if let Some(why) = unavailable(System::THIS, explicit.is_some()) {
        return Err(why);
    }
    if let Some(p) = explicit {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!(
                "REASONIX_REMOTE_BIN points to {}, which is not a file",
                p.display()
            ))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate reasonix itself: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidate = dir.join("reasonix-remote");
    if candidate.is_file() {
        return Ok(candidate);
    }
    Err(format!(
        "cannot find reasonix-remote next to reasonix (looked in {}); build both with `cargo build --release` or set REASONIX_REMOTE_BIN",
        dir.display()
    ))
}
