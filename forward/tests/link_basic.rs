//! Basic behaviour of the link, the handshake and the RPC layer over the in-memory transport.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{guard, numbered, numbered_index};
use reasonix_forward::channel::Side;
use reasonix_forward::handshake::{
    check_build_id, client_handshake, server_accept, server_welcome, DEFAULT_MAX_GARBAGE,
};
use reasonix_forward::link::{Link, LinkConfig, LinkError};
use reasonix_forward::proto::{
    DaemonStatus, ErrorCode, Hello, Notification, Request, Response, ResumeRequest, RpcError,
    Welcome, PROTOCOL_VERSION,
};
use reasonix_forward::rpc::{CallError, Incoming, Rpc};
use reasonix_forward::testing::{self, connect};
use tokio::io::AsyncWriteExt;

fn fast_config() -> LinkConfig {
    LinkConfig {
        heartbeat_interval: Duration::from_millis(100),
        dead_after: Duration::from_millis(300),
        ..LinkConfig::default()
    }
}

#[tokio::test]
async fn round_trip_both_directions() {
    let (a, mut a_rx) = Link::new(LinkConfig::default());
    let (b, mut b_rx) = Link::new(LinkConfig::default());
    let conn = connect(&a, &b);
    for i in 1..=100 {
        a.send(numbered(i, 10)).await.unwrap();
        b.send(numbered(1000 + i, 3)).await.unwrap();
    }
    for i in 1..=100 {
        let got = guard("a->b", b_rx.recv()).await.unwrap();
        assert_eq!(numbered_index(&got), i);
        let got = guard("b->a", a_rx.recv()).await.unwrap();
        assert_eq!(numbered_index(&got), 1000 + i);
    }
    assert!(a.is_connected() && b.is_connected());
    // Both buffers drain through acks.
    guard("a flush", a.flush()).await.unwrap();
    guard("b flush", b.flush()).await.unwrap();
    assert_eq!(a.stats().peer_acked, 100);
    assert_eq!(b.received(), 100);
    let (ea, eb) = conn.cut_and_join().await;
    assert!(matches!(ea, LinkError::TransportClosed(_)), "{ea}");
    assert!(matches!(eb, LinkError::TransportClosed(_)), "{eb}");
    assert!(!a.is_connected());
}

#[tokio::test]
async fn send_while_disconnected_then_resume() {
    let (a, _a_rx) = Link::new(LinkConfig::default());
    let (b, mut b_rx) = Link::new(LinkConfig::default());
    for i in 1..=50 {
        a.send(numbered(i, 0)).await.unwrap();
    }
    assert_eq!(a.stats().buffered_frames, 50);
    let conn = connect(&a, &b);
    for i in 1..=25 {
        assert_eq!(
            numbered_index(&guard("recv", b_rx.recv()).await.unwrap()),
            i
        );
    }
    conn.cut_and_join().await;
    for i in 51..=60 {
        a.send(numbered(i, 0)).await.unwrap();
    }
    let _conn = connect(&a, &b);
    for i in 26..=60 {
        assert_eq!(
            numbered_index(&guard("recv", b_rx.recv()).await.unwrap()),
            i
        );
    }
}

#[tokio::test]
async fn new_transport_replaces_running_one() {
    let (a, _a_rx) = Link::new(LinkConfig::default());
    let (b, mut b_rx) = Link::new(LinkConfig::default());
    let first = connect(&a, &b);
    a.send(numbered(1, 0)).await.unwrap();
    assert_eq!(
        numbered_index(&guard("recv", b_rx.recv()).await.unwrap()),
        1
    );
    // A second transport while the first still runs: the first must stop.
    let _second = connect(&a, &b);
    let (ea, eb) = guard("old transport stops", first.join()).await;
    assert!(matches!(ea, LinkError::TransportClosed(_)), "{ea}");
    assert!(matches!(eb, LinkError::TransportClosed(_)), "{eb}");
    a.send(numbered(2, 0)).await.unwrap();
    assert_eq!(
        numbered_index(&guard("recv", b_rx.recv()).await.unwrap()),
        2
    );
    assert!(a.is_connected());
}

