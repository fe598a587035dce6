//! Preamble and handshake edge cases: shell noise, wrong programs, version mismatches,
//! garbage after the preamble.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::guard;
use reasonix_forward::handshake::{client_handshake, server_accept, server_welcome};
use reasonix_forward::link::{Link, LinkConfig, LinkError};
use reasonix_forward::proto::{Hello, Welcome, PREAMBLE_MAGIC, PROTOCOL_VERSION};
use reasonix_forward::testing;
use tokio::io::AsyncWriteExt;

fn hello(protocol: u32) -> Hello {
    Hello {
        protocol,
        build_id: "b".into(),
        client_id: "c".into(),
        resume: None,
        bytes_frames: false,
        early_data: false,
    }
}

fn welcome(protocol: u32) -> Welcome {
    Welcome {
        protocol,
        build_id: "b".into(),
        link_id: "L".into(),
        resumed: false,
        received: 0,
        resume_refused: None,
        bytes_frames: false,
        early_data: false,
    }
}

#[tokio::test]
async fn too_much_garbage_names_the_likely_cause() {
    let (cs, ss, _c) = testing::pair();
    let (cr, mut cw) = cs.into_split();
    let (_sr, mut sw) = ss.into_split();
    let writer = tokio::spawn(async move {
        let line = b"motd motd motd motd motd motd motd motd\n";
        for _ in 0..200 {
            if sw.write_all(line).await.is_err() {
                break;
            }
        }
        sw
    });
    let err = guard(
        "handshake",
        client_handshake(cr, &mut cw, &hello(PROTOCOL_VERSION), 4096),
    )
    .await
    .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, LinkError::Handshake(_)), "{msg}");
    assert!(msg.contains("4096"), "{msg}");
    assert!(msg.contains("rc file"), "{msg}");
    assert!(msg.contains("not reasonix-remote"), "{msg}");
    assert!(msg.contains("motd"), "quotes the output: {msg}");
    drop(writer);
}

#[tokio::test]
async fn eof_before_preamble_quotes_the_output() {
    let (cs, ss, _c) = testing::pair();
    let (cr, mut cw) = cs.into_split();
    let (_sr, mut sw) = ss.into_split();
    sw.write_all(b"bash: reasonix-remote: command not found\n")
        .await
        .unwrap();
    drop(sw);
    let err = guard(
        "handshake",
        client_handshake(cr, &mut cw, &hello(PROTOCOL_VERSION), 4096),
    )
    .await
    .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, LinkError::Handshake(_)), "{msg}");
    assert!(msg.contains("command not found"), "{msg}");
}

#[tokio::test]
async fn preamble_of_another_version_is_a_mismatch() {
    let (cs, ss, _c) = testing::pair();
    let (cr, mut cw) = cs.into_split();
    let (_sr, mut sw) = ss.into_split();
    sw.write_all(b"noise\nREASONIX-LINK/7 some-build\n")
        .await
        .unwrap();
    let err = guard(
        "handshake",
        client_handshake(cr, &mut cw, &hello(PROTOCOL_VERSION), 4096),
    )
    .await
    .unwrap_err();
    match &err {
        LinkError::ProtocolMismatch { ours, theirs } => {
            assert_eq!((*ours, *theirs), (PROTOCOL_VERSION, 7));
        }
        other => panic!("unexpected {other}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("speaks {PROTOCOL_VERSION}")) && msg.contains("speaks 7"),
        "{msg}"
    );
}

#[tokio::test]
async fn welcome_with_other_protocol_is_a_mismatch() {
    let (cs, ss, _c) = testing::pair();
    let (cr, mut cw) = cs.into_split();
    let (sr, mut sw) = ss.into_split();
    let server = tokio::spawn(async move {
        let (_r, _hello) = server_accept(sr, &mut sw, "b").await.unwrap();
        server_welcome(&mut sw, &welcome(PROTOCOL_VERSION + 1))
            .await
            .unwrap();
        sw
    });
    let err = guard(
        "handshake",
        client_handshake(cr, &mut cw, &hello(PROTOCOL_VERSION), 4096),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, LinkError::ProtocolMismatch { ours, theirs } if ours == PROTOCOL_VERSION && theirs == PROTOCOL_VERSION + 1),
        "{err}"
    );
    drop(server);
}

#[tokio::test]
async fn server_names_both_versions_and_tells_the_client() {
    let (cs, ss, _c) = testing::pair();
    let (cr, mut cw) = cs.into_split();
    let (sr, mut sw) = ss.into_split();
    let server = tokio::spawn(async move { server_accept(sr, &mut sw, "b").await.map(|_| ()) });
    // A client from the future: its Hello says protocol 9.
    let future_hello = hello(9);
    let client = client_handshake(cr, &mut cw, &future_hello, 4096);
    // A real client of version 9 compares the Welcome's version (ours) with its own and
    // names both; this one only checks that the refusal carries the host's version.
    let (_r, refusal) = guard("client", client).await.unwrap();
    assert_eq!(refusal.protocol, PROTOCOL_VERSION);
    let why = refusal.resume_refused.unwrap();
    assert!(why.contains("client speaks 9"), "{why}");
    let serr = guard("server", server).await.unwrap().unwrap_err();
    assert!(
        matches!(serr, LinkError::ProtocolMismatch { ours, theirs } if ours == PROTOCOL_VERSION && theirs == 9),
        "{serr}"
    );
}

