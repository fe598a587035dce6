//! SSH mode: a [`Connector`] that reaches a host over russh, installs the matching static
//! `reasonix-remote` on first contact, and opens one exec channel whose stdio is the link.
//!
//! Reconnects reuse the cached credentials (no second password or host-key question in the
//! same process) and a short TCP connect timeout, so a restored network is noticed quickly.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use reasonix_bootstrap::attach::{attach, AttachOutcome, AttachSpec, OtherBuild};
use reasonix_bootstrap::{
    connect, install_and_attach, BootstrapError, ContainerOnHost, Destination, Engine,
    ExecConnection, Prompter, Remote, ShippedBinaries, SshOptions, Stage,
};
use reasonix_forward::proto::Hello;
use reasonix_forward::sync::LockExt;

use crate::connect::{
    decide_busy, fallback_notice, BusyDecision, ConnectError, Connector, Transport, UpgradePolicy,
    BUSY_POLL,
};

/// How a connector reaches its host.
enum Reach {
    /// Over SSH; with `container`, inside that container on the SSH host
    /// (`--container CTR:/path`).
    Ssh {
        dest: Destination,
        opts: SshOptions,
        container: Option<HostContainer>,
    },
    /// By running a local command (`podman exec -i CTR`, `kubectl exec -i POD --`).
    Exec(crate::exec_target::ExecTarget),
}

/// A container on the SSH host: `reasonix ssh me@devbox --container CTR:/path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostContainer {
    /// The engine on the host.
    pub engine: Engine,
    /// The container's name or id.
    pub name: String,
    /// The workspace inside the container.
    pub workspace: String,
}

/// Options that shape every connection of one `reasonix ssh` / `run --ssh` process (and of
/// the exec transport: `reasonix docker|podman|kube|exec`, `--docker` …).
pub struct SshConnector {
    reach: Reach,
    prompter: Arc<dyn Prompter>,
    binaries: ShippedBinaries,
    connected_once: AtomicBool,
    /// Extra daemon arguments (tunables) passed to `attach`.
    daemon_args: Vec<String>,
    /// What to do about a busy daemon of another build.
    upgrade: UpgradePolicy,
    /// The user chose to attach read-only to this other build: keep doing so on reconnects
    /// instead of asking again.
    read_only_build: Mutex<Option<String>>,
    /// Create the workspace folder on the host when it does not exist (`--mkdir`, or the
    /// user's yes to the TUI's prompt).
    mkdir: AtomicBool,
}

impl SshConnector {
    /// This destination's host as the laptop's install hints know it (see
    /// [`reasonix_bootstrap::HostBinaryCache::attached_build`]).
    fn host_key(&self) -> String {
        match &self.reach {
            Reach::Ssh {
                dest: d, container, ..
            } => format!(
                "{}@{}:{}{}",
                d.user.as_deref().unwrap_or(""),
                d.host,
                d.port.map(|p| p.to_string()).unwrap_or_default(),
                container
                    .as_ref()
                    .map(|c| format!("/{}", c.name))
                    .unwrap_or_default()
            ),
            Reach::Exec(t) => format!("exec:{}", t.argv.join(" ")),
        }
    }

    /// A connector that reaches the host by running a local command (the exec transport).
    pub fn exec(target: crate::exec_target::ExecTarget, prompter: Arc<dyn Prompter>) -> Self {
        let mut c = Self::new(
            Destination {
                user: None,
                host: String::new(),
                port: None,
                path: None,
            },
            SshOptions::default(),
            prompter,
        );
        c.reach = Reach::Exec(target);
        c
    }

