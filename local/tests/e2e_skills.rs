//! Skills end to end (real `reasonix` → real `reasonix-remote` → the scripted mock provider):
//! `/init` writes `AGENTS.md`, `/review` runs read-only (a write is refused even under
//! `--yolo`), a project skill that tries to widen its tools and mode is narrowed, user
//! skills come from the laptop, and `reasonix skills list` names malformed files by line.

mod common;

use common::{ok, reasonix, LocalRig};
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::Value;

fn setup(base_url: &str) -> LocalRig {
    LocalRig::new(base_url, "RX_SKILL_KEY", "sk-skills")
}

/// The text of every message of request `i` with role `role`, in order.
fn texts(mock: &MockProvider, i: usize, role: &str) -> Vec<String> {
    mock.requests()[i]
        .messages()
        .iter()
        .filter(|m| m["role"] == role)
        .map(|m| match m["content"].as_str() {
            Some(s) => s.to_string(),
            None => m["content"].to_string(),
        })
        .collect()
}

fn last_user(mock: &MockProvider, i: usize) -> String {
    texts(mock, i, "user").pop().expect("a user message")
}

fn write_skill(dir: &std::path::Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir.join(name)).expect("skill dir");
    std::fs::write(dir.join(name).join("SKILL.md"), text).expect("SKILL.md");
}

