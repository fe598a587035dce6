//! A laptop-side MCP call across a link cut (issue 8): the real `mcp-server-everything` runs
//! on the laptop behind the SSH link; the scripted model calls its long-running tool, the
//! SSH port is blackholed while the call is in flight (long enough for the client to declare
//! the link dead, and for the server to finish during the outage), then lifted. The call must
//! complete exactly once: one `tools/call` reached the server, one result reached the model.
//!
//! The server is wrapped as `sh -c 'tee -a calls.log | exec mcp-server-everything stdio'`, so
//! `calls.log` holds every line the laptop fed to the server's stdin. A call repeated by the
//! host after the reconnect, or a host->laptop line replayed twice by the link, shows up there
//! as a second `tools/call` line; a result line replayed twice towards the host would give a
//! second `tool_finished` (client output, host journal) or a second tool message to the model.

mod reconnect_common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use reasonix_testkit::mock_provider::{MockReply, MockToolCall};
use reasonix_testkit::netfault::Fault;
use reconnect_common::*;
use serde_json::{json, Value};

const SHORT: (u64, u64) = (HEARTBEAT_MS, DEAD_AFTER_MS);
/// Hang guard for anything that includes the first SSH connect and install.
const SETUP_GUARD: Duration = Duration::from_secs(90);
const GUARD: Duration = Duration::from_secs(45);
/// The laptop tool and how long it runs (seconds; one progress notification per second).
const TOOL: &str = "mcp__lap__trigger-long-running-operation";
const DURATION_S: u64 = 6;
/// Blackhole kept this long after the client reported "reconnecting".
const HOLD_AFTER_RECONNECTING: Duration = Duration::from_secs(3);

fn count(values: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    values.iter().filter(|v| pred(v)).count()
}

/// JSON-RPC `tools/call` requests for `tool` among the lines of a stdin log. Lines that are
/// not JSON are ignored (the log holds exactly what the server read).
fn tools_calls(log: &str, tool: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
        .collect()
}

fn is_initialize(l: &str) -> bool {
    serde_json::from_str::<Value>(l).is_ok_and(|m| m["method"] == "initialize")
}

/// Appends a laptop-side `[[mcp]]` server `lap` whose stdin is logged to `log`.
fn add_logged_laptop_server(rx_home: &Path, log: &Path) {
    let path = rx_home.join("config.toml");
    let mut text = std::fs::read_to_string(&path).expect("laptop config");
    let script = format!(
        "tee -a '{}' | exec mcp-server-everything stdio",
        log.display()
    );
    text.push_str(&format!(
        "\n[[mcp]]\nname = \"lap\"\ncommand = \"sh\"\nargs = [\"-c\", {}]\nrun_on = \"laptop\"\n",
        toml_string(&script)
    ));
    std::fs::write(path, text).expect("write laptop config");
}

/// A TOML basic string (JSON string escaping is a subset TOML accepts).
fn toml_string(s: &str) -> String {
    serde_json::to_string(s).expect("string")
}

fn everything_installed() -> bool {
    std::process::Command::new("sh")
        .args(["-c", "command -v mcp-server-everything"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn tools_call_counter_sees_a_repeated_request() {
    // The assertion of the scenario below counts requests by parsing the log; a replayed or
    // retried request is a second line (same or new id) and must count twice.
    let req = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "trigger-long-running-operation", "arguments": {"duration": 6}}})
    .to_string();
    let retry = req.replace("\"id\":3", "\"id\":4");
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize"}).to_string();
    let once = format!("{init}\n{req}\n");
    assert_eq!(
        tools_calls(&once, "trigger-long-running-operation").len(),
        1
    );
    let replayed = format!("{init}\n{req}\n{req}\n");
    assert_eq!(
        tools_calls(&replayed, "trigger-long-running-operation").len(),
        2
    );
    let retried = format!("{init}\n{req}\nnot json\n{retry}\n");
    assert_eq!(
        tools_calls(&retried, "trigger-long-running-operation").len(),
        2
    );
    assert_eq!(tools_calls(&retried, "echo").len(), 0);
}

