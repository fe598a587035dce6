//! ssh-agent forwarding end to end (issue #36 §2), over a real OpenSSH sshd with
//! `AllowAgentForwarding no` (and no TCP forwarding) inside a private network namespace.
//!
//! The laptop runs a real `ssh-agent` holding a freshly generated key whose private file is
//! deleted once added: the key exists only in the laptop's agent. The library client
//! connects with `-o ForwardAgent=<that agent's socket>` (the ssh_config path, resolved as
//! `ssh -G` does). Then, on the host:
//! - a terminal (the user's own) has `SSH_AUTH_SOCK`, `ssh-add -l` lists the key, `ssh-add
//!   -D` is refused (the laptop's agent keeps its key), and a
//!   `git push` over SSH to a bare repository of the same sshd (where only that key is
//!   authorized besides the link's own) succeeds;
//! - the default-sandboxed bash tool has no `SSH_AUTH_SOCK` and cannot see the socket; with
//!   `[sandbox] ssh_agent = true` it lists the key;
//! - while the link is blackholed, a request on the socket fails at once (exit 1, "agent
//!   refused operation") instead of hanging; after the link resumes, `ssh-add -l` and a
//!   second `git push` work again in the same shell;
//! - when another laptop (another key in its agent) takes the session over, the same shell
//!   lists that laptop's key and no longer the first one's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent_common;
mod reconnect_common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_common::{fingerprint, LaptopAgent};
use reasonix_forward::channel::{Channel, ChannelAccepted, ChannelData, ChannelOpen};
use reasonix_forward::proto::{
    EventKind, OpenSession, PtyBytes, Request, Response, SessionSettings,
};
use reasonix_forward::pty::{PtyData, PtyOpen, PtySize};
use reasonix_local::client::{Client, ClientEvent, ClientOptions, ConnState};
use reasonix_testkit::mock_provider::{MockReply, MockToolCall};
use reasonix_testkit::netfault::Fault;
use reasonix_testkit::sshd::ClientKey;
use reconnect_common::*;
use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;

const SHORT: (u64, u64) = (HEARTBEAT_MS, DEAD_AFTER_MS);
const SETUP_GUARD: Duration = Duration::from_secs(90);
const GUARD: Duration = Duration::from_secs(45);

/// A host terminal driven from the test: type a command, read until its marker.
struct Term {
    channel: Channel,
    seen: String,
    n: u32,
}

impl Term {
    async fn open(client: &Client) -> Term {
        let open = PtyOpen::Open {
            size: PtySize {
                cols: 200,
                rows: 50,
            },
            term: "dumb".into(),
        };
        let (accepted, channel) = client
            .open_channel(ChannelOpen::Pty(open), 1 << 20)
            .await
            .expect("open a terminal");
        assert!(matches!(accepted, ChannelAccepted::Pty(_)), "{accepted:?}");
        Term {
            channel,
            seen: String::new(),
            n: 0,
        }
    }

