//! No silent loss over SSH: the real `reasonix run --json --full-output` against a real
//! OpenSSH sshd and the static `reasonix-remote`. One turn prints 12 MB of `"` with bash, reads
//! a 40 MB single-line file and gets a 5 MB result from a host MCP server; every result reaches
//! the laptop (the big ones fetched by reference, SHA-256 checked) and the next turn works.

use std::path::{Path, PathBuf};
use std::process::Command;

use reasonix_forward::content::sha256_hex;
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use reasonix_testkit::sshd::{ClientKey, Sshd, SshdConfig, TestUser, UserOptions};
use serde_json::{json, Value};

const KEY: &str = "sk-test-SSHBIG-77aa";
const QUOTES: usize = 12 * 1024 * 1024;
const MCP_BYTES: usize = 5 * 1024 * 1024;

fn musl_host_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let candidates = [
        root.join("x86_64-unknown-linux-musl/debug/reasonix-remote"),
        root.join("debug/reasonix-remote-x86_64-unknown-linux-musl"),
        root.join("x86_64-unknown-linux-musl/release/reasonix-remote"),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!("no static host binary ({candidates:?}); run `cargo build -p reasonix-remote --target x86_64-unknown-linux-musl`")
        })
}

const MCP_SERVER: &str = r#"import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    mid = msg.get("id")
    if mid is None:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": "2024-11-05", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "big", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "big", "description": "a big result",
                             "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": '"' * msg["params"]["arguments"]["n"]}]}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
    sys.stdout.flush()
"#;

fn run(dir: &Path, key: &ClientKey, sshd: &Sshd, args: &[&str]) -> (bool, Vec<Value>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .args(args)
        .args(["-p", &sshd.port().to_string(), "-F", "none"])
        .arg("-i")
        .arg(&key.private)
        .args(["-o", "IdentityAgent=none"])
        .current_dir(dir)
        .env("HOME", dir.join("home"))
        .env("REASONIX_HOME", dir.join("rxhome"))
        .env("RX_SSHBIG_KEY", KEY)
        .env(
            "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
            musl_host_binary(),
        )
        .env_remove("SSH_AUTH_SOCK")
        .output()
        .expect("run reasonix");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let events = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let log = format!(
        "stdout (first 4000 bytes): {}\nstderr: {}",
        &stdout[..stdout.len().min(4000)],
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), events, log)
}

fn finished<'a>(events: &'a [Value], name: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == "tool_finished" && e["name"] == name)
        .unwrap_or_else(|| panic!("no {name} result"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_results_over_ssh_reach_the_laptop_whole_and_the_next_turn_works() {
    let sshd = Sshd::start(SshdConfig {
        allow_tcp_forwarding: false,
        allow_stream_local_forwarding: false,
        ..SshdConfig::default()
    })
    .expect("sshd");
    let user = TestUser::create(&UserOptions::default()).expect("user");
    user.write_file("ws/one-line.txt", &"\"".repeat(40 * 1024 * 1024), 0o644)
        .expect("big file");
    user.write_file("ws/big_mcp.py", MCP_SERVER, 0o644)
        .expect("server");
    let script = user.home.join("ws/big_mcp.py");
    user.write_file(
        "ws/reasonix.toml",
        &format!(
            "[[mcp]]\nname = \"big\"\ncommand = \"python3\"\nargs = [\"{}\"]\n",
            script.display()
        ),
        0o644,
    )
    .expect("reasonix.toml");
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![
                MockToolCall::new(
                    "b1",
                    "bash",
                    &json!({"command": format!("head -c {QUOTES} /dev/zero | tr '\\0' '\"'")})
                        .to_string(),
                ),
                MockToolCall::new(
                    "r1",
                    "read_file",
                    &json!({"path": "one-line.txt"}).to_string(),
                ),
                MockToolCall::new(
                    "m1",
                    "mcp__big__big",
                    &json!({ "n": MCP_BYTES }).to_string(),
                ),
            ],
            64,
        ),
        MockReply::text(&["all three done"]),
        MockReply::text(&["next turn ok"]),
    ])
    .await;

    let dir = tempfile::tempdir().expect("tempdir");
    let ssh = dir.path().join("home/.ssh");
    std::fs::create_dir_all(&ssh).expect("ssh dir");
    std::fs::write(ssh.join("known_hosts"), sshd.known_hosts_line()).expect("known_hosts");
    let key = ClientKey::generate(&ssh, "id_big", None).expect("key");
    user.authorize(&key.public).expect("authorize");
    let rx = dir.path().join("rxhome");
    std::fs::create_dir_all(&rx).expect("rxhome");
    std::fs::write(
        rx.join("config.toml"),
        format!(
            "default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"RX_SSHBIG_KEY\"\n",
            mock.base_url()
        ),
    )
    .expect("config");
    let dest = format!("{}@127.0.0.1:ws", user.name);

    let (ok, events, log) = tokio::task::block_in_place(|| {
        run(
            dir.path(),
            &key,
            &sshd,
            &[
                "run",
                "--ssh",
                &dest,
                "--json",
                "--full-output",
                "--yolo",
                "go",
            ],
        )
    });
    assert!(ok, "{log}");

    let bash = finished(&events, "bash");
    assert_eq!(bash["is_error"], false, "{log}");
    assert_eq!(bash["bytes"], QUOTES as u64);
    let out = bash["output"].as_str().expect("full output");
    assert_eq!(out.len(), QUOTES);
    assert!(out.bytes().all(|b| b == b'"'));
    assert_eq!(
        bash["sha256"].as_str(),
        Some(sha256_hex(out.as_bytes()).as_str())
    );

    let read = finished(&events, "read_file");
    assert_eq!(read["is_error"], false, "{log}");
    assert!(read["output"]
        .as_str()
        .unwrap_or("")
        .contains("[line truncated]"));

    let mcp = finished(&events, "mcp__big__big");
    assert_eq!(mcp["is_error"], false, "{log}");
    let out = mcp["output"].as_str().expect("full output");
    assert_eq!(out.len(), MCP_BYTES);
    assert_eq!(
        mcp["sha256"].as_str(),
        Some(sha256_hex(out.as_bytes()).as_str())
    );

    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(text, "all three done");

    // The next turn of the same session works.
    let (ok, events, log) = tokio::task::block_in_place(|| {
        run(
            dir.path(),
            &key,
            &sshd,
            &[
                "run",
                "--ssh",
                &dest,
                "--json",
                "--continue",
                "--yolo",
                "next",
            ],
        )
    });
    assert!(ok, "{log}");
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(text, "next turn ok");
}
