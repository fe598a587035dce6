//! Memory in real sessions (in-process rig: real session, journal, tools and stores, a
//! scripted gateway): a project fact remembered in one session is recalled into a later
//! session's user message and never into the system prompt; the write policy asks for what
//! the modes may not decide (yolo included), refuses headless without
//! `--allow-memory-writes`, refuses secrets; global facts from the laptop are recalled and
//! leave no file on the host when not recalled.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod turn_support;

use std::path::Path;
use std::sync::Arc;

use reasonix_forward::policy::{PermissionMode, SessionPolicy};
use reasonix_forward::proto::{
    ApprovalDecision, EventKind, MemoryFile, MemorySettings, SessionSettings, TurnOutcome,
};
use reasonix_remote::session::{DriverLink, Session};
use serde_json::{json, Value};
use turn_support::{Reply, Rig};

fn yolo() -> SessionSettings {
    let mut s = turn_support::yolo_unconfined();
    s.policy = SessionPolicy {
        mode: PermissionMode::Yolo,
        ..s.policy
    };
    s
}

fn project_store(rig: &Rig) -> std::path::PathBuf {
    reasonix_forward::memory::project_dir(&rig.paths.home, &rig.paths.key)
}

fn tool_output(rig: &Rig, call: &str) -> (bool, String) {
    rig.events()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::ToolFinished {
                call_id,
                is_error,
                output,
                ..
            } if call_id == call => Some((is_error, output)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result for {call}:\n{}", rig.dump()))
}

fn last_user(req: &reasonix_forward::proto::ProviderRequest) -> String {
    req.messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn system(req: &reasonix_forward::proto::ProviderRequest) -> Value {
    req.messages[0].clone()
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let Ok(meta) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(p);
            } else if meta.is_file() {
                let bytes = std::fs::read(&p).unwrap_or_default();
                if bytes.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                    out.push(p.display().to_string());
                }
            }
        }
    }
    out
}

#[tokio::test]
async fn a_project_fact_is_remembered_silently_and_recalled_in_the_next_session() {
    // Mode ask: a new project fact is still written without asking.
    let rig = Rig::start(
        turn_support::settings(),
        vec![
            Reply::call(
                "c1",
                "remember",
                json!({"content": "We use Postgres 16; SQLite was ruled out because it has no concurrent writers.", "type": "project", "scope": "project", "keywords": ["database"]}),
            ),
            Reply::answer("noted"),
        ],
    )
    .await;
    rig.submit("remember our database decision");
    assert_eq!(rig.finished(1).await.0, TurnOutcome::Completed);
    let (is_error, out) = tool_output(&rig, "c1");
    assert!(!is_error, "{out}");
    assert!(out.starts_with("remembered project fact m-"), "{out}");
    assert!(!rig
        .events()
        .iter()
        .any(|e| matches!(e.kind, EventKind::ApprovalRequested { .. })));
    let files: Vec<_> = std::fs::read_dir(project_store(&rig))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "md"))
        .collect();
    assert_eq!(files.len(), 1);

    // A new session in the same workspace (a fresh journal).
    let journal = rig.paths.sessions_dir.join("s2.jsonl");
    let snapshot = rig.runtime.mcp.refresh().await;
    let (s2, _) = Session::open(
        "s2",
        &journal,
        Arc::clone(&rig.runtime),
        &rig.paths.workspace,
        snapshot.manager,
    )
    .unwrap();
    let gw = turn_support::FakeGateway::new(7, vec![Reply::answer("ok"), Reply::answer("ok")]);
    let settings = turn_support::settings();
    let enforced = reasonix_remote::project::enforce(
        &settings.policy,
        &rig.paths.workspace,
        &rig.runtime.tool_ctx,
    )
    .unwrap();
    s2.set_driver(
        Some(Arc::clone(&gw) as Arc<dyn DriverLink>),
        Some((settings, enforced)),
    );
    assert!(s2.submit("r1", "hello there").unwrap());
    gw.wait_requests(1).await;
    wait_idle(&s2).await;
    assert!(s2
        .submit("r2", "can we switch the database to sqlite?")
        .unwrap());
    gw.wait_requests(2).await;
    let reqs = gw.requests();
    assert!(
        !last_user(&reqs[0]).contains("recalled-memory"),
        "nothing matched 'hello there'"
    );
    let recalled = last_user(&reqs[1]);
    assert!(
        recalled.starts_with("can we switch the database to sqlite?\n\n<recalled-memory"),
        "{recalled}"
    );
    assert!(recalled.contains("SQLite was ruled out"), "{recalled}");
    // The prefix is byte-identical and the second request extends the first.
    assert_eq!(system(&reqs[0]), system(&reqs[1]));
    assert_eq!(reqs[0].tools, reqs[1].tools);
    assert_eq!(
        &reqs[1].messages[..reqs[0].messages.len()],
        &reqs[0].messages[..]
    );
    assert!(!system(&reqs[1])
        .to_string()
        .contains("SQLite was ruled out"));
    // A reload of the journal rebuilds the same bytes (the recall is journaled with the turn).
    wait_idle(&s2).await;
    s2.flush_journal().await.unwrap();
    let text = std::fs::read_to_string(&journal).unwrap();
    assert!(
        text.contains("memory:recall"),
        "the recall is journaled with the turn"
    );
}

