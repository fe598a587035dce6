//! The bash-versus-file-deny table over SSH: the real `reasonix run --ssh` against a real
//! OpenSSH sshd, the static host binary installed for a separate host user, that user's
//! real bubblewrap (and the sandbox off), `deny = ["Edit(secrets/**)", "Edit(**/*.env)"]`,
//! in `ask`, `auto` and `yolo` mode. The checks are those of the local table
//! (`deny_bash_common`): covered paths unchanged on the host's disk, every result naming the
//! rule, a notice for every undone write, the background job checked when it ends.

mod deny_bash_common;

use std::path::{Path, PathBuf};
use std::process::Command;

use deny_bash_common as t;
use reasonix_testkit::mock_provider::MockProvider;
use reasonix_testkit::sshd::{ClientKey, Sshd, SshdConfig, TestUser, UserOptions};

const KEY_ENV: &str = "RX_DENY_SSH_KEY";

fn musl_host_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    [
        root.join("x86_64-unknown-linux-musl/debug/reasonix-remote"),
        root.join("debug/reasonix-remote-x86_64-unknown-linux-musl"),
        root.join("x86_64-unknown-linux-musl/release/reasonix-remote"),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .expect("run `cargo build -p reasonix-remote --target x86_64-unknown-linux-musl` first")
}

struct Laptop {
    dir: tempfile::TempDir,
    key: ClientKey,
}

impl Laptop {
    fn rx_home(&self) -> PathBuf {
        self.dir.path().join("rxhome")
    }
}

fn laptop(sshd: &Sshd) -> Laptop {
    let dir = tempfile::tempdir().expect("tempdir");
    let ssh = dir.path().join("home/.ssh");
    std::fs::create_dir_all(&ssh).expect("ssh dir");
    std::fs::write(ssh.join("known_hosts"), sshd.known_hosts_line()).expect("known_hosts");
    let key = ClientKey::generate(&ssh, "id_deny", None).expect("key");
    std::fs::create_dir_all(dir.path().join("rxhome")).expect("rxhome");
    Laptop { dir, key }
}

/// Makes `~user/<folder>` the populated workspace, owned by the user.
fn host_workspace(user: &TestUser, folder: &str) -> PathBuf {
    let ws = user.home.join(folder);
    let stage = user.home.join(format!("{folder}-stage"));
    t::populate(&ws, &stage);
    for p in [&ws, &stage] {
        let out = Command::new("chown")
            .arg("-R")
            .arg(format!("{}:{}", user.uid, user.gid))
            .arg(p)
            .output()
            .expect("chown");
        assert!(out.status.success(), "{out:?}");
    }
    ws
}

/// One `reasonix run --ssh … --json --full-output` turn in `~user/<folder>`.
#[allow(clippy::too_many_arguments)]
fn run_over_ssh(
    l: &Laptop,
    sshd: &Sshd,
    user: &TestUser,
    mock: &MockProvider,
    folder: &str,
    mode: &str,
    flag: Option<&str>,
    allow: &str,
    sandbox: &str,
) -> String {
    std::fs::write(
        l.rx_home().join("config.toml"),
        t::config_toml(&mock.base_url(), KEY_ENV, mode, allow, sandbox),
    )
    .expect("config");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reasonix"));
    cmd.args(["run", "--ssh"])
        .arg(format!("{}@127.0.0.1:{folder}", user.name))
        .args(["--json", "--full-output"]);
    cmd.args(flag);
    let out = cmd
        .arg("try to change the protected files")
        .args(["-p", &sshd.port().to_string(), "-F", "none"])
        .arg("-i")
        .arg(&l.key.private)
        .args(["-o", "IdentityAgent=none"])
        .current_dir(l.dir.path())
        .env("HOME", l.dir.path().join("home"))
        .env("REASONIX_HOME", l.rx_home())
        .env(KEY_ENV, "sk-deny-ssh")
        .env("REASONIX_IDLE_TIMEOUT_SECS", "5")
        .env(
            "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
            musl_host_binary(),
        )
        .env_remove("SSH_AUTH_SOCK")
        .output()
        .expect("run reasonix");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        matches!(out.status.code(), Some(0) | Some(4)),
        "{:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn file_deny_holds_for_bash_over_ssh_in_every_mode() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mock = rt.block_on(MockProvider::start(Vec::new()));
    let sshd = Sshd::start(SshdConfig {
        allow_tcp_forwarding: false,
        allow_stream_local_forwarding: false,
        ..SshdConfig::default()
    })
    .expect("sshd");
    let user = TestUser::create(&UserOptions {
        shell: Some("/bin/bash".into()),
        ..UserOptions::default()
    })
    .expect("user");
    let l = laptop(&sshd);
    user.authorize(&l.key.public).expect("authorize");

    let mut lines = Vec::new();
    let mut problems = Vec::new();
    let full: [(&str, &str, Option<&str>, &str); 3] = [
        ("yolo/bwrap", "yolo", Some("--yolo"), "enforce"),
        ("auto/bwrap", "auto", Some("--auto"), "enforce"),
        ("yolo/off", "yolo", Some("--yolo"), "off"),
    ];
    for (i, (label, mode, flag, sandbox)) in full.iter().enumerate() {
        let folder = format!("ws-full-{i}");
        let ws = host_workspace(&user, &folder);
        let initial = t::covered_state(&ws);
        mock.push(t::full_turn());
        let stdout = run_over_ssh(&l, &sshd, &user, &mock, &folder, mode, *flag, "[]", sandbox);
        let sessions: Vec<serde_json::Value> = t::events(&stdout)
            .into_iter()
            .filter(|e| e["type"] == "session")
            .collect();
        let want = if *sandbox == "enforce" {
            "bwrap"
        } else {
            "off"
        };
        if sessions.first().and_then(|s| s["sandbox"].as_str()) != Some(want) {
            problems.push(format!("{label}: sandbox is not {want}: {sessions:?}"));
            continue;
        }
        match t::check_full_turn(
            &format!("ssh {label}"),
            &stdout,
            &ws,
            &initial,
            *sandbox == "enforce",
            *mode == "yolo",
        ) {
            Ok(l) => lines.extend(l),
            Err(p) => problems.extend(p),
        }
    }
    let folder = "ws-ask";
    let ws = host_workspace(&user, folder);
    let initial = t::covered_state(&ws);
    mock.push(t::ask_turn());
    let stdout = run_over_ssh(
        &l,
        &sshd,
        &user,
        &mock,
        folder,
        "ask",
        None,
        t::ASK_ALLOW,
        "enforce",
    );
    match t::check_ask_turn("ssh ask/bwrap", &stdout, &ws, &initial) {
        Ok(l) => lines.extend(l),
        Err(p) => problems.extend(p),
    }
    // The command's versions of what was undone are kept on the host, in the user's state
    // directory, private to the user.
    let denied = user.home.join(".reasonix/denied");
    let kept: Vec<PathBuf> = std::fs::read_dir(&denied)
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    if kept.is_empty() {
        problems.push(format!("nothing kept under {}", denied.display()));
    }
    for k in &kept {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(k).expect("kept dir");
        if meta.mode() & 0o777 != 0o700 || meta.uid() != user.uid {
            problems.push(format!(
                "{} is {:o} owned by {}",
                k.display(),
                meta.mode(),
                meta.uid()
            ));
        }
    }
    drop(rt);
    for l in &lines {
        eprintln!("{l}");
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
