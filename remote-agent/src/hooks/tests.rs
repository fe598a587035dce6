#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use reasonix_forward::hooks::{HookDecl, HookEvent, HookFail, HookSettings, TrustedHookFile};
use serde_json::json;

use super::*;

fn hook(event: HookEvent, fail: HookFail) -> Hook {
    let decl = HookDecl {
        event: event.as_str().into(),
        matcher: None,
        command: "x".into(),
        timeout_ms: Some(100),
        fail: (event == HookEvent::PreToolUse).then_some(fail),
        run_on: None,
    };
    let (mut hooks, problems) = parse::check_decls(&Source::User, &[decl]);
    assert!(problems.is_empty(), "{problems:?}");
    hooks.remove(0)
}

fn exited(code: i32, stdout: &str, stderr: &str) -> Outcome {
    Outcome::Exited {
        code,
        stdout: stdout.into(),
        stderr: stderr.into(),
    }
}

#[test]
fn exit_2_blocks_blocking_events_only() {
    let pre = hook(HookEvent::PreToolUse, HookFail::Open);
    let e = effect(&pre, &exited(2, "", "no rm -rf here\n"));
    assert_eq!(e.block.as_deref(), Some("no rm -rf here"));
    let prompt = hook(HookEvent::UserPromptSubmit, HookFail::Open);
    assert!(effect(&prompt, &exited(2, "", "nope")).block.is_some());
    let post = hook(HookEvent::PostToolUse, HookFail::Open);
    let e = effect(&post, &exited(2, "", "lint failed"));
    assert_eq!(e.block, None);
    assert_eq!(e.model_note.as_deref(), Some("lint failed"));
    let stop = hook(HookEvent::Stop, HookFail::Open);
    let e = effect(&stop, &exited(2, "", "x"));
    assert_eq!(e.block, None);
    assert!(e.notice.is_some());
}

#[test]
fn other_exits_are_reported_and_block_nothing() {
    let pre = hook(HookEvent::PreToolUse, HookFail::Closed);
    let e = effect(&pre, &exited(1, "", "oops\nmore"));
    assert_eq!(e.block, None);
    assert!(e.notice.unwrap().ends_with("exited 1: oops"));
}

#[test]
fn stdout_is_context_for_prompt_events() {
    let start = hook(HookEvent::SessionStart, HookFail::Open);
    assert_eq!(
        effect(&start, &exited(0, "branch: main\n", ""))
            .context
            .as_deref(),
        Some("branch: main")
    );
    let post = hook(HookEvent::PostToolUse, HookFail::Open);
    assert_eq!(effect(&post, &exited(0, "formatted", "")).context, None);
}

#[test]
fn failures_block_only_fail_closed_pre_tool_use() {
    let open = hook(HookEvent::PreToolUse, HookFail::Open);
    let closed = hook(HookEvent::PreToolUse, HookFail::Closed);
    let prompt = hook(HookEvent::UserPromptSubmit, HookFail::Open);
    for outcome in [
        Outcome::TimedOut {
            stderr: String::new(),
        },
        Outcome::Crashed("killed by signal 9".into()),
        Outcome::Denied("rule Bash(curl:*)".into()),
    ] {
        assert_eq!(effect(&open, &outcome).block, None, "{outcome:?}");
        assert_eq!(effect(&prompt, &outcome).block, None, "{outcome:?}");
        let e = effect(&closed, &outcome);
        assert!(e.block.unwrap().contains("fail-closed"), "{outcome:?}");
        assert!(e.notice.is_some());
    }
}

#[test]
fn load_marks_project_hooks_by_trust() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".reasonix")).unwrap();
    std::fs::write(
        dir.path().join(".reasonix/hooks.toml"),
        "[[hooks]]\nevent = \"Stop\"\ncommand = \"touch stop\"\n",
    )
    .unwrap();
    let user = HookDecl {
        event: "Stop".into(),
        matcher: None,
        command: "true".into(),
        timeout_ms: None,
        fail: None,
        run_on: None,
    };
    let mut settings = HookSettings {
        user: vec![user],
        trusted: Vec::new(),
    };
    let loaded = load(dir.path(), &settings);
    assert_eq!(loaded.hooks.len(), 2);
    assert_eq!(loaded.runnable(HookEvent::Stop, None).len(), 1);
    assert_eq!(loaded.untrusted_files().len(), 1);
    let f = &loaded.files[0];
    settings.trusted.push(TrustedHookFile {
        path: f.path.clone(),
        sha256: f.sha256.clone(),
    });
    let loaded = load(dir.path(), &settings);
    assert_eq!(loaded.runnable(HookEvent::Stop, None).len(), 2);
    assert!(loaded.untrusted_files().is_empty());
    let r = report(&loaded, &HashMap::new());
    assert!(r.hooks.iter().all(|h| h.trusted));
    assert_eq!(
        r.files[0].content,
        "[[hooks]]\nevent = \"Stop\"\ncommand = \"touch stop\"\n"
    );
}

