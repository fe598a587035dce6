//! The bash sandbox with the real /usr/bin/bwrap: confinement of writes, masked secrets,
//! network off, protected .git, and refusal when bwrap is unavailable.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::path::{Path, PathBuf};
use std::sync::Arc;

use reasonix_remote::sandbox::{Sandbox, SandboxConfig, SandboxMode};
use reasonix_remote::tools::{ToolContext, ToolOutput, ToolRegistry};
use serde_json::json;

fn config() -> SandboxConfig {
    SandboxConfig {
        bash: SandboxMode::Enforce,
        network: true,
        allow_write: Vec::new(),
        forbid_read: Vec::new(),
        cache_dirs: Vec::new(),
        bwrap_path: PathBuf::from("bwrap"),
        ssh_agent: false,
    }
}

fn enforced(ws: &Path, cfg: SandboxConfig) -> ToolContext {
    let sb = Sandbox::probe(cfg, ws);
    assert_eq!(sb.status(), "bwrap", "bwrap must work on this machine");
    ToolContext::new(ws, Arc::new(sb))
}

async fn bash(ctx: &ToolContext, cmd: &str) -> ToolOutput {
    ToolRegistry::builtin()
        .get("bash")
        .unwrap()
        .run(json!({"command": cmd}), ctx)
        .await
}

/// A directory outside /tmp (the sandbox has a private /tmp, which would hide the effect).
fn outside_dir() -> tempfile::TempDir {
    let base = env!("CARGO_TARGET_TMPDIR");
    let base = if base.starts_with("/tmp") {
        "/var/tmp"
    } else {
        base
    };
    tempfile::tempdir_in(base).unwrap()
}

#[tokio::test]
async fn writes_land_only_in_writable_roots() {
    let ws = outside_dir();
    let other = outside_dir();
    let extra = outside_dir();
    let mut cfg = config();
    cfg.allow_write = vec![extra.path().to_path_buf()];
    let c = enforced(ws.path(), cfg);
    let target = other.path().join("escaped.txt");
    let o = bash(
        &c,
        &format!(
            "echo inside > in.txt && echo x > {} ; echo rc=$?",
            target.display()
        ),
    )
    .await;
    assert!(o.text.contains("Read-only file system"), "{}", o.text);
    assert!(o.text.contains("rc=1"), "{}", o.text);
    assert!(
        !target.exists(),
        "write outside the workspace reached the disk"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("in.txt")).unwrap(),
        "inside\n"
    );
    let o = bash(
        &c,
        &format!("echo ok > {}/allowed.txt", extra.path().display()),
    )
    .await;
    assert!(!o.is_error, "{}", o.text);
    assert!(extra.path().join("allowed.txt").exists());
    // /tmp is private: a file written there is gone afterwards.
    let marker = format!("/tmp/reasonix-sandbox-test-{}", std::process::id());
    let o = bash(&c, &format!("echo t > {marker} && cat {marker}")).await;
    assert_eq!(o.text, "t\n");
    assert!(!Path::new(&marker).exists());
}

#[tokio::test]
async fn forbidden_paths_read_empty() {
    let ws = outside_dir();
    let home = outside_dir();
    let ssh = home.path().join(".ssh");
    std::fs::create_dir(&ssh).unwrap();
    std::fs::write(ssh.join("id_ed25519"), "PRIVATE KEY").unwrap();
    let env_file = home.path().join(".reasonix").join(".env");
    std::fs::create_dir_all(env_file.parent().unwrap()).unwrap();
    std::fs::write(&env_file, "DEEPSEEK_API_KEY=secret").unwrap();
    let mut cfg = SandboxConfig::defaults_for_home(Some(home.path()));
    cfg.cache_dirs.clear();
    assert!(cfg.forbid_read.contains(&ssh), "defaults hide ~/.ssh");
    let c = enforced(ws.path(), cfg);
    let o = bash(
        &c,
        &format!(
            "ls -A {}; cat {}/id_ed25519; cat {}; echo end",
            ssh.display(),
            ssh.display(),
            env_file.display()
        ),
    )
    .await;
    assert!(!o.text.contains("PRIVATE KEY"), "{}", o.text);
    assert!(!o.text.contains("secret"), "{}", o.text);
    assert!(
        o.text.contains("No such file"),
        "the key file is hidden: {}",
        o.text
    );
    assert!(o.text.ends_with("end\n"), "{}", o.text);
    // Unsandboxed, the same command sees them (the test is not vacuous).
    let plain = ToolContext::new(ws.path(), Arc::new(Sandbox::off(ws.path())));
    let o = bash(&plain, &format!("cat {}/id_ed25519", ssh.display())).await;
    assert_eq!(o.text, "PRIVATE KEY");
}

#[tokio::test]
async fn network_off_blocks_loopback_connect() {
    let ws = outside_dir();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let probe = format!(
        "(echo hi > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected || echo refused"
    );
    let mut cfg = config();
    cfg.network = false;
    let c = enforced(ws.path(), cfg);
    assert_eq!(bash(&c, &probe).await.text, "refused\n");
    let c = enforced(ws.path(), config());
    assert_eq!(
        bash(&c, &probe).await.text,
        "connected\n",
        "with network on the same connect works"
    );
}

