//! A rewind offers to forget the facts its turns remembered (#32), outside the TUI:
//! `reasonix rewind` (headless: `--forget-memory` archives them, without it they are kept and
//! listed, `--dry-run` only says) and `/rewind N` from a real editor over ACP (the official
//! TypeScript SDK client answers the offer). Real binaries, the real daemon, the scripted
//! mock provider, real fact files; facts of earlier turns are never touched.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{host_bin, LocalRig};
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

const KEY_ENV: &str = "RX_MEM_REWIND_KEY";
const KEY: &str = "sk-mem-rewind-test";

fn remember(id: &str, content: &str, scope: &str) -> MockReply {
    let kind = if scope == "global" { "user" } else { "project" };
    MockReply::tool_calls(
        vec![MockToolCall::new(
            id,
            "remember",
            &json!({"content": content, "type": kind, "scope": scope}).to_string(),
        )],
        3,
    )
}

fn md_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    v.sort();
    v
}

fn files_with(dir: &Path, needle: &str) -> usize {
    md_files(dir)
        .iter()
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains(needle)))
        .count()
}

fn project_dir(rig: &LocalRig) -> PathBuf {
    let key = reasonix_forward::memory::workspace_key(&rig.ws.canonicalize().unwrap());
    reasonix_forward::memory::project_dir(&rig.home, &key)
}

fn out_text(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn yolo(rig: &LocalRig) {
    let config = rig.home.join("config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("[permissions]\nmode = \"yolo\"\n");
    std::fs::write(&config, text).unwrap();
}

#[test]
fn reasonix_rewind_offers_to_forget_the_facts_of_the_rewound_turns() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mock = rt.block_on(MockProvider::start(vec![
        remember(
            "r1",
            "Deploys go through the heron-staging-41 cluster first.",
            "project",
        ),
        MockReply::text(&["noted one"]),
        remember(
            "r2",
            "The release branch is named otter-release-77.",
            "project",
        ),
        remember(
            "r3",
            "The user reads diffs in the narwhal-viewer-12 tool.",
            "global",
        ),
        MockReply::text(&["noted two"]),
    ]));
    let rig = LocalRig::new(&mock.base_url(), KEY_ENV, KEY);
    yolo(&rig);
    let run = |args: &[&str]| common::reasonix(&rig, args);
    let first = run(&["run", "--json", "note the deploy rule"]);
    assert!(first.status.success(), "{}", out_text(&first));
    let second = run(&[
        "run",
        "--continue",
        "--json",
        "--allow-memory-writes",
        "note the branch and my viewer",
    ]);
    assert!(second.status.success(), "{}", out_text(&second));
    let project = project_dir(&rig);
    let global = reasonix_forward::memory::global_dir(&rig.home);
    assert_eq!(files_with(&project, "heron-staging-41"), 1);
    assert_eq!(files_with(&project, "otter-release-77"), 1);
    assert_eq!(files_with(&global, "narwhal-viewer-12"), 1);
    let reqs = mock.requests();
    let id_of = |req: usize, call: &str| -> String {
        let m = reqs[req]
            .messages()
            .into_iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == call)
            .unwrap();
        let text = m["content"].as_str().unwrap().to_string();
        text.split_whitespace().nth(3).unwrap().to_string()
    };
    let turn1_fact = id_of(1, "r1");
    let branch_fact = id_of(3, "r2");
    let viewer_fact = id_of(4, "r3");

    // Dry run: says what would be offered, changes nothing.
    let dry = run(&["rewind", "--to", "2", "--dry-run"]);
    assert!(dry.status.success(), "{}", out_text(&dry));
    let said = String::from_utf8_lossy(&dry.stdout).to_string();
    assert!(
        said.contains(&format!(
            "remembered 2 fact(s): {branch_fact}, {viewer_fact}"
        )) && said.contains("--forget-memory would archive them"),
        "{said}"
    );
    assert!(!said.contains(&turn1_fact), "{said}");
    assert_eq!(files_with(&project, "otter-release-77"), 1);
    assert_eq!(files_with(&global, "narwhal-viewer-12"), 1);

    // The rewind with --forget-memory archives the facts of turn 2 (project on the host,
    // global on the laptop); turn 1's fact stays.
    let done = run(&["rewind", "--to", "2", "--forget-memory"]);
    assert!(done.status.success(), "{}", out_text(&done));
    let said = String::from_utf8_lossy(&done.stdout).to_string();
    assert!(
        said.contains(&branch_fact) && said.contains(&viewer_fact),
        "{said}"
    );
    assert_eq!(files_with(&project, "otter-release-77"), 0, "{said}");
    assert_eq!(files_with(&global, "narwhal-viewer-12"), 0, "{said}");
    assert_eq!(files_with(&project, "heron-staging-41"), 1, "{said}");
    // Archived, not destroyed: restorable.
    let back = run(&["memory", "restore", &branch_fact]);
    assert!(back.status.success(), "{}", out_text(&back));
    assert_eq!(files_with(&project, "otter-release-77"), 1);
}

