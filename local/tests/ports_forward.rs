//! Forwarded ports end to end (issue #36 §1), over a real OpenSSH sshd with
//! `AllowTcpForwarding no` inside a private network namespace: the agent's bash tool
//! (scripted through the mock provider) starts `python3 -m http.server` in the host
//! workspace as a background job; the daemon notices the listening socket in `/proc` and
//! announces it; the laptop (a library client with forwarding on) listens on its loopback
//! and the test fetches files through it. A blackhole in the middle of a 20 MB download
//! resumes it byte-exact (SHA-256); a connection made during the drop waits at most the
//! configured bound and is then closed; one made after the drop is served.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod reconnect_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use reasonix_forward::content::sha256_hex;
use reasonix_forward::proto::{EventKind, OpenSession, Request, Response, SessionSettings};
use reasonix_local::client::{ClientEvent, ClientOptions};
use reasonix_local::ports::{Forwards, PortSettings};
use reasonix_testkit::mock_provider::{MockReply, MockToolCall};
use reasonix_testkit::netfault::Fault;
use reconnect_common::*;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SHORT: (u64, u64) = (HEARTBEAT_MS, DEAD_AFTER_MS);
const SETUP_GUARD: Duration = Duration::from_secs(90);
const GUARD: Duration = Duration::from_secs(45);
/// The port the agent's server listens on; the laptop's listener (same network namespace
/// in this rig) cannot have it too, so it takes the next free one and says so.
const HOST_PORT: u16 = 18765;
const BIG: usize = 20 * 1024 * 1024;
/// How long a connection accepted during a drop waits for the link.
const CONNECT_WAIT: Duration = Duration::from_secs(4);

/// Everything a plain HTTP/1.0 GET through `port` on the laptop returns (headers and body),
/// or what arrived before the connection closed.
async fn get(port: u16, path: &str) -> Vec<u8> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to the laptop listener");
    s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .await
        .expect("request");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    out
}

fn body(resp: &[u8]) -> &[u8] {
    let at = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP header end in {:?}", String::from_utf8_lossy(resp)));
    &resp[at + 4..]
}

