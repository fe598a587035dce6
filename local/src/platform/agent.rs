//! The laptop's ssh-agent, for forwarding it to the host (#36 §2): which one
//! ([`laptop_agent`]) and a byte stream to it ([`connect`]): a Unix socket on Linux and
//! macOS, the named pipe of OpenSSH for Windows' agent (`\\.\pipe\openssh-ssh-agent`, or
//! another pipe `ForwardAgent`/`SSH_AUTH_SOCK` names) on Windows.

use std::ffi::OsString;
use std::path::PathBuf;

use tokio::io::{AsyncRead, AsyncWrite};

use super::Os;

/// A connection to the agent, whatever carries it.
pub trait AgentStream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> AgentStream for T {}

/// The agent to forward: the one `ForwardAgent` named, else `$SSH_AUTH_SOCK`, else on
/// Windows the OpenSSH agent's pipe (what OpenSSH's own `ssh -A` forwards). `None` when
/// there is none (forwarding is then off, as with OpenSSH).
pub fn laptop_agent(
    named: Option<PathBuf>,
    ssh_auth_sock: Option<OsString>,
    os: Os,
) -> Option<PathBuf> {
    named.or_else(|| reasonix_bootstrap::platform::default_agent(os, ssh_auth_sock))
}

/// Connect to the agent at `addr`.
pub async fn connect(addr: &std::path::Path) -> std::io::Result<Box<dyn AgentStream>> {
    imp::connect(addr).await
}

#[cfg(unix)]
mod imp {
    use super::AgentStream;

    pub(super) async fn connect(addr: &std::path::Path) -> std::io::Result<Box<dyn AgentStream>> {
        Ok(Box::new(tokio::net::UnixStream::connect(addr).await?))
    }
}

#[cfg(windows)]
mod imp {
    use super::AgentStream;

    pub(super) async fn connect(addr: &std::path::Path) -> std::io::Result<Box<dyn AgentStream>> {
        let pipe = tokio::net::windows::named_pipe::ClientOptions::new().open(addr)?;
        Ok(Box::new(pipe))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_forwarded_on_each_system() {
        let sock = || Some(OsString::from("/tmp/ssh-x/agent.1"));
        assert_eq!(
            laptop_agent(None, sock(), Os::Unix),
            Some(PathBuf::from("/tmp/ssh-x/agent.1"))
        );
        assert_eq!(laptop_agent(None, None, Os::Unix), None);
        assert_eq!(
            laptop_agent(None, None, Os::Windows),
            Some(PathBuf::from(r"\\.\pipe\openssh-ssh-agent"))
        );
        assert_eq!(
            laptop_agent(Some(PathBuf::from("/named")), sock(), Os::Unix),
            Some(PathBuf::from("/named"))
        );
    }
}
