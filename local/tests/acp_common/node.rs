//! The TypeScript ACP client `tests/acp_node/drive.mjs` (the official
//! `@agentclientprotocol/sdk`): where it is, and its JSON report. Free of the other test
//! modules, so the netns tests include it alone:
//! `#[path = "acp_common/node.rs"] mod acp_node_common;`.

#![allow(dead_code)] // each test file uses a part

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

/// `tests/<name>`, asserting the npm `package` is installed there.
pub fn sdk_dir(name: &str, package: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(name);
    assert!(
        dir.join("node_modules").join(package).is_dir(),
        "{package} is not installed: run `npm ci --prefix local/tests/{name}` (.ci/run does)"
    );
    dir
}

/// `tests/acp_node/drive.mjs`, with the ACP TypeScript SDK installed beside it.
pub fn drive_script() -> PathBuf {
    sdk_dir("acp_node", "@agentclientprotocol/sdk").join("drive.mjs")
}

/// The report `drive.mjs` printed last, asserting it exited with success.
pub fn report(status: std::process::ExitStatus, stdout: &str, stderr: &str) -> Value {
    let report: Value = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| {
            panic!("no report from the ACP client; stdout: {stdout}\nstderr: {stderr}")
        });
    assert!(
        status.success(),
        "the ACP client failed: {report:#}\nstderr: {stderr}"
    );
    report
}

/// Wait (hang guard `guard`) for a `drive.mjs` started with piped output to exit; its report
/// and stderr.
pub async fn wait_report(mut child: std::process::Child, guard: Duration) -> (Value, String) {
    let deadline = Instant::now() + guard;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the ACP client did not finish within {guard:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut out = String::new();
    let mut err = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("stdout");
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("stderr");
    (report(status, &out, &err), err)
}

/// The permission requests in a report's log.
pub fn asked(report: &Value) -> Vec<&Value> {
    report["log"]
        .as_array()
        .expect("log")
        .iter()
        .filter(|v| v["at"] == "permission")
        .collect()
}
