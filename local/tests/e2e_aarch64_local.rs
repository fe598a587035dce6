//! Issue #17: the static aarch64 `reasonix-remote` serves a local-mode turn end to end under
//! qemu-user (real `reasonix` → the aarch64 bridge and daemon → the scripted SSE mock; the
//! daemon runs a sandboxed `bash` call).
//!
//! How the aarch64 binary runs: when the kernel can exec it (binfmt_misc with qemu-aarch64,
//! which may be registered by the machine even where `/proc/sys/fs/binfmt_misc` is not
//! mounted, so the test tries it), `REASONIX_REMOTE_BIN` is the binary itself and the bridge
//! starts the daemon as usual. Otherwise `REASONIX_REMOTE_BIN` is a wrapper
//! `exec qemu-aarch64-static BIN "$@"`, and the daemon is started through the wrapper by the
//! test: the bridge re-spawns the daemon from `current_exe()`, which qemu-user reports as the
//! aarch64 file, and qemu-user hands execve to the kernel, which cannot run it then.
//!
//! Sandboxed `bash` works: the daemon's execve of the x86_64 `bwrap` (its probe and the call)
//! goes to the kernel, which runs it natively (so `uname -m` in the command would say x86_64; the daemon's own process is what
//! shows the aarch64 build served the turn).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{ok, reasonix_command, LocalRig};
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

/// The pid in the workspace daemon's marker, once the daemon is listening (the marker is
/// written after the bind).
fn daemon_pid(home: &Path) -> Option<i32> {
    for e in std::fs::read_dir(home.join("sessions")).ok()?.flatten() {
        if let Ok(b) = std::fs::read(e.path().join("daemon.json")) {
            let v: Value = serde_json::from_slice(&b).ok()?;
            return v["pid"].as_i64().map(|p| p as i32);
        }
    }
    None
}

/// Stops the daemon however the test ends.
struct StopDaemon<'a>(&'a Path);

impl Drop for StopDaemon<'_> {
    fn drop(&mut self) {
        if let Some(pid) = daemon_pid(self.0) {
            // SAFETY: kill(2) of the daemon this test started.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aarch64_host_binary_serves_a_local_turn_under_qemu() {
    let Some(arm) = reasonix_testkit::host_binaries::aarch64_host_binary() else {
        return;
    };
    // As the daemon's re-spawn names it (qemu-user reports the resolved path).
    let arm = arm.canonicalize().expect("aarch64 binary");
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "b1",
                "bash",
                &json!({"command": "echo hi > f.txt && echo wrote-it"}).to_string(),
            )],
            4,
        ),
        MockReply::text(&["done on ", "aarch64"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_ARM_KEY", "sk-arm");
    let _stop = StopDaemon(&rig.home);

    let kernel_runs_it = Command::new(&arm)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let remote_bin = if kernel_runs_it {
        arm.clone()
    } else {
        let wrapper = rig.dir.path().join("reasonix-remote-qemu");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nexec qemu-aarch64-static '{}' \"$@\"\n",
                arm.display()
            ),
        )
        .expect("wrapper");
        std::fs::set_permissions(
            &wrapper,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("chmod");
        // The daemon the bridge could not start (see the module comment), with the
        // environment the laptop gives host processes.
        let mut daemon = Command::new(&wrapper)
            .args(["daemon", "--workspace"])
            .arg(rig.ws.canonicalize().expect("ws"))
            .current_dir(&rig.ws)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", rig.dir.path())
            .env("REASONIX_HOME", &rig.home)
            .env("REASONIX_IDLE_TIMEOUT_SECS", "60")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("qemu-aarch64-static (Debian qemu-user-static)");
        // Bounded by a count of polls (a guard, not a timing assertion).
        let mut polls = 0;
        while daemon_pid(&rig.home).is_none() {
            polls += 1;
            assert!(polls < 2400, "the aarch64 daemon never listened");
            assert!(daemon.try_wait().expect("wait").is_none(), "daemon exited");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Reaped when the guard stops it.
        std::thread::spawn(move || daemon.wait());
        wrapper
    };

    let out = {
        let rig = &rig;
        let remote_bin = remote_bin.clone();
        tokio::task::block_in_place(move || {
            reasonix_command(
                rig,
                &remote_bin,
                &["run", "--json", "--yolo", "write f.txt"],
            )
            // The daemon stays up for the checks below (the guard stops it).
            .env("REASONIX_IDLE_TIMEOUT_SECS", "60")
            .output()
            .expect("run reasonix")
        })
    };
    let stdout = ok(&out);

    // The tool ran in the workspace, and the answer came back.
    assert_eq!(
        std::fs::read_to_string(rig.ws.join("f.txt")).expect("f.txt"),
        "hi\n"
    );
    let events: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    // The emulated daemon's bwrap probe passed: bash ran sandboxed.
    let session = events
        .iter()
        .find(|e| e["type"] == "session")
        .expect("session event");
    assert_eq!(session["sandbox"], "bwrap", "{stdout}");
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_finished" && e["call_id"] == "b1")
        .collect();
    assert_eq!(finished.len(), 1, "{stdout}");
    assert_eq!(finished[0]["is_error"], false, "{stdout}");
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(text, "done on aarch64", "{stdout}");

    // Two model requests; the second carries the tool's output.
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    let tool_msg = reqs[1]
        .messages()
        .into_iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "b1")
        .expect("tool result in the second request");
    assert!(
        tool_msg["content"]
            .as_str()
            .unwrap_or("")
            .contains("wrote-it"),
        "{tool_msg}"
    );

    // The daemon that served it is the aarch64 build run by qemu.
    let pid = daemon_pid(&rig.home).expect("daemon marker");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("daemon alive");
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(
        cmdline.contains(&arm.display().to_string()) && cmdline.contains(" daemon "),
        "{cmdline}"
    );
}
