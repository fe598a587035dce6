//! `reasonix cp` end to end (issue #36 §3), over a real OpenSSH sshd with
//! `AllowTcpForwarding no` inside a private network namespace, to a real host daemon running
//! as a throwaway user.
//!
//! - A 24 MB file and a tree (nested directories, several MB, an empty file and a sparse
//!   file) cross both ways; in the middle of each copy the SSH connection is blackholed
//!   (iptables in the namespace) until the link is declared dead, then lifted: the link
//!   resumes, the copy finishes byte-exact (SHA-256 of every file compared by the test), no
//!   content byte is sent twice, and the sparse file lands with holes;
//! - a partial file left by an earlier attempt is resumed from (only the rest crosses), and a
//!   partial file with other bytes is started over;
//! - through the real binary: an upload into a path a deny rule covers, through a symlink
//!   that escapes the workspace, into a tree whose host side holds such a symlink, and into
//!   `.git` is refused with a message naming why, and nothing is written.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod reconnect_common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use reasonix_forward::content::sha256_hex;
use reasonix_forward::copy::{Progress, Summary};
use reasonix_forward::policy::SessionPolicy;
use reasonix_local::client::{Client, ClientEvent};
use reasonix_local::copy::{copy_one, Spot};
use reasonix_testkit::netfault::{Fault, FaultGuard, NetNs};
use reconnect_common::*;

const SHORT: (u64, u64) = (HEARTBEAT_MS, DEAD_AFTER_MS);
const GUARD: Duration = Duration::from_secs(120);
const MB: usize = 1024 * 1024;

fn random(n: usize, seed: u64) -> Vec<u8> {
    // xorshift: incompressible enough, and no zero blocks (those would go as holes).
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(n);
    out
}

/// A tree: nested directories with several MB of files, an empty one and a sparse one.
fn make_tree(root: &Path) {
    std::fs::create_dir_all(root.join("a/b/c")).unwrap();
    std::fs::create_dir_all(root.join("empty-dir")).unwrap();
    for (i, rel) in ["one.bin", "a/two.bin", "a/b/three.bin", "a/b/c/four.bin"]
        .iter()
        .enumerate()
    {
        std::fs::write(root.join(rel), random(2 * MB + i * 777, 10 + i as u64)).unwrap();
    }
    std::fs::write(root.join("a/empty.txt"), b"").unwrap();
    std::fs::write(root.join("a/b/note.txt"), b"hello from the laptop\n").unwrap();
    // 16 MB with data only at the start and the end.
    let mut f = std::fs::File::create(root.join("sparse.img")).unwrap();
    use std::io::{Seek, SeekFrom, Write};
    f.write_all(&random(64 * 1024, 99)).unwrap();
    f.seek(SeekFrom::Start(16 * MB as u64 - 4096)).unwrap();
    f.write_all(&random(4096, 98)).unwrap();
}

/// Every regular file below `root`, relative, with its SHA-256.
fn digest(root: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(p.clone());
                out.push((
                    p.strip_prefix(root).unwrap().display().to_string(),
                    "dir".into(),
                ));
            } else if ft.is_file() {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.push((rel, sha256_hex(&std::fs::read(&p).unwrap())));
            }
        }
    }
    out.sort();
    out
}

