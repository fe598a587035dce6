//! Memory end to end in local mode: the real `reasonix` binary, the real `reasonix-remote`
//! daemon over pipes, the scripted mock provider over HTTP, real fact files.
//!
//! - A project fact remembered in one `reasonix run` is recalled, in the request the mock
//!   provider logged, by the next session after the daemon was stopped and restarted.
//! - A headless run refuses a global `remember` (exit 4, a message to the model) unless
//!   `--allow-memory-writes`; with it, the laptop writes the fact to its global store, and
//!   the next session (another process, another daemon) recalls it over the link.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

const KEY: &str = "sk-test-MEM-5a4b3c2d1e0f";

use common::{text, LocalRig as Env};

fn setup(base_url: &str) -> Env {
    let config = common::mock_config(base_url, "mock-model", "RX_MEM_KEY", "");
    Env::with_config(&config, "RX_MEM_KEY", KEY)
}

async fn run(env: &Env, args: &[&str]) -> std::process::Output {
    common::run_async(env, args, 60).await
}

fn daemon_pid(env: &Env) -> Option<i32> {
    for e in std::fs::read_dir(env.home.join("sessions")).ok()?.flatten() {
        if let Ok(b) = std::fs::read(e.path().join("daemon.json")) {
            let v: Value = serde_json::from_slice(&b).ok()?;
            if v["clean"].as_bool() == Some(true) {
                return None;
            }
            return v["pid"].as_u64().map(|p| p as i32);
        }
    }
    None
}

async fn stop_daemon(env: &Env) {
    let pid = daemon_pid(env).expect("a running daemon");
    // SAFETY: kill(2) of the daemon this test started (its pid from its own marker).
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    for _ in 0..300 {
        // SAFETY: signal 0 only probes whether the pid exists.
        if unsafe { libc::kill(pid, 0) } != 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the daemon did not stop");
}

fn last_user(req: &[Value]) -> String {
    req.iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn md_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_fact_is_recalled_by_the_next_session_after_a_daemon_restart() {
    let fact = "We deploy with the Helm chart in deploy/chart; kubectl apply by hand is forbidden.";
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_m",
                "remember",
                &json!({"content": fact, "type": "project", "scope": "project", "keywords": ["deployment"]})
                    .to_string(),
            )],
            3,
        ),
        MockReply::text(&["Noted."]),
        MockReply::text(&["Use the Helm chart."]),
    ])
    .await;
    let env = setup(&mock.base_url());
    // Permission mode ask (the default): a new project fact is written without asking.
    let first = run(&env, &["run", "--json", "remember how we deploy"]).await;
    assert!(first.status.success(), "{}", text(&first));
    let out = text(&first);
    assert!(out.contains("remembered project fact m-"), "{out}");
    let key = reasonix_forward::memory::workspace_key(&env.ws.canonicalize().unwrap());
    let store = reasonix_forward::memory::project_dir(&env.home, &key);
    let files = md_files(&store);
    assert_eq!(files.len(), 1, "{}", store.display());
    assert!(std::fs::read_to_string(&files[0])
        .unwrap()
        .contains("kubectl apply by hand"));

    stop_daemon(&env).await;

    // A new session (no --continue) in a new daemon.
    let second = run(&env, &["run", "--json", "how do I deploy the new service?"]).await;
    assert!(second.status.success(), "{}", text(&second));
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3);
    let msgs = reqs[2].messages();
    let user = last_user(&msgs);
    assert!(
        user.starts_with("how do I deploy the new service?\n\n<recalled-memory"),
        "{user}"
    );
    assert!(
        user.contains("kubectl apply by hand is forbidden"),
        "{user}"
    );
    assert!(
        !msgs[0].to_string().contains("kubectl apply by hand"),
        "recall must never enter the system prompt"
    );
    // The same system prompt as the first session: recall changed no prefix.
    assert_eq!(reqs[0].messages()[0], msgs[0]);

    // The command line sees the same files.
    let id = files[0].file_stem().unwrap().to_string_lossy().to_string();
    let list = run(&env, &["memory", "list"]).await;
    assert!(
        String::from_utf8_lossy(&list.stdout).contains(&id),
        "{}",
        text(&list)
    );
    let forget = run(&env, &["memory", "forget", &id]).await;
    assert!(forget.status.success(), "{}", text(&forget));
    assert!(md_files(&store).is_empty());
    assert_eq!(md_files(&store.join("archive")).len(), 1);
    let restore = run(&env, &["memory", "restore", &id]).await;
    assert!(restore.status.success(), "{}", text(&restore));
    assert_eq!(md_files(&store).len(), 1);
    let secret = run(&env, &["memory", "add", "password=hunter2hunter2"]).await;
    assert_eq!(secret.status.code(), Some(2), "{}", text(&secret));
    assert!(String::from_utf8_lossy(&secret.stderr).contains("password="));
    assert_eq!(md_files(&store).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_headless_global_remember_needs_allow_memory_writes_and_lands_on_the_laptop() {
    let remember = || {
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_g",
                "remember",
                &json!({"content": "The user reviews diffs in the kakoune-narwhal-88 editor.", "type": "user", "scope": "global"})
                    .to_string(),
            )],
            3,
        )
    };
    let mock = MockProvider::start(vec![
        remember(),
        MockReply::text(&["I could not save it."]),
        remember(),
        MockReply::text(&["Saved."]),
        MockReply::text(&["Kakoune."]),
    ])
    .await;
    let env = setup(&mock.base_url());
    let global = reasonix_forward::memory::global_dir(&env.home);

    let refused = run(&env, &["run", "--json", "--yolo", "remember my editor"]).await;
    assert_eq!(refused.status.code(), Some(4), "{}", text(&refused));
    let out = text(&refused);
    assert!(
        out.contains("memory write refused") && out.contains("--allow-memory-writes"),
        "{out}"
    );
    assert!(md_files(&global).is_empty());

    let allowed = run(
        &env,
        &[
            "run",
            "--json",
            "--allow-memory-writes",
            "remember my editor",
        ],
    )
    .await;
    assert!(allowed.status.success(), "{}", text(&allowed));
    let files = md_files(&global);
    assert_eq!(files.len(), 1, "the laptop writes the global fact");
    let written = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        written.contains("scope: global") && written.contains("kakoune-narwhal-88"),
        "{written}"
    );
    // The host's project store got nothing.
    let key = reasonix_forward::memory::workspace_key(&env.ws.canonicalize().unwrap());
    assert!(md_files(&reasonix_forward::memory::project_dir(&env.home, &key)).is_empty());

    // The next session recalls it: sent with the open, found by the question.
    let third = run(
        &env,
        &["run", "--json", "which editor do I review diffs in?"],
    )
    .await;
    assert!(third.status.success(), "{}", text(&third));
    let reqs = mock.requests();
    let user = last_user(&reqs[reqs.len() - 1].messages());
    assert!(
        user.contains("<recalled-memory") && user.contains("kakoune-narwhal-88"),
        "{user}"
    );
}

