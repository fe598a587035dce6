//! A goal over SSH with the client killed mid-goal and no goal keeper (`[agent] goal_keeper =
//! false`; `e2e_goal_keeper.rs` has the keeper) (real OpenSSH sshd, the static
//! `reasonix-remote` installed over SFTP, the scripted mock provider): `run --goal` starts it,
//! the client is killed with SIGKILL while the goal's bash command runs; the command finishes
//! on the host with no client attached and the goal waits for a laptop to reach the model
//! (`reasonix sessions` shows it running and says "goal waiting for a laptop (the model key
//! is on the laptop)"); a later client attaches (`run --continue --goal resume`: the goal is
//! still running, the attach alone lets its parked step go on) and the goal completes;
//! `reasonix sessions` then shows it complete. Exactly one provider request per step, the
//! command ran once.

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_goes_on_after_the_client_is_killed_and_a_later_client_finds_it_complete() {
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
            "default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"RX_GOAL_SSH_KEY\"\n[agent]\ngoal_keeper = false\n",
            mock.base_url()
        ),
    )
    .expect("config");
    user.authorize(&key.public).expect("authorize");
    let dest = format!("{}@127.0.0.1:ws", user.name);
    let l = Laptop {
        cwd: dir.path().to_path_buf(),
        home,
        rx,
        key: key.private.clone(),
        port: sshd.port(),
        _dir: dir,
    };

    // 1. Start the goal; kill the client (SIGKILL) once the bash command is running.
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
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.unwrap();
            let started = line.contains("\"tool_started\"") && line.contains("\"b1\"");
            seen.push(line);
            if started {
                return seen;
            }
        }
        panic!("the client ended before the bash command started: {seen:?}");
    });
    child.kill().unwrap(); // SIGKILL
    let _ = child.wait();
    let killed_at = Instant::now();
    assert!(
        seen.iter().any(|l| l.contains("\"goal\"")),
        "the goal started: {seen:?}"
    );

    // 2. With no client, the command finishes on the host and the goal waits for a laptop.
    let runs = user.home.join("ws/runs.txt");
    tokio::task::block_in_place(|| {
        while !runs.is_file() {
            assert!(
                killed_at.elapsed() < Duration::from_secs(60),
                "the command never finished on the host"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let row = tokio::task::block_in_place(|| loop {
        let row = listed(&l, &dest);
        if row["state"] == "waiting_for_laptop" || killed_at.elapsed() > Duration::from_secs(60) {
            return row;
        }
        std::thread::sleep(Duration::from_millis(200));
    });
    assert_eq!(row["state"], "waiting_for_laptop", "{row}");
    assert_eq!(row["goal"]["status"], "running", "{row}");
    assert_eq!(row["goal"]["objective"], "write runs.txt once", "{row}");
    // The listing says why it waits and where the key is.
    let out =
        tokio::task::block_in_place(|| l.command(&["sessions", "--ssh", &dest]).output().unwrap());
    assert!(out.status.success(), "{}", output(&out));
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        table.contains("goal waiting for a laptop (the model key is on the laptop)"),
        "{table}"
    );
    // The first step's request only: the rest waits for a laptop.
    assert_eq!(mock.request_count(), 1);

    // 3. A later client attaches; the goal goes on and completes.
    let out = tokio::task::block_in_place(|| {
        l.command(&[
            "run",
            "--ssh",
            &dest,
            "--yolo",
            "--json",
            "--continue",
            "--goal",
            "resume",
        ])
        .output()
        .unwrap()
    });
    assert_eq!(out.status.code(), Some(0), "{}", output(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"status\":\"complete\""), "{}", output(&out));

    // 4. `reasonix sessions` finds it complete; one request per step, one run.
    let row = tokio::task::block_in_place(|| listed(&l, &dest));
    assert_eq!(row["goal"]["status"], "complete", "{row}");
    assert_eq!(row["goal"]["turns"], 2, "{row}");
    assert_eq!(row["goal"]["progress"], "runs.txt has one line", "{row}");
    assert_eq!(mock.request_count(), 5);
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run\n");
    // The model saw the command's full output, produced while no client was attached.
    let reqs = mock.requests();
    assert!(reqs[1].body["messages"].to_string().contains("finished"));
}
