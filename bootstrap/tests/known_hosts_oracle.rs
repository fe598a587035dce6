//! Oracle: which known_hosts lines name a host, ours against `ssh-keygen -l -F NAME -f FILE`.
//!
//! The files mix plain and hashed (`ssh-keygen -H`) entries, `[host]:port`, `*`/`?`
//! wildcards, `!` negation, `@revoked`, `@cert-authority`, several key types per host,
//! comments, an invalid marker and mixed-case names. For every lookup name the set of
//! matching lines (and their markers) must be the one ssh-keygen reports.
//!
//! A second table is the port class: a host on another port than 22 is looked up as
//! `[host]:port` (`ssh-keygen -F '[host]:2222'`), so plain `host` lines, `h*` wildcards and
//! negations must not name it while `*`, `[host]:*` and `[h*]:22*` do, in plain and hashed
//! files alike, for host keys, `@cert-authority` and `@revoked` lines.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use reasonix_bootstrap::known_hosts::{host_port_name, KnownHosts, Marker};

fn keygen(dir: &Path, name: &str, ty: &str) -> String {
    let path = dir.join(name);
    let mut cmd = Command::new("ssh-keygen");
    cmd.args(["-q", "-t", ty, "-N", "", "-C", "", "-f"])
        .arg(&path);
    if ty == "rsa" {
        cmd.args(["-b", "2048"]);
    }
    assert!(cmd.status().unwrap().success());
    let text = std::fs::read_to_string(path.with_extension("pub")).unwrap();
    let mut parts = text.split_whitespace();
    format!("{} {}", parts.next().unwrap(), parts.next().unwrap())
}

/// `ssh-keygen -F`: `(line, marker)` of every matching line.
fn ssh_keygen_find(file: &Path, name: &str) -> BTreeSet<(usize, String)> {
    let out = Command::new("ssh-keygen")
        .arg("-l")
        .arg("-F")
        .arg(name)
        .arg("-f")
        .arg(file)
        .output()
        .unwrap();
    let mut found = BTreeSet::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // "# Host NAME found: line N [CA|REVOKED]"
        let Some(rest) = line.split(" found: line ").nth(1) else {
            continue;
        };
        let mut it = rest.split_whitespace();
        let n: usize = it.next().unwrap().parse().unwrap();
        let marker = it.next().unwrap_or("").to_string();
        found.insert((n, marker));
    }
    found
}

/// Hashes `plain` with `ssh-keygen -H` into `path` (lines it cannot hash stay as written).
fn hashed_copy(path: &Path, plain: &str) -> String {
    std::fs::write(path, plain).unwrap();
    let st = Command::new("ssh-keygen")
        .arg("-q")
        .arg("-H")
        .arg("-f")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains("|1|"), "{text}");
    text
}

fn ours_find(file: &Path, name: &str) -> BTreeSet<(usize, String)> {
    let kh = KnownHosts::load(&[file.to_path_buf()]);
    kh.matching(name)
        .map(|e| {
            let m = match e.marker {
                Marker::None => "",
                Marker::CertAuthority => "CA",
                Marker::Revoked => "REVOKED",
            };
            (e.line, m.to_string())
        })
        .collect()
}