/// `reasonix memory … --global` with `EDITOR` set to `editor`.
fn with_editor(env: &Env, editor: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .args(args)
        .current_dir(&env.ws)
        .env("REASONIX_HOME", &env.home)
        .env("EDITOR", editor)
        .env_remove("VISUAL")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run reasonix")
}

#[test]
fn memory_edit_saves_a_sound_fact_and_refuses_a_malformed_one_keeping_the_old() {
    let env = setup("http://127.0.0.1:9");
    let add = with_editor(
        &env,
        "false",
        &[
            "memory",
            "add",
            "--global",
            "--type",
            "user",
            "Prefers rebase-finch-19 merges.",
        ],
    );
    assert!(add.status.success(), "{}", text(&add));
    let id = String::from_utf8_lossy(&add.stdout).trim().to_string();
    let path = env.home.join("memory").join(format!("{id}.md"));
    // A scripted editor: a sound change (new body, pinned) is saved as revision 2.
    let script = env.home.join("ed.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nsed -i -e 's/rebase-finch-19/squash-finch-20/' -e 's/pinned: false/pinned: true/' \"$1\"\n",
    )
    .expect("script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let out = with_editor(
        &env,
        &script.display().to_string(),
        &["memory", "edit", "--global", &id],
    );
    assert!(out.status.success(), "{}", text(&out));
    let saved = std::fs::read_to_string(&path).expect("fact");
    assert!(
        saved.contains("squash-finch-20")
            && saved.contains("pinned: true")
            && saved.contains("revision: 2"),
        "{saved}"
    );
    assert!(env
        .home
        .join("memory/revisions")
        .join(format!("{id}.r1.md"))
        .is_file());
    // A malformed result (a front-matter line that is not `key: value`) is refused naming
    // the line; the fact stays as it was and the edit is kept in a file named in the error.
    let out = with_editor(
        &env,
        "sed -i s/^type:.user/type.user/",
        &["memory", "edit", "--global", &id],
    );
    assert!(!out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        err.contains("front matter line 4 is not `key: value`"),
        "{err}"
    );
    assert!(err.contains("unchanged"), "{err}");
    let kept = err
        .split("kept in ")
        .nth(1)
        .map(str::trim)
        .expect("the kept file is named");
    assert!(std::fs::read_to_string(kept)
        .expect("kept")
        .contains("type.user"));
    assert_eq!(std::fs::read_to_string(&path).expect("fact"), saved);
    // An editor that fails changes nothing; an unchanged file is no new revision.
    let out = with_editor(&env, "false", &["memory", "edit", "--global", &id]);
    assert!(!out.status.success(), "{}", text(&out));
    let out = with_editor(&env, "true", &["memory", "edit", "--global", &id]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("no change"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read_to_string(&path).expect("fact"), saved);
}

/// Benchmark (`bench/memory_cache.sh`): a session of `BENCH_TURNS` turns (default 50), one
/// `reasonix run --continue` each, every turn asking about a different fact of the laptop's
/// global store so recall adds a block to every user message. Checks every request extends
/// the previous one byte for byte (recall rides the user message, never the prefix) and
/// prints the share of prompt tokens the caching mock served from cache (the bar: 90 %).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: bench/memory_cache.sh"]
async fn bench_memory_recall_cache_share() {
    let turns: usize = std::env::var("BENCH_TURNS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(50);
    let mock = MockProvider::start_with(|_| MockReply::text(&["noted"])).await;
    mock.enable_prompt_cache(None);
    let env = setup(&mock.base_url());
    let store = env.home.join("memory");
    std::fs::create_dir_all(&store).expect("store");
    for i in 0..turns {
        std::fs::write(
            store.join(format!("g-svc{i}.md")),
            format!(
                "---\nid: g-svc{i}\nrevision: 1\ntype: reference\nscope: global\ncreated: 2026-12-01T00:00:00Z\n---\nThe quokka{i} service listens on port {}.\n",
                7000 + i
            ),
        )
        .expect("fact");
    }
    for t in 0..turns {
        let text = format!("which port does the quokka{t} service listen on?");
        let mut args = vec!["run"];
        if t > 0 {
            args.push("--continue");
        }
        args.push(&text);
        let out = run(&env, &args).await;
        assert_eq!(out.status.code(), Some(0), "turn {t}: {}", self::text(&out));
    }
    let reqs = mock.requests();
    assert_eq!(reqs.len(), turns);
    for (t, w) in reqs.windows(2).enumerate() {
        let (a, b) = (w[0].messages(), w[1].messages());
        assert!(b.len() > a.len(), "turn {}", t + 1);
        for (i, m) in a.iter().enumerate() {
            assert_eq!(
                serde_json::to_string(m).unwrap(),
                serde_json::to_string(&b[i]).unwrap(),
                "turn {}: message {i} changed",
                t + 1
            );
        }
        assert_eq!(w[0].body["tools"], w[1].body["tools"]);
        assert_eq!(w[0].body["messages"][0], w[1].body["messages"][0]);
    }
    let recalled = reqs
        .iter()
        .enumerate()
        .filter(|(t, r)| {
            let msgs = r.messages();
            let user = msgs
                .iter()
                .rev()
                .find(|m| m["role"] == "user")
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default()
                .to_string();
            user.contains("<recalled-memory") && user.contains(&format!("[g-svc{t} ·"))
        })
        .count();
    assert_eq!(recalled, turns, "every turn recalled its fact");
    let acc = mock.prompt_accounting();
    let (hit, prompt) = acc.iter().fold((0u64, 0u64), |(h, p), a| {
        (h + a.hit_tokens, p + a.prompt_tokens)
    });
    let share = hit as f64 / prompt.max(1) as f64;
    println!(
        "memory cache: {turns} turns with recall, {} requests, {prompt} prompt tokens, {:.1} % from cache",
        reqs.len(),
        share * 100.0
    );
    assert!(share >= 0.9, "{:.1} % from cache", share * 100.0);
}
