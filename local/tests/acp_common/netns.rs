//! `tests/acp_node/drive.mjs` inside a test's network namespace, driving `reasonix acp
//! --ssh` against the real sshd of a [`Rig`] (`acp_ssh`, `acp_agent_confirm`). Needs, in the
//! test file: `mod reconnect_common;` and `#[path = "acp_common/node.rs"] mod acp_node_common;`.

use std::process::{Command, Stdio};

use crate::acp_node_common::drive_script;
use crate::reconnect_common::{musl_host_binary, Rig};

/// `drive.mjs scenario` in the namespace with `args` as the agent's arguments, the rig's
/// laptop home and workspace, the musl host binary to upload, no ssh-agent of the machine's
/// and its output piped (for [`crate::acp_node_common::wait_report`]). The caller adds the
/// scenario's argument and the timings.
pub fn driver_command(rig: &Rig, args: &[String], scenario: &str) -> Command {
    let mut cmd = rig.ns.command("node");
    cmd.arg(drive_script())
        .arg(scenario)
        .env("AGENT_ARGV", serde_json::to_string(args).expect("argv"))
        .env("REASONIX_BIN", env!("CARGO_BIN_EXE_reasonix"))
        .env("WS", rig.laptop.path())
        .env("HOME", rig.home())
        .env("REASONIX_HOME", rig.rx_home())
        .env(
            "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
            musl_host_binary(),
        )
        .env_remove("RX_RECONNECT_KEY")
        .env_remove("SSH_AUTH_SOCK")
        .current_dir(rig.laptop.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}
