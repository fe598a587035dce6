//! `reasonix acp --ssh` on a real sshd inside a private network namespace, driven by the ACP
//! TypeScript SDK (tests/acp_node/drive.mjs) with the arguments of the remote Zed example in
//! docs/ACP.md: a blackhole in the middle of a prompt is only a notice to the editor, the
//! turn completes and its command runs once; an unknown host key fails closed with what to do.

#[path = "acp_common/netns.rs"]
mod acp_netns;
#[path = "acp_common/node.rs"]
mod acp_node_common;
mod reconnect_common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reasonix_testkit::mock_provider::{MockReply, MockToolCall};
use reasonix_testkit::netfault::Fault;
use reconnect_common::*;
use serde_json::{json, Value};

/// The `agent_servers` args of the remote example in docs/ACP.md, with its destination
/// replaced by `dest` and the test's SSH options appended.
fn zed_ssh_args(rig: &Rig, port: u16) -> Vec<String> {
    zed_ssh_args_with_key(rig, port, &rig.key.private)
}

/// [`zed_ssh_args`] with another identity file.
fn zed_ssh_args_with_key(rig: &Rig, port: u16, key: &Path) -> Vec<String> {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/ACP.md"))
        .expect("docs/ACP.md");
    let block = doc
        .split("```json\n")
        .nth(2)
        .and_then(|b| b.split("```").next())
        .expect("the remote Zed example");
    let v: Value = serde_json::from_str(block).expect("valid JSON");
    let (_, entry) = v["agent_servers"]
        .as_object()
        .and_then(|m| m.iter().next())
        .expect("one agent server");
    assert_eq!(entry["command"], "reasonix");
    let mut args: Vec<String> = entry["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string").to_string())
        .collect();
    assert_eq!(args[..2], ["acp", "--ssh"]);
    args[2] = rig.dest();
    args.extend([
        "-p".into(),
        port.to_string(),
        "-F".into(),
        "none".into(),
        "-i".into(),
        key.display().to_string(),
        "-o".into(),
        "IdentityAgent=none".into(),
    ]);
    args
}

/// Start drive.mjs inside the namespace.
fn spawn_driver(
    rig: &Rig,
    args: &[String],
    scenario: &str,
    liveness: (u64, u64),
) -> std::process::Child {
    acp_netns::driver_command(rig, args, scenario)
        .env("REASONIX_HEARTBEAT_MS", liveness.0.to_string())
        .env("REASONIX_DEAD_AFTER_MS", liveness.1.to_string())
        .env("REASONIX_IDLE_TIMEOUT_SECS", "120")
        .spawn()
        .expect("node")
}

fn journal_has(rig: &Rig, pred: impl Fn(&Value) -> bool) -> bool {
    rig.host_journals()
        .iter()
        .any(|j| journal_events(j).iter().any(&pred))
}

