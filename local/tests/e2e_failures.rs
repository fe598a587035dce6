//! Fatal first-contact failures end to end: the real `reasonix run` against the real
//! `reasonix-remote` (local pipes) and against a real OpenSSH sshd. A workspace that is
//! missing, a file, or not writable, and a host of an unsupported architecture, must stop at
//! once with the stage, the host, the path and the fix — printed once, exit code 5, one login,
//! no reconnect loop — and `--mkdir` creates a missing workspace.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use reasonix_testkit::mock_provider::{MockProvider, MockReply};
use reasonix_testkit::sshd::{ClientKey, Sshd, SshdConfig, TestUser, UserOptions};

/// Exit code of a connection failure (`reasonix_local::exit::Exit::Connection`).
const CONNECTION: i32 = 5;

/// A run that loops instead of stopping would never end: this bounds the test, it is not a
/// speed requirement (the assertions count logins and messages, not seconds).
const HANG_GUARD: Duration = Duration::from_secs(120);

fn musl_host_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    [
        root.join("x86_64-unknown-linux-musl/debug/reasonix-remote"),
        root.join("x86_64-unknown-linux-musl/release/reasonix-remote"),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .expect("run `cargo build -p reasonix-remote --target x86_64-unknown-linux-musl` first")
}

fn host_bin() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"))
        .parent()
        .expect("bin dir")
        .join("reasonix-remote");
    assert!(p.is_file(), "build the workspace binaries first");
    p
}