#[tokio::test]
async fn git_internals_cannot_be_rewritten() {
    let ws = outside_dir();
    assert!(std::process::Command::new("git")
        .args(["init", "-q"])
        .arg(ws.path())
        .status()
        .unwrap()
        .success());
    let head_before = std::fs::read_to_string(ws.path().join(".git/HEAD")).unwrap();
    let c = enforced(ws.path(), config());
    let o = bash(
        &c,
        "echo 'ref: refs/heads/evil' > .git/HEAD; rm -rf .git/hooks; touch .git/new; echo done",
    )
    .await;
    assert!(o.text.contains("Read-only file system"), "{}", o.text);
    assert_eq!(
        std::fs::read_to_string(ws.path().join(".git/HEAD")).unwrap(),
        head_before
    );
    assert!(ws.path().join(".git/hooks").exists());
    assert!(!ws.path().join(".git/new").exists());
    // Ordinary files next to .git are writable.
    let o = bash(&c, "echo ok > file.txt && cat file.txt").await;
    assert_eq!(o.text, "ok\n");
}

#[tokio::test]
async fn enforce_without_bwrap_refuses_and_runs_nothing() {
    let ws = outside_dir();
    let mut cfg = config();
    // `bwrap` insists on bubblewrap (`enforce` would fall back to Landlock: sandbox_landlock.rs).
    cfg.bash = SandboxMode::Bwrap;
    cfg.bwrap_path = PathBuf::from("/nonexistent/bwrap");
    let sb = Sandbox::probe(cfg.clone(), ws.path());
    assert_eq!(
        sb.status(),
        "unavailable (bubblewrap: missing binary: bubblewrap is not installed (install the `bubblewrap` package); \
         /nonexistent/bwrap not found (`bash = \"bwrap\"` does not accept the Landlock fallback))"
    );
    let err = sb.command("true", ws.path()).expect_err("refused");
    let text = err.to_string();
    assert!(text.contains("refusing to run bash"), "{text}");
    assert!(
        text.contains("/nonexistent/bwrap not found"),
        "says why: {text}"
    );
    assert!(
        text.contains("bash = \"off\""),
        "says how to opt out: {text}"
    );
    let c = ToolContext::new(ws.path(), Arc::new(sb));
    let o = bash(&c, "touch ran.txt").await;
    assert!(o.is_error);
    assert_eq!(o.text, text);
    assert!(!ws.path().join("ran.txt").exists(), "nothing ran");
    // A program that exists but is not a working bwrap fails the probe the same way.
    cfg.bwrap_path = PathBuf::from("/bin/false");
    let sb = Sandbox::probe(cfg.clone(), ws.path());
    assert!(
        sb.status()
            .starts_with("unavailable (bubblewrap: the probe failed for a reason not recognised; probe `/bin/false"),
        "{}",
        sb.status()
    );
    // Off is an explicit choice and runs unconfined.
    cfg.bash = SandboxMode::Off;
    assert_eq!(Sandbox::probe(cfg, ws.path()).status(), "off");
}

#[tokio::test]
async fn sandboxed_timeout_kills_everything() {
    let ws = outside_dir();
    let mut c = enforced(ws.path(), config());
    c.bash_timeout = std::time::Duration::from_secs(1);
    let o = bash(&c, "sleep 300 & echo started; wait").await;
    assert!(o.is_error);
    assert!(
        o.text.starts_with("started\n[timed out after 1 s"),
        "{}",
        o.text
    );
    // No `sleep 300` is left anywhere on the host.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let left = std::process::Command::new("pgrep")
        .args(["-f", "^sleep 300$"])
        .output()
        .unwrap();
    let pids = String::from_utf8_lossy(&left.stdout).to_string();
    // Other tests run `sleep 300` unsandboxed concurrently; only fail when a sleep whose
    // parent chain includes bwrap survives.
    for pid in pids.lines() {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let ppid: i32 = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let parent = std::fs::read_to_string(format!("/proc/{ppid}/comm")).unwrap_or_default();
        assert!(
            !parent.starts_with("bwrap"),
            "sandboxed sleep {pid} survived"
        );
    }
}

/// Every session open builds its sandbox again: a probe that passed is not run again in
/// the same process (no process, no blocked runtime worker per open), a failed one is.
#[tokio::test]
async fn a_passed_probe_is_not_run_again_and_a_failed_one_is() {
    use std::os::unix::fs::PermissionsExt;
    let ws = outside_dir();
    let dir = tempfile::tempdir().unwrap();
    let calls = dir.path().join("calls");
    let fail = dir.path().join("fail");
    let wrapper = dir.path().join("bwrap");
    let real = which_bwrap();
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho x >> '{}'\n[ -e '{}' ] && exit 1\nexec '{}' \"$@\"\n",
            calls.display(),
            fail.display(),
            real.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let count = || {
        std::fs::read_to_string(&calls)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    let mut cfg = config();
    cfg.bash = SandboxMode::Bwrap;
    cfg.bwrap_path = wrapper.clone();
    // Failing first: not remembered, so the next probe runs the program again.
    std::fs::write(&fail, "").unwrap();
    assert!(Sandbox::probe(cfg.clone(), ws.path())
        .status()
        .starts_with("unavailable"));
    assert!(Sandbox::probe_async(cfg.clone(), ws.path())
        .await
        .status()
        .starts_with("unavailable"));
    assert_eq!(count(), 2);
    // Fixed: one more probe passes, and later ones (either kind) run nothing.
    std::fs::remove_file(&fail).unwrap();
    assert_eq!(Sandbox::probe(cfg.clone(), ws.path()).status(), "bwrap");
    assert_eq!(count(), 3);
    assert_eq!(Sandbox::probe(cfg.clone(), ws.path()).status(), "bwrap");
    assert_eq!(
        Sandbox::probe_async(cfg.clone(), ws.path()).await.status(),
        "bwrap"
    );
    assert_eq!(count(), 3);
    // The network flag is part of what was probed.
    cfg.network = !cfg.network;
    assert_eq!(Sandbox::probe(cfg, ws.path()).status(), "bwrap");
    assert_eq!(count(), 4);
}

fn which_bwrap() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("bwrap"))
        .find(|p| p.is_file())
        .expect("bwrap on PATH")
}
