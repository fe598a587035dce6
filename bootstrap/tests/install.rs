//! Install tests against a real sshd: fresh install, reuse, corrupt binary, concurrency,
//! version pruning, status/stop/uninstall.

#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use reasonix_bootstrap::{
    connect_with_cache, install, launch_command, status, uninstall, CredentialCache, ExitInfo,
    HostKeyAnswer, ShippedBinaries, Stage, Target, UninstallScope,
};
use reasonix_testkit::sshd::{SshdConfig, UserOptions};

/// The static musl build of reasonix-remote (built by the workspace build or by
/// `cargo build -p reasonix-remote --target x86_64-unknown-linux-musl`).
fn real_host_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("target");
    let candidates = [
        root.join("debug/reasonix-remote-x86_64-unknown-linux-musl"),
        root.join("release/reasonix-remote-x86_64-unknown-linux-musl"),
        root.join("x86_64-unknown-linux-musl/debug/reasonix-remote"),
        root.join("x86_64-unknown-linux-musl/release/reasonix-remote"),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "no static reasonix-remote found (looked at {candidates:?}); run \
                 `cargo build -p reasonix-remote --target x86_64-unknown-linux-musl`"
            )
        })
}

/// A synthetic "binary" (install never runs it): fast to upload in tests that are about the
/// install protocol, not the program.
fn fake_binary(dir: &Path, seed: u8, len: usize) -> ShippedBinaries {
    let path = dir.join(format!("fake-{seed}"));
    let mut data = Vec::with_capacity(len);
    let mut x: u32 = 0x9e37_79b9 ^ u32::from(seed);
    for i in 0..len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        // Half random, half repetitive: gzip has something to do.
        data.push(if i % 2 == 0 { x as u8 } else { seed });
    }
    std::fs::write(&path, data).unwrap();
    ShippedBinaries::new().with_file(Target::X86_64Linux, path)
}

