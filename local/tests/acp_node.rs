//! `reasonix acp` driven by a real ACP client: the official TypeScript SDK
//! (`@agentclientprotocol/sdk`, installed in `tests/acp_node/` by `.ci/run`) in a small Node
//! script, against the real binary, the real host binary and the scripted mock provider.
//! The script prints what it received, in order; these tests check that report and the
//! files on disk.

mod acp_common;
mod common;
mod term_common;

use std::path::Path;
use std::time::Duration;

use acp_common::{drive_with, NodeScenario};
use common::{host_bin, LocalRig};
use reasonix_testkit::mock_provider::{MockReply, MockToolCall};
use serde_json::{json, Value};

const KEY_ENV: &str = "RX_ACP_NODE_KEY";
const KEY: &str = "sk-acp-node-test";

/// The `agent_servers` entry of the `n`th JSON example in docs/ACP.md: (command, args).
pub fn zed_example(n: usize) -> (String, Vec<String>) {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/ACP.md"))
        .expect("docs/ACP.md");
    let block = doc
        .split("```json\n")
        .nth(n + 1)
        .and_then(|b| b.split("```").next())
        .unwrap_or_else(|| panic!("docs/ACP.md has no JSON example {n}"));
    let v: Value = serde_json::from_str(block).expect("the Zed example is valid JSON");
    let servers = v["agent_servers"].as_object().expect("agent_servers");
    let (_, entry) = servers.iter().next().expect("one agent server");
    assert_eq!(entry["type"], "custom");
    let args = entry["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string arg").to_string())
        .collect();
    (
        entry["command"].as_str().expect("command").to_string(),
        args,
    )
}

/// Run one scenario of `drive.mjs` with the local Zed example's arguments; its JSON report.
fn drive(rig: &LocalRig, scenario: &str, arg: Option<&str>) -> Value {
    let (command, args) = zed_example(0);
    assert_eq!(command, "reasonix");
    drive_with(rig, &args, &[], scenario, arg)
}

fn updates(report: &Value) -> Vec<&Value> {
    report["log"].as_array().expect("log").iter().collect()
}

/// The agent's message text in `log`, joined.
fn said(log: &[&Value]) -> String {
    log.iter()
        .filter(|v| v["kind"] == "agent_message_chunk")
        .filter_map(|v| v["text"].as_str())
        .collect()
}

/// In the log of a `load` scenario: where the answer to `session/load` and the replayed
/// call `tool_id` stand, asserting the replay came before that answer in order (the user's
/// turn `user_text`, the call, its completion).
fn replayed(log: &[&Value], user_text: &str, tool_id: &str) -> (usize, usize) {
    let loaded = position(log, |v| v["at"] == "loaded");
    let user = position(log, |v| {
        v["kind"] == "user_message_chunk" && v["text"] == user_text
    });
    let tool = position(log, |v| v["kind"] == "tool_call" && v["id"] == tool_id);
    let tool_done = position(log, |v| {
        v["kind"] == "tool_call_update" && v["id"] == tool_id && v["status"] == "completed"
    });
    assert!(
        user < tool && tool < tool_done && tool_done < loaded,
        "{log:#?}"
    );
    (loaded, tool)
}

fn position(log: &[&Value], pred: impl Fn(&Value) -> bool) -> usize {
    log.iter()
        .position(|v| pred(v))
        .unwrap_or_else(|| panic!("not in the log: {log:#?}"))
}

