//! Plan mode end to end, headless (real `reasonix` → real `reasonix-remote` over pipes → the
//! scripted SSE mock provider, real bash under the real bwrap): in `yolo`, every writer the
//! model tries before the plan is approved is refused and the files do not exist afterwards;
//! `run --plan` prints the plan (a `plan` line with --json) and exits 0 with it saved;
//! `run --continue "comment"` revises it; `run --continue --approve-plan` executes it in the
//! permission mode of that run, across a daemon that exited idle in between (the plan comes
//! back from the journal).

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;

use std::process::Command;

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

use common::{json_lines, LocalRig as Env};

fn setup(base_url: &str) -> Env {
    let config = common::mock_config(base_url, "m", "RX_PLAN_KEY", "");
    let env = Env::with_config(&config, "RX_PLAN_KEY", "sk-plan");
    std::fs::create_dir_all(env.ws.join("sub")).expect("ws");
    std::fs::write(env.ws.join("README.md"), "the project\n").expect("readme");
    // A workspace MCP server with a writer (no readOnlyHint) and a reader.
    let server = env.dir.path().join("notes_mcp.py");
    std::fs::write(&server, NOTES_MCP).expect("mcp server");
    std::fs::write(
        env.ws.join(".mcp.json"),
        json!({"mcpServers": {"notes": {"command": "python3", "args": [server]}}}).to_string(),
    )
    .expect(".mcp.json");
    env
}

fn command(env: &Env, args: &[&str]) -> Command {
    common::headless(env, args, 1)
}

fn call(id: &str, name: &str, args: Value) -> MockToolCall {
    MockToolCall::new(id, name, &args.to_string())
}

fn bash(id: &str, cmd: &str) -> MockToolCall {
    call(id, "bash", json!({"command": cmd}))
}