#[test]
fn laptop_mcp_call_in_flight_across_a_blackhole_completes_exactly_once() {
    if !everything_installed() {
        eprintln!("SKIP: mcp-server-everything is not installed (npm install -g @modelcontextprotocol/server-everything)");
        return;
    }
    in_netns(|ns| async move {
        let args = json!({"duration": DURATION_S, "steps": DURATION_S}).to_string();
        let rig = Rig::new(
            Arc::clone(&ns),
            vec![
                MockReply::tool_calls(vec![MockToolCall::new("m1", TOOL, &args)], 8),
                MockReply::text(&["The operation ", "finished once."]),
            ],
        )
        .await;
        let log = rig.laptop.path().join("calls.log");
        add_logged_laptop_server(&rig.rx_home(), &log);
        let port = rig.sshd.port();
        let mut c = rig.spawn_client(port, SHORT, &[], "run the long operation");
        let (i, started) = c
            .wait_for(0, SETUP_GUARD, "the MCP tool_started", |v| {
                v["type"] == "tool_started" && v["name"] == TOOL
            })
            .await;
        // The first progress proves the request reached the laptop server and it is working.
        let (i, _) = c
            .wait_for(i, GUARD, "the first tool progress", |v| {
                v["type"] == "tool_progress" && v["call_id"] == "m1"
            })
            .await;
        assert_eq!(
            tools_calls(
                &std::fs::read_to_string(&log).unwrap_or_default(),
                "trigger-long-running-operation"
            )
            .len(),
            1,
            "the call reached the laptop server before the cut"
        );

        let fault = ns.fault(Fault::Blackhole, port).expect("blackhole");
        let (j, rec) = c
            .wait_for(i, GUARD, "a reconnecting event", |v| {
                is_conn(v, "reconnecting")
            })
            .await;
        // Hold the cut until the client has been reconnecting for a while AND the server has
        // finished on the laptop (its result line is produced while the host is unreachable,
        // so it must be buffered and replayed by the link).
        let server_done = started.at + Duration::from_secs(DURATION_S + 1);
        let hold_until = (rec.at + HOLD_AFTER_RECONNECTING).max(server_done);
        tokio::time::sleep_until(hold_until.into()).await;
        let cut_for = fault.since().elapsed();
        let finished_during_cut = count(&c.values(), |v| v["type"] == "tool_finished");
        fault.lift().expect("lift");

        let (k, _) = c
            .wait_for(j, GUARD, "connected (resumed)", is_resumed)
            .await;
        let status = c.wait_exit(GUARD).await;
        let out = c.values();
        let transcript = c.transcript();
        assert!(status.success(), "{transcript}");
        assert!(j < k);
        assert_eq!(
            finished_during_cut, 0,
            "nothing can reach the client during the cut: {transcript}"
        );
        assert!(
            cut_for >= Duration::from_secs(3),
            "the cut lasted {cut_for:?}"
        );
        assert_eq!(
            count(&out, |v| v["type"] == "notice"
                && v["text"].as_str().unwrap_or("").contains("re-attaching")),
            0,
            "the link must be resumed, not re-attached: {transcript}"
        );

        // The client saw the call start once and finish once, successfully.
        assert_eq!(
            count(&out, |v| v["type"] == "tool_started"),
            1,
            "{transcript}"
        );
        let finished: Vec<&Value> = out
            .iter()
            .filter(|v| v["type"] == "tool_finished")
            .collect();
        assert_eq!(finished.len(), 1, "{transcript}");
        assert_eq!(finished[0]["name"], TOOL, "{transcript}");
        assert_eq!(finished[0]["is_error"], false, "{transcript}");
        // Progress arrived, none of it twice.
        let progress: Vec<&str> = out
            .iter()
            .filter(|v| v["type"] == "tool_progress" && v["call_id"] == "m1")
            .filter_map(|v| v["message"].as_str())
            .collect();
        let mut unique = progress.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(
            unique.len(),
            progress.len(),
            "duplicate progress: {progress:?}"
        );
        assert!(progress.len() <= DURATION_S as usize, "{progress:?}");

        // The turn completed, and the model got the server's result exactly once.
        assert_eq!(
            text_of(&out),
            "The operation finished once.",
            "{transcript}"
        );
        let last = out.last().expect("output");
        assert_eq!(last["type"], "turn_finished", "{transcript}");
        assert_eq!(last["outcome"], "completed", "{transcript}");
        let reqs = rig.mock.requests();
        assert_eq!(reqs.len(), 2, "{transcript}");
        let tool_msgs: Vec<Value> = reqs[1]
            .messages()
            .into_iter()
            .filter(|m| m["role"] == "tool")
            .collect();
        assert_eq!(tool_msgs.len(), 1, "{tool_msgs:?}");
        let content = tool_msgs[0]["content"].to_string();
        assert!(
            content.contains("completed") && content.contains(&format!("{DURATION_S}")),
            "the server's own result text: {content}"
        );

        // The host journal: one start, one finish for the call.
        let journal: Vec<Value> = rig
            .host_journals()
            .iter()
            .flat_map(|j| journal_events(j))
            .collect();
        assert_eq!(
            count(&journal, |e| e["type"] == "tool_started"
                && e["name"] == TOOL),
            1
        );
        assert_eq!(
            count(&journal, |e| e["type"] == "tool_finished"
                && e["call_id"] == "m1"),
            1
        );

        // The laptop server read exactly one tools/call for it, and was started once (not
        // restarted and asked again after the reconnect).
        let log_text = std::fs::read_to_string(&log).expect("calls.log");
        let calls = tools_calls(&log_text, "trigger-long-running-operation");
        assert_eq!(calls.len(), 1, "calls.log:\n{log_text}");
        assert_eq!(calls[0]["params"]["arguments"]["duration"], DURATION_S);
        assert_eq!(
            log_text.lines().filter(|l| is_initialize(l)).count(),
            1,
            "calls.log:\n{log_text}"
        );
    });
}
