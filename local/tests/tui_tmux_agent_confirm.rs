//! `[sandbox] ssh_agent = "confirm"` answered in the real workbench under tmux (issue #36
//! §2): the laptop runs a real `ssh-agent` holding a key whose private file is deleted once
//! added; `reasonix ssh` reaches a real sshd (`AllowAgentForwarding no`) in a private network
//! namespace with `-o ForwardAgent=<that agent>`; the scripted model runs `ssh-keygen -Y
//! sign` on the host through the (sandboxed) bash tool. The workbench shows the modal naming
//! the key and the host process; `1` (allow) makes the signature on the host, `2` (refuse)
//! makes it fail there, and listing keys (`ssh-add -l`) asks nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent_common;
mod reconnect_common;
mod term_common;

use std::sync::Arc;
use std::time::Duration;

use agent_common::{confirm_setup, sign_call, ConfirmSetup};
use reasonix_testkit::mock_provider::MockReply;
use reconnect_common::*;
use term_common::{sh_quote, Tmux};

const GUARD: Duration = Duration::from_secs(90);

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
        let ConfirmSetup { agent, fp, _keys } = confirm_setup(&rig, "id_tui_confirm");

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
