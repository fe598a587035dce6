//! The Windows laptop build (`reasonix.exe`, x86_64-pc-windows-gnu) end to end under wine
//! (issue 39): the same real sshd in a private network namespace, the same mock provider and
//! the static Linux host binary as the reconnect tests, with the client being the Windows
//! build. `run --ssh` runs a turn through a blackhole and resumes with nothing run twice,
//! `sessions --ssh` lists the session, `acp --ssh` serves the ACP TypeScript SDK client, and
//! a passphrase-protected key with no way to type it fails closed naming the ssh-agent.
//!
//! These need the Windows build, which `.ci/cross_build.sh` makes beside the test suite: they
//! are `#[ignore]`d in the workspace run and run by `.ci/run` right after it, with
//! `REASONIX_WINE_EXE` naming the build and `WINEPREFIX` a prefix that has the test-only
//! `bcryptprimitives.dll` stand-in (see `.ci/wine/`). By hand:
//! `REASONIX_WINE_EXE=target/cross/x86_64-pc-windows-gnu/debug/reasonix.exe
//! WINEPREFIX=$PWD/target/wineprefix cargo nextest run -p reasonix --test wine_e2e
//! --run-ignored ignored-only`.

mod reconnect_common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reasonix_testkit::mock_provider::{MockReply, MockToolCall};
use reasonix_testkit::netfault::Fault;
use reconnect_common::*;
use serde_json::{json, Value};

/// The Windows build; the run fails (never skips) when it is not there.
fn wine_exe() -> PathBuf {
    let exe = std::env::var_os("REASONIX_WINE_EXE").map(PathBuf::from).unwrap_or_else(|| {
        panic!("REASONIX_WINE_EXE is not set: build reasonix.exe with .ci/cross_build.sh and point it there")
    });
    // A relative path is the workspace root's (where `.ci/run` runs), not this crate's.
    let exe = if exe.is_relative() {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(exe)
    } else {
        exe
    };
    assert!(exe.is_file(), "no Windows build at {}", exe.display());
    assert!(
        std::env::var_os("WINEPREFIX").is_some(),
        "set WINEPREFIX to a prefix prepared by .ci/cross_build.sh"
    );
    no_other_wineserver();
    std::fs::canonicalize(exe).expect("absolute path")
}

/// Waits until no wineserver runs for the prefix. Wine makes and connects sockets in its
/// wineserver, one per prefix shared by every wine process: a server left (for its few
/// seconds of idle life) by a test in another network namespace would make this test's
/// connections in that namespace.
fn no_other_wineserver() {
    let status = std::process::Command::new("wineserver")
        .arg("-w")
        .status()
        .expect("run wineserver -w (wine is installed with .ci/cross_build.sh)");
    assert!(status.success(), "wineserver -w: {status}");
}

/// A shell wrapper that runs the Windows build under wine: for programs that take one
/// executable (the ACP SDK client spawns `REASONIX_BIN`).
fn wine_wrapper(dir: &Path, exe: &Path) -> PathBuf {
    let path = dir.join("reasonix-wine");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nWINEDEBUG=-all exec wine '{}' \"$@\"\n",
            exe.display()
        ),
    )
    .expect("wrapper");
    let mut perms = std::fs::metadata(&path).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).expect("chmod");
    path
}

/// Windows finds `~\.ssh\known_hosts` in the wine profile, not in the test's home: name the
/// test's file (a Unix path is a path on wine's `Z:` drive).
fn known_hosts_opt(rig: &Rig) -> String {
    format!(
        "UserKnownHostsFile={}",
        rig.home().join(".ssh/known_hosts").display()
    )
}

fn bash_call(command: &str) -> MockReply {
    MockReply::tool_calls(
        vec![MockToolCall::new(
            "b1",
            "bash",
            &json!({ "command": command }).to_string(),
        )],
        8,
    )
}

fn count(values: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    values.iter().filter(|v| pred(v)).count()
}

/// Hang guard for the first connect and install (wine starts slowly the first time).
const SETUP_GUARD: Duration = Duration::from_secs(180);
const GUARD: Duration = Duration::from_secs(60);

