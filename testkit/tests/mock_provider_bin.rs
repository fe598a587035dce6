//! The standalone `mock-provider` binary serves a JSON script over real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

fn post(base: &str) -> String {
    let addr = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap();
    let body = r#"{"model":"m","messages":[],"stream":true}"#;
    write!(
        s,
        "POST /chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn binary_serves_script_then_done() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        r#"[{"type":"text","chunks":["Hel","lo"]},{"type":"status","code":429,"retry_after":2,"body":"{}"}]"#,
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mock-provider"))
        .arg(&script)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line.trim().to_string();
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");

    let first = post(&base);
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(first.contains("text/event-stream"));
    assert!(
        first.contains(r#""content":"Hel""#) && first.contains("data: [DONE]"),
        "{first}"
    );
    let second = post(&base);
    assert!(
        second.starts_with("HTTP/1.1 429") && second.contains("Retry-After: 2"),
        "{second}"
    );
    let third = post(&base);
    assert!(third.contains(r#""content":"done""#), "{third}");

    child.kill().unwrap();
    child.wait().unwrap();
}
