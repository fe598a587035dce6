//! The transport seam: anything that yields two channels of JSON-RPC lines is an MCP
//! connection. Stdio pumps a child's pipes into them, HTTP turns each outgoing line into a POST,
//! and the channel transport takes channels the link layer already pumps (a laptop server).

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use reasonix_forward::policy::{McpRunOn, McpServerSpec, McpTransportKind};
use reasonix_forward::sync::LockExt;
use tokio::sync::mpsc;

use super::config::expand_spec;
use super::http::HttpTransport;
use super::sse::SseTransport;
use super::stdio::StdioTransport;
use super::McpError;

/// What is known about a server besides its JSON-RPC stream (stderr tail, how it ended);
/// the same record the laptop keeps for its servers.
pub use reasonix_forward::child::ChildDiagnostics as Diagnostics;

/// The pieces of an [`McpConnection`]: lines out, lines in, diagnostics, keep-alive guard.
pub(crate) type ConnectionParts = (
    mpsc::Sender<String>,
    mpsc::Receiver<String>,
    Arc<Diagnostics>,
    Option<Box<dyn Send + Sync>>,
);

/// One open connection to a server: JSON-RPC messages as single lines (no trailing newline)
/// in both directions. Dropping it ends the connection (a stdio server's process group is
/// killed).
pub struct McpConnection {
    /// Lines to the server.
    pub to_server: mpsc::Sender<String>,
    /// Lines from the server; `None` once the server is gone.
    pub from_server: mpsc::Receiver<String>,
    /// Stderr tail and exit status, when the transport knows them.
    pub diagnostics: Arc<Diagnostics>,
    /// Keeps whatever backs the connection alive (a child process guard, pump tasks).
    keepalive: Option<Box<dyn Send + Sync>>,
}

impl McpConnection {
    /// A connection over the given channels with fresh, empty diagnostics.
    pub fn new(to_server: mpsc::Sender<String>, from_server: mpsc::Receiver<String>) -> Self {
        Self {
            to_server,
            from_server,
            diagnostics: Diagnostics::new(),
            keepalive: None,
        }
    }

    /// Uses `diagnostics` (e.g. one a tunnel fills with the laptop server's stderr).
    pub fn with_diagnostics(mut self, diagnostics: Arc<Diagnostics>) -> Self {
        self.diagnostics = diagnostics;
        self
    }

    /// Keeps `guard` alive as long as the connection (dropped with it).
    pub fn with_keepalive(mut self, guard: Box<dyn Send + Sync>) -> Self {
        self.keepalive = Some(guard);
        self
    }

    /// Splits into the channels, the diagnostics and the keep-alive guard.
    pub(crate) fn into_parts(self) -> ConnectionParts {
        (
            self.to_server,
            self.from_server,
            self.diagnostics,
            self.keepalive,
        )
    }
}

/// A way to reach one MCP server. `open` is called at start and again after the server died,
/// so it must produce a fresh connection each time.
#[async_trait::async_trait]
pub trait McpTransport: Send + Sync {
    /// Opens a new connection (spawns the process, prepares the HTTP session, asks the laptop).
    async fn open(&self) -> Result<McpConnection, McpError>;
    /// Short description for status lines: `stdio: npx -y server`, `http: http://…`,
    /// `channel: laptop`.
    fn describe(&self) -> String;
}

/// Two line channels to a server someone else runs (the link tunnel to a laptop server).
pub struct LineChannels {
    /// Lines to the server.
    pub to_server: mpsc::Sender<String>,
    /// Lines from the server; closing it means the server is gone.
    pub from_server: mpsc::Receiver<String>,
    /// Optional diagnostics the opener keeps filling (stderr relayed from the laptop).
    pub diagnostics: Option<Arc<Diagnostics>>,
}

/// Opens (or reopens after a crash) the channels of a tunnelled server. For the laptop this
/// opens an MCP channel on the link and pumps its line pieces to and from the two channels.
pub type ChannelOpener = Arc<
    dyn Fn() -> Pin<Box<dyn Future<Output = Result<LineChannels, String>> + Send>> + Send + Sync,
>;

/// A transport over line channels. Behaves exactly like stdio to the client.
pub struct ChannelTransport {
    label: String,
    source: ChannelSource,
}

enum ChannelSource {
    Opener(ChannelOpener),
    /// A single pre-opened pair; a second `open` fails (no way to restart).
    Once(Mutex<Option<LineChannels>>),
}

