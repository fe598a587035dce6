//! The MCP client against real third-party servers: `mcp-server-time` (PyPI) and
//! `@modelcontextprotocol/server-everything` (npm), over stdio and Streamable HTTP.
//! Each test prints `SKIP:` and returns only when the server binary is not installed.
#![allow(clippy::unwrap_used)] // tests may unwrap

mod mcp_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reasonix_remote::mcp::{
    with_progress, HttpTransport, McpClient, McpManager, McpProgress, McpServerState, McpSettings,
    McpTransport, ProgressSink, StdioTransport,
};
use reasonix_remote::tools::{Tool, ToolRegistry};
use serde_json::json;

use mcp_support::{ctx, everything_server, free_port, time_server};

const T: Duration = Duration::from_secs(60);

fn stdio_of(spec: &reasonix_forward::policy::McpServerSpec) -> StdioTransport {
    StdioTransport::new(
        spec.command.clone().unwrap_or_default(),
        spec.args.clone(),
        spec.env.clone(),
        None,
    )
}

#[tokio::test]
async fn time_server_lists_and_answers() {
    let Some(spec) = time_server("time") else {
        return;
    };
    let conn = stdio_of(&spec).open().await.unwrap();
    let client = McpClient::connect("time", conn, T).await.unwrap();
    assert!(!client.info().protocol_version.is_empty());
    let tools = client.list_tools(T).await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"get_current_time"), "{names:?}");
    assert!(names.contains(&"convert_time"), "{names:?}");
    assert!(
        tools.iter().all(|t| t.read_only),
        "time tools carry readOnlyHint: true"
    );

    let r = client
        .call_tool(
            "get_current_time",
            json!({"timezone": "Europe/Paris"}),
            T,
            None,
        )
        .await
        .unwrap();
    assert!(!r.is_error, "{r:?}");
    let text = r.text();
    assert!(text.contains("Europe/Paris"), "{text}");
    // The answer carries today's year, which we compute independently from the clock.
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let year_approx = 1970 + secs / 31_556_952;
    assert!(
        text.contains(&year_approx.to_string()) || text.contains(&(year_approx + 1).to_string()),
        "{text}"
    );

    // A bad timezone is a tool error from the server, not a transport failure.
    let r = client
        .call_tool(
            "get_current_time",
            json!({"timezone": "Not/AZone"}),
            T,
            None,
        )
        .await;
    match r {
        Ok(r) => assert!(r.is_error, "{r:?}"),
        Err(e) => assert!(e.to_string().contains("error"), "{e}"),
    }
}

#[tokio::test]
async fn everything_server_echo_sum_and_progress() {
    let Some(spec) = everything_server("everything") else {
        return;
    };
    let conn = stdio_of(&spec).open().await.unwrap();
    let client = McpClient::connect("everything", conn, T).await.unwrap();
    let tools = client.list_tools(T).await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for want in ["echo", "get-sum", "trigger-long-running-operation"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }

    let r = client
        .call_tool("echo", json!({"message": "hello over stdio"}), T, None)
        .await
        .unwrap();
    assert!(r.text().contains("hello over stdio"), "{r:?}");
    let r = client
        .call_tool("get-sum", json!({"a": 19, "b": 23}), T, None)
        .await
        .unwrap();
    assert!(r.text().contains("42"), "{r:?}");

    let seen: Arc<Mutex<Vec<McpProgress>>> = Arc::default();
    let sink: ProgressSink = {
        let seen = seen.clone();
        Arc::new(move |p| seen.lock().unwrap().push(p))
    };
    let r = client
        .call_tool(
            "trigger-long-running-operation",
            json!({"duration": 1, "steps": 4}),
            T,
            Some(sink),
        )
        .await
        .unwrap();
    assert!(!r.is_error, "{r:?}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert!(
        seen.windows(2).all(|w| w[0].progress < w[1].progress),
        "{seen:?}"
    );
    assert_eq!(seen[3].total, Some(4.0));
    assert_eq!(seen[3].render(), "4/4");
}

