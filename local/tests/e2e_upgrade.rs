//! Safe upgrades in local mode with two builds of the real binaries: a process started with
//! `REASONIX_TEST_BUILD_ID` is "another build" (laptop and host side alike).
//!
//! - a headless `reasonix run` of the new build refuses to replace an old-build daemon that
//!   runs a turn (the turn goes on), and with `--upgrade` replaces it; the new daemon resumes
//!   the old session from its journal (the cut turn is closed as interrupted);
//! - when the new build's daemon fails to start, the old build's daemon is started again
//!   (same executable, arguments and environment) and used.

mod common;
mod term_common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{host_bin, LocalRig};
use reasonix_testkit::mock_provider::{MockProvider, MockReply};
use serde_json::Value;

const OLD: &str = "0.0.1-oldbuild";

fn reasonix(home: &Path, ws: &Path, build: Option<&str>, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reasonix"));
    cmd.args(args)
        .current_dir(ws)
        .env("REASONIX_HOME", home)
        .env("REASONIX_REMOTE_BIN", host_bin())
        .env("REASONIX_IDLE_TIMEOUT_SECS", "60")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("REASONIX_TEST_DAEMON_FAIL");
    match build {
        Some(b) => cmd.env("REASONIX_TEST_BUILD_ID", b),
        None => cmd.env_remove("REASONIX_TEST_BUILD_ID"),
    };
    cmd
}

/// `reasonix-remote status --json` for this home: the daemons and their sessions.
fn host_status(home: &Path) -> Vec<Value> {
    let out = Command::new(host_bin())
        .args(["status", "--json"])
        .env("REASONIX_HOME", home)
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("REASONIX_TEST_BUILD_ID")
        .output()
        .expect("status");
    let rig = home
        .parent()
        .expect("rig dir")
        .canonicalize()
        .expect("canonical rig dir");
    let rig = rig.to_string_lossy().to_string();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        // Only this rig's daemons (other tests may share /tmp/reasonix-<uid>).
        .filter(|v| v["workspace"].as_str().is_some_and(|w| w.starts_with(&rig)))
        .collect()
}

fn stop(home: &Path, ws: &Path) {
    let _ = Command::new(host_bin())
        .args(["stop", "--workspace"])
        .arg(ws)
        .env("REASONIX_HOME", home)
        .env_remove("XDG_RUNTIME_DIR")
        .output();
}

