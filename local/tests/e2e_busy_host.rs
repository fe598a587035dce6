//! The heartbeat does not starve on a busy one-core host: with the client, the daemon and a
//! tool that saturates the CPU all pinned to one core, a tight liveness window (500 ms
//! heartbeat, 2 s dead) sees no false disconnect, because both link ends beat on tasks of
//! their own rather than behind tool work.

mod common;

use std::process::Command;

use common::{host_bin, LocalRig};
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cpu_bound_tool_on_one_core_causes_no_false_disconnect() {
    // Four busy loops for 6 s on the one core everything shares.
    let command =
        "for i in 1 2 3 4; do timeout 6 sh -c 'while :; do :; done' & done; wait; echo spun";
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "b1",
                "bash",
                &json!({ "command": command }).to_string(),
            )],
            3,
        ),
        MockReply::text(&["the core was busy"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_BUSY_KEY", "sk-busy");
    let out = tokio::task::spawn_blocking({
        let (home, ws) = (rig.home.clone(), rig.ws.clone());
        move || {
            Command::new("taskset")
                .args(["-c", "0"])
                .arg(env!("CARGO_BIN_EXE_reasonix"))
                .args(["run", "--json", "--yolo", "spin the cpu"])
                .current_dir(&ws)
                .env("REASONIX_HOME", &home)
                .env("REASONIX_REMOTE_BIN", host_bin())
                .env("REASONIX_HEARTBEAT_MS", "500")
                .env("REASONIX_DEAD_AFTER_MS", "2000")
                .env("REASONIX_IDLE_TIMEOUT_SECS", "5")
                .env_remove("XDG_RUNTIME_DIR")
                .output()
                .expect("run")
        }
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let transcript = format!(
        "{stdout}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{transcript}");
    let events: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let finished = events
        .iter()
        .find(|e| e["type"] == "tool_finished" && e["name"] == "bash")
        .unwrap_or_else(|| panic!("no bash result: {transcript}"));
    assert_eq!(finished["is_error"], false, "{transcript}");
    assert!(
        finished["summary"].as_str().unwrap_or("").contains("spun"),
        "{transcript}"
    );
    assert!(
        !events
            .iter()
            .any(|e| e["type"] == "connection" && e["state"] == "reconnecting"),
        "false disconnect on a busy core: {transcript}"
    );
    assert_eq!(events.last().expect("events")["outcome"], "completed");
    assert_eq!(mock.request_count(), 2);
    // The daemon really shared the one core (it inherited the client's affinity).
    let marker = std::fs::read_dir(rig.home.join("sessions"))
        .expect("sessions")
        .flatten()
        .find_map(|e| std::fs::read(e.path().join("daemon.json")).ok())
        .expect("daemon marker");
    let pid = serde_json::from_slice::<Value>(&marker).expect("marker")["pid"]
        .as_u64()
        .expect("pid");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("daemon alive");
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Cpus_allowed_list:") && l.trim_end().ends_with("\t0")),
        "{status}"
    );
    // SAFETY: kill(2) of the daemon this test started.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
}
