//! MCP overhead benchmark (ignored by default; run by `bench/mcp_overhead.sh`): the same real
//! MCP server placed on the host (workspace `reasonix.toml` `[[mcp]]`) and on the laptop
//! (laptop config, `run_on = "laptop"`, its JSON-RPC lines tunnelled over the SSH link), in
//! one `reasonix run --ssh` session over a link with added latency (testkit delay proxy,
//! `BENCH_DELAY_MS` each way, default 25 ms = 50 ms RTT).
//!
//! The scripted model makes `BENCH_CALLS` steps (default 20), each calling the tool once on
//! each placement (order alternating per step), after one warm-up step that is not counted.
//! Per-call latency is `tool_started` -> `tool_finished` from the host journal (millisecond
//! timestamps, taken where the call is made, so the link delay of the events themselves is
//! not counted) and, as a cross-check, from when the client printed the two events.
//!
//! Server: `BENCH_MCP_SITE` set (by the script) = `mcp-server-time` (`get_current_time`
//! UTC) run as `BENCH_MCP_PYTHON -m mcp_server_time` with `PYTHONPATH=$BENCH_MCP_SITE` (a copy
//! the throwaway host user can read); otherwise `mcp-server-everything stdio` (`get-sum`).
//!
//! Baselines in the same run, over the same shaped path: TCP ping-pong through a delay proxy
//! with the same delay (the pure RTT) and `ssh host true` through the SSH proxy.

mod reconnect_common;

use std::collections::HashMap;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reasonix_testkit::mock_provider::{MockReply, MockToolCall};
use reasonix_testkit::netfault::DelayProxy;
use reconnect_common::*;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(*x), hi.max(*x))
        })
}

/// The server under test, as `[[mcp]]` keys plus the tool to call.
struct Server {
    label: &'static str,
    command: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    tool: &'static str,
    arguments: Value,
}

impl Server {
    fn pick() -> Server {
        match std::env::var("BENCH_MCP_SITE") {
            Ok(site) if !site.is_empty() => Server {
                label: "mcp-server-time get_current_time",
                command: std::env::var("BENCH_MCP_PYTHON")
                    .unwrap_or_else(|_| "/usr/bin/python3".into()),
                args: vec!["-m".into(), "mcp_server_time".into()],
                env: vec![("PYTHONPATH".into(), site)],
                tool: "get_current_time",
                arguments: json!({"timezone": "UTC"}),
            },
            _ => Server {
                label: "mcp-server-everything get-sum",
                command: "mcp-server-everything".into(),
                args: vec!["stdio".into()],
                env: Vec::new(),
                tool: "get-sum",
                arguments: json!({"a": 2, "b": 3}),
            },
        }
    }

    /// An `[[mcp]]` table (TOML; JSON strings are valid TOML basic strings).
    fn toml(&self, name: &str, run_on: &str) -> String {
        let s = |x: &str| serde_json::to_string(x).expect("string");
        let args: Vec<String> = self.args.iter().map(|a| s(a)).collect();
        let env: Vec<String> = self
            .env
            .iter()
            .map(|(k, v)| format!("{k} = {}", s(v)))
            .collect();
        format!(
            "\n[[mcp]]\nname = {}\ncommand = {}\nargs = [{}]\nenv = {{ {} }}\nrun_on = {}\n",
            s(name),
            s(&self.command),
            args.join(", "),
            env.join(", "),
            s(run_on)
        )
    }
}

