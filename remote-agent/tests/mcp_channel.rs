//! The channel transport (what the link tunnel uses) against real servers pumped by the
//! laptop-side host (`local/src/mcp_host.rs`, compiled in here as-is), with relay tasks in
//! between standing in for the link; plus the overhead of that path versus direct stdio.
#![allow(clippy::unwrap_used)] // tests may unwrap

mod mcp_support;

#[path = "../../local/src/mcp_host.rs"]
#[allow(dead_code)]
mod mcp_host;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reasonix_forward::policy::{McpRunOn, McpServerSpec};
use reasonix_remote::mcp::{
    ChannelOpener, ChannelTransport, LineChannels, McpClient, McpManager, McpServerState,
    McpSettings, McpTransport, StdioTransport,
};
use reasonix_remote::tools::Tool;
use serde_json::json;
use tokio::sync::mpsc;

use mcp_host::{McpHost, McpHostSpec};
use mcp_support::{everything_server, fake_server, time_server};

const T: Duration = Duration::from_secs(60);

fn host_spec(spec: &McpServerSpec) -> McpHostSpec {
    McpHostSpec {
        name: spec.name.clone(),
        command: spec.command.clone().unwrap_or_default(),
        args: spec.args.clone(),
        env: spec.env.clone(),
        cwd: None,
    }
}

/// Opens `server` on the "laptop" host and relays its lines through two extra tasks, the way
/// the link glue forwards `McpLine` frames. Counts the opens.
fn opener(host: Arc<McpHost>, server: &str, opens: Arc<AtomicUsize>) -> ChannelOpener {
    let server = server.to_string();
    Arc::new(move || {
        let host = host.clone();
        let server = server.clone();
        let opens = opens.clone();
        Box::pin(async move {
            opens.fetch_add(1, Ordering::SeqCst);
            let mut ch = host.open(&server).map_err(|e| e.to_string())?;
            let (up_tx, mut up_rx) = mpsc::channel::<String>(64);
            let (down_tx, down_rx) = mpsc::channel::<String>(64);
            let to_server = ch.to_server.clone();
            tokio::spawn(async move {
                while let Some(line) = up_rx.recv().await {
                    if to_server.send(line).await.is_err() {
                        break;
                    }
                }
            });
            tokio::spawn(async move {
                while let Some(line) = ch.from_server.recv().await {
                    if down_tx.send(line).await.is_err() {
                        break;
                    }
                }
            });
            Ok(LineChannels {
                to_server: up_tx,
                from_server: down_rx,
                diagnostics: None,
            })
        })
    })
}

#[tokio::test]
async fn channel_round_trip_with_real_servers() {
    let (Some(time), Some(every)) = (time_server("time"), everything_server("everything")) else {
        return;
    };
    let host = Arc::new(McpHost::new([host_spec(&time), host_spec(&every)]));
    assert_eq!(host.names(), ["everything", "time"]);
    let opens = Arc::new(AtomicUsize::new(0));
    let mut m = McpManager::new(McpSettings::default());
    for spec in [time, every] {
        let name = spec.name.clone();
        let laptop = McpServerSpec {
            run_on: Some(McpRunOn::Laptop),
            ..spec
        };
        m.add(
            laptop,
            Arc::new(ChannelTransport::new(
                "laptop",
                opener(host.clone(), &name, opens.clone()),
            )),
        );
    }
    m.start_all().await;
    for s in m.status() {
        assert_eq!(s.state, McpServerState::Ready, "{s:?}");
        assert_eq!(s.run_on, McpRunOn::Laptop);
        assert_eq!(s.transport, "channel: laptop");
    }
    let tools = m.tools();
    let get = |n: &str| {
        tools
            .iter()
            .find(|t| t.name() == n)
            .unwrap_or_else(|| panic!("{n} missing"))
    };
    let out = get("mcp__time__get_current_time")
        .call(json!({"timezone": "America/New_York"}), None)
        .await;
    assert!(
        !out.is_error && out.text.contains("America/New_York"),
        "{out:?}"
    );
    let out = get("mcp__everything__echo")
        .call(json!({"message": "through the tunnel"}), None)
        .await;
    assert!(
        !out.is_error && out.text.contains("through the tunnel"),
        "{out:?}"
    );
    let n = Arc::new(AtomicUsize::new(0));
    let sink: reasonix_remote::mcp::ProgressSink = {
        let n = n.clone();
        Arc::new(move |_| {
            n.fetch_add(1, Ordering::SeqCst);
        })
    };
    let out = get("mcp__everything__trigger-long-running-operation")
        .call(json!({"duration": 0.5, "steps": 2}), Some(sink))
        .await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(n.load(Ordering::SeqCst), 2);
    assert_eq!(opens.load(Ordering::SeqCst), 2);

    // The laptop kills the server between calls: the next call reopens the channel.
    assert!(host.close("everything"));
    let mut ok = None;
    for _ in 0..3 {
        let out = get("mcp__everything__echo")
            .call(json!({"message": "after restart"}), None)
            .await;
        if !out.is_error {
            ok = Some(out);
            break;
        }
        assert!(out.text.contains("everything"), "{out:?}");
    }
    let out = ok.expect("the server came back");
    assert!(out.text.contains("after restart"), "{out:?}");
    assert_eq!(opens.load(Ordering::SeqCst), 3);
    m.shutdown().await;
}

