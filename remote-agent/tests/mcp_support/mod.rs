//! Shared helpers of the MCP tests: locating the real servers, a scripted fake for fault
//! injection, free ports.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use reasonix_forward::policy::McpServerSpec;

/// The real servers are installed by `.ci/run`:
/// `pip install mcp-server-time` and `npm install -g @modelcontextprotocol/server-everything`.
pub fn on_path(bin: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(bin))
        .find(|p| p.is_file())
}

/// `mcp-server-time` (PyPI), or None with a SKIP line on stderr.
pub fn time_server(name: &str) -> Option<McpServerSpec> {
    if on_path("mcp-server-time").is_some() {
        return Some(McpServerSpec::stdio(name, "mcp-server-time", &[]));
    }
    let probe = std::process::Command::new("python3")
        .args(["-c", "import mcp_server_time"])
        .output();
    if matches!(probe, Ok(o) if o.status.success()) {
        return Some(McpServerSpec::stdio(
            name,
            "python3",
            &["-m", "mcp_server_time"],
        ));
    }
    eprintln!("SKIP: mcp-server-time is not installed (pip install mcp-server-time)");
    None
}

/// `mcp-server-everything stdio` (npm), or None with a SKIP line on stderr.
pub fn everything_server(name: &str) -> Option<McpServerSpec> {
    if on_path("mcp-server-everything").is_some() {
        return Some(McpServerSpec::stdio(
            name,
            "mcp-server-everything",
            &["stdio"],
        ));
    }
    eprintln!(
        "SKIP: mcp-server-everything is not installed (npm install -g @modelcontextprotocol/server-everything)"
    );
    None
}

/// A POSIX-sh MCP server for fault injection (NOT a real server): answers `initialize` and a
/// paginated `tools/list`; `tools/call` prints junk lines before answering, exits with status 3
/// when the arguments contain `crash`, and sleeps 3 s when they contain `slow`.
pub const FAKE_SERVER: &str = r#"
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*)
      echo 'this is not json {'
      printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-03-26","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}}\n' "$id" ;;
    *'"method":"tools/list"'*)
      case "$line" in
        *'"cursor":"p2"'*)
          printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"other.tool","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]}}\n' "$id" ;;
        *)
          printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"work","description":"does work","inputSchema":{"type":"object","properties":{"mode":{"type":"string"}}}}],"nextCursor":"p2"}}\n' "$id" ;;
      esac ;;
    *'"method":"tools/call"'*)
      case "$line" in
        *crash*) echo "fake server: simulated crash in the middle of a call" >&2; exit 3 ;;
        *slow*) sleep 3 ;;
      esac
      echo '[1, 2'
      echo '{"jsonrpc":"2.0","result":"no id"}'
      echo 'plain text noise'
      printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok %s"}]}}\n' "$id" "$$" ;;
  esac
done
"#;

/// A spec running [`FAKE_SERVER`] under `sh -c`.
pub fn fake_server(name: &str) -> McpServerSpec {
    McpServerSpec::stdio(name, "sh", &["-c", FAKE_SERVER])
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A tool context over a temp dir (MCP tools do not use it, the trait wants one).
pub fn ctx(dir: &Path) -> reasonix_remote::tools::ToolContext {
    use std::sync::Arc;
    reasonix_remote::tools::ToolContext::new(
        dir,
        Arc::new(reasonix_remote::sandbox::Sandbox::off(dir)),
    )
}

/// `local/tests/mcp_node`: MCP servers on the official TypeScript SDK (`npm ci --prefix
/// local/tests/mcp_node`, which `.ci/run` does). Panics naming the fix when it is missing:
/// these tests exist to run against the real SDK.
pub fn node_fixture_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../local/tests/mcp_node");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "the MCP TypeScript SDK is not installed: run `npm ci --prefix local/tests/mcp_node` (.ci/run does)"
    );
    dir
}

/// A running fixture server (`node server.mjs …`), killed on drop.
pub struct NodeServer {
    child: std::process::Child,
    /// Its `LISTENING` URL (the MCP endpoint or the SSE stream).
    pub url: String,
    /// Its authorization server (`AUTH` line), with `--oauth`.
    pub issuer: Option<String>,
    /// Where the server appends its announcements (`REFRESHED <client>` after a refresh).
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

impl NodeServer {
    /// Starts `server.mjs` with `args` (`--transport sse`, `--oauth`) and waits for its URL.
    pub fn start(args: &[&str]) -> Self {
        let dir = node_fixture_dir();
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("announce");
        // Reaped in `Drop` (or below when it never announces itself).
        #[allow(clippy::zombie_processes)]
        let mut child = std::process::Command::new("node")
            .arg(dir.join("server.mjs"))
            .args(args)
            .arg("--port-file")
            .arg(&log)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("node is needed for the MCP SDK fixture");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let find = |tag: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(tag).map(|u| u.trim().to_string()))
            };
            if let Some(url) = find("LISTENING ") {
                return Self {
                    child,
                    url,
                    issuer: find("AUTH "),
                    log,
                    _dir: tmp,
                };
            }
            if std::time::Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the node MCP fixture did not start: {text}");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// What the server announced so far.
    pub fn announcements(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for NodeServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
