//! Deny rules hold end to end: the real `reasonix run --yolo` with `deny = ["Bash(rm:*)",
//! "Edit(secrets/**)"]` in the user config drives the real host binary; the scripted model
//! tries to delete files and write a secret by spelling things differently. Every victim file
//! must survive on disk, and a control command must still run.

use std::path::{Path, PathBuf};
use std::process::Command;

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

const KEY: &str = "sk-test-policy-bypass-1234";

fn host_bin() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"))
        .parent()
        .expect("bin dir")
        .join("reasonix-remote");
    assert!(
        p.is_file(),
        "{} is missing: build the workspace binaries first (`cargo build --workspace --bins`)",
        p.display()
    );
    p
}

fn daemon_pid(home: &Path) -> Option<u32> {
    for e in std::fs::read_dir(home.join("sessions")).ok()?.flatten() {
        if let Ok(b) = std::fs::read(e.path().join("daemon.json")) {
            let v: Value = serde_json::from_slice(&b).ok()?;
            return v["pid"].as_u64().map(|p| p as u32);
        }
    }
    None
}

/// Writes a user config with the mock provider and `deny` (a TOML array), runs `reasonix`
/// with `args` in `ws`, stops the daemon, asserts success and returns stdout.
async fn run_yolo(
    home: &Path,
    ws: &Path,
    mock: &MockProvider,
    deny: &str,
    args: &[&'static str],
) -> String {
    let (out, stdout) = run_reasonix(home, ws, mock, deny, args).await;
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// As [`run_yolo`], without asserting success: the output and stdout.
async fn run_reasonix(
    home: &Path,
    ws: &Path,
    mock: &MockProvider,
    deny: &str,
    args: &[&'static str],
) -> (std::process::Output, String) {
    std::fs::write(
        home.join("config.toml"),
        format!(
            r#"default_model = "mock/mock-model"
[[providers]]
name = "mock"
kind = "openai"
base_url = "{}"
models = ["mock-model"]
default = "mock-model"
api_key_env = "RX_BYPASS_KEY"

[permissions]
deny = {deny}
"#,
            mock.base_url()
        ),
    )
    .expect("config");
    let (h, w, args) = (home.to_path_buf(), ws.to_path_buf(), args.to_vec());
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_reasonix"))
            .args(&args)
            .current_dir(&w)
            .env("REASONIX_HOME", &h)
            .env("REASONIX_REMOTE_BIN", host_bin())
            .env("RX_BYPASS_KEY", KEY)
            .env("REASONIX_IDLE_TIMEOUT_SECS", "30")
            .env_remove("XDG_RUNTIME_DIR")
            .output()
            .expect("run reasonix")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    if let Some(pid) = daemon_pid(home) {
        unsafe {
            libc::kill(pid as i32, libc::SIGTERM);
        }
    }
    (out, stdout)
}

/// Bash commands that each try to delete `victims/vN`.
const BASH_ATTEMPTS: [&str; 17] = [
    "rm victims/v0",
    "sh -c 'rm victims/v1'",
    "echo victims/v2 | xargs rm",
    "find victims -name v3 -delete",
    "env FOO=1 /bin/rm victims/v4",
    "echo $(rm victims/v5)",
    "if true; then r\\m victims/v6; fi",
    "timeout -s KILL 10 nice -n 5 rm victims/v7",
    "bash -c \"eval 'rm victims/v8'\"",
    "x=rm; $x victims/v9",
    "cat <<EOF\n$(rm victims/v10)\nEOF",
    "find victims -name v11 -exec sh -c 'rm \"$1\"' _ {} \\;",
    "echo 'rm victims/v12' | sh -s",
    "sh -s <<'EOF'\nrm victims/v13\nEOF",
    "&>/dev/null rm victims/v14",
    "f=victims/v15; r=rm; \"$r\" \"$f\"",
    "rm {victims/v16,}",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_rules_hold_against_respelled_commands_and_paths_in_yolo() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("rxhome");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(ws.join("victims")).expect("victims");
    std::fs::create_dir_all(ws.join("secrets")).expect("secrets");
    std::fs::write(ws.join("secrets/k"), "secret\n").expect("secret");
    std::os::unix::fs::symlink("secrets", ws.join("lnk")).expect("symlink");
    for i in 0..BASH_ATTEMPTS.len() {
        std::fs::write(ws.join(format!("victims/v{i}")), "keep\n").expect("victim");
    }
    let ws_abs = std::fs::canonicalize(&ws).expect("canonical ws");
    let mut calls: Vec<MockToolCall> = BASH_ATTEMPTS
        .iter()
        .enumerate()
        .map(|(i, c)| {
            MockToolCall::new(
                &format!("b{i}"),
                "bash",
                &json!({ "command": c }).to_string(),
            )
        })
        .collect();
    for (i, path) in [
        "./secrets/k".to_string(),
        "src/../secrets/k".to_string(),
        "lnk/k".to_string(),
        format!("{}//secrets/./k", ws_abs.display()),
    ]
    .iter()
    .enumerate()
    {
        calls.push(MockToolCall::new(
            &format!("w{i}"),
            "write_file",
            &json!({"path": path, "content": "pwned\n"}).to_string(),
        ));
    }
    calls.push(MockToolCall::new(
        "control",
        "bash",
        &json!({"command": "echo ran > control.txt"}).to_string(),
    ));
    let n_calls = calls.len();
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(calls, 3),
        MockReply::text(&["done"]),
    ])
    .await;
    let stdout = run_yolo(
        &home,
        &ws,
        &mock,
        r#"["Bash(rm:*)", "Edit(secrets/**)"]"#,
        &["run", "--json", "--yolo", "clean up"],
    )
    .await;
    // The control command ran: tools were really executed in this turn.
    assert_eq!(
        std::fs::read_to_string(ws.join("control.txt")).unwrap_or_default(),
        "ran\n",
        "{stdout}"
    );
    let mut survived = 0;
    for (i, attempt) in BASH_ATTEMPTS.iter().enumerate() {
        let v = ws.join(format!("victims/v{i}"));
        assert!(v.exists(), "`{attempt}` deleted {}\n{stdout}", v.display());
        survived += 1;
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("secrets/k")).expect("secret"),
        "secret\n",
        "the secret was overwritten\n{stdout}"
    );
    // Every attempt came back to the model as a refusal.
    let events: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_finished")
        .collect();
    assert_eq!(finished.len(), n_calls, "{stdout}");
    let refused = finished.iter().filter(|e| e["is_error"] == true).count();
    assert_eq!(
        refused,
        n_calls - 1,
        "all but the control call are refused\n{stdout}"
    );
    eprintln!("e2e: {survived} bash attempts and 4 path spellings refused under --yolo");
}

