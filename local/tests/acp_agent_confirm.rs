//! `[sandbox] ssh_agent = "confirm"` through ACP (issue #36 §2), driven by the official ACP
//! TypeScript SDK (`tests/acp_node/drive.mjs`): `reasonix acp --ssh` reaches a real sshd
//! (`AllowAgentForwarding no`) in a private network namespace with `-o ForwardAgent=<a real
//! laptop ssh-agent>`; the scripted model runs `ssh-keygen -Y sign` on the host through the
//! bash tool, twice. Each signature is a `session/request_permission` naming the key and the
//! host process: "Allow once" signs on the host, "Reject" makes the signature fail there.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent_common;
mod reconnect_common;

use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_common::{confirm_setup, sign_call, ConfirmSetup};
use reasonix_testkit::mock_provider::MockReply;
use reconnect_common::*;
use serde_json::{json, Value};

const GUARD: Duration = Duration::from_secs(150);

#[test]
fn each_signature_is_a_permission_request_and_the_answer_decides_it() {
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
        let ConfirmSetup { agent, fp, _keys } = confirm_setup(&rig, "id_acp_confirm");

        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp_node");
        assert!(
            dir.join("node_modules/@agentclientprotocol/sdk").is_dir(),
            "the ACP TypeScript SDK is not installed: run `npm ci --prefix local/tests/acp_node` (.ci/run does)"
        );
        let args: Vec<String> = vec![
            "acp".into(),
            "--ssh".into(),
            rig.dest(),
            "-p".into(),
            rig.sshd.port().to_string(),
            "-F".into(),
            "none".into(),
            "-i".into(),
            rig.key.private.display().to_string(),
            "-o".into(),
            "IdentityAgent=none".into(),
            "-o".into(),
            format!("ForwardAgent={}", agent.sock.display()),
        ];
        let steps = json!([
            { "prompt": "sign the message", "answer": "allow_once" },
            { "prompt": "sign it again", "answer": "reject_once" },
        ]);
        let mut child = rig
            .ns
            .command("node")
            .arg(dir.join("drive.mjs"))
            .arg("prompts")
            .arg(steps.to_string())
            .env("AGENT_ARGV", serde_json::to_string(&args).unwrap())
            .env("REASONIX_BIN", env!("CARGO_BIN_EXE_reasonix"))
            .env("WS", rig.laptop.path())
            .env("HOME", rig.home())
            .env("REASONIX_HOME", rig.rx_home())
            .env(
                "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
                musl_host_binary(),
            )
            .env("REASONIX_IDLE_TIMEOUT_SECS", "60")
            .env_remove("RX_RECONNECT_KEY")
            .env_remove("SSH_AUTH_SOCK")
            .current_dir(rig.laptop.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("node");
        let deadline = Instant::now() + GUARD;
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait") {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("the ACP client did not finish within {GUARD:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let (mut out, mut err) = (String::new(), String::new());
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let report: Value = out
            .lines()
            .last()
            .and_then(|l| serde_json::from_str(l).ok())
            .unwrap_or_else(|| panic!("no report; stdout {out}\nstderr {err}"));
        assert!(status.success(), "ACP client failed: {report:#}\n{err}");
        assert_eq!(
            report["stopReasons"],
            json!(["end_turn", "end_turn"]),
            "{report:#}"
        );

        // Two questions, each naming the key and the host process, with allow/reject once.
        let asked: Vec<&Value> = report["log"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["at"] == "permission")
            .collect();
        assert_eq!(asked.len(), 2, "one question per signature: {asked:#?}");
        for q in &asked {
            let title = q["title"].as_str().unwrap_or_default();
            assert!(title.starts_with("ssh-agent:"), "{title}");
            assert!(title.contains("ssh-keygen"), "{title}");
            assert!(title.contains(&fp), "{title}");
            let options = q["options"].to_string();
            assert!(
                options.contains("allow_once") && options.contains("reject_once"),
                "{options}"
            );
        }
        let reqs = rig.mock.requests();
        assert_eq!(reqs.len(), 4, "two turns, each with one tool result");
        let body = |n: usize| reqs[n].body.to_string();
        assert!(
            body(1).contains("LISTED-42") && body(1).contains("SIGNED-42"),
            "{}",
            body(1)
        );
        assert!(
            body(3).contains("LISTED-42"),
            "listing keys was refused too: {}",
            body(3)
        );
        assert!(body(3).contains("FAILED-42"), "{}", body(3));
        assert!(
            !rig.host_file("msg.txt.sig").exists(),
            "a signature was made although refused"
        );
    });
}