/// Copy `src` to `dest` through `client`; once `at` bytes are done, blackhole the SSH
/// connection, keep it so past the link's dead time, then lift it. Returns the summary.
async fn copy_through_blackhole(
    ns: &NetNs,
    ssh_port: u16,
    client: &Client,
    src: &str,
    dest: &str,
    at: u64,
) -> Summary {
    let fault: Mutex<Option<FaultGuard<'_>>> = Mutex::new(None);
    let hit = Mutex::new(false);
    let progress = |p: Progress| {
        let mut hit = hit.lock().unwrap();
        if !*hit && p.done >= at && p.done < p.total {
            *hit = true;
            *fault.lock().unwrap() = Some(ns.fault(Fault::Blackhole, ssh_port).expect("blackhole"));
        }
    };
    let (policy, from, to) = (
        SessionPolicy::default(),
        Spot::parse(src),
        Spot::parse(dest),
    );
    let copy = copy_one(client, &policy, &from, &to, true, &progress);
    tokio::pin!(copy);
    // Lift the fault once the link has had time to be declared dead.
    let lifter = async {
        loop {
            let since = fault.lock().unwrap().as_ref().map(|f| f.since());
            if let Some(since) = since {
                let until = since + Duration::from_millis(DEAD_AFTER_MS) + Duration::from_secs(2);
                tokio::time::sleep_until(until.into()).await;
                let f = fault.lock().unwrap().take().unwrap();
                f.lift().expect("lift");
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::pin!(lifter);
    let mut lifted = false;
    let summary = tokio::time::timeout(GUARD, async {
        loop {
            tokio::select! {
                r = &mut copy => break r,
                () = &mut lifter, if !lifted => lifted = true,
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{src} -> {dest} did not finish in time"))
    .unwrap_or_else(|e| panic!("{src} -> {dest}: {e}"));
    assert!(
        *hit.lock().unwrap(),
        "{src} -> {dest}: the blackhole never happened"
    );
    assert!(
        lifted,
        "{src} -> {dest} finished while the link was blackholed"
    );
    summary
}

#[test]
fn a_file_and_a_tree_cross_both_ways_through_a_blackhole_byte_exact() {
    in_netns(|ns| async move {
        let rig = Rig::new(std::sync::Arc::clone(&ns), Vec::new()).await;
        let ssh_port = rig.sshd.port();
        let (client, mut events) = rig.library_client(ssh_port, SHORT);
        let lap = rig.laptop.path().join("files");
        std::fs::create_dir_all(&lap).unwrap();
        let big = random(24 * MB, 7);
        std::fs::write(lap.join("big.bin"), &big).unwrap();
        let want = sha256_hex(&big);

        // Up, with a blackhole after 6 MB.
        let up = copy_through_blackhole(
            &ns,
            ssh_port,
            &client,
            &lap.join("big.bin").display().to_string(),
            ":",
            6 * MB as u64,
        )
        .await;
        let host_big = std::fs::read(rig.host_file("big.bin")).unwrap();
        assert_eq!(
            host_big.len(),
            big.len(),
            "bytes lost or repeated on the way up"
        );
        assert_eq!(sha256_hex(&host_big), want, "the upload is not byte-exact");
        assert_eq!(
            up.progress.sent,
            big.len() as u64,
            "content sent twice: {up:?}"
        );
        assert_eq!(up.dest, rig.host_file("big.bin").display().to_string());

        // Down, with a blackhole after 6 MB.
        let down = lap.join("down");
        std::fs::create_dir_all(&down).unwrap();
        let d = copy_through_blackhole(
            &ns,
            ssh_port,
            &client,
            ":big.bin",
            &format!("{}/", down.display()),
            6 * MB as u64,
        )
        .await;
        assert_eq!(
            sha256_hex(&std::fs::read(down.join("big.bin")).unwrap()),
            want,
            "the download is not byte-exact"
        );
        assert_eq!(
            d.progress.sent,
            big.len() as u64,
            "content sent twice: {d:?}"
        );

        // A tree up (into `:tree`) and back down (into `back`), each through a blackhole.
        let tree = lap.join("tree");
        make_tree(&tree);
        let tree_sum = digest(&tree);
        copy_through_blackhole(
            &ns,
            ssh_port,
            &client,
            &tree.display().to_string(),
            ":",
            3 * MB as u64,
        )
        .await;
        assert_eq!(
            digest(&rig.host_file("tree")),
            tree_sum,
            "the tree upload differs"
        );
        let sparse = std::fs::metadata(rig.host_file("tree/sparse.img")).unwrap();
        assert_eq!(sparse.len(), 16 * MB as u64);
        assert!(
            sparse.blocks() * 512 < 4 * MB as u64,
            "the sparse file landed without holes ({} bytes allocated)",
            sparse.blocks() * 512
        );
        let back = lap.join("back");
        let t = copy_through_blackhole(
            &ns,
            ssh_port,
            &client,
            ":tree",
            &back.display().to_string(),
            3 * MB as u64,
        )
        .await;
        assert_eq!(digest(&back), tree_sum, "the tree download differs");
        assert!(
            t.progress.holes >= 15 * MB as u64,
            "the sparse file's zeros were sent: {t:?}"
        );
        assert!(
            t.progress.sent < 10 * MB as u64,
            "more content crossed than the tree holds: {t:?}"
        );

        // A partial file from an earlier attempt: only the rest crosses.
        let again = lap.join("again");
        std::fs::create_dir_all(&again).unwrap();
        std::fs::write(again.join(".big.bin.reasonix-part"), &big[..10 * MB]).unwrap();
        let quiet = |_| {};
        let r = copy_one(
            &client,
            &SessionPolicy::default(),
            &Spot::parse(":big.bin"),
            &Spot::parse(&again.display().to_string()),
            false,
            &quiet,
        )
        .await
        .expect("resumed download");
        assert_eq!(r.progress.resumed, 10 * MB as u64, "{r:?}");
        assert_eq!(r.progress.sent, 14 * MB as u64, "{r:?}");
        assert_eq!(
            sha256_hex(&std::fs::read(again.join("big.bin")).unwrap()),
            want
        );
        assert!(!again.join(".big.bin.reasonix-part").exists());
        // A partial file with other bytes is started over.
        std::fs::remove_file(again.join("big.bin")).unwrap();
        std::fs::write(again.join(".big.bin.reasonix-part"), random(MB, 5)).unwrap();
        let r = copy_one(
            &client,
            &SessionPolicy::default(),
            &Spot::parse(":big.bin"),
            &Spot::parse(&again.display().to_string()),
            false,
            &quiet,
        )
        .await
        .expect("restarted download");
        assert_eq!(r.progress.resumed, 0, "{r:?}");
        assert_eq!(
            sha256_hex(&std::fs::read(again.join("big.bin")).unwrap()),
            want
        );

        // The workbench's `/upload` (what a pasted path offers) through the same link.
        let notices = Mutex::new(Vec::new());
        let notice = |t: String| notices.lock().unwrap().push(t);
        let arg = format!(
            "{} shots/",
            reasonix_local::copy::quote(&tree.join("a/b/note.txt").display().to_string())
        );
        reasonix_local::copy::workbench(&client, &SessionPolicy::default(), true, &arg, &notice)
            .await;
        let said = notices.lock().unwrap().join("\n");
        assert!(said.contains("/upload: copied 1 file"), "{said}");
        assert_eq!(
            std::fs::read(rig.host_file("shots/note.txt")).unwrap(),
            b"hello from the laptop\n"
        );

        // Every drop was resumed: no fresh link.
        let mut reattached = false;
        while let Ok(ev) = events.try_recv() {
            reattached |= matches!(ev, ClientEvent::Reattached { .. });
        }
        assert!(!reattached, "the link was replaced instead of resumed");
        client.leave().await;
    });
}

/// `reasonix cp --ssh DEST ARGS...` inside the namespace; (success, stderr).
fn cli(rig: &Rig, args: &[&str]) -> (bool, String) {
    let out = rig
        .ns
        .command(env!("CARGO_BIN_EXE_reasonix"))
        .args(["cp", "--ssh", &rig.dest()])
        .args(["-p", &rig.sshd.port().to_string(), "-F", "none"])
        .arg("-i")
        .arg(&rig.key.private)
        .args(["-o", "IdentityAgent=none"])
        .args(args)
        .current_dir(rig.laptop.path())
        .env("HOME", rig.home())
        .env("REASONIX_HOME", rig.rx_home())
        .env(
            "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
            musl_host_binary(),
        )
        .env("REASONIX_IDLE_TIMEOUT_SECS", "120")
        .env_remove("SSH_AUTH_SOCK")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run reasonix cp");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn uploads_follow_the_hosts_confinement_and_deny_rules() {
    in_netns(|ns| async move {
        let rig = Rig::new(ns, Vec::new()).await;
        rig.user
            .write_file(
                "ws/reasonix.toml",
                "[permissions]\ndeny = [\"Edit(secrets/**)\"]\n",
                0o644,
            )
            .unwrap();
        rig.user.write_file("ws/secrets/keep", "", 0o644).unwrap();
        rig.user.write_file("outside/keep", "", 0o644).unwrap();
        let outside = rig.user.home.join("outside");
        std::os::unix::fs::symlink(&outside, rig.host_file("out")).unwrap();
        std::os::unix::fs::symlink(&outside, rig.host_file("tree")).unwrap();
        std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(rig.host_file(""))
            .status()
            .unwrap();
        let lap = rig.laptop.path();
        std::fs::write(lap.join("shot.png"), random(300_000, 3)).unwrap();
        std::fs::create_dir_all(lap.join("tree/sub")).unwrap();
        std::fs::write(lap.join("tree/sub/f.txt"), b"x").unwrap();

        // Allowed: a plain upload into the workspace, then its download.
        let (ok, err) = cli(&rig, &["shot.png", ":shots/"]);
        assert!(ok, "{err}");
        assert!(err.contains("copied 1 file"), "{err}");
        assert_eq!(
            std::fs::read(rig.host_file("shots/shot.png")).unwrap(),
            std::fs::read(lap.join("shot.png")).unwrap()
        );

        let (ok, err) = cli(&rig, &["shot.png", ":secrets/shot.png"]);
        assert!(!ok, "an upload into a denied path was allowed: {err}");
        assert!(err.contains("denied by rule `Edit(secrets/**)`"), "{err}");
        assert!(!rig.host_file("secrets/shot.png").exists());
        assert!(!rig.host_file("secrets/.shot.png.reasonix-part").exists());

        let (ok, err) = cli(&rig, &["shot.png", ":out/shot.png"]);
        assert!(
            !ok,
            "an upload through an escaping symlink was allowed: {err}"
        );
        assert!(err.contains("outside the writable roots"), "{err}");
        assert!(!outside.join("shot.png").exists());

        // The tree's own name on the host is such a symlink: refused before a byte moves.
        let (ok, err) = cli(&rig, &["-r", "tree", ":"]);
        assert!(
            !ok,
            "a tree upload through an escaping symlink was allowed: {err}"
        );
        assert!(err.contains("outside the writable roots"), "{err}");
        assert!(!outside.join("sub").exists());

        let (ok, err) = cli(&rig, &["shot.png", ":.git/hooks/pre-commit"]);
        assert!(!ok, "an upload into .git was allowed: {err}");
        assert!(err.contains("git internals"), "{err}");
        assert!(!rig.host_file(".git/hooks/pre-commit").exists());

        // A directory without -r, and a missing host file, say so.
        let (ok, err) = cli(&rig, &["tree", ":"]);
        assert!(!ok && err.contains("copy it with -r"), "{err}");
        let (ok, err) = cli(&rig, &[":nope.txt", "."]);
        assert!(!ok && err.contains("does not exist on the host"), "{err}");
    });
}
