//! "Always allow" is scoped to the workspace it was given in (#15, item 4), end to end: the
//! rule stored the way the client stores it (`always_scope::persist_rule`, default scope =
//! this workspace) lets a headless `reasonix run` write in that workspace, and not in
//! another one (real `reasonix` → real `reasonix-remote` → the scripted mock provider).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use reasonix_local::always_scope::{persist_rule, AlwaysScope};
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::json;

fn host_bin() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"))
        .parent()
        .expect("bin dir")
        .join("reasonix-remote");
    assert!(p.is_file(), "build the workspace binaries first");
    p
}

fn run_write(home: &Path, ws: &Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .args(["run", "--json", "write x"])
        .current_dir(ws)
        .env("REASONIX_HOME", home)
        .env("REASONIX_REMOTE_BIN", host_bin())
        .env("RX_AS_KEY", "sk-always-scope")
        .env("REASONIX_IDLE_TIMEOUT_SECS", "5")
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run");
    (
        out.status.code(),
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_scoped_always_allow_does_not_apply_in_another_workspace() {
    // Every turn: write x.txt, then a closing answer.
    let mock = MockProvider::start_with(|req| {
        let wrote = req.messages().iter().any(|m| m["role"] == "tool");
        if wrote {
            MockReply::text(&["done"])
        } else {
            MockReply::tool_calls(
                vec![MockToolCall::new(
                    "w1",
                    "write_file",
                    &json!({"path": "x.txt", "content": "hi"}).to_string(),
                )],
                5,
            )
        }
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("rxhome");
    let ws_a = dir.path().join("a");
    let ws_b = dir.path().join("b");
    for d in [&home, &ws_a, &ws_b] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(
        home.join("config.toml"),
        format!(
            "default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nbase_url = \"{}\"\nmodels = [\"m\"]\napi_key_env = \"RX_AS_KEY\"\n",
            mock.base_url()
        ),
    )
    .expect("config");
    // "Always allow" answered in workspace A (the rule the host names for write_file).
    let key = format!("local:{}", ws_a.display());
    assert!(persist_rule(&home, "Edit", &AlwaysScope::Workspace(key)).expect("persist"));

    let (code, out) = run_write(&home, &ws_a);
    assert_eq!(code, Some(0), "allowed in its own workspace: {out}");
    assert_eq!(
        std::fs::read_to_string(ws_a.join("x.txt")).expect("written"),
        "hi"
    );

    let (code, out) = run_write(&home, &ws_b);
    assert_eq!(
        code,
        Some(4),
        "asked (and denied headless) elsewhere: {out}"
    );
    assert!(!ws_b.join("x.txt").exists(), "{out}");
    assert!(out.contains("\"denied\":\"headless\""), "{out}");
}
