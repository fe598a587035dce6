//! Custom slash commands end to end (real `reasonix` → real `reasonix-remote` over pipes →
//! the scripted mock provider): `reasonix run "/name args"` expands a workspace command
//! (read by the host) and a user command (read on the laptop) with `$ARGUMENTS`, `$1`, `$2`
//! and `$$`; what the provider received proves the expansion. A broken file is skipped
//! with a notice naming it; a user file wins over the workspace file of the same name.

mod common;

use std::process::{Command, Stdio};

use common::{ok, reasonix, LocalRig};
use reasonix_testkit::mock_provider::{MockProvider, MockReply};

fn setup(base_url: &str) -> LocalRig {
    LocalRig::new(base_url, "RX_CMD_KEY", "sk-commands")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_expands_workspace_and_user_commands_and_skips_a_broken_file() {
    let mock = MockProvider::start(vec![
        MockReply::text(&["reviewed"]),
        MockReply::text(&["deployed"]),
    ])
    .await;
    let env = setup(&mock.base_url());
    let ws_cmds = env.ws.join(".reasonix/commands");
    std::fs::create_dir_all(ws_cmds.join("git")).expect("ws commands");
    std::fs::write(
        ws_cmds.join("git/review.md"),
        "---\ndescription: Review a change\nargument-hint: FILE FOCUS\nallowed-tools: Bash(rm:*)\n---\nReview $1 with a focus on $2.\nAll arguments: $ARGUMENTS; budget $$5.\n",
    )
    .expect("review");
    std::fs::write(
        ws_cmds.join("broken.md"),
        "---\ndescription: never closed\n",
    )
    .expect("broken");
    std::fs::write(ws_cmds.join("deploy.md"), "WORKSPACE deploy $1").expect("ws deploy");
    let user_cmds = env.home.join("commands");
    std::fs::create_dir_all(&user_cmds).expect("user commands");
    std::fs::write(user_cmds.join("deploy.md"), "USER deploy to $1 now").expect("user deploy");

    let out = tokio::task::block_in_place(|| {
        reasonix(&env, &["run", "/git:review src/lib.rs \"error paths\""])
    });
    ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(".reasonix/commands/broken.md") && stderr.contains("never closed"),
        "{stderr}"
    );
    assert!(
        stderr.contains(".reasonix/commands/deploy.md") && stderr.contains("user's commands win"),
        "{stderr}"
    );
    let last_user = |i: usize| -> String {
        let reqs = mock.requests();
        let msgs = reqs[i].messages();
        let m = msgs
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .expect("user message");
        match m["content"].as_str() {
            Some(s) => s.to_string(),
            None => m["content"].to_string(),
        }
    };
    let sent = last_user(0);
    assert!(
        sent.contains("Review src/lib.rs with a focus on error paths.\nAll arguments: src/lib.rs \"error paths\"; budget $5."),
        "{sent}"
    );
    assert!(
        !sent.contains("$ARGUMENTS") && !sent.contains("description:"),
        "{sent}"
    );

    // The user's file of the same name wins over the workspace's.
    ok(&tokio::task::block_in_place(|| {
        reasonix(&env, &["run", "/deploy staging"])
    }));
    let sent = last_user(1);
    assert!(sent.contains("USER deploy to staging now"), "{sent}");

    // An unknown command is an error naming the commands there are; nothing is sent.
    let out = tokio::task::block_in_place(|| reasonix(&env, &["run", "/nosuch x"]));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown command /nosuch") && stderr.contains("/git:review"),
        "{stderr}"
    );
    assert_eq!(mock.requests().len(), 2);
}

/// The workspace declares the reference MCP server `everything` (prompts `args-prompt` with
/// `city` required and `state` optional; resources `demo://resource/static/document/*`).
fn declare_everything(env: &LocalRig) {
    assert!(
        Command::new("mcp-server-everything")
            .arg("--help")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok(),
        "mcp-server-everything is not installed; run .ci/run (npm install -g @modelcontextprotocol/server-everything)"
    );
    std::fs::write(
        env.ws.join("reasonix.toml"),
        "[[mcp]]\nname = \"everything\"\ncommand = \"mcp-server-everything\"\nargs = [\"stdio\"]\n",
    )
    .expect("project");
}

fn last_user_text(mock: &MockProvider, i: usize) -> String {
    let reqs = mock.requests();
    let msgs = reqs[i].messages();
    let m = msgs
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .expect("user message");
    match m["content"].as_str() {
        Some(s) => s.to_string(),
        None => m["content"].to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_expands_an_mcp_prompt_on_the_host_and_attaches_an_mcp_resource() {
    let mock = MockProvider::start(vec![
        MockReply::text(&["weather"]),
        MockReply::text(&["read it"]),
    ])
    .await;
    let env = setup(&mock.base_url());
    declare_everything(&env);

    // Positional (`Paris`, the first declared argument) and key=value (`state=TX`).
    ok(&tokio::task::block_in_place(|| {
        reasonix(
            &env,
            &["run", "/mcp__everything__args-prompt state=TX Paris"],
        )
    }));
    let sent = last_user_text(&mock, 0);
    assert!(sent.contains("What's weather in Paris, TX?"), "{sent}");
    assert!(!sent.contains("/mcp__"), "{sent}");

    // A missing required argument: the error names it and the prompt's arguments; nothing
    // reaches the provider.
    let out = tokio::task::block_in_place(|| {
        reasonix(&env, &["run", "/mcp__everything__args-prompt state=TX"])
    });
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("missing required argument `city`")
            && stderr.contains("city (required), state"),
        "{stderr}"
    );
    assert_eq!(mock.requests().len(), 1);

    // `@server:uri` attaches the resource's text; an unknown server is a notice and the
    // rest of the prompt still goes.
    let out = tokio::task::block_in_place(|| {
        reasonix(
            &env,
            &[
                "run",
                "summarise @everything:demo://resource/static/document/features.md and @nosrv:x://y",
            ],
        )
    });
    ok(&out);
    let sent = last_user_text(&mock, 1);
    assert!(
        sent.contains("<attached-resource server=\"everything\" uri=\"demo://resource/static/document/features.md\">")
            && sent.contains("# Everything Server - Features"),
        "{sent}"
    );
    assert!(sent.starts_with("summarise @everything:"), "{sent}");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(all.contains("no MCP server `nosrv`"), "{all}");
}
