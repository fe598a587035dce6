//! The MCP client of the host: servers declared by the workspace (`reasonix.toml` `[[mcp]]`,
//! `.mcp.json`) or by the laptop, reached over stdio, Streamable HTTP or a line channel (the
//! tunnel to a server running on the laptop), with their tools exposed to the agent as
//! `mcp__<server>__<tool>`.
//!
//! Layers, bottom up:
//! - [`McpTransport`] opens a [`McpConnection`]: two channels of JSON-RPC lines plus the
//!   server's [`Diagnostics`] (stderr tail, exit status). [`StdioTransport`] spawns a process,
//!   [`HttpTransport`] speaks Streamable HTTP and [`SseTransport`] the older HTTP+SSE transport
//!   (plain `http://` only: the host binary carries no TLS stack), [`ChannelTransport`] takes channels someone else pumps (the link tunnel).
//! - [`McpClient`] runs the JSON-RPC session over one connection: `initialize`,
//!   `notifications/initialized`, `tools/list`, `tools/call` with timeouts and progress.
//! - [`McpManager`] owns the configured servers, starts them, restarts a crashed one on its next
//!   use, reports [`McpServerStatus`] and hands out [`McpTool`]s for the
//!   [`ToolRegistry`](crate::tools::ToolRegistry).
//! - [`WorkspaceMcp`] re-reads the workspace's declarations at every session open and gives
//!   the session a manager of its own, sharing the servers whose declaration is unchanged.

mod auth;
mod client;
mod config;
mod elicit;
mod http;
mod manager;
mod pool;
pub mod prompt;
mod sse;
mod stdio;
mod tool;
mod transport;

use std::time::Duration;

pub use auth::LaptopTokens;
pub use client::{
    content_text, CallResult, McpClient, McpProgress, McpPromptArg, McpPromptInfo, McpResourceInfo,
    McpToolInfo, ProgressSink, ServerInfo,
};
pub use config::{
    expand_spec, expand_vars, load_workspace_servers, merge_servers, parse_mcp_json,
    parse_reasonix_toml, McpConfig,
};
pub use elicit::{parse_request, ElicitAnswer, ElicitFuture, ElicitRequest, Elicitor, NoElicitor};
pub use http::HttpTransport;
pub use manager::{McpManager, McpServerState, McpServerStatus, McpSettings};
pub use pool::{McpSnapshot, WorkspaceMcp};
pub use sse::SseTransport;
pub use stdio::StdioTransport;
pub use tool::{exposed_names, sanitize_name, with_progress, McpTool};
pub use transport::{
    transport_for_spec, ChannelOpener, ChannelTransport, Diagnostics, LineChannels, McpConnection,
    McpTransport,
};

/// The protocol revision this client asks for in `initialize`.
pub const PROTOCOL_VERSION: &str = "2025-03-26";

/// How long a server may take from spawn to a listed tool set (`initialize` + `tools/list`).
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one `tools/call` may take unless the server or tool overrides it.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// What can go wrong talking to an MCP server. Every variant says which stage failed so the
/// message shown to the model or in `/mcp` is actionable on its own.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// A configuration file or entry is invalid.
    #[error("MCP config: {0}")]
    Config(String),
    /// `${VAR}` names a variable that is not set and has no `:-default`.
    #[error("MCP config: environment variable `{var}` is not set (used in {field}); set it or write `${{{var}:-default}}`")]
    UnsetVar {
        /// The variable.
        var: String,
        /// Where it was used (`command`, `args[1]`, `env.TOKEN`, `url`, `headers.X`).
        field: String,
    },
    /// The server process could not be spawned.
    #[error("could not start `{command}`: {source}")]
    Spawn {
        /// The program.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// The connection could not be opened (HTTP URL, channel opener).
    #[error("could not connect: {0}")]
    Connect(String),
    /// No answer in time.
    #[error("{what} timed out after {} s", .after.as_secs())]
    Timeout {
        /// The request (`initialize`, `tools/call get_time`).
        what: String,
        /// The limit that was hit.
        after: Duration,
    },
    /// The server went away (process exited, channel closed); the text carries the exit status
    /// and the stderr tail when known.
    #[error("server connection closed: {0}")]
    Closed(String),
    /// The server answered with a JSON-RPC error.
    #[error("server error {code}: {message}")]
    Rpc {
        /// JSON-RPC error code.
        code: i64,
        /// The server's message.
        message: String,
    },
    /// The server answered something that is not valid MCP.
    #[error("protocol error: {0}")]
    Protocol(String),
}