/// The text of the last user message of a recorded request.
fn last_user(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

/// A stdio MCP server: `write_note` writes `mcp_note.txt` in its folder, `read_note`
/// (read-only) answers "note".
const NOTES_MCP: &str = r#"
import json, sys, os
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    meth = m.get("method")
    if meth == "initialize":
        r = {"protocolVersion": "2025-03-26", "capabilities": {"tools": {}}, "serverInfo": {"name": "notes", "version": "1"}}
    elif meth == "tools/list":
        r = {"tools": [
            {"name": "write_note", "description": "write a note", "inputSchema": {"type": "object"}},
            {"name": "read_note", "description": "read the note", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}]}
    elif meth == "tools/call":
        if m["params"]["name"] == "write_note":
            open(os.path.join(os.getcwd(), "mcp_note.txt"), "w").write("x")
        r = {"content": [{"type": "text", "text": "note"}]}
    else:
        r = {}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"#;

const PLAN_A: &str = "## Goal\nAdd notes.\n\n## Steps\n1. Write notes.txt\n2. Check it\n\n## Files to touch\n- notes.txt\n\n## Verification\n1. cat notes.txt\n";
const PLAN_B: &str = "## Goal\nAdd notes.\n\n## Steps\n1. Write done.txt\n2. Check it\n3. Report\n\n## Files to touch\n- done.txt\n\n## Verification\n1. cat done.txt\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yolo_plan_refuses_every_writer_then_revise_and_approve_execute() {
    let writers = vec![
        call("w1", "write_file", json!({"path": "w.txt", "content": "x"})),
        call(
            "w2",
            "edit_file",
            json!({"path": "README.md", "old_string": "project", "new_string": "hacked"}),
        ),
        call(
            "w3",
            "move_file",
            json!({"source_path": "README.md", "destination_path": "moved.md"}),
        ),
        bash("b1", "echo x > r1.txt"),
        bash("b2", "cd sub && echo x > r2.txt"),
        bash("b3", "python3 -c \"open('r3.txt','w').write('x')\""),
        bash("b4", "sh -c 'echo x > r4.txt'"),
        bash(
            "b5",
            "python3 -c \"open('sub/r5.txt','w').write('x')\" ; cat README.md",
        ),
        bash("r1", "cat README.md"),
        call("m1", "mcp__notes__write_note", json!({})),
        call("m2", "mcp__notes__read_note", json!({})),
    ];
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(writers, 7),
        MockReply::tool_calls(
            vec![call("p1", "exit_plan_mode", json!({"plan": PLAN_A}))],
            9,
        ),
        MockReply::text(&["Plan proposed."]),
    ])
    .await;
    let env = setup(&mock.base_url());

    // 1. `run --plan` in yolo: nothing writes, the plan is printed and saved, exit 0.
    let out = command(
        &env,
        &[
            "run",
            "--yolo",
            "--plan",
            "--json",
            "--full-output",
            "add notes",
        ],
    )
    .output()
    .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for f in [
        "w.txt",
        "moved.md",
        "r1.txt",
        "sub/r2.txt",
        "r3.txt",
        "r4.txt",
        "sub/r5.txt",
    ] {
        assert!(
            !env.ws.join(f).exists(),
            "{f} was written in plan mode: {stdout}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(env.ws.join("README.md")).unwrap(),
        "the project\n"
    );
    let events = json_lines(&out.stdout);
    let finished = |id: &str| {
        events
            .iter()
            .find(|e| e["type"] == "tool_finished" && e["call_id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no tool_finished for {id}: {stdout}"))
    };
    for id in ["w1", "w2", "w3", "b1", "b2", "b4", "m1"] {
        let f = finished(id);
        assert_eq!(f["denied"], "policy", "{id}: {f}");
        assert!(
            f["reason"].as_str().unwrap_or("").contains("plan mode"),
            "{id}: {f}"
        );
    }
    // The interpreter passes the early check but the read-only sandbox stops it.
    for id in ["b3", "b5"] {
        let f = finished(id);
        assert!(f["denied"].is_null(), "{id} ran (sandboxed): {f}");
        assert!(
            f["output"]
                .as_str()
                .unwrap_or("")
                .contains("Read-only file system"),
            "{id}: {f}"
        );
    }
    assert!(finished("r1")["denied"].is_null());
    let m2 = finished("m2");
    assert!(
        m2["denied"].is_null() && m2["is_error"] == false,
        "the MCP reader runs: {m2}"
    );
    assert!(!env.ws.join("mcp_note.txt").exists(), "the MCP writer ran");
    let plan: Vec<&Value> = events.iter().filter(|e| e["type"] == "plan").collect();
    assert_eq!(plan.len(), 1, "{stdout}");
    assert_eq!(plan[0]["steps"], json!(["Write notes.txt", "Check it"]));
    assert!(plan[0]["plan"]
        .as_str()
        .unwrap()
        .contains("## Verification"));
    let reqs = mock.requests();
    assert!(
        last_user(&reqs[0].body).contains("[plan mode]"),
        "the model is told"
    );
    // The tool list is the same in every request (exit_plan_mode is always listed).
    let tools: Vec<&Value> = reqs.iter().map(|r| &r.body["tools"]).collect();
    assert!(tools.windows(2).all(|w| w[0] == w[1]));
    assert!(tools[0].to_string().contains("exit_plan_mode"));

    // 2. A message while the plan waits revises it (after the daemon exited idle: the
    // pending plan comes back from the journal).
    std::thread::sleep(std::time::Duration::from_millis(2500));
    mock.push(vec![
        MockReply::tool_calls(
            vec![call("p2", "exit_plan_mode", json!({"plan": PLAN_B}))],
            9,
        ),
        MockReply::text(&["Revised."]),
    ]);
    let before = mock.request_count();
    let out = command(
        &env,
        &["run", "--continue", "--json", "write done.txt instead"],
    )
    .output()
    .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let req = &mock.requests()[before];
    let user = last_user(&req.body);
    assert!(
        user.contains("[plan mode]") && user.contains("write done.txt instead"),
        "{user}"
    );
    let plans: Vec<Value> = json_lines(&out.stdout)
        .into_iter()
        .filter(|e| e["type"] == "plan")
        .collect();
    assert_eq!(plans.len(), 1, "{stdout}");
    assert_eq!(plans[0]["steps"].as_array().unwrap().len(), 3);

    // 3. Approve: plan mode off, the revised plan is executed in this run's mode (auto).
    std::thread::sleep(std::time::Duration::from_millis(2500));
    mock.push(vec![
        MockReply::tool_calls(
            vec![call(
                "x1",
                "write_file",
                json!({"path": "done.txt", "content": "ok"}),
            )],
            7,
        ),
        MockReply::text(&["Executed."]),
    ]);
    let before = mock.request_count();
    let out = command(
        &env,
        &["run", "--continue", "--auto", "--approve-plan", "--json"],
    )
    .output()
    .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        std::fs::read_to_string(env.ws.join("done.txt")).unwrap(),
        "ok"
    );
    let user = last_user(&mock.requests()[before].body);
    assert!(!user.contains("[plan mode]"), "{user}");
    assert!(
        user.contains("The user approved the plan") && user.contains("Write done.txt"),
        "{user}"
    );

    // 4. Nothing waits any more: approving again is an error naming why.
    let out = command(&env, &["run", "--continue", "--approve-plan"])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr.contains("no plan is waiting"), "{stderr}");
    // 5. Rewind to before the executing turn (turn 3): the files come back and the revised
    // plan waits unapproved again, in plan mode; approving it executes it once more.
    let out = command(&env, &["rewind", "--to", "3"])
        .output()
        .expect("rewind");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !env.ws.join("done.txt").exists(),
        "the rewind restored the files"
    );
    mock.push(vec![
        MockReply::tool_calls(
            vec![call(
                "x2",
                "write_file",
                json!({"path": "done.txt", "content": "again"}),
            )],
            7,
        ),
        MockReply::text(&["Executed again."]),
    ]);
    let before = mock.request_count();
    let out = command(&env, &["run", "--continue", "--auto", "--approve-plan"])
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(env.ws.join("done.txt")).unwrap(),
        "again"
    );
    let user = last_user(&mock.requests()[before].body);
    assert!(
        user.contains("Write done.txt"),
        "the revised plan came back: {user}"
    );
    // And --approve-plan needs a session to continue.
    let out = command(&env, &["run", "--approve-plan"])
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
