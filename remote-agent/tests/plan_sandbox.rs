//! Plan mode's read-only sandbox with real bash, the real bwrap and the real kernel's
//! Landlock: before a plan is approved nothing a command runs can write the workspace or a
//! writable root (redirections, `cd` chains, interpreters, `sh -c`), while reading works.
//! Also the `exit_plan_mode` contract outside a session (refused: not in plan mode).

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::path::{Path, PathBuf};
use std::sync::Arc;

use reasonix_remote::sandbox::{Sandbox, SandboxConfig, SandboxMode};
use reasonix_remote::tools::{ToolContext, ToolOutput, ToolRegistry};
use serde_json::json;

fn config(bwrap: &str, extra: &Path) -> SandboxConfig {
    SandboxConfig {
        bash: SandboxMode::Enforce,
        network: true,
        allow_write: vec![extra.to_path_buf()],
        forbid_read: Vec::new(),
        cache_dirs: Vec::new(),
        bwrap_path: PathBuf::from(bwrap),
        ssh_agent: false,
    }
}

async fn bash(ctx: &ToolContext, cmd: &str) -> ToolOutput {
    ToolRegistry::builtin()
        .get("bash")
        .unwrap()
        .run(json!({"command": cmd}), ctx)
        .await
}

/// Every write attempt fails under the read-only form of a sandbox probed with `bwrap`, in a
/// workspace under `base`; the writable form of the same sandbox does write (so the test can
/// fail). Returns the mechanism.
async fn nothing_writes(bwrap: &str, base: &str) -> String {
    let ws = tempfile::tempdir_in(base).unwrap();
    let extra = tempfile::tempdir_in(base).unwrap();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    std::fs::write(ws.path().join("README.md"), "hello plan").unwrap();
    let sb = Sandbox::probe(config(bwrap, extra.path()), ws.path());
    assert!(sb.is_active(), "a sandbox must work here: {}", sb.status());
    let ro = ToolContext::new(ws.path(), Arc::new(sb.read_only()));
    let rw = ToolContext::new(ws.path(), Arc::new(sb.clone()));
    let x = extra.path().display();
    let attempts = [
        ("echo x > f1".to_string(), ws.path().join("f1")),
        (
            "cd sub && echo x > f2".to_string(),
            ws.path().join("sub/f2"),
        ),
        (
            "python3 -c \"open('f3','w').write('x')\"".to_string(),
            ws.path().join("f3"),
        ),
        ("sh -c 'echo x > f4'".to_string(), ws.path().join("f4")),
        ("touch f5".to_string(), ws.path().join("f5")),
        (format!("echo x > {x}/f6"), extra.path().join("f6")),
        ("rm README.md".to_string(), ws.path().join("README.md.gone")),
    ];
    for (cmd, path) in &attempts {
        let o = bash(&ro, cmd).await;
        assert!(
            !path.exists(),
            "{cmd} wrote {} under plan mode: {o:?}",
            path.display()
        );
    }
    assert_eq!(
        std::fs::read_to_string(ws.path().join("README.md")).unwrap(),
        "hello plan",
        "rm must not have removed it"
    );
    let o = bash(&ro, "cat README.md && ls sub").await;
    assert!(!o.is_error && o.text.contains("hello plan"), "{o:?}");
    // The same sandbox without plan mode writes: the refusals above are plan mode's.
    let o = bash(&rw, "echo x > f1 && echo y > sub/f2").await;
    assert!(!o.is_error, "{o:?}");
    assert!(ws.path().join("f1").exists() && ws.path().join("sub/f2").exists());
    sb.mechanism().to_string()
}

#[tokio::test]
async fn bwrap_read_only_refuses_every_write() {
    // Under /tmp on purpose: the private /tmp must not hide the workspace, and the read-only
    // bind must still hold.
    assert_eq!(nothing_writes("bwrap", "/tmp").await, "bwrap");
    assert_eq!(nothing_writes("bwrap", "/var/tmp").await, "bwrap");
}

#[tokio::test]
async fn landlock_read_only_refuses_every_write() {
    if reasonix_remote::sandbox::landlock::abi_version().is_err() {
        panic!("this kernel has no Landlock; the plan-mode fallback cannot be tested");
    }
    // A missing bwrap: `enforce` falls back to Landlock. Under /tmp too: Landlock's shared
    // /tmp grant must be gone in plan mode, or the workspace there would be writable.
    assert_eq!(
        nothing_writes("/nonexistent/bwrap", "/tmp").await,
        "landlock"
    );
    assert_eq!(
        nothing_writes("/nonexistent/bwrap", "/var/tmp").await,
        "landlock"
    );
}

#[tokio::test]
async fn exit_plan_mode_outside_plan_mode_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(d.path(), Arc::new(Sandbox::off(d.path())));
    let tool = ToolRegistry::builtin().get("exit_plan_mode").unwrap();
    assert!(tool.read_only());
    let o = tool.run(json!({"plan": "## Steps\n1. a"}), &ctx).await;
    assert!(o.is_error);
    assert!(o.text.starts_with("not in plan mode"), "{}", o.text);
    let o = tool.run(json!({}), &ctx).await;
    assert!(o.is_error, "{o:?}");
}
