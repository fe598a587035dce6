//! Oracle: our host-key decision against OpenSSH's, live, on throwaway sshds.
//!
//! For every known_hosts variant (right key, wrong key of the same type, only another key
//! type on record, revoked, unknown, hashed, wildcard, negated, mixed case, certificate
//! authority), and for the port class (the servers listen on another port than 22, so a
//! bare-name entry, `*`, wildcards, negations, hashed entries, `@revoked` and
//! `@cert-authority` lines are judged the way `ssh` judges `[host]:port`), both clients
//! connect to the same server with `StrictHostKeyChecking=yes` and
//! `BatchMode=yes`: `ssh` (OpenSSH) and our `connect`. The decision (accept / changed /
//! revoked / unknown) must be the same.
//!
//! Server 1 holds an ed25519 and an ecdsa host key; server 2 additionally presents an ecdsa
//! host certificate signed by a throwaway CA (principal `127.0.0.1`). Certificates live on a
//! server of their own because OpenSSH, when an ed25519 key is on record, still asks for
//! certificate algorithms first and would then judge the certified ecdsa key instead.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use common::*;
use reasonix_bootstrap::{
    connect_with_cache, BootstrapError, CredentialCache, Destination, HostKeyRefusal,
    NonInteractivePrompter, Prompter,
};
use reasonix_testkit::sshd::{SshdConfig, UserOptions};

fn keygen(dir: &Path, name: &str, ty: &str) -> String {
    let path = dir.join(name);
    let mut cmd = Command::new("ssh-keygen");
    cmd.args(["-q", "-t", ty, "-N", "", "-C", "", "-f"])
        .arg(&path);
    if ty == "rsa" {
        cmd.args(["-b", "2048"]);
    }
    assert!(cmd.status().unwrap().success());
    public_of(&path.with_extension("pub"))
}

fn public_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let mut parts = text.split_whitespace();
    format!("{} {}", parts.next().unwrap(), parts.next().unwrap())
}

/// What a client decided about the server's host key.
fn classify_openssh(status: std::process::ExitStatus, stderr: &str) -> String {
    if stderr.contains("REVOKED HOST KEY") {
        "revoked".into()
    } else if stderr.contains("REMOTE HOST IDENTIFICATION HAS CHANGED") {
        "changed".into()
    } else if stderr.contains("host key is known for")
        || stderr.contains("Host key verification failed")
    {
        "unknown".into()
    } else if status.success() || stderr.contains("Permission denied") {
        "accept".into()
    } else {
        format!("error: {}", stderr.trim())
    }
}

fn classify_ours(r: &Result<reasonix_bootstrap::SshConnection, BootstrapError>) -> String {
    match r {
        Ok(_) => "accept".into(),
        Err(BootstrapError::HostKey { refusal, .. }) => match refusal {
            HostKeyRefusal::Changed => "changed".into(),
            HostKeyRefusal::Revoked => "revoked".into(),
            HostKeyRefusal::StrictRefusedUnknown | HostKeyRefusal::RejectedByUser => {
                "unknown".into()
            }
        },
        Err(e) => format!("error: {e}"),
    }
}

struct Variant {
    name: &'static str,
    known_hosts: String,
    host: &'static str,
    /// Hash the file with `ssh-keygen -H` first.
    hashed: bool,
    /// Extra `-o` options for both clients.
    opts: Vec<String>,
}