/// Median TCP round trip (seconds) of a 1-byte ping-pong through a delay proxy in front of an
/// echo server, both inside the namespace.
async fn tcp_rtt(delay: Duration, rounds: usize) -> f64 {
    let echo = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("echo");
    let addr = echo.local_addr().expect("addr");
    let server = tokio::spawn(async move {
        while let Ok((mut s, _)) = echo.accept().await {
            tokio::spawn(async move {
                let mut b = [0u8; 64];
                while let Ok(n) = s.read(&mut b).await {
                    if n == 0 || s.write_all(&b[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    let proxy = DelayProxy::start(addr, delay).await.expect("rtt proxy");
    let mut c = tokio::net::TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .expect("connect");
    c.set_nodelay(true).expect("nodelay");
    let mut out = Vec::new();
    let mut b = [0u8; 1];
    for _ in 0..rounds {
        let t = Instant::now();
        c.write_all(b"x").await.expect("ping");
        c.read_exact(&mut b).await.expect("pong");
        out.push(t.elapsed().as_secs_f64());
    }
    server.abort();
    median(&out)
}

/// Milliseconds since the epoch of a journal timestamp `YYYY-MM-DDTHH:MM:SS.mmmZ` (only
/// differences within one run are used, so days are counted from the 1st of the month and
/// the month must not change mid-run; the caller checks that).
fn ts_ms(ts: &str) -> Option<(String, i64)> {
    let (date, time) = ts.strip_suffix('Z')?.split_once('T')?;
    let (ym, day) = date.rsplit_once('-')?;
    let day: i64 = day.parse().ok()?;
    let mut hms = time.split(':');
    let h: i64 = hms.next()?.parse().ok()?;
    let m: i64 = hms.next()?.parse().ok()?;
    let (s, ms) = hms.next()?.split_once('.')?;
    let (s, ms): (i64, i64) = (s.parse().ok()?, ms.parse().ok()?);
    Some((
        ym.to_string(),
        (((day * 24 + h) * 60 + m) * 60 + s) * 1000 + ms,
    ))
}

#[test]
#[ignore = "benchmark: run bench/mcp_overhead.sh"]
fn mcp_call_overhead_laptop_vs_host() {
    let calls = env_u64("BENCH_CALLS", 20).max(1) as usize;
    let delay = Duration::from_millis(env_u64("BENCH_DELAY_MS", 25));
    let server = Server::pick();
    in_netns(|ns| async move {
        let host_tool = format!("mcp__h__{}", server.tool);
        let lap_tool = format!("mcp__l__{}", server.tool);
        let args = server.arguments.to_string();
        // Warm-up step (both servers once), then `calls` measured steps, then the answer.
        let mut script = vec![MockReply::tool_calls(
            vec![
                MockToolCall::new("warm-h", &host_tool, &args),
                MockToolCall::new("warm-l", &lap_tool, &args),
            ],
            64,
        )];
        for i in 0..calls {
            let h = MockToolCall::new(&format!("h{i}"), &host_tool, &args);
            let l = MockToolCall::new(&format!("l{i}"), &lap_tool, &args);
            let pair = if i % 2 == 0 { vec![h, l] } else { vec![l, h] };
            script.push(MockReply::tool_calls(pair, 64));
        }
        script.push(MockReply::text(&["done"]));
        let rig = Rig::new(Arc::clone(&ns), script).await;
        rig.user
            .write_file("ws/reasonix.toml", &server.toml("h", "host"), 0o644)
            .expect("host reasonix.toml");
        let cfg = rig.rx_home().join("config.toml");
        let mut text = std::fs::read_to_string(&cfg).expect("laptop config");
        text.push_str(&server.toml("l", "laptop"));
        std::fs::write(&cfg, text).expect("laptop config");

        // Connect and install without delay; the latency applies from the session on.
        let proxy = DelayProxy::start(([127, 0, 0, 1], rig.sshd.port()).into(), Duration::ZERO)
            .await
            .expect("delay proxy");
        rig.trust_port(proxy.port());
        let mut c = rig.spawn_client(
            proxy.port(),
            (HEARTBEAT_MS * 2, DEAD_AFTER_MS * 5),
            &[],
            "call the tool on both sides",
        );
        c.wait_for(0, Duration::from_secs(120), "the session", |v| {
            v["type"] == "session"
        })
        .await;
        proxy.set_delay(delay);
        let status = c.wait_exit(Duration::from_secs(300)).await;
        let out = c.lines();
        let transcript = c.transcript();
        assert!(status.success(), "{transcript}");

        // Baselines over the same shaped path.
        let rtt = tcp_rtt(delay, 20).await;
        let mut ssh = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            let st = Command::new("ssh")
                .args([
                    "-F",
                    "none",
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    "IdentityAgent=none",
                ])
                .arg("-o")
                .arg(format!(
                    "UserKnownHostsFile={}",
                    rig.home().join(".ssh/known_hosts").display()
                ))
                .arg("-i")
                .arg(&rig.key.private)
                .args(["-p", &proxy.port().to_string()])
                .arg(format!("{}@127.0.0.1", rig.user.name))
                .arg("true")
                .status()
                .expect("ssh");
            assert!(st.success(), "baseline ssh failed");
            ssh.push(t.elapsed().as_secs_f64());
        }

        // Every call finished without error, once.
        let finished: Vec<&Value> = out
            .iter()
            .map(|l| &l.value)
            .filter(|v| v["type"] == "tool_finished")
            .collect();
        assert_eq!(finished.len(), 2 * calls + 2, "{transcript}");
        assert!(
            finished.iter().all(|v| v["is_error"] == false),
            "{transcript}"
        );
        assert_eq!(
            out.last().expect("output").value["outcome"],
            "completed",
            "{transcript}"
        );

        // Host journal: per call id, started/finished timestamps.
        let journal: Vec<Value> = rig
            .host_journals()
            .iter()
            .flat_map(|j| journal_events(j))
            .collect();
        let mut started: HashMap<String, (String, i64)> = HashMap::new();
        let mut j_host = Vec::new();
        let mut j_lap = Vec::new();
        for e in &journal {
            let (Some(id), Some(ts)) = (e["call_id"].as_str(), e["ts"].as_str()) else {
                continue;
            };
            let Some(t) = ts_ms(ts) else {
                panic!("unparsable journal timestamp {ts}")
            };
            match e["type"].as_str() {
                Some("tool_started") => {
                    started.insert(id.to_string(), t);
                }
                Some("tool_finished") if !id.starts_with("warm") => {
                    let s = started.get(id).expect("started before finished");
                    assert_eq!(s.0, t.0, "the month changed mid-run; run again");
                    let ms = (t.1 - s.1) as f64 / 1000.0;
                    if id.starts_with('h') {
                        j_host.push(ms);
                    } else {
                        j_lap.push(ms);
                    }
                }
                _ => {}
            }
        }
        assert_eq!((j_host.len(), j_lap.len()), (calls, calls), "{journal:?}");

        // Client view: when the two events were printed.
        let mut c_started: HashMap<String, Instant> = HashMap::new();
        let mut c_host = Vec::new();
        let mut c_lap = Vec::new();
        for l in &out {
            let Some(id) = l.value["call_id"].as_str() else {
                continue;
            };
            if l.value["type"] == "tool_started" {
                c_started.insert(id.to_string(), l.at);
            } else if l.value["type"] == "tool_finished" && !id.starts_with("warm") {
                let secs = l.at.duration_since(c_started[id]).as_secs_f64();
                if id.starts_with('h') {
                    c_host.push(secs);
                } else {
                    c_lap.push(secs);
                }
            }
        }

        let ms = |x: f64| x * 1000.0;
        for (name, v) in [
            ("host journal  ", &j_host),
            ("laptop journal", &j_lap),
            ("host client   ", &c_host),
            ("laptop client ", &c_lap),
        ] {
            let (lo, hi) = min_max(v);
            println!(
                "{name}: median {:.1} ms  min {:.1}  max {:.1}  (n={})",
                ms(median(v)),
                ms(lo),
                ms(hi),
                v.len()
            );
        }
        let (h, l) = (median(&j_host), median(&j_lap));
        println!(
            "RESULT mcp-overhead: server=\"{}\" calls={calls} delay={}ms each way; \
             per-call median (host journal) host={:.1}ms laptop={:.1}ms overhead={:+.1}ms ratio={:.2}x; \
             client-observed host={:.1}ms laptop={:.1}ms; baseline tcp rtt={:.1}ms, ssh connect+true={:.0}ms",
            server.label,
            delay.as_millis(),
            ms(h),
            ms(l),
            ms(l - h),
            l / h,
            ms(median(&c_host)),
            ms(median(&c_lap)),
            ms(rtt),
            ms(median(&ssh)),
        );
        // A placement check, not a timing one: every laptop call crosses the delayed link
        // twice (request out, answer back), so none can take less than the added RTT
        // (journal times are whole milliseconds).
        let lap_min = min_max(&j_lap).0;
        assert!(
            lap_min >= 2.0 * delay.as_secs_f64() - 0.002,
            "a laptop call ({lap_min} s) did not cross the link"
        );
    });
}