#[test]
fn blackhole_mid_prompt_is_a_notice_and_the_turn_completes_once() {
    in_netns(|ns| async move {
        let command = "echo run >> counter; echo started; sleep 6; echo finished";
        let rig = Rig::new(
            Arc::clone(&ns),
            vec![
                MockReply::tool_calls(
                    vec![MockToolCall::new(
                        "b1",
                        "bash",
                        &json!({ "command": command }).to_string(),
                    )],
                    4,
                ),
                MockReply::text(&["The command ", "ran once."]),
            ],
        )
        .await;
        let port = rig.sshd.port();
        let args = zed_ssh_args(&rig, port);
        let child = spawn_driver(&rig, &args, "ssh", (HEARTBEAT_MS, DEAD_AFTER_MS));
        // The command started on the host (after the editor allowed it): cut the network for
        // longer than the dead-after window, while the command still runs.
        let deadline = Instant::now() + Duration::from_secs(120);
        while !journal_has(&rig, |e| {
            e["type"] == "tool_started" && e["call_id"] == "b1"
        }) {
            assert!(Instant::now() < deadline, "the bash call never started");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let fault = ns.fault(Fault::Blackhole, port).expect("blackhole");
        tokio::time::sleep_until((fault.since() + Duration::from_secs(8)).into()).await;
        fault.lift().expect("lift");

        let (report, stderr) = acp_node_common::wait_report(child, Duration::from_secs(90)).await;
        assert_eq!(report["stopReason"], "end_turn", "{report:#}\n{stderr}");
        let log: Vec<&Value> = report["log"].as_array().expect("log").iter().collect();
        let thoughts: Vec<&str> = log
            .iter()
            .filter(|v| v["kind"] == "agent_thought_chunk")
            .filter_map(|v| v["text"].as_str())
            .collect();
        assert!(
            thoughts
                .iter()
                .any(|t| t.contains("connection to the host lost")),
            "a notice says the link dropped: {thoughts:?}"
        );
        assert!(
            thoughts.iter().any(|t| t.contains("reconnected")),
            "and that it is back: {thoughts:?}"
        );
        // Once each: the permission, the call, its completion; the answer in full.
        assert_eq!(log.iter().filter(|v| v["at"] == "permission").count(), 1);
        assert_eq!(
            log.iter()
                .filter(|v| v["kind"] == "tool_call" && v["id"] == "b1")
                .count(),
            1
        );
        let done: Vec<&&Value> = log
            .iter()
            .filter(|v| {
                v["kind"] == "tool_call_update" && v["id"] == "b1" && v["status"] == "completed"
            })
            .collect();
        assert_eq!(done.len(), 1, "{log:#?}");
        let out = done[0]["content"][0]["content"]["text"]
            .as_str()
            .expect("output");
        assert!(out.contains("started\nfinished"), "{out}");
        let answer: String = log
            .iter()
            .filter(|v| v["kind"] == "agent_message_chunk")
            .filter_map(|v| v["text"].as_str())
            .collect();
        assert_eq!(answer, "The command ran once.");
        assert_eq!(rig.mock.request_count(), 2, "each model step asked once");
        assert_eq!(
            std::fs::read_to_string(rig.host_file("counter")).expect("counter"),
            "run\n",
            "the command ran exactly once"
        );
    });
}

#[test]
fn unknown_host_key_fails_closed_and_says_to_run_reasonix_ssh_once() {
    in_netns(|ns| async move {
        let rig = Rig::new(Arc::clone(&ns), Vec::new()).await;
        std::fs::write(rig.home().join(".ssh/known_hosts"), "").expect("forget the host key");
        let port = rig.sshd.port();
        let args = zed_ssh_args(&rig, port);
        let child = spawn_driver(&rig, &args, "new-fails", (HEARTBEAT_MS, DEAD_AFTER_MS));
        let (report, _) = acp_node_common::wait_report(child, Duration::from_secs(60)).await;
        let err = &report["newSession"];
        assert_eq!(err["code"], -32603, "{report:#}");
        let data = err["data"].as_str().expect("the reason");
        assert!(data.contains("[host key]"), "{data}");
        assert!(
            data.contains(&format!("run `reasonix ssh {}` once", rig.dest())),
            "{data}"
        );
        // Nothing was installed: no credential went to an unverified host.
        assert!(!rig.user.home.join(".reasonix/remote").exists());
    });
}

#[test]
fn a_key_passphrase_the_editor_cannot_type_fails_closed_and_says_to_use_the_agent() {
    in_netns(|ns| async move {
        let rig = Rig::new(Arc::clone(&ns), Vec::new()).await;
        let locked = reasonix_testkit::sshd::ClientKey::generate(
            &rig.home().join(".ssh"),
            "id_locked",
            Some("a passphrase nobody types"),
        )
        .expect("key with a passphrase");
        rig.user.authorize(&locked.public).expect("authorize");
        let port = rig.sshd.port();
        let args = zed_ssh_args_with_key(&rig, port, &locked.private);
        let child = spawn_driver(&rig, &args, "new-fails", (HEARTBEAT_MS, DEAD_AFTER_MS));
        let (report, _) = acp_node_common::wait_report(child, Duration::from_secs(60)).await;
        let err = &report["newSession"];
        assert_eq!(err["code"], -32603, "{report:#}");
        let data = err["data"].as_str().expect("the reason");
        assert!(data.contains("[auth]"), "{data}");
        assert!(data.contains("ssh-agent"), "{data}");
        assert!(!rig.user.home.join(".reasonix/remote").exists());
    });
}
