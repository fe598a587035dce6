//! Deny rules on file writers hold for bash by construction: the real bash tool, real
//! bubblewrap (and the sandbox off), `deny = ["Edit(secrets/**)", "Edit(**/*.env)"]`, and
//! commands the bash reader cannot see through (interpreters, `cd` chains, `dd`, archives,
//! git, symlinks made in the same command, background jobs). After every call the covered
//! paths must be exactly as before, what the command did elsewhere must stay, and the model
//! and the user must have been told, naming the rule.
//!
//! The tool is called directly (no permission policy in front): this is the guarantee
//! without the early refusal of the bash reader.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use reasonix_remote::policy::{Mode, Policy};
use reasonix_remote::sandbox::{Sandbox, SandboxConfig, SandboxMode};
use reasonix_remote::tools::{DenyGuard, NoticeSink, ToolContext, ToolOutput, ToolRegistry};
use serde_json::json;

const RULES: [&str; 2] = ["Edit(secrets/**)", "Edit(**/*.env)"];

#[derive(Default)]
struct Notes(Mutex<Vec<String>>);

impl NoticeSink for Notes {
    fn notice(&self, text: String) {
        self.0.lock().unwrap().push(text);
    }
}

struct Rig {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    quarantine: PathBuf,
    ctx: ToolContext,
    notes: Arc<Notes>,
}

fn sh(cwd: &Path, script: &str) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(cwd)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write(p: &Path, text: &str, mode: u32) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A workspace with covered files (`secrets/k`, `secrets/sub/k2`, `config/app.env`), an
/// uncovered one, a git repository whose HEAD has another `secrets/k`, and a tar and a zip
/// archive that would overwrite the secret and add a `.env` file.
fn rig(mode: SandboxMode) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let ws = root.join("ws");
    let stage = root.join("stage");
    write(&stage.join("secrets/k"), "pwned\n", 0o644);
    write(&stage.join("config/arch.env"), "PWNED=1\n", 0o644);
    std::fs::create_dir_all(&ws).unwrap();
    sh(
        &stage,
        &format!("tar -cf {}/evil.tar secrets config", ws.display()),
    );
    sh(
        &stage,
        &format!(
            "python3 -c \"import zipfile; z = zipfile.ZipFile('{}/evil.zip', 'w'); z.write('secrets/k'); z.write('config/arch.env'); z.close()\"",
            ws.display()
        ),
    );
    write(&ws.join("secrets/k"), "committed\n", 0o644);
    sh(
        &ws,
        "git init -q && git add secrets && git -c user.email=t@t -c user.name=t commit -qm c",
    );
    write(&ws.join("secrets/k"), "secret\n", 0o644);
    write(&ws.join("secrets/sub/k2"), "two\n", 0o600);
    write(&ws.join("config/app.env"), "A=1\n", 0o644);
    write(&ws.join("src/a.txt"), "plain\n", 0o644);
    let cfg = SandboxConfig {
        bash: mode,
        network: true,
        allow_write: Vec::new(),
        forbid_read: Vec::new(),
        cache_dirs: Vec::new(),
        bwrap_path: PathBuf::from("bwrap"),
        ssh_agent: false,
    };
    let sb = Sandbox::probe(cfg, &ws);
    if mode == SandboxMode::Enforce {
        assert_eq!(sb.status(), "bwrap", "bubblewrap must work on this machine");
    }
    let mut ctx = ToolContext::new(&ws, Arc::new(sb));
    let rules: Vec<String> = RULES.iter().map(|s| s.to_string()).collect();
    let policy = Policy::new(Mode::Yolo, &[], &[], &rules)
        .unwrap()
        .with_workspace(&ws);
    let quarantine = root.join("state/denied");
    ctx.deny_guard = DenyGuard::new(
        policy.write_deny_rules(),
        quarantine.clone(),
        vec![root.join("state")],
    );
    assert!(ctx.deny_guard.is_some());
    let notes = Arc::new(Notes::default());
    ctx.notices = notes.clone();
    Rig {
        _dir: dir,
        ws,
        quarantine,
        ctx,
        notes,
    }
}