fn env_ctx(dir: &std::path::Path) -> crate::tools::ToolContext {
    crate::tools::ToolContext::new(dir, Arc::new(crate::sandbox::Sandbox::off(dir)))
}

/// Real processes (unconfined sandbox): stdin carries the event, stdout becomes context,
/// a timeout is reported and blocks nothing, an untrusted file is told about once.
#[tokio::test]
async fn fire_runs_real_processes() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = SessionHooks::new(dir.path());
    let decl = |event: &str, command: &str, timeout_ms: Option<u64>| HookDecl {
        event: event.into(),
        matcher: None,
        command: command.into(),
        timeout_ms,
        fail: None,
        run_on: None,
    };
    hooks.set_settings(HookSettings {
        user: vec![
            decl(
                "UserPromptSubmit",
                "cat > stdin.json; echo context-from-hook",
                None,
            ),
            decl("PreToolUse", "sleep 5", Some(200)),
        ],
        trusted: Vec::new(),
    });
    std::fs::create_dir_all(dir.path().join(".reasonix")).unwrap();
    std::fs::write(
        dir.path().join(".reasonix/hooks.toml"),
        "[[hooks]]\nevent = \"UserPromptSubmit\"\ncommand = \"touch pwned\"\n",
    )
    .unwrap();
    let notices = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink: NoticeFn = {
        let n = Arc::clone(&notices);
        Arc::new(move |t: String| n.lock().unwrap().push(t))
    };
    let allow: DenyCheck = Arc::new(|_: &str| None);
    let env = || FireEnv {
        session_id: "s1".into(),
        ctx: env_ctx(dir.path()),
        denied: Arc::clone(&allow),
        notice: Arc::clone(&sink),
    };
    for _ in 0..2 {
        let v = hooks
            .fire(
                Input::new(HookEvent::UserPromptSubmit)
                    .subject("hello")
                    .with("prompt", json!("hello")),
                env(),
            )
            .await;
        assert_eq!(v.block, None);
        assert_eq!(v.context, vec!["context-from-hook".to_string()]);
    }
    let stdin: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("stdin.json")).unwrap()).unwrap();
    assert_eq!(stdin["hook_event_name"], "UserPromptSubmit");
    assert_eq!(stdin["session_id"], "s1");
    assert_eq!(stdin["prompt"], "hello");
    assert!(!dir.path().join("pwned").exists(), "untrusted hook ran");
    let told: Vec<String> = notices.lock().unwrap().clone();
    assert_eq!(
        told.iter().filter(|n| n.contains("not trusted")).count(),
        1,
        "{told:?}"
    );
    let v = hooks
        .fire(Input::new(HookEvent::PreToolUse).subject("bash"), env())
        .await;
    assert_eq!(v.block, None);
    assert!(notices
        .lock()
        .unwrap()
        .iter()
        .any(|n| n.contains("timed out after 200 ms")));
    let r = hooks.report();
    assert!(r.hooks[1]
        .last_run
        .as_deref()
        .unwrap()
        .contains("timed out"));
    // A policy denial is not a run.
    let deny: DenyCheck =
        Arc::new(|c: &str| c.starts_with("cat").then(|| "Bash(cat:*)".to_string()));
    let v = hooks
        .fire(
            Input::new(HookEvent::UserPromptSubmit).subject("x"),
            FireEnv {
                session_id: "s1".into(),
                ctx: env_ctx(dir.path()),
                denied: deny,
                notice: Arc::clone(&sink),
            },
        )
        .await;
    assert!(v.context.is_empty());
    assert!(notices
        .lock()
        .unwrap()
        .iter()
        .any(|n| n.contains("denied by the permission policy: Bash(cat:*)")));
}
