//! `web_fetch` over SSH from a host with no route out: a network namespace holds a real
//! OpenSSH sshd, the static host binary runs there as a separate host user, and iptables in
//! the namespace rejects every packet that user's processes send except the SSH
//! connection's own. The laptop (`reasonix run --ssh`, this test's user) reaches the HTTP
//! server; the host cannot (checked first), yet the page arrives, because the laptop's
//! gateway fetches it.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod web_fetch_common;

use std::path::{Path, PathBuf};
use std::process::Command;

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use reasonix_testkit::netfault::NetNs;
use reasonix_testkit::sshd::{ClientKey, Sshd, SshdConfig, TestUser, UserOptions};
use serde_json::{json, Value};

const KEY_ENV: &str = "RX_WF_SSH_KEY";

fn musl_host_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    [
        root.join("x86_64-unknown-linux-musl/debug/reasonix-remote"),
        root.join("debug/reasonix-remote-x86_64-unknown-linux-musl"),
        root.join("x86_64-unknown-linux-musl/release/reasonix-remote"),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .expect("run `cargo build -p reasonix-remote --target x86_64-unknown-linux-musl` first")
}

/// Can `user` (or this process, when None) open a TCP connection to 127.0.0.1:`port`?
fn can_connect(ns: &NetNs, user: Option<&TestUser>, port: u16) -> bool {
    let script = format!(
        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), 3).close()\n    print('connected')\nexcept OSError as e:\n    print('failed', e)\n"
    );
    let mut cmd = match user {
        Some(u) => {
            let mut c = ns.command("runuser");
            c.args(["-u", &u.name, "--", "/usr/bin/python3", "-c", &script]);
            c
        }
        None => {
            let mut c = ns.command("/usr/bin/python3");
            c.args(["-c", &script]);
            c
        }
    };
    let out = cmd.output().expect("python3");
    String::from_utf8_lossy(&out.stdout).starts_with("connected")
}

#[test]
fn web_fetch_works_from_a_host_with_no_route_out() {
    let ns = NetNs::create().expect("netns (needs root and iproute2)");
    // Everything this thread starts from here on (the runtime's threads, the mock provider,
    // the HTTP server, the client) lives in the namespace.
    ns.enter_current_thread().expect("setns");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (port, seen) = rt.block_on(web_fetch_common::serve());
    let url = format!("http://127.0.0.1:{port}/hop");
    let mock = rt.block_on(MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "f1",
                "web_fetch",
                &json!({"url": url}).to_string(),
            )],
            2,
        ),
        MockReply::text(&["read it"]),
    ]));
    let sshd = Sshd::start(SshdConfig {
        netns: Some(ns.name().to_string()),
        allow_tcp_forwarding: false,
        allow_stream_local_forwarding: false,
        ..SshdConfig::default()
    })
    .expect("sshd");
    let user = TestUser::create(&UserOptions {
        shell: Some("/bin/bash".into()),
        ..UserOptions::default()
    })
    .expect("user");
    // The host user may answer on the SSH connection and nothing else.
    let uid = user.uid.to_string();
    let sport = sshd.port().to_string();
    ns.exec(&[
        "iptables",
        "-w",
        "-A",
        "OUTPUT",
        "-m",
        "owner",
        "--uid-owner",
        &uid,
        "-p",
        "tcp",
        "--sport",
        &sport,
        "-j",
        "ACCEPT",
    ])
    .expect("iptables accept ssh");
    ns.exec(&[
        "iptables",
        "-w",
        "-A",
        "OUTPUT",
        "-m",
        "owner",
        "--uid-owner",
        &uid,
        "-j",
        "REJECT",
    ])
    .expect("iptables reject the rest");
    assert!(
        !can_connect(&ns, Some(&user), port),
        "the host user must not reach the HTTP server"
    );
    assert!(can_connect(&ns, None, port), "the laptop reaches it");

    let dir = tempfile::tempdir().expect("tempdir");
    let ssh = dir.path().join("home/.ssh");
    std::fs::create_dir_all(&ssh).expect("ssh dir");
    std::fs::write(ssh.join("known_hosts"), sshd.known_hosts_line()).expect("known_hosts");
    let key = ClientKey::generate(&ssh, "id_wf", None).expect("key");
    user.authorize(&key.public).expect("authorize");
    let rx_home = dir.path().join("rxhome");
    std::fs::create_dir_all(&rx_home).expect("rxhome");
    std::fs::write(
        rx_home.join("config.toml"),
        format!(
            "default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"{KEY_ENV}\"\n[permissions]\nallow = [\"WebFetch(domain:127.0.0.1)\"]\n",
            mock.base_url()
        ),
    )
    .expect("config");
    let ws = user.home.join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    let chown = Command::new("chown")
        .arg(format!("{}:{}", user.uid, user.gid))
        .arg(&ws)
        .output()
        .expect("chown");
    assert!(chown.status.success(), "{chown:?}");

    let out = Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .args(["run", "--ssh"])
        .arg(format!("{}@127.0.0.1:ws", user.name))
        .args(["--json", "read the page"])
        .args(["-p", &sshd.port().to_string(), "-F", "none"])
        .arg("-i")
        .arg(&key.private)
        .args(["-o", "IdentityAgent=none"])
        .current_dir(dir.path())
        .env("HOME", dir.path().join("home"))
        .env("REASONIX_HOME", &rx_home)
        .env(KEY_ENV, "sk-wf-ssh")
        .env("REASONIX_IDLE_TIMEOUT_SECS", "5")
        .env(
            "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
            musl_host_binary(),
        )
        .env_remove("SSH_AUTH_SOCK")
        .output()
        .expect("run reasonix");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}\nsshd log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        sshd.log()
    );
    let finished: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "tool_finished" && e["call_id"] == "f1")
        .collect();
    assert_eq!(finished.len(), 1, "{stdout}");
    assert_eq!(finished[0]["is_error"], false, "{stdout}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "{stdout}");
    let result = requests[1]
        .messages()
        .into_iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "f1")
        .and_then(|m| m["content"].as_str().map(str::to_string))
        .expect("the tool result reached the model");
    assert!(
        result.contains("status: 200") && result.contains("# Hello Docs"),
        "{result}"
    );
    let paths: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(p, _)| p.clone())
        .collect();
    assert_eq!(paths, ["/hop", "/page"]);
    drop(rt);
}