    /// A connector for `dest` with OpenSSH-style options.
    pub fn new(dest: Destination, opts: SshOptions, prompter: Arc<dyn Prompter>) -> Self {
        let mut daemon_args = Vec::new();
        for (var, flag) in [
            ("REASONIX_HEARTBEAT_MS", "--heartbeat-ms"),
            ("REASONIX_DEAD_AFTER_MS", "--dead-after-ms"),
            ("REASONIX_IDLE_TIMEOUT_SECS", "--idle-timeout"),
            ("REASONIX_LINK_GRACE_SECS", "--link-grace"),
        ] {
            if let Ok(v) = std::env::var(var) {
                if v.chars().all(|c| c.is_ascii_digit()) && !v.is_empty() {
                    daemon_args.push(format!("{flag}={v}"));
                }
            }
        }
        Self {
            reach: Reach::Ssh {
                dest,
                opts,
                container: None,
            },
            prompter,
            binaries: shipped_binaries(),
            connected_once: AtomicBool::new(false),
            daemon_args,
            upgrade: UpgradePolicy::Ask,
            read_only_build: Mutex::new(None),
            mkdir: AtomicBool::new(false),
        }
    }

    /// Work inside a container on the SSH host (`--container CTR:/path`): every script and
    /// the link run through the host's container engine.
    pub fn with_container(mut self, c: Option<HostContainer>) -> Self {
        if let Reach::Ssh { container, .. } = &mut self.reach {
            *container = c;
        }
        self
    }

    /// Create the workspace folder on the host when it does not exist (`--mkdir`).
    pub fn with_mkdir(mut self, mkdir: bool) -> Self {
        self.mkdir = AtomicBool::new(mkdir);
        self
    }

    /// Set what happens when the workspace daemon is of another build and runs a turn
    /// (default: ask through the prompter).
    pub fn with_upgrade(mut self, policy: UpgradePolicy) -> Self {
        self.upgrade = policy;
        self
    }

    /// Workspace path on the host as given (relative paths are relative to the home).
    pub fn workspace_arg(&self) -> String {
        match &self.reach {
            Reach::Ssh {
                container: Some(c), ..
            } => c.workspace.clone(),
            Reach::Ssh { dest, .. } => dest.path.clone().unwrap_or_else(|| ".".into()),
            Reach::Exec(t) => t.workspace.clone(),
        }
    }

    /// Open the transport: dial SSH, or set up the exec command.
    async fn reach(&self) -> Result<Box<dyn Remote>, ConnectError> {
        match &self.reach {
            Reach::Ssh {
                dest,
                opts,
                container,
            } => {
                let mut opts = opts.clone();
                if self.connected_once.load(Ordering::SeqCst) {
                    // Reconnect attempts: a blackholed network must fail fast so the loop
                    // can try again as soon as it is back.
                    let _ = opts.push_option("ConnectTimeout=3");
                }
                let conn = connect(dest, &opts, Arc::clone(&self.prompter))
                    .await
                    .map_err(|e| self.classify(e))?;
                Ok(match container {
                    Some(c) => Box::new(ContainerOnHost::new(conn, c.engine, &c.name)),
                    None => Box::new(conn),
                })
            }
            Reach::Exec(t) => Ok(Box::new(ExecConnection::new(
                t.argv.clone(),
                t.label(),
                Arc::clone(&self.prompter),
            ))),
        }
    }

    fn classify(&self, e: BootstrapError) -> ConnectError {
        let msg = e.to_string();
        // The workspace is unusable: no retry changes that, even mid-session (it was removed
        // or its permissions changed while we were away).
        if let BootstrapError::Workspace { problem, .. } = e {
            return if problem == reasonix_forward::attach::WorkspaceProblem::Missing {
                ConnectError::WorkspaceMissing(msg)
            } else {
                ConnectError::Fatal(msg)
            };
        }
        let stage = e.stage();
        let transient_stage = matches!(
            stage,
            Stage::Connect | Stage::Kex | Stage::Launch | Stage::Attach
        );
        if self.connected_once.load(Ordering::SeqCst) && transient_stage {
            ConnectError::Transient(msg)
        } else {
            ConnectError::Fatal(msg)
        }
    }
}