#[test]
fn agent_server_is_forwarded_and_a_blackhole_mid_download_completes_it_byte_exact() {
    in_netns(|ns| async move {
        let command = format!(
            "head -c {BIG} /dev/urandom > big.bin && exec python3 -m http.server {HOST_PORT} --bind 127.0.0.1"
        );
        let rig = Rig::new(
            Arc::clone(&ns),
            vec![
                MockReply::tool_calls(
                    vec![MockToolCall::new(
                        "b1",
                        "bash",
                        &json!({ "command": command, "run_in_background": true }).to_string(),
                    )],
                    8,
                ),
                MockReply::text(&["The server runs."]),
            ],
        )
        .await;
        let ssh_port = rig.sshd.port();
        let forwards = Forwards::new(PortSettings {
            connect_wait: CONNECT_WAIT,
            ..PortSettings::default()
        });
        let (client, mut events) = rig.library_client_with(
            ssh_port,
            SHORT,
            ClientOptions {
                ports: Some(Arc::clone(&forwards)),
                ..ClientOptions::default()
            },
        );
        let open = Request::OpenSession(OpenSession {
            new: true,
            settings: SessionSettings {
                model: Some("mock/m".into()),
                policy: reasonix_forward::policy::SessionPolicy {
                    mode: reasonix_forward::policy::PermissionMode::Yolo,
                    ..Default::default()
                },
                ..SessionSettings::default()
            },
            ..OpenSession::default()
        });
        let opened = tokio::time::timeout(SETUP_GUARD, client.request(open))
            .await
            .expect("open in time")
            .expect("open");
        assert!(matches!(opened, Response::SessionOpened(_)), "{opened:?}");
        client
            .request(Request::SubmitTurn {
                request_id: "t1".into(),
                text: "start the dev server".into(),
            })
            .await
            .expect("submit");

        // The announcement arrives as a notice naming the host port and the laptop URL.
        let deadline = Instant::now() + SETUP_GUARD;
        let mut seen = Vec::new();
        let local = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let ev = tokio::time::timeout(left, events.recv())
                .await
                .unwrap_or_else(|_| panic!("no port notice; saw {seen:#?}"))
                .expect("client alive");
            if let ClientEvent::Event(e) = &ev {
                if let EventKind::Notice { text } = &e.kind {
                    if text.starts_with(&format!("port {HOST_PORT} on the host")) {
                        assert!(text.contains("(python3"), "{text}");
                        assert!(
                            text.contains(&format!("laptop port {HOST_PORT} is taken")),
                            "the laptop's own listener had the port: {text}"
                        );
                        let url = text.split("→ ").nth(1).expect("url");
                        let port: u16 = url
                            .trim_start_matches("http://localhost:")
                            .split(' ')
                            .next()
                            .unwrap()
                            .parse()
                            .expect("port in notice");
                        break port;
                    }
                }
            }
            seen.push(ev);
        };
        let listed = forwards.list();
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(listed[0].local, local);
        assert_eq!(listed[0].target.port, HOST_PORT);

        // A small file through the forward.
        let readme = get(local, "/README.md").await;
        assert!(
            readme.starts_with(b"HTTP/1.0 200"),
            "{}",
            String::from_utf8_lossy(&readme)
        );
        assert_eq!(body(&readme), b"# reconnect workspace\n");

        // The big file: read 2 MB, blackhole the SSH connection, go on reading.
        let want = sha256_hex(&std::fs::read(rig.host_file("big.bin")).expect("big.bin"));
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", local))
            .await
            .expect("connect");
        s.write_all(b"GET /big.bin HTTP/1.0\r\n\r\n").await.unwrap();
        let mut resp = vec![0u8; 2 * 1024 * 1024];
        s.read_exact(&mut resp).await.expect("first 2 MB");
        let fault = ns.fault(Fault::Blackhole, ssh_port).expect("blackhole");
        // A new connection during the drop waits for the link at most CONNECT_WAIT, then is
        // closed without a byte (the drop lasts longer than that).
        let during = tokio::spawn(get(local, "/README.md"));
        let refused = tokio::time::timeout(GUARD, during)
            .await
            .expect("the waiting connection was closed in time")
            .unwrap();
        assert!(refused.is_empty(), "{}", String::from_utf8_lossy(&refused));
        tokio::time::sleep_until((fault.since() + CONNECT_WAIT + Duration::from_secs(2)).into())
            .await;
        fault.lift().expect("lift");
        // Made right after the lift: waits for the resumed link and is served.
        let after = get(local, "/README.md").await;
        assert_eq!(body(&after), b"# reconnect workspace\n");
        tokio::time::timeout(GUARD, s.read_to_end(&mut resp))
            .await
            .expect("the download finished after the drop")
            .expect("read");
        let got = body(&resp);
        assert_eq!(got.len(), BIG, "bytes lost or repeated");
        assert_eq!(sha256_hex(got), want, "the download is not byte-exact");

        // The link was resumed (no fresh link), and the laptop's listener stayed.
        let mut reattached = false;
        while let Ok(ev) = events.try_recv() {
            reattached |= matches!(ev, ClientEvent::Reattached { .. });
        }
        assert!(!reattached, "the link was replaced instead of resumed");
        assert_eq!(forwards.list().len(), 1);
        // Stopping the forward closes the laptop's listener and it stays stopped.
        forwards.stop(HOST_PORT).expect("stop");
        // The listener's task ends on the runtime's next turn: give it a bounded moment.
        let closed = async {
            while tokio::net::TcpStream::connect(("127.0.0.1", local))
                .await
                .is_ok()
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(5), closed)
            .await
            .expect("the stopped forward's listener is still accepting after 5 s");
        client.leave().await;
    });
}
