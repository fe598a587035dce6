//! MCP servers on the official TypeScript SDK (`local/tests/mcp_node/server.mjs`) end to end:
//! real `reasonix run` → real `reasonix-remote` → the workspace's server. A headless run
//! declines a server's elicitation with a notice saying so, and the tool result is what the
//! server made of the decline.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;

use std::path::{Path, PathBuf};

use common::{reasonix, LocalRig};
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::Value;

fn fixture() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_node");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "the MCP TypeScript SDK is not installed: run `npm ci --prefix local/tests/mcp_node` (.ci/run does)"
    );
    dir.join("server.mjs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_headless_run_declines_an_elicitation_with_a_notice() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(vec![MockToolCall::new("c1", "mcp__fx__ask_name", "{}")], 3),
        MockReply::text(&["done"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_EL_KEY", "sk-el");
    let cfg = rig.home.join("config.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("\n[permissions]\nmode = \"yolo\"\n");
    std::fs::write(&cfg, text).unwrap();
    std::fs::write(
        rig.ws.join("reasonix.toml"),
        format!(
            "[[mcp]]\nname = \"fx\"\ncommand = \"node\"\nargs = [\"{}\", \"--transport\", \"stdio\"]\n",
            fixture().display()
        ),
    )
    .unwrap();
    let out = tokio::task::spawn_blocking(move || {
        let out = reasonix(&rig, &["run", "--json", "greet someone"]);
        drop(rig);
        out
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let events: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        events.iter().any(|e| e["type"] == "notice"
            && e["text"]
                .as_str()
                .is_some_and(|t| t.contains("MCP server `fx` asked for input")
                    && t.contains("Which name should the fixture greet?")
                    && t.contains("headless run declines"))),
        "{stdout}\n{stderr}"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "{stdout}\n{stderr}");
    let result = requests[1]
        .messages()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "c1")
        .map(|m| m["content"].to_string())
        .unwrap_or_else(|| panic!("{:?}", requests[1].messages()));
    assert!(result.contains("elicitation decline"), "{result}");
}
