//! `web_fetch` end to end in local mode: real `reasonix run` → real `reasonix-remote` →
//! the request crosses the link → the laptop's gateway fetches from a real HTTP server on
//! 127.0.0.1 (allowed by an explicit `WebFetch(domain:127.0.0.1)` rule) and the model gets
//! the page as text (checked in what the model receives next). The permission mode is yolo, so the host lets every call through and
//! what is refused here is refused by the laptop's own checks: loopback under another name,
//! an IPv4-mapped loopback, a redirect to a private address, a binary type.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;
mod web_fetch_common;

use common::{reasonix, LocalRig};
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};
use web_fetch_common::serve;

fn call(id: &str, args: Value) -> MockToolCall {
    MockToolCall::new(id, "web_fetch", &args.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_come_through_the_laptop_and_private_targets_are_refused() {
    let (port, seen) = serve().await;
    let base = format!("http://127.0.0.1:{port}");
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![
                call("c1", json!({"url": format!("{base}/hop")})),
                call(
                    "c2",
                    json!({"url": format!("http://localhost:{port}/page")}),
                ),
                call("c3", json!({"url": format!("{base}/to-private")})),
                call("c4", json!({"url": format!("{base}/img.png")})),
                call("c5", json!({"url": format!("{base}/to-other")})),
                call(
                    "c6",
                    json!({"url": format!("{base}/big.txt"), "max_bytes": 1000}),
                ),
                call(
                    "c7",
                    json!({"url": format!("http://[::ffff:127.0.0.1]:{port}/page")}),
                ),
                call("c8", json!({"url": format!("{base}/large.html")})),
            ],
            3,
        ),
        MockReply::text(&["done"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_WF_KEY", "sk-web");
    let cfg = rig.home.join("config.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("\n[permissions]\nmode = \"yolo\"\nallow = [\"WebFetch(domain:127.0.0.1)\"]\n");
    std::fs::write(&cfg, text).unwrap();

    let out = tokio::task::spawn_blocking(move || {
        let out = reasonix(&rig, &["run", "--json", "read the docs"]);
        drop(rig);
        out
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let events: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    // What the model saw of each result: the tool messages of the second request.
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "{stdout}");
    let seen_by_model = requests[1].messages();
    let finished = |id: &str| -> (bool, String, Value) {
        let e = events
            .iter()
            .find(|e| e["type"] == "tool_finished" && e["call_id"] == id)
            .unwrap_or_else(|| {
                panic!(
                    "no tool_finished for {id}: {stdout}\n{}",
                    String::from_utf8_lossy(&out.stderr)
                )
            });
        let content = seen_by_model
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .and_then(|m| m["content"].as_str())
            .unwrap_or_else(|| panic!("no tool message for {id}"));
        (
            e["is_error"].as_bool().unwrap_or_else(|| panic!("{e}")),
            content.to_string(),
            e.clone(),
        )
    };

    // A same-host redirect is followed, the HTML converted to text.
    let (err, o, _) = finished("c1");
    assert!(!err, "{o}");
    assert!(o.starts_with(&format!("URL: {base}/page\nstatus: 200\ncontent-type: text/html; charset=utf-8\nredirected: 302 {base}/page\n\n")), "{o}");
    assert!(o.contains("# Hello Docs"), "{o}");
    assert!(o.contains("first item") && o.contains("second item"), "{o}");
    assert!(
        !o.contains("<h1>") && !o.contains("<li>") && !o.contains("color: red"),
        "{o}"
    );

    // Loopback under a name no rule allows: refused before any connection.
    let (err, o, _) = finished("c2");
    assert!(err, "{o}");
    assert!(
        o.contains("refused: localhost is a loopback address"),
        "{o}"
    );
    assert!(o.contains("WebFetch(domain:localhost)"), "{o}");

    // A redirect to a private address is refused.
    let (err, o, _) = finished("c3");
    assert!(err, "{o}");
    assert!(
        o.contains(
            "redirected to http://10.255.255.1/secret, and 10.255.255.1 is a private address"
        ),
        "{o}"
    );

    // Binary types are refused with their type and size.
    let (err, o, _) = finished("c4");
    assert!(err, "{o}");
    assert!(
        o.contains("is image/png (2048 bytes); web_fetch returns text only"),
        "{o}"
    );

    // A redirect to another host (no rule names it) is reported, not followed.
    let (err, o, _) = finished("c5");
    assert!(!err, "{o}");
    assert!(o.contains("status: 301"), "{o}");
    assert!(
        o.contains("[redirect to another host, not followed: http://example.invalid/elsewhere"),
        "{o}"
    );

    // The size cap.
    let (err, o, _) = finished("c6");
    assert!(!err, "{o}");
    assert!(o.contains("[the body was cut at max_bytes]"), "{o}");
    assert!(o.ends_with(&"0123456789".repeat(100)), "{o}");

    // An IPv4-mapped IPv6 loopback is loopback too.
    let (err, o, _) = finished("c7");
    assert!(err, "{o}");
    assert!(o.contains("is a loopback address"), "{o}");

    // A large page: the model saw a bounded view (head and tail); the full text is the
    // journaled result (stored by reference above 64 KiB, like every tool result).
    let (err, o, ev) = finished("c8");
    assert!(!err, "{o}");
    assert!(ev["bytes"].as_u64().unwrap() > 100_000, "{ev}");
    assert!(
        o.contains("cut from the middle") && o.contains("THE END"),
        "{o}"
    );

    // What reached the server: never a request for the refused loopback names or the
    // private redirect target, and only what the allowed hops asked for.
    let hosts: Vec<(String, String)> = seen.lock().unwrap().clone();
    assert!(
        hosts.iter().all(|(_, h)| h == &format!("127.0.0.1:{port}")),
        "{hosts:?}"
    );
    let paths: Vec<&str> = hosts.iter().map(|(p, _)| p.as_str()).collect();
    for want in [
        "/hop",
        "/page",
        "/to-private",
        "/img.png",
        "/to-other",
        "/big.txt",
        "/large.html",
    ] {
        assert!(paths.contains(&want), "{want} not fetched: {paths:?}");
    }
    assert_eq!(
        paths.iter().filter(|p| **p == "/page").count(),
        1,
        "{paths:?}"
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}");
}
