//! Connection tests against a real OpenSSH sshd: host keys, auth methods, remote scripts.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use reasonix_bootstrap::{
    connect_with_cache, BootstrapError, CredentialCache, HostKeyAnswer, HostKeyRefusal,
    HostKeyStatus, NonInteractivePrompter, Prompter, Stage,
};
use reasonix_testkit::sshd::{Sshd, SshdConfig, UserOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_auth_and_fenced_script_with_tcsh_banner_user() {
    let s = key_setup(
        SshdConfig {
            banner: Some("Authorized use only\n".into()),
            ..Default::default()
        },
        UserOptions {
            shell: Some("/usr/bin/tcsh".into()),
            ..Default::default()
        },
    );
    // A chatty rc file: prints to stdout and stderr on every (also non-interactive) start.
    s.user
        .write_file(
            ".cshrc",
            "echo WELCOME-TO-TCSH\necho rc-noise >/dev/stderr\n",
            0o644,
        )
        .unwrap();
    let p = ScriptedPrompter::new(HostKeyAnswer::Reject);
    let cache = CredentialCache::new();
    let conn = guard(connect_with_cache(
        &s.dest("/tmp"),
        &s.opts(),
        p.clone(),
        &cache,
    ))
    .await
    .unwrap();
    assert_eq!(conn.user(), s.user.name);
    let out = guard(conn.run_script("echo \"$HOME\"; echo err >&2; [ -n \"$BASH_VERSION$ZSH_VERSION\" ] && echo notsh; printf 'a b'; exit 3"))
        .await
        .unwrap();
    assert_eq!(out.stdout, format!("{}\na b", s.user.home.display()));
    assert_eq!(out.stderr, "err\n");
    assert_eq!(out.exit_code, 3);
    assert!(
        out.noise.contains("WELCOME-TO-TCSH"),
        "noise: {:?}",
        out.noise
    );
    let seen = p.seen.lock().unwrap();
    assert!(
        seen.host_keys.is_empty(),
        "known host must not be asked about"
    );
    assert!(seen
        .banners
        .iter()
        .any(|b| b.contains("Authorized use only")));
    assert!(seen.progress.iter().any(|(st, _, _)| *st == Stage::Auth));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_host_accepted_is_written_then_known() {
    let s = key_setup(SshdConfig::default(), UserOptions::default());
    std::fs::remove_file(s.laptop.known_hosts()).unwrap();
    let p = ScriptedPrompter::new(HostKeyAnswer::AcceptAndSave);
    let cache = CredentialCache::new();
    let conn = guard(connect_with_cache(
        &s.dest(""),
        &s.opts(),
        p.clone(),
        &cache,
    ))
    .await
    .unwrap();
    drop(conn);
    {
        let seen = p.seen.lock().unwrap();
        assert_eq!(seen.host_keys.len(), 1);
        let q = &seen.host_keys[0];
        assert_eq!(q.status, HostKeyStatus::Unknown);
        assert_eq!(q.port, s.sshd.port());
        assert_eq!(q.key_type, "ssh-ed25519");
        assert!(q.fingerprint_sha256.starts_with("SHA256:"));
    }
    let kh = std::fs::read_to_string(s.laptop.known_hosts()).unwrap();
    let key_b64 = s.sshd.host_public_key().split_whitespace().nth(1).unwrap();
    assert!(
        kh.contains(&format!(
            "[127.0.0.1]:{} ssh-ed25519 {key_b64}",
            s.sshd.port()
        )),
        "{kh}"
    );
    // Second connection: no question.
    let p2 = ScriptedPrompter::new(HostKeyAnswer::Reject);
    guard(connect_with_cache(
        &s.dest(""),
        &s.opts(),
        p2.clone(),
        &cache,
    ))
    .await
    .unwrap();
    assert!(p2.seen.lock().unwrap().host_keys.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_host_headless_refused_naming_accept_new_and_accept_new_works() {
    let s = key_setup(SshdConfig::default(), UserOptions::default());
    std::fs::remove_file(s.laptop.known_hosts()).unwrap();
    let cache = CredentialCache::new();
    let p: Arc<dyn Prompter> = Arc::new(NonInteractivePrompter);
    let err = guard(connect_with_cache(
        &s.dest(""),
        &s.opts(),
        p.clone(),
        &cache,
    ))
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            BootstrapError::HostKey {
                refusal: HostKeyRefusal::RejectedByUser,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.stage(), Stage::HostKey);
    assert!(
        err.to_string()
            .contains("-o StrictHostKeyChecking=accept-new"),
        "{err}"
    );
    assert!(!s.laptop.known_hosts().exists());
    assert!(
        !s.sshd.log().contains("userauth-request"),
        "no auth may be attempted"
    );

    let mut o = s.opts();
    o.push_option("StrictHostKeyChecking=accept-new").unwrap();
    guard(connect_with_cache(&s.dest(""), &o, p, &cache))
        .await
        .unwrap();
    assert!(std::fs::read_to_string(s.laptop.known_hosts())
        .unwrap()
        .contains("ssh-ed25519"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_host_key_refused_before_auth_with_both_fingerprints() {
    let s = key_setup(SshdConfig::default(), UserOptions::default());
    // Record a different key for this host:port, after an unrelated line.
    let other = s.laptop.key("other_host_key", None);
    let other_b64 = other.public.split_whitespace().nth(1).unwrap().to_string();
    std::fs::write(
        s.laptop.known_hosts(),
        format!(
            "# laptop known hosts\n[127.0.0.1]:{} ssh-ed25519 {other_b64}\n",
            s.sshd.port()
        ),
    )
    .unwrap();
    let p = ScriptedPrompter::new(HostKeyAnswer::AcceptAndSave);
    let mut o = s.opts();
    o.push_option("StrictHostKeyChecking=no").unwrap();
    let cache = CredentialCache::new();
    let err = guard(connect_with_cache(&s.dest(""), &o, p.clone(), &cache))
        .await
        .unwrap_err();
    let BootstrapError::HostKey { question, refusal } = &err else {
        panic!("expected host key error, got {err:?}");
    };
    assert_eq!(*refusal, HostKeyRefusal::Changed);
    let new_fp = question.fingerprint_sha256.clone();
    let HostKeyStatus::Changed {
        old_fingerprint,
        old_key_type,
        known_hosts_file,
        line,
    } = &question.status
    else {
        panic!("status {:?}", question.status);
    };
    assert_eq!(*line, 2);
    assert_eq!(known_hosts_file, &s.laptop.known_hosts());
    assert_eq!(old_key_type, "ssh-ed25519");
    assert_ne!(old_fingerprint, &new_fp);
    let msg = err.to_string();
    assert!(
        msg.contains(&new_fp) && msg.contains(old_fingerprint.as_str()),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("{}:2", s.laptop.known_hosts().display())),
        "{msg}"
    );
    assert!(
        p.seen.lock().unwrap().host_keys.is_empty(),
        "changed keys are not negotiable"
    );
    // Nothing was sent: sshd never saw an authentication request.
    let log = s.sshd.log();
    assert!(!log.contains("userauth-request"), "{log}");
    // known_hosts untouched.
    assert!(!std::fs::read_to_string(s.laptop.known_hosts())
        .unwrap()
        .contains(s.sshd.host_public_key().split_whitespace().nth(1).unwrap()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_auth_asks_once_then_reuses_cached_secret() {
    let sshd = Sshd::start(SshdConfig {
        password_auth: true,
        use_pam: true,
        pubkey_auth: false,
        ..Default::default()
    })
    .unwrap();
    let user = reasonix_testkit::sshd::TestUser::create(&UserOptions {
        password: Some("pw-Correct-1".into()),
        ..Default::default()
    })
    .unwrap();
    let laptop = Laptop::new();
    laptop.trust(&sshd);
    let dest = reasonix_bootstrap::Destination::parse(&format!("{}@127.0.0.1", user.name)).unwrap();
    let cache = CredentialCache::new();
    // First a wrong password, then the right one.
    let p = ScriptedPrompter::new(HostKeyAnswer::Reject).with_secrets(&["wrong", "pw-Correct-1"]);
    guard(connect_with_cache(
        &dest,
        &laptop.opts(&sshd),
        p.clone(),
        &cache,
    ))
    .await
    .unwrap();
    assert_eq!(p.seen.lock().unwrap().secrets.len(), 2);
    assert_eq!(cache.len(), 1);
    // Reconnect in the same process: no question.
    let p2 = ScriptedPrompter::new(HostKeyAnswer::Reject);
    guard(connect_with_cache(
        &dest,
        &laptop.opts(&sshd),
        p2.clone(),
        &cache,
    ))
    .await
    .unwrap();
    assert!(p2.seen.lock().unwrap().secrets.is_empty());
    // Three wrong answers: auth error naming the stage and host.
    let fresh = CredentialCache::new();
    let p3 = ScriptedPrompter::new(HostKeyAnswer::Reject).with_secrets(&["a", "b", "c", "d"]);
    let err = guard(connect_with_cache(
        &dest,
        &laptop.opts(&sshd),
        p3.clone(),
        &fresh,
    ))
    .await
    .unwrap_err();
    assert!(matches!(err, BootstrapError::Auth { .. }), "{err:?}");
    assert_eq!(p3.seen.lock().unwrap().secrets.len(), 3);
    assert!(err.to_string().contains("127.0.0.1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_round_keyboard_interactive() {
    let sshd = Sshd::start(SshdConfig {
        kbd_interactive: true,
        use_pam: true,
        pubkey_auth: false,
        authentication_methods: Some("keyboard-interactive,keyboard-interactive".into()),
        ..Default::default()
    })
    .unwrap();
    let user = reasonix_testkit::sshd::TestUser::create(&UserOptions {
        password: Some("kbd-Secret-2".into()),
        ..Default::default()
    })
    .unwrap();
    let laptop = Laptop::new();
    laptop.trust(&sshd);
    let dest = reasonix_bootstrap::Destination::parse(&format!("{}@127.0.0.1", user.name)).unwrap();
    let cache = CredentialCache::new();
    let p = ScriptedPrompter::new(HostKeyAnswer::Reject)
        .with_rounds(&[&["kbd-Secret-2"], &["kbd-Secret-2"]]);
    let conn = guard(connect_with_cache(
        &dest,
        &laptop.opts(&sshd),
        p.clone(),
        &cache,
    ))
    .await
    .unwrap();
    let out = guard(conn.run_script("id -un")).await.unwrap();
    assert_eq!(out.stdout.trim(), user.name);
    {
        let seen = p.seen.lock().unwrap();
        let asked: Vec<_> = seen
            .rounds
            .iter()
            .filter(|r| !r.prompts.is_empty())
            .collect();
        assert_eq!(asked.len(), 2, "two rounds expected: {:?}", seen.rounds);
        assert!(asked
            .iter()
            .all(|r| r.prompts.len() == 1 && !r.prompts[0].1));
    }
    assert!(
        sshd.log().contains("Partial keyboard-interactive"),
        "server must have reported partial success"
    );
    // A reconnect answers the first factor from the cache and asks only for the second.
    let p2 = ScriptedPrompter::new(HostKeyAnswer::Reject).with_rounds(&[&["kbd-Secret-2"]]);
    guard(connect_with_cache(
        &dest,
        &laptop.opts(&sshd),
        p2.clone(),
        &cache,
    ))
    .await
    .unwrap();
    let asked2 = p2
        .seen
        .lock()
        .unwrap()
        .rounds
        .iter()
        .filter(|r| !r.prompts.is_empty())
        .count();
    assert_eq!(asked2, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encrypted_key_passphrase_asked_lazily_and_cached() {
    let sshd = Sshd::start(SshdConfig::default()).unwrap();
    let user = reasonix_testkit::sshd::TestUser::create(&UserOptions::default()).unwrap();
    let laptop = Laptop::new();
    laptop.trust(&sshd);
    // An encrypted key the server does NOT accept comes first: its passphrase must not be
    // asked. Then the accepted encrypted key.
    let stranger = laptop.key("id_stranger", Some("never-asked"));
    let key = laptop.key("id_enc", Some("correct horse"));
    user.authorize(&key.public).unwrap();
    let mut o = laptop.opts(&sshd);
    o.identity_files = vec![stranger.private.clone(), key.private.clone()];
    let dest = reasonix_bootstrap::Destination::parse(&format!("{}@127.0.0.1", user.name)).unwrap();
    let cache = CredentialCache::new();
    let p = ScriptedPrompter::new(HostKeyAnswer::Reject).with_secrets(&["wrong", "correct horse"]);
    let conn = guard(connect_with_cache(&dest, &o, p.clone(), &cache))
        .await
        .unwrap();
    assert_eq!(
        guard(conn.run_script("id -un"))
            .await
            .unwrap()
            .stdout
            .trim(),
        user.name
    );
    {
        let seen = p.seen.lock().unwrap();
        assert_eq!(seen.secrets.len(), 2, "{:?}", seen.secrets);
        for s in &seen.secrets {
            assert!(!s.echo);
            assert_eq!(
                s.purpose,
                reasonix_bootstrap::SecretPurpose::Passphrase {
                    path: key.private.clone()
                }
            );
        }
    }
    // Reconnect: passphrase comes from the cache.
    let p2 = ScriptedPrompter::new(HostKeyAnswer::Reject);
    guard(connect_with_cache(&dest, &o, p2.clone(), &cache))
        .await
        .unwrap();
    assert!(p2.seen.lock().unwrap().secrets.is_empty());
    // Headless without cache: the key is skipped and auth fails cleanly.
    let err = guard(connect_with_cache(
        &dest,
        &o,
        Arc::new(NonInteractivePrompter),
        &CredentialCache::new(),
    ))
    .await
    .unwrap_err();
    assert!(matches!(err, BootstrapError::Auth { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_agent_auth() {
    let s = key_setup(SshdConfig::default(), UserOptions::default());
    let sock_dir = tempfile::tempdir().unwrap();
    let sock = sock_dir.path().join("agent.sock");
    let mut agent = std::process::Command::new("ssh-agent")
        .arg("-D")
        .arg("-a")
        .arg(&sock)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..200 {
        if sock.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let add = std::process::Command::new("ssh-add")
        .arg(&s.key.private)
        .env("SSH_AUTH_SOCK", &sock)
        .output()
        .unwrap();
    assert!(add.status.success(), "{add:?}");
    // Move the key file away: only the agent can sign now.
    std::fs::remove_file(&s.key.private).unwrap();
    let mut o = s.laptop.opts(&s.sshd);
    o.options.retain(|(k, _)| k != "IdentityAgent");
    o.push_option(&format!("IdentityAgent={}", sock.display()))
        .unwrap();
    let cache = CredentialCache::new();
    let p = ScriptedPrompter::new(HostKeyAnswer::Reject);
    let res = guard(connect_with_cache(&s.dest(""), &o, p.clone(), &cache)).await;
    let _ = agent.kill();
    let _ = agent.wait();
    let conn = res.unwrap();
    assert_eq!(
        guard(conn.run_script("id -un"))
            .await
            .unwrap()
            .stdout
            .trim(),
        s.user.name
    );
    assert!(p.seen.lock().unwrap().secrets.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_stream_works_without_any_forwarding() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = key_setup(
        SshdConfig {
            allow_tcp_forwarding: false,
            allow_stream_local_forwarding: false,
            ..Default::default()
        },
        UserOptions::default(),
    );
    let cache = CredentialCache::new();
    let p = ScriptedPrompter::new(HostKeyAnswer::Reject);
    let conn = guard(connect_with_cache(&s.dest(""), &s.opts(), p, &cache))
        .await
        .unwrap();
    // An echo server: reads lines, writes them back uppercased; stderr gets a note.
    let mut stream = guard(conn.exec_stream("echo starting >&2; tr a-z A-Z"))
        .await
        .unwrap();
    let payload: Vec<u8> = (0..200_000u32)
        .map(|i| b"abcdefghij\n"[(i % 11) as usize])
        .collect();
    let expected: Vec<u8> = payload.iter().map(|b| b.to_ascii_uppercase()).collect();
    let mut writer = stream.writer;
    let send = tokio::spawn(async move {
        writer.write_all(&payload).await.unwrap();
        writer.shutdown().await.unwrap();
        writer
    });
    let mut got = Vec::new();
    guard(stream.reader.read_to_end(&mut got)).await.unwrap();
    let _writer = send.await.unwrap();
    assert_eq!(got.len(), expected.len());
    assert!(got == expected);
    let exit = guard(async {
        loop {
            if let Some(e) = stream.exit.borrow().clone() {
                return e;
            }
            stream.exit.changed().await.unwrap();
        }
    })
    .await;
    assert_eq!(exit, reasonix_bootstrap::ExitInfo::Status(0));
    assert!(stream.stderr.text().contains("starting"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_jump_through_a_second_sshd() {
    // The target refuses forwarding; the jump host allows it (ProxyJump needs it there).
    let target = key_setup(
        SshdConfig {
            allow_tcp_forwarding: false,
            ..Default::default()
        },
        UserOptions::default(),
    );
    let jump = Sshd::start(SshdConfig::default()).unwrap();
    let jump_user = reasonix_testkit::sshd::TestUser::create(&UserOptions::default()).unwrap();
    jump_user.authorize(&target.key.public).unwrap();
    // Only the target is known; the jump host's key is asked about separately.
    let cache = CredentialCache::new();
    let p = ScriptedPrompter::new(HostKeyAnswer::AcceptOnce);
    let mut o = target.opts();
    o.port = Some(target.sshd.port());
    o.jump = Some(format!("{}@127.0.0.1:{}", jump_user.name, jump.port()));
    let conn = guard(connect_with_cache(&target.dest(""), &o, p.clone(), &cache))
        .await
        .unwrap();
    assert_eq!(
        guard(conn.run_script("id -un"))
            .await
            .unwrap()
            .stdout
            .trim(),
        target.user.name
    );
    let seen = p.seen.lock().unwrap();
    assert_eq!(seen.host_keys.len(), 1, "only the jump host is unknown");
    assert_eq!(seen.host_keys[0].port, jump.port());
    assert!(
        jump.log().contains("direct-tcpip"),
        "tunnel went through the jump host"
    );
    drop(seen);
    // AcceptOnce did not write anything.
    let kh = std::fs::read_to_string(target.laptop.known_hosts()).unwrap();
    assert!(
        !kh.contains(&format!(":{}]", jump.port())) && !kh.contains(&format!("]:{}", jump.port()))
    );
}
