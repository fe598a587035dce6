//! The laptop side of the ssh-agent tests (`agent_forward`, `acp_agent_confirm`,
//! `tui_tmux_agent_confirm`): a real `ssh-agent` on the laptop, the key fingerprint as
//! `ssh-keygen -l` prints it, and the `confirm` tests' signing step and set-up.

#![allow(dead_code)] // each test file uses a part

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reasonix_testkit::mock_provider::{MockReply, MockToolCall};
use reasonix_testkit::sshd::ClientKey;
use serde_json::json;

use crate::reconnect_common::Rig;

/// The laptop's ssh-agent, killed on drop.
pub struct LaptopAgent {
    child: std::process::Child,
    pub sock: PathBuf,
}

impl Drop for LaptopAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl LaptopAgent {
    pub fn start(dir: &Path) -> LaptopAgent {
        let sock = dir.join("agent.sock");
        let child = Command::new("ssh-agent")
            .arg("-D")
            .arg("-a")
            .arg(&sock)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ssh-agent");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !sock.exists() {
            assert!(Instant::now() < deadline, "ssh-agent made no socket");
            std::thread::sleep(Duration::from_millis(20));
        }
        LaptopAgent { child, sock }
    }

    pub fn ssh_add(&self, args: &[&str]) -> std::process::Output {
        Command::new("ssh-add")
            .args(args)
            .env("SSH_AUTH_SOCK", &self.sock)
            .output()
            .expect("ssh-add")
    }
}

/// The key's SHA-256 fingerprint as `ssh-add -l` prints it.
pub fn fingerprint(public: &Path) -> String {
    let out = Command::new("ssh-keygen")
        .arg("-lf")
        .arg(public)
        .output()
        .expect("ssh-keygen -l");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("no fingerprint in {text:?}"))
        .to_string()
}

/// What the model runs on the host: list the keys, then sign `msg.txt` with the laptop's key.
/// Its markers are computed by the shell, so the command's own text (which the provider
/// requests carry too) never contains them.
pub const SIGN: &str = "ssh-add -l >/dev/null && echo LISTED-$((6*7)); rm -f msg.txt.sig; ssh-keygen -Y sign -n test -f key.pub msg.txt && echo SIGNED-$((6*7)) || echo FAILED-$((6*7))";

pub fn sign_call(id: &str) -> MockReply {
    MockReply::tool_calls(
        vec![MockToolCall::new(
            id,
            "bash",
            &json!({ "command": SIGN }).to_string(),
        )],
        4,
    )
}

/// What `confirm_setup` leaves: the laptop's agent holding the key (its private file
/// deleted), the key's fingerprint, and the folder that holds the public half.
pub struct ConfirmSetup {
    pub agent: LaptopAgent,
    pub fp: String,
    pub _keys: tempfile::TempDir,
}

/// A fresh key added to a fresh laptop agent (the private file deleted), its public half and
/// `msg.txt` in the host workspace, and `yolo` + `ssh_agent = "confirm"` in the laptop config.
pub fn confirm_setup(rig: &Rig, key_name: &str) -> ConfirmSetup {
    let keys = tempfile::tempdir().unwrap();
    let key = ClientKey::generate(keys.path(), key_name, None).expect("key");
    let public_file = keys.path().join(format!("{key_name}.pub"));
    let fp = fingerprint(&public_file);
    let agent = LaptopAgent::start(keys.path());
    let added = Command::new("ssh-add")
        .arg(&key.private)
        .env("SSH_AUTH_SOCK", &agent.sock)
        .output()
        .expect("ssh-add");
    assert!(added.status.success(), "{added:?}");
    std::fs::remove_file(&key.private).unwrap();
    let public = std::fs::read_to_string(&public_file).unwrap();
    rig.user.write_file("ws/key.pub", &public, 0o644).unwrap();
    rig.user
        .write_file("ws/msg.txt", "sign me\n", 0o644)
        .unwrap();
    let config = rig.rx_home().join("config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("[permissions]\nmode = \"yolo\"\n[sandbox]\nssh_agent = \"confirm\"\n");
    std::fs::write(&config, text).unwrap();
    ConfirmSetup {
        agent,
        fp,
        _keys: keys,
    }
}
