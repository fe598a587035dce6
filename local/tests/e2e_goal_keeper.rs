//! The goal keeper over SSH (issue 38 §3; real OpenSSH sshd, the static `reasonix-remote`
//! installed over SFTP, the scripted mock provider): `run --goal` starts a goal and a
//! detached `reasonix keep` for it; the client is killed with SIGKILL while the goal's bash
//! command runs; with NO client attached the goal goes on through the keeper's gateway and
//! completes (polled with `reasonix sessions --json`, which opens no session); exactly one
//! provider request per step, the command ran once; the keeper then exits and removes its
//! pid file, and a later `reasonix sessions` finds the goal complete.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use reasonix_testkit::sshd::{ClientKey, Sshd, SshdConfig, TestUser, UserOptions};
use serde_json::{json, Value};

fn musl_host_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let candidates = [
        root.join("x86_64-unknown-linux-musl/debug/reasonix-remote"),
        root.join("debug/reasonix-remote-x86_64-unknown-linux-musl"),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!("no static host binary ({candidates:?}); run `cargo build -p reasonix-remote --target x86_64-unknown-linux-musl`")
        })
}

struct Laptop {
    _dir: tempfile::TempDir,
    cwd: PathBuf,
    home: PathBuf,
    rx: PathBuf,
    key: PathBuf,
    port: u16,
}

impl Laptop {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_reasonix"));
        c.args(args)
            .args(["-p", &self.port.to_string(), "-F", "none"])
            .arg("-i")
            .arg(&self.key)
            .args(["-o", "IdentityAgent=none"])
            .current_dir(&self.cwd)
            .env("HOME", &self.home)
            .env("REASONIX_HOME", &self.rx)
            .env("RX_GOAL_SSH_KEY", "sk-goal-ssh")
            .env(
                "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
                musl_host_binary(),
            )
            .env_remove("SSH_AUTH_SOCK")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }
}

fn output(out: &std::process::Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn listed(l: &Laptop, dest: &str) -> Value {
    let out = l
        .command(&["sessions", "--json", "--ssh", dest])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output(&out));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let rows: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(rows.len(), 1, "{text}");
    rows[0].clone()
}

fn call(id: &str, name: &str, args: Value) -> MockToolCall {
    MockToolCall::new(id, name, &args.to_string())
}

