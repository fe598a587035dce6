//! `[sandbox] ssh_agent = "confirm"` answered in the real workbench under tmux (issue #36
//! §2): the laptop runs a real `ssh-agent` holding a key whose private file is deleted once
//! added; `reasonix ssh` reaches a real sshd (`AllowAgentForwarding no`) in a private network
//! namespace with `-o ForwardAgent=<that agent>`; the scripted model runs `ssh-keygen -Y
//! sign` on the host through the (sandboxed) bash tool. The workbench shows the modal naming
//! the key and the host process; `1` (allow) makes the signature on the host, `2` (refuse)
//! makes it fail there, and listing keys (`ssh-add -l`) asks nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod reconnect_common;
mod term_common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reasonix_testkit::mock_provider::{MockReply, MockToolCall};
use reasonix_testkit::sshd::ClientKey;
use reconnect_common::*;
use serde_json::json;
use term_common::{sh_quote, Tmux};

const GUARD: Duration = Duration::from_secs(90);

/// The laptop's ssh-agent, killed on drop.
struct LaptopAgent {
    child: std::process::Child,
    sock: PathBuf,
}

impl Drop for LaptopAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl LaptopAgent {
    fn start(dir: &Path) -> LaptopAgent {
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
}

/// The key's SHA-256 fingerprint as `ssh-keygen -l` prints it.
fn fingerprint(public: &Path) -> String {
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
const SIGN: &str = "ssh-add -l >/dev/null && echo LISTED-$((6*7)); rm -f msg.txt.sig; ssh-keygen -Y sign -n test -f key.pub msg.txt && echo SIGNED-$((6*7)) || echo FAILED-$((6*7))";

fn sign_call(id: &str) -> MockReply {
    MockReply::tool_calls(
        vec![MockToolCall::new(
            id,
            "bash",
            &json!({ "command": SIGN }).to_string(),
        )],
        4,
    )
}

#[test]
fn the_workbench_asks_before_each_signature_and_the_answer_decides_it() {
    in_netns(|ns| async move {
        let rig = Rig::new_with_sshd(
            Arc::clone(&ns),
            vec![
                sign_call("s1"),
                MockReply::text(&["Allowed turn done."]),
                sign_call("s2"),
                MockReply::text(&["Refused turn done."]),
            ],
            vec!["AllowAgentForwarding no".into()],
        )
        .await;
        let keys = tempfile::tempdir().unwrap();
        let key = ClientKey::generate(keys.path(), "id_tui_confirm", None).expect("key");
        let public_file = keys.path().join("id_tui_confirm.pub");
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

        let env = [
            ("HOME", rig.home().display().to_string()),
            ("REASONIX_HOME", rig.rx_home().display().to_string()),
            (
                "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
                musl_host_binary().display().to_string(),
            ),
            ("REASONIX_IDLE_TIMEOUT_SECS", "60".to_string()),
            ("TERM", "xterm-256color".to_string()),
        ];
        let env: Vec<String> = env
            .iter()
            .map(|(k, v)| format!("{k}={}", sh_quote(v)))
            .collect();
        let cmd = format!(
            "cd {} && exec ip netns exec {} env -u SSH_AUTH_SOCK {} {} ssh {} -p {} -F none -i {} -o IdentityAgent=none -o {}",
            sh_quote(&rig.laptop.path().display().to_string()),
            rig.ns.name(),
            env.join(" "),
            sh_quote(env!("CARGO_BIN_EXE_reasonix")),
            sh_quote(&rig.dest()),
            rig.sshd.port(),
            sh_quote(&rig.key.private.display().to_string()),
            sh_quote(&format!("ForwardAgent={}", agent.sock.display())),
        );
        let sig = rig.host_file("msg.txt.sig");
        let t = Tmux::tui(&cmd);
        let fp_head: String = fp.chars().take(20).collect();
        tokio::task::block_in_place(|| {
            t.wait_screen(GUARD, "connected with the agent forwarded", |s| {
                s.contains("ssh-agent forwarded")
            });

            // Allowed once: the modal names the key and the host process; the signature is
            // made on the host.
            t.send_keys(&["sign the message", "Enter"]);
            let modal = t.wait_screen(GUARD, "the signing question", |s| {
                s.contains("ssh-agent: sign?")
            });
            assert!(modal.contains("ssh-keygen"), "{modal}");
            assert!(modal.contains(&fp_head), "{modal}");
            assert!(modal.contains("ED25519"), "{modal}");
            t.send_keys(&["1"]);
            t.wait_screen(GUARD, "the first turn's end", |s| {
                s.contains("Allowed turn done.")
            });
            assert!(sig.exists(), "no signature although allowed");
            let signed = std::fs::read_to_string(&sig).unwrap();
            assert!(signed.contains("BEGIN SSH SIGNATURE"), "{signed}");

            // Refused: the host process's signature fails, nothing is written.
            t.send_keys(&["sign it again", "Enter"]);
            t.wait_screen(GUARD, "the second signing question", |s| {
                s.contains("ssh-agent: sign?")
            });
            t.send_keys(&["2"]);
            t.wait_screen(GUARD, "the second turn's end", |s| {
                s.contains("Refused turn done.")
            });
            assert!(!sig.exists(), "a signature was made although refused");
        });
        let reqs = rig.mock.requests();
        assert_eq!(reqs.len(), 4, "two turns, each with one tool result");
        let result = |n: usize| reqs[n].body.to_string();
        assert!(result(1).contains("LISTED-42"), "{}", result(1));
        assert!(result(1).contains("SIGNED-42"), "{}", result(1));
        assert!(
            result(3).contains("LISTED-42"),
            "listing keys was refused too"
        );
        assert!(result(3).contains("FAILED-42"), "{}", result(3));
        t.send_keys(&["C-c"]);
        t.send_keys(&["C-c"]);
    });
}
