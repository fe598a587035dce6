//! Fault handling of the MCP client with a scripted `sh` server (fault injection only; the
//! protocol itself is exercised against real servers in `mcp_real_servers.rs`).
#![allow(clippy::unwrap_used)] // tests may unwrap

mod mcp_support;

use std::time::Duration;

use reasonix_forward::policy::McpServerSpec;
use reasonix_remote::mcp::{
    McpClient, McpManager, McpServerState, McpSettings, McpTransport, StdioTransport,
};
use reasonix_remote::tools::{Tool, ToolRegistry};
use serde_json::json;

use mcp_support::{ctx, fake_server};

const T: Duration = Duration::from_secs(30);

fn pid_of(text: &str) -> &str {
    text.strip_prefix("ok ").expect("ok <pid>")
}

#[tokio::test]
async fn server_exiting_mid_call_is_a_tool_error_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = McpManager::new(McpSettings::default());
    m.add_host(fake_server("fake"), dir.path());
    m.start_all().await;
    let mut reg = ToolRegistry::new();
    m.register_tools(&mut reg);
    let work = reg.get("mcp__fake__work").expect("work");
    let c = ctx(dir.path());

    let first = work.run(json!({"mode": "normal"}), &c).await;
    assert!(!first.is_error, "{first:?}");
    let pid1 = pid_of(&first.text).to_string();

    let crashed = work.run(json!({"mode": "crash"}), &c).await;
    assert!(crashed.is_error, "{crashed:?}");
    let t = &crashed.text;
    assert!(
        t.contains("MCP server `fake` exited during the call to `work`"),
        "{t}"
    );
    assert!(t.contains("exit status: 3"), "exit status missing: {t}");
    assert!(
        t.contains("simulated crash in the middle of a call"),
        "stderr tail missing: {t}"
    );
    assert!(t.contains("restarted on the next call"), "{t}");
    let st = &m.status()[0];
    assert!(
        matches!(&st.state, McpServerState::Failed { reason } if reason.contains("restarts on next use")),
        "{st:?}"
    );

    let again = work.run(json!({"mode": "normal"}), &c).await;
    assert!(!again.is_error, "{again:?}");
    assert_ne!(pid_of(&again.text), pid1, "a new process answered");
    let st = &m.status()[0];
    assert_eq!(st.state, McpServerState::Ready);
    assert_eq!(st.restarts, 1);
}

#[tokio::test]
async fn malformed_lines_are_skipped() {
    let spec = fake_server("fake");
    let t = StdioTransport::new("sh", spec.args.clone(), Default::default(), None);
    let client = McpClient::connect("fake", t.open().await.unwrap(), T)
        .await
        .unwrap();
    // `initialize` was preceded by one junk line.
    assert_eq!(client.malformed_lines(), 1);
    let tools = client.list_tools(T).await.unwrap();
    // Pagination: the second page came from `nextCursor`.
    assert_eq!(
        tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["work", "other.tool"]
    );
    assert!(!tools[0].read_only && tools[1].read_only);
    for _ in 0..3 {
        let r = client.call_tool("work", json!({}), T, None).await.unwrap();
        assert!(r.text().starts_with("ok "), "{r:?}");
        assert!(client.is_alive());
    }
    // Each call is preceded by a truncated JSON line, an id-less response and plain text.
    assert_eq!(client.malformed_lines(), 1 + 3 * 3);
}

#[tokio::test]
async fn per_tool_timeout_cancels_and_server_survives() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = fake_server("fake");
    spec.tool_timeouts.insert("work".into(), 1);
    let mut m = McpManager::new(McpSettings::default());
    m.add_host(spec, dir.path());
    m.start_all().await;
    let tools = m.tools();
    let work = tools
        .iter()
        .find(|t| t.name() == "mcp__fake__work")
        .unwrap();
    assert_eq!(work.timeout(), Duration::from_secs(1));
    let other = tools
        .iter()
        .find(|t| t.name() == "mcp__fake__other_tool")
        .unwrap();
    assert_eq!(
        other.timeout(),
        Duration::from_secs(300),
        "default applies to other tools"
    );
    assert_eq!(other.remote_name(), "other.tool");

    let out = work.call(json!({"mode": "slow"}), None).await;
    assert!(out.is_error, "{out:?}");
    assert!(out.text.contains("timed out after 1 s"), "{}", out.text);
    // The server is still the same process: it answers the next call (with the default
    // timeout) once its sleep is over, and the late answer to the cancelled call is dropped.
    let out = other.call(json!({}), None).await;
    assert!(!out.is_error, "{out:?}");
    let out = work.call(json!({"mode": "x"}), None).await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(m.status()[0].restarts, 0);
}

#[tokio::test]
async fn startup_timeout_and_spawn_failure_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = McpManager::new(McpSettings {
        startup_timeout: Duration::from_secs(1),
        ..McpSettings::default()
    });
    // Reads its stdin and never answers.
    m.add_host(
        McpServerSpec::stdio("mute", "sh", &["-c", "cat >/dev/null"]),
        dir.path(),
    );
    m.add_host(
        McpServerSpec::stdio("missing", "/nonexistent/reasonix-mcp-server", &[]),
        dir.path(),
    );
    m.add_host(fake_server("ok"), dir.path());
    m.start_all().await;
    let st = m.status();
    let by = |n: &str| st.iter().find(|s| s.name == n).unwrap().state.clone();
    match by("mute") {
        McpServerState::Failed { reason } => {
            assert!(reason.contains("timed out after 1 s"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    match by("missing") {
        McpServerState::Failed { reason } => {
            assert!(
                reason.contains("could not start `/nonexistent/reasonix-mcp-server`"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(by("ok"), McpServerState::Ready);
    // Only the ready server contributes tools.
    let names: Vec<String> = m.tools().iter().map(|t| t.name().to_string()).collect();
    assert_eq!(names, ["mcp__ok__work", "mcp__ok__other_tool"]);
}

#[tokio::test]
async fn colliding_names_are_made_unique_deterministically() {
    let dir = tempfile::tempdir().unwrap();
    let build = |order: &[&str]| {
        let mut m = McpManager::new(McpSettings::default());
        for n in order {
            m.add_host(fake_server(n), dir.path());
        }
        m
    };
    let mut seen = Vec::new();
    for order in [["a.b", "a_b", "a b"], ["a b", "a_b", "a.b"]] {
        let m = build(&order);
        m.start_all().await;
        let mut reg = ToolRegistry::new();
        m.register_tools(&mut reg);
        let map: Vec<(String, String)> = m
            .tools()
            .iter()
            .map(|t| {
                (
                    t.name().to_string(),
                    format!("{}/{}", t.server_name(), t.remote_name()),
                )
            })
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_iter()
            .collect();
        assert_eq!(reg.names().len(), 6, "{:?}", reg.names());
        seen.push(map);
    }
    assert_eq!(seen[0], seen[1], "start order must not change names");
    let expect: Vec<(String, String)> = [
        ("mcp__a_b__other_tool", "a b/other.tool"),
        ("mcp__a_b__other_tool_2", "a.b/other.tool"),
        ("mcp__a_b__other_tool_3", "a_b/other.tool"),
        ("mcp__a_b__work", "a b/work"),
        ("mcp__a_b__work_2", "a.b/work"),
        ("mcp__a_b__work_3", "a_b/work"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(seen[0], expect);
}