#[tokio::test]
async fn channel_server_crash_mid_call_recovers() {
    let spec = fake_server("fake");
    let host = Arc::new(McpHost::new([host_spec(&spec)]));
    let opens = Arc::new(AtomicUsize::new(0));
    let mut m = McpManager::new(McpSettings::default());
    m.add(
        McpServerSpec {
            run_on: Some(McpRunOn::Laptop),
            ..spec
        },
        Arc::new(ChannelTransport::new(
            "laptop",
            opener(host, "fake", opens.clone()),
        )),
    );
    m.start_all().await;
    let tools = m.tools();
    let work = tools
        .iter()
        .find(|t| t.name() == "mcp__fake__work")
        .unwrap();
    let out = work.call(json!({"mode": "crash"}), None).await;
    assert!(
        out.is_error && out.text.contains("exited during the call"),
        "{out:?}"
    );
    let out = work.call(json!({"mode": "fine"}), None).await;
    assert!(!out.is_error, "{out:?}");
    assert_eq!(opens.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn once_channel_cannot_restart() {
    let spec = fake_server("fake");
    let host = McpHost::new([host_spec(&spec)]);
    let ch = host.open("fake").unwrap();
    let t = ChannelTransport::once(
        "pre-opened",
        LineChannels {
            to_server: ch.to_server,
            from_server: ch.from_server,
            diagnostics: None,
        },
    );
    let c = McpClient::connect("fake", t.open().await.unwrap(), T)
        .await
        .unwrap();
    assert_eq!(c.list_tools(T).await.unwrap().len(), 2);
    let e = t.open().await.err().expect("second open fails").to_string();
    assert!(e.contains("cannot be reopened"), "{e}");
    assert!(matches!(
        host.open("nope"),
        Err(mcp_host::McpHostError::UnknownServer(_))
    ));
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn time_calls(
    client: &McpClient,
    tool: &str,
    args: serde_json::Value,
    n: usize,
) -> Vec<Duration> {
    // Warm-up (JIT of node, Python imports).
    for _ in 0..3 {
        client.call_tool(tool, args.clone(), T, None).await.unwrap();
    }
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        let r = client.call_tool(tool, args.clone(), T, None).await.unwrap();
        v.push(t0.elapsed());
        assert!(!r.is_error);
    }
    v
}

/// Median latency of one `tools/call` over direct stdio versus the channel transport through
/// `mcp_host` and two relay tasks (the in-process part of a laptop-side call; the link's RTT
/// comes on top). Prints the numbers; asserts only that every call succeeded.
#[tokio::test]
async fn overhead_channel_vs_direct_stdio() {
    const N: usize = 50;
    let mut servers = Vec::new();
    if let Some(s) = everything_server("everything") {
        servers.push((s, "echo", json!({"message": "ping"})));
    }
    if let Some(s) = time_server("time") {
        servers.push((s, "get_current_time", json!({"timezone": "UTC"})));
    }
    for (spec, tool, args) in servers {
        let direct = StdioTransport::new(
            spec.command.clone().unwrap(),
            spec.args.clone(),
            spec.env.clone(),
            None,
        );
        let direct = McpClient::connect("direct", direct.open().await.unwrap(), T)
            .await
            .unwrap();
        let host = Arc::new(McpHost::new([host_spec(&spec)]));
        let chan = ChannelTransport::new(
            "laptop",
            opener(host, &spec.name, Arc::new(AtomicUsize::new(0))),
        );
        let chan = McpClient::connect("channel", chan.open().await.unwrap(), T)
            .await
            .unwrap();
        // Interleave the two series so machine noise hits both alike.
        let mut d = Vec::new();
        let mut c = Vec::new();
        for _ in 0..5 {
            d.extend(time_calls(&direct, tool, args.clone(), N / 5).await);
            c.extend(time_calls(&chan, tool, args.clone(), N / 5).await);
        }
        let (d, c) = (median(d), median(c));
        eprintln!(
            "MCP overhead [{} {tool}, N={N}]: direct stdio median {:.3} ms, channel (mcp_host + relay) median {:.3} ms, delta {:+.3} ms",
            spec.name,
            d.as_secs_f64() * 1e3,
            c.as_secs_f64() * 1e3,
            (c.as_secs_f64() - d.as_secs_f64()) * 1e3
        );
    }
}

#[tokio::test]
async fn laptop_host_restart_expansion_and_diagnostics() {
    // `${VAR:-default}` from the laptop environment, in command, args and env.
    let spec = McpHostSpec {
        name: "echoer".into(),
        command: "${REASONIX_MCP_HOST_TEST_SH_9:-sh}".into(),
        args: vec![
            "-c".into(),
            "echo \"started $$ $GREETING\"; read line; echo \"got $line\"; echo 'dying now' >&2; exit 7".into(),
        ],
        env: [("GREETING".to_string(), "${REASONIX_MCP_HOST_TEST_UNSET_9:-hi}".to_string())].into(),
        cwd: None,
    };
    let host = McpHost::new([spec.clone()]);
    let mut first = host.open("echoer").unwrap();
    let line = first.from_server.recv().await.unwrap();
    assert!(
        line.starts_with("started ") && line.ends_with(" hi"),
        "{line}"
    );
    // Opening again kills the first instance: its stream ends without the rest.
    let mut second = host.open("echoer").unwrap();
    let tail = tokio::time::timeout(T, first.from_server.recv())
        .await
        .unwrap();
    assert_eq!(tail, None);
    assert!(
        first.diagnostics.exit().unwrap().contains("signal: 9"),
        "{:?}",
        first.diagnostics.exit()
    );
    let started2 = second.from_server.recv().await.unwrap();
    assert_ne!(started2, line, "a new process");
    second.to_server.send("ping".into()).await.unwrap();
    assert_eq!(second.from_server.recv().await.unwrap(), "got ping");
    assert_eq!(
        tokio::time::timeout(T, second.from_server.recv())
            .await
            .unwrap(),
        None
    );
    // Exit status and stderr are recorded before the stream closes.
    assert_eq!(
        second.diagnostics.exit().as_deref(),
        Some("process exited (exit status: 7)")
    );
    assert_eq!(second.diagnostics.stderr_tail(), "dying now");

    let bad = McpHost::new([McpHostSpec {
        command: "${REASONIX_MCP_HOST_TEST_UNSET_9}".into(),
        ..spec
    }]);
    let e = bad.open("echoer").err().unwrap().to_string();
    assert!(
        e.contains("REASONIX_MCP_HOST_TEST_UNSET_9") && e.contains("command"),
        "{e}"
    );
}
