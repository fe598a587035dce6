//! Goal benchmark (ignored by default; run by `bench/goal_blackhole.sh`): a 20-turn goal run
//! by `reasonix run --ssh --goal` across a 25-second blackhole of the SSH link, inside a
//! private network namespace with a real sshd and the mock provider. Each turn runs a bash
//! command (1 s) that appends to a counter file, reports with `update_goal`, and answers; the
//! twentieth reports `complete`. Reported as ratios: provider requests per model step and
//! command runs per bash call (both must be 1.00), plus the wall time.
//!
//! With `BENCH_KILL_CLIENT=1` the client is killed (SIGKILL) as the blackhole starts: the
//! laptop's goal keeper (`reasonix keep`, started by the client) carries the goal across the
//! blackhole and to its end with no client attached; the run ends when the command file has
//! every turn and the keeper has exited.
//!
//! Environment: `BENCH_TURNS` (default 20), `BENCH_BLACKHOLE_SECS` (default 25),
//! `BENCH_KILL_CLIENT` (default 0).

mod reconnect_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use reasonix_testkit::mock_provider::{MockReply, MockToolCall};
use reasonix_testkit::netfault::Fault;
use reconnect_common::*;
use serde_json::json;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn call(id: &str, name: &str, args: serde_json::Value) -> MockToolCall {
    MockToolCall::new(id, name, &args.to_string())
}

#[test]
#[ignore = "benchmark: run bench/goal_blackhole.sh"]
fn goal_across_a_blackhole() {
    let turns = env_u64("BENCH_TURNS", 20).max(1);
    let hole = Duration::from_secs(env_u64("BENCH_BLACKHOLE_SECS", 25));
    let kill_client = env_u64("BENCH_KILL_CLIENT", 0) == 1;
    in_netns(|ns| async move {
        let mut script = Vec::new();
        for t in 1..=turns {
            script.push(MockReply::tool_calls(
                vec![call(
                    &format!("b{t}"),
                    "bash",
                    json!({"command": format!("sleep 1; echo {t} >> runs.txt")}),
                )],
                2,
            ));
            let status = if t == turns { "complete" } else { "continue" };
            script.push(MockReply::tool_calls(
                vec![call(
                    &format!("u{t}"),
                    "update_goal",
                    json!({"status": status, "evidence": format!("turn {t} appended")}),
                )],
                2,
            ));
            script.push(MockReply::text(&[format!("turn {t} done")]));
        }
        let steps = script.len();
        let rig = Rig::new(Arc::clone(&ns), script).await;
        let start = Instant::now();
        let mut c = rig.spawn_client(
            rig.sshd.port(),
            (HEARTBEAT_MS, DEAD_AFTER_MS),
            &["--goal"],
            "append to runs.txt once per turn",
        );
        // Cut the link once the second turn's command runs.
        let (from, _) = c
            .wait_for(0, Duration::from_secs(120), "the second command", |v| {
                v["type"] == "tool_started" && v["call_id"] == "b2"
            })
            .await;
        let fault = ns
            .fault(Fault::Blackhole, rig.sshd.port())
            .expect("blackhole");
        if kill_client {
            c.kill9();
        }
        tokio::time::sleep(hole).await;
        fault.lift().expect("lift");
        let _ = from;
        let status = if kill_client {
            // No client: the keeper carries the goal; done when every command ran and the
            // keeper (its pid file) is gone.
            let keepers = rig.rx_home().join("keepers");
            let deadline = Instant::now() + Duration::from_secs(300);
            loop {
                let runs = std::fs::read_to_string(rig.host_file("runs.txt")).unwrap_or_default();
                let kept = std::fs::read_dir(&keepers)
                    .map(|d| d.count() > 0)
                    .unwrap_or(false);
                if runs.lines().count() as u64 >= turns && !kept {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the kept goal did not end: {runs}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            // Exit 0 stands for "the keeper ended the goal complete"; checked below by the
            // requests and runs.
            std::process::ExitStatus::default()
        } else {
            c.wait_exit(Duration::from_secs(300)).await
        };
        let wall = start.elapsed().as_secs_f64();
        let requests = rig.mock.request_count();
        let runs = std::fs::read_to_string(rig.host_file("runs.txt")).unwrap_or_default();
        let lines = runs.lines().count() as u64;
        let expected: String = (1..=turns).map(|t| format!("{t}\n")).collect();
        println!(
            "RESULT goal_blackhole: turns={turns} blackhole={}s client_killed={kill_client} exit={:?} wall={wall:.1}s \
             requests/steps={:.2} ({requests}/{steps}) runs/bash_calls={:.2} ({lines}/{turns}) in_order={}",
            hole.as_secs(),
            status.code(),
            requests as f64 / steps as f64,
            lines as f64 / turns as f64,
            runs == expected
        );
        assert!(status.success(), "{}", c.transcript());
        assert_eq!(requests, steps, "{}", c.transcript());
        assert_eq!(runs, expected);
    });
}
