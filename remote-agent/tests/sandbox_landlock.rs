//! The Landlock fallback, with real bash and the real kernel: when bubblewrap cannot run,
//! `enforce` confines bash with Landlock and the escapes the bubblewrap tests try (writing
//! outside, reading a forbidden path, network when off, a symlink out of the workspace,
//! writing a deny-covered path) fail. One test reproduces a restricted host for real: it
//! runs this binary as a throwaway user inside `bwrap --unshare-user --disable-userns`,
//! where the real bubblewrap fails with ENOSPC as in a container.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::path::{Path, PathBuf};
use std::sync::Arc;

use reasonix_remote::policy::{Mode, Policy};
use reasonix_remote::sandbox::{Sandbox, SandboxConfig, SandboxMode};
use reasonix_remote::tools::{DenyGuard, ToolContext, ToolOutput, ToolRegistry};
use serde_json::json;

/// A directory outside /tmp (Landlock leaves the host's /tmp writable).
fn outside_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/var/tmp").unwrap()
}

fn config(bwrap: &str) -> SandboxConfig {
    SandboxConfig {
        bash: SandboxMode::Enforce,
        network: true,
        allow_write: Vec::new(),
        forbid_read: Vec::new(),
        cache_dirs: Vec::new(),
        bwrap_path: PathBuf::from(bwrap),
        ssh_agent: false,
    }
}

async fn bash(ctx: &ToolContext, cmd: &str) -> ToolOutput {
    ToolRegistry::builtin()
        .get("bash")
        .unwrap()
        .run(json!({"command": cmd}), ctx)
        .await
}

/// Every escape attempt, under a sandbox probed with `bwrap` (which must fail here).
/// Returns the status of the network-off sandbox (for the caller's own checks).
async fn escapes_fail(bwrap: &str) -> String {
    let ws = outside_dir();
    let other = outside_dir();
    let extra = outside_dir();
    let home = outside_dir();
    let ssh = home.path().join(".ssh");
    std::fs::create_dir(&ssh).unwrap();
    std::fs::write(ssh.join("id_ed25519"), "PRIVATE KEY").unwrap();
    std::fs::write(home.path().join("notes.txt"), "readable").unwrap();

    let mut cfg = config(bwrap);
    cfg.allow_write = vec![extra.path().to_path_buf()];
    cfg.forbid_read = vec![ssh.clone()];
    cfg.network = false;
    // The daemon opens sessions with the async probe: it must reach the same verdict.
    let async_sb = Sandbox::probe_async(cfg.clone(), ws.path()).await;
    let sb = Sandbox::probe(cfg, ws.path());
    let status = sb.status();
    assert_eq!(sb.mechanism(), "landlock", "{status}");
    assert_eq!(async_sb.status(), status);
    assert!(sb.is_active());
    let mut c = ToolContext::new(ws.path(), Arc::new(sb));
    let policy = Policy::new(Mode::Yolo, &[], &[], &["Edit(secrets/**)".to_string()])
        .unwrap()
        .with_workspace(ws.path());
    std::fs::create_dir(ws.path().join("secrets")).unwrap();
    std::fs::write(ws.path().join("secrets/key"), "original").unwrap();
    let state = outside_dir();
    c.deny_guard = DenyGuard::new(
        policy.write_deny_rules(),
        state.path().join("denied"),
        vec![state.path().to_path_buf()],
    );
    assert!(c.deny_guard.is_some());

    // Writing outside the writable roots fails; inside and in allow_write works.
    let target = other.path().join("escaped.txt");
    let o = bash(
        &c,
        &format!(
            "echo inside > in.txt && echo ok > {}/allowed.txt && mkdir -p sub/dir && echo x > {}; echo rc=$?",
            extra.path().display(),
            target.display()
        ),
    )
    .await;
    assert!(o.text.contains("Permission denied"), "{}", o.text);
    assert!(o.text.contains("rc=1"), "{}", o.text);
    assert!(
        !target.exists(),
        "write outside the workspace reached the disk"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("in.txt")).unwrap(),
        "inside\n"
    );
    assert!(extra.path().join("allowed.txt").exists());
    assert!(ws.path().join("sub/dir").is_dir());

    // A symlink out of the workspace does not widen anything.
    std::os::unix::fs::symlink(other.path(), ws.path().join("link")).unwrap();
    let o = bash(&c, "echo x > link/via-link.txt; echo rc=$?").await;
    assert!(o.text.contains("Permission denied"), "{}", o.text);
    assert!(!other.path().join("via-link.txt").exists());

    // The forbidden path cannot be read; its neighbours can.
    let o = bash(
        &c,
        &format!(
            "cat {}/id_ed25519; ls {}; cat {}; echo end",
            ssh.display(),
            ssh.display(),
            home.path().join("notes.txt").display()
        ),
    )
    .await;
    assert!(!o.text.contains("PRIVATE KEY"), "{}", o.text);
    assert!(
        !o.text.contains("id_ed25519\n"),
        "listing hidden: {}",
        o.text
    );
    assert!(o.text.contains("readable"), "{}", o.text);
    assert!(o.text.ends_with("end\n"), "{}", o.text);

    // A deny-covered path is read-only under Landlock itself (not only restored afterwards).
    let o = bash(&c, "echo evil > secrets/key; echo rc=$?").await;
    assert!(o.text.contains("Permission denied"), "{}", o.text);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("secrets/key")).unwrap(),
        "original"
    );

    // Network off: a connect to a local listener fails when the ABI can block TCP, and the
    // status says so plainly when it cannot.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let probe = format!(
        "(echo hi > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected || echo refused"
    );
    let o = bash(&c, &probe).await;
    if status.contains("network: TCP blocked") {
        assert_eq!(o.text, "refused\n");
    } else {
        assert!(status.contains("network is NOT restricted"), "{status}");
    }
    // With network on, the same connect works (the check is not vacuous).
    let mut on = config(bwrap);
    on.network = true;
    let c = ToolContext::new(ws.path(), Arc::new(Sandbox::probe(on, ws.path())));
    assert_eq!(bash(&c, &probe).await.text, "connected\n");
    // Unsandboxed, the forbidden file is readable (not vacuous either).
    let plain = ToolContext::new(ws.path(), Arc::new(Sandbox::off(ws.path())));
    let o = bash(&plain, &format!("cat {}/id_ed25519", ssh.display())).await;
    assert_eq!(o.text, "PRIVATE KEY");
    status
}

