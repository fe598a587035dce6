//! Stdio transport: the server is a child process speaking one JSON-RPC message per line on
//! stdin/stdout; stderr is kept as a tail for error messages.

use std::collections::BTreeMap;
use std::path::PathBuf;

use reasonix_forward::child::spawn_line_child;
use tokio::process::Command;

use super::transport::{McpConnection, McpTransport};
use super::McpError;

/// Lines buffered between the pumps and the client.
const CHANNEL_DEPTH: usize = 256;

/// Spawns `command args…` with `env` added to the inherited environment.
#[derive(Debug, Clone)]
pub struct StdioTransport {
    command: String,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
}

impl StdioTransport {
    /// A transport for this program; variables must already be expanded.
    pub fn new(
        command: impl Into<String>,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    ) -> Self {
        Self {
            command: command.into(),
            args,
            env,
            cwd,
        }
    }
}

#[async_trait::async_trait]
impl McpTransport for StdioTransport {
    async fn open(&self) -> Result<McpConnection, McpError> {
        let mut cmd = Command::new(&self.command);
        cmd.args(&self.args).envs(&self.env);
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        let child = spawn_line_child(cmd, CHANNEL_DEPTH, &self.command).map_err(|source| {
            McpError::Spawn {
                command: self.command.clone(),
                source,
            }
        })?;
        Ok(McpConnection::new(child.to_child, child.from_child)
            .with_diagnostics(child.diagnostics)
            .with_keepalive(Box::new(child.guard)))
    }

    fn describe(&self) -> String {
        let mut s = format!("stdio: {}", self.command);
        for a in &self.args {
            s.push(' ');
            s.push_str(a);
        }
        s
    }
}