fn sha256_hex(path: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

fn bin_dir(s: &KeySetup) -> PathBuf {
    s.user.home.join(".reasonix/remote/bin")
}

async fn conn(s: &KeySetup) -> (reasonix_bootstrap::SshConnection, Arc<ScriptedPrompter>) {
    let p = ScriptedPrompter::new(HostKeyAnswer::Reject);
    let c = guard(connect_with_cache(
        &s.dest(""),
        &s.opts(),
        p.clone(),
        &CredentialCache::new(),
    ))
    .await
    .unwrap();
    (c, p)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_install_of_real_binary_runs_and_is_reused() {
    let s = key_setup(SshdConfig::default(), UserOptions::default());
    let local = real_host_binary();
    let bins = ShippedBinaries::new().with_file(Target::X86_64Linux, &local);
    let (c, p) = conn(&s).await;
    let r = guard(install(&c, "0.1.0-test1", &bins)).await.unwrap();
    assert!(r.uploaded);
    let expected = s
        .user
        .home
        .join(".reasonix/remote/bin/reasonix-remote-0.1.0-test1");
    assert_eq!(PathBuf::from(&r.path), expected);
    assert_eq!(r.sha256, sha256_hex(&local));
    assert_eq!(sha256_hex(&expected), r.sha256);
    assert!(r.probe.gzip && r.probe.sha256_tool.is_some());
    assert!(
        r.bytes_sent > 0 && r.bytes_sent < std::fs::metadata(&local).unwrap().len(),
        "gzip used"
    );
    let meta = std::fs::metadata(&expected).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o755);
    assert_eq!(meta.uid(), s.user.uid);
    for d in [".reasonix", ".reasonix/remote", ".reasonix/remote/bin"] {
        let m = std::fs::metadata(s.user.home.join(d)).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o700, "{d}");
    }
    // Only the binary: no temp files, lock released.
    let names: Vec<String> = std::fs::read_dir(bin_dir(&s))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec!["reasonix-remote-0.1.0-test1"]);
    assert!(!s.user.home.join(".reasonix/remote/install.lock").exists());
    // The host can execute it (static binary, right architecture).
    // (126 = cannot execute, e.g. wrong architecture; 127 = not found; >= 128 = crashed.
    // Any other status means the program ran and chose its exit code.)
    let mut st = guard(c.exec_stream(&launch_command(&r, &["--help"])))
        .await
        .unwrap();
    match guard(st.wait_exit()).await {
        ExitInfo::Status(rc) => assert!(rc < 126, "host could not run the binary: exit {rc}"),
        other => panic!("binary did not run: {other:?}"),
    }
    {
        let seen = p.seen.lock().unwrap();
        let up: Vec<_> = seen
            .progress
            .iter()
            .filter(|(st, _, _)| *st == Stage::Upload)
            .collect();
        assert!(up
            .iter()
            .any(|(_, _, a)| matches!(a, Some((d, t)) if d == t && *t == r.bytes_sent)));
        assert!(seen.progress.iter().any(|(st, _, _)| *st == Stage::Verify));
    }
    // Second install: reused, nothing uploaded, same file.
    let ino = std::fs::metadata(&expected).unwrap().ino();
    let r2 = guard(install(&c, "0.1.0-test1", &bins)).await.unwrap();
    assert!(!r2.uploaded);
    assert_eq!(r2.bytes_sent, 0);
    assert_eq!(std::fs::metadata(&expected).unwrap().ino(), ino);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_or_truncated_binary_at_final_path_is_replaced() {
    let s = key_setup(SshdConfig::default(), UserOptions::default());
    let laptop_bins = tempfile::tempdir().unwrap();
    let bins = fake_binary(laptop_bins.path(), 1, 2 << 20);
    let good = laptop_bins.path().join("fake-1");
    // Pre-place a truncated copy, and a leftover temp file from an "interrupted upload".
    let data = std::fs::read(&good).unwrap();
    let truncated = String::from_utf8_lossy(&data[..1000]).into_owned();
    s.user
        .write_file(".reasonix/remote/bin/reasonix-remote-v1", &truncated, 0o755)
        .unwrap();
    s.user
        .write_file(
            ".reasonix/remote/bin/.reasonix-remote-v1.tmp-0000000000000001",
            "partial",
            0o600,
        )
        .unwrap();
    let (c, _p) = conn(&s).await;
    let r = guard(install(&c, "v1", &bins)).await.unwrap();
    assert!(r.uploaded, "corrupt file must be replaced");
    assert_eq!(sha256_hex(Path::new(&r.path)), sha256_hex(&good));
    let names: Vec<String> = std::fs::read_dir(bin_dir(&s))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec!["reasonix-remote-v1"], "stale temp file removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_installs_upload_once() {
    let s = key_setup(SshdConfig::default(), UserOptions::default());
    let laptop_bins = tempfile::tempdir().unwrap();
    let bins = fake_binary(laptop_bins.path(), 2, 4 << 20);
    let (c1, _) = conn(&s).await;
    let (c2, _) = conn(&s).await;
    let (a, b) =
        guard(async { tokio::join!(install(&c1, "v2", &bins), install(&c2, "v2", &bins)) }).await;
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(
        [a.uploaded, b.uploaded].iter().filter(|u| **u).count(),
        1,
        "exactly one upload: {a:?} {b:?}"
    );
    assert_eq!(a.path, b.path);
    assert_eq!(sha256_hex(Path::new(&a.path)), a.sha256);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keeps_at_most_two_versions() {
    let s = key_setup(SshdConfig::default(), UserOptions::default());
    let laptop_bins = tempfile::tempdir().unwrap();
    let (c, _) = conn(&s).await;
    for (i, id) in ["va", "vb", "vc"].iter().enumerate() {
        let bins = fake_binary(laptop_bins.path(), 10 + i as u8, 64 << 10);
        assert!(guard(install(&c, id, &bins)).await.unwrap().uploaded);
        // Distinct mtimes so "newest" is well defined.
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    }
    let mut names: Vec<String> = std::fs::read_dir(bin_dir(&s))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, vec!["reasonix-remote-vb", "reasonix-remote-vc"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_stop_and_uninstall_leave_nothing() {
    let s = key_setup(SshdConfig::default(), UserOptions::default());
    let before = list_tree(&s.user.home);
    let (c, _) = conn(&s).await;
    // Install /bin/sleep under our name so a "daemon" can run from the install dir.
    let bins = ShippedBinaries::new().with_file(Target::X86_64Linux, "/bin/sleep");
    let r = guard(install(&c, "vsleep", &bins)).await.unwrap();
    let out = guard(c.run_script(&format!(
        "mkdir -p \"$HOME/.reasonix/sessions/abc\" \"$HOME/.reasonix/logs\"; echo j > \"$HOME/.reasonix/sessions/abc/journal\"\n\
         nohup '{}' 300 >/dev/null 2>&1 &\necho started",
        r.path
    )))
    .await
    .unwrap();
    assert_eq!(out.stdout.trim(), "started");
    let st = guard(status(&c)).await.unwrap();
    assert_eq!(st.installed.len(), 1);
    assert_eq!(st.installed[0].build_id, "vsleep");
    assert_eq!(st.processes.len(), 1, "{st:?}");
    assert!(st.processes[0]
        .command
        .contains("reasonix-remote-vsleep 300"));
    assert!(st.disk_used > 0);
    assert_eq!(st.session_dirs, 1);
    let pid = st.processes[0].pid as i32;
    assert!(s.user.pids().contains(&pid));

    let removed = guard(uninstall(&c, UninstallScope::KeepSessions))
        .await
        .unwrap();
    assert!(
        removed.iter().any(|p| p.ends_with("/.reasonix/remote")),
        "{removed:?}"
    );
    assert!(!s.user.home.join(".reasonix/remote").exists());
    assert!(!s.user.home.join(".reasonix/logs").exists());
    assert!(
        s.user.home.join(".reasonix/sessions/abc/journal").exists(),
        "sessions kept"
    );
    // The daemon is gone (give the kernel a moment to reap).
    for _ in 0..50 {
        if !s.user.pids().contains(&pid) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(!s.user.pids().contains(&pid), "daemon still running");

    guard(uninstall(&c, UninstallScope::Everything))
        .await
        .unwrap();
    let after = list_tree(&s.user.home);
    assert_eq!(before, after, "home must look exactly as before");
}

/// Every path under `root` (relative), sorted.
fn list_tree(root: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            out.push(p.strip_prefix(root).unwrap().display().to_string());
            if e.file_type().unwrap().is_dir() {
                walk(root, &p, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}
