//! `ProxyCommand` against a real sshd: the SSH stream runs through the command's stdio, with
//! OpenSSH's tokens expanded, and the host key is still checked before auth.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use reasonix_bootstrap::{connect_with_cache, CredentialCache, HostKeyAnswer};
use reasonix_testkit::sshd::{SshdConfig, UserOptions};

/// A byte relay in Python (no netcat on the CI image): argv = host port marker-file.
const RELAY: &str = r#"
import os, socket, sys, threading
open(sys.argv[3], "w").write(" ".join(sys.argv[1:3]))
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
def up():
    while True:
        d = os.read(0, 65536)
        if not d:
            s.shutdown(socket.SHUT_WR)
            return
        s.sendall(d)
threading.Thread(target=up, daemon=True).start()
while True:
    d = s.recv(65536)
    if not d:
        break
    os.write(1, d)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_command_carries_the_connection() {
    let s = key_setup(SshdConfig::default(), UserOptions::default());
    let relay = s.laptop.ssh_dir().join("relay.py");
    std::fs::write(&relay, RELAY).unwrap();
    let marker = s.laptop.ssh_dir().join("relay-used");
    let mut o = s.opts();
    o.push_option(&format!(
        "ProxyCommand=python3 {} %h %p {}",
        relay.display(),
        marker.display()
    ))
    .unwrap();
    let p = ScriptedPrompter::new(HostKeyAnswer::Reject);
    let cache = CredentialCache::new();
    let conn = guard(connect_with_cache(&s.dest(""), &o, p.clone(), &cache))
        .await
        .unwrap();
    let out = guard(conn.run_script("echo through-proxy")).await.unwrap();
    assert_eq!(out.stdout, "through-proxy\n");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        format!("127.0.0.1 {}", s.sshd.port()),
        "the proxy got %h and %p"
    );
    assert!(p.seen.lock().unwrap().host_keys.is_empty());
    conn.disconnect().await;

    // A changed key behind a proxy is still a hard stop before auth.
    std::fs::write(
        s.laptop.known_hosts(),
        format!(
            "[127.0.0.1]:{} {}\n",
            s.sshd.port(),
            s.laptop.key("other", None).public
        ),
    )
    .unwrap();
    let err = guard(connect_with_cache(&s.dest(""), &o, p, &cache))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("REMOTE HOST IDENTIFICATION HAS CHANGED"),
        "{err}"
    );

    // An unknown token is refused before anything runs.
    let mut bad = s.opts();
    bad.push_option("ProxyCommand=python3 x %z").unwrap();
    let err = guard(connect_with_cache(
        &s.dest(""),
        &bad,
        ScriptedPrompter::new(HostKeyAnswer::Reject),
        &cache,
    ))
    .await
    .unwrap_err();
    assert!(err.to_string().contains("%z"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_jump_hops_get_the_destination_tokens() {
    // `%r@%h:PORT` names this same sshd (a token in the port is refused, as by OpenSSH): the hop is reached directly, the destination through
    // a direct-tcpip tunnel on it. Unexpanded, "%h" would not resolve.
    let s = key_setup(SshdConfig::default(), UserOptions::default());
    let mut o = s.opts();
    assert!(o.push_option("ProxyJump=%r@%h:%p").is_err());
    o.push_option(&format!("ProxyJump=%r@%h:{}", s.sshd.port()))
        .unwrap();
    let p = ScriptedPrompter::new(HostKeyAnswer::Reject);
    let conn = guard(connect_with_cache(
        &s.dest(""),
        &o,
        p.clone(),
        &CredentialCache::new(),
    ))
    .await
    .unwrap();
    let out = guard(conn.run_script("echo via-jump")).await.unwrap();
    assert_eq!(out.stdout, "via-jump\n");
    conn.disconnect().await;
    assert!(
        s.sshd.log().contains("direct-tcpip"),
        "the destination was reached through the hop"
    );
}