/// `Read(secrets/**)` holds for everything that reads, through the real binaries and the
/// real bubblewrap sandbox: grep, glob and `ls -R` over the whole workspace skip it, and bash
/// can neither name it (`cat secrets/k`) nor reach it by walking (`grep -r TOKEN .`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_deny_holds_for_walkers_and_bash_in_yolo() {
    if !Path::new("/usr/bin/bwrap").exists() {
        panic!("bubblewrap is missing (`apt-get install bubblewrap`; .ci/run installs it)");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("rxhome");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(ws.join("secrets/deeper")).expect("secrets");
    std::fs::create_dir_all(ws.join("src")).expect("src");
    const TOKEN: &str = "TOKEN-5f1d0c";
    std::fs::write(ws.join("secrets/k"), format!("{TOKEN}\n")).expect("secret");
    std::fs::write(ws.join("secrets/deeper/k2"), format!("{TOKEN}\n")).expect("secret");
    std::fs::write(ws.join("src/a.txt"), "visible needle\n").expect("src");
    let calls: Vec<(&str, Value)> = vec![
        ("grep", json!({"pattern": "TOKEN"})),
        ("glob", json!({"pattern": "**/*"})),
        ("ls", json!({"path": ".", "recursive": true})),
        ("read_file", json!({"path": "secrets/k"})),
        ("bash", json!({"command": "cat secrets/k"})),
        ("bash", json!({"command": "cat < ./secrets/deeper/k2"})),
        (
            "bash",
            json!({"command": "grep -r TOKEN . ; cat ./*/k ; echo walked"}),
        ),
        ("grep", json!({"pattern": "needle"})),
    ];
    let n = calls.len();
    let calls: Vec<MockToolCall> = calls
        .into_iter()
        .enumerate()
        .map(|(i, (tool, args))| MockToolCall::new(&format!("r{i}"), tool, &args.to_string()))
        .collect();
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(calls, 3),
        MockReply::text(&["done"]),
    ])
    .await;
    let stdout = run_yolo(
        &home,
        &ws,
        &mock,
        r#"["Read(secrets/**)"]"#,
        &["run", "--json", "--full-output", "--yolo", "look around"],
    )
    .await;
    let finished: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "tool_finished")
        .collect();
    assert_eq!(finished.len(), n, "{stdout}");
    // The provider saw every tool result: the secret is in none of them.
    let sent = mock
        .requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        !sent.contains(TOKEN),
        "the secret reached the model:\n{sent}"
    );
    assert!(
        !stdout.contains(TOKEN),
        "the secret reached the client:\n{stdout}"
    );
    // The walks and the last bash call really ran; the named reads were refused.
    let text = |i: usize| finished[i]["output"].as_str().unwrap_or("").to_string();
    assert!(text(7).contains("src/a.txt"), "grep needle: {}", text(7));
    assert!(text(2).contains("src/a.txt"), "ls -R: {}", text(2));
    assert!(text(6).contains("walked"), "bash walk: {}", text(6));
    for i in [3, 4, 5] {
        assert_eq!(
            finished[i]["is_error"], true,
            "call {i} not refused: {stdout}"
        );
    }
}

/// Yolo never prompts, except for a bash command it cannot read that no deny rule could name:
/// that still needs approval, so a headless `--yolo` run refuses it (and says why) while the
/// rest of the turn runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yolo_still_asks_for_a_command_it_cannot_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("rxhome");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&ws).expect("ws");
    let calls = vec![
        MockToolCall::new(
            "q",
            "bash",
            &json!({"command": "c=touch; \"$c\" made.txt"}).to_string(),
        ),
        MockToolCall::new(
            "control",
            "bash",
            &json!({"command": "echo ran > control.txt"}).to_string(),
        ),
    ];
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(calls, 3),
        MockReply::text(&["done"]),
    ])
    .await;
    // `Bash(git push:*)` cannot be what `"$c" made.txt` runs; nothing else is denied.
    let (out, stdout) = run_reasonix(
        &home,
        &ws,
        &mock,
        r#"["Bash(git push:*)"]"#,
        &["run", "--json", "--yolo", "make a file"],
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(ws.join("control.txt")).unwrap_or_default(),
        "ran\n",
        "{stdout}"
    );
    assert!(
        !ws.join("made.txt").exists(),
        "an unreadable command ran unasked under --yolo\n{stdout}"
    );
    let refused: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "tool_finished" && e["is_error"] == true)
        .collect();
    assert_eq!(refused.len(), 1, "{stdout}");
    let text = refused[0].to_string();
    assert!(
        text.contains("cannot be checked") && text.contains("headless"),
        "{text}"
    );
    // Headless and something needed approval: the documented exit code 4.
    assert_eq!(out.status.code(), Some(4), "{stdout}");
}
