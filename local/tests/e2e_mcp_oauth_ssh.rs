//! A host-side MCP server that needs sign-in, used from a host session over a real OpenSSH
//! sshd: the fixture on the official TypeScript SDK behind its OAuth authorization server
//! (`local/tests/mcp_node/server.mjs --oauth`), declared in the host workspace's
//! `reasonix.toml`. The laptop signs in (loopback redirect driven by the test); the host asks
//! the laptop for the token per connection; the token is on no host file and in no host
//! process environment.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::path::{Path, PathBuf};
use std::process::Command;

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use reasonix_testkit::sshd::{ClientKey, Sshd, SshdConfig, TestUser, UserOptions};
use serde_json::Value;

const KEY_ENV: &str = "RX_OA_SSH_KEY";

fn musl_host_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    [
        root.join("x86_64-unknown-linux-musl/debug/reasonix-remote"),
        root.join("debug/reasonix-remote-x86_64-unknown-linux-musl"),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .expect("run `cargo build -p reasonix-remote --target x86_64-unknown-linux-musl` first")
}

fn fixture() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_node");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "the MCP TypeScript SDK is not installed: run `npm ci --prefix local/tests/mcp_node` (.ci/run does)"
    );
    dir.join("server.mjs")
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            out.extend(files_containing(&p, needle));
        } else if meta.is_file() {
            if let Ok(bytes) = std::fs::read(&p) {
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    out.push(p);
                }
            }
        }
    }
    out
}

#[test]
fn a_host_session_calls_a_signed_in_server_and_the_token_stays_off_the_host() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let announce = tmp.path().join("announce");
    let mut server = Command::new("node")
        .arg(fixture())
        .args(["--transport", "http", "--oauth", "--port-file"])
        .arg(&announce)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut url = None;
    for _ in 0..400 {
        let text = std::fs::read_to_string(&announce).unwrap_or_default();
        url = text
            .lines()
            .find_map(|l| l.strip_prefix("LISTENING "))
            .map(str::to_string);
        if url.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let url = url.expect("the OAuth fixture starts");

    // The laptop signs in; the test plays the browser.
    let rx_home = tmp.path().join("rxhome");
    std::fs::create_dir_all(&rx_home).unwrap();
    let store = reasonix_local::gateway::oauth::TokenStore::in_home(&rx_home);
    let grant = rt
        .block_on(reasonix_local::gateway::oauth::login(
            &store,
            "fx",
            &url,
            |auth_url| {
                let auth_url = auth_url.to_string();
                tokio::spawn(async move {
                    let page = reqwest::get(&auth_url).await.unwrap();
                    assert_eq!(page.status().as_u16(), 200);
                });
            },
        ))
        .unwrap();

    let mock = rt.block_on(MockProvider::start(vec![
        MockReply::tool_calls(vec![MockToolCall::new("w1", "mcp__fx__whoami", "{}")], 2),
        MockReply::text(&["done"]),
    ]));
    let sshd = Sshd::start(SshdConfig::default()).expect("sshd");
    let user = TestUser::create(&UserOptions {
        shell: Some("/bin/bash".into()),
        ..UserOptions::default()
    })
    .expect("user");
    let ssh = tmp.path().join("home/.ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(ssh.join("known_hosts"), sshd.known_hosts_line()).unwrap();
    let key = ClientKey::generate(&ssh, "id_oa", None).unwrap();
    user.authorize(&key.public).unwrap();
    std::fs::write(
        rx_home.join("config.toml"),
        format!(
            "default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"{KEY_ENV}\"\n[permissions]\nmode = \"yolo\"\n",
            mock.base_url()
        ),
    )
    .unwrap();
    let ws = user.home.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(
        ws.join("reasonix.toml"),
        format!("[[mcp]]\nname = \"fx\"\nurl = \"{url}\"\n"),
    )
    .unwrap();
    let chown = Command::new("chown")
        .arg("-R")
        .arg(format!("{}:{}", user.uid, user.gid))
        .arg(&ws)
        .output()
        .unwrap();
    assert!(chown.status.success(), "{chown:?}");

    let out = Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .args(["run", "--ssh"])
        .arg(format!("{}@127.0.0.1:ws", user.name))
        .args(["--json", "who am i"])
        .args(["-p", &sshd.port().to_string(), "-F", "none"])
        .arg("-i")
        .arg(&key.private)
        .args(["-o", "IdentityAgent=none"])
        .current_dir(tmp.path())
        .env("HOME", tmp.path().join("home"))
        .env("REASONIX_HOME", &rx_home)
        .env(KEY_ENV, "sk-oa-ssh")
        .env("REASONIX_IDLE_TIMEOUT_SECS", "30")
        .env(
            "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
            musl_host_binary(),
        )
        .env_remove("SSH_AUTH_SOCK")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "{stdout}\n{stderr}");
    let result = requests[1]
        .messages()
        .into_iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "w1")
        .map(|m| m["content"].to_string())
        .unwrap();
    assert!(
        result.contains(&format!("client {}", grant.client_id)),
        "the server saw the laptop's token: {result}"
    );

    // The token is on no file of the host user (journal, logs, state) ...
    let token = grant.access_token.as_bytes();
    assert_eq!(files_containing(&user.home, token), Vec::<PathBuf>::new());
    // ... and in no environment of the host user's processes (the daemon still runs).
    let mut host_procs = 0;
    for p in std::fs::read_dir("/proc").unwrap().flatten() {
        let status = std::fs::read_to_string(p.path().join("status")).unwrap_or_default();
        let uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or("");
        if uid == user.uid.to_string() {
            host_procs += 1;
            let env = std::fs::read(p.path().join("environ")).unwrap_or_default();
            assert!(
                !env.windows(token.len()).any(|w| w == token),
                "the token is in the environment of host process {}",
                p.path().display()
            );
        }
    }
    assert!(
        host_procs > 0,
        "the host daemon is still running to be checked"
    );
    let events: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool_finished" && e["is_error"] == false),
        "{stdout}"
    );
    let _ = server.kill();
    let _ = server.wait();
}
