//! The session policy end to end in local mode, with the real `reasonix` and
//! `reasonix-remote` binaries, the scripted mock provider and real bwrap: a project file
//! cannot loosen anything on the host, an edited project file applies at the next session
//! open of the same daemon, and a client taking over replaces the previous driver's settings.

mod adversarial;
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use adversarial::{json_lines, sandbox_of, Attack, MCP_JSON, USER_CONFIG_EXTRA};
use common::{host_bin, LocalRig};
use reasonix_forward::policy::{PermissionMode, Rule};
use reasonix_forward::proto::{
    ApprovalDecision, ClientRole, EventKind, OpenSession, Request, Response, SessionOpened,
    SessionSettings,
};
use reasonix_local::client::{Client, ClientEvent, ClientOptions};
use reasonix_local::config::Config;
use reasonix_local::connect::LocalConnector;
use reasonix_local::gateway::Gateway;
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

const KEY_ENV: &str = "RX_POLICY_KEY";
const KEY: &str = "sk-policy-test-0f1e2d3c";

fn reasonix(rig: &LocalRig, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .args(args)
        .current_dir(&rig.ws)
        .env("REASONIX_HOME", &rig.home)
        .env("REASONIX_REMOTE_BIN", host_bin())
        .env("REASONIX_IDLE_TIMEOUT_SECS", "60")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("run reasonix")
}

fn append_user_config(rig: &LocalRig, extra: &str) {
    let path = rig.home.join("config.toml");
    let mut text = std::fs::read_to_string(&path).expect("config");
    text.push_str(extra);
    std::fs::write(path, text).expect("config");
}

fn daemon_pid(home: &Path) -> Option<u64> {
    for e in std::fs::read_dir(home.join("sessions")).ok()?.flatten() {
        if let Ok(b) = std::fs::read(e.path().join("daemon.json")) {
            let v: Value = serde_json::from_slice(&b).ok()?;
            return v["pid"].as_u64();
        }
    }
    None
}

fn stop_daemon(home: &Path) {
    if let Some(pid) = daemon_pid(home) {
        // SAFETY: plain kill(2) of the daemon this test started.
        unsafe {
            libc::kill(pid as i32, libc::SIGTERM);
        }
    }
}

fn write_call(id: &str, path: &str) -> MockReply {
    MockReply::tool_calls(
        vec![MockToolCall::new(
            id,
            "write_file",
            &json!({"path": path, "content": "content\n"}).to_string(),
        )],
        3,
    )
}

fn settings(config: &Config, headless: bool) -> SessionSettings {
    SessionSettings {
        model: Some("mock/m".into()),
        headless,
        policy: config.session_policy(),
        ..SessionSettings::default()
    }
}

async fn open(client: &Client, open: OpenSession) -> SessionOpened {
    match tokio::time::timeout(
        Duration::from_secs(60),
        client.request(Request::OpenSession(open)),
    )
    .await
    .expect("open within 60 s")
    .expect("open")
    {
        Response::SessionOpened(o) => o,
        other => panic!("unexpected {other:?}"),
    }
}

/// Events up to and including the next `TurnFinished`.
async fn until_turn_end(events: &mut UnboundedReceiver<ClientEvent>) -> Vec<EventKind> {
    let mut seen = Vec::new();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .expect("turn end within 60 s")
            .expect("client alive");
        if let ClientEvent::Event(e) = ev {
            let done = matches!(e.kind, EventKind::TurnFinished { .. });
            seen.push(e.kind);
            if done {
                return seen;
            }
        }
    }
}

