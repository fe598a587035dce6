//! Workspace MCP servers are settings per session open, not per daemon: with the real
//! `reasonix` library client, the real `reasonix-remote` daemon, the scripted mock provider
//! and real MCP server processes (a small Node script server, `local/tests/fixtures/`).
//!
//! - An edited `[[mcp]]` applies to the next session of the same daemon: the new server's
//!   tools reach the provider, the removed one's do not, an unchanged server is shared (one
//!   process), and a session opened before the edit keeps its tool list (its prefix).
//! - The MCP call timeout is part of the session policy: a project file can shorten it, but
//!   neither `[tools] mcp_call_timeout_seconds` nor a server's own `timeout_seconds` can
//!   lengthen it beyond the user's.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::LocalRig;
use reasonix_forward::proto::{
    EventKind, OpenSession, Request, Response, SessionOpened, SessionSettings,
};
use reasonix_local::client::{Client, ClientEvent};
use reasonix_local::config::Config;
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedReceiver;

const KEY_ENV: &str = "RX_MCP_SESSION_KEY";
const KEY: &str = "sk-mcp-session-5a6b7c";

fn script_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_script_server.js")
}

/// An `[[mcp]]` entry running the script server as `label`, logging its starts to `log`.
fn entry(label: &str, log: &Path, extra: &str) -> String {
    format!(
        "[[mcp]]\nname = \"{label}\"\ncommand = \"node\"\nargs = [\"{}\", \"{label}\"]\nenv = {{ MCP_STARTS_LOG = \"{}\" }}\n{extra}\n",
        script_server().display(),
        log.display()
    )
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

fn settings(config: &Config) -> SessionSettings {
    SessionSettings {
        model: Some("mock/m".into()),
        headless: true,
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

async fn turn(
    client: &Client,
    events: &mut UnboundedReceiver<ClientEvent>,
    id: &str,
) -> Vec<EventKind> {
    // Events of this turn only: a reopened session replays its earlier turns first.
    let all = received_through_turn(client, events, id).await;
    let start = all
        .iter()
        .position(|(_, k)| matches!(k, EventKind::UserTurn { request_id, .. } if request_id == id))
        .unwrap_or(0);
    all.into_iter().skip(start).map(|(_, k)| k).collect()
}

/// Submit turn `id`; every event (seq, kind) the link receives until that turn finishes,
/// including the catch-up of a reopened session before it.
async fn received_through_turn(
    client: &Client,
    events: &mut UnboundedReceiver<ClientEvent>,
    id: &str,
) -> Vec<(u64, EventKind)> {
    client
        .request(Request::SubmitTurn {
            request_id: id.into(),
            text: format!("turn {id}"),
        })
        .await
        .expect("submit");
    let mut seen = Vec::new();
    let mut started = false;
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .expect("turn end within 60 s")
            .expect("client alive");
        if let ClientEvent::Event(e) = ev {
            started |=
                matches!(&e.kind, EventKind::UserTurn { request_id, .. } if request_id == id);
            let done = started && matches!(e.kind, EventKind::TurnFinished { .. });
            seen.push((e.seq, e.kind));
            if done {
                return seen;
            }
        }
    }
}

/// The MCP tool names of one provider request.
fn mcp_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["function"]["name"].as_str())
                .filter(|n| n.starts_with("mcp__"))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
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

fn starts(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| l.split(' ').nth(1).unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_mcp_declaration_applies_to_the_next_session_without_a_daemon_restart() {
    let mock = MockProvider::start(vec![
        MockReply::text(&["one"]),
        MockReply::text(&["two"]),
        MockReply::text(&["three"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), KEY_ENV, KEY);
    let log = rig.dir.path().join("starts.log");
    std::fs::write(
        rig.ws.join("reasonix.toml"),
        format!("{}{}", entry("keep", &log, ""), entry("old", &log, "")),
    )
    .expect("project");
    let config = rig.config();
    let (client, mut events) = rig.client(&config);

    let first = open(
        &client,
        OpenSession {
            new: true,
            settings: settings(&config),
            ..OpenSession::default()
        },
    )
    .await;
    let pid = daemon_pid(&rig.home).expect("daemon running");
    turn(&client, &mut events, "t1").await;
    let before = mcp_tools(&mock.requests()[0].body);
    for name in ["mcp__keep__hello", "mcp__old__hello", "mcp__old__sleep"] {
        assert!(before.contains(&name.to_string()), "{before:?}");
    }

    // Same daemon: `old` is removed, `new` added, `keep` unchanged.
    std::fs::write(
        rig.ws.join("reasonix.toml"),
        format!("{}{}", entry("keep", &log, ""), entry("new", &log, "")),
    )
    .expect("project");
    let second = open(
        &client,
        OpenSession {
            new: true,
            settings: settings(&config),
            ..OpenSession::default()
        },
    )
    .await;
    assert_ne!(second.session, first.session);
    turn(&client, &mut events, "t2").await;
    let after = mcp_tools(&mock.requests()[1].body);
    assert!(after.contains(&"mcp__new__hello".to_string()), "{after:?}");
    assert!(after.contains(&"mcp__keep__hello".to_string()), "{after:?}");
    assert!(
        !after.iter().any(|n| n.starts_with("mcp__old__")),
        "the removed server's tools are gone: {after:?}"
    );
    let listed = match client
        .request(Request::McpStatus { laptop: Vec::new() })
        .await
        .expect("mcp status")
    {
        Response::McpServers { servers } => servers,
        other => panic!("unexpected {other:?}"),
    };
    let names: Vec<&str> = listed.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["keep", "new"], "/mcp shows this session's servers");

    // The first session still lives in the daemon: its tool list (prefix) is unchanged.
    open(
        &client,
        OpenSession {
            session: Some(first.session.clone()),
            settings: settings(&config),
            ..OpenSession::default()
        },
    )
    .await;
    // Everything this link receives from here: the first session's catch-up, then its new
    // turn, each event once and in order (the forwarder of the first open, still waiting on
    // the first session, once sent the new turn's events too, ahead of the catch-up).
    let third = received_through_turn(&client, &mut events, "t3").await;
    let seqs: Vec<u64> = third.iter().map(|(s, _)| *s).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]) && seqs.first() == Some(&1),
        "the catch-up then the turn, each event once, in order: {third:?}"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "one model request per turn: {third:?}");
    assert_eq!(
        requests[2].body["tools"], requests[0].body["tools"],
        "a running session keeps the tools it started with"
    );
    assert_eq!(
        daemon_pid(&rig.home),
        Some(pid),
        "the daemon was not restarted"
    );
    let mut started = starts(&log);
    started.sort();
    assert_eq!(
        started,
        ["keep", "new", "old"],
        "each server started once: the unchanged one is shared by both sessions"
    );
    stop_daemon(&rig.home);
}

