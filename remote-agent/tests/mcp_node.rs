//! The MCP client against servers built on the official TypeScript SDK
//! (`local/tests/mcp_node/server.mjs`): the 2024-11-05 HTTP+SSE transport and form
//! elicitation.
#![allow(clippy::unwrap_used)] // tests may unwrap

mod mcp_support;

use reasonix_forward::policy::{McpServerSpec, McpTransportKind};
use reasonix_remote::mcp::{McpManager, McpServerState, McpSettings};
use reasonix_remote::tools::Tool;
use serde_json::json;

use mcp_support::NodeServer;

fn sse_spec(name: &str, url: &str) -> McpServerSpec {
    McpServerSpec {
        transport: Some(McpTransportKind::Sse),
        ..McpServerSpec::http(name, url)
    }
}

#[tokio::test]
async fn sse_transport_lists_and_calls_through_the_announced_endpoint() {
    let server = NodeServer::start(&["--transport", "sse"]);
    let dir = tempfile::tempdir().unwrap();
    let mut m = McpManager::new(McpSettings::default());
    m.add_host(sse_spec("old", &server.url), dir.path());
    m.start_all().await;
    let status = m.status();
    assert_eq!(status[0].state, McpServerState::Ready, "{status:?}");
    assert_eq!(status[0].transport, format!("sse: {}", server.url));
    assert!(
        status[0].tools.contains(&"mcp__old__echo".to_string()),
        "{status:?}"
    );
    let tools = m.tools();
    let echo = tools.iter().find(|t| t.name() == "mcp__old__echo").unwrap();
    // Two calls: answers come back on the one stream, matched by id.
    for word in ["first", "second"] {
        let out = echo.call(json!({"text": word}), None).await;
        assert!(!out.is_error, "{}", out.text);
        assert_eq!(out.text, format!("echo: {word}"));
    }
}

#[tokio::test]
async fn sse_endpoint_on_another_origin_is_refused() {
    let server = NodeServer::start(&["--transport", "sse"]);
    let evil = server.url.replace("/sse", "/evil-sse");
    let dir = tempfile::tempdir().unwrap();
    let mut m = McpManager::new(McpSettings::default());
    m.add_host(sse_spec("evil", &evil), dir.path());
    m.start_all().await;
    let status = m.status();
    match &status[0].state {
        McpServerState::Failed { reason } => {
            assert!(reason.contains("another origin"), "{reason}");
            assert!(reason.contains("127.0.0.2"), "names the endpoint: {reason}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn streamable_http_server_is_not_mistaken_for_sse() {
    // A Streamable HTTP server declared as `type = "sse"`: the GET is refused or carries no
    // endpoint event, and the error says so instead of hanging.
    let server = NodeServer::start(&["--transport", "http"]);
    let dir = tempfile::tempdir().unwrap();
    let mut m = McpManager::new(McpSettings::default());
    m.add_host(sse_spec("mixed", &server.url), dir.path());
    m.start_all().await;
    let status = m.status();
    assert!(
        matches!(&status[0].state, McpServerState::Failed { .. }),
        "{status:?}"
    );
}

/// Answers every elicitation with `name = Ada`, recording what was asked.
struct Ada(std::sync::Mutex<Vec<reasonix_remote::mcp::ElicitRequest>>);

impl reasonix_remote::mcp::Elicitor for Ada {
    fn elicit(
        &self,
        request: reasonix_remote::mcp::ElicitRequest,
    ) -> reasonix_remote::mcp::ElicitFuture {
        self.0.lock().unwrap().push(request);
        let mut m = serde_json::Map::new();
        m.insert("name".into(), json!("Ada"));
        Box::pin(async move { reasonix_remote::mcp::ElicitAnswer::Accept(m) })
    }
}

async fn elicits_over(spec: McpServerSpec) {
    let dir = tempfile::tempdir().unwrap();
    let name = spec.name.clone();
    let mut m = McpManager::new(McpSettings::default());
    m.add_host(spec, dir.path());
    m.start_all().await;
    let tools = m.tools();
    let ask = tools
        .iter()
        .find(|t| t.name() == format!("mcp__{name}__ask_name"))
        .unwrap_or_else(|| panic!("{:?}", m.status()));
    // The SDK sends `elicitation/create` only to a client that advertised the capability.
    let ada = std::sync::Arc::new(Ada(Default::default()));
    let out = ask.call_eliciting(json!({}), None, ada.clone()).await;
    assert!(!out.is_error, "{name}: {}", out.text);
    assert_eq!(out.text, r#"elicitation accept {"name":"Ada"}"#, "{name}");
    let asked = ada.0.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].server, name);
    assert_eq!(asked[0].message, "Which name should the fixture greet?");
    assert_eq!(asked[0].schema["required"], json!(["name"]));
    // Without anyone to ask, the client declines.
    let out = ask.call(json!({}), None).await;
    assert_eq!(out.text, "elicitation decline", "{name}");
}

#[tokio::test]
async fn elicitation_is_answered_over_stdio_sse_and_streamable_http() {
    let dir = mcp_support::node_fixture_dir();
    let script = dir.join("server.mjs").display().to_string();
    elicits_over(McpServerSpec::stdio(
        "fx",
        "node",
        &[&script, "--transport", "stdio"],
    ))
    .await;
    let sse = NodeServer::start(&["--transport", "sse"]);
    elicits_over(sse_spec("fxsse", &sse.url)).await;
    let http = NodeServer::start(&["--transport", "http"]);
    elicits_over(McpServerSpec::http("fxhttp", &http.url)).await;
}
