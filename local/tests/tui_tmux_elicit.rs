//! An MCP server's elicitation answered in the real TUI under tmux: the server (on the
//! official TypeScript SDK, `local/tests/mcp_node/server.mjs`) asks for a name during a tool
//! call; the form modal shows its message and field, the typed answer goes back to the
//! server, and the model gets what the server made of it.

mod term_common;

use std::path::{Path, PathBuf};

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use term_common::{stop_daemons, write_mock_config, Tmux};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tui_answers_an_mcp_elicitation_form() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_node");
    assert!(
        fixture.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "the MCP TypeScript SDK is not installed: run `npm ci --prefix local/tests/mcp_node` (.ci/run does)"
    );
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(vec![MockToolCall::new("a1", "mcp__fx__ask_name", "{}")], 3),
        MockReply::text(&["Greeted them."]),
    ])
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::write(
        ws.join("reasonix.toml"),
        format!(
            "[[mcp]]\nname = \"fx\"\ncommand = \"node\"\nargs = [\"{}\", \"--transport\", \"stdio\"]\n",
            fixture.join("server.mjs").display()
        ),
    )
    .expect("reasonix.toml");
    write_mock_config(
        &home,
        &mock.base_url(),
        "RX_TUI_EL_KEY",
        "[permissions]\nmode = \"yolo\"\n",
    );
    let cmd = format!(
        "cd {} && env -u XDG_RUNTIME_DIR REASONIX_HOME={} {}",
        ws.display(),
        home.display(),
        PathBuf::from(env!("CARGO_BIN_EXE_reasonix")).display()
    );
    let t = Tmux::tui(&cmd);
    tokio::task::block_in_place(|| {
        t.wait_for("connected");
        t.send_keys(&["greet someone", "Enter"]);
        let form = t.wait_for("An MCP server asks for input");
        assert!(
            form.contains("Which name should the fixture greet?"),
            "{form}"
        );
        assert!(form.contains("Name — Who to greet [string]"), "{form}");
        // An empty answer to a required field is asked again.
        t.send_keys(&["Enter"]);
        t.wait_for("name is required");
        t.send_keys(&["-l", "Ada"]);
        t.send_keys(&["Enter"]);
        t.wait_for("Greeted them.");
    });
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    let result = reqs[1]
        .messages()
        .into_iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "a1")
        .map(|m| m["content"].to_string())
        .expect("the tool result reached the model");
    assert!(
        result.contains(r#"elicitation accept {\"name\":\"Ada\"}"#),
        "{result}"
    );
    t.send_keys(&["C-c"]);
    t.send_keys(&["C-c"]);
    stop_daemons(&home);
}
