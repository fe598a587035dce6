//! The bash-versus-file-deny table in local mode: the real `reasonix run` drives the real
//! host binary (real bubblewrap, or the sandbox off) with `deny = ["Edit(secrets/**)",
//! "Edit(**/*.env)"]`, and the scripted model tries 32 ways to write the covered paths that
//! the bash reader cannot all see (interpreters, `cd` chains, `dd`, archives, git, symlinks
//! and hard links made in the same command, deletes, chmod, a background job). In every
//! mode: the covered paths are unchanged on disk afterwards, the uncovered part of each
//! command stays, every result names the rule, and the user got a notice for every write
//! that had to be undone. A `!` command goes through the same guard.

mod common;
mod deny_bash_common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::LocalRig;
use deny_bash_common as t;
use reasonix_forward::policy::{PermissionMode, Rule, SessionPolicy};
use reasonix_forward::proto::{EventKind, OpenSession, Request, Response, SessionSettings};
use reasonix_local::client::ClientEvent;
use reasonix_testkit::mock_provider::{MockProvider, MockReply};
use serde_json::Value;

const KEY_ENV: &str = "RX_DENY_BASH_KEY";

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

/// One `reasonix run --json --full-output` in a fresh workspace; returns (stdout, the
/// workspace, its covered state before). `mode_flag` is `--auto`, `--yolo` or none (ask).
async fn run_once(
    mode: &str,
    mode_flag: Option<&'static str>,
    allow: &str,
    sandbox: &str,
    replies: Vec<MockReply>,
) -> (
    String,
    tempfile::TempDir,
    std::collections::BTreeMap<String, String>,
) {
    let mock = MockProvider::start(replies).await;
    let rig = LocalRig::new(&mock.base_url(), KEY_ENV, "sk-deny-bash");
    std::fs::write(
        rig.home.join("config.toml"),
        t::config_toml(&mock.base_url(), KEY_ENV, mode, allow, sandbox),
    )
    .expect("config");
    let stage = rig.dir.path().join("stage");
    t::populate(&rig.ws, &stage);
    let initial = t::covered_state(&rig.ws);
    let mut args = vec!["run", "--json", "--full-output"];
    args.extend(mode_flag);
    args.push("try to change the protected files");
    let (home, ws, bin) = (rig.home.clone(), rig.ws.clone(), common::host_bin());
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_reasonix"))
            .args(&args)
            .current_dir(&ws)
            .env("REASONIX_HOME", &home)
            .env("REASONIX_REMOTE_BIN", bin)
            .env("REASONIX_IDLE_TIMEOUT_SECS", "5")
            .env_remove("XDG_RUNTIME_DIR")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run reasonix")
    })
    .await
    .expect("join");
    stop_daemon(&rig.home);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    // 4: a call needed approval and nobody could give it (auto mode, opaque commands).
    assert!(
        matches!(out.status.code(), Some(0) | Some(4)),
        "{:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let rig_dir = rig.dir;
    (stdout, rig_dir, initial)
}

async fn full_table(
    label: &str,
    mode: &str,
    flag: Option<&'static str>,
    sandbox: &str,
) -> Result<Vec<String>, Vec<String>> {
    let (stdout, dir, initial) = run_once(mode, flag, "[]", sandbox, t::full_turn()).await;
    let ws = dir.path().join("ws");
    let confined = sandbox == "enforce";
    let sessions: Vec<Value> = t::events(&stdout)
        .into_iter()
        .filter(|e| e["type"] == "session")
        .collect();
    let want = if confined { "bwrap" } else { "off" };
    if sessions.first().and_then(|s| s["sandbox"].as_str()) != Some(want) {
        return Err(vec![format!(
            "{label}: the session's sandbox is not {want}: {sessions:?}"
        )]);
    }
    t::check_full_turn(label, &stdout, &ws, &initial, confined, mode == "yolo")
}

