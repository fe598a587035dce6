//! Hooks end to end (#34), in local mode: the real `reasonix` drives the real host binary,
//! the scripted mock provider answers over HTTP, hooks are real processes in the bash
//! sandbox writing real files.
//!
//! - A cloned workspace whose `.reasonix/hooks.toml` and `.claude/settings.json` try to run
//!   commands runs none of them until the user trusts the files (`reasonix hooks trust`),
//!   runs them after, and none again after a one-byte change to each file.
//! - A user `PreToolUse` hook blocks a bash command and the model receives its stderr (in
//!   the mock provider's logged request); a hook that times out blocks nothing.
//! - A user `PostToolUse` formatter changes a written file, and rewinding the turn restores
//!   the file as it was before it (the turn's checkpoint covers the hook's change).

mod common;

use std::path::Path;

use common::{host_bin, ok, reasonix_command, LocalRig};
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall, RecordedRequest};
use serde_json::{json, Value};

const KEY_ENV: &str = "RX_HOOKS_KEY";

/// A model that calls `tool` with `args` once per turn, then answers "done".
fn one_call(tool: &'static str, args: Value) -> impl Fn(&RecordedRequest) -> MockReply {
    move |req: &RecordedRequest| {
        let last = req.messages().last().cloned().unwrap_or_default();
        if last["role"] == "tool" {
            MockReply::text(&["done"])
        } else {
            MockReply::tool_calls(vec![MockToolCall::new("c1", tool, &args.to_string())], 8)
        }
    }
}

fn add_user_config(rig: &LocalRig, extra: &str) {
    let path = rig.home.join("config.toml");
    let mut text = std::fs::read_to_string(&path).expect("config");
    text.push_str(extra);
    std::fs::write(path, text).expect("config");
}

fn stop_daemon(home: &Path) {
    let Ok(rd) = std::fs::read_dir(home.join("sessions")) else {
        return;
    };
    for dir in rd.flatten() {
        if let Ok(b) = std::fs::read(dir.path().join("daemon.json")) {
            if let Some(pid) = serde_json::from_slice::<Value>(&b)
                .ok()
                .and_then(|v| v["pid"].as_i64())
            {
                // SAFETY: plain kill(2) of the daemon this test started.
                unsafe {
                    libc::kill(pid as i32, libc::SIGTERM);
                }
            }
        }
    }
}

