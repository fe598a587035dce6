//! `[sandbox] ssh_agent = "confirm"` through ACP (issue #36 §2), driven by the official ACP
//! TypeScript SDK (`tests/acp_node/drive.mjs`): `reasonix acp --ssh` reaches a real sshd
//! (`AllowAgentForwarding no`) in a private network namespace with `-o ForwardAgent=<a real
//! laptop ssh-agent>`; the scripted model runs `ssh-keygen -Y sign` on the host through the
//! bash tool, twice. Each signature is a `session/request_permission` naming the key and the
//! host process: "Allow once" signs on the host, "Reject" makes the signature fail there.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "acp_common/netns.rs"]
mod acp_netns;
#[path = "acp_common/node.rs"]
mod acp_node_common;
mod agent_common;
mod reconnect_common;

use std::sync::Arc;
use std::time::Duration;

use agent_common::{confirm_setup, sign_call, ConfirmSetup};
use reasonix_testkit::mock_provider::MockReply;
use reconnect_common::*;
use serde_json::json;

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
        let child = acp_netns::driver_command(&rig, &args, "prompts")
            .arg(steps.to_string())
            .env("REASONIX_IDLE_TIMEOUT_SECS", "60")
            .spawn()
            .expect("node");
        let (report, _) = acp_node_common::wait_report(child, GUARD).await;
        assert_eq!(
            report["stopReasons"],
            json!(["end_turn", "end_turn"]),
            "{report:#}"
        );

        // Two questions, each naming the key and the host process, with allow/reject once.
        let asked = acp_node_common::asked(&report);
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
