//! A fleet over SSH through a network blackhole (#33 "done means"): sshd, the client and the
//! mock provider run inside a private network namespace (see `reconnect_faults.rs`); a
//! fleet of two writers (disjoint `write_paths`, each running a slow bash command) and two
//! readers is started with `run --ssh --json`, the SSH traffic is blackholed while the
//! writers' commands run (one ends inside the blackhole, so its next model step waits for
//! the laptop), then let through again. The client resumes and the turn
//! completes; exact-once counts from the mock provider's request log (two requests per
//! child, one per step, none repeated) and from the host's journal (each child's tool call
//! started and finished once; each command ran once, by the files it appended to).

mod reconnect_common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use reasonix_testkit::mock_provider::{MockReply, MockToolCall, RecordedRequest};
use reasonix_testkit::netfault::Fault;
use reconnect_common::*;
use serde_json::{json, Value};

const SETUP_GUARD: Duration = Duration::from_secs(90);
const GUARD: Duration = Duration::from_secs(45);
const BLACKHOLE: Duration = Duration::from_secs(6);

/// The item a child's request is for: its task (the first user message) names it.
fn item_of(r: &RecordedRequest) -> Option<String> {
    let msgs = r.messages();
    let sys = msgs.first()?["content"].as_str()?.to_string();
    if !sys.contains("<subagent profile=") {
        return None;
    }
    let task = msgs.get(1)?["content"].as_str()?.to_string();
    task.split_whitespace().next().map(str::to_string)
}

/// The scripted model: the parent starts the fleet, then answers; each writer runs its
/// slow command then answers; each reader reads then answers.
fn reply(r: &RecordedRequest) -> MockReply {
    let msgs = r.messages();
    let steps_done = msgs.iter().filter(|m| m["role"] == "tool").count();
    match item_of(r) {
        None if steps_done == 0 => MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_f",
                "fleet",
                &json!({"items": [
                    {"id": "w1", "prompt": "writer-1 append to a/runs", "write_paths": ["a"]},
                    {"id": "w2", "prompt": "writer-2 append to b/runs", "write_paths": ["b"]},
                    {"id": "r1", "prompt": "reader-1 read the README", "profile": "explore"},
                    {"id": "r2", "prompt": "reader-2 read the README", "profile": "explore"},
                ]})
                .to_string(),
            )],
            4,
        ),
        None => MockReply::text(&["the fleet is done"]),
        Some(item) if steps_done == 0 => {
            let call = if let Some(n) = item.strip_prefix("writer-") {
                // Writer 2's command ends inside the blackhole (its next model step waits
                // for the laptop); writer 1's after it.
                let (dir, secs) = if n == "1" { ("a", 8) } else { ("b", 2) };
                MockToolCall::new(
                    &format!("c_{item}"),
                    "bash",
                    &json!({"command": format!("echo run >> {dir}/runs; sleep {secs}; echo {item}-slept")})
                        .to_string(),
                )
            } else {
                MockToolCall::new(
                    &format!("c_{item}"),
                    "read_file",
                    &json!({"path": "README.md"}).to_string(),
                )
            };
            MockReply::tool_calls(vec![call], 2)
        }
        Some(item) => MockReply::text(&[format!("{item} done")]),
    }
}

#[test]
fn a_fleet_through_a_blackhole_runs_each_step_and_each_tool_call_once() {
    in_netns(|ns| async move {
        let rig = Rig::new(Arc::clone(&ns), Vec::new()).await;
        // The scripted replies depend on the request (children ask in any order).
        let rig = Rig {
            mock: reasonix_testkit::mock_provider::MockProvider::start_with(reply).await,
            ..rig
        };
        std::fs::write(
            rig.rx_home().join("config.toml"),
            format!(
                "default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"RX_RECONNECT_KEY\"\n",
                rig.mock.base_url()
            ),
        )
        .expect("config");
        for d in ["a", "b"] {
            rig.user
                .write_file(&format!("ws/{d}/.keep"), "", 0o644)
                .expect("write path");
        }
        let port = rig.sshd.port();
        let mut c = rig.spawn_client(port, (HEARTBEAT_MS, DEAD_AFTER_MS), &[], "run the fleet");
        // Both writers' commands are running.
        let is_bash_start = |v: &Value| {
            v["type"] == "subagent"
                && v["event"]["type"] == "tool_started"
                && v["event"]["name"] == "bash"
        };
        let (i, _) = c
            .wait_for(0, SETUP_GUARD, "a writer's bash", is_bash_start)
            .await;
        let (i, _) = c
            .wait_for(i + 1, GUARD, "the other writer's bash", is_bash_start)
            .await;
        let fault = ns.fault(Fault::Blackhole, port).expect("blackhole");
        let (j, _) = c
            .wait_for(i, GUARD, "a reconnecting event", |v| {
                is_conn(v, "reconnecting")
            })
            .await;
        tokio::time::sleep_until((fault.since() + BLACKHOLE).into()).await;
        fault.lift().expect("lift");
        c.wait_for(j, GUARD, "connected (resumed)", is_resumed)
            .await;
        let status = c.wait_exit(Duration::from_secs(60)).await;
        let transcript = c.transcript();
        assert!(status.success(), "{transcript}");
        let out = c.values();
        let fleet = out
            .iter()
            .find(|v| v["type"] == "tool_finished" && v["call_id"] == "call_f")
            .unwrap_or_else(|| panic!("no fleet result: {transcript}"));
        assert!(
            fleet["summary"]
                .as_str()
                .unwrap_or_default()
                .starts_with("4 of 4 fleet items completed."),
            "{fleet}"
        );

        // The mock's log: the parent twice, each child twice (one request per step).
        let reqs = rig.mock.requests();
        let mut per_item: HashMap<String, usize> = HashMap::new();
        let mut parent = 0;
        for r in &reqs {
            match item_of(r) {
                Some(item) => *per_item.entry(item).or_default() += 1,
                None => parent += 1,
            }
        }
        assert_eq!(parent, 2, "{per_item:?}");
        for item in ["writer-1", "writer-2", "reader-1", "reader-2"] {
            assert_eq!(per_item.get(item), Some(&2), "{item}: {per_item:?}");
        }
        assert_eq!(reqs.len(), 10);

        // The host journal: each child's call started and finished once.
        let events: Vec<Value> = rig
            .host_journals()
            .iter()
            .flat_map(|j| journal_events(j))
            .filter(|e| e["type"] == "subagent")
            .collect();
        for item in ["writer-1", "writer-2", "reader-1", "reader-2"] {
            let id = format!("c_{item}");
            for kind in ["tool_started", "tool_finished"] {
                let n = events
                    .iter()
                    .filter(|e| e["event"]["type"] == kind && e["event"]["call_id"] == id)
                    .count();
                assert_eq!(n, 1, "{kind} of {id} journaled {n} times");
            }
        }
        let starts = events
            .iter()
            .filter(|e| e["event"]["type"] == "user_turn")
            .count();
        assert_eq!(starts, 4, "each child started once");
        // Each command ran once.
        for d in ["a", "b"] {
            assert_eq!(
                std::fs::read_to_string(rig.host_file(&format!("{d}/runs"))).expect("runs"),
                "run\n"
            );
        }
    });
}