#[tokio::test]
async fn close_ends_receiver_and_peer() {
    let (a, mut a_rx) = Link::new(LinkConfig::default());
    let (b, mut b_rx) = Link::new(LinkConfig::default());
    let conn = connect(&a, &b);
    a.send(numbered(1, 0)).await.unwrap();
    assert_eq!(
        numbered_index(&guard("recv", b_rx.recv()).await.unwrap()),
        1
    );
    a.close_with_reason("user quit");
    assert!(matches!(
        a.send(numbered(2, 0)).await,
        Err(LinkError::Closed)
    ));
    let (ea, eb) = guard("both end", conn.join()).await;
    assert!(matches!(ea, LinkError::Closed), "{ea}");
    assert!(matches!(eb, LinkError::Closed), "{eb}");
    assert!(guard("a rx ends", a_rx.recv()).await.is_none());
    assert!(guard("b rx ends", b_rx.recv()).await.is_none());
    assert!(b.is_closed());
    assert!(b.close_reason().unwrap().contains("user quit"));
}

#[tokio::test]
async fn stall_is_declared_dead() {
    let (a, _a_rx) = Link::new(fast_config());
    let (b, _b_rx) = Link::new(fast_config());
    let conn = connect(&a, &b);
    // Heartbeats keep an idle link alive well past dead_after.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(a.is_connected() && b.is_connected());
    assert!(a.stats().last_rtt.is_some(), "pings are answered");
    conn.control.stall();
    let (ea, eb) = guard("dead", conn.join()).await;
    assert!(
        matches!(ea, LinkError::Dead(d) if d == Duration::from_millis(300)),
        "{ea}"
    );
    assert!(matches!(eb, LinkError::Dead(_)), "{eb}");
    assert!(!a.is_connected());
}

#[tokio::test]
async fn blackhole_is_declared_dead_and_resume_delivers() {
    let (a, _a_rx) = Link::new(fast_config());
    let (b, mut b_rx) = Link::new(fast_config());
    let conn = connect(&a, &b);
    conn.control.blackhole();
    for i in 1..=5 {
        a.send(numbered(i, 0)).await.unwrap();
    }
    let (ea, _) = guard("dead", conn.join()).await;
    assert!(matches!(ea, LinkError::Dead(_)), "{ea}");
    let _conn = connect(&a, &b);
    for i in 1..=5 {
        assert_eq!(
            numbered_index(&guard("recv", b_rx.recv()).await.unwrap()),
            i
        );
    }
}

