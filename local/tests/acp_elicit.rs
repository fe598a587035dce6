//! An MCP server's form elicitation answered by a real editor client (#35 §3): the official
//! ACP TypeScript SDK (`tests/acp_node/drive.mjs`) drives `reasonix acp`; the workspace's MCP
//! server (the official MCP TypeScript SDK, `tests/mcp_node/server.mjs`) asks for input in
//! the middle of a tool call; the editor gets it as `session/request_permission` and its
//! answer goes back to the server, whose tool result (what the model reads) reflects it.
//! A form whose required field has a default can be accepted with the default; one whose
//! required field has none offers only "Decline" (ACP has no forms).

mod acp_common;
mod common;

use acp_common::{add_config, drive_with, node, NodeScenario};
use reasonix_testkit::mock_provider::{MockReply, MockToolCall};
use serde_json::json;

const KEY_ENV: &str = "RX_ACP_ELICIT_KEY";
const KEY: &str = "sk-acp-elicit-test";

fn tool_result(req: &reasonix_testkit::mock_provider::RecordedRequest, id: &str) -> String {
    req.messages()
        .into_iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .map(|m| m["content"].to_string())
        .unwrap_or_else(|| panic!("no result of {id}: {:?}", req.messages()))
}

#[test]
fn an_editor_answers_an_mcp_elicitation_and_the_tool_result_reflects_it() {
    let server = node::sdk_dir("mcp_node", "@modelcontextprotocol/sdk").join("server.mjs");
    let NodeScenario { rt: _rt, mock, rig } = NodeScenario::new(
        vec![
            MockReply::tool_calls(
                vec![MockToolCall::new("p1", "mcp__fx__pick_target", "{}")],
                3,
            ),
            MockReply::text(&["deployed"]),
            MockReply::tool_calls(
                vec![MockToolCall::new("p2", "mcp__fx__pick_target", "{}")],
                3,
            ),
            MockReply::text(&["not deployed"]),
            MockReply::tool_calls(vec![MockToolCall::new("n1", "mcp__fx__ask_name", "{}")], 3),
            MockReply::text(&["nobody greeted"]),
        ],
        KEY_ENV,
        KEY,
    );
    add_config(&rig, "[permissions]\nmode = \"yolo\"\n");
    std::fs::write(
        rig.ws.join("reasonix.toml"),
        format!(
            "[[mcp]]\nname = \"fx\"\ncommand = \"node\"\nargs = [\"{}\", \"--transport\", \"stdio\"]\n",
            server.display()
        ),
    )
    .expect("reasonix.toml");
    let steps = json!([
        {"prompt": "deploy it", "elicit": "allow_once"},
        {"prompt": "deploy it again", "elicit": "reject_once"},
        {"prompt": "greet someone", "elicit": "reject_once"},
    ]);
    let report = drive_with(
        &rig,
        &["acp".into()],
        &[],
        "steps",
        Some(&steps.to_string()),
    );
    assert_eq!(
        report["stopReasons"],
        json!(["end_turn", "end_turn", "end_turn"]),
        "{report:#}"
    );
    let asked = node::asked(&report);
    assert_eq!(
        asked.len(),
        3,
        "one question per elicitation, no tool approvals in yolo: {asked:#?}"
    );
    for a in &asked[..2] {
        let title = a["title"].as_str().unwrap_or_default();
        assert!(
            title.contains("MCP server `fx` asks: Where should the fixture deploy?"),
            "{title}"
        );
        assert!(title.contains("fields: target"), "{title}");
        assert_eq!(
            a["options"],
            json!(["elicit_accept:allow_once", "elicit_decline:reject_once"]),
            "{a}"
        );
    }
    let title = asked[2]["title"].as_str().unwrap_or_default();
    assert!(
        title.contains("Which name should the fixture greet?"),
        "{title}"
    );
    assert!(title.contains("answer it in the reasonix TUI"), "{title}");
    assert_eq!(asked[2]["options"], json!(["elicit_decline:reject_once"]));

    let reqs = mock.requests();
    assert_eq!(reqs.len(), 6);
    let accepted = tool_result(&reqs[1], "p1");
    assert!(
        accepted.contains(r#"elicitation accept {\"target\":\"staging-7\"}"#),
        "the server got the editor's acceptance with the default: {accepted}"
    );
    let declined = tool_result(&reqs[3], "p2");
    assert!(declined.contains("elicitation decline"), "{declined}");
    assert!(!declined.contains("staging-7"), "{declined}");
    let declined = tool_result(&reqs[5], "n1");
    assert!(declined.contains("elicitation decline"), "{declined}");
}