async fn run_variants(
    s: &KeySetup,
    variants: &[Variant],
    table: &mut Vec<String>,
    failures: &mut Vec<String>,
) {
    let port = s.sshd.port();
    for v in variants {
        let file = s
            .laptop
            .ssh_dir()
            .join(format!("kh_{}", v.name.replace(' ', "_")));
        // Each client gets a fresh copy: neither may learn from the other.
        let write = |path: &Path| {
            std::fs::write(path, &v.known_hosts).unwrap();
            if v.hashed {
                let out = Command::new("ssh-keygen")
                    .arg("-q")
                    .arg("-H")
                    .arg("-f")
                    .arg(path)
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        };
        write(&file);
        let mut ssh = Command::new("ssh");
        for o in &v.opts {
            ssh.arg("-o").arg(o);
        }
        let out = ssh
            .env("HOME", s.laptop.home.path())
            .args([
                "-F",
                "none",
                "-o",
                "StrictHostKeyChecking=yes",
                "-o",
                "BatchMode=yes",
            ])
            .arg("-o")
            .arg(format!("UserKnownHostsFile={}", file.display()))
            .args([
                "-o",
                "GlobalKnownHostsFile=/dev/null",
                "-o",
                "UpdateHostKeys=no",
            ])
            .args([
                "-o",
                "IdentitiesOnly=yes",
                "-o",
                "IdentityAgent=none",
                "-o",
                "ConnectTimeout=20",
            ])
            .arg("-i")
            .arg(&s.key.private)
            .arg("-p")
            .arg(port.to_string())
            .arg(format!("{}@{}", s.user.name, v.host))
            .arg("true")
            .output()
            .unwrap();
        let theirs = classify_openssh(out.status, &String::from_utf8_lossy(&out.stderr));

        write(&file);
        let mut o = s.opts();
        for opt in &v.opts {
            o.push_option(opt).unwrap();
        }
        o.push_option(&format!("UserKnownHostsFile={}", file.display()))
            .unwrap();
        o.push_option("GlobalKnownHostsFile=/dev/null").unwrap();
        o.push_option("StrictHostKeyChecking=yes").unwrap();
        o.push_option("BatchMode=yes").unwrap();
        let dest = Destination::parse(&format!("{}@{}", s.user.name, v.host)).unwrap();
        let p: Arc<dyn Prompter> = Arc::new(NonInteractivePrompter);
        let r = guard(connect_with_cache(&dest, &o, p, &CredentialCache::new())).await;
        let mine = classify_ours(&r);
        if let Err(e @ BootstrapError::HostKey { .. }) = &r {
            // A hard stop names both fingerprints and where the recorded entry is.
            let text = e.to_string();
            if mine == "changed" {
                assert_eq!(text.matches("SHA256:").count(), 2, "{text}");
                assert!(text.contains(&format!("{}:", file.display())), "{text}");
            }
        }
        if let Ok(c) = r {
            c.disconnect().await;
        }
        table.push(format!("{:<44} ssh={theirs:<8} ours={mine}", v.name));
        if theirs != mine {
            failures.push(format!(
                "variant '{}' (host {}): OpenSSH {theirs}, ours {mine}\n--- known_hosts ---\n{}",
                v.name, v.host, v.known_hosts
            ));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_key_decisions_equal_openssh() {
    let keys = tempfile::tempdir().unwrap();
    let other_ed = keygen(keys.path(), "other_ed", "ed25519");
    let other_ec = keygen(keys.path(), "other_ec", "ecdsa");
    let other_rsa = keygen(keys.path(), "other_rsa", "rsa");
    let host_ec = keygen(keys.path(), "host_ec", "ecdsa");
    let ca = keygen(keys.path(), "ca", "ed25519");
    let other_ca = keygen(keys.path(), "other_ca", "ed25519");
    // Server 2's certified host key; only its files are used.
    keygen(keys.path(), "host_ec2", "ecdsa");
    let st = Command::new("ssh-keygen")
        .args(["-q", "-s"])
        .arg(keys.path().join("ca"))
        .args(["-I", "rx-host", "-h", "-n", "127.0.0.1", "-V", "-5m:+1h"])
        .arg(keys.path().join("host_ec2.pub"))
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );

    let s1 = key_setup(
        SshdConfig {
            extra: vec![format!("HostKey {}", keys.path().join("host_ec").display())],
            ..Default::default()
        },
        UserOptions::default(),
    );
    let ed = {
        let mut p = s1.sshd.host_public_key().split_whitespace();
        format!("{} {}", p.next().unwrap(), p.next().unwrap())
    };
    let n1 = format!("[127.0.0.1]:{}", s1.sshd.port());
    let v = |name, kh: String| Variant {
        name,
        known_hosts: kh,
        host: "127.0.0.1",
        hashed: false,
        opts: Vec::new(),
    };
    let mut variants = vec![
        v("right ed25519", format!("{n1} {ed}\n")),
        v(
            "right ecdsa only (asked for first)",
            format!("{n1} {host_ec}\n"),
        ),
        v(
            "wrong key, same type (ed25519)",
            format!("{n1} {other_ed}\n"),
        ),
        v("wrong key, same type (ecdsa)", format!("{n1} {other_ec}\n")),
        v(
            "only another type on record (rsa)",
            format!("{n1} {other_rsa}\n"),
        ),
        v(
            "right ed25519 + wrong ecdsa",
            format!("{n1} {other_ec}\n{n1} {ed}\n"),
        ),
        v(
            "wrong ed25519 + right ecdsa",
            format!("{n1} {other_ed}\n{n1} {host_ec}\n"),
        ),
        v(
            "revoked for this host",
            format!("{n1} {ed}\n@revoked {n1} {ed}\n"),
        ),
        v(
            "revoked only for another host",
            format!("{n1} {ed}\n@revoked otherhost {ed}\n"),
        ),
        v(
            "revoked ecdsa, ed25519 on record",
            format!("@revoked * {host_ec}\n{n1} {ed}\n"),
        ),
        v(
            "revoked ecdsa only",
            format!("@revoked * {host_ec}\n{n1} {host_ec}\n"),
        ),
        v("unknown (empty file)", String::new()),
        v(
            "unknown (other host only)",
            format!("[otherhost]:22 {ed}\notherhost {ed}\n"),
        ),
        v(
            "only the bare host name on record",
            format!("127.0.0.1 {ed}\n"),
        ),
        v(
            "bare host name with a wrong key",
            format!("127.0.0.1 {other_ed}\n"),
        ),
        v("wildcard pattern", format!("[127.0.0.*]:* {ed}\n")),
        v(
            "negated [host]:port, bare name matches *",
            format!("!{n1},*  {ed}\n"),
        ),
        v(
            "negated for both names",
            format!("!{n1},!127.0.0.1,* {ed}\n"),
        ),
        v(
            "comment and marker noise",
            format!("# c\n@bogus {n1} {other_ed}\n  {n1} {ed} comment\n"),
        ),
        v(
            "cert-authority but no certificate",
            format!("@cert-authority * {ca}\n"),
        ),
        Variant {
            name: "hashed right key",
            known_hosts: format!("{n1} {ed}\n"),
            host: "127.0.0.1",
            hashed: true,
            opts: Vec::new(),
        },
        Variant {
            name: "hashed wrong key",
            known_hosts: format!("{n1} {other_ed}\n"),
            host: "127.0.0.1",
            hashed: true,
            opts: Vec::new(),
        },
        Variant {
            name: "mixed-case name and entry",
            known_hosts: format!("[LocalHost]:{} {ed}\n", s1.sshd.port()),
            host: "LOCALHOST",
            hashed: false,
            opts: Vec::new(),
        },
        Variant {
            name: "HostKeyAlias, entry under the alias",
            known_hosts: format!("myalias {ed}\n"),
            host: "127.0.0.1",
            hashed: false,
            opts: vec!["HostKeyAlias=MyAlias".into()],
        },
        Variant {
            name: "HostKeyAlias, entry only under [host]:port",
            known_hosts: format!("{n1} {ed}\n"),
            host: "127.0.0.1",
            hashed: false,
            opts: vec!["HostKeyAlias=myalias".into()],
        },
        Variant {
            name: "HostKeyAlias, wrong key under the alias",
            known_hosts: format!("MyAlias {other_ed}\n"),
            host: "127.0.0.1",
            hashed: true,
            opts: vec!["HostKeyAlias=myalias".into()],
        },
        Variant {
            name: "mixed-case name, hashed entry",
            known_hosts: format!("[localhost]:{} {ed}\n", s1.sshd.port()),
            host: "LocalHost",
            hashed: true,
            opts: Vec::new(),
        },
    ];
    // The port class: the server listens on another port than 22, so `ssh` looks it up as
    // `[127.0.0.1]:port` first and, only when nothing at all names that, under the bare name.
    let hv = |name, kh: String| Variant {
        name,
        known_hosts: kh,
        host: "127.0.0.1",
        hashed: true,
        opts: Vec::new(),
    };
    variants.extend([
        v("port: bare `*`, right key", format!("* {ed}\n")),
        v("port: bare `*`, wrong key", format!("* {other_ed}\n")),
        v(
            "port: address wildcard, right key",
            format!("127.0.0.* {ed}\n"),
        ),
        v(
            "port: address wildcard, wrong key",
            format!("127.0.0.* {other_ed}\n"),
        ),
        v(
            "port: `[host]:*`, wrong key",
            format!("[127.0.0.1]:* {other_ed}\n"),
        ),
        v(
            "port: wrong key for [host]:port, right for bare",
            format!("{n1} {other_ed}\n127.0.0.1 {ed}\n"),
        ),
        v(
            "port: bare name negated, `*` right",
            format!("!127.0.0.1,* {ed}\n"),
        ),
        v(
            "port: both negated, `*` right",
            format!("![127.0.0.1]:*,!127.0.0.1,* {ed}\n"),
        ),
        v(
            "port: [host]:port negated, bare wrong",
            format!("!{n1},* {other_ed}\n"),
        ),
        v(
            "port: revoked for the bare name only",
            format!("@revoked 127.0.0.1 {ed}\n"),
        ),
        v(
            "port: right for [host]:port, revoked for bare",
            format!("{n1} {ed}\n@revoked 127.0.0.1 {ed}\n"),
        ),
        v(
            "port: right for bare, revoked for [host]:port",
            format!("127.0.0.1 {ed}\n@revoked {n1} {ed}\n"),
        ),
        v(
            "port: revoked by `*`",
            format!("127.0.0.1 {ed}\n@revoked * {ed}\n"),
        ),
        hv(
            "port: hashed bare name, right key",
            format!("127.0.0.1 {ed}\n"),
        ),
        hv(
            "port: hashed bare name, wrong key",
            format!("127.0.0.1 {other_ed}\n"),
        ),
        hv(
            "port: hashed [host]:port wrong, bare right",
            format!("{n1} {other_ed}\n127.0.0.1 {ed}\n"),
        ),
        hv(
            "port: hashed bare name revoked",
            format!("@revoked 127.0.0.1 {ed}\n"),
        ),
    ]);
    let mut table = Vec::new();
    let mut failures = Vec::new();
    run_variants(&s1, &variants, &mut table, &mut failures).await;
    drop(s1);

    let s2 = key_setup(
        SshdConfig {
            extra: vec![
                format!("HostKey {}", keys.path().join("host_ec2").display()),
                format!(
                    "HostCertificate {}",
                    keys.path().join("host_ec2-cert.pub").display()
                ),
            ],
            ..Default::default()
        },
        UserOptions::default(),
    );
    let n2 = format!("[127.0.0.1]:{}", s2.sshd.port());
    variants = vec![
        v(
            "cert-authority for this host",
            format!("@cert-authority {n2} {ca}\n"),
        ),
        v(
            "cert-authority, wildcard",
            format!("@cert-authority [127.0.0.*]:* {ca}\n"),
        ),
        v(
            "cert-authority revoked",
            format!("@cert-authority {n2} {ca}\n@revoked {n2} {ca}\n"),
        ),
        v(
            "other cert-authority",
            format!("@cert-authority {n2} {other_ca}\n"),
        ),
        v(
            "cert-authority for the bare host name",
            format!("@cert-authority 127.0.0.1 {ca}\n"),
        ),
        v(
            "cert-authority for another host",
            format!("@cert-authority otherhost {ca}\n"),
        ),
        v(
            "port: cert-authority `*`",
            format!("@cert-authority * {ca}\n"),
        ),
        v(
            "port: cert-authority, bare name negated, `*`",
            format!("@cert-authority !127.0.0.1,* {ca}\n"),
        ),
        v(
            "port: cert-authority, [host]:port negated, `*`",
            format!("@cert-authority !{n2},* {ca}\n"),
        ),
        v(
            "port: cert-authority for bare, revoked for bare",
            format!("@cert-authority 127.0.0.1 {ca}\n@revoked 127.0.0.1 {ca}\n"),
        ),
        v(
            "port: cert-authority for [host]:port, revoked for bare",
            format!("@cert-authority {n2} {ca}\n@revoked 127.0.0.1 {ca}\n"),
        ),
        Variant {
            name: "port: hashed cert-authority for the bare name",
            known_hosts: format!("@cert-authority 127.0.0.1 {ca}\n"),
            host: "127.0.0.1",
            hashed: true,
            opts: Vec::new(),
        },
        Variant {
            name: "port: hashed cert-authority for [host]:port",
            known_hosts: format!("@cert-authority {n2} {ca}\n"),
            host: "127.0.0.1",
            hashed: true,
            opts: Vec::new(),
        },
    ];
    run_variants(&s2, &variants, &mut table, &mut failures).await;
    eprintln!(
        "live host-key oracle: {} variants, {} agree\n{}",
        table.len(),
        table.len() - failures.len(),
        table.join("\n")
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