#[tokio::test]
async fn backpressure_waits_for_acks_never_drops() {
    let config = LinkConfig {
        replay_limit_bytes: 400,
        ..LinkConfig::default()
    };
    let (a, _a_rx) = Link::new(config);
    let (b, mut b_rx) = Link::new(LinkConfig::default());
    // Each envelope is ~100 bytes of JSON: a few fit, then send must wait.
    let sender = {
        let a = a.clone();
        tokio::spawn(async move {
            for i in 1..=50 {
                a.send(numbered(i, 40)).await.unwrap();
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !sender.is_finished(),
        "send must wait while the buffer is full"
    );
    let queued = a.stats().buffered_frames;
    assert!((1..50).contains(&queued), "queued {queued}");
    assert!(a.stats().buffered_bytes <= 400);
    let _conn = connect(&a, &b);
    for i in 1..=50 {
        assert_eq!(
            numbered_index(&guard("recv", b_rx.recv()).await.unwrap()),
            i
        );
    }
    guard("sender finishes", sender).await.unwrap();
}

#[tokio::test]
async fn oversized_send_is_refused_locally() {
    let config = LinkConfig {
        max_frame_bytes: 1000,
        ..LinkConfig::default()
    };
    let (a, _a_rx) = Link::new(config);
    match a.send(numbered(1, 2000)).await {
        Err(LinkError::Oversized { size, limit }) => {
            assert!(size > 2000);
            assert_eq!(limit, 1000);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(a.stats().buffered_frames, 0);
    // try_send gives the envelope back whole, so it can be sent another way.
    let big = numbered(2, 2000);
    let want = serde_json::to_string(&big).unwrap();
    match a.try_send(big).await {
        Err((LinkError::Oversized { limit, .. }, Some(back))) => {
            assert_eq!(limit, 1000);
            assert_eq!(serde_json::to_string(&back).unwrap(), want);
        }
        other => panic!("unexpected {other:?}"),
    }
    a.try_send(numbered(3, 10)).await.expect("a small one fits");
    assert_eq!(a.stats().buffered_frames, 1);
}

#[tokio::test]
async fn oversized_frame_from_peer_ends_transport() {
    let small = LinkConfig {
        max_frame_bytes: 1000,
        ..LinkConfig::default()
    };
    let (a, _a_rx) = Link::new(LinkConfig::default());
    let (b, _b_rx) = Link::new(small);
    let conn = connect(&a, &b);
    a.send(numbered(1, 5000)).await.unwrap();
    let (_, eb) = guard("refused", conn.join()).await;
    match eb {
        LinkError::Oversized { size, limit } => {
            assert!(size > 5000);
            assert_eq!(limit, 1000);
        }
        other => panic!("unexpected {other}"),
    }
}

#[tokio::test]
async fn rpc_request_response_notify() {
    let (a, a_rx) = Link::new(LinkConfig::default());
    let (b, b_rx) = Link::new(LinkConfig::default());
    let (client, mut client_in) = Rpc::new(a.clone(), a_rx, Side::Client);
    let (server, mut server_in) = Rpc::new(b.clone(), b_rx, Side::Server);
    let _conn = connect(&a, &b);
    let srv = server.clone();
    let handler = tokio::spawn(async move {
        while let Some(msg) = server_in.recv().await {
            match msg {
                Incoming::Request { id, body } => {
                    let result = match body {
                        Request::Status => Ok(Response::Status(DaemonStatus {
                            build_id: "test".into(),
                            ..DaemonStatus::default()
                        })),
                        Request::ListDir { path } => Err(RpcError::new(ErrorCode::NotFound, path)),
                        _ => Ok(Response::Ok),
                    };
                    srv.respond(id, result).await.unwrap();
                }
                Incoming::Notify(n) => {
                    // Echo notifications back.
                    srv.notify(n).await.unwrap();
                }
                Incoming::Channel(c) => panic!("no channel was opened: {c:?}"),
            }
        }
    });
    match guard("status", client.request(Request::Status))
        .await
        .unwrap()
    {
        Response::Status(s) => assert_eq!(s.build_id, "test"),
        other => panic!("unexpected {other:?}"),
    }
    match guard(
        "listdir",
        client.request(Request::ListDir {
            path: "nope".into(),
        }),
    )
    .await
    {
        Err(CallError::Remote(e)) => {
            assert_eq!(e.code, ErrorCode::NotFound);
            assert_eq!(e.message, "nope");
        }
        other => panic!("unexpected {other:?}"),
    }
    // Many concurrent calls are matched to the right callers.
    let mut calls = Vec::new();
    for i in 0..50 {
        let c = client.clone();
        calls.push(tokio::spawn(async move {
            c.request(Request::ListDir {
                path: format!("p{i}"),
            })
            .await
        }));
    }
    for (i, call) in calls.into_iter().enumerate() {
        match guard("call", call).await.unwrap() {
            Err(CallError::Remote(e)) => assert_eq!(e.message, format!("p{i}")),
            other => panic!("unexpected {other:?}"),
        }
    }
    let note = Notification::Role {
        role: reasonix_forward::proto::ClientRole::Spectator,
        reason: "r".into(),
    };
    client.notify(note.clone()).await.unwrap();
    match guard("echo", client_in.recv()).await.unwrap() {
        Incoming::Notify(n) => assert_eq!(n, note),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(client.pending_calls(), 0);
    a.close();
    guard("handler ends", handler).await.unwrap();
}

#[tokio::test]
async fn rpc_call_survives_transport_drop_and_fails_on_close() {
    let (a, a_rx) = Link::new(LinkConfig::default());
    let (b, b_rx) = Link::new(LinkConfig::default());
    let (client, _client_in) = Rpc::new(a.clone(), a_rx, Side::Client);
    let (server, mut server_in) = Rpc::new(b.clone(), b_rx, Side::Server);
    let conn = connect(&a, &b);
    let call = {
        let c = client.clone();
        tokio::spawn(async move { c.request(Request::Takeover).await })
    };
    // The request arrives; the transport dies before the answer.
    let id = match guard("request", server_in.recv()).await.unwrap() {
        Incoming::Request { id, body } => {
            assert_eq!(body, Request::Takeover);
            id
        }
        other => panic!("unexpected {other:?}"),
    };
    conn.cut_and_join().await;
    server.respond(id, Ok(Response::Ok)).await.unwrap();
    let _conn = connect(&a, &b);
    assert_eq!(
        guard("answer after resume", call).await.unwrap().unwrap(),
        Response::Ok
    );

    // A call pending when the link closes fails with Closed.
    let call = {
        let c = client.clone();
        tokio::spawn(async move { c.request(Request::Status).await })
    };
    let _ = guard("request", server_in.recv()).await.unwrap();
    a.close();
    match guard("closed", call).await.unwrap() {
        Err(CallError::Link(LinkError::Closed)) => {}
        other => panic!("unexpected {other:?}"),
    }
    assert!(matches!(
        client.request(Request::Status).await,
        Err(CallError::Link(LinkError::Closed))
    ));
}

fn hello(resume: Option<ResumeRequest>) -> Hello {
    Hello {
        protocol: PROTOCOL_VERSION,
        build_id: "build-client".into(),
        client_id: "c1".into(),
        resume,
        bytes_frames: false,
        early_data: false,
    }
}

/// What the daemon does with one accepted transport: print a banner (shell noise), then
/// resume the known link or make one.
async fn serve_once(
    server_link: Link,
    r: testing::MemReader,
    mut w: testing::MemWriter,
) -> Result<(tokio::task::JoinHandle<LinkError>, Hello), LinkError> {
    w.write_all(b"Welcome to host!\nlast login: yesterday\nno newline here")
        .await
        .map_err(|e| LinkError::TransportClosed(e.to_string()))?;
    let (reader, hello) = server_accept(r, &mut w, "build-server").await?;
    let resumed = matches!(&hello.resume, Some(rr) if rr.link_id == "L1");
    let welcome = Welcome {
        protocol: PROTOCOL_VERSION,
        build_id: "build-server".into(),
        link_id: "L1".into(),
        resumed,
        received: server_link.received(),
        resume_refused: None,
        bytes_frames: false,
        early_data: false,
    };
    server_welcome(&mut w, &welcome).await?;
    let peer_received = hello.resume.as_ref().map_or(0, |r| r.received);
    Ok((
        tokio::spawn(async move { server_link.run_transport(reader, w, peer_received).await }),
        hello,
    ))
}

/// One reconnect through the full handshake; returns the control and both transport tasks.
async fn reconnect(
    client_link: &Link,
    server_link: &Link,
    first: bool,
) -> (
    testing::Control,
    tokio::task::JoinHandle<LinkError>,
    tokio::task::JoinHandle<LinkError>,
) {
    let (cs, ss, control) = testing::pair();
    let (cr, mut cw) = cs.into_split();
    let (sr, sw) = ss.into_split();
    let server = tokio::spawn(serve_once(server_link.clone(), sr, sw));
    let resume = (!first).then(|| ResumeRequest {
        link_id: "L1".into(),
        received: client_link.received(),
    });
    let (reader, welcome) = guard(
        "handshake",
        client_handshake(cr, &mut cw, &hello(resume), DEFAULT_MAX_GARBAGE),
    )
    .await
    .unwrap();
    assert_eq!(welcome.link_id, "L1");
    assert_eq!(welcome.resumed, !first);
    let err = check_build_id(
        "build-client",
        &welcome.build_id,
        "reasonix-remote on the host",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("build-client") && err.contains("build-server"),
        "{err}"
    );
    let (server_task, got_hello) = guard("server", server).await.unwrap().unwrap();
    assert_eq!(got_hello.client_id, "c1");
    let link = client_link.clone();
    let peer = welcome.received;
    let client_task = tokio::spawn(async move { link.run_transport(reader, cw, peer).await });
    (control, client_task, server_task)
}

#[tokio::test]
async fn handshake_with_banner_then_resume_loses_nothing() {
    let (client_link, mut c_rx) = Link::new(LinkConfig::default());
    let (server_link, mut s_rx) = Link::new(LinkConfig::default());
    let (mut next_c, mut next_s) = (1u64, 1u64);
    for round in 0..4u64 {
        let (control, ct, st) = reconnect(&client_link, &server_link, round == 0).await;
        for i in 1..=10 {
            client_link.send(numbered(round * 10 + i, 0)).await.unwrap();
            server_link.send(numbered(round * 10 + i, 0)).await.unwrap();
        }
        // Read a few, cut with the rest somewhere in flight.
        for _ in 0..5 {
            assert_eq!(
                numbered_index(&guard("s", s_rx.recv()).await.unwrap()),
                next_s
            );
            next_s += 1;
            assert_eq!(
                numbered_index(&guard("c", c_rx.recv()).await.unwrap()),
                next_c
            );
            next_c += 1;
        }
        control.cut();
        let _ = guard("client transport ends", ct).await;
        let _ = guard("server transport ends", st).await;
    }
    let (_control, _ct, _st) = reconnect(&client_link, &server_link, false).await;
    while next_s <= 40 {
        assert_eq!(
            numbered_index(&guard("s", s_rx.recv()).await.unwrap()),
            next_s
        );
        next_s += 1;
    }
    while next_c <= 40 {
        assert_eq!(
            numbered_index(&guard("c", c_rx.recv()).await.unwrap()),
            next_c
        );
        next_c += 1;
    }
}

#[tokio::test]
async fn dropping_run_transport_stops_it() {
    let (a, _a_rx) = Link::new(LinkConfig::default());
    let (b, _b_rx) = Link::new(LinkConfig::default());
    let conn = connect(&a, &b);
    let mut watch = a.watch_connected();
    guard("connected", watch.wait_for(|c| *c)).await.unwrap();
    conn.a.abort();
    // a's halves are dropped with its tasks, so b sees the end of the stream.
    let eb = guard("b ends", conn.b).await.unwrap();
    assert!(matches!(eb, LinkError::TransportClosed(_)), "{eb}");
    guard("a disconnected", watch.wait_for(|c| !*c))
        .await
        .unwrap();
}

#[tokio::test]
async fn resume_from_a_different_link_is_refused() {
    let (a, _a_rx) = Link::new(LinkConfig::default());
    a.send(numbered(1, 0)).await.unwrap();
    let (s, _peer, _c) = testing::pair();
    let (r, w) = s.into_split();
    // The peer claims to have received frame 5; this side only ever sent 1.
    let e = guard("refused", a.run_transport(r, w, 5)).await;
    assert!(
        matches!(&e, LinkError::ResumeImpossible(m) if m.contains('5')),
        "{e}"
    );
    assert_eq!(a.stats().buffered_frames, 1, "nothing trimmed");
}

#[tokio::test]
async fn dropping_the_inbound_receiver_closes_the_link() {
    let (a, _a_rx) = Link::new(LinkConfig::default());
    let (b, b_rx) = Link::new(LinkConfig::default());
    drop(b_rx);
    let conn = connect(&a, &b);
    a.send(numbered(1, 0)).await.unwrap();
    let (_, eb) = guard("b ends", conn.join()).await;
    assert!(matches!(eb, LinkError::Closed), "{eb}");
    assert!(b.is_closed());
    guard("a closed by the peer", a.closed()).await;
}