    /// Run `cmd` in the shell; its output and exit status.
    async fn run(&mut self, cmd: &str) -> (String, i32) {
        self.n += 1;
        let marker = format!("MARK{}-", self.n);
        let line = format!("{cmd}; echo {marker}$?\n");
        self.channel
            .tx
            .send(ChannelData::Pty(PtyData::Input {
                data: PtyBytes(line.into_bytes()),
            }))
            .await
            .expect("type");
        let start = self.seen.len();
        let found = tokio::time::timeout(GUARD, async {
            loop {
                // The echo of the typed line has `$?` after the marker, the output a number.
                let tail = &self.seen[start..];
                let hit = tail.match_indices(&marker).find_map(|(i, _)| {
                    let rest = &tail[i + marker.len()..];
                    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                    (!digits.is_empty() && rest[digits.len()..].starts_with(['\r', '\n']))
                        .then(|| (i, digits.parse::<i32>().unwrap()))
                });
                if let Some(at) = hit {
                    return at;
                }
                match self.channel.rx.recv().await {
                    Some(ChannelData::Pty(PtyData::Output { data, .. }))
                    | Some(ChannelData::Pty(PtyData::Screen { data, .. })) => {
                        self.seen.push_str(&String::from_utf8_lossy(&data.0))
                    }
                    Some(_) => {}
                    None => panic!("terminal channel ended: {:?}", self.channel.rx.end()),
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no {marker} from {cmd:?}; saw {}", &self.seen[start..]));
        (self.seen[start..start + found.0].to_string(), found.1)
    }
}

/// Wait for a notice starting with `prefix`.
async fn notice(events: &mut UnboundedReceiver<ClientEvent>, prefix: &str) -> String {
    let deadline = Instant::now() + SETUP_GUARD;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ev = tokio::time::timeout(left, events.recv())
            .await
            .unwrap_or_else(|_| panic!("no notice {prefix:?}; saw {seen:#?}"))
            .expect("client alive");
        if let ClientEvent::Event(e) = &ev {
            if let EventKind::Notice { text } = &e.kind {
                if text.starts_with(prefix) {
                    return text.clone();
                }
            }
        }
        seen.push(ev);
    }
}

async fn connection(events: &mut UnboundedReceiver<ClientEvent>, want: fn(&ConnState) -> bool) {
    let deadline = Instant::now() + SETUP_GUARD;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ev = tokio::time::timeout(left, events.recv())
            .await
            .expect("connection state in time")
            .expect("client alive");
        if let ClientEvent::Connection(s) = &ev {
            if want(s) {
                return;
            }
        }
    }
}

fn session(ssh_agent: bool) -> Request {
    let mut policy = reasonix_forward::policy::SessionPolicy {
        mode: reasonix_forward::policy::PermissionMode::Yolo,
        ..Default::default()
    };
    policy.sandbox.ssh_agent = ssh_agent;
    Request::OpenSession(OpenSession {
        new: true,
        settings: SessionSettings {
            model: Some("mock/m".into()),
            policy,
            ..SessionSettings::default()
        },
        ..OpenSession::default()
    })
}

/// Submit a turn and wait until the provider got request number `n` (the tool's result);
/// that request's text.
async fn turn(rig: &Rig, client: &Client, id: &str, n: usize) -> String {
    client
        .request(Request::SubmitTurn {
            request_id: id.into(),
            text: "check the agent".into(),
        })
        .await
        .expect("submit");
    let deadline = Instant::now() + SETUP_GUARD;
    while rig.mock.request_count() < n {
        assert!(
            Instant::now() < deadline,
            "the turn made no tool-result request"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    rig.mock.requests()[n - 1].body.to_string()
}

const BASH_PROBE: &str = "echo \"SOCK=[${SSH_AUTH_SOCK:-none}]\"; for f in ${XDG_RUNTIME_DIR:-/nonexistent}/reasonix/*-agent/agent ~/.reasonix/run/*-agent/agent /tmp/reasonix-$(id -u)/*-agent/agent; do [ -S \"$f\" ] && echo \"VISIBLE $f\"; done; ssh-add -l; echo \"AGENT-RC=$?\"";

#[test]
fn the_laptop_agent_serves_the_host_workspace_through_drops_and_only_where_allowed() {
    in_netns(|ns| async move {
        let probe = |id: &str| {
            MockReply::tool_calls(
                vec![MockToolCall::new(
                    id,
                    "bash",
                    &json!({ "command": BASH_PROBE }).to_string(),
                )],
                8,
            )
        };
        let rig = Rig::new_with_sshd(
            Arc::clone(&ns),
            vec![
                probe("b1"),
                MockReply::text(&["checked"]),
                probe("b2"),
                MockReply::text(&["checked"]),
            ],
            vec!["AllowAgentForwarding no".into()],
        )
        .await;
        let ssh_port = rig.sshd.port();

        // The key lives only in the laptop's agent: its private file is gone once added.
        let keys = tempfile::tempdir().unwrap();
        let key = ClientKey::generate(keys.path(), "id_laptop_only", None).expect("key");
        let public_file = keys.path().join("id_laptop_only.pub");
        let fp = fingerprint(&public_file);
        let agent = LaptopAgent::start(keys.path());
        let added = agent.ssh_add(&[key.private.to_str().unwrap()]);
        assert!(added.status.success(), "{added:?}");
        std::fs::remove_file(&key.private).unwrap();
        rig.user
            .authorize(&key.public)
            .expect("authorize the agent key");

        let forward = format!("ForwardAgent={}", agent.sock.display());
        let (client, mut events) = rig.library_client_ssh(
            ssh_port,
            SHORT,
            ClientOptions::default(),
            &[forward.as_str()],
        );
        let opened = tokio::time::timeout(SETUP_GUARD, client.request(session(false)))
            .await
            .expect("open in time")
            .expect("open");
        assert!(matches!(opened, Response::SessionOpened(_)), "{opened:?}");
        let text = notice(&mut events, "ssh-agent forwarded").await;
        let sock = PathBuf::from(
            text.split("SSH_AUTH_SOCK=")
                .nth(1)
                .and_then(|t| t.split(' ').next())
                .expect("socket in notice"),
        );
        // Private: a 0700 directory of the host user, a 0600 socket.
        let meta = std::fs::metadata(&sock).expect("the socket exists");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(meta.uid(), rig.user.uid);
        let dir = std::fs::metadata(sock.parent().unwrap()).unwrap();
        assert_eq!(dir.permissions().mode() & 0o777, 0o700);

        // The user's terminal: the key is listed, and git push over SSH works with it.
        let mut term = Term::open(&client).await;
        let (out, rc) = term.run("echo \"[$SSH_AUTH_SOCK]\"").await;
        assert_eq!(rc, 0);
        assert!(out.contains(&format!("[{}]", sock.display())), "{out}");
        let (out, rc) = term.run("ssh-add -l").await;
        assert_eq!(rc, 0, "{out}");
        assert!(out.contains(&fp), "the laptop's key is not listed: {out}");
        // The host cannot change the laptop's agent: removing every key is refused on the
        // laptop, and the key is still there.
        let (out, rc) = term.run("ssh-add -D").await;
        assert_ne!(rc, 0, "the host removed the laptop's keys: {out}");
        let listed = agent.ssh_add(&["-l"]);
        assert!(
            String::from_utf8_lossy(&listed.stdout).contains(&fp),
            "{listed:?}"
        );
        let remote = rig.user.home.join("remote.git");
        let git_ssh = format!(
            "ssh -F /dev/null -p {ssh_port} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o IdentityFile=/dev/null/none"
        );
        let setup = format!(
            "git init -q --bare {remote} && git init -q -b main proj && cd proj && git -c user.name=t -c user.email=t@e commit -q --allow-empty -m one",
            remote = remote.display()
        );
        let (out, rc) = term.run(&setup).await;
        assert_eq!(rc, 0, "{out}");
        let push = format!(
            "GIT_SSH_COMMAND='{git_ssh}' git push -q ssh://{}@127.0.0.1{} main",
            rig.user.name,
            remote.display()
        );
        let (out, rc) = term.run(&push).await;
        assert_eq!(rc, 0, "git push with the forwarded agent failed: {out}");
        assert!(
            remote.join("refs/heads/main").exists(),
            "nothing was pushed"
        );

        // The bash tool under the default sandbox: no variable, no visible socket.
        let body = turn(&rig, &client, "t1", 2).await;
        assert!(body.contains("SOCK=[none]"), "{body}");
        assert!(
            !body.contains("VISIBLE /"),
            "the sandbox shows the socket: {body}"
        );
        assert!(!body.contains("AGENT-RC=0"), "{body}");
        assert!(!body.contains(&fp), "{body}");
        // ... and with `[sandbox] ssh_agent = true` it lists the key.
        let opened = client.request(session(true)).await.expect("second session");
        let Response::SessionOpened(second) = opened else {
            panic!("{opened:?}")
        };
        let body = turn(&rig, &client, "t2", 4).await;
        assert!(body.contains("AGENT-RC=0"), "{body}");
        assert!(body.contains(&fp), "{body}");

        // Link down: a request fails at once (exit 1: the agent refused), no hang.
        let fault = ns.fault(Fault::Blackhole, ssh_port).expect("blackhole");
        connection(&mut events, |s| matches!(s, ConnState::Reconnecting { .. })).await;
        tokio::time::sleep(Duration::from_millis(DEAD_AFTER_MS + 500)).await;
        let sock_for_root = sock.clone();
        let out = tokio::task::spawn_blocking(move || {
            Command::new("timeout")
                .args(["20", "ssh-add", "-l"])
                .env("SSH_AUTH_SOCK", &sock_for_root)
                .output()
                .expect("ssh-add")
        })
        .await
        .unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(1),
            "no laptop attached: ssh-add should be refused at once, got {:?}: {said}",
            out.status
        );
        assert!(said.contains("agent refused operation"), "{said}");
        fault.lift().expect("lift");
        connection(&mut events, |s| matches!(s, ConnState::Connected { .. })).await;

        // Same shell, after the drop: the agent works again.
        let (out, rc) = term.run("ssh-add -l").await;
        assert_eq!(rc, 0, "{out}");
        assert!(out.contains(&fp), "{out}");
        let (out, rc) = term
            .run(&format!(
                "git -c user.name=t -c user.email=t@e commit -q --allow-empty -m two && {push}"
            ))
            .await;
        assert_eq!(rc, 0, "git push after the reconnect failed: {out}");

        // Takeover: another laptop, with another key in its agent, drives now; the same
        // shell's requests go to that laptop's agent.
        let keys_b = tempfile::tempdir().unwrap();
        let key_b = ClientKey::generate(keys_b.path(), "id_other_laptop", None).expect("key");
        let fp_b = fingerprint(&keys_b.path().join("id_other_laptop.pub"));
        let agent_b = LaptopAgent::start(keys_b.path());
        let added = agent_b.ssh_add(&[key_b.private.to_str().unwrap()]);
        assert!(added.status.success(), "{added:?}");
        let forward_b = format!("ForwardAgent={}", agent_b.sock.display());
        let (client_b, mut events_b) = rig.library_client_ssh(
            ssh_port,
            SHORT,
            ClientOptions::default(),
            &[forward_b.as_str()],
        );
        let Request::OpenSession(mut take) = session(true) else {
            unreachable!()
        };
        take.new = false;
        take.session = Some(second.session.clone());
        take.takeover = true;
        let opened =
            tokio::time::timeout(SETUP_GUARD, client_b.request(Request::OpenSession(take)))
                .await
                .expect("takeover in time")
                .expect("takeover");
        assert!(matches!(opened, Response::SessionOpened(_)), "{opened:?}");
        notice(&mut events_b, "ssh-agent forwarded").await;
        let (out, rc) = term.run("ssh-add -l").await;
        assert_eq!(rc, 0, "{out}");
        assert!(
            out.contains(&fp_b),
            "the driving laptop's key is not listed: {out}"
        );
        assert!(
            !out.contains(&fp),
            "the spectator's key is still used: {out}"
        );
        client_b.leave().await;
        client.leave().await;
    });
}

/// `[sandbox] ssh_agent = "confirm"`: every signing request from the host is put to the
/// front end first, naming the key (fingerprint and the agent's comment) and the host
/// process; a refusal reaches the host process as a failed signature, an approval signs,
/// listing keys asks nothing, and a pre-approved key signs without a question.
#[test]
fn confirm_mode_asks_before_each_signature() {
    in_netns(|ns| async move {
        let rig = Rig::new_with_sshd(
            Arc::clone(&ns),
            vec![],
            vec!["AllowAgentForwarding no".into()],
        )
        .await;
        let keys = tempfile::tempdir().unwrap();
        let key = ClientKey::generate(keys.path(), "id_confirm", None).expect("key");
        let public_file = keys.path().join("id_confirm.pub");
        let fp = fingerprint(&public_file);
        let agent = LaptopAgent::start(keys.path());
        assert!(agent
            .ssh_add(&[key.private.to_str().unwrap()])
            .status
            .success());
        std::fs::remove_file(&key.private).unwrap();
        let public = std::fs::read_to_string(&public_file).unwrap();
        rig.user.write_file("ws/key.pub", &public, 0o644).unwrap();
        rig.user
            .write_file("ws/msg.txt", "sign me\n", 0o644)
            .unwrap();
        let (pubkey, msg) = (rig.host_file("key.pub"), rig.host_file("msg.txt"));
        let sign = format!(
            "rm -f {m}.sig; ssh-keygen -Y sign -n test -f {k} {m}",
            m = msg.display(),
            k = pubkey.display()
        );

        let forward = format!("ForwardAgent={}", agent.sock.display());
        let confirm = |approved: Vec<String>| ClientOptions {
            agent_confirm: reasonix_local::agent_confirm::AgentConfirm {
                confirm: true,
                approved,
            },
            ..ClientOptions::default()
        };
        let (client, mut events) =
            rig.library_client_ssh(rig.sshd.port(), SHORT, confirm(vec![]), &[forward.as_str()]);
        let opened = tokio::time::timeout(SETUP_GUARD, client.request(session(false)))
            .await
            .expect("open in time")
            .expect("open");
        assert!(matches!(opened, Response::SessionOpened(_)), "{opened:?}");
        notice(&mut events, "ssh-agent forwarded").await;
        // The front end: answers the questions from `answers`, reports each question.
        let answers = Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
        let (asked_tx, mut asked) = tokio::sync::mpsc::unbounded_channel();
        {
            let answers = Arc::clone(&answers);
            tokio::spawn(async move {
                while let Some(ev) = events.recv().await {
                    if let ClientEvent::AgentSign(ask) = ev {
                        let allow = answers.lock().unwrap().pop_front().unwrap_or(false);
                        let _ = asked_tx.send((ask.question(), ask.fingerprint.clone()));
                        ask.answer.answer(allow);
                    }
                }
            });
        }
        let mut term = Term::open(&client).await;

        // Listing asks nothing.
        let (out, rc) = term.run("ssh-add -l").await;
        assert_eq!(rc, 0, "{out}");
        assert!(out.contains(&fp), "{out}");
        assert!(asked.try_recv().is_err(), "listing keys asked the user");

        // Refused: the host process's signature fails, and the question named it all.
        answers.lock().unwrap().push_back(false);
        let (out, rc) = term.run(&sign).await;
        assert_ne!(rc, 0, "signed although refused: {out}");
        assert!(!Path::new(&format!("{}.sig", msg.display())).exists());
        let (question, got_fp) = asked.try_recv().expect("the refusal was asked");
        assert_eq!(got_fp, fp);
        assert!(question.contains("ssh-keygen"), "{question}");
        assert!(question.contains(&fp), "{question}");
        assert!(question.contains("ED25519"), "{question}");

        // Approved: the signature is made, and verifies against the key.
        answers.lock().unwrap().push_back(true);
        let (out, rc) = term.run(&sign).await;
        assert_eq!(rc, 0, "not signed although approved: {out}");
        assert!(asked.try_recv().is_ok(), "the approval was not asked");
        let sig = std::fs::read_to_string(format!("{}.sig", msg.display())).unwrap();
        assert!(sig.contains("BEGIN SSH SIGNATURE"), "{sig}");
        let (out, rc) = term
            .run(&format!(
                "printf 'me %s\\n' \"$(cat {k})\" > {k}.allowed; ssh-keygen -Y verify -f {k}.allowed -I me -n test -s {m}.sig < {m}",
                k = pubkey.display(),
                m = msg.display()
            ))
            .await;
        assert_eq!(rc, 0, "the signature does not verify: {out}");
        drop(term);
        drop(client);

        // Pre-approved (`ssh_agent_approved`): no question at all.
        let (client, mut events) = rig.library_client_ssh(
            rig.sshd.port(),
            SHORT,
            confirm(vec![fp.clone()]),
            &[forward.as_str()],
        );
        let opened = tokio::time::timeout(SETUP_GUARD, client.request(session(false)))
            .await
            .expect("open in time")
            .expect("open");
        assert!(matches!(opened, Response::SessionOpened(_)), "{opened:?}");
        notice(&mut events, "ssh-agent forwarded").await;
        let (q_tx, mut questions) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(ev) = events.recv().await {
                if let ClientEvent::AgentSign(ask) = ev {
                    let _ = q_tx.send(ask.question());
                    ask.answer.answer(false);
                }
            }
        });
        let mut term = Term::open(&client).await;
        let (out, rc) = term.run(&sign).await;
        assert_eq!(rc, 0, "a pre-approved key did not sign: {out}");
        assert!(
            questions.try_recv().is_err(),
            "a pre-approved key was asked about"
        );
    });
}