/// Every covered path (under `secrets/`, or named `*.env`) with its kind, mode and content.
fn covered_state(ws: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![ws.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(ws).unwrap().display().to_string();
            if rel == ".git" {
                continue;
            }
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let covered = rel == "secrets" || rel.starts_with("secrets/") || rel.ends_with(".env");
            if covered {
                let what = if meta.file_type().is_symlink() {
                    format!("link -> {}", std::fs::read_link(&p).unwrap().display())
                } else if meta.is_dir() {
                    format!("dir {:o}", meta.permissions().mode() & 0o7777)
                } else {
                    format!(
                        "file {:o} {:?}",
                        meta.permissions().mode() & 0o7777,
                        std::fs::read_to_string(&p).unwrap_or_default()
                    )
                };
                out.insert(rel, what);
            }
            if meta.is_dir() && !meta.file_type().is_symlink() {
                stack.push(p);
            }
        }
    }
    out
}

async fn call(ctx: &ToolContext, tool: &str, args: serde_json::Value) -> ToolOutput {
    ToolRegistry::builtin()
        .get(tool)
        .unwrap()
        .run(args, ctx)
        .await
}

/// Commands that each try to change a covered path without the bash reader's help.
const SHAPES: &[&str] = &[
    "cd secrets && echo x > k",
    "printf x | dd of=secrets/k",
    "python3 -c \"open('secrets/k','w').write('x')\"",
    "perl -e 'open(F, \">\", \"secrets/k\") or die \"$!\\n\"; print F \"x\"; close F or die \"$!\\n\"'",
    "sh -c 'echo x > secrets/k'",
    "awk 'BEGIN { print \"x\" > \"secrets/k\" }'",
    "install -m 600 src/a.txt secrets/k",
    "cp src/a.txt secrets/k",
    "mv src/a.txt secrets/moved && cp secrets/moved src/a.txt",
    "echo x | tee secrets/k",
    "tar -xf evil.tar",
    "unzip -o evil.zip",
    "cp .git/index idx.tmp && GIT_INDEX_FILE=idx.tmp git checkout -- .",
    "ln -s secrets/k lnk && echo x > lnk",
    "ln -s secrets dirlink && echo x > dirlink/new",
    "echo B=2 > config/new.env",
    "mkdir -p deep/er && echo C=3 > deep/er/made.env",
    "rm secrets/k",
    "rm -rf secrets",
    "chmod 777 secrets/k",
    "chmod 700 secrets/sub",
    "mkdir -p elsewhere && mv secrets elsewhere/",
    "echo more >> config/app.env",
    "truncate -s 0 secrets/k",
    "sed -i s/secret/x/ secrets/k",
    "touch secrets/new",
    "cd secrets/sub && python3 -c \"import os; os.rename('k2', 'k3')\"",
    "ln secrets/k hard && echo x >> hard",
    "find . -path ./secrets/k -exec sh -c 'echo x > \"$1\"' _ {} \\;",
    "mv config/app.env config/app.txt",
    "rm secrets/k && mkdir secrets/k",
    "x=secrets; node -e \"require('fs').writeFileSync(process.argv[1] + '/k', 'x')\" $x",
];

