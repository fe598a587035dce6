//! Install tests against a real sshd: fresh install, reuse, corrupt binary, concurrency,
//! version pruning, status/stop/uninstall; upload codecs by what the host has, delta
//! upgrades (applied, and falling back when damaged), aarch64 hosts.

#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use reasonix_bootstrap::{
    connect_with_cache, install, launch_command, status, uninstall, Codec, CredentialCache,
    ExitInfo, HostKeyAnswer, ShippedBinaries, Stage, Target, Transfer, UninstallScope,
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

    let done = guard(uninstall(&c, UninstallScope::KeepSessions))
        .await
        .unwrap();
    assert!(
        done.kept.iter().any(|p| p.ends_with("/.reasonix/sessions")),
        "{done:?}"
    );
    let removed = done.removed;
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

// ---- codecs, deltas, architectures (issue 17) ----

/// An sshd that lets each test user set its own PATH (`~/.ssh/environment`), so a test can
/// hide tools from the host or put shims in front of them.
fn env_sshd() -> SshdConfig {
    SshdConfig {
        extra: vec!["PermitUserEnvironment yes".into()],
        ..SshdConfig::default()
    }
}

/// A directory in the test user's home holding a symlink to every program of the system's
/// bin directories except those named in `hide`, plus the given shell-script `shims`; the
/// user's PATH becomes that directory alone (so `command -v` cannot find what is hidden).
fn host_path(s: &KeySetup, hide: &[&str], shims: &[(&str, &str)]) {
    let dir = s.user.home.join("hostbin");
    std::fs::create_dir_all(&dir).unwrap();
    for sys in ["/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"] {
        let Ok(rd) = std::fs::read_dir(sys) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().into_string().unwrap();
            let link = dir.join(&name);
            if hide.contains(&name.as_str()) || link.symlink_metadata().is_ok() {
                continue;
            }
            std::os::unix::fs::symlink(e.path(), &link).unwrap();
        }
    }
    for (name, body) in shims {
        let p = dir.join(name);
        let _ = std::fs::remove_file(&p);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::os::unix::fs::lchown(&dir, Some(s.user.uid), Some(s.user.gid)).unwrap();
    s.user
        .write_file(
            ".ssh/environment",
            &format!("PATH={}\n", dir.display()),
            0o600,
        )
        .unwrap();
}

const NO_XZ_ZSTD: &[&str] = &[
    "xz", "unxz", "xzcat", "lzma", "unlzma", "lzcat", "zstd", "unzstd", "zstdcat", "zstdmt",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codec_is_the_best_the_host_has() {
    let laptop_bins = tempfile::tempdir().unwrap();
    let bins = fake_binary(laptop_bins.path(), 3, 1 << 20);
    let local = laptop_bins.path().join("fake-3");
    let raw = std::fs::metadata(&local).unwrap().len();

    // This machine has xz and zstd (CI installs both): xz wins.
    let s = key_setup(env_sshd(), UserOptions::default());
    host_path(&s, &[], &[]);
    let (c, p) = conn(&s).await;
    let r = guard(install(&c, "vcodec", &bins)).await.unwrap();
    assert!(r.probe.xz && r.probe.zstd && r.probe.gzip, "{:?}", r.probe);
    assert_eq!(r.transfer, Transfer::Full { codec: Codec::Xz });
    assert_eq!(sha256_hex(Path::new(&r.path)), sha256_hex(&local));
    let xz_sent = r.bytes_sent;
    assert!(xz_sent < raw, "{xz_sent} of {raw}");
    assert!(p
        .seen
        .lock()
        .unwrap()
        .progress
        .iter()
        .any(|(_, d, _)| d.contains(", xz)")));

    // No xz and no zstd on the host's PATH: gzip, still verified.
    let s = key_setup(env_sshd(), UserOptions::default());
    host_path(&s, NO_XZ_ZSTD, &[]);
    let (c, _) = conn(&s).await;
    let r = guard(install(&c, "vcodec", &bins)).await.unwrap();
    assert!(
        !r.probe.xz && !r.probe.zstd && r.probe.gzip,
        "{:?}",
        r.probe
    );
    assert_eq!(r.transfer, Transfer::Full { codec: Codec::Gzip });
    assert_eq!(sha256_hex(Path::new(&r.path)), sha256_hex(&local));
    assert!(
        r.bytes_sent > xz_sent,
        "gzip {} vs xz {xz_sent}",
        r.bytes_sent
    );

    // Not even gzip: the plain binary.
    let s = key_setup(env_sshd(), UserOptions::default());
    let mut hide = NO_XZ_ZSTD.to_vec();
    hide.extend(["gzip", "gunzip", "zcat"]);
    host_path(&s, &hide, &[]);
    let (c, _) = conn(&s).await;
    let r = guard(install(&c, "vcodec", &bins)).await.unwrap();
    assert!(!r.probe.gzip);
    assert_eq!(r.transfer, Transfer::Full { codec: Codec::Raw });
    assert_eq!(r.bytes_sent, raw);
    assert_eq!(sha256_hex(Path::new(&r.path)), sha256_hex(&local));

    // A host whose xz is broken: the upload does not verify, the next codec is used.
    let s = key_setup(env_sshd(), UserOptions::default());
    host_path(&s, &["xz"], &[("xz", "echo broken xz >&2; exit 1")]);
    let (c, _) = conn(&s).await;
    let r = guard(install(&c, "vcodec", &bins)).await.unwrap();
    assert_eq!(r.transfer, Transfer::Full { codec: Codec::Zstd });
    assert_eq!(sha256_hex(Path::new(&r.path)), sha256_hex(&local));
    let names: Vec<String> = std::fs::read_dir(bin_dir(&s))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec!["reasonix-remote-vcodec"], "no temp files left");
}