#[test]
fn matching_lines_equal_ssh_keygen_find() {
    let dir = tempfile::tempdir().unwrap();
    let a = keygen(dir.path(), "a", "ed25519");
    let b = keygen(dir.path(), "b", "ed25519");
    let c = keygen(dir.path(), "c", "ed25519");
    let e = keygen(dir.path(), "e", "ecdsa");
    let r = keygen(dir.path(), "r", "rsa");
    let plain = format!(
        "# known hosts with every feature\n\
         box,10.0.0.1 {a}\n\
         [box]:2222 {b}\n\
         *.corp,!evil.corp {a}\n\
         Mixed.Case.Host {e}\n\
         h?st {r}\n\
         @revoked evil.corp {a}\n\
         @revoked * {c}\n\
         @cert-authority *.corp {b}\n\
         [*.wild]:* {c}\n\
         \t  indented {a}\n\
         box {e}\n\
         !neg,neg* {a}\n\
         @bogus box {a}\n\
         [127.0.0.1]:2200 {a}\n\
         box {r} trailing comment\n\
         UPPER {a}\n\
         [Mixed.Port]:2222,other {b}\n\
         \n\
         # the end\n"
    );
    let plain_path = dir.path().join("plain");
    std::fs::write(&plain_path, &plain).unwrap();
    let hashed_path = dir.path().join("hashed");
    // ssh-keygen -H refuses a file with an invalid line: hash without it, append it after.
    let mut hashed_text = hashed_copy(
        &hashed_path,
        &plain.replace(&format!("@bogus box {a}\n"), ""),
    );
    hashed_text.push_str(&format!("@bogus box {a}\n"));
    std::fs::write(&hashed_path, &hashed_text).unwrap();

    let hosts = [
        "box",
        "BOX",
        "10.0.0.1",
        "a.corp",
        "evil.corp",
        "x.corp",
        "EVIL.CORP",
        "mixed.case.host",
        "Mixed.Case.Host",
        "host",
        "hast",
        "hoost",
        "indented",
        "neg",
        "negative",
        "a.wild",
        "127.0.0.1",
        "upper",
        "UPPER",
        "mixed.port",
        "other",
        "nothing",
    ];
    let ports = [22u16, 2222, 2200];
    let mut failures = Vec::new();
    let mut total = 0;
    for file in [&plain_path, &hashed_path] {
        for h in hosts {
            for p in ports {
                let name = host_port_name(h, p);
                let theirs = ssh_keygen_find(file, &name);
                let mine = ours_find(file, &name);
                total += 1;
                if theirs != mine {
                    failures.push(format!(
                        "{}: lookup {name:?}: ssh-keygen {theirs:?} ours {mine:?}",
                        file.display()
                    ));
                }
            }
        }
    }
    eprintln!(
        "known_hosts oracle: {total} lookups, {} agree, {} differ",
        total - failures.len(),
        failures.len()
    );
    assert!(total >= 50);
    assert!(
        failures.is_empty(),
        "{}\n--- plain file ---\n{plain}\n--- hashed file ---\n{hashed_text}",
        failures.join("\n")
    );
}

#[test]
fn port_lookups_equal_ssh_keygen_find() {
    let dir = tempfile::tempdir().unwrap();
    let a = keygen(dir.path(), "a", "ed25519");
    let b = keygen(dir.path(), "b", "ed25519");
    let c = keygen(dir.path(), "c", "ecdsa");
    let plain = format!(
        "host {a}\n\
         * {b}\n\
         h* {c}\n\
         [host]:* {a}\n\
         [host]:2222 {b}\n\
         !host,* {c}\n\
         ![host]:2222,* {a}\n\
         [h*]:22* {b}\n\
         host,[host]:2200 {c}\n\
         @cert-authority host {a}\n\
         @cert-authority * {b}\n\
         @cert-authority [host]:2222 {c}\n\
         @cert-authority !host,[host]:* {a}\n\
         @revoked host {b}\n\
         @revoked [host]:* {c}\n\
         127.0.0.* {a}\n\
         [127.0.0.1]:2222 {b}\n\
         !127.0.0.1,[127.0.0.*]:* {c}\n\
         !*.corp,[*.corp]:2222 {a}\n\
         Host.Corp {b}\n"
    );
    let plain_path = dir.path().join("plain");
    std::fs::write(&plain_path, &plain).unwrap();
    let hashed_path = dir.path().join("hashed");
    let hashed_text = hashed_copy(&hashed_path, &plain);

    let hosts = [
        "host",
        "HOST",
        "hostx",
        "other",
        "127.0.0.1",
        "127.0.0.2",
        "host.corp",
    ];
    let ports = [22u16, 2222, 2200, 22222, 2022];
    let mut failures = Vec::new();
    let mut total = 0;
    let mut port_names_with_bare_line = 0;
    for file in [&plain_path, &hashed_path] {
        for h in hosts {
            for p in ports {
                let name = host_port_name(h, p);
                let theirs = ssh_keygen_find(file, &name);
                let mine = ours_find(file, &name);
                total += 1;
                // Line 1 (`host`) must never name `[host]:port`: ssh-keygen is the proof.
                if p != 22
                    && h.eq_ignore_ascii_case("host")
                    && !theirs.contains(&(1, String::new()))
                {
                    port_names_with_bare_line += 1;
                }
                if theirs != mine {
                    failures.push(format!(
                        "{}: lookup {name:?}: ssh-keygen {theirs:?} ours {mine:?}",
                        file.display()
                    ));
                }
            }
        }
    }
    eprintln!(
        "known_hosts port oracle: {total} lookups, {} agree, {} differ",
        total - failures.len(),
        failures.len()
    );
    assert_eq!(
        port_names_with_bare_line,
        2 * 2 * (ports.len() - 1),
        "a plain `host` line named `[host]:port` for ssh-keygen"
    );
    assert!(total >= 70);
    assert!(
        failures.is_empty(),
        "{}\n--- plain file ---\n{plain}\n--- hashed file ---\n{hashed_text}",
        failures.join("\n")
    );
}