fn tool_result<'a>(events: &'a [EventKind], id: &str) -> (&'a str, bool) {
    events
        .iter()
        .find_map(|k| match k {
            EventKind::ToolFinished {
                call_id,
                output,
                is_error,
                ..
            } if call_id == id => Some((output.as_str(), *is_error)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result for {id} in {events:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_file_cannot_loosen_anything_on_the_host() {
    let mock = MockProvider::start(Vec::new()).await;
    let rig = LocalRig::new(&mock.base_url(), KEY_ENV, KEY);
    append_user_config(&rig, USER_CONFIG_EXTRA);
    let outside = rig.dir.path().join("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    let attack = Attack::new(&rig.ws, &outside);
    std::fs::write(rig.ws.join("reasonix.toml"), attack.project_toml()).expect("project");
    std::fs::write(rig.ws.join(".mcp.json"), MCP_JSON).expect(".mcp.json");

    // Phase 1, user mode auto.
    mock.push(attack.phase1_replies());
    let out = tokio::task::block_in_place(|| reasonix(&rig, &["run", "--json", "try it"]));
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let events = json_lines(&out.stdout);
    // The user's ask rule is denied headless (checked in check_phase1): exit 4.
    assert_eq!(out.status.code(), Some(4), "{events:#?}\n{stderr}");
    attack.check_phase1(&events, &sandbox_of(&events));
    Attack::check_warnings(&stderr);
    assert!(
        stderr.contains("base_url: a project file cannot redirect a provider"),
        "{stderr}"
    );
    assert!(mock.request_count() >= 2, "the real provider was used");

    // Phase 2, user mode ask: the project's allow rules skip nothing.
    let cfg = std::fs::read_to_string(rig.home.join("config.toml")).expect("config");
    std::fs::write(
        rig.home.join("config.toml"),
        cfg.replace("mode = \"auto\"", "mode = \"ask\""),
    )
    .expect("config");
    mock.push(Attack::phase2_replies());
    let out = tokio::task::block_in_place(|| {
        reasonix(&rig, &["run", "--json", "--continue", "try again"])
    });
    let events = json_lines(&out.stdout);
    attack.check_phase2(&events);

    // Workspace MCP servers run on the host, whatever they ask for.
    let out = tokio::task::block_in_place(|| reasonix(&rig, &["mcp", "list", "--json"]));
    let servers = json_lines(&out.stdout);
    for name in ["laptop-evil", "dotmcp-evil"] {
        let s = servers
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {servers:#?}"));
        assert_eq!(s["run_on"], "host", "{s}");
    }
    stop_daemon(&rig.home);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_project_file_applies_at_the_next_open_of_the_same_daemon() {
    let mock = MockProvider::start(vec![
        write_call("c1", "a.txt"),
        MockReply::text(&["wrote a"]),
        write_call("c2", "b.txt"),
        MockReply::text(&["tried b"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), KEY_ENV, KEY);
    append_user_config(&rig, "\n[permissions]\nmode = \"auto\"\n");
    let config = rig.config();
    let (client, mut events) = rig.client(&config);

    let first = open(
        &client,
        OpenSession {
            new: true,
            settings: settings(&config, false),
            ..OpenSession::default()
        },
    )
    .await;
    assert_eq!(first.policy.mode, PermissionMode::Auto);
    assert!(first.policy.rules.deny.is_empty());
    let pid = daemon_pid(&rig.home).expect("daemon running");
    client
        .request(Request::SubmitTurn {
            request_id: "t1".into(),
            text: "write a".into(),
        })
        .await
        .expect("submit");
    let seen = until_turn_end(&mut events).await;
    assert!(!tool_result(&seen, "c1").1, "{seen:#?}");
    assert!(rig.ws.join("a.txt").exists());

    // The project now denies writers and cuts the network; same daemon, new session.
    std::fs::write(
        rig.ws.join("reasonix.toml"),
        "[permissions]\ndeny = [\"Edit\"]\n[sandbox]\nnetwork = false\n",
    )
    .expect("project");
    let second = open(
        &client,
        OpenSession {
            new: true,
            settings: settings(&config, false),
            ..OpenSession::default()
        },
    )
    .await;
    assert_ne!(second.session, first.session);
    assert_eq!(
        second.policy.rules.deny,
        [Rule::parse("Edit").expect("rule")]
    );
    assert!(!second.policy.sandbox.network);
    assert_eq!(
        daemon_pid(&rig.home),
        Some(pid),
        "the daemon was not restarted"
    );
    client
        .request(Request::SubmitTurn {
            request_id: "t2".into(),
            text: "write b".into(),
        })
        .await
        .expect("submit");
    let seen = until_turn_end(&mut events).await;
    let (output, is_error) = tool_result(&seen, "c2");
    assert!(
        is_error && output.contains("denied by rule `Edit`"),
        "{output}"
    );
    assert!(!rig.ws.join("b.txt").exists());
    stop_daemon(&rig.home);
}

fn client_with_home(
    rig: &LocalRig,
    config: &Config,
    home: Option<PathBuf>,
) -> (Client, UnboundedReceiver<ClientEvent>) {
    Client::start(
        Arc::new(LocalConnector::new(host_bin(), rig.ws.clone())),
        Arc::new(Gateway::new(config)),
        ClientOptions {
            config_home: home,
            ..ClientOptions::default()
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_replaces_the_headless_drivers_settings_and_only_the_answerer_saves_always() {
    let mock = MockProvider::start(vec![
        write_call("h1", "headless.txt"),
        MockReply::text(&["could not write"]),
        write_call("t1", "taken.txt"),
        MockReply::text(&["wrote it"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), KEY_ENV, KEY);
    let config = rig.config();

    // A headless `reasonix run` drives first: its write is denied (ask mode, nobody to ask).
    let out = tokio::task::block_in_place(|| reasonix(&rig, &["run", "--json", "write it"]));
    let run_events = json_lines(&out.stdout);
    assert_eq!(
        Attack::finished(&run_events, "h1")["is_error"],
        true,
        "{run_events:#?}"
    );
    let session = adversarial_session(&run_events);

    // A TUI-style client attaches read-only, then takes over (what `/takeover` sends).
    let (driver, mut driver_events) = rig.client(&config);
    let spectator_home = rig.dir.path().join("spectator-home");
    let (spectator, mut spectator_events) =
        client_with_home(&rig, &config, Some(spectator_home.clone()));
    let opened = open(
        &driver,
        OpenSession {
            session: Some(session.clone()),
            read_only: true,
            settings: settings(&config, false),
            ..OpenSession::default()
        },
    )
    .await;
    assert_eq!(opened.role, ClientRole::Spectator);
    assert_eq!(
        driver.request(Request::Takeover).await.expect("takeover"),
        Response::Ok
    );
    let watching = open(
        &spectator,
        OpenSession {
            session: Some(session.clone()),
            read_only: true,
            settings: settings(&config, false),
            ..OpenSession::default()
        },
    )
    .await;
    assert_eq!(watching.role, ClientRole::Spectator);
    driver
        .request(Request::SubmitTurn {
            request_id: "after-takeover".into(),
            text: "write taken".into(),
        })
        .await
        .expect("submit");
    // Asked, not auto-denied as for the headless driver before.
    let approval_id = loop {
        let ev = tokio::time::timeout(Duration::from_secs(60), driver_events.recv())
            .await
            .expect("an approval within 60 s")
            .expect("client alive");
        if let ClientEvent::Event(e) = ev {
            match e.kind {
                EventKind::ApprovalRequested { approval_id, .. } => break approval_id,
                EventKind::ToolFinished {
                    call_id, output, ..
                } if call_id == "t1" => panic!("finished without asking: {output}"),
                _ => {}
            }
        }
    };
    driver
        .request(Request::Approve {
            request_id: "answer".into(),
            approval_id,
            decision: ApprovalDecision::AllowAlways,
        })
        .await
        .expect("approve");
    let seen = until_turn_end(&mut driver_events).await;
    assert!(!tool_result(&seen, "t1").1, "{seen:#?}");
    assert!(rig.ws.join("taken.txt").exists());
    // The spectator caught up with turn 1 and watched turn 2 live.
    until_turn_end(&mut spectator_events).await;
    until_turn_end(&mut spectator_events).await;

    // A client that catches up from the journal afterwards sees the answer too.
    let catchup_home = rig.dir.path().join("catchup-home");
    let (late, mut late_events) = client_with_home(&rig, &config, Some(catchup_home.clone()));
    open(
        &late,
        OpenSession {
            session: Some(session),
            read_only: true,
            since: 0,
            settings: settings(&config, false),
            ..OpenSession::default()
        },
    )
    .await;
    until_turn_end(&mut late_events).await;
    until_turn_end(&mut late_events).await;

    // Only the answering client saved the rule.
    let saved = std::fs::read_to_string(rig.home.join("config.toml")).expect("config");
    assert!(saved.contains("\"Edit\""), "{saved}");
    for home in [spectator_home, catchup_home] {
        assert!(
            !home.join("config.toml").exists(),
            "{} saved a rule it did not answer",
            home.display()
        );
    }
    stop_daemon(&rig.home);
}

fn adversarial_session(events: &[Value]) -> String {
    events
        .iter()
        .find(|e| e["type"] == "session")
        .and_then(|e| e["session"].as_str())
        .expect("session id")
        .to_string()
}
