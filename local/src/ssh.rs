//! SSH mode: a [`Connector`] that reaches a host over russh, installs the matching static
//! `reasonix-remote` on first contact, and opens one exec channel whose stdio is the link.
//!
//! Reconnects reuse the cached credentials (no second password or host-key question in the
//! same process) and a short TCP connect timeout, so a restored network is noticed quickly.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use reasonix_bootstrap::{
    connect, install, launch_command, BootstrapError, Destination, Prompter, RemoteInstall,
    ShippedBinaries, SshOptions, Stage,
};

use crate::connect::{ConnectError, Connector, Transport};

/// Options that shape every connection of one `reasonix ssh` / `run --ssh` process.
pub struct SshConnector {
    dest: Destination,
    opts: SshOptions,
    prompter: Arc<dyn Prompter>,
    binaries: ShippedBinaries,
    install: Mutex<Option<RemoteInstall>>,
    connected_once: AtomicBool,
    /// Extra daemon arguments (tunables) passed to `attach`.
    daemon_args: Vec<String>,
}

impl SshConnector {
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
            dest,
            opts,
            prompter,
            binaries: shipped_binaries(),
            install: Mutex::new(None),
            connected_once: AtomicBool::new(false),
            daemon_args,
        }
    }

    /// Workspace path on the host as given (relative paths are relative to the home).
    pub fn workspace_arg(&self) -> String {
        self.dest.path.clone().unwrap_or_else(|| ".".into())
    }

    fn classify(&self, e: BootstrapError) -> ConnectError {
        let msg = e.to_string();
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
/// `$REASONIX_REMOTE_BIN_<TRIPLE>` / `$REASONIX_REMOTE_DIR` (see `docs/REMOTE.md`).
pub fn shipped_binaries() -> ShippedBinaries {
    let shipped = ShippedBinaries::new();
    let target = reasonix_bootstrap::Target::X86_64Linux;
    if shipped.locate(target).is_ok() {
        return shipped;
    }
    // A development tree: `target/<profile>/reasonix` next to
    // `target/x86_64-unknown-linux-musl/<profile>/reasonix-remote` (built by the test command).
    let dev = std::env::current_exe().ok().and_then(|exe| {
        let profile_dir = exe.parent()?;
        let profile = profile_dir.file_name()?.to_os_string();
        let candidate = profile_dir
            .parent()?
            .join(target.triple())
            .join(profile)
            .join("reasonix-remote");
        candidate.is_file().then_some(candidate)
    });
    match dev {
        Some(path) => shipped.with_file(target, path),
        None => shipped,
    }
}

#[async_trait::async_trait]
impl Connector for SshConnector {
    async fn connect(&self) -> Result<Transport, ConnectError> {
        let mut opts = self.opts.clone();
        if self.connected_once.load(Ordering::SeqCst) {
            // Reconnect attempts: a blackholed network must fail fast so the loop can try
            // again as soon as it is back.
            let _ = opts.push_option("ConnectTimeout=3");
        }
        let conn = connect(&self.dest, &opts, Arc::clone(&self.prompter))
            .await
            .map_err(|e| self.classify(e))?;
        let existing = self
            .install
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let inst = match existing {
            Some(i) => i,
            None => {
                let i = install(&conn, reasonix_forward::build_id(), &self.binaries)
                    .await
                    .map_err(|e| ConnectError::Fatal(e.to_string()))?;
                *self.install.lock().unwrap_or_else(|p| p.into_inner()) = Some(i.clone());
                i
            }
        };
        let ws = self.workspace_arg();
        let mut args: Vec<&str> = vec!["attach", "--workspace", &ws];
        args.extend(self.daemon_args.iter().map(String::as_str));
        let cmd = launch_command(&inst, &args);
        let stream = conn.exec_stream(&cmd).await.map_err(|e| self.classify(e))?;
        self.connected_once.store(true, Ordering::SeqCst);
        let diagnostics = Arc::new(Mutex::new(String::new()));
        let diag = Arc::clone(&diagnostics);
        let stderr = stream.stderr.clone();
        let mut exit = stream.exit.clone();
        // Keep the SSH connection alive as long as the exec channel is; surface its stderr.
        tokio::spawn(async move {
            let _conn = conn;
            while exit.changed().await.is_ok() {
                if exit.borrow().is_some() {
                    break;
                }
            }
            *diag.lock().unwrap_or_else(|p| p.into_inner()) = stderr.text();
        });
        Ok(Transport {
            reader: Box::pin(stream.reader),
            writer: Box::pin(stream.writer),
            diagnostics,
        })
    }

    fn describe(&self) -> String {
        format!(
            "{}{}:{}",
            self.dest
                .user
                .as_ref()
                .map(|u| format!("{u}@"))
                .unwrap_or_default(),
            self.dest.host,
            self.workspace_arg()
        )
    }
}