#[tokio::test]
async fn manager_registers_both_servers_and_forwards_progress() {
    let (Some(time), Some(every)) = (time_server("time"), everything_server("every thing")) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut m = McpManager::new(McpSettings::default());
    m.add_host(every, dir.path());
    m.add_host(time, dir.path());
    m.start_all().await;
    let status = m.status();
    assert_eq!(
        status.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["every thing", "time"]
    );
    for s in &status {
        assert_eq!(s.state, McpServerState::Ready, "{s:?}");
        assert!(s.transport.starts_with("stdio: "), "{s:?}");
    }
    assert!(
        status[1]
            .tools
            .contains(&"mcp__time__get_current_time".to_string()),
        "{:?}",
        status[1]
    );

    let mut reg = ToolRegistry::builtin();
    let n = m.register_tools(&mut reg);
    assert!(n >= 5, "{n}");
    // The server name's space is sanitised; the policy sees readOnlyHint.
    let echo = reg.get("mcp__every_thing__echo").expect("echo registered");
    assert!(echo.read_only());
    let gzip = reg
        .get("mcp__every_thing__gzip-file-as-resource")
        .expect("gzip tool registered");
    assert!(!gzip.read_only(), "no readOnlyHint -> writer");
    // Canonical schema: keys sorted, `$schema` dropped.
    let p = echo.parameters();
    assert!(p.get("$schema").is_none(), "{p}");
    assert_eq!(p, reasonix_remote::tools::canonicalize(&p));

    let c = ctx(dir.path());
    let out = reg
        .get("mcp__time__get_current_time")
        .unwrap()
        .run(json!({"timezone": "Asia/Tokyo"}), &c)
        .await;
    assert!(!out.is_error && out.text.contains("Asia/Tokyo"), "{out:?}");
    let out = echo.run(json!({"message": "via registry"}), &c).await;
    assert!(
        !out.is_error && out.text.contains("via registry"),
        "{out:?}"
    );

    // Progress through the Tool trait reaches the sink installed with `with_progress`.
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink: ProgressSink = {
        let lines = lines.clone();
        Arc::new(move |p: McpProgress| lines.lock().unwrap().push(p.render()))
    };
    let long = reg
        .get("mcp__every_thing__trigger-long-running-operation")
        .unwrap();
    let out = with_progress(sink, long.run(json!({"duration": 1, "steps": 3}), &c)).await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(*lines.lock().unwrap(), ["1/3", "2/3", "3/3"]);
    // Outside `with_progress` no token is sent and nothing breaks.
    let out = long.run(json!({"duration": 0.2, "steps": 2}), &c).await;
    assert!(!out.is_error, "{out:?}");
    m.shutdown().await;
}

#[tokio::test]
async fn env_expansion_reaches_a_real_server() {
    let Some(mut spec) = everything_server("env") else {
        return;
    };
    // Unique names so parallel tests never see them.
    std::env::set_var("REASONIX_MCP_TEST_SET_7", "from-env");
    spec.command = Some("${REASONIX_MCP_TEST_UNSET_CMD_7:-mcp-server-everything}".into());
    spec.args = vec!["${REASONIX_MCP_TEST_UNSET_MODE_7:-stdio}".into()];
    spec.env.insert(
        "PROBE_VALUE".into(),
        "${REASONIX_MCP_TEST_SET_7}+${REASONIX_MCP_TEST_UNSET_7:-fallback}".into(),
    );
    let dir = tempfile::tempdir().unwrap();
    let mut m = McpManager::new(McpSettings::default());
    m.add_host(spec, dir.path());
    m.start_all().await;
    let tools = m.tools();
    let get_env = tools
        .iter()
        .find(|t| t.name() == "mcp__env__get-env")
        .expect("get-env");
    let out = get_env.call(json!({}), None).await;
    assert!(!out.is_error, "{out:?}");
    assert!(
        out.text.contains("from-env+fallback"),
        "{}",
        &out.text[..out.text.len().min(400)]
    );

    // An unset variable without default: the server is listed as failed, with the name.
    let Some(mut bad) = everything_server("bad") else {
        return;
    };
    bad.env
        .insert("X".into(), "${REASONIX_MCP_TEST_SURELY_UNSET_7}".into());
    let mut m = McpManager::new(McpSettings::default());
    m.add_host(bad, dir.path());
    m.start_all().await;
    let st = &m.status()[0];
    match &st.state {
        McpServerState::Failed { reason } => {
            assert!(
                reason.contains("REASONIX_MCP_TEST_SURELY_UNSET_7") && reason.contains("env.X"),
                "{reason}"
            )
        }
        other => panic!("expected failed, got {other:?}"),
    }
}

#[tokio::test]
async fn streamable_http_against_everything() {
    if mcp_support::on_path("mcp-server-everything").is_none() {
        eprintln!("SKIP: mcp-server-everything is not installed (npm install -g @modelcontextprotocol/server-everything)");
        return;
    }
    let port = free_port();
    let mut child = tokio::process::Command::new("mcp-server-everything")
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Readiness: the port accepts connections (hang guard 30 s).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "HTTP server did not come up"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let url = format!("http://127.0.0.1:{port}/mcp");
    let t = HttpTransport::new(&url, Default::default()).unwrap();
    assert_eq!(t.describe(), format!("http: {url}"));
    let client = McpClient::connect("http", t.open().await.unwrap(), T)
        .await
        .unwrap();
    let tools = client.list_tools(T).await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"), "{tools:?}");
    // Two calls in a row work only if the session id from initialize is sent back.
    let r = client
        .call_tool("echo", json!({"message": "over http"}), T, None)
        .await
        .unwrap();
    assert!(r.text().contains("over http"), "{r:?}");
    let r = client
        .call_tool("get-sum", json!({"a": 2, "b": 3}), T, None)
        .await
        .unwrap();
    assert!(r.text().contains('5'), "{r:?}");
    // Progress arrives inside the SSE response of the call.
    let n = Arc::new(Mutex::new(0usize));
    let sink: ProgressSink = {
        let n = n.clone();
        Arc::new(move |_| *n.lock().unwrap() += 1)
    };
    let r = client
        .call_tool(
            "trigger-long-running-operation",
            json!({"duration": 1, "steps": 3}),
            T,
            Some(sink),
        )
        .await
        .unwrap();
    assert!(!r.is_error, "{r:?}");
    assert_eq!(*n.lock().unwrap(), 3);

    // Server gone: a call fails promptly with a transport error, not a hang.
    child.kill().await.unwrap();
    let e = client
        .call_tool("echo", json!({"message": "x"}), T, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("HTTP request") || e.contains("closed"), "{e}");
}