fn marks(ws: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(ws.join("marks"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

async fn run(rig: &LocalRig, args: &[&str]) -> std::process::Output {
    let mut cmd = reasonix_command(rig, &host_bin(), args);
    tokio::task::spawn_blocking(move || cmd.output().expect("run reasonix"))
        .await
        .expect("join")
}

const HOOKS_TOML: &str = r#"
[[hooks]]
event = "SessionStart"
command = "touch marks/toml-session-start"

[[hooks]]
event = "UserPromptSubmit"
command = "touch marks/toml-prompt; echo context-from-project-hook"

[[hooks]]
event = "PreToolUse"
match = "bash"
command = "touch marks/toml-pre"

[[hooks]]
event = "PostToolUse"
command = "touch marks/toml-post"
"#;

const CLAUDE_SETTINGS: &str = r#"{
  "hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "touch marks/claude-pre"}]}],
    "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "touch marks/claude-prompt"}]}]
  }
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_hooks_run_only_while_their_exact_content_is_trusted() {
    let mock = MockProvider::start_with(one_call("bash", json!({"command": "echo hi"}))).await;
    let rig = LocalRig::new(&mock.base_url(), KEY_ENV, "sk-hooks-1");
    std::fs::create_dir_all(rig.ws.join("marks")).expect("marks");
    std::fs::create_dir_all(rig.ws.join(".reasonix")).expect(".reasonix");
    std::fs::create_dir_all(rig.ws.join(".claude")).expect(".claude");
    std::fs::write(rig.ws.join(".reasonix/hooks.toml"), HOOKS_TOML).expect("toml");
    std::fs::write(rig.ws.join(".claude/settings.json"), CLAUDE_SETTINGS).expect("json");

    // Cloned, never trusted: nothing runs, and the user is told.
    let out = run(&rig, &["run", "--json", "--yolo", "first"]).await;
    let stdout = ok(&out);
    assert_eq!(
        marks(&rig.ws),
        Vec::<String>::new(),
        "an untrusted hook ran"
    );
    assert!(
        stdout.contains("hooks of .reasonix/hooks.toml were skipped")
            && stdout.contains("hooks of .claude/settings.json were skipped"),
        "{stdout}"
    );
    let list = ok(&run(&rig, &["hooks", "list"]).await);
    assert!(list.contains(".reasonix/hooks.toml  NOT TRUSTED"), "{list}");
    assert!(
        list.contains("[.claude/settings.json] PreToolUse Bash → touch marks/claude-pre"),
        "{list}"
    );

    // Trusted: every hook runs, and the prompt hook's stdout reaches the model in the user
    // message (never in the system prompt).
    let trusted = ok(&run(&rig, &["hooks", "trust"]).await);
    assert!(
        trusted.contains("trusted .reasonix/hooks.toml"),
        "{trusted}"
    );
    assert!(
        trusted.contains("trusted .claude/settings.json"),
        "{trusted}"
    );
    let record = std::fs::read_to_string(rig.home.join("hooks-trust.json")).expect("records");
    assert!(!rig.ws.join("hooks-trust.json").exists());
    assert!(record.contains(".reasonix/hooks.toml"), "{record}");
    let before = mock.requests().len();
    ok(&run(&rig, &["run", "--json", "--yolo", "second"]).await);
    assert_eq!(
        marks(&rig.ws),
        vec![
            "claude-pre",
            "claude-prompt",
            "toml-post",
            "toml-pre",
            "toml-prompt",
            "toml-session-start"
        ]
    );
    let req = &mock.requests()[before];
    let messages = req.messages();
    let user = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .expect("user message");
    let text = user["content"].to_string();
    assert!(
        text.contains("<hook-context event=\\\"UserPromptSubmit\\\">\\ncontext-from-project-hook"),
        "{text}"
    );
    assert!(!messages[0]["content"]
        .to_string()
        .contains("context-from-project-hook"));
    let list = ok(&run(&rig, &["hooks", "list"]).await);
    assert!(list.contains(".reasonix/hooks.toml  trusted"), "{list}");

    // One byte more in each file: untrusted again, nothing runs.
    std::fs::remove_dir_all(rig.ws.join("marks")).expect("rm");
    std::fs::create_dir_all(rig.ws.join("marks")).expect("marks");
    std::fs::write(
        rig.ws.join(".reasonix/hooks.toml"),
        format!("{HOOKS_TOML}\n"),
    )
    .expect("toml");
    std::fs::write(
        rig.ws.join(".claude/settings.json"),
        format!("{CLAUDE_SETTINGS} "),
    )
    .expect("json");
    let stdout = ok(&run(&rig, &["run", "--json", "--yolo", "third"]).await);
    assert_eq!(
        marks(&rig.ws),
        Vec::<String>::new(),
        "a changed hook file ran"
    );
    assert!(stdout.contains("not trusted"), "{stdout}");
    stop_daemon(&rig.home);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_pre_tool_use_hook_blocks_bash_and_the_model_reads_its_stderr() {
    let mock =
        MockProvider::start_with(one_call("bash", json!({"command": "rm -f keep.txt"}))).await;
    let rig = LocalRig::new(&mock.base_url(), KEY_ENV, "sk-hooks-2");
    std::fs::write(rig.ws.join("keep.txt"), "precious\n").expect("keep");
    add_user_config(
        &rig,
        r#"
[[hooks]]
event = "PreToolUse"
match = "bash"
timeout_ms = 300
command = "sleep 20"

[[hooks]]
event = "PreToolUse"
match = "bash"
command = "grep -q 'rm -f' && { echo 'hook says: deleting files is not allowed here' >&2; exit 2; }; exit 0"
"#,
    );
    let out = run(&rig, &["run", "--json", "--yolo", "clean up"]).await;
    let stdout = ok(&out);
    assert!(rig.ws.join("keep.txt").exists(), "the blocked command ran");
    // The first hook timed out: reported, and it blocked nothing (the second one decided).
    assert!(stdout.contains("timed out after 300 ms"), "{stdout}");
    assert!(stdout.contains("nothing was blocked"), "{stdout}");
    let requests = mock.requests();
    let last = requests.last().expect("second request");
    let tool_msg = last
        .messages()
        .into_iter()
        .find(|m| m["role"] == "tool")
        .expect("tool result");
    let content = tool_msg["content"].as_str().unwrap_or_default().to_string();
    assert!(
        content.contains(
            "blocked by a PreToolUse hook: hook says: deleting files is not allowed here"
        ),
        "{content}"
    );
    stop_daemon(&rig.home);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_tool_use_formatter_changes_the_file_and_rewind_restores_it() {
    let mock = MockProvider::start_with(one_call(
        "write_file",
        json!({"path": "notes.txt", "content": "written by the model\n"}),
    ))
    .await;
    let rig = LocalRig::new(&mock.base_url(), KEY_ENV, "sk-hooks-3");
    std::fs::write(rig.ws.join("notes.txt"), "original\n").expect("notes");
    add_user_config(
        &rig,
        r#"
[[hooks]]
event = "PostToolUse"
match = "write_file|edit_file"
command = "tr a-z A-Z < notes.txt > notes.tmp && mv notes.tmp notes.txt"
"#,
    );
    ok(&run(&rig, &["run", "--json", "--yolo", "write the notes"]).await);
    assert_eq!(
        std::fs::read_to_string(rig.ws.join("notes.txt")).expect("notes"),
        "WRITTEN BY THE MODEL\n",
        "the formatter hook did not run after the write"
    );
    let rw = run(&rig, &["rewind", "--to", "1", "--scope", "code"]).await;
    ok(&rw);
    assert_eq!(
        std::fs::read_to_string(rig.ws.join("notes.txt")).expect("notes"),
        "original\n"
    );
    assert!(!rig.ws.join("notes.tmp").exists());
    stop_daemon(&rig.home);
}

/// A `UserPromptSubmit` hook that exits 2 refuses the prompt: `run` fails with the hook's
/// reason and the model is never asked. A deny rule for bash refuses a hook's command: the
/// hook does not run and the user is told why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_hook_refuses_a_prompt_and_deny_rules_apply_to_hooks() {
    let mock = MockProvider::start_with(|_: &RecordedRequest| MockReply::text(&["answered"])).await;
    let rig = LocalRig::new(&mock.base_url(), KEY_ENV, "sk-hooks-4");
    std::fs::create_dir_all(rig.ws.join("marks")).expect("marks");
    add_user_config(
        &rig,
        r#"
[permissions]
deny = ["Bash(touch marks/denied:*)"]

[[hooks]]
event = "UserPromptSubmit"
match = ".*password.*"
command = "echo 'prompts about passwords are refused by policy' >&2; exit 2"

[[hooks]]
event = "UserPromptSubmit"
command = "touch marks/denied"
"#,
    );
    let out = run(
        &rig,
        &["run", "--json", "--yolo", "what is the admin password?"],
    )
    .await;
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains("a UserPromptSubmit hook refused the prompt: prompts about passwords are refused by policy"),
        "{all}"
    );
    assert!(mock.requests().is_empty(), "the model was asked");

    // Another prompt passes the first hook; the second one's command is denied for bash.
    let stdout = ok(&run(&rig, &["run", "--json", "--yolo", "hello"]).await);
    assert_eq!(mock.requests().len(), 1);
    assert!(!rig.ws.join("marks/denied").exists(), "a denied hook ran");
    assert!(
        stdout.contains("denied by the permission policy"),
        "{stdout}"
    );
    stop_daemon(&rig.home);
}

/// `run_on = "laptop"` (#34): a user `Notification` hook runs on the laptop — in the
/// laptop process's environment, once per turn end, never again on a later catch-up — and
/// a project hook file cannot ask for it, trusted or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn laptop_notification_hooks_run_on_the_laptop_once_per_turn() {
    let mock = MockProvider::start_with(|_: &RecordedRequest| MockReply::text(&["done"])).await;
    let rig = LocalRig::new(&mock.base_url(), KEY_ENV, "sk-hooks-laptop");
    let out = rig.dir.path().join("laptop-notes");
    std::fs::create_dir_all(&out).expect("notes");
    // `$RX_LAPTOP_MARK` is set for `reasonix` only: the host daemon's allow-listed
    // environment does not carry it, so the mark proves which side ran the hook.
    add_user_config(
        &rig,
        &format!(
            "\n[[hooks]]\nevent = \"Notification\"\nrun_on = \"laptop\"\ncommand = \"cat > '{0}'/note-$$.json; printf %s \\\"$RX_LAPTOP_MARK\\\" > '{0}'/mark-$$\"\n",
            out.display()
        ),
    );
    std::fs::create_dir_all(rig.ws.join(".reasonix")).expect(".reasonix");
    std::fs::create_dir_all(rig.ws.join("marks")).expect("marks");
    std::fs::write(
        rig.ws.join(".reasonix/hooks.toml"),
        "[[hooks]]\nevent = \"Notification\"\nrun_on = \"laptop\"\ncommand = \"touch marks/project-laptop\"\n",
    )
    .expect("toml");
    ok(&run(&rig, &["hooks", "trust"]).await);

    let turn = |prompt: &'static str, cont: bool| {
        let mut args = vec!["run", "--json", "--yolo"];
        if cont {
            args.push("--continue");
        }
        args.push(prompt);
        let mut cmd = reasonix_command(&rig, &host_bin(), &args);
        cmd.env("RX_LAPTOP_MARK", "laptop-side");
        async move {
            tokio::task::spawn_blocking(move || cmd.output().expect("run reasonix"))
                .await
                .expect("join")
        }
    };
    let notes = |out: &Path| -> Vec<Value> {
        let mut v: Vec<Value> = std::fs::read_dir(out)
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with("note-"))
                    .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                    .filter_map(|t| serde_json::from_str(&t).ok())
                    .collect()
            })
            .unwrap_or_default();
        v.sort_by_key(|n| n["session_id"].to_string());
        v
    };
    let wait_for = |n: usize| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while notes(&out).len() < n && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // Room for a duplicate to show up, were one sent.
        std::thread::sleep(std::time::Duration::from_millis(700));
        notes(&out)
    };

    ok(&turn("first", false).await);
    let got = wait_for(1);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["hook_event_name"], "Notification");
    assert_eq!(got[0]["message"], "the turn finished");
    assert_eq!(got[0]["outcome"], "completed");
    assert_eq!(got[0]["cwd"], json!(rig.ws.display().to_string()));
    let marks_out: Vec<String> = std::fs::read_dir(&out)
        .expect("notes")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("mark-"))
        .map(|e| std::fs::read_to_string(e.path()).expect("mark"))
        .collect();
    assert_eq!(marks_out, vec!["laptop-side".to_string()]);

    // The next turn of the same session: one more notification, the first turn's is not
    // repeated by the catch-up the new client gets.
    let second = ok(&turn("second", true).await);
    let got = wait_for(2);
    assert_eq!(got.len(), 2, "{got:?}\n{second}");

    // The project file's laptop hook never ran anywhere, and the list says why.
    assert!(!rig.ws.join("marks/project-laptop").exists());
    let list = ok(&run(&rig, &["hooks", "list"]).await);
    assert!(list.contains("(runs on the laptop)"), "{list}");
    assert!(
        list.contains("a project hook cannot run on the laptop"),
        "{list}"
    );
    stop_daemon(&rig.home);
}