/// Where the static host binaries are looked for: next to `reasonix`, in the dev tree, and at
/// `$REASONIX_REMOTE_BIN_<TRIPLE>` / `$REASONIX_REMOTE_DIR` (see `docs/REMOTE.md`). Installed
/// builds are kept in `<reasonix home>/cache/host-binaries` for delta upgrades.
pub fn shipped_binaries() -> ShippedBinaries {
    let mut shipped = ShippedBinaries::new();
    if let Ok(home) = crate::config::reasonix_home() {
        shipped = shipped.with_cache_dir(home.join("cache").join("host-binaries"));
    }
    for target in reasonix_bootstrap::Target::all() {
        if shipped.locate(target).is_ok() {
            continue;
        }
        // A development tree: `target/<profile>/reasonix` next to
        // `target/<triple>/<profile>/reasonix-remote` (built by the test command), or the
        // size-optimised `host` profile that release builds ship.
        let dev = std::env::current_exe().ok().and_then(|exe| {
            let profile_dir = exe.parent()?;
            let profile = profile_dir.file_name()?.to_os_string();
            let triple_dir = profile_dir.parent()?.join(target.triple());
            [triple_dir.join(profile), triple_dir.join("host")]
                .into_iter()
                .map(|d| d.join("reasonix-remote"))
                .find(|c| c.is_file())
        });
        if let Some(path) = dev {
            shipped = shipped.with_file(target, path);
        }
    }
    shipped
}

