//! Reaching the ssh-agent: a Unix socket on Linux and macOS; on Windows the named pipe of
//! OpenSSH for Windows' agent (or another pipe `IdentityAgent`/`SSH_AUTH_SOCK` names), then
//! PuTTY's Pageant when no pipe answers.

use std::path::Path;

use russh::keys::agent::client::{AgentClient, AgentStream};

/// The pipe OpenSSH for Windows' `ssh-agent` service listens on.
pub const OPENSSH_WINDOWS_PIPE: &str = r"\\.\pipe\openssh-ssh-agent";

/// An agent connection, whatever carries it.
pub type Agent = AgentClient<Box<dyn AgentStream + Send + Unpin + 'static>>;

/// Connects to the agent at `addr` (a socket path, or a pipe name on Windows).
pub async fn connect(addr: &Path) -> Result<Agent, russh::keys::Error> {
    imp::connect(addr).await
}

#[cfg(unix)]
mod imp {
    use super::*;

    pub(super) async fn connect(addr: &Path) -> Result<Agent, russh::keys::Error> {
        Ok(AgentClient::connect_uds(addr).await?.dynamic())
    }
}

#[cfg(windows)]
mod imp {
    use super::*;

    pub(super) async fn connect(addr: &Path) -> Result<Agent, russh::keys::Error> {
        match AgentClient::connect_named_pipe(addr).await {
            Ok(a) => Ok(a.dynamic()),
            Err(pipe_err) => match AgentClient::connect_pageant().await {
                Ok(a) => Ok(a.dynamic()),
                Err(_) => Err(pipe_err),
            },
        }
    }
}
