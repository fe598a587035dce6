//! MCP servers on the official TypeScript SDK (`local/tests/mcp_node/server.mjs`) end to end:
//! real `reasonix run` → real `reasonix-remote` → the workspace's server. A headless run
//! declines a server's elicitation with a notice saying so, and the tool result is what the
//! server made of the decline.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;

use std::path::{Path, PathBuf};

use common::{reasonix, LocalRig};
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::Value;

fn fixture() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_node");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "the MCP TypeScript SDK is not installed: run `npm ci --prefix local/tests/mcp_node` (.ci/run does)"
    );
    dir.join("server.mjs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_headless_run_declines_an_elicitation_with_a_notice() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(vec![MockToolCall::new("c1", "mcp__fx__ask_name", "{}")], 3),
        MockReply::text(&["done"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_EL_KEY", "sk-el");
    let cfg = rig.home.join("config.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("\n[permissions]\nmode = \"yolo\"\n");
    std::fs::write(&cfg, text).unwrap();
    std::fs::write(
        rig.ws.join("reasonix.toml"),
        format!(
            "[[mcp]]\nname = \"fx\"\ncommand = \"node\"\nargs = [\"{}\", \"--transport\", \"stdio\"]\n",
            fixture().display()
        ),
    )
    .unwrap();
    let out = tokio::task::spawn_blocking(move || {
        let out = reasonix(&rig, &["run", "--json", "greet someone"]);
        drop(rig);
        out
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let events: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        events.iter().any(|e| e["type"] == "notice"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.contains("MCP server `fx` asked for input")
                    && t.contains("Which name should the fixture greet?")
                    && t.contains("headless run declines"))),
        "{stdout}\n{stderr}"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "{stdout}\n{stderr}");
    let result = requests[1]
        .messages()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "c1")
        .map(|m| m["content"].to_string())
        .unwrap_or_else(|| panic!("{:?}", requests[1].messages()));
    assert!(result.contains("elicitation decline"), "{result}");
}

/// The fixture in HTTP mode behind its OAuth authorization server; killed on drop.
struct OAuthServer {
    child: std::process::Child,
    url: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl OAuthServer {
    fn start(ttl: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("announce");
        let mut child = std::process::Command::new("node")
            .arg(fixture())
            .args([
                "--transport",
                "http",
                "--oauth",
                "--token-ttl",
                ttl,
                "--port-file",
            ])
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
                    log,
                    _dir: dir,
                };
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("the OAuth fixture did not start");
    }

    fn announcements(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The status of an MCP `initialize` POST with `token` (none: no Authorization header).
async fn initialize_status(url: &str, token: Option<&str>) -> u16 {
    let mut req = reqwest::Client::new()
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_login_signs_in_through_the_loopback_redirect_and_refreshes_an_expired_token() {
    use std::io::BufRead;
    // Tokens live 2 s: the first use after the sign-in finds it expiring and refreshes it.
    let server = OAuthServer::start("2");
    assert_eq!(initialize_status(&server.url, None).await, 401);
    let rig = LocalRig::new("http://127.0.0.1:9", "RX_OA_KEY", "sk-oa");
    let mut child = common::reasonix_command(
        &rig,
        &common::host_bin(),
        &["mcp", "login", "fx", "--url", &server.url, "--no-browser"],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // The test is the browser: it reads the printed address and follows it; the
    // authorization server redirects to the loopback listener of `reasonix mcp login`.
    let stderr = child.stderr.take().unwrap();
    let auth_url = tokio::task::spawn_blocking(move || {
        std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .find(|l| l.starts_with("http://"))
    })
    .await
    .unwrap()
    .expect("the sign-in address is printed");
    assert!(
        auth_url.contains("code_challenge_method=S256"),
        "{auth_url}"
    );
    assert!(
        auth_url.contains("redirect_uri=http%3A%2F%2F127.0.0.1%3A"),
        "{auth_url}"
    );
    let page = reqwest::get(&auth_url).await.unwrap();
    assert_eq!(page.status().as_u16(), 200);
    assert!(page.url().as_str().starts_with("http://127.0.0.1:"));
    assert!(page.text().await.unwrap().contains("Signed in"));
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("signed in to `fx`"), "{stdout}");

    // The token file is the laptop's, owner-only, and holds a working token.
    let file = rig.home.join("mcp-oauth.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let store = reasonix_local::gateway::oauth::TokenStore::in_home(&rig.home);
    let first = store.get(&server.url).unwrap().unwrap();
    assert_eq!(first.name, "fx");
    assert_eq!(
        initialize_status(&server.url, Some(&first.access_token)).await,
        200
    );

    // Expired: the next use refreshes it through the refresh token.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_eq!(
        initialize_status(&server.url, Some(&first.access_token)).await,
        401
    );
    let fresh = reasonix_local::gateway::oauth::access_token(&store, &server.url)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(fresh, first.access_token);
    assert!(server
        .announcements()
        .contains(&format!("REFRESHED {}", first.client_id)));
    assert_eq!(initialize_status(&server.url, Some(&fresh)).await, 200);

    // Logout forgets it.
    let out = reasonix(&rig, &["mcp", "logout", "fx"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("signed out of `fx`"));
    assert!(store.get(&server.url).unwrap().is_none());
}