async fn wait_idle(s: &Session) {
    for _ in 0..300 {
        if s.state() == reasonix_forward::proto::TurnState::Idle {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("session never became idle");
}

#[tokio::test]
async fn yolo_does_not_answer_a_global_remember_and_headless_refuses_it() {
    let rig = Rig::start(
        yolo(),
        vec![
            Reply::call(
                "c1",
                "remember",
                json!({"content": "The user prefers answers in Chinese.", "type": "user", "scope": "global"}),
            ),
            Reply::answer("ok"),
        ],
    )
    .await;
    rig.submit("remember that I like Chinese answers");
    let asked = rig
        .wait_for("the approval question", |e| {
            matches!(e.kind, EventKind::ApprovalRequested { .. })
        })
        .await;
    let EventKind::ApprovalRequested {
        approval_id,
        reason,
        ..
    } = asked.kind
    else {
        unreachable!()
    };
    assert!(reason.contains("global fact"), "{reason}");
    assert!(rig
        .session
        .approve(&rig.request_id(), &approval_id, ApprovalDecision::AllowOnce)
        .await
        .unwrap());
    assert_eq!(rig.finished(1).await.0, TurnOutcome::Completed);
    let (is_error, out) = tool_output(&rig, "c1");
    assert!(!is_error, "{out}");
    assert!(
        out.contains("<memory-file name=\"m-"),
        "the laptop gets the file: {out}"
    );
    // Nothing global lands in the project store.
    assert!(files_containing(&project_store(&rig), "Chinese").is_empty());

    // Headless, without --allow-memory-writes: refused with a message to the model.
    let rig = Rig::start(
        yolo(),
        vec![
            Reply::call(
                "c1",
                "remember",
                json!({"content": "The user prefers tabs.", "type": "user", "scope": "global"}),
            ),
            Reply::answer("ok"),
        ],
    )
    .await;
    rig.gateway.set_headless(true);
    rig.submit("remember tabs");
    assert_eq!(rig.finished(1).await.0, TurnOutcome::Completed);
    let (is_error, out) = tool_output(&rig, "c1");
    assert!(is_error);
    assert!(
        out.contains("memory write refused") && out.contains("--allow-memory-writes"),
        "{out}"
    );

    // Headless with --allow-memory-writes: written (for the laptop) without asking.
    let mut settings = yolo();
    settings.memory.allow_writes = true;
    let rig = Rig::start(
        settings,
        vec![
            Reply::call(
                "c1",
                "remember",
                json!({"content": "The user prefers tabs.", "type": "user", "scope": "global"}),
            ),
            Reply::answer("ok"),
        ],
    )
    .await;
    rig.gateway.set_headless(true);
    rig.submit("remember tabs");
    assert_eq!(rig.finished(1).await.0, TurnOutcome::Completed);
    let (is_error, out) = tool_output(&rig, "c1");
    assert!(!is_error, "{out}");
}

#[tokio::test]
async fn secrets_are_refused_and_forget_always_asks() {
    let rig = Rig::start(
        yolo(),
        vec![
            Reply::call(
                "c1",
                "remember",
                json!({"content": "deploy token: ghp_abcdefghijklmnopqrstuvwxyz0123456789", "type": "project", "scope": "project"}),
            ),
            Reply::call(
                "c2",
                "remember",
                json!({"content": "Releases are cut on Tuesdays.", "type": "project", "scope": "project", "subject": "release-day"}),
            ),
            Reply::call(
                "c3",
                "remember",
                json!({"content": "Releases are cut on Thursdays now.", "type": "project", "scope": "project", "subject": "release-day"}),
            ),
            Reply::answer("ok"),
        ],
    )
    .await;
    rig.gateway.set_headless(true);
    rig.submit("remember things");
    assert_eq!(rig.finished(1).await.0, TurnOutcome::Completed);
    let (is_error, out) = tool_output(&rig, "c1");
    assert!(is_error && out.contains("GitHub token"), "{out}");
    assert!(
        !out.contains("abcdefghijklmnop"),
        "the secret is echoed: {out}"
    );
    assert!(
        files_containing(&rig.paths.home, "abcdefghijklmnop")
            .iter()
            .all(|f| f.ends_with(".jsonl")),
        "only the journal (the model's own call) holds it"
    );
    let (is_error, out) = tool_output(&rig, "c2");
    assert!(!is_error, "{out}");
    // Updating a subject needs approval: headless refuses it.
    let (is_error, out) = tool_output(&rig, "c3");
    assert!(is_error && out.contains("updates subject"), "{out}");
    let id = out
        .split("fact ")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .to_string();

    // forget asks even in yolo; headless refuses; an unknown id is refused at once.
    rig.gateway.push(Reply::call(
        "c4",
        "forget",
        json!({"id": id, "reason": "wrong"}),
    ));
    rig.gateway.push(Reply::call(
        "c5",
        "forget",
        json!({"id": "m-nope", "reason": "x"}),
    ));
    rig.gateway.push(Reply::answer("ok"));
    rig.submit("forget it");
    assert_eq!(rig.finished(2).await.0, TurnOutcome::Completed);
    let (is_error, out) = tool_output(&rig, "c4");
    assert!(
        is_error && out.contains("memory write refused") && out.contains("forgets"),
        "{out}"
    );
    let (is_error, out) = tool_output(&rig, "c5");
    assert!(is_error && out.contains("no fact with id"), "{out}");
    assert!(project_store(&rig).join(format!("{id}.md")).exists());
}

#[tokio::test]
async fn global_facts_are_recalled_and_an_unrecalled_one_leaves_no_trace_on_the_host() {
    let fact = |id: &str, body: &str| {
        MemoryFile {
        name: format!("{id}.md"),
        text: format!(
            "---\nid: {id}\nrevision: 1\ntype: user\nscope: global\ncreated: 2026-12-01T00:00:00Z\n---\n{body}\n"
        ),
    }
    };
    let mut settings = turn_support::settings();
    settings.memory = MemorySettings {
        global: vec![
            fact(
                "g-editor",
                "The user edits with helix-zebracorn-17 and wants no vim hints.",
            ),
            fact(
                "g-lang",
                "The user writes commit messages in Esperanto-quokka-23.",
            ),
            MemoryFile {
                name: "bad.md".into(),
                text: "not a fact".into(),
            },
        ],
        allow_writes: false,
    };
    let rig = Rig::start(settings, vec![Reply::answer("ok"), Reply::answer("ok")]).await;
    rig.submit("which editor keybindings should the docs show?");
    rig.gateway.wait_requests(1).await;
    assert_eq!(rig.finished(1).await.0, TurnOutcome::Completed);
    let req = &rig.gateway.requests()[0];
    let user = last_user(req);
    assert!(user.contains("helix-zebracorn-17"), "{user}");
    assert!(!user.contains("quokka"), "{user}");
    assert!(rig
        .events()
        .iter()
        .any(|e| matches!(&e.kind, EventKind::Notice { text } if text.contains("bad.md"))));
    rig.session.flush_journal().await.unwrap();
    // The recalled one is part of the conversation's journal; the other is nowhere.
    assert!(!files_containing(&rig.paths.home, "helix-zebracorn-17").is_empty());
    assert_eq!(
        files_containing(&rig.paths.home, "Esperanto-quokka-23"),
        Vec::<String>::new()
    );
    assert_eq!(
        files_containing(rig.workspace(), "Esperanto-quokka-23"),
        Vec::<String>::new()
    );
}
