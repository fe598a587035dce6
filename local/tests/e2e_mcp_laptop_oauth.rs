//! Sign-in for a laptop-side MCP server (#35 §3): an HTTP server declared in the user's
//! config (`[[mcp]]` with a `url`, so it runs on the laptop side) on the official TypeScript
//! SDK behind its own OAuth authorization server (`tests/mcp_node/server.mjs --oauth`).
//! Before a sign-in it is listed failed with the command to run; `reasonix mcp login NAME`
//! (the URL from the user's config, the browser a `$BROWSER` script that follows the address
//! with curl) stores the token in the laptop's token file; the server is then ready and a
//! session's call reaches it with that token, which is in no file but the token file (not
//! the journal, not the daemon's logs).

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;

use std::path::{Path, PathBuf};

use common::LocalRig;
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};

fn fixture() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_node");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "the MCP TypeScript SDK is not installed: run `npm ci --prefix local/tests/mcp_node` (.ci/run does)"
    );
    dir.join("server.mjs")
}

struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_oauth_server(dir: &Path) -> (Server, String) {
    let log = dir.join("announce");
    let child = std::process::Command::new("node")
        .arg(fixture())
        .args(["--transport", "http", "--oauth", "--port-file"])
        .arg(&log)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let server = Server(child);
    for _ in 0..400 {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(url) = text.lines().find_map(|l| l.strip_prefix("LISTENING ")) {
            return (server, url.to_string());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the OAuth fixture did not start");
}

fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            out.extend(files_containing(&p, needle));
        } else if meta.is_file()
            && std::fs::read(&p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle))
        {
            out.push(p);
        }
    }
    out
}

fn text(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_laptop_http_server_signs_in_on_the_laptop_and_a_session_uses_it() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (_server, url) = start_oauth_server(tmp.path());
    let mock = rt.block_on(MockProvider::start(vec![
        MockReply::tool_calls(vec![MockToolCall::new("w1", "mcp__lx__whoami", "{}")], 2),
        MockReply::text(&["done"]),
    ]));
    let rig = LocalRig::new(&mock.base_url(), "RX_LAP_OA_KEY", "sk-lap-oa");
    let config = rig.home.join("config.toml");
    let mut c = std::fs::read_to_string(&config).unwrap();
    c.push_str(&format!(
        "[permissions]\nmode = \"yolo\"\n[[mcp]]\nname = \"lx\"\nurl = \"{url}\"\n"
    ));
    std::fs::write(&config, c).unwrap();

    // Not signed in: listed as a laptop server that failed, naming the sign-in.
    let before = common::reasonix(&rig, &["mcp", "list"]);
    let listed = String::from_utf8_lossy(&before.stdout).to_string();
    assert!(
        listed.contains("lx") && listed.contains("laptop") && listed.contains("failed"),
        "{}",
        text(&before)
    );
    assert!(listed.contains("reasonix mcp login lx"), "{listed}");

    // `reasonix mcp login lx`: the URL from the user's config, the browser from $BROWSER.
    let opened = tmp.path().join("opened");
    let browser = tmp.path().join("browser.sh");
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
    let login = common::reasonix_command(&rig, &common::host_bin(), &["mcp", "login", "lx"])
        .env("BROWSER", &browser)
        .output()
        .unwrap();
    assert!(login.status.success(), "{}", text(&login));
    assert!(
        std::fs::read_to_string(&opened)
            .unwrap()
            .contains("code_challenge_method=S256"),
        "the browser was opened with the authorization address"
    );
    let store = reasonix_local::gateway::oauth::TokenStore::in_home(&rig.home);
    let grant = store
        .get(&url)
        .unwrap()
        .expect("the laptop stored the grant");

    let after = common::reasonix(&rig, &["mcp", "list"]);
    let listed = String::from_utf8_lossy(&after.stdout).to_string();
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("lx") && l.contains("ready") && l.contains("whoami")),
        "{}",
        text(&after)
    );

    let run = common::reasonix(&rig, &["run", "--json", "who am i"]);
    assert!(run.status.success(), "{}", text(&run));
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2, "{}", text(&run));
    let result = reqs[1]
        .messages()
        .into_iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "w1")
        .map(|m| m["content"].to_string())
        .unwrap();
    assert!(
        result.contains(&format!("client {}", grant.client_id)),
        "the server saw the laptop's token: {result}"
    );
    // The access token is in the laptop's token file and nowhere else under the home (the
    // daemon's journal, logs and state live there too in local mode).
    let holders = files_containing(&rig.home, grant.access_token.as_bytes());
    assert_eq!(holders, vec![store.path().to_path_buf()]);
}