#[test]
fn prompt_with_an_approved_edit_streams_updates_in_order_and_changes_the_file() {
    let NodeScenario { rt: _rt, mock, rig } = NodeScenario::new(
        vec![
            MockReply::tool_calls(
                vec![
                MockToolCall::new(
                    "c-plan",
                    "todo_write",
                    &json!({"todos": [
                        {"content": "edit a.txt", "status": "in_progress"},
                        {"content": "check it", "status": "pending"}]})
                    .to_string(),
                ),
                MockToolCall::new(
                    "c-edit",
                    "edit_file",
                    &json!({"path": "a.txt", "old_string": "old line", "new_string": "new line"})
                        .to_string(),
                ),
            ],
                5,
            ),
            MockReply::tool_calls(
                vec![MockToolCall::new(
                    "c-cat",
                    "bash",
                    &json!({"command": "cat a.txt"}).to_string(),
                )],
                3,
            ),
            MockReply::Reasoning {
                reasoning: vec!["the file ".into(), "looks right".into()],
                text: vec!["Done: ".into(), "a.txt changed.".into()],
            },
        ],
        KEY_ENV,
        KEY,
    );
    std::fs::write(rig.home.join(".env"), format!("{KEY_ENV}={KEY}\n")).expect(".env");
    std::fs::write(rig.ws.join("a.txt"), "old line\n").expect("a.txt");

    let report = drive(&rig, "edit", None);
    assert_eq!(report["stopReason"], "end_turn", "{report:#}");
    assert_eq!(report["init"]["protocolVersion"], 1);
    assert_eq!(report["init"]["agentCapabilities"]["loadSession"], true);
    assert_eq!(
        report["agentExit"], 0,
        "the agent exits when the editor closes stdin"
    );
    assert_eq!(
        std::fs::read_to_string(rig.ws.join("a.txt")).expect("a.txt"),
        "new line\n"
    );

    let log = updates(&report);
    // The slash commands are announced once the session exists.
    let cmds = position(&log, |v| v["kind"] == "available_commands_update");
    assert_eq!(
        log[cmds]["commands"],
        // Then the built-in skills (#33 §3), listed like command files.
        json!(["continue", "status", "goal", "rewind", "explore", "init", "review"])
    );
    // The edit: announced with its diff, asked, run, finished — in that order.
    let announced = position(&log, |v| v["kind"] == "tool_call" && v["id"] == "c-edit");
    assert_eq!(log[announced]["toolKind"], "edit");
    // Pending is the protocol's default status (the SDK omits it on the wire).
    assert!(
        log[announced]["status"].is_null() || log[announced]["status"] == "pending",
        "{:?}",
        log[announced]
    );
    let ws = std::fs::canonicalize(&rig.ws).expect("ws");
    let abs = ws.join("a.txt").display().to_string();
    assert_eq!(log[announced]["locations"], json!([abs]));
    let diff = &log[announced]["content"][0];
    assert_eq!(diff["type"], "diff");
    assert_eq!(diff["oldText"], "old line");
    assert_eq!(diff["newText"], "new line");
    let asked = position(&log, |v| v["at"] == "permission");
    assert_eq!(log[asked]["id"], "c-edit", "the permission names the call");
    assert_eq!(
        log[asked]["options"],
        json!([
            "allow_once:allow_once",
            "allow_always:allow_always",
            "reject:reject_once"
        ])
    );
    let permissions = log.iter().filter(|v| v["at"] == "permission").count();
    assert_eq!(permissions, 1, "todo_write and `cat` need no approval");
    let running = position(&log, |v| {
        v["kind"] == "tool_call_update" && v["id"] == "c-edit" && v["status"] == "in_progress"
    });
    let done = position(&log, |v| {
        v["kind"] == "tool_call_update" && v["id"] == "c-edit" && v["status"] == "completed"
    });
    assert!(
        announced < asked && asked < running && running < done,
        "{log:#?}"
    );
    // The plan of todo_write.
    let plan = position(&log, |v| v["kind"] == "plan");
    assert_eq!(
        log[plan]["entries"],
        json!(["in_progress:edit a.txt", "pending:check it"])
    );
    // bash: an execute call whose output is a fenced block with the new content.
    let cat = position(&log, |v| v["kind"] == "tool_call" && v["id"] == "c-cat");
    assert_eq!(log[cat]["toolKind"], "execute");
    let cat_done = position(&log, |v| {
        v["kind"] == "tool_call_update" && v["id"] == "c-cat" && v["status"] == "completed"
    });
    let out = log[cat_done]["content"][0]["content"]["text"]
        .as_str()
        .expect("text output");
    assert!(
        out.starts_with("```\n") && out.contains("new line"),
        "{out}"
    );
    assert!(done < cat && cat < cat_done);
    // Reasoning then answer, streamed as chunks after the tools.
    let thought: String = log
        .iter()
        .filter(|v| v["kind"] == "agent_thought_chunk")
        .map(|v| v["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(thought, "the file looks right");
    let answer: String = log
        .iter()
        .filter(|v| v["kind"] == "agent_message_chunk")
        .map(|v| v["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(answer, "Done: a.txt changed.");
    let first_thought = position(&log, |v| v["kind"] == "agent_thought_chunk");
    let first_answer = position(&log, |v| v["kind"] == "agent_message_chunk");
    assert!(cat_done < first_thought && first_thought < first_answer);
    // The editor's own prompt is not echoed back.
    assert!(!log.iter().any(|v| v["kind"] == "user_message_chunk"));
    // The model calls went through the laptop gateway with the laptop's key.
    assert_eq!(mock.request_count(), 3);
    assert_eq!(
        mock.requests()[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
}

#[test]
fn cancel_mid_stream_ends_the_prompt_as_cancelled_and_the_session_goes_on() {
    let long: Vec<String> = (0..200).map(|i| format!("word{i} ")).collect();
    let NodeScenario {
        rt: _rt,
        mock: _mock,
        rig,
    } = NodeScenario::new(
        vec![
            MockReply::text(&long).slow(Duration::from_millis(50)),
            MockReply::text(&["short"]),
        ],
        KEY_ENV,
        KEY,
    );
    let report = drive(&rig, "cancel", None);
    assert_eq!(report["stopReason"], "cancelled", "{report:#}");
    assert_eq!(report["secondStopReason"], "end_turn");
    let log = updates(&report);
    let sent = position(&log, |v| v["at"] == "cancel-sent");
    let streamed = log
        .iter()
        .filter(|v| v["kind"] == "agent_message_chunk")
        .filter_map(|v| v["text"].as_str())
        .filter(|t| t.starts_with("word"))
        .count();
    assert!(sent > 0);
    assert!(
        streamed < 200,
        "the stream was cut, not played to its end ({streamed} chunks)"
    );
    assert!(log
        .iter()
        .any(|v| v["kind"] == "agent_message_chunk" && v["text"] == "short"));
}

#[test]
fn session_load_replays_a_session_made_with_run_and_continues_it() {
    let NodeScenario { rt: _rt, mock, rig } = NodeScenario::new(
        vec![
            MockReply::tool_calls(
                vec![MockToolCall::new(
                    "c-ls",
                    "ls",
                    &json!({"path": "."}).to_string(),
                )],
                3,
            ),
            MockReply::text(&["first ", "answer"]),
            MockReply::text(&["second answer"]),
        ],
        KEY_ENV,
        KEY,
    );
    let out = common::reasonix_command(&rig, &host_bin(), &["run", "--json", "what is here?"])
        .env("REASONIX_IDLE_TIMEOUT_SECS", "60")
        .output()
        .expect("reasonix run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "run: {stdout}");
    let session = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "session")
        .and_then(|v| v["session"].as_str().map(str::to_string))
        .expect("run names its session");

    let report = drive(&rig, "load", Some(&session));
    let log = updates(&report);
    // History, before the answer to session/load: the user's turn, the tool, the answer.
    let (loaded, _) = replayed(&log, "what is here?", "c-ls");
    let first = said(&log[..loaded]);
    assert_eq!(first, "first answer", "{log:#?}");
    assert!(log[..loaded]
        .iter()
        .all(|v| v["session"] == session.as_str() || v["at"] != "update"));
    // The loaded session goes on with its history: the model sees the first turn.
    assert_eq!(report["stopReason"], "end_turn");
    let after = said(&log[loaded..]);
    assert_eq!(after, "second answer");
    let last = mock.requests().last().expect("a request").messages();
    let texts: Vec<String> = last.iter().map(|m| m.to_string()).collect();
    assert!(
        texts.iter().any(|m| m.contains("what is here?")),
        "{texts:#?}"
    );
    assert!(texts.iter().any(|m| m.contains("and now?")));
    // Bad requests are JSON-RPC errors and the agent lives on.
    assert_eq!(report["unknownLoad"]["code"], -32002, "{report:#}");
    assert_eq!(report["unknownPrompt"]["code"], -32002);
}

#[test]
fn editor_stdio_mcp_servers_run_on_the_laptop_and_other_transports_are_declined() {
    let NodeScenario { rt: _rt, mock, rig } = NodeScenario::new(
        vec![
            MockReply::tool_calls(
                vec![MockToolCall::new("c-hello", "mcp__ed__hello", "{}")],
                2,
            ),
            MockReply::text(&["done"]),
        ],
        "RX_ACP_MCP_KEY",
        "sk-acp-mcp-1",
    );
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_script_server.js");
    let report = drive(&rig, "mcp", Some(&server.display().to_string()));
    assert_eq!(report["stopReason"], "end_turn", "{report:#}");
    let requests = mock.requests();
    let tools: Vec<&str> = requests[0].body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(tools.contains(&"mcp__ed__hello"), "{tools:?}");
    assert!(
        !tools.iter().any(|t| t.starts_with("mcp__web__")),
        "{tools:?}"
    );
    let results: Vec<String> = requests[1]
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect();
    assert!(
        results.iter().any(|c| c.contains("hello from ed")),
        "the editor's server answered the call: {results:?}"
    );
    let log = std::fs::read_to_string(rig.dir.path().join("ed-starts.log")).expect("starts log");
    assert_eq!(log.lines().count(), 1, "{log}");
    let notice = report["log"]
        .as_array()
        .expect("log")
        .iter()
        .map(|e| e.to_string())
        .find(|t| t.contains("editor MCP servers not used"))
        .unwrap_or_else(|| panic!("no notice about the HTTP server: {report:#}"));
    assert!(notice.contains("`web` (HTTP)"), "{notice}");
}

/// `session/load` of a session made in the real TUI (in tmux, as a user makes it: a prompt, an
/// edit approved in the dialog, an answer; then `/quit`): the editor receives that history
/// as updates (user message, tool call with its diff and result, answer) without being asked
/// the answered approval again, and prompts on in it with the history in the model's context.
/// The real TUI rather than its client calls, because the point is that what the TUI writes
/// (approvals answered interactively, its session settings) loads.
#[test]
fn session_load_replays_a_session_made_in_the_tui_and_continues_it() {
    let NodeScenario { rt: _rt, mock, rig } = NodeScenario::new(
        vec![
            MockReply::tool_calls(
                vec![MockToolCall::new(
                "c-tui-edit",
                "edit_file",
                &json!({"path": "greet.txt", "old_string": "hello", "new_string": "hello, world"})
                    .to_string(),
            )],
                5,
            ),
            MockReply::text(&["Greeting ", "updated."]),
            MockReply::text(&["still here"]),
        ],
        KEY_ENV,
        KEY,
    );
    std::fs::write(rig.ws.join("greet.txt"), "hello\n").expect("greet");
    let bin = env!("CARGO_BIN_EXE_reasonix");
    let cmd = format!(
        "cd {} && exec env -u XDG_RUNTIME_DIR REASONIX_HOME={} REASONIX_REMOTE_BIN={} REASONIX_IDLE_TIMEOUT_SECS=60 {}",
        term_common::sh_quote(&rig.ws.display().to_string()),
        term_common::sh_quote(&rig.home.display().to_string()),
        term_common::sh_quote(&host_bin().display().to_string()),
        term_common::sh_quote(bin),
    );
    let guard = Duration::from_secs(60);
    let tui = term_common::Tmux::start(rig.dir.path(), &cmd, 120, 40, 2000);
    tui.wait_screen(guard, "the TUI connected", |s| s.contains("connected"));
    tui.line("fix the greeting");
    let dialog = tui.wait_screen(guard, "the approval dialog", |s| {
        s.contains("Approval needed")
    });
    assert!(dialog.contains("greet.txt"), "{dialog}");
    tui.type_text("y");
    tui.wait_screen(guard, "the answer", |s| s.contains("Greeting updated."));
    assert_eq!(
        std::fs::read_to_string(rig.ws.join("greet.txt")).expect("greet"),
        "hello, world\n"
    );
    tui.line("/quit");
    tui.wait_screen(guard, "the TUI to exit", |_| tui.pane_dead());
    drop(tui);

    let out = common::reasonix_command(&rig, &host_bin(), &["sessions", "--json"])
        .env_remove("REASONIX_IDLE_TIMEOUT_SECS")
        .output()
        .expect("reasonix sessions");
    let listed = String::from_utf8_lossy(&out.stdout);
    let ids: Vec<String> = listed
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["id"].as_str().map(str::to_string))
        .collect();
    assert_eq!(ids.len(), 1, "the TUI made one session: {listed}");
    let session = &ids[0];

    let report = drive(&rig, "load", Some(session));
    let log = updates(&report);
    let (loaded, tool) = replayed(&log, "fix the greeting", "c-tui-edit");
    assert_eq!(log[tool]["toolKind"], "edit");
    assert_eq!(log[tool]["content"][0]["newText"], "hello, world");
    let first = said(&log[..loaded]);
    assert_eq!(first, "Greeting updated.", "{log:#?}");
    assert!(
        !log.iter().any(|v| v["at"] == "permission"),
        "the approval answered in the TUI is not asked again: {log:#?}"
    );
    assert_eq!(report["stopReason"], "end_turn", "{report:#}");
    let after = said(&log[loaded..]);
    assert_eq!(after, "still here");
    assert_eq!(mock.request_count(), 3);
    let last: Vec<String> = mock.requests()[2]
        .messages()
        .iter()
        .map(|m| m.to_string())
        .collect();
    assert!(
        last.iter().any(|m| m.contains("fix the greeting")),
        "{last:#?}"
    );
    assert!(
        last.iter().any(|m| m.contains("Greeting updated.")),
        "{last:#?}"
    );
    assert!(last.iter().any(|m| m.contains("and now?")), "{last:#?}");
}

/// Custom commands: the workspace's (`.reasonix/commands/`, read on the host) and the user's
/// (`<home>/commands/`) are advertised after our own with their description and argument
/// hint, a broken file is named in a notice, and `/name args` is expanded as the TUI does it
/// (what the provider received proves it); an unknown `/path` goes to the model as typed.
#[test]
fn custom_commands_are_advertised_and_expanded_like_in_the_tui() {
    let NodeScenario { rt: _rt, mock, rig } = NodeScenario::new(
        vec![
            MockReply::text(&["reviewed"]),
            MockReply::text(&["committed"]),
            MockReply::text(&["as typed"]),
        ],
        KEY_ENV,
        KEY,
    );
    let ws_cmds = rig.ws.join(".reasonix/commands");
    std::fs::create_dir_all(&ws_cmds).expect("ws commands");
    std::fs::write(
        ws_cmds.join("review.md"),
        "---\ndescription: Review one file\nargument-hint: FILE FOCUS\n---\nReview $1 for $2 (all: $ARGUMENTS), budget $$5.\n",
    )
    .expect("review.md");
    std::fs::write(
        ws_cmds.join("broken.md"),
        "---\ndescription: never closed\n",
    )
    .expect("broken");
    let user_cmds = rig.home.join("commands/git");
    std::fs::create_dir_all(&user_cmds).expect("user commands");
    std::fs::write(
        user_cmds.join("commit.md"),
        "Write a commit message: $ARGUMENTS\n",
    )
    .expect("commit.md");
    let steps = json!([
        {"prompt": "/review src/main.rs \"error handling\""},
        {"prompt": "/git:commit fix the typo"},
        {"prompt": "/etc/hosts is wrong"},
    ]);
    let report = drive(&rig, "steps", Some(&steps.to_string()));
    assert_eq!(
        report["stopReasons"],
        json!(["end_turn", "end_turn", "end_turn"]),
        "{report:#}"
    );
    let log = updates(&report);
    let cmds = position(&log, |v| v["kind"] == "available_commands_update");
    assert_eq!(
        log[cmds]["described"],
        json!([
            [
                "continue",
                "Continue a turn that paused at its step limit",
                null
            ],
            ["status", "Show the host daemon's status", null],
            [
                "goal",
                "Keep working toward an objective, turn after turn, also with no editor attached",
                "objective, or status | pause | resume | clear"
            ],
            [
                "rewind",
                "Restore files and/or conversation to just before turn N",
                "turn number, then code | conversation | both"
            ],
            [
                "explore",
                "Read-only research that returns a map of the code it was asked about",
                null
            ],
            ["git:commit", "Write a commit message: $ARGUMENTS", null],
            [
                "init",
                "Study the repository and write or update AGENTS.md (or REASONIX.md) for coding agents",
                null
            ],
            // The workspace's command file wins over the built-in skill of the same name.
            ["review", "Review one file", "FILE FOCUS"],
        ]),
        "{log:#?}"
    );
    let notice = log
        .iter()
        .filter(|v| v["kind"] == "agent_thought_chunk")
        .filter_map(|v| v["text"].as_str())
        .find(|t| t.contains("broken.md"))
        .unwrap_or_else(|| panic!("no notice names the broken file: {log:#?}"));
    assert!(notice.contains("skipped"), "{notice}");
    let user_text = |i: usize| -> String {
        let msgs = mock.requests()[i].messages();
        let last = msgs
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .expect("a user message");
        last["content"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| last["content"].to_string())
    };
    assert_eq!(mock.request_count(), 3);
    assert_eq!(
        user_text(0),
        "Review src/main.rs for error handling (all: src/main.rs \"error handling\"), budget $5."
    );
    assert_eq!(user_text(1), "Write a commit message: fix the typo");
    assert_eq!(user_text(2), "/etc/hosts is wrong");
}

/// "Always allow" from the editor is stored for the workspace, as the TUI's default does
/// (`[workspaces."local:<ws>".permissions]`), never globally: a later session in that
/// workspace runs the same edit unasked, a session in another workspace is asked again.
#[test]
fn always_allow_is_stored_for_the_workspace_and_applies_there_only() {
    let edit = |id: &str, from: &str, to: &str| {
        MockReply::tool_calls(
            vec![MockToolCall::new(
                id,
                "edit_file",
                &json!({"path": "a.txt", "old_string": from, "new_string": to}).to_string(),
            )],
            5,
        )
    };
    let NodeScenario {
        rt: _rt,
        mock: _mock,
        rig,
    } = NodeScenario::new(
        vec![
            edit("c-1", "one", "two"),
            MockReply::text(&["first"]),
            edit("c-2", "two", "three"),
            MockReply::text(&["second"]),
            edit("c-3", "one", "two"),
            MockReply::text(&["third"]),
        ],
        KEY_ENV,
        KEY,
    );
    let other = rig.dir.path().join("other");
    std::fs::create_dir_all(&other).expect("other ws");
    std::fs::write(rig.ws.join("a.txt"), "one\n").expect("a.txt");
    std::fs::write(other.join("a.txt"), "one\n").expect("a.txt");
    let steps = json!([
        {"prompt": "edit it", "answer": "allow_always"},
        {"prompt": "edit it again"},
        {"prompt": "edit the other one", "cwd": other.display().to_string()},
    ]);
    let report = drive(&rig, "steps", Some(&steps.to_string()));
    assert_eq!(
        report["stopReasons"],
        json!(["end_turn", "end_turn", "end_turn"]),
        "{report:#}"
    );
    assert_eq!(
        std::fs::read_to_string(rig.ws.join("a.txt")).expect("a"),
        "three\n"
    );
    assert_eq!(
        std::fs::read_to_string(other.join("a.txt")).expect("a"),
        "two\n"
    );
    let log = updates(&report);
    let asked: Vec<&str> = log
        .iter()
        .filter(|v| v["at"] == "permission")
        .filter_map(|v| v["id"].as_str())
        .collect();
    assert_eq!(
        asked,
        ["c-1", "c-3"],
        "asked in the first workspace once, and again in the other one: {log:#?}"
    );
    let config = std::fs::read_to_string(rig.home.join("config.toml")).expect("config");
    let table: toml::Table = config.parse().expect("config is TOML");
    let key = format!("local:{}", rig.ws.display());
    assert_eq!(
        table["workspaces"][&key]["permissions"]["allow"],
        toml::Value::Array(vec![toml::Value::String("Edit".into())]),
        "{config}"
    );
    assert!(
        table
            .get("permissions")
            .and_then(|p| p.get("allow"))
            .is_none(),
        "nothing stored globally: {config}"
    );
    assert_eq!(
        table["workspaces"].as_table().map(|t| t.len()),
        Some(1),
        "{config}"
    );
}

/// Each `session/request_permission` names the call its approval is about (the typed
/// `call_id` of `approval_requested`), even when two calls of one step have the same tool and
/// arguments: matching by tool and arguments would name the wrong one.
#[test]
fn permission_requests_name_their_call_when_two_calls_look_alike() {
    let args = json!({"path": "a.txt", "old_string": "one", "new_string": "two"}).to_string();
    let NodeScenario {
        rt: _rt,
        mock: _mock,
        rig,
    } = NodeScenario::new(
        vec![
            MockReply::tool_calls(
                vec![
                    MockToolCall::new("c-z", "edit_file", &args),
                    MockToolCall::new("c-a", "edit_file", &args),
                ],
                5,
            ),
            MockReply::text(&["done"]),
        ],
        KEY_ENV,
        KEY,
    );
    std::fs::write(rig.ws.join("a.txt"), "one\n").expect("a.txt");
    let steps = json!([{"prompt": "edit twice"}]);
    let report = drive(&rig, "steps", Some(&steps.to_string()));
    assert_eq!(report["stopReasons"], json!(["end_turn"]), "{report:#}");
    let log = updates(&report);
    let asked: Vec<&str> = log
        .iter()
        .filter(|v| v["at"] == "permission")
        .filter_map(|v| v["id"].as_str())
        .collect();
    assert_eq!(asked, ["c-z", "c-a"], "{log:#?}");
    for id in ["c-z", "c-a"] {
        let at = position(&log, |v| v["at"] == "permission" && v["id"] == id);
        let running = position(&log, |v| {
            v["kind"] == "tool_call_update" && v["id"] == id && v["status"] == "in_progress"
        });
        assert!(at < running, "{id} is asked before it runs: {log:#?}");
    }
}