#[async_trait::async_trait]
impl Connector for SshConnector {
    async fn connect(&self, hello: &Hello) -> Result<Transport, ConnectError> {
        let remote = self.reach().await?;
        let conn: &dyn Remote = remote.as_ref();
        let frame = reasonix_forward::handshake::hello_frame(hello)
            .map_err(|e| ConnectError::Fatal(e.to_string()))?;
        let sticky = self.read_only_build.lock_or_recover().clone();
        let mut spec = AttachSpec {
            build_id: reasonix_forward::build_id().to_string(),
            workspace: self.workspace_arg(),
            daemon_args: self.daemon_args.clone(),
            hello: frame,
            mkdir: self.mkdir.load(Ordering::SeqCst),
            other_build: match (self.upgrade, &sticky, hello.resume.is_some()) {
                (_, Some(_), _) => OtherBuild::Attach,
                // A reconnect that finds another build: someone else replaced our daemon.
                // Never replace it back (two clients would take turns killing each other's
                // daemon); the handshake then reports the build mismatch.
                (_, None, true) => OtherBuild::Attach,
                (UpgradePolicy::Force, None, false) => OtherBuild::Replace,
                (UpgradePolicy::Ask | UpgradePolicy::Refuse, None, false) => OtherBuild::Ask,
            },
        };
        let mut read_only_build = sticky;
        let mut installed = false;
        // A host this laptop has not linked with this build before probably needs an
        // install: the SFTP session for its upload opens beside the first attach.
        let first = !self.connected_once.load(Ordering::SeqCst);
        let likely_missing = first
            && self.binaries.cache().is_none_or(|c| {
                c.attached_build(&self.host_key()).as_deref() != Some(spec.build_id.as_str())
            });
        let (mut next, mut sftp) = if likely_missing {
            match conn.as_ssh() {
                Some(ssh) => {
                    let (outcome, sftp) = tokio::join!(attach(conn, &spec), ssh.sftp());
                    (Some(outcome), Some(sftp))
                }
                None => (Some(attach(conn, &spec).await), None),
            }
        } else {
            (None, None)
        };
        // Probe, version check and attach are one exec (see `reasonix_bootstrap::attach`);
        // only a missing build or a busy daemon of another build costs more.
        let linked = loop {
            let outcome = match next.take() {
                Some(o) => o,
                None => attach(conn, &spec).await,
            };
            match outcome.map_err(|e| self.classify(e))? {
                AttachOutcome::Linked(s) => break s,
                AttachOutcome::Missing(probe) => {
                    if installed {
                        return Err(ConnectError::Fatal(format!(
                            "reasonix-remote {} was installed on {} but the attach script still does not find it under $HOME/.reasonix/remote/bin",
                            spec.build_id, conn.host()
                        )));
                    }
                    // The upload's finishing script runs at the head of the next attach.
                    let (_, outcome) = install_and_attach(
                        conn,
                        &spec.build_id,
                        &self.binaries,
                        probe,
                        &spec,
                        sftp.take(),
                    )
                    .await
                    .map_err(|e| ConnectError::Fatal(e.to_string()))?;
                    installed = true;
                    next = Some(Ok(outcome));
                }
                AttachOutcome::Busy { build_id, sessions } => {
                    match decide_busy(
                        self.upgrade,
                        Some(self.prompter.as_ref()),
                        &self.describe(),
                        &build_id,
                        &sessions,
                    )
                    .await?
                    {
                        BusyDecision::Retry(o) => spec.other_build = o,
                        BusyDecision::ReadOnly => {
                            spec.other_build = OtherBuild::Attach;
                            read_only_build = Some(build_id);
                        }
                        BusyDecision::Wait => tokio::time::sleep(BUSY_POLL).await,
                    }
                }
            }
        };
        drop(sftp);
        if first && read_only_build.is_none() {
            if let Some(cache) = self.binaries.cache() {
                cache.record_attached(&self.host_key(), &spec.build_id);
            }
        }
        self.connected_once.store(true, Ordering::SeqCst);
        *self.read_only_build.lock_or_recover() = read_only_build.clone();
        let diagnostics = Arc::new(Mutex::new(String::new()));
        let diag = Arc::clone(&diagnostics);
        let stderr = linked.stderr.clone();
        let mut exit = linked.exit.clone();
        // Keep the SSH connection alive as long as the exec channel is; surface its stderr.
        tokio::spawn(async move {
            let _conn = remote;
            while exit.changed().await.is_ok() {
                if exit.borrow().is_some() {
                    break;
                }
            }
            *diag.lock_or_recover() = stderr.text();
        });
        let mut transport = Transport {
            reader: linked.reader,
            writer: Box::pin(linked.writer),
            diagnostics,
            hello_sent: true,
            accept_build: None,
            read_only: false,
            notice: None,
        };
        if let Some((build, notice)) = linked.report.as_ref().and_then(fallback_notice) {
            transport.accept_build = Some(build);
            transport.notice = Some(notice);
        }
        if let Some(b) = read_only_build {
            transport.accept_build = Some(b);
            transport.read_only = true;
        }
        Ok(transport)
    }

    fn describe(&self) -> String {
        match &self.reach {
            Reach::Ssh {
                dest, container, ..
            } => format!(
                "{}{}{}:{}",
                dest.user
                    .as_ref()
                    .map(|u| format!("{u}@"))
                    .unwrap_or_default(),
                dest.host,
                container
                    .as_ref()
                    .map(|c| format!("/{}", c.name))
                    .unwrap_or_default(),
                self.workspace_arg()
            ),
            Reach::Exec(t) => format!("{}:{}", t.label(), t.workspace),
        }
    }

    fn create_workspace(&self) -> bool {
        self.mkdir.store(true, Ordering::SeqCst);
        true
    }

    fn forward_agent(&self) -> Option<std::path::PathBuf> {
        let Reach::Ssh { dest, opts, .. } = &self.reach else {
            return None;
        };
        // A config that does not resolve fails the connection itself, with the reason.
        let r = opts.resolve(dest).ok()?;
        if !r.forward_agent {
            return None;
        }
        crate::platform::agent::laptop_agent(
            r.forward_agent_socket,
            std::env::var_os("SSH_AUTH_SOCK"),
            crate::platform::Os::THIS,
        )
    }
}