/// Run `cmd` to its end, killing it (and failing the test) past [`HANG_GUARD`].
fn output_bounded(mut cmd: Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn reasonix");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > HANG_GUARD {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "reasonix did not exit (a retry loop?); stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn config(dir: &Path, base_url: &str) -> PathBuf {
    let rx = dir.join("rxhome");
    std::fs::create_dir_all(&rx).expect("rxhome");
    std::fs::write(
        rx.join("config.toml"),
        format!(
            "default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{base_url}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"RX_FAIL_KEY\"\n"
        ),
    )
    .expect("config");
    rx
}

/// Lines of stderr that carry `needle`: the cause must be said exactly once.
fn count_lines(stderr: &str, needle: &str) -> usize {
    stderr.lines().filter(|l| l.contains(needle)).count()
}

fn assert_fatal(out: &Output, needles: &[&str], what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(CONNECTION),
        "{what}: exit code; stderr: {stderr}"
    );
    for n in needles {
        assert_eq!(
            count_lines(&stderr, n),
            1,
            "{what}: {n:?} must be printed exactly once; stderr: {stderr}"
        );
    }
    assert!(
        !stderr.contains("reconnecting"),
        "{what}: a fatal error is not retried: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_workspace_missing_file_and_mkdir() {
    let mock = MockProvider::start(vec![MockReply::text(&["made it"])]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let rx = config(dir.path(), &mock.base_url());
    let run = |ws: &Path, extra: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_reasonix"));
        cmd.arg("run")
            .args(extra)
            .arg("--workspace")
            .arg(ws)
            .arg("hello")
            .current_dir(dir.path())
            .env("REASONIX_HOME", &rx)
            .env("REASONIX_REMOTE_BIN", host_bin())
            .env("RX_FAIL_KEY", "sk-fail")
            .env("REASONIX_IDLE_TIMEOUT_SECS", "5")
            .env_remove("XDG_RUNTIME_DIR");
        output_bounded(cmd)
    };
    let missing = dir.path().join("no/such/ws");
    let out = run(&missing, &[]);
    let path = missing.display().to_string();
    assert_fatal(
        &out,
        &[
            &format!("[attach] local: {path}: the workspace folder does not exist"),
            "--mkdir",
        ],
        "missing",
    );
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").expect("file");
    let out = run(&file, &[]);
    assert_fatal(
        &out,
        &[&format!(
            "{}: the workspace path is not a folder",
            file.display()
        )],
        "file",
    );
    assert_eq!(mock.request_count(), 0, "nothing reached the provider");
    assert!(!missing.exists(), "nothing was created without --mkdir");

    let out = run(&missing, &["--mkdir"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "--mkdir: {stderr}");
    assert!(missing.is_dir(), "--mkdir created the workspace");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("made it"),
        "the turn ran in the new workspace"
    );
}

struct Host {
    sshd: Sshd,
    laptop: tempfile::TempDir,
    key: ClientKey,
    rx: PathBuf,
}

fn host(base_url: &str) -> Host {
    let sshd = Sshd::start(SshdConfig {
        allow_tcp_forwarding: false,
        allow_stream_local_forwarding: false,
        ..SshdConfig::default()
    })
    .expect("sshd");
    let laptop = tempfile::tempdir().expect("tempdir");
    let ssh = laptop.path().join("home/.ssh");
    std::fs::create_dir_all(&ssh).expect("ssh dir");
    std::fs::write(ssh.join("known_hosts"), sshd.known_hosts_line()).expect("known_hosts");
    let key = ClientKey::generate(&ssh, "id_fail", None).expect("key");
    let rx = config(laptop.path(), base_url);
    Host {
        sshd,
        laptop,
        key,
        rx,
    }
}

fn run_ssh(h: &Host, user: &TestUser, path: &str, extra: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reasonix"));
    cmd.arg("run")
        .args(extra)
        .args(["--ssh", &format!("{}@127.0.0.1:{path}", user.name)])
        .args(["-p", &h.sshd.port().to_string(), "-F", "none"])
        .arg("-i")
        .arg(&h.key.private)
        .args(["-o", "IdentityAgent=none", "hello"])
        .current_dir(h.laptop.path())
        .env("HOME", h.laptop.path().join("home"))
        .env("REASONIX_HOME", &h.rx)
        .env("RX_FAIL_KEY", "sk-fail")
        .env("REASONIX_IDLE_TIMEOUT_SECS", "5")
        .env(
            "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
            musl_host_binary(),
        )
        .env_remove("SSH_AUTH_SOCK");
    output_bounded(cmd)
}

/// Logins sshd accepted so far.
fn logins(sshd: &Sshd) -> usize {
    sshd.log().matches("Accepted publickey").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_workspace_missing_file_unwritable_and_mkdir() {
    let mock = MockProvider::start(vec![MockReply::text(&["made it"])]).await;
    let h = host(&mock.base_url());
    let user = TestUser::create(&UserOptions::default()).expect("user");
    user.authorize(&h.key.public).expect("authorize");
    user.write_file("plain-file", "x", 0o644).expect("file");
    // A folder the user can enter but not write (owned by root).
    let locked = user.home.join("locked");
    std::fs::create_dir(&locked).expect("locked");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).expect("chmod");

    let cases: &[(&str, String, &str)] = &[
        (
            "missing",
            "no/such/ws".to_string(),
            "the workspace folder does not exist",
        ),
        (
            "file",
            "plain-file".to_string(),
            "the workspace path is not a folder",
        ),
        (
            "unwritable",
            locked.display().to_string(),
            "the workspace folder is not writable",
        ),
    ];
    for (what, path, problem) in cases {
        let before = logins(&h.sshd);
        let out = run_ssh(&h, &user, path, &[]);
        assert_fatal(&out, &["[attach] 127.0.0.1: ", problem], what);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(path.as_str()), "{what}: the path: {stderr}");
        assert_eq!(
            logins(&h.sshd) - before,
            1,
            "{what}: one login, no retry loop; stderr: {stderr}"
        );
    }
    assert_eq!(mock.request_count(), 0, "nothing reached the provider");
    assert!(
        !user.home.join("no").exists(),
        "nothing created without --mkdir"
    );

    let out = run_ssh(&h, &user, "no/such/ws", &["--mkdir"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "--mkdir: {stderr}");
    let made = user.home.join("no/such/ws");
    assert!(made.is_dir(), "--mkdir created the workspace on the host");
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&made).expect("meta"));
    assert_eq!(owner, user.uid, "created as the SSH user");
    assert!(String::from_utf8_lossy(&out.stdout).contains("made it"));
}