fn sleep_call(id: &str, seconds: f64) -> MockToolCall {
    MockToolCall::new(
        id,
        "mcp__slow__sleep",
        &json!({ "seconds": seconds }).to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_file_can_shorten_the_mcp_call_timeout_but_never_lengthen_it() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(vec![sleep_call("c1", 0.0), sleep_call("c2", 6.0)], 2),
        MockReply::text(&["first done"]),
        MockReply::tool_calls(vec![sleep_call("c3", 4.0)], 2),
        MockReply::text(&["second done"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), KEY_ENV, KEY);
    append_user_config(
        &rig,
        "\n[permissions]\nmode = \"auto\"\n[tools]\nmcp_call_timeout_seconds = 2\n",
    );
    let log = rig.dir.path().join("starts.log");
    // Both the policy key and the server's own timeout try to lengthen the user's 2 s.
    std::fs::write(
        rig.ws.join("reasonix.toml"),
        format!(
            "[tools]\nmcp_call_timeout_seconds = 100\n\n{}",
            entry("slow", &log, "timeout_seconds = 100000")
        ),
    )
    .expect("project");
    let config = rig.config();
    let (client, mut events) = rig.client(&config);
    let first = open(
        &client,
        OpenSession {
            new: true,
            settings: settings(&config),
            ..OpenSession::default()
        },
    )
    .await;
    assert_eq!(first.policy.timeouts.mcp_call_seconds, 2);
    assert!(
        first
            .ignored
            .iter()
            .any(|i| i.key == "tools.mcp_call_timeout_seconds" && i.value == "100"),
        "{:?}",
        first.ignored
    );
    let seen = turn(&client, &mut events, "t1").await;
    assert_eq!(tool_result(&seen, "c1"), ("slept", false));
    let (out, is_error) = tool_result(&seen, "c2");
    assert!(
        is_error && out.contains("timed out after 2 s"),
        "the user's 2 s hold: {out}"
    );

    // The project shortens it: the next session of the same daemon takes 1 s.
    std::fs::write(
        rig.ws.join("reasonix.toml"),
        format!(
            "[tools]\nmcp_call_timeout_seconds = 1\n\n{}",
            entry("slow", &log, "timeout_seconds = 100000")
        ),
    )
    .expect("project");
    let config = rig.config();
    let second = open(
        &client,
        OpenSession {
            new: true,
            settings: settings(&config),
            ..OpenSession::default()
        },
    )
    .await;
    assert_eq!(second.policy.timeouts.mcp_call_seconds, 1);
    let seen = turn(&client, &mut events, "t2").await;
    let (out, is_error) = tool_result(&seen, "c3");
    assert!(
        is_error && out.contains("timed out after 1 s"),
        "the project's shorter limit applies: {out}"
    );
    stop_daemon(&rig.home);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_are_answered_and_a_tool_list_change_waits_for_the_next_session() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![
                MockToolCall::new("c1", "mcp__srv__roots", "{}"),
                MockToolCall::new("c2", "mcp__srv__change", "{}"),
            ],
            2,
        ),
        MockReply::text(&["changed"]),
        MockReply::text(&["same session"]),
        MockReply::text(&["next session"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), KEY_ENV, KEY);
    append_user_config(&rig, "\n[permissions]\nmode = \"auto\"\n");
    let log = rig.dir.path().join("starts.log");
    std::fs::write(rig.ws.join("reasonix.toml"), entry("srv", &log, "")).expect("project");
    let config = rig.config();
    let (client, mut events) = rig.client(&config);
    let open_new = || OpenSession {
        new: true,
        settings: settings(&config),
        ..OpenSession::default()
    };
    open(&client, open_new()).await;
    let seen = turn(&client, &mut events, "t1").await;

    // roots/list was answered with the workspace root.
    let (roots, is_error) = tool_result(&seen, "c1");
    assert!(!is_error, "{roots}");
    let roots: Value = serde_json::from_str(roots).expect("roots JSON");
    let ws = std::fs::canonicalize(&rig.ws).expect("ws");
    assert_eq!(
        roots[0]["uri"],
        format!("file://{}", ws.display()),
        "{roots}"
    );
    assert_eq!(roots.as_array().map(Vec::len), Some(1), "{roots}");

    // The change is announced to the user, and this session's tools stay as they were.
    assert_eq!(tool_result(&seen, "c2"), ("changed", false));
    assert!(
        seen.iter().any(|k| matches!(k, EventKind::Notice { text }
            if text.contains("MCP server `srv` changed its tool list") && text.contains("next session"))),
        "{seen:#?}"
    );
    turn(&client, &mut events, "t2").await;
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        requests[2].body["tools"], requests[0].body["tools"],
        "list_changed never mutates the running session's prefix"
    );
    assert!(!mcp_tools(&requests[2].body).contains(&"mcp__srv__extra".to_string()));

    // A new session of the same daemon gets the new list, from the same server process.
    open(&client, open_new()).await;
    turn(&client, &mut events, "t3").await;
    let next = mcp_tools(&mock.requests()[3].body);
    assert!(next.contains(&"mcp__srv__extra".to_string()), "{next:?}");
    assert_eq!(
        starts(&log),
        ["srv"],
        "the unchanged server was shared, not restarted"
    );
    stop_daemon(&rig.home);
}
