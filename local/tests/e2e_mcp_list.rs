//! `reasonix mcp list` and the `/mcp` request in local mode, with real MCP servers: the host
//! runs the workspace's `mcp-server-time` and a server whose command does not exist, the
//! laptop runs `mcp-server-everything` from the user's config, tunnelled over the link.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::{host_bin, LocalRig};
use reasonix_forward::proto::{McpServerInfo, OpenSession, Request, Response, SessionSettings};
use serde_json::Value;

/// The command of the broken host server: nothing of that name exists on PATH.
const MISSING: &str = "reasonix-test-no-such-mcp-server";

fn require(program: &str, install: &str) {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(found, "{program} is not installed; {install}");
}

/// A rig whose workspace declares `time` (real) and `broken` (missing command) on the host
/// and whose laptop config declares `lap` (server-everything, `run_on = "laptop"`).
fn rig() -> LocalRig {
    require(
        "mcp-server-time",
        "pip install mcp-server-time (see .ci/run)",
    );
    require(
        "mcp-server-everything",
        "npm install -g @modelcontextprotocol/server-everything (see .ci/run)",
    );
    let rig = LocalRig::new("http://127.0.0.1:9", "RX_MCP_LIST_KEY", "sk-mcp-list");
    std::fs::write(
        rig.ws.join("reasonix.toml"),
        format!(
            "[[mcp]]\nname = \"time\"\ncommand = \"mcp-server-time\"\n\n[[mcp]]\nname = \"broken\"\ncommand = \"{MISSING}\"\n"
        ),
    )
    .expect("workspace reasonix.toml");
    let cfg_path = rig.home.join("config.toml");
    let mut cfg = std::fs::read_to_string(&cfg_path).expect("config");
    cfg.push_str(
        "\n[[mcp]]\nname = \"lap\"\ncommand = \"mcp-server-everything\"\nargs = [\"stdio\"]\nrun_on = \"laptop\"\n",
    );
    std::fs::write(&cfg_path, cfg).expect("config");
    rig
}

fn reasonix(rig: &LocalRig, remote_bin: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .args(args)
        .current_dir(&rig.ws)
        .env("REASONIX_HOME", &rig.home)
        .env("REASONIX_REMOTE_BIN", remote_bin)
        .env("REASONIX_IDLE_TIMEOUT_SECS", "30")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("run reasonix")
}

/// Stops the workspace daemon the rig's commands started (its pid is in the marker).
fn stop_daemon(rig: &LocalRig) {
    let Ok(rd) = std::fs::read_dir(rig.home.join("sessions")) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(b) = std::fs::read(e.path().join("daemon.json")) else {
            continue;
        };
        let Some(pid) = serde_json::from_slice::<Value>(&b)
            .ok()
            .and_then(|v| v["pid"].as_u64())
        else {
            continue;
        };
        // SAFETY: plain signal to a pid this test's daemon wrote.
        unsafe {
            libc::kill(pid as i32, libc::SIGTERM);
        }
    }
}

fn by_name<'a>(servers: &'a [McpServerInfo], name: &str) -> &'a McpServerInfo {
    servers
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no server {name} in {servers:#?}"))
}

/// What every listing must show for the rig's three servers.
fn check_servers(servers: &[McpServerInfo]) {
    assert_eq!(servers.len(), 3, "{servers:#?}");
    let time = by_name(servers, "time");
    assert_eq!(
        (time.run_on.as_str(), time.state.as_str()),
        ("host", "ready"),
        "{time:?}"
    );
    assert_eq!(time.reason, None);
    assert!(
        time.tools
            .contains(&"mcp__time__get_current_time".to_string()),
        "{time:?}"
    );
    assert!(
        time.tools.contains(&"mcp__time__convert_time".to_string()),
        "{time:?}"
    );

    let broken = by_name(servers, "broken");
    assert_eq!(
        (broken.run_on.as_str(), broken.state.as_str()),
        ("host", "failed"),
        "{broken:?}"
    );
    let reason = broken.reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains(MISSING),
        "the reason names the command: {reason}"
    );
    assert!(broken.tools.is_empty(), "{broken:?}");

    let lap = by_name(servers, "lap");
    assert_eq!(
        (lap.run_on.as_str(), lap.state.as_str()),
        ("laptop", "ready"),
        "{lap:?}"
    );
    assert!(lap.tools.contains(&"mcp__lap__echo".to_string()), "{lap:?}");
    assert!(
        lap.tools.len() > 3,
        "server-everything has many tools: {lap:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_list_shows_each_server_where_it_runs_its_state_and_tools() {
    let rig = rig();
    let out = reasonix(&rig, &host_bin(), &["mcp", "list", "--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "a failed server is a listed state, not a command failure\nstdout: {stdout}\nstderr: {stderr}"
    );
    let servers: Vec<McpServerInfo> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    check_servers(&servers);
    // Host servers first, then the laptop's.
    assert_eq!(
        servers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["broken", "time", "lap"]
    );

    // The table: one row per server, the failure reason below its row, short tool names.
    let out = reasonix(&rig, &host_bin(), &["mcp", "list"]);
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{table}");
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("SERVER"), "{table}");
    let row = |name: &str| {
        *lines
            .iter()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row for {name}:\n{table}"))
    };
    let time = row("time");
    assert!(time.contains("host") && time.contains("ready"), "{table}");
    assert!(time.contains("get_current_time"), "{table}");
    let lap = row("lap");
    assert!(lap.contains("laptop") && lap.contains("ready"), "{table}");
    assert!(lap.contains("echo"), "{table}");
    assert!(row("broken").contains("failed"), "{table}");
    assert!(
        lines
            .iter()
            .any(|l| l.trim_start().starts_with("reason:") && l.contains(MISSING)),
        "{table}"
    );
    stop_daemon(&rig);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_list_fails_only_when_it_cannot_connect() {
    let rig = rig();
    // A host binary that cannot be executed: the connection fails for good.
    let fake = rig.dir.path().join("not-executable");
    std::fs::write(&fake, "not a program").expect("fake binary");
    let out = reasonix(&rig, &fake, &["mcp", "list", "--json"]);
    assert!(
        !out.status.success(),
        "a connection failure fails the command"
    );
    assert!(out.stdout.is_empty(), "nothing is listed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot start"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_status_in_a_session_lists_host_and_session_laptop_servers() {
    let rig = rig();
    let config = rig.config();
    let (client, _events) = rig.client(&config);
    let laptop = reasonix_local::client::options_for(&config).1;
    assert_eq!(laptop, ["lap"]);
    let opened = tokio::time::timeout(
        Duration::from_secs(120),
        client.request(Request::OpenSession(OpenSession {
            new: true,
            settings: SessionSettings {
                laptop_mcp: laptop,
                ..SessionSettings::default()
            },
            ..OpenSession::default()
        })),
    )
    .await
    .expect("open within 120 s")
    .expect("open");
    assert!(matches!(opened, Response::SessionOpened(_)), "{opened:?}");
    // With a session open the `laptop` field is ignored: the session's own servers count.
    let answer = tokio::time::timeout(
        Duration::from_secs(120),
        client.request(Request::McpStatus {
            laptop: vec!["not-configured".into()],
        }),
    )
    .await
    .expect("answer within 120 s")
    .expect("mcp status");
    let Response::McpServers { servers } = answer else {
        panic!("unexpected answer {answer:?}");
    };
    check_servers(&servers);
    let lap = by_name(&servers, "lap");
    assert_eq!(lap.transport, "channel: laptop", "{lap:?}");
    stop_daemon(&rig);
}