/// A host user whose login shell puts fake `uname` / `df` first on PATH, so the probe sees
/// another machine (`arch`) or a full disk (`free_kb`). The directory must outlive the user.
fn fake_shell_user(fake: &Path, arch: &str, free_kb: Option<u64>) -> TestUser {
    std::fs::set_permissions(fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let uname = fake.join("uname");
    std::fs::write(
        &uname,
        format!(
            "#!/bin/sh\nif [ \"$1\" = -m ]; then echo {arch}; else exec /bin/uname \"$@\"; fi\n"
        ),
    )
    .expect("uname");
    let mut tools = vec![uname];
    if let Some(kb) = free_kb {
        let df = fake.join("df");
        std::fs::write(
            &df,
            format!("#!/bin/sh\necho 'Filesystem 1024-blocks Used Available Capacity Mounted on'\necho \"/dev/x 100000 99990 {kb} 100% /\"\n"),
        )
        .expect("df");
        tools.push(df);
    }
    let shell = fake.join("fakesh");
    std::fs::write(
        &shell,
        format!(
            "#!/bin/sh\nPATH={}:$PATH\nexport PATH\nexec /bin/sh \"$@\"\n",
            fake.display()
        ),
    )
    .expect("shell");
    tools.push(shell.clone());
    for f in &tools {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    TestUser::create(&UserOptions {
        shell: Some(shell.display().to_string()),
        ..UserOptions::default()
    })
    .expect("user")
}

fn nothing_installed(user: &TestUser) -> bool {
    std::fs::read_dir(user.home.join(".reasonix/remote/bin"))
        .map(|d| d.count() == 0)
        .unwrap_or(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_unsupported_architecture_and_full_disk_stop_before_installing() {
    let mock = MockProvider::start(Vec::new()).await;
    let h = host(&mock.base_url());
    let fake = tempfile::tempdir().expect("fake bin");
    let user = fake_shell_user(fake.path(), "sparc64", None);
    user.authorize(&h.key.public).expect("authorize");
    let before = logins(&h.sshd);
    let out = run_ssh(&h, &user, ".", &[]);
    assert_fatal(
        &out,
        &["[probe] 127.0.0.1: unsupported platform 'Linux sparc64'"],
        "unsupported arch",
    );
    assert_eq!(logins(&h.sshd) - before, 1, "one login");
    assert!(nothing_installed(&user), "nothing was installed");

    let fake2 = tempfile::tempdir().expect("fake bin");
    let full = fake_shell_user(fake2.path(), "x86_64", Some(10));
    full.authorize(&h.key.public).expect("authorize");
    let before = logins(&h.sshd);
    let out = run_ssh(&h, &full, ".", &[]);
    assert_fatal(
        &out,
        &["[upload] 127.0.0.1: not enough space in", "MiB needed"],
        "disk full",
    );
    assert_eq!(logins(&h.sshd) - before, 1, "one login");
    assert!(nothing_installed(&full), "nothing was installed");
    assert_eq!(mock.request_count(), 0);
}

/// Command lines of this user's `reasonix-remote` processes that serve `needle` (a
/// workspace path).
fn daemons_for(needle: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .filter(|c| c.contains("reasonix-remote") && c.contains(needle))
        .collect()
}

/// Item 8 of #15: a run that cannot make its first model request (no API key, unknown model,
/// broken config) fails with exit 2 and the reason once, before anything is started: no
/// daemon, no session, no state on the host, no SSH login.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_first_contact_starts_nothing_locally_and_over_ssh() {
    let mock = MockProvider::start(vec![MockReply::text(&["sent anyway"])]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let rx = config(dir.path(), &mock.base_url());
    // The same config asking before a prompt over 1% of the (default 128k) window.
    let strict = dir.path().join("strict");
    std::fs::create_dir(&strict).expect("strict home");
    let mut text = std::fs::read_to_string(rx.join("config.toml")).expect("config");
    text.push_str("[agent]\nprompt_confirm_ratio = 0.01\n");
    std::fs::write(strict.join("config.toml"), text).expect("strict config");
    let big_prompt = "word ".repeat(4_000);
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).expect("ws");
    let run = |home: &Path, key: bool, extra: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_reasonix"));
        cmd.arg("run")
            .args(extra)
            .arg("--workspace")
            .arg(&ws)
            .arg(if home == strict.as_path() {
                big_prompt.as_str()
            } else {
                "hello"
            })
            .current_dir(dir.path())
            .env("REASONIX_HOME", home)
            .env("REASONIX_REMOTE_BIN", host_bin())
            .env("REASONIX_IDLE_TIMEOUT_SECS", "5")
            .env_remove("RX_FAIL_KEY")
            .env_remove("XDG_RUNTIME_DIR");
        if key {
            cmd.env("RX_FAIL_KEY", "sk-fail");
        }
        output_bounded(cmd)
    };
    let broken = dir.path().join("broken");
    std::fs::create_dir(&broken).expect("broken home");
    std::fs::write(broken.join("config.toml"), "[[providers]\nname = ").expect("bad config");
    let cases: &[(&str, &Path, bool, &[&str], &str)] = &[
        ("no key", &rx, false, &[], "no API key: set RX_FAIL_KEY"),
        (
            "unknown model",
            &rx,
            true,
            &["--model", "nosuch/model"],
            "nosuch/model",
        ),
        ("broken config", &broken, true, &[], "config.toml"),
        (
            "big prompt",
            &strict,
            true,
            &[],
            "the prompt is about 5000 tokens, 4% of the model's",
        ),
    ];
    for (what, home, key, extra, needle) in cases {
        let out = run(home, *key, extra);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{what}: exit code; stderr: {stderr}"
        );
        assert_eq!(
            count_lines(&stderr, needle),
            1,
            "{what}: {needle:?} printed once; stderr: {stderr}"
        );
        assert!(
            !home.join("sessions").exists() && !home.join("run").exists(),
            "{what}: no session and no run dir under {}",
            home.display()
        );
        assert!(
            daemons_for(&ws.display().to_string()).is_empty(),
            "{what}: no daemon for the workspace"
        );
    }

    let h = host(&mock.base_url());
    let user = TestUser::create(&UserOptions::default()).expect("user");
    user.authorize(&h.key.public).expect("authorize");
    let before = logins(&h.sshd);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reasonix"));
    cmd.arg("run")
        .args(["--ssh", &format!("{}@127.0.0.1:.", user.name)])
        .args(["-p", &h.sshd.port().to_string(), "-F", "none"])
        .arg("-i")
        .arg(&h.key.private)
        .args(["-o", "IdentityAgent=none", "hello"])
        .current_dir(h.laptop.path())
        .env("HOME", h.laptop.path().join("home"))
        .env("REASONIX_HOME", &h.rx)
        .env_remove("RX_FAIL_KEY")
        .env_remove("SSH_AUTH_SOCK");
    let out = output_bounded(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "ssh, no key: {stderr}");
    assert_eq!(
        count_lines(&stderr, "no API key: set RX_FAIL_KEY"),
        1,
        "{stderr}"
    );
    assert_eq!(logins(&h.sshd), before, "no SSH login");
    assert!(
        !user.home.join(".reasonix").exists(),
        "nothing on the host: no daemon, no session"
    );
    assert!(user
        .pids()
        .into_iter()
        .filter_map(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).ok())
        .all(|c| !String::from_utf8_lossy(&c).contains("reasonix-remote")));
    assert_eq!(mock.request_count(), 0);

    // `--yes` sends the big prompt whole.
    let out = run(&strict, true, &["--yes"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "--yes: {stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("sent anyway"));
    let reqs = mock.requests();
    assert!(reqs[0].messages().iter().any(|m| m["content"]
        .as_str()
        .is_some_and(|c| c.contains(big_prompt.trim_end()))));
}