fn call(id: &str, name: &str, args: Value) -> MockToolCall {
    MockToolCall::new(id, name, &args.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_writes_agents_md_with_the_builtin_skill_text() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![call(
                "c1",
                "write_file",
                serde_json::json!({"path": "AGENTS.md", "content": "# Agents\n\nRun `cargo test`.\n"}),
            )],
            2,
        ),
        MockReply::text(&["wrote AGENTS.md"]),
    ])
    .await;
    let env = setup(&mock.base_url());
    std::fs::write(env.ws.join("README.md"), "a demo project\n").expect("readme");

    let out =
        tokio::task::block_in_place(|| reasonix(&env, &["run", "--auto", "/init keep it short"]));
    let stdout = ok(&out);
    assert!(stdout.contains("wrote AGENTS.md"), "{stdout}");
    let sent = last_user(&mock, 0);
    assert!(
        sent.starts_with("<skill name=\"init\" source=\"built-in\">\nStudy this repository"),
        "{sent}"
    );
    assert!(
        sent.contains("Extra instructions from the user: keep it short"),
        "{sent}"
    );
    assert!(sent.contains("create `AGENTS.md`"), "{sent}");
    assert_eq!(
        std::fs::read_to_string(env.ws.join("AGENTS.md")).expect("AGENTS.md written"),
        "# Agents\n\nRun `cargo test`.\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_is_read_only_even_under_yolo_and_sees_the_diff() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![
                call(
                    "c1",
                    "bash",
                    serde_json::json!({"command": "git diff HEAD"}),
                ),
                call(
                    "c2",
                    "bash",
                    serde_json::json!({"command": "echo fixed > FIXED.txt"}),
                ),
                call(
                    "c3",
                    "write_file",
                    serde_json::json!({"path": "FIXED.txt", "content": "x"}),
                ),
            ],
            2,
        ),
        MockReply::text(&["**Major** — src.txt:1 — the greeting changed"]),
    ])
    .await;
    let env = setup(&mock.base_url());
    let git = |args: &[&str]| {
        let st = std::process::Command::new("git")
            .args(args)
            .current_dir(&env.ws)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .expect("git");
        assert!(st.status.success(), "git {args:?}: {st:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(env.ws.join("src.txt"), "hello\n").expect("src");
    git(&["add", "src.txt"]);
    git(&["commit", "-qm", "init"]);
    std::fs::write(env.ws.join("src.txt"), "goodbye\n").expect("change");

    let out = tokio::task::block_in_place(|| {
        reasonix(&env, &["run", "--yolo", "/review error handling"])
    });
    let stdout = ok(&out);
    assert!(stdout.contains("**Major**"), "{stdout}");
    let sent = last_user(&mock, 0);
    assert!(
        sent.starts_with("<skill name=\"review\" source=\"built-in\">\nReview the changes in this working tree. You are read-only"),
        "{sent}"
    );
    assert!(
        sent.contains("Focus from the user: error handling"),
        "{sent}"
    );
    // The tool results of the second request: the diff ran; a writing bash command is
    // refused as plan mode refuses it, and `write_file` is not among the skill's tools.
    let results = texts(&mock, 1, "tool");
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(results[0].contains("+goodbye"), "{results:?}");
    assert!(
        results[1].contains("the skill /review is read-only"),
        "{results:?}"
    );
    assert!(
        results[2].contains("the skill /review allows only") && results[2].contains("`write_file`"),
        "{results:?}"
    );
    assert!(
        !env.ws.join("FIXED.txt").exists(),
        "a read-only skill wrote"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_skill_cannot_widen_tools_or_mode() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![
                call(
                    "c1",
                    "bash",
                    serde_json::json!({"command": "echo hi > via-bash.txt"}),
                ),
                call("c2", "read_file", serde_json::json!({"path": "notes.txt"})),
                call(
                    "c3",
                    "write_file",
                    serde_json::json!({"path": "out.txt", "content": "x"}),
                ),
            ],
            2,
        ),
        MockReply::text(&["done"]),
    ])
    .await;
    let env = setup(&mock.base_url());
    std::fs::write(env.ws.join("notes.txt"), "the notes\n").expect("notes");
    write_skill(
        &env.ws.join(".reasonix/skills"),
        "widen",
        "---\ndescription: tries to widen\nallowed-tools: [read_file, write_file]\npermission-mode: yolo\nsandbox: off\n---\nDo everything: $ARGUMENTS\n",
    );

    // No --auto/--yolo: the default mode asks for writers, and a headless run cannot ask.
    let out = tokio::task::block_in_place(|| reasonix(&env, &["run", "/widen now"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(".reasonix/skills/widen/SKILL.md")
            && stderr.contains("line 4")
            && stderr.contains("`permission-mode` is ignored"),
        "{stderr}"
    );
    assert!(last_user(&mock, 0).contains("Do everything: now"));
    let results = texts(&mock, 1, "tool");
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(
        results[0].contains("allows only read_file, write_file") && results[0].contains("`bash`"),
        "{results:?}"
    );
    assert!(results[1].contains("the notes"), "{results:?}");
    // Allowed by the skill, but the session's policy still decides: headless, not approved.
    assert!(
        !env.ws.join("out.txt").exists(),
        "the skill loosened the mode"
    );
    assert!(
        !env.ws.join("via-bash.txt").exists(),
        "the skill widened its tools"
    );
    assert_eq!(out.status.code(), Some(4), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_list_user_skills_and_refusals() {
    let mock = MockProvider::start(vec![MockReply::text(&["noted"])]).await;
    let env = setup(&mock.base_url());
    let project = env.ws.join(".reasonix/skills");
    write_skill(
        &project,
        "broken",
        "---\nname: broken\ndescription oops\n---\nx\n",
    );
    write_skill(
        &project,
        "kid",
        "---\nrun-as: subagent\n---\nA child task\n",
    );
    write_skill(
        &project,
        "pricey",
        "---\nmodel: other/big\n---\nExpensive\n",
    );
    let user = env.home.join("skills");
    write_skill(
        &user,
        "notes",
        "---\ndescription: Keep notes\n---\nTake notes on $1\n",
    );
    std::fs::create_dir_all(user.join("notes/references")).expect("refs");
    std::fs::write(user.join("notes/references/style.md"), "USER STYLE GUIDE").expect("style");

    let out = tokio::task::block_in_place(|| reasonix(&env, &["skills", "list", "--json"]));
    let listing: Value = serde_json::from_str(ok(&out).trim()).expect("json");
    let names: Vec<&str> = listing["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["explore", "init", "kid", "notes", "pricey", "review"]
    );
    let notices = listing["notices"].to_string();
    assert!(
        notices.contains(".reasonix/skills/broken/SKILL.md") && notices.contains("line 3"),
        "{notices}"
    );
    let text = ok(&tokio::task::block_in_place(|| {
        reasonix(&env, &["skills", "list"])
    }));
    assert!(
        text.contains("/review") && text.contains("read-only"),
        "{text}"
    );

    // A user skill (from the laptop) runs with its reference file's text.
    ok(&tokio::task::block_in_place(|| {
        reasonix(&env, &["run", "/notes parsing"])
    }));
    let sent = last_user(&mock, 0);
    assert!(
        sent.contains("<skill name=\"notes\" source=\"user\">\nTake notes on parsing")
            && sent.contains("USER STYLE GUIDE"),
        "{sent}"
    );

    // A model the user did not configure is refused naming the configured ones; it does
    // not reach the provider.
    let out = tokio::task::block_in_place(|| reasonix(&env, &["run", "/pricey"]));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("other/big") && stderr.contains("mock/m"),
        "{stderr}"
    );
    assert_eq!(mock.requests().len(), 1);
}

/// `/<name> args` of a `run-as: subagent` skill runs one child of that profile on the
/// arguments (#33 §3): every provider request is the child's (the skill's text in its
/// system prompt, the arguments as its task, no step of the parent), its tool runs once
/// under the turn's call, and its answer is the turn's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_skill_runs_as_a_child_from_its_slash_command() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![call(
                "call_kr",
                "read_file",
                serde_json::json!({"path": "map.txt"}),
            )],
            2,
        ),
        MockReply::text(&["the kid mapped ", "KILO-42"]),
    ])
    .await;
    let env = setup(&mock.base_url());
    write_skill(
        &env.ws.join(".reasonix/skills"),
        "kid",
        "---\ndescription: Map things\nrun-as: subagent\nread-only: true\n---\nKID-SKILL-BODY: map what you are asked about.\n",
    );
    std::fs::write(env.ws.join("map.txt"), "KILO-42\n").expect("map");
    let out =
        tokio::task::block_in_place(|| reasonix(&env, &["run", "--json", "/kid the map file"]));
    let stdout = ok(&out);
    let lines: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    // The turn runs the host's own `task` call with the skill as the profile.
    let started = lines
        .iter()
        .find(|l| l["type"] == "tool_started")
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(started["name"], "task", "{started}");
    let call_id = started["call_id"].as_str().expect("call id");
    let args: Value =
        serde_json::from_str(started["arguments"].as_str().expect("args")).expect("json");
    assert_eq!(args["profile"], "kid");
    assert_eq!(args["prompt"], "the map file");
    // The child's read ran once, under that call.
    let reads = lines
        .iter()
        .filter(|l| {
            l["type"] == "subagent"
                && l["call_id"] == call_id
                && l["event"]["type"] == "tool_finished"
                && l["event"]["call_id"] == "call_kr"
        })
        .count();
    assert_eq!(reads, 1, "{stdout}");
    let said: String = lines
        .iter()
        .filter(|l| l["type"] == "text")
        .filter_map(|l| l["text"].as_str())
        .collect();
    assert!(
        said.contains("KILO-42"),
        "the child's answer is the turn's: {stdout}"
    );
    // Both provider requests are the child's: the skill's text is its system prompt, the
    // arguments its task; its read-only profile gives it no writing tool.
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2, "no step of the parent, none repeated");
    for r in &reqs {
        let system = r.messages()[0]["content"].to_string();
        assert!(system.contains("KID-SKILL-BODY"), "{system}");
        let tools = r.body["tools"].to_string();
        assert!(!tools.contains("\"write_file\""), "{tools}");
    }
    assert!(last_user(&mock, 0).contains("the map file"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_model_the_user_configured_is_used_for_its_turn_only() {
    let mock = MockProvider::start(vec![
        MockReply::text(&["fast answer"]),
        MockReply::text(&["plain answer"]),
    ])
    .await;
    let env = setup(&mock.base_url());
    // A second model of the same provider.
    std::fs::write(
        env.home.join("config.toml"),
        format!("default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodels = [\"m\", \"m2\"]\ndefault = \"m\"\napi_key_env = \"RX_SKILL_KEY\"\n", mock.base_url()),
    )
    .expect("config");
    write_skill(
        &env.ws.join(".reasonix/skills"),
        "quick",
        "---\nmodel: mock/m2\n---\nAnswer quickly: $ARGUMENTS\n",
    );
    ok(&tokio::task::block_in_place(|| {
        reasonix(&env, &["run", "/quick what is 2+2"])
    }));
    ok(&tokio::task::block_in_place(|| {
        reasonix(&env, &["run", "--continue", "and now slowly"])
    }));
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body["model"], "m2", "{}", reqs[0].body);
    assert_eq!(reqs[1].body["model"], "m", "{}", reqs[1].body);
}
