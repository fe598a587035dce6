//! A writing subagent's bash under the real sandbox: only its `write_paths` are writable
//! (bwrap, and Landlock when the kernel has it), the rest of the workspace and the other
//! writable roots stay readable but read-only; the file tools refuse the same paths by
//! every spelling (`..`, symlinks, absolute).

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::path::{Path, PathBuf};
use std::sync::Arc;

use reasonix_remote::sandbox::{Sandbox, SandboxConfig, SandboxMode};
use reasonix_remote::tools::{ToolContext, ToolOutput, ToolRegistry};
use serde_json::{json, Value};

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

async fn call(ctx: &ToolContext, tool: &str, args: Value) -> ToolOutput {
    ToolRegistry::builtin()
        .get(tool)
        .unwrap()
        .run(args, ctx)
        .await
}

/// Returns the mechanism used.
async fn only_write_paths_are_writable(bwrap: &str, base: &str) -> String {
    let ws = tempfile::tempdir_in(base).unwrap();
    let extra = tempfile::tempdir_in(base).unwrap();
    let root = ws.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(root.join("README.md"), "hello").unwrap();
    std::os::unix::fs::symlink(root.join("docs"), root.join("src/escape")).unwrap();
    let sb = Sandbox::probe(config(bwrap, extra.path()), &root);
    assert!(sb.is_active(), "a sandbox must work here: {}", sb.status());
    let write_paths = vec![root.join("src")];
    let mut ctx = ToolContext::new(&root, Arc::new(sb.with_write_paths(&write_paths)));
    ctx.write_only = Some(Arc::new(write_paths.clone()));

    // bash: the write path is writable, nothing else is.
    let o = call(
        &ctx,
        "bash",
        json!({"command": "echo ok > src/in.txt && cat README.md"}),
    )
    .await;
    assert!(!o.is_error, "{o:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("src/in.txt")).unwrap(),
        "ok\n"
    );
    let x = extra.path().display();
    for (cmd, path) in [
        ("echo x > docs/a".to_string(), root.join("docs/a")),
        ("echo x > top".to_string(), root.join("top")),
        ("echo x > src/escape/b".to_string(), root.join("docs/b")),
        ("cd src && echo x > ../c".to_string(), root.join("c")),
        (format!("echo x > {x}/d"), extra.path().join("d")),
        ("rm README.md".to_string(), root.join("README.md.gone")),
    ] {
        let o = call(&ctx, "bash", json!({"command": cmd})).await;
        assert!(!path.exists(), "{cmd} wrote {}: {o:?}", path.display());
    }
    assert!(root.join("README.md").exists());

    // File tools: the same paths by every spelling.
    let o = call(
        &ctx,
        "write_file",
        json!({"path": "src/new.rs", "content": "x"}),
    )
    .await;
    assert!(!o.is_error, "{o:?}");
    let abs_docs = root.join("docs/e").display().to_string();
    for p in [
        "docs/e",
        "src/../docs/e",
        "src/escape/e",
        "./src/./../top2",
        abs_docs.as_str(),
    ] {
        let o = call(&ctx, "write_file", json!({"path": p, "content": "x"})).await;
        assert!(
            o.is_error && o.text.contains("outside this subagent's write_paths"),
            "{p}: {o:?}"
        );
    }
    assert!(!root.join("docs/e").exists() && !root.join("top2").exists());
    let o = call(
        &ctx,
        "edit_file",
        json!({"path": "README.md", "old_string": "hello", "new_string": "bye"}),
    )
    .await;
    assert!(o.is_error && o.text.contains("write_paths"), "{o:?}");
    sb.mechanism().to_string()
}

#[tokio::test]
async fn bwrap_makes_only_the_write_paths_writable() {
    assert_eq!(
        only_write_paths_are_writable("bwrap", "/tmp").await,
        "bwrap"
    );
    assert_eq!(
        only_write_paths_are_writable("bwrap", "/var/tmp").await,
        "bwrap"
    );
}

#[tokio::test]
async fn landlock_makes_only_the_write_paths_writable() {
    if reasonix_remote::sandbox::landlock::abi_version().is_err() {
        panic!("this kernel has no Landlock; the write_paths fallback cannot be tested");
    }
    assert_eq!(
        only_write_paths_are_writable("/nonexistent/bwrap", "/tmp").await,
        "landlock"
    );
    assert_eq!(
        only_write_paths_are_writable("/nonexistent/bwrap", "/var/tmp").await,
        "landlock"
    );
}