fn keeper_pid(lines: &[String]) -> Option<u32> {
    lines.iter().find_map(|l| {
        let v: Value = serde_json::from_str(l).ok()?;
        let text = v["text"].as_str()?;
        let rest = text.strip_prefix("goal kept by this laptop (pid ")?;
        rest.split(')').next()?.parse().ok()
    })
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_goal_completes_with_no_client_attached_after_the_client_is_killed() {
    let sshd = Sshd::start(SshdConfig::default()).expect("sshd");
    let user = TestUser::create(&UserOptions::default()).expect("user");
    user.write_file("ws/README.md", "# ws\n", 0o644)
        .expect("ws");
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![call(
                "b1",
                "bash",
                json!({"command": "sleep 4; echo run >> runs.txt; echo finished"}),
            )],
            2,
        ),
        MockReply::tool_calls(
            vec![call(
                "u1",
                "update_goal",
                json!({"status": "continue", "evidence": "runs.txt written"}),
            )],
            2,
        ),
        MockReply::text(&["Turn one done."]),
        MockReply::tool_calls(
            vec![call(
                "u2",
                "update_goal",
                json!({"status": "complete", "evidence": "runs.txt has one line"}),
            )],
            2,
        ),
        MockReply::text(&["All done."]),
    ])
    .await;

    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let ssh = home.join(".ssh");
    std::fs::create_dir_all(&ssh).expect("ssh dir");
    std::fs::write(ssh.join("known_hosts"), sshd.known_hosts_line()).expect("known_hosts");
    let key = ClientKey::generate(&ssh, "id_e2e", None).expect("key");
    let rx = dir.path().join("rxhome");
    std::fs::create_dir_all(&rx).expect("rx");
    std::fs::write(
        rx.join("config.toml"),
        format!(
            "default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"RX_GOAL_SSH_KEY\"\n",
            mock.base_url()
        ),
    )
    .expect("config");
    user.authorize(&key.public).expect("authorize");
    let dest = format!("{}@127.0.0.1:ws", user.name);
    let l = Laptop {
        cwd: dir.path().to_path_buf(),
        home,
        rx: rx.clone(),
        key: key.private.clone(),
        port: sshd.port(),
        _dir: dir,
    };

    // 1. Start the goal; once the bash command runs and the keeper is reported, SIGKILL the
    //    client.
    let mut child = l
        .command(&[
            "run",
            "--ssh",
            &dest,
            "--yolo",
            "--json",
            "--goal",
            "write runs.txt once",
        ])
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let seen = tokio::task::block_in_place(|| {
        let mut seen = Vec::new();
        let mut started = false;
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.unwrap();
            started |= line.contains("\"tool_started\"") && line.contains("\"b1\"");
            seen.push(line);
            if started && keeper_pid(&seen).is_some() {
                return seen;
            }
        }
        panic!("the client ended before the bash command started with a keeper: {seen:?}");
    });
    child.kill().unwrap(); // SIGKILL
    let _ = child.wait();
    let killed_at = Instant::now();
    let pid = keeper_pid(&seen).unwrap();
    assert!(alive(pid), "the keeper runs: {seen:?}");
    let session = seen
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|v| v["session"].as_str().map(str::to_string))
        .expect("the session id was printed");
    let pid_file = rx.join("keepers").join(format!("{session}.pid"));
    // The keeper claims the session as it starts (the notice comes when it was spawned).
    let claimed = tokio::task::block_in_place(|| {
        let t = Instant::now();
        loop {
            if let Ok(text) = std::fs::read_to_string(&pid_file) {
                if !text.is_empty() {
                    return text;
                }
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "the keeper never wrote {}",
                pid_file.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    assert_eq!(claimed.trim(), pid.to_string());
    // Its arguments hold the destination and SSH options, never the key.
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(
        cmdline.contains(&format!("keep --session {session} --ssh {dest}")),
        "{cmdline}"
    );
    assert!(!cmdline.contains("sk-goal-ssh"), "{cmdline}");

    // 2. With no client attached (the listing opens no session), the goal completes through
    //    the keeper.
    let row = tokio::task::block_in_place(|| loop {
        let row = listed(&l, &dest);
        if row["goal"]["status"] != "running" || killed_at.elapsed() > Duration::from_secs(120) {
            return row;
        }
        assert_eq!(row["driver_attached"], false, "{row}");
        std::thread::sleep(Duration::from_millis(300));
    });
    assert_eq!(row["goal"]["status"], "complete", "{row}");
    assert_eq!(row["goal"]["turns"], 2, "{row}");
    assert_eq!(row["goal"]["progress"], "runs.txt has one line", "{row}");
    assert_eq!(row["driver_attached"], false, "{row}");
    // Exactly one provider request per step; the command ran once.
    assert_eq!(mock.request_count(), 5);
    let runs = user.home.join("ws/runs.txt");
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run\n");
    let reqs = mock.requests();
    assert!(reqs[1].body["messages"].to_string().contains("finished"));

    // 3. The keeper exits by itself once the goal ended, and takes its pid file with it.
    tokio::task::block_in_place(|| {
        let t = Instant::now();
        while alive(pid) || pid_file.exists() {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "the keeper (pid {pid}) did not exit after the goal completed"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let log = std::fs::read_to_string(rx.join("logs").join(format!("keeper-{session}.log")))
        .unwrap_or_default();
    assert!(log.contains("is complete"), "{log}");
    // A later `reasonix sessions` finds it complete, with no keeper.
    let row = tokio::task::block_in_place(|| listed(&l, &dest));
    assert_eq!(row["goal"]["status"], "complete", "{row}");
    assert!(row.get("keeper_attached").is_none(), "{row}");
}