#[tokio::test]
async fn enforce_falls_back_to_landlock_when_bwrap_is_missing() {
    let status = escapes_fail("/nonexistent/bwrap").await;
    assert!(
        status.starts_with("landlock (ABI "),
        "names the mechanism: {status}"
    );
    assert!(
        status.contains("missing binary"),
        "says which check failed: {status}"
    );
    assert!(
        status.contains("not covered compared with bwrap"),
        "{status}"
    );
}

#[tokio::test]
async fn bwrap_mode_refuses_the_fallback_with_the_reason() {
    let ws = outside_dir();
    let mut cfg = config("/nonexistent/bwrap");
    cfg.bash = SandboxMode::Bwrap;
    let sb = Sandbox::probe(cfg, ws.path());
    assert_eq!(sb.mechanism(), "none");
    let status = sb.status();
    assert!(
        status.starts_with("unavailable (bubblewrap: missing binary"),
        "{status}"
    );
    let err = sb.command("touch ran", ws.path()).expect_err("refused");
    assert!(err.to_string().contains("refusing to run bash"), "{err}");
    assert!(!ws.path().join("ran").exists());
}

/// The restricted-host half: run by [`restricted_host_falls_back_to_landlock`] inside the
/// wrapper, where the real bubblewrap cannot create a user namespace.
#[tokio::test]
#[ignore = "run inside the restricted-host wrapper by restricted_host_falls_back_to_landlock"]
async fn inner_restricted_host() {
    let status = escapes_fail("bwrap").await;
    assert!(status.starts_with("landlock (ABI "), "{status}");
    assert!(
        status.contains("no user namespaces: creating one failed with ENOSPC"),
        "names the failed check: {status}"
    );
    println!("INNER-STATUS: {status}");
}

fn which_bwrap() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("bwrap"))
        .find(|p| p.is_file())
        .expect("bwrap on PATH")
}

#[test]
fn restricted_host_falls_back_to_landlock() {
    const USER: &str = "rxlandlock";
    assert!(
        nix_is_root(),
        "this test creates a throwaway user and needs root (run by .ci/run as root)"
    );
    let exists = std::process::Command::new("id")
        .arg(USER)
        .output()
        .unwrap()
        .status
        .success();
    if !exists {
        let st = std::process::Command::new("useradd")
            .args(["--no-create-home", "--shell", "/bin/sh", USER])
            .status()
            .unwrap();
        assert!(st.success(), "useradd failed");
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("runuser")
        .args(["-u", USER, "--"])
        .arg(which_bwrap())
        .args([
            "--dev-bind",
            "/",
            "/",
            "--unshare-user",
            "--disable-userns",
            "--",
        ])
        .arg(&exe)
        .args([
            "--ignored",
            "--exact",
            "inner_restricted_host",
            "--nocapture",
        ])
        .env("HOME", "/var/tmp")
        .current_dir(Path::new("/var/tmp"))
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "the inner test ran: {text}");
    assert!(text.contains("INNER-STATUS: landlock"), "{text}");
}

fn nix_is_root() -> bool {
    // SAFETY: getuid has no preconditions.
    unsafe { libc::getuid() == 0 }
}