/// A "next build": the real host binary with a changed string and a few inserted bytes, as
/// a small code change would give.
fn next_build(dir: &Path, base: &Path) -> PathBuf {
    let mut data = std::fs::read(base).unwrap();
    let at = data.len() / 3;
    data[at..at + 16].copy_from_slice(b"changed-for-test");
    let at = data.len() / 2;
    data.splice(at..at, b"some inserted bytes".iter().copied());
    let p = dir.join("next-build");
    std::fs::write(&p, data).unwrap();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_sends_a_delta_that_the_previous_build_applies() {
    let s = key_setup(SshdConfig::default(), UserOptions::default());
    let laptop = tempfile::tempdir().unwrap();
    let cache = laptop.path().join("cache");
    let v1 = real_host_binary();
    let v2 = next_build(laptop.path(), &v1);
    let (c, _) = conn(&s).await;
    let b1 = ShippedBinaries::new()
        .with_file(Target::X86_64Linux, &v1)
        .with_cache_dir(&cache);
    let r1 = guard(install(&c, "0.1.0-old", &b1)).await.unwrap();
    assert!(matches!(r1.transfer, Transfer::Full { .. }));
    // The laptop kept the installed build for the next upgrade.
    assert!(cache.join(format!("bin-{}", r1.sha256)).is_file());

    let b2 = ShippedBinaries::new()
        .with_file(Target::X86_64Linux, &v2)
        .with_cache_dir(&cache);
    let r2 = guard(install(&c, "0.1.0-new", &b2)).await.unwrap();
    let Transfer::Delta {
        base, full_size, ..
    } = &r2.transfer
    else {
        panic!("expected a delta: {r2:?}");
    };
    assert_eq!(base, "0.1.0-old");
    assert!(
        r2.bytes_sent * 5 < *full_size,
        "delta {} vs full {full_size}",
        r2.bytes_sent
    );
    // Verified on the host and identical to the laptop's new build.
    assert_eq!(r2.sha256, sha256_hex(&v2));
    assert_eq!(sha256_hex(Path::new(&r2.path)), r2.sha256);
    let mode = std::fs::metadata(&r2.path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o755);
    let mut names: Vec<String> = std::fs::read_dir(bin_dir(&s))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec!["reasonix-remote-0.1.0-new", "reasonix-remote-0.1.0-old"]
    );
    assert!(!s.user.home.join(".reasonix/remote/install.lock").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_delta_or_old_base_falls_back_to_a_full_upload() {
    let s = key_setup(env_sshd(), UserOptions::default());
    // The host's decompressor damages every delta on the way to the base binary, and only
    // deltas: `tr` adds one to every byte (flipping only some byte values left a delta that
    // happened not to contain them intact).
    let dec = |tool: &str| {
        format!(
            "case \"$*\" in *.delta*) /usr/bin/{tool} \"$@\" | tr '\\000-\\377' '\\001-\\377\\000';; *) exec /usr/bin/{tool} \"$@\";; esac"
        )
    };
    let (xz, zstd) = (dec("xz"), dec("zstd"));
    host_path(&s, &["xz", "zstd"], &[("xz", &xz), ("zstd", &zstd)]);
    let laptop = tempfile::tempdir().unwrap();
    let cache = laptop.path().join("cache");
    let v1 = real_host_binary();
    let v2 = next_build(laptop.path(), &v1);
    let (c, _) = conn(&s).await;
    let bins = |p: &Path| {
        ShippedBinaries::new()
            .with_file(Target::X86_64Linux, p)
            .with_cache_dir(&cache)
    };
    guard(install(&c, "v-old", &bins(&v1))).await.unwrap();
    let r = guard(install(&c, "v-new", &bins(&v2))).await.unwrap();
    assert!(
        matches!(r.transfer, Transfer::Full { .. }),
        "the damaged delta must not be installed: {r:?}"
    );
    assert_eq!(sha256_hex(Path::new(&r.path)), sha256_hex(&v2));
    // The delta that failed is not kept for another try.
    let deltas = std::fs::read_dir(&cache)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("delta-")
        })
        .count();
    assert_eq!(deltas, 0);
    let names: Vec<String> = std::fs::read_dir(bin_dir(&s))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(names.is_empty(), "temp files left: {names:?}");

    // A base that cannot apply deltas (an older build; here a program that ignores the
    // `capabilities` question) gets the whole binary, without a delta attempt.
    let s = key_setup(SshdConfig::default(), UserOptions::default());
    let (c, _) = conn(&s).await;
    let old = ShippedBinaries::new()
        .with_file(Target::X86_64Linux, "/bin/true")
        .with_cache_dir(&cache);
    guard(install(&c, "v-true", &old)).await.unwrap();
    let r = guard(install(&c, "v-new", &bins(&v2))).await.unwrap();
    assert!(matches!(r.transfer, Transfer::Full { .. }), "{r:?}");
    assert_eq!(sha256_hex(Path::new(&r.path)), sha256_hex(&v2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aarch64_host_gets_the_aarch64_binary() {
    let Some(arm) = reasonix_testkit::host_binaries::aarch64_host_binary() else {
        return;
    };
    // The binary really is a static aarch64 program that prints its build id.
    let head = std::fs::read(&arm).unwrap();
    assert_eq!(&head[..4], b"\x7fELF");
    assert_eq!(u16::from_le_bytes([head[18], head[19]]), 0xb7, "EM_AARCH64");
    let out = std::process::Command::new("qemu-aarch64-static")
        .arg(&arm)
        .arg("--version")
        .output()
        .expect("qemu-aarch64-static (Debian qemu-user-static)");
    let version = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        version.starts_with("reasonix-remote ") && version.trim().len() > 20,
        "{version:?} {:?}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A host whose `uname -m` says aarch64 (the shim in front of the real uname).
    let s = key_setup(env_sshd(), UserOptions::default());
    host_path(
        &s,
        &["uname"],
        &[("uname", "/bin/uname \"$@\" | sed 's/x86_64/aarch64/g'")],
    );
    let laptop_bins = tempfile::tempdir().unwrap();
    let x86 = laptop_bins.path().join("x86");
    std::fs::write(&x86, b"not this one").unwrap();
    let bins = ShippedBinaries::new()
        .with_file(Target::X86_64Linux, &x86)
        .with_file(Target::Aarch64Linux, &arm);
    let (c, _) = conn(&s).await;
    let r = guard(install(&c, "0.1.0-arm", &bins)).await.unwrap();
    assert_eq!(r.probe.target, Target::Aarch64Linux);
    assert_eq!(r.probe.arch, "aarch64");
    assert!(r.uploaded);
    assert_eq!(r.sha256, sha256_hex(&arm));
    assert_eq!(sha256_hex(Path::new(&r.path)), r.sha256);

    // Run it on the host where the kernel can (binfmt_misc with qemu-aarch64 registered,
    // as `.ci/run` does when it can); otherwise upload and verification are what is shown.
    if Path::new("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists() {
        let mut st = guard(c.exec_stream(&launch_command(&r, &["--version"])))
            .await
            .unwrap();
        let mut text = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut st.reader, &mut text)
            .await
            .unwrap();
        assert_eq!(text.trim(), version.trim());
    } else {
        eprintln!(
            "*** binfmt_misc has no qemu-aarch64 entry: the aarch64 binary was uploaded and \
             verified on the host but not run there ***"
        );
    }

    // Any other architecture: the error names it.
    let s = key_setup(env_sshd(), UserOptions::default());
    host_path(
        &s,
        &["uname"],
        &[("uname", "/bin/uname \"$@\" | sed 's/x86_64/riscv64/g'")],
    );
    let (c, _) = conn(&s).await;
    let e = guard(install(&c, "0.1.0-arm", &bins)).await.unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("riscv64") && msg.contains("Linux"), "{msg}");
}

/// The install as `reasonix ssh` runs it (docs/REMOTE.md, "Bootstrap"): the attach script
/// that finds the build missing takes the lock; the finishing script runs at the head of the
/// next attach, which then execs the installed program. On a host whose `xz` is broken the
/// first upload does not verify there: that attach releases the lock and takes it again,
/// the next codec goes up, and its attach links. Nothing temporary is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_finishing_script_runs_in_the_attach_and_a_failed_codec_is_retried_there() {
    use reasonix_bootstrap::attach::{attach, AttachOutcome, AttachSpec, OtherBuild};
    use tokio::io::AsyncReadExt;
    let s = key_setup(env_sshd(), UserOptions::default());
    host_path(&s, &["xz"], &[("xz", "echo broken xz >&2; exit 1")]);
    let laptop = tempfile::tempdir().unwrap();
    // A stand-in for the bridge: prints a link preamble and its first argument.
    let fake = laptop.path().join("fake-bridge");
    let mut body = String::from("#!/bin/sh\nprintf 'REASONIX-LINK/1 fake %s\\n' \"$1\"\n");
    // Large enough that the codecs differ from the plain file.
    body.push_str(&format!("# {}\n", "padding ".repeat(4096)));
    std::fs::write(&fake, body).unwrap();
    let bins = ShippedBinaries::new().with_file(Target::X86_64Linux, &fake);
    let spec = AttachSpec {
        build_id: "vfold".into(),
        workspace: "ws".into(),
        daemon_args: vec![],
        hello: b"hello".to_vec(),
        other_build: OtherBuild::Ask,
        mkdir: false,
    };
    let (c, _) = conn(&s).await;
    let lock = s.user.home.join(".reasonix/remote/install.lock");
    let AttachOutcome::Missing(probe) = guard(attach(&c, &spec)).await.unwrap() else {
        panic!("the build is not installed yet");
    };
    assert!(lock.is_dir(), "the missing block took the install lock");
    let (r, outcome) = guard(reasonix_bootstrap::install_and_attach(
        &c, "vfold", &bins, probe, &spec, None,
    ))
    .await
    .unwrap();
    assert_eq!(r.transfer, Transfer::Full { codec: Codec::Zstd });
    assert_eq!(sha256_hex(Path::new(&r.path)), sha256_hex(&fake));
    let AttachOutcome::Linked(mut linked) = outcome else {
        panic!("the attach after the install did not link: {outcome:?}");
    };
    let mut line = vec![0u8; 64];
    let n = guard(linked.reader.read(&mut line)).await.unwrap();
    assert!(
        String::from_utf8_lossy(&line[..n]).starts_with("REASONIX-LINK/1 fake attach"),
        "{:?}",
        String::from_utf8_lossy(&line[..n])
    );
    assert!(!lock.exists(), "the finishing script released the lock");
    let names: Vec<String> = std::fs::read_dir(bin_dir(&s))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec!["reasonix-remote-vfold"], "no temp files left");
}