#[test]
#[ignore = "needs the Windows build under wine: run by .ci/run after .ci/cross_build.sh"]
fn windows_build_runs_a_turn_over_ssh_through_a_blackhole_and_lists_the_session() {
    let exe = wine_exe();
    in_netns(|ns| async move {
        let command = "echo run >> counter; echo started; sleep 6; echo finished";
        let rig = Rig::new(
            Arc::clone(&ns),
            vec![
                bash_call(command),
                MockReply::text(&["The command ", "ran once."]),
            ],
        )
        .await;
        let port = rig.sshd.port();
        let kh = known_hosts_opt(&rig);
        let exe_s = exe.display().to_string();
        let mut c = rig.spawn_client_via(
            &["wine", &exe_s],
            port,
            (HEARTBEAT_MS, DEAD_AFTER_MS),
            &["-o", &kh],
            "run the slow command",
        );
        let (i, _) = c
            .wait_for(0, SETUP_GUARD, "bash tool_started", |v| {
                v["type"] == "tool_started" && v["name"] == "bash"
            })
            .await;
        let fault = ns.fault(Fault::Blackhole, port).expect("blackhole");
        let (j, _) = c
            .wait_for(i, GUARD, "a reconnecting event", |v| {
                is_conn(v, "reconnecting")
            })
            .await;
        tokio::time::sleep_until((fault.since() + Duration::from_secs(8)).into()).await;
        fault.lift().expect("lift");
        let (k, _) = c
            .wait_for(j, GUARD, "connected (resumed)", is_resumed)
            .await;
        assert!(j < k);
        let status = c.wait_exit(GUARD).await;
        let out = c.values();
        let transcript = c.transcript();
        assert!(status.success(), "{transcript}");
        assert_eq!(
            count(&out, |v| v["type"] == "tool_started"),
            1,
            "{transcript}"
        );
        assert_eq!(
            count(&out, |v| v["type"] == "tool_finished"),
            1,
            "{transcript}"
        );
        assert_eq!(text_of(&out), "The command ran once.", "{transcript}");
        let last = out.last().expect("output");
        assert_eq!(last["type"], "turn_finished", "{transcript}");
        assert_eq!(last["outcome"], "completed", "{transcript}");
        assert_eq!(rig.mock.request_count(), 2, "each model step asked once");
        assert_eq!(
            std::fs::read_to_string(rig.host_file("counter")).expect("counter"),
            "run\n",
            "the command ran exactly once"
        );
        let session = out
            .iter()
            .find(|v| v["type"] == "session")
            .and_then(|v| v["session"].as_str().or(v["id"].as_str()))
            .unwrap_or_else(|| panic!("a session line: {transcript}"))
            .to_string();

        // `sessions --ssh` from the Windows build lists that session.
        let listed = ns
            .command("wine")
            .arg(&exe)
            .args(["sessions", "--ssh", &rig.dest(), "--json"])
            .args(["-p", &port.to_string(), "-F", "none", "-o", &kh])
            .arg("-i")
            .arg(&rig.key.private)
            .args(["-o", "IdentityAgent=none"])
            .current_dir(rig.laptop.path())
            .env("WINEDEBUG", "-all")
            .env("REASONIX_HOME", rig.rx_home())
            .env(
                "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
                musl_host_binary(),
            )
            .env_remove("SSH_AUTH_SOCK")
            .stdin(Stdio::null())
            .output()
            .expect("wine sessions");
        let text = String::from_utf8_lossy(&listed.stdout);
        assert!(
            listed.status.success(),
            "sessions: {text}\n{}",
            String::from_utf8_lossy(&listed.stderr)
        );
        assert!(
            text.contains(&session),
            "the session {session} is listed: {text}"
        );
    });
}