#[tokio::test]
async fn garbage_after_preamble_is_malformed_not_a_panic() {
    let (cs, ss, _c) = testing::pair();
    let (cr, mut cw) = cs.into_split();
    let (_sr, mut sw) = ss.into_split();
    // A preamble, then text where the Welcome frame should be: a small "length" that is
    // shorter than the frame header.
    sw.write_all(format!("{PREAMBLE_MAGIC} b\n").as_bytes())
        .await
        .unwrap();
    sw.write_all(&[0, 0, 0, 5, b'o', b'o', b'p', b's', b'!'])
        .await
        .unwrap();
    let err = guard(
        "handshake",
        client_handshake(cr, &mut cw, &hello(PROTOCOL_VERSION), 4096),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, LinkError::Malformed(m) if m.contains("shorter")),
        "{err}"
    );

    // Text instead of frames: the length prefix is huge ("Hell" = 0x48656c6c).
    let (cs, ss, _c) = testing::pair();
    let (cr, mut cw) = cs.into_split();
    let (_sr, mut sw) = ss.into_split();
    sw.write_all(format!("{PREAMBLE_MAGIC} b\nHello, world\n").as_bytes())
        .await
        .unwrap();
    let err = guard(
        "handshake",
        client_handshake(cr, &mut cw, &hello(PROTOCOL_VERSION), 4096),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            LinkError::Oversized {
                size: 0x4865_6c6c,
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn garbage_on_a_running_link_ends_it_cleanly() {
    // After the handshake, the peer writes junk: the link's transport ends with Malformed,
    // the link itself survives and resumes on the next transport.
    let (link, mut rx) = Link::new(LinkConfig::default());
    let (ls, ps, _c) = testing::pair();
    let (lr, lw) = ls.into_split();
    let (_pr, mut pw) = ps.into_split();
    let task = {
        let link = link.clone();
        tokio::spawn(async move { link.run_transport(lr, lw, 0).await })
    };
    // A valid header with an unknown kind byte.
    let mut junk = vec![0, 0, 0, 17, 0x99];
    junk.extend_from_slice(&[0u8; 16]);
    pw.write_all(&junk).await.unwrap();
    let err = guard("malformed", task).await.unwrap();
    assert!(
        matches!(&err, LinkError::Malformed(m) if m.contains("0x99")),
        "{err}"
    );
    assert!(!link.is_connected());
    // A data frame with an invalid envelope, on a second transport.
    let (ls, ps, _c) = testing::pair();
    let (lr, lw) = ls.into_split();
    let (_pr, mut pw) = ps.into_split();
    let task = {
        let link = link.clone();
        tokio::spawn(async move { link.run_transport(lr, lw, 0).await })
    };
    let mut out = bytes::BytesMut::new();
    reasonix_forward::frame::encode_parts(
        reasonix_forward::frame::FrameKind::Data,
        1,
        0,
        b"{\"t\":\"nonsense\"}",
        &mut out,
    );
    pw.write_all(&out).await.unwrap();
    let err = guard("malformed envelope", task).await.unwrap();
    assert!(
        matches!(&err, LinkError::Malformed(m) if m.contains("data frame 1")),
        "{err}"
    );
    // A sequence gap.
    let (ls, ps, _c) = testing::pair();
    let (lr, lw) = ls.into_split();
    let (_pr, mut pw) = ps.into_split();
    let task = {
        let link = link.clone();
        tokio::spawn(async move { link.run_transport(lr, lw, 0).await })
    };
    let mut out = bytes::BytesMut::new();
    let env = serde_json::to_vec(&common::numbered(1, 0)).unwrap();
    reasonix_forward::frame::encode_parts(
        reasonix_forward::frame::FrameKind::Data,
        1,
        0,
        &env,
        &mut out,
    );
    reasonix_forward::frame::encode_parts(
        reasonix_forward::frame::FrameKind::Data,
        3,
        0,
        &env,
        &mut out,
    );
    pw.write_all(&out).await.unwrap();
    let err = guard("gap", task).await.unwrap();
    assert!(
        matches!(&err, LinkError::Malformed(m) if m.contains("gap")),
        "{err}"
    );
    // Frame 1 was delivered exactly once.
    assert_eq!(common::numbered_index(&rx.recv().await.unwrap()), 1);
    assert!(rx.try_recv().is_err());
    assert_eq!(link.received(), 1);
    let _ = Duration::ZERO;
}