fn report(results: Vec<Result<Vec<String>, Vec<String>>>) {
    let mut problems = Vec::new();
    for r in results {
        match r {
            Ok(lines) => lines.iter().for_each(|l| eprintln!("{l}")),
            Err(p) => problems.extend(p),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_deny_holds_for_bash_in_yolo_and_auto_under_bubblewrap() {
    report(vec![
        full_table("yolo/bwrap", "yolo", Some("--yolo"), "enforce").await,
        full_table("auto/bwrap", "auto", Some("--auto"), "enforce").await,
    ]);
}

/// Without the sandbox every write lands first; the after-call check must undo each one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_deny_holds_for_bash_with_the_sandbox_off() {
    report(vec![
        full_table("yolo/off", "yolo", Some("--yolo"), "off").await,
    ]);
}

/// `ask` mode: the commands an allow rule lets run unasked reach the sandbox and are held
/// to the deny rules all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_deny_holds_for_bash_in_ask_mode() {
    let mut results = Vec::new();
    for sandbox in ["enforce", "off"] {
        let (stdout, dir, initial) =
            run_once("ask", None, t::ASK_ALLOW, sandbox, t::ask_turn()).await;
        let ws = dir.path().join("ws");
        results.push(t::check_ask_turn(
            &format!("ask/{sandbox}"),
            &stdout,
            &ws,
            &initial,
        ));
    }
    report(results);
}

/// A `!` command typed by the user runs through the same bash tool, so the same guard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bang_command_is_held_to_the_file_deny_rules() {
    let mock = MockProvider::start(vec![MockReply::text(&["unused"])]).await;
    let rig = LocalRig::new(&mock.base_url(), KEY_ENV, "sk-deny-bash");
    let stage = rig.dir.path().join("stage");
    t::populate(&rig.ws, &stage);
    let initial = t::covered_state(&rig.ws);
    let config = rig.config();
    let (client, mut events) = rig.client(&config);
    let rule = |s: &str| Rule::parse(s).expect("rule");
    let mut policy = SessionPolicy {
        mode: PermissionMode::Yolo,
        ..Default::default()
    };
    policy.rules.deny = t::RULES.iter().map(|r| rule(r)).collect();
    let opened = client
        .request(Request::OpenSession(OpenSession {
            new: true,
            settings: SessionSettings {
                model: Some("mock/m".into()),
                policy,
                headless: false,
                ..SessionSettings::default()
            },
            ..OpenSession::default()
        }))
        .await
        .expect("open");
    assert!(matches!(opened, Response::SessionOpened(_)), "{opened:?}");
    let cmd = "python3 -c \"open('config/typed.env','w').write('x')\"; cd secrets && echo x > k";
    let answer = client
        .request(Request::Shell {
            request_id: "sh1".into(),
            command: cmd.into(),
            add_to_context: false,
        })
        .await
        .expect("shell");
    assert_eq!(answer, Response::Ok);
    let mut seen = Vec::new();
    let ran = loop {
        let ev = tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .expect("ShellRan within 60 s")
            .expect("client alive");
        if let ClientEvent::Event(e) = ev {
            if let EventKind::ShellRan {
                output, is_error, ..
            } = &e.kind
            {
                break (output.clone(), *is_error);
            }
            seen.push(e.kind);
        }
    };
    drop(client);
    stop_daemon(&rig.home);
    assert_eq!(t::covered_state(&rig.ws), initial);
    let (output, is_error) = ran;
    assert!(is_error, "{output}");
    assert!(
        output.contains("- created `config/typed.env` (denied by `Edit(**/*.env)`): removed"),
        "{output}"
    );
    assert!(output.contains("Read-only file system"), "{output}");
    let notices: Vec<&String> = seen
        .iter()
        .filter_map(|k| match k {
            EventKind::Notice { text } => Some(text),
            _ => None,
        })
        .collect();
    assert!(
        notices
            .iter()
            .any(|n| n.starts_with("denied write undone after bash `python3")
                && n.contains("config/typed.env")),
        "{notices:?}"
    );
}
