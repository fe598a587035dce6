//! The shared rig of the goal-over-SSH tests (`e2e_goal_ssh`: no keeper, `e2e_goal_keeper`:
//! the keeper carries the goal): a real OpenSSH sshd with a test user whose `ws` is the
//! workspace, the scripted mock provider (a bash step writing `runs.txt` after 4 s, a
//! `continue` report, a text, a `complete` report, a text) and a laptop home whose config
//! points at it.

#![allow(dead_code)] // each test file uses a part

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use reasonix_testkit::sshd::{ClientKey, Sshd, SshdConfig, TestUser, UserOptions};
use serde_json::{json, Value};

pub fn musl_host_binary() -> PathBuf {
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

pub struct Laptop {
    pub _dir: tempfile::TempDir,
    pub cwd: PathBuf,
    pub home: PathBuf,
    pub rx: PathBuf,
    pub key: PathBuf,
    pub port: u16,
}

impl Laptop {
    pub fn command(&self, args: &[&str]) -> Command {
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

pub fn output(out: &std::process::Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn listed(l: &Laptop, dest: &str) -> Value {
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

pub fn call(id: &str, name: &str, args: Value) -> MockToolCall {
    MockToolCall::new(id, name, &args.to_string())
}

pub struct GoalRig {
    pub sshd: Sshd,
    pub user: TestUser,
    pub mock: MockProvider,
    pub laptop: Laptop,
    /// `user@127.0.0.1:ws`
    pub dest: String,
}

/// Starts the rig; `goal_keeper = false` writes `[agent] goal_keeper = false` to the laptop's
/// config.
pub async fn goal_rig(goal_keeper: bool) -> GoalRig {
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
                "default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"RX_GOAL_SSH_KEY\"{agent}",
                mock.base_url(),
                agent = if goal_keeper { "\n" } else { "\n[agent]\ngoal_keeper = false\n" },
            ),
        )
        .expect("config");
    user.authorize(&key.public).expect("authorize");
    let dest = format!("{}@127.0.0.1:ws", user.name);
    let laptop = Laptop {
        cwd: dir.path().to_path_buf(),
        home,
        rx: rx.clone(),
        key: key.private.clone(),
        port: sshd.port(),
        _dir: dir,
    };
    GoalRig {
        sshd,
        user,
        mock,
        laptop,
        dest,
    }
}
