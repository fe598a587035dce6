//! Transports: how bootstrap reaches a host. Probe, install and attach speak the same
//! protocol (fenced `sh -s` scripts and one exec stream that becomes the link) over each:
//!
//! - [`ssh`] dials with russh; `ssh_exec` runs scripts and the link's exec channel on it
//!   (uploads go over SFTP);
//! - [`exec`] runs a local command such as `podman exec -i CTR` or `kubectl exec -i POD --`
//!   and speaks over its stdin/stdout (uploads go through the stream itself).

pub mod container;
pub mod exec;
pub(crate) mod ssh;
pub(crate) mod ssh_exec;

use std::sync::Arc;

use crate::error::BootstrapError;
use crate::prompter::{Prompter, Stage};
use crate::transport::ssh::SshConnection;
use crate::transport::ssh_exec::{ExecStream, ScriptOutput};

/// One way of running commands on a host: what probe, install, attach, status and stop
/// need. [`SshConnection`] and [`exec::ExecConnection`] implement it.
#[async_trait::async_trait]
pub trait Remote: Send + Sync {
    /// The place, for messages (`devbox`, `podman:web`).
    fn host(&self) -> &str;
    /// Who is told about progress and asked questions.
    fn prompter(&self) -> &Arc<dyn Prompter>;
    /// Run `script` with `sh -s` on the host and return its fenced output; errors are
    /// attributed to `stage`.
    async fn run_script_at(
        &self,
        stage: Stage,
        script: &str,
    ) -> Result<ScriptOutput, BootstrapError>;
    /// [`Remote::run_script_at`] at [`Stage::Probe`].
    async fn run_script(&self, script: &str) -> Result<ScriptOutput, BootstrapError> {
        self.run_script_at(Stage::Probe, script).await
    }
    /// Start `command` (a shell command line) with its stdio as a byte stream.
    async fn exec_stream(&self, command: &str) -> Result<ExecStream, BootstrapError>;
    /// The SSH connection, when this is one (SFTP uploads and pre-opened channels).
    fn as_ssh(&self) -> Option<&SshConnection> {
        None
    }
}

#[async_trait::async_trait]
impl Remote for SshConnection {
    fn host(&self) -> &str {
        SshConnection::host(self)
    }

    fn prompter(&self) -> &Arc<dyn Prompter> {
        SshConnection::prompter(self)
    }

    async fn run_script_at(
        &self,
        stage: Stage,
        script: &str,
    ) -> Result<ScriptOutput, BootstrapError> {
        SshConnection::run_script_at(self, stage, script).await
    }

    async fn exec_stream(&self, command: &str) -> Result<ExecStream, BootstrapError> {
        SshConnection::exec_stream(self, command).await
    }

    fn as_ssh(&self) -> Option<&SshConnection> {
        Some(self)
    }
}