#[test]
fn reasonix_rewind_without_the_flag_keeps_the_facts_and_lists_them() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mock = rt.block_on(MockProvider::start(vec![
        remember(
            "k1",
            "Migrations run with the puffin-migrate-5 tool.",
            "project",
        ),
        MockReply::text(&["noted"]),
    ]));
    let rig = LocalRig::new(&mock.base_url(), KEY_ENV, KEY);
    yolo(&rig);
    let first = common::reasonix(&rig, &["run", "--json", "note the migration tool"]);
    assert!(first.status.success(), "{}", out_text(&first));
    let kept = common::reasonix(&rig, &["rewind", "--to", "1"]);
    assert!(kept.status.success(), "{}", out_text(&kept));
    let said = String::from_utf8_lossy(&kept.stdout).to_string();
    assert!(
        said.contains("remembered 1 fact(s), kept:") && said.contains("--forget-memory"),
        "{said}"
    );
    assert_eq!(files_with(&project_dir(&rig), "puffin-migrate-5"), 1);
}

/// `drive.mjs prompts` (one ACP session, several prompts); its JSON report.
fn drive_prompts(rig: &LocalRig, steps: &Value) -> Value {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp_node");
    assert!(
        dir.join("node_modules/@agentclientprotocol/sdk").is_dir(),
        "the ACP TypeScript SDK is not installed: run `npm ci --prefix local/tests/acp_node` (.ci/run does)"
    );
    let out = Command::new("node")
        .arg(dir.join("drive.mjs"))
        .arg("prompts")
        .arg(steps.to_string())
        .env("AGENT_ARGV", r#"["acp"]"#)
        .env("REASONIX_BIN", env!("CARGO_BIN_EXE_reasonix"))
        .env("WS", &rig.ws)
        .env("REASONIX_HOME", &rig.home)
        .env("REASONIX_REMOTE_BIN", host_bin())
        .env("REASONIX_IDLE_TIMEOUT_SECS", "60")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report: Value = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no report; stdout: {stdout}\nstderr: {stderr}"));
    assert!(out.status.success(), "{report:#}\nstderr: {stderr}");
    report
}

#[test]
fn an_editor_rewind_offers_to_forget_the_facts_of_the_rewound_turns() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mock = rt.block_on(MockProvider::start(vec![
        remember("a1", "Builds use the ibis-builder-3 image.", "project"),
        MockReply::text(&["noted one"]),
        remember("a2", "Logs go to the kestrel-logs-9 bucket.", "project"),
        MockReply::text(&["noted two"]),
    ]));
    let rig = LocalRig::new(&mock.base_url(), KEY_ENV, KEY);
    yolo(&rig);
    let report = drive_prompts(
        &rig,
        &json!([
            {"prompt": "note the build image"},
            {"prompt": "note the log bucket"},
            {"prompt": "/rewind 2", "answer": "allow_once"},
        ]),
    );
    assert_eq!(
        report["stopReasons"],
        json!(["end_turn", "end_turn", "end_turn"]),
        "{report:#}"
    );
    let log = report["log"].as_array().unwrap();
    let asked: Vec<&Value> = log.iter().filter(|v| v["at"] == "permission").collect();
    assert_eq!(
        asked.len(),
        1,
        "only the rewind's offer is asked in yolo: {log:#?}"
    );
    let title = asked[0]["title"].as_str().unwrap();
    assert!(
        title.contains("The rewound turns remembered 1 fact(s)")
            && title.contains("Forget them too?"),
        "{title}"
    );
    assert_eq!(
        asked[0]["options"],
        json!([
            "rewind_forget_facts:allow_once",
            "rewind_keep_facts:reject_once"
        ])
    );
    let project = project_dir(&rig);
    assert_eq!(files_with(&project, "kestrel-logs-9"), 0, "{log:#?}");
    assert_eq!(files_with(&project, "ibis-builder-3"), 1, "{log:#?}");
    let said: String = log
        .iter()
        .filter_map(|v| v["text"].as_str())
        .collect::<Vec<_>>()
        .join("");
    assert!(said.contains("archived"), "{said}");
}