async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The old build's `run` busy with a turn that streams for a long time (the new build's
/// turns answer at once), once that turn reached the model.
async fn busy_old_build() -> (MockProvider, LocalRig, std::process::Child) {
    let slow: Vec<String> = (0..400).map(|i| format!("w{i} ")).collect();
    let mock = MockProvider::start(vec![
        MockReply::text(&slow).slow(Duration::from_millis(100)),
        MockReply::text(&["upgraded answer"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_U_KEY", "sk-upgrade");
    let old = reasonix(
        &rig.home,
        &rig.ws,
        Some(OLD),
        &["run", "--yolo", "--json", "long job"],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("old run");
    wait_for("the old build's turn to reach the model", || {
        mock.request_count() >= 1
    })
    .await;
    (mock, rig, old)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_old_build_is_not_replaced_headless_unless_upgrade() {
    let (mock, rig, mut old) = busy_old_build().await;
    let (home, ws) = (rig.home.clone(), rig.ws.clone());

    // Headless, no --upgrade: refused, with a message that says what to do; nothing killed.
    let refused = tokio::task::block_in_place(|| {
        reasonix(&home, &ws, None, &["run", "--yolo", "quick"])
            .output()
            .expect("new run")
    });
    let err = String::from_utf8_lossy(&refused.stderr).to_string();
    assert!(!refused.status.success(), "{err}");
    assert!(err.contains(OLD) && err.contains("--upgrade"), "{err}");
    assert!(err.contains("middle of a turn"), "{err}");
    assert!(
        old.try_wait().expect("old").is_none(),
        "the old run must still be going"
    );
    let st = host_status(&home);
    assert_eq!(st.len(), 1, "{st:?}");
    assert_eq!(st[0]["build_id"], OLD, "{st:?}");
    assert_eq!(st[0]["sessions"][0]["state"], "running", "{st:?}");
    let old_session = st[0]["sessions"][0]["id"].as_str().expect("id").to_string();
    assert_eq!(mock.request_count(), 1);

    // --upgrade: the old daemon is replaced and the new build answers.
    let up = tokio::task::block_in_place(|| {
        reasonix(&home, &ws, None, &["run", "--yolo", "--upgrade", "quick"])
            .output()
            .expect("upgrade run")
    });
    assert!(
        up.status.success(),
        "{}{}",
        String::from_utf8_lossy(&up.stdout),
        String::from_utf8_lossy(&up.stderr)
    );
    assert!(
        String::from_utf8_lossy(&up.stdout).contains("upgraded answer"),
        "{}",
        String::from_utf8_lossy(&up.stdout)
    );
    // The old client loses its daemon (and refuses the new build), it does not hang.
    let _ = tokio::task::block_in_place(|| old.wait());
    let st = host_status(&home);
    assert_eq!(st.len(), 1, "{st:?}");
    assert_eq!(
        st[0]["build_id"],
        reasonix_forward::compiled_build_id(),
        "{st:?}"
    );
    // The new daemon resumed the old session from its journal; the cut turn is closed.
    let sessions = st[0]["sessions"].as_array().expect("sessions");
    let resumed = sessions
        .iter()
        .find(|s| s["id"] == old_session.as_str())
        .unwrap_or_else(|| panic!("old session missing: {st:?}"));
    assert_eq!(resumed["state"], "idle", "{st:?}");
    assert_eq!(resumed["turns"], 1, "{st:?}");
    // Opening it with the new build closes the cut turn in its journal and goes on.
    mock.push(vec![MockReply::text(&["resumed after the upgrade"])]);
    let again = tokio::task::block_in_place(|| {
        reasonix(
            &home,
            &ws,
            None,
            &["run", "--yolo", "--session", &old_session, "go on"],
        )
        .output()
        .expect("resume run")
    });
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("resumed after the upgrade"),
        "{}{}",
        String::from_utf8_lossy(&again.stdout),
        String::from_utf8_lossy(&again.stderr)
    );
    let journal = std::fs::read_dir(home.join("sessions"))
        .expect("sessions")
        .flatten()
        .map(|d| d.path().join(format!("{old_session}.jsonl")))
        .find(|p| p.is_file())
        .expect("old journal");
    let text = std::fs::read_to_string(journal).expect("journal");
    assert!(text.contains("interrupted"), "{text}");
    stop(&home, &ws);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_build_that_fails_to_start_falls_back_to_the_old_one() {
    let mock = MockProvider::start(vec![
        MockReply::text(&["old build first"]),
        MockReply::text(&["answered by the old build"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_F_KEY", "sk-fallback");
    let (home, ws) = (rig.home.clone(), rig.ws.clone());
    let first = tokio::task::block_in_place(|| {
        reasonix(&home, &ws, Some(OLD), &["run", "--yolo", "one"])
            .output()
            .expect("old run")
    });
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let before = host_status(&home);
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(before[0]["build_id"], OLD);
    let old_pid = before[0]["pid"].as_u64().expect("pid");

    // The new build's daemon refuses to start (test knob): the idle old daemon was stopped
    // for the upgrade, so the bridge starts it again and the run goes through it.
    let out = tokio::task::block_in_place(|| {
        reasonix(&home, &ws, None, &["run", "--yolo", "two"])
            .env("REASONIX_TEST_DAEMON_FAIL", "1")
            .output()
            .expect("new run")
    });
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("answered by the old build"),
        "{stdout}{stderr}"
    );
    assert!(
        stderr.contains("did not start") && stderr.contains(OLD),
        "{stderr}"
    );
    let after = host_status(&home);
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0]["build_id"], OLD, "{after:?}");
    assert_ne!(
        after[0]["pid"].as_u64(),
        Some(old_pid),
        "restarted, not left alone"
    );
    stop(&home, &ws);
}

/// The TUI, faced with a daemon of another build that runs a turn, asks (issue #17): "attach
/// read-only to the old build" shows the old turn streaming and changes nothing; a second
/// TUI's "upgrade now" replaces the old daemon, and this build answers the next turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tui_asks_before_replacing_a_busy_old_build() {
    use term_common::Tmux;
    let (mock, rig, mut old) = busy_old_build().await;
    let (home, ws) = (rig.home.clone(), rig.ws.clone());
    let tui = format!(
        "cd {} && env -u XDG_RUNTIME_DIR -u REASONIX_TEST_BUILD_ID -u REASONIX_TEST_DAEMON_FAIL HOME={} REASONIX_HOME={} REASONIX_REMOTE_BIN={} REASONIX_IDLE_TIMEOUT_SECS=60 {}",
        ws.display(),
        rig.dir.path().display(),
        home.display(),
        host_bin().display(),
        env!("CARGO_BIN_EXE_reasonix")
    );
    tokio::task::block_in_place(|| {
        let t = Tmux::tui(&tui);
        let s = t.wait_for("Another build is running a turn");
        assert!(s.contains(OLD), "{s}");
        assert!(s.contains("attach read-only to the old build"), "{s}");
        t.send_keys(&["2"]);
        // Read-only on the old build: the old turn's words stream in.
        t.wait_screen(Duration::from_secs(60), "the old turn streaming", |s| {
            s.contains("w3 w4")
        });
        t.send_keys(&["C-c"]);
        t.send_keys(&["C-c"]);
    });
    assert!(
        old.try_wait().expect("old").is_none(),
        "the old run must still be going"
    );
    let st = host_status(&home);
    assert_eq!(st.len(), 1, "{st:?}");
    assert_eq!(st[0]["build_id"], OLD, "read-only replaced nothing: {st:?}");
    assert_eq!(mock.request_count(), 1, "nothing else reached the model");

    tokio::task::block_in_place(|| {
        let t = Tmux::tui(&tui);
        t.wait_for("Another build is running a turn");
        t.send_keys(&["u"]);
        t.wait_for("connected");
        t.send_keys(&["quick", "Enter"]);
        t.wait_for("upgraded answer");
        t.send_keys(&["C-c"]);
        t.send_keys(&["C-c"]);
    });
    let _ = tokio::task::block_in_place(|| old.wait());
    let st = host_status(&home);
    assert_eq!(st.len(), 1, "{st:?}");
    assert_eq!(
        st[0]["build_id"],
        reasonix_forward::compiled_build_id(),
        "{st:?}"
    );
    stop(&home, &ws);
}