impl ChannelTransport {
    /// A transport that calls `opener` for every (re)connection. `label` shows in status
    /// (`laptop`).
    pub fn new(label: impl Into<String>, opener: ChannelOpener) -> Self {
        Self {
            label: label.into(),
            source: ChannelSource::Opener(opener),
        }
    }

    /// A transport over one already-open pair of channels; it cannot restart the server.
    pub fn once(label: impl Into<String>, channels: LineChannels) -> Self {
        Self {
            label: label.into(),
            source: ChannelSource::Once(Mutex::new(Some(channels))),
        }
    }
}

#[async_trait::async_trait]
impl McpTransport for ChannelTransport {
    async fn open(&self) -> Result<McpConnection, McpError> {
        let ch = match &self.source {
            ChannelSource::Opener(open) => open().await.map_err(McpError::Connect)?,
            ChannelSource::Once(slot) => slot.lock_or_recover().take().ok_or_else(|| {
                McpError::Connect("the channel was already used and cannot be reopened".into())
            })?,
        };
        let conn = McpConnection::new(ch.to_server, ch.from_server);
        Ok(match ch.diagnostics {
            Some(d) => conn.with_diagnostics(d),
            None => conn,
        })
    }

    fn describe(&self) -> String {
        format!("channel: {}", self.label)
    }
}

/// A transport that always fails with the reason the spec could not be turned into one
/// (an unset variable, neither `command` nor `url`); the server then shows as failed.
pub(crate) struct BrokenTransport {
    pub(crate) reason: String,
    pub(crate) label: String,
}

#[async_trait::async_trait]
impl McpTransport for BrokenTransport {
    async fn open(&self) -> Result<McpConnection, McpError> {
        Err(McpError::Config(self.reason.clone()))
    }

    fn describe(&self) -> String {
        self.label.clone()
    }
}

/// Builds the host-side transport of `spec`: stdio when it has `command` (run in `cwd`),
/// Streamable HTTP when it has `url`, HTTP+SSE when it also says `type = "sse"`. `${VAR}` / `${VAR:-default}` are expanded from the
/// process environment here. Specs with `run_on = "laptop"` have no host transport: the caller
/// makes a [`ChannelTransport`] for them.
pub fn transport_for_spec(
    spec: &McpServerSpec,
    cwd: &Path,
) -> Result<Arc<dyn McpTransport>, McpError> {
    transport_signed_in(spec, cwd, None)
}

/// [`transport_for_spec`]; an HTTP or SSE server asks `tokens` (the attached laptop) for its
/// sign-in token at every connection.
pub fn transport_signed_in(
    spec: &McpServerSpec,
    cwd: &Path,
    tokens: Option<Arc<super::LaptopTokens>>,
) -> Result<Arc<dyn McpTransport>, McpError> {
    if spec.runs_on() == McpRunOn::Laptop {
        return Err(McpError::Config(format!(
            "server `{}` runs on the laptop; it needs a channel transport from the link",
            spec.name
        )));
    }
    let spec = expand_spec(spec, &|k| std::env::var(k).ok())?;
    match (&spec.command, &spec.url) {
        (Some(command), None) => Ok(Arc::new(StdioTransport::new(
            command.clone(),
            spec.args.clone(),
            spec.env.clone(),
            Some(cwd.to_path_buf()),
        ))),
        (None, Some(url)) => match spec.transport {
            Some(McpTransportKind::Sse) => {
                let t = SseTransport::new(url, spec.headers.clone())?;
                Ok(Arc::new(match tokens {
                    Some(tk) => t.with_laptop_tokens(&spec.name, tk),
                    None => t,
                }))
            }
            Some(McpTransportKind::Stdio) => Err(McpError::Config(format!(
                "server `{}` has `type = \"stdio\"` but a `url`; give it a `command`, or `type = \"http\"` / `\"sse\"`",
                spec.name
            ))),
            Some(McpTransportKind::Http) | None => {
                let t = HttpTransport::new(url, spec.headers.clone())?;
                Ok(Arc::new(match tokens {
                    Some(tk) => t.with_laptop_tokens(&spec.name, tk),
                    None => t,
                }))
            }
        },
        (Some(_), Some(_)) => Err(McpError::Config(format!(
            "server `{}` sets both `command` and `url`; keep one",
            spec.name
        ))),
        (None, None) => Err(McpError::Config(format!(
            "server `{}` needs `command` (stdio) or `url` (HTTP)",
            spec.name
        ))),
    }
}