async fn run_shapes(mode: SandboxMode) -> Vec<String> {
    let mut failures = Vec::new();
    for (i, shape) in SHAPES.iter().enumerate() {
        let r = rig(mode);
        let initial = covered_state(&r.ws);
        let marker = r.ws.join(format!("src/ran-{i}"));
        let cmd = format!("{shape}; echo ran > '{}'", marker.display());
        let out = call(&r.ctx, "bash", json!({ "command": cmd })).await;
        let now = covered_state(&r.ws);
        let notes = r.notes.0.lock().unwrap().clone();
        let told_model = RULES.iter().any(|rule| out.text.contains(rule));
        let undone = out.text.contains("denied write undone");
        let mut why = Vec::new();
        if now != initial {
            why.push(format!(
                "covered paths changed:\n  before {initial:?}\n  after  {now:?}"
            ));
        }
        if !marker.exists() {
            why.push("the uncovered write of the same command did not stay".into());
        }
        if !told_model {
            why.push("the result names no rule".into());
        }
        if undone == notes.is_empty() {
            why.push(format!(
                "undone in the result: {undone}, notices: {notes:?}"
            ));
        }
        if undone && !out.is_error {
            why.push("an undone write is not an error result".into());
        }
        if mode == SandboxMode::Off && !undone {
            why.push("without the sandbox the change must have been undone".into());
        }
        let line = format!("{mode:?} #{i} `{shape}`");
        if why.is_empty() {
            eprintln!("ok   {line}");
        } else {
            eprintln!("FAIL {line}: {}\n  result: {}", why.join("; "), out.text);
            failures.push(line.clone());
        }
        // What was undone is kept for the user, never lost.
        if undone && out.text.contains("created") {
            assert!(r.quarantine.exists(), "{line}: nothing kept");
        }
    }
    failures
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn covered_paths_survive_every_shape_under_bubblewrap() {
    let failures = run_shapes(SandboxMode::Enforce).await;
    assert!(failures.is_empty(), "failed: {failures:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn covered_paths_survive_every_shape_with_the_sandbox_off() {
    let failures = run_shapes(SandboxMode::Off).await;
    assert!(failures.is_empty(), "failed: {failures:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_job_is_checked_when_it_ends() {
    for mode in [SandboxMode::Enforce, SandboxMode::Off] {
        let r = rig(mode);
        let initial = covered_state(&r.ws);
        let started = call(
            &r.ctx,
            "bash",
            json!({"command": "sleep 0.3; python3 -c \"open('config/bg.env','w').write('x')\"; echo bg-done", "run_in_background": true}),
        )
        .await;
        assert!(!started.is_error, "{}", started.text);
        let waited = call(&r.ctx, "wait", json!({"job_ids": ["job_1"]})).await;
        assert!(
            waited.text.contains("exited with code 0"),
            "{}",
            waited.text
        );
        let out = call(&r.ctx, "bash_output", json!({"job_id": "job_1"})).await;
        assert!(out.text.contains("bg-done"), "{}", out.text);
        assert!(
            out.text
                .contains("created `config/bg.env` (denied by `Edit(**/*.env)`): removed"),
            "{mode:?}: {}",
            out.text
        );
        assert_eq!(covered_state(&r.ws), initial, "{mode:?}");
        let notes = r.notes.0.lock().unwrap().clone();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("config/bg.env"), "{notes:?}");
        // The command's version is kept for the user.
        let kept: Vec<PathBuf> = walk_files(&r.quarantine);
        assert!(
            kept.iter().any(|p| p.ends_with("config/bg.env")),
            "{kept:?}"
        );
    }
}

/// A call started while a background job runs is checked against the state before the
/// job: what the job wrote meanwhile is not the call's starting point, so when the job's
/// own check has removed it, the call's check does not put it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_overlapping_a_job_does_not_bring_back_what_the_job_wrote() {
    for mode in [SandboxMode::Enforce, SandboxMode::Off] {
        let r = rig(mode);
        let initial = covered_state(&r.ws);
        let started = call(
            &r.ctx,
            "bash",
            json!({"command": "python3 -c \"open('config/bg.env','w').write('x')\"; sleep 1", "run_in_background": true}),
        )
        .await;
        assert!(!started.is_error, "{}", started.text);
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        while !r.ws.join("config/bg.env").exists() && Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(r.ws.join("config/bg.env").exists(), "the job did not write");
        // Starts while the job's file exists; ends after the job's check removed it.
        let out = call(&r.ctx, "bash", json!({"command": "sleep 2; echo fg"})).await;
        assert_eq!(out.text, "fg\n", "{mode:?}");
        let waited = call(&r.ctx, "wait", json!({"job_ids": ["job_1"]})).await;
        assert!(waited.text.contains("exited"), "{}", waited.text);
        assert_eq!(
            covered_state(&r.ws),
            initial,
            "{mode:?}: the job's write came back"
        );
        let bg = call(&r.ctx, "bash_output", json!({"job_id": "job_1"})).await;
        assert!(
            bg.text
                .contains("created `config/bg.env` (denied by `Edit(**/*.env)`): removed"),
            "{}",
            bg.text
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_is_checked_too() {
    let r = rig(SandboxMode::Off);
    let initial = covered_state(&r.ws);
    let run = call(
        &r.ctx,
        "bash",
        json!({"command": "echo x > secrets/k; sleep 30"}),
    );
    // The call is dropped while the command sleeps (as a cancelled turn drops it).
    let _ = tokio::time::timeout(std::time::Duration::from_millis(800), run).await;
    let deadline = Instant::now() + std::time::Duration::from_secs(5);
    while covered_state(&r.ws) != initial && Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(covered_state(&r.ws), initial);
    let notes = r.notes.0.lock().unwrap().clone();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("modified `secrets/k` (`Edit(secrets/**)`): restored")),
        "{notes:?}"
    );
}

fn walk_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_and_the_user_read_what_was_undone() {
    let r = rig(SandboxMode::Off);
    let out = call(
        &r.ctx,
        "bash",
        json!({"command": "python3 -c \"open('secrets/k','a').write('x'); open('secrets/new','w').write('n')\"; rm secrets/sub/k2; echo out"}),
    )
    .await;
    assert!(out.is_error);
    let expected = "out\n[denied write undone: bash may not change paths that a deny rule on edits covers; what this command did there was reverted]\n\
- modified `secrets/k` (denied by `Edit(secrets/**)`): restored\n\
- created `secrets/new` (denied by `Edit(secrets/**)`): removed\n\
- deleted `secrets/sub/k2` (denied by `Edit(secrets/**)`): restored\n\
Do not retry this or work around it: the user's deny rules protect these paths. Ask the user if the change is needed.";
    assert_eq!(out.text, expected);
    let notes = r.notes.0.lock().unwrap().clone();
    assert_eq!(notes.len(), 1);
    let kept_in = r.quarantine.display().to_string();
    assert!(
        notes[0].starts_with("denied write undone after bash `python3 -c"),
        "{}",
        notes[0]
    );
    assert!(
        notes[0].contains(&format!("kept in {kept_in}/")),
        "{}",
        notes[0]
    );
    // The command's versions: the appended secret and the new file.
    let kept = walk_files(&r.quarantine);
    let modified = kept.iter().find(|p| p.ends_with("secrets/k")).unwrap();
    assert_eq!(std::fs::read_to_string(modified).unwrap(), "secret\nx");
    assert!(kept.iter().any(|p| p.ends_with("secrets/new")));
    // Mode and content are back.
    let k2 = r.ws.join("secrets/sub/k2");
    assert_eq!(std::fs::read_to_string(&k2).unwrap(), "two\n");
    assert_eq!(
        std::fs::metadata(&k2).unwrap().permissions().mode() & 0o7777,
        0o600
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_write_under_the_sandbox_names_the_rule() {
    let r = rig(SandboxMode::Enforce);
    let out = call(
        &r.ctx,
        "bash",
        json!({"command": "cd secrets && echo x > k"}),
    )
    .await;
    assert!(out.text.contains("Read-only file system"), "{}", out.text);
    assert!(
        out.text.contains("the sandbox mounts the paths covered by the deny rules `Edit(secrets/**)`, `Edit(**/*.env)` read-only"),
        "{}",
        out.text
    );
    assert!(r.notes.0.lock().unwrap().is_empty());
    // What was mounted read-only: the covered file, and `secrets` as a whole (its subtree
    // is covered); the same list any sandbox mechanism gets.
    let guard = r.ctx.deny_guard.as_ref().unwrap();
    let scope = guard.scope(&r.ctx.sandbox);
    assert_eq!(
        reasonix_remote::tools::deny_guard::read_only_paths(guard.rules(), &scope),
        vec![r.ws.join("config/app.env"), r.ws.join("secrets")]
    );
    // Writes elsewhere are untouched by the guard.
    let out = call(
        &r.ctx,
        "bash",
        json!({"command": "echo ok > src/b.txt && cat src/b.txt"}),
    )
    .await;
    assert_eq!(out.text, "ok\n");
}

/// Without a deny rule on file writers there is no guard, so bash pays nothing; with one,
/// the cost of a call over a workspace of 5000 files is measured and printed, with the
/// sandbox off and under bubblewrap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guard_costs_nothing_without_rules_and_little_with_them() {
    let policy = Policy::new(
        Mode::Yolo,
        &[],
        &[],
        &["Bash(rm:*)".to_string(), "Edit".to_string()],
    )
    .unwrap();
    assert!(policy.write_deny_rules().is_empty());
    assert!(DenyGuard::new(policy.write_deny_rules(), PathBuf::from("/q"), Vec::new()).is_none());
    for mode in [SandboxMode::Off, SandboxMode::Enforce] {
        let r = rig(mode);
        for d in 0..50 {
            for f in 0..100 {
                write(&r.ws.join(format!("tree/d{d}/f{f}.txt")), "x\n", 0o644);
            }
        }
        let mut plain = r.ctx.clone();
        plain.deny_guard = None;
        let time = |ctx: ToolContext| async move {
            let t = Instant::now();
            for _ in 0..10 {
                let out = call(&ctx, "bash", json!({"command": "true"})).await;
                assert!(!out.is_error, "{}", out.text);
            }
            t.elapsed() / 10
        };
        let without = time(plain).await;
        let with = time(r.ctx.clone()).await;
        eprintln!(
            "{mode:?}: bash `true` over 5000 files: {without:?} without a deny rule on edits, {with:?} with `Edit(secrets/**)` + `Edit(**/*.env)`"
        );
        assert!(
            with < without + std::time::Duration::from_millis(500),
            "the guard costs {with:?} against {without:?}"
        );
    }
}