/// Start drive.mjs (the ACP TypeScript SDK client) inside the namespace, spawning the
/// Windows build through `wrapper`.
fn spawn_acp(rig: &Rig, wrapper: &Path, args: &[String], scenario: &str) -> std::process::Child {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp_node");
    assert!(
        dir.join("node_modules/@agentclientprotocol/sdk").is_dir(),
        "the ACP TypeScript SDK is not installed: run `npm ci --prefix local/tests/acp_node` (.ci/run does)"
    );
    let mut cmd = rig.ns.command("node");
    cmd.arg(dir.join("drive.mjs"))
        .arg(scenario)
        .env("AGENT_ARGV", serde_json::to_string(args).expect("argv"))
        .env("REASONIX_BIN", wrapper)
        .env("WS", rig.laptop.path())
        .env("REASONIX_HOME", rig.rx_home())
        .env(
            "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
            musl_host_binary(),
        )
        .env("REASONIX_HEARTBEAT_MS", HEARTBEAT_MS.to_string())
        .env("REASONIX_DEAD_AFTER_MS", DEAD_AFTER_MS.to_string())
        .env("REASONIX_IDLE_TIMEOUT_SECS", "120")
        .env_remove("RX_RECONNECT_KEY")
        .env_remove("SSH_AUTH_SOCK")
        .current_dir(rig.laptop.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().expect("node")
}

async fn report_of(mut child: std::process::Child, guard: Duration) -> (Value, String, bool) {
    let deadline = Instant::now() + guard;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the ACP client did not finish within {guard:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (mut out, mut err) = (String::new(), String::new());
    let _ = child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out);
    let _ = child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err);
    let report: Value = out
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no report; stdout {out}\nstderr {err}"));
    (report, err, status.success())
}

fn acp_args(rig: &Rig, key: &Path) -> Vec<String> {
    vec![
        "acp".into(),
        "--ssh".into(),
        rig.dest(),
        "-p".into(),
        rig.sshd.port().to_string(),
        "-F".into(),
        "none".into(),
        "-o".into(),
        known_hosts_opt(rig),
        "-i".into(),
        key.display().to_string(),
        "-o".into(),
        "IdentityAgent=none".into(),
    ]
}

#[test]
#[ignore = "needs the Windows build under wine: run by .ci/run after .ci/cross_build.sh"]
fn windows_build_serves_acp_over_ssh_and_a_locked_key_fails_closed() {
    let exe = wine_exe();
    in_netns(|ns| async move {
        let rig = Rig::new(
            Arc::clone(&ns),
            vec![
                bash_call("echo run >> counter; echo hello-from-host"),
                MockReply::text(&["Done ", "once."]),
            ],
        )
        .await;
        let wrapper = wine_wrapper(rig.laptop.path(), &exe);
        let child = spawn_acp(&rig, &wrapper, &acp_args(&rig, &rig.key.private), "ssh");
        let (report, stderr, ok) = report_of(child, SETUP_GUARD).await;
        assert!(ok, "ACP client failed: {report:#}\n{stderr}");
        assert_eq!(report["stopReason"], "end_turn", "{report:#}\n{stderr}");
        let log: Vec<&Value> = report["log"].as_array().expect("log").iter().collect();
        assert_eq!(
            log.iter().filter(|v| v["at"] == "permission").count(),
            1,
            "{log:#?}"
        );
        let done = log
            .iter()
            .find(|v| {
                v["kind"] == "tool_call_update" && v["id"] == "b1" && v["status"] == "completed"
            })
            .unwrap_or_else(|| panic!("the call completed: {log:#?}"));
        assert!(
            done["content"][0]["content"]["text"]
                .as_str()
                .unwrap_or("")
                .contains("hello-from-host"),
            "{done:#}"
        );
        let answer: String = log
            .iter()
            .filter(|v| v["kind"] == "agent_message_chunk")
            .filter_map(|v| v["text"].as_str())
            .collect();
        assert_eq!(answer, "Done once.");
        assert_eq!(
            std::fs::read_to_string(rig.host_file("counter")).expect("counter"),
            "run\n"
        );

        // A passphrase-protected key, and no terminal to type it in: fails closed, naming
        // the agent as the way.
        let locked = reasonix_testkit::sshd::ClientKey::generate(
            &rig.home().join(".ssh"),
            "id_locked",
            Some("a passphrase nobody types"),
        )
        .expect("key with a passphrase");
        rig.user.authorize(&locked.public).expect("authorize");
        let child = spawn_acp(
            &rig,
            &wrapper,
            &acp_args(&rig, &locked.private),
            "new-fails",
        );
        let (report, stderr, _) = report_of(child, GUARD).await;
        let err = &report["newSession"];
        assert_eq!(err["code"], -32603, "{report:#}\n{stderr}");
        let data = err["data"].as_str().expect("the reason");
        assert!(data.contains("[auth]"), "{data}");
        assert!(data.contains("ssh-agent"), "{data}");
    });
}
