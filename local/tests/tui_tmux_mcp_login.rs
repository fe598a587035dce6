//! `/mcp login NAME` and `/mcp logout NAME` in the real TUI under tmux (#35 §3): a host-side
//! HTTP MCP server on the official TypeScript SDK behind its own OAuth authorization server
//! (`local/tests/mcp_node/server.mjs --oauth`) fails at session open for want of a sign-in;
//! `/mcp login fx` opens "the browser" (`$BROWSER`, a script that follows the address with
//! curl, so the authorization server redirects to the TUI's loopback listener), the token is
//! stored on the laptop, the host reconnects the server in the same session, its tools join
//! the session, and the model's call reaches the server with the laptop's token.
//! `/mcp logout fx` removes the token and the reconnect fails asking for a sign-in again.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod term_common;

use std::path::{Path, PathBuf};

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use term_common::{stop_daemons, write_mock_config, Tmux};

fn fixture() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_node");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "the MCP TypeScript SDK is not installed: run `npm ci --prefix local/tests/mcp_node` (.ci/run does)"
    );
    dir.join("server.mjs")
}

/// The fixture in HTTP mode behind its OAuth authorization server; killed on drop.
struct OAuthServer {
    child: std::process::Child,
    url: String,
}

impl OAuthServer {
    fn start(dir: &Path) -> Self {
        let log = dir.join("announce");
        let mut child = std::process::Command::new("node")
            .arg(fixture())
            .args(["--transport", "http", "--oauth", "--port-file"])
            .arg(&log)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        for _ in 0..400 {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(url) = text.lines().find_map(|l| l.strip_prefix("LISTENING ")) {
                return Self {
                    child,
                    url: url.to_string(),
                };
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("the OAuth fixture did not start");
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tui_mcp_login_signs_in_and_the_session_uses_the_server_without_restarting() {
    let dir = tempfile::tempdir().unwrap();
    let server = OAuthServer::start(dir.path());
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(vec![MockToolCall::new("w1", "mcp__fx__whoami", "{}")], 2),
        MockReply::text(&["Called it signed in."]),
    ])
    .await;
    let home = dir.path().join("home");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(
        ws.join("reasonix.toml"),
        format!("[[mcp]]\nname = \"fx\"\nurl = \"{}\"\n", server.url),
    )
    .unwrap();
    write_mock_config(
        &home,
        &mock.base_url(),
        "RX_TUI_LOGIN_KEY",
        "[permissions]\nmode = \"yolo\"\n",
    );
    // The "browser": follows the authorization address (the fixture's authorization server
    // approves at once and redirects to the loopback callback) and notes that it ran.
    let opened = dir.path().join("browser-opened");
    let browser = dir.path().join("browser.sh");
    std::fs::write(
        &browser,
        format!(
            "#!/bin/sh\necho \"$1\" >> {}\nexec curl -sS -L -o /dev/null \"$1\"\n",
            opened.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &browser,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let cmd = format!(
        "cd {} && env -u XDG_RUNTIME_DIR BROWSER={} REASONIX_HOME={} {}",
        ws.display(),
        browser.display(),
        home.display(),
        PathBuf::from(env!("CARGO_BIN_EXE_reasonix")).display()
    );
    let t = Tmux::tui(&cmd);
    let store = reasonix_local::gateway::oauth::TokenStore::in_home(&home);
    tokio::task::block_in_place(|| {
        t.wait_for("connected");
        // Not signed in: the server failed at session open and says how to sign in.
        t.line("/mcp");
        let s = t.wait_screen(
            std::time::Duration::from_secs(60),
            "the /mcp panel listing fx as failed",
            |s| s.contains("Esc close") && s.contains("fx  host · failed"),
        );
        assert!(s.contains("reasonix mcp login fx"), "{s}");
        t.send_keys(&["Escape"]);
        // A key typed right after Esc would arrive as Alt+key: wait for the overlay to go.
        t.wait_screen(
            std::time::Duration::from_secs(10),
            "the overlay closes",
            |s| !s.contains("Esc close"),
        );

        t.line("/mcp login fx");
        let s = t.wait_for("MCP server `fx` reconnected: ready");
        assert!(s.contains("signed in to `fx`"), "{s}");
        assert!(s.contains("tool(s) join this session"), "{s}");
    });
    let opened_urls = std::fs::read_to_string(&opened).unwrap();
    assert!(
        opened_urls.contains("code_challenge_method=S256"),
        "the browser was given the authorization address: {opened_urls}"
    );
    let grant = store
        .get(&server.url)
        .unwrap()
        .expect("the token is stored on the laptop");

    tokio::task::block_in_place(|| {
        t.line("who am i");
        t.wait_for("Called it signed in.");
    });
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    let tools = reqs[0].body["tools"].to_string();
    assert!(
        tools.contains("mcp__fx__whoami"),
        "the signed-in server's tools are in the same session's requests: {tools}"
    );
    let result = reqs[1]
        .messages()
        .into_iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "w1")
        .map(|m| m["content"].to_string())
        .expect("the tool result reached the model");
    assert!(
        result.contains(&format!("client {}", grant.client_id)),
        "the server saw the laptop's token: {result}"
    );

    tokio::task::block_in_place(|| {
        t.line("/mcp logout fx");
        let s = t.wait_for("MCP server `fx` reconnected: failed");
        assert!(s.contains("signed out of `fx`"), "{s}");
    });
    assert!(store.get(&server.url).unwrap().is_none());
    t.send_keys(&["C-c"]);
    t.send_keys(&["C-c"]);
    stop_daemons(&home);
}
