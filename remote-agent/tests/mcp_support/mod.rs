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
