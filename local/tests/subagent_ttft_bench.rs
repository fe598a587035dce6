//! Six children streaming at once over one link (#33 "Numbers"; ignored by default, run by
//! `bench/subagent_ttft.sh`): the time to first token of each of 6 `parallel_tasks`
//! children whose model requests cross the link together, against a lone child's (one
//! `task`) in the same run, through the same link.
//!
//! Like `ttft_bench`: a real sshd in a private network namespace, the link through the
//! testkit delay proxy (`BENCH_DELAY_MS` each way, default 25, i.e. a 50 ms RTT), and the
//! host daemon's own log of every stream's time to first chunk (`ttft_us`, from the
//! request's start on the host to its first chunk back over the link). A child's stream id
//! carries its id (`<session>-sa-N-...`), so its lines are told from the parent's. Each
//! round is two `reasonix run`s: a lone `task` child, then `parallel_tasks` of six.
//! Environment: `BENCH_ROUNDS` (default 5), `BENCH_DELAY_MS` (default 25).

mod reconnect_common;

use std::time::Duration;

use reasonix_testkit::mock_provider::{MockReply, MockToolCall};
use reasonix_testkit::netfault::DelayProxy;
use reconnect_common::*;
use serde_json::json;

const CHILDREN: usize = 6;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `(stream id, ttft ms)` of every stream the daemon logged, in log order.
fn ttft_lines(rig: &Rig) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let logs = rig.user.home.join(".reasonix/logs");
    let mut files: Vec<_> = std::fs::read_dir(&logs)
        .expect("daemon logs")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    files.sort();
    for f in files {
        for line in std::fs::read_to_string(&f).unwrap_or_default().lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if let Some(us) = v["fields"]["ttft_us"].as_u64() {
                let id = v["fields"]["stream_id"].as_str().unwrap_or("").to_string();
                out.push((id, us as f64 / 1000.0));
            }
        }
    }
    out
}

fn is_child(stream_id: &str) -> bool {
    stream_id.contains("-sa-")
}

#[test]
#[ignore = "benchmark: run bench/subagent_ttft.sh"]
fn six_children_ttft_vs_a_lone_child() {
    let rounds = env_u64("BENCH_ROUNDS", 5).max(1) as usize;
    let delay = Duration::from_millis(env_u64("BENCH_DELAY_MS", 25));
    in_netns(|ns| async move {
        // A warm-up run (installs the host binary, starts the daemon), then per round: a
        // lone child (parent → task, child answers, parent answers) and six at once
        // (parent → parallel_tasks, six children answer, parent answers).
        let mut script = vec![MockReply::text(&["warm"])];
        for r in 0..rounds {
            script.push(MockReply::tool_calls(
                vec![MockToolCall::new(
                    &format!("lone{r}"),
                    "task",
                    &json!({"prompt": format!("lone child {r}"), "description": "lone"})
                        .to_string(),
                )],
                64,
            ));
            script.push(MockReply::text(&[
                format!("lone answer {r} "),
                "more".into(),
            ]));
            script.push(MockReply::text(&["parent done"]));
            let tasks: Vec<_> = (0..CHILDREN)
                .map(|i| json!({"prompt": format!("child {i} of round {r}"), "description": format!("c{i}")}))
                .collect();
            script.push(MockReply::tool_calls(
                vec![MockToolCall::new(
                    &format!("six{r}"),
                    "parallel_tasks",
                    &json!({ "tasks": tasks }).to_string(),
                )],
                64,
            ));
            for i in 0..CHILDREN {
                script.push(MockReply::text(&[format!("answer {i} "), "more".into()]));
            }
            script.push(MockReply::text(&["parent done"]));
        }
        let rig = Rig::new(std::sync::Arc::clone(&ns), script).await;
        let proxy = DelayProxy::start(([127, 0, 0, 1], rig.sshd.port()).into(), delay)
            .await
            .expect("delay proxy");
        rig.trust_port(proxy.port());
        let run = |prompt: String| {
            let rig = &rig;
            let port = proxy.port();
            async move {
                let mut c =
                    rig.spawn_client(port, (HEARTBEAT_MS * 10, DEAD_AFTER_MS * 10), &[], &prompt);
                let st = c.wait_exit(Duration::from_secs(180)).await;
                assert!(st.success(), "{prompt} failed:\n{}", c.transcript());
            }
        };
        run("warm up".into()).await;
        let mut lone: Vec<f64> = Vec::new();
        let mut six: Vec<Vec<f64>> = Vec::new();
        for r in 0..rounds {
            let before = ttft_lines(&rig).len();
            run(format!("round {r}: one child")).await;
            let l: Vec<f64> = ttft_lines(&rig)[before..]
                .iter()
                .filter(|(id, _)| is_child(id))
                .map(|(_, ms)| *ms)
                .collect();
            assert_eq!(l.len(), 1, "one child stream in the lone run");
            lone.push(l[0]);
            let before = ttft_lines(&rig).len();
            run(format!("round {r}: six children")).await;
            let s: Vec<f64> = ttft_lines(&rig)[before..]
                .iter()
                .filter(|(id, _)| is_child(id))
                .map(|(_, ms)| *ms)
                .collect();
            assert_eq!(s.len(), CHILDREN, "six child streams in the parallel run");
            six.push(s);
        }
        let rtt = 2.0 * delay.as_secs_f64() * 1000.0;
        let lone_median = median(&lone);
        println!("lone child ttft ms: {lone:.1?}");
        for (r, s) in six.iter().enumerate() {
            println!("round {r} six children ttft ms: {s:.1?}");
        }
        let all: Vec<f64> = six.iter().flatten().copied().collect();
        let worst = all.iter().copied().fold(0.0, f64::max);
        let per_round_max: Vec<f64> = six
            .iter()
            .map(|s| s.iter().copied().fold(0.0, f64::max))
            .collect();
        let six_median = median(&all);
        let max_median = median(&per_round_max);
        let within = all
            .iter()
            .filter(|&&t| t - lone_median <= rtt + 10.0)
            .count();
        println!(
            "RESULT subagent ttft: rounds={rounds} rtt={rtt:.0}ms lone_median={lone_median:.1}ms \
             six_median={six_median:.1}ms (x{:.2}) slowest_of_six_median={max_median:.1}ms (x{:.2}, +{:.1}ms) \
             worst={worst:.1}ms (+{:.1}ms = {:.2} RTT over the lone median); {within}/{} children within \
             RTT + 10 ms of the lone median (goal: all)",
            six_median / lone_median,
            max_median / lone_median,
            max_median - lone_median,
            worst - lone_median,
            (worst - lone_median) / rtt,
            all.len()
        );
    });
}
