//! End to end in local mode: the real `reasonix` binary spawns the real `reasonix-remote`
//! over pipes, the scripted mock provider streams real SSE over HTTP, tools touch real files.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

const KEY: &str = "sk-test-E2E-9f8e7d6c5b4a";

struct Env {
    _dir: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
}

fn bin_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_reasonix"))
        .parent()
        .expect("bin dir")
        .to_path_buf()
}

fn host_bin() -> PathBuf {
    let p = bin_dir().join("reasonix-remote");
    assert!(
        p.is_file(),
        "{} is missing: build the workspace binaries first (`cargo build --workspace --bins`)",
        p.display()
    );
    p
}

fn setup(base_url: &str) -> Env {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("rxhome");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::write(
        home.join("config.toml"),
        format!(
            r#"default_model = "mock/mock-model"
[[providers]]
name = "mock"
kind = "openai"
base_url = "{base_url}"
models = ["mock-model"]
default = "mock-model"
api_key_env = "RX_E2E_KEY"
"#
        ),
    )
    .expect("config");
    Env {
        _dir: dir,
        home,
        ws,
    }
}

fn reasonix(env: &Env, args: &[&str]) -> std::process::Output {
    reasonix_in(&env.home, &env.ws, args)
}

fn reasonix_in(home: &Path, ws: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .args(args)
        .current_dir(ws)
        .env("REASONIX_HOME", home)
        .env("REASONIX_REMOTE_BIN", host_bin())
        .env("RX_E2E_KEY", KEY)
        .env("REASONIX_IDLE_TIMEOUT_SECS", "60")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("run reasonix")
}

fn daemon_pid(env: &Env) -> Option<u32> {
    let sessions = env.home.join("sessions");
    for e in std::fs::read_dir(sessions).ok()?.flatten() {
        let marker = e.path().join("daemon.json");
        if let Ok(b) = std::fs::read(&marker) {
            let v: Value = serde_json::from_slice(&b).ok()?;
            return v["pid"].as_u64().map(|p| p as u32);
        }
    }
    None
}

fn stop_daemon(env: &Env) {
    if let Some(pid) = daemon_pid(env) {
        unsafe {
            libc::kill(pid as i32, libc::SIGTERM);
        }
    }
}

fn grep_tree(root: &Path, needle: &str) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        } else if let Ok(b) = std::fs::read(&p) {
            if b.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                hits.push(p);
            }
        }
    }
    hits
}

fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_drives_a_tool_sequence_and_keeps_the_key_off_the_host() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_w",
                "write_file",
                &json!({"path": "notes/hello.txt", "content": "hello from the agent\n"})
                    .to_string(),
            )],
            4,
        ),
        MockReply::tool_calls(
            vec![
                MockToolCall::new(
                    "call_r",
                    "read_file",
                    &json!({"path": "notes/hello.txt"}).to_string(),
                ),
                MockToolCall::new(
                    "call_b",
                    "bash",
                    &json!({"command": "wc -c notes/hello.txt; env"}).to_string(),
                ),
            ],
            5,
        ),
        MockReply::text(&["The file ", "says hello."]).with_usage(json!({
            "prompt_tokens": 120, "completion_tokens": 7,
            "prompt_cache_hit_tokens": 100, "prompt_cache_miss_tokens": 20
        })),
    ])
    .await;
    let env = setup(&mock.base_url());
    std::fs::write(env.ws.join("brief.md"), "BRIEF: greet politely\n").expect("brief");
    let (home, ws) = (env.home.clone(), env.ws.clone());
    let out = tokio::task::spawn_blocking(move || {
        reasonix_in(
            &home,
            &ws,
            &[
                "run",
                "--json",
                "--yolo",
                "write a greeting per @brief.md, then check it",
            ],
        )
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );

    // The files really changed.
    let written = std::fs::read_to_string(env.ws.join("notes/hello.txt")).expect("written file");
    assert_eq!(written, "hello from the agent\n");

    // The JSON event stream tells the story.
    let events = json_lines(&out.stdout);
    let started: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool_started")
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(started, vec!["write_file", "read_file", "bash"], "{stdout}");
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_finished")
        .collect();
    assert_eq!(finished.len(), 3);
    assert!(finished.iter().all(|e| e["is_error"] == false), "{stdout}");
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(text, "The file says hello.");
    let done = events
        .iter()
        .find(|e| e["type"] == "turn_finished")
        .expect("turn_finished event");
    assert_eq!(done["outcome"], "completed");
    assert_eq!(done["usage"]["cache_hit_tokens"], 100);

    // The model saw the tool results, and the key went only to the provider.
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3);
    // The @mentioned file was attached to the turn.
    let first_user = reqs[0]
        .messages()
        .into_iter()
        .find(|m| m["role"] == "user")
        .expect("user message");
    assert!(
        first_user["content"]
            .as_str()
            .unwrap_or("")
            .contains("<attached-file path=\"brief.md\">\nBRIEF: greet politely"),
        "{first_user}"
    );
    for r in &reqs {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
    }
    let last = reqs[2].messages();
    let tool_msgs: Vec<&Value> = last.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_msgs.len(), 3);
    assert!(tool_msgs[1]["content"]
        .as_str()
        .unwrap_or("")
        .contains("hello from the agent"));
    // The system prefix is byte-identical across the requests of a session.
    let sys: Vec<Value> = reqs.iter().map(|r| r.messages()[0].clone()).collect();
    assert!(sys.windows(2).all(|w| w[0] == w[1]));
    let tools: Vec<Value> = reqs.iter().map(|r| r.body["tools"].clone()).collect();
    assert!(tools.windows(2).all(|w| w[0] == w[1]));

    // The key is nowhere on the host side: journal, logs, the bash tool's environment
    // (captured in the journal), the daemon's environ and argv.
    let pid = daemon_pid(&env).expect("daemon marker with pid");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("daemon environ");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("daemon cmdline");
    assert!(!environ.windows(KEY.len()).any(|w| w == KEY.as_bytes()));
    assert!(!cmdline.windows(KEY.len()).any(|w| w == KEY.as_bytes()));
    let journal_hits = grep_tree(&env.home.join("sessions"), KEY);
    let log_hits = grep_tree(&env.home.join("logs"), KEY);
    assert!(journal_hits.is_empty(), "key found in {journal_hits:?}");
    assert!(log_hits.is_empty(), "key found in {log_hits:?}");
    assert!(grep_tree(&env.ws, KEY).is_empty());
    // The journal holds the whole turn, numbered.
    let journals = grep_tree(&env.home.join("sessions"), "\"type\":\"tool_finished\"");
    assert_eq!(journals.len(), 1, "one session journal");
    stop_daemon(&env);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_killed_mid_tool_resumes_with_the_turn_marked_interrupted() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_s",
                "bash",
                &json!({"command": "echo ran >> counter.txt; sleep 30"}).to_string(),
            )],
            6,
        ),
        MockReply::text(&["recovered"]),
    ])
    .await;
    let env = setup(&mock.base_url());
    let home = env.home.clone();
    let ws = env.ws.clone();
    let child = std::thread::spawn(move || {
        reasonix_in(
            &home,
            &ws,
            &["run", "--json", "--yolo", "run the slow thing"],
        )
    });
    // Wait until the command has started on the host, then kill the daemon hard.
    let counter = env.ws.join("counter.txt");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !counter.exists() {
        assert!(std::time::Instant::now() < deadline, "bash never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = daemon_pid(&env).expect("daemon pid");
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
    // The first client loses its daemon: it reconnects (starting a new daemon), learns the
    // link cannot be resumed, re-attaches and sees the turn reported as interrupted.
    let first = child.join().expect("join");
    let first_out = String::from_utf8_lossy(&first.stdout).to_string();
    assert!(
        !first.status.success(),
        "an interrupted turn is not a success:\n{first_out}"
    );
    assert!(first_out.contains("interrupted"), "{first_out}");
    // A new client continues the same session: the interrupted tool is reported, not re-run.
    let out = reasonix(&env, &["run", "--json", "--yolo", "--continue", "carry on"]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = json_lines(&out.stdout);
    assert!(
        events.iter().any(|e| e["type"] == "notice"
            && e["text"]
                .as_str()
                .unwrap_or("")
                .contains("did not shut down cleanly")),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(&counter).expect("counter"),
        "ran\n",
        "the command ran exactly once"
    );
    // The second request carries the interrupted tool result in its history.
    let reqs = mock.requests();
    let last = reqs.last().expect("requests").messages();
    assert!(last.iter().any(
        |m| m["role"] == "tool" && m["content"].as_str().unwrap_or("").contains("interrupted")
    ));
    stop_daemon(&env);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspace_mcp_server_runs_on_the_host_and_its_tool_is_called() {
    if std::process::Command::new("mcp-server-time")
        .arg("--help")
        .output()
        .is_err()
    {
        panic!("mcp-server-time is not installed; run .ci/run (pip install mcp-server-time)");
    }
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_t",
                "mcp__time__get_current_time",
                &json!({"timezone": "Europe/Paris"}).to_string(),
            )],
            4,
        ),
        MockReply::text(&["It is time."]),
    ])
    .await;
    let env = setup(&mock.base_url());
    std::fs::write(
        env.ws.join(".mcp.json"),
        json!({"mcpServers": {"time": {"command": "mcp-server-time", "args": []}}}).to_string(),
    )
    .expect(".mcp.json");
    let (home, ws) = (env.home.clone(), env.ws.clone());
    let out = tokio::task::spawn_blocking(move || {
        reasonix_in(
            &home,
            &ws,
            &["run", "--json", "--yolo", "what time is it in Paris?"],
        )
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = json_lines(&out.stdout);
    let finished = events
        .iter()
        .find(|e| e["type"] == "tool_finished")
        .expect("tool finished");
    assert_eq!(finished["name"], "mcp__time__get_current_time");
    assert_eq!(finished["is_error"], false, "{stdout}");
    // The model's tool list offered the MCP tool next to the built-ins, sorted by name.
    let req = &mock.requests()[0];
    let names: Vec<String> = req.body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(String::from))
        .collect();
    assert!(
        names.contains(&"mcp__time__get_current_time".to_string()),
        "{names:?}"
    );
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    // The result the model saw carries the server's answer.
    let last = mock.requests()[1].messages();
    let tool_msg = last.iter().find(|m| m["role"] == "tool").expect("tool msg");
    assert!(
        tool_msg["content"]
            .as_str()
            .unwrap_or("")
            .contains("Europe/Paris"),
        "{tool_msg}"
    );
    stop_daemon(&env);
}

fn git(ws: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(ws)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_restores_files_changed_by_tools_and_bash_and_leaves_git_alone() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![
                MockToolCall::new(
                    "w",
                    "write_file",
                    &json!({"path": "src/lib.txt", "content": "rewritten by the agent\n"})
                        .to_string(),
                ),
                MockToolCall::new(
                    "b",
                    "bash",
                    &json!({"command": "sed -i s/alpha/omega/ notes.txt && rm gone.txt && echo generated > gen.txt && chmod +x run.sh"})
                        .to_string(),
                ),
            ],
            6,
        ),
        MockReply::text(&["changed things"]),
    ])
    .await;
    let env = setup(&mock.base_url());
    let ws = env.ws.clone();
    std::fs::create_dir_all(ws.join("src")).expect("src");
    std::fs::write(ws.join("src/lib.txt"), "original\n").expect("lib");
    std::fs::write(ws.join("notes.txt"), "alpha beta\n").expect("notes");
    std::fs::write(ws.join("gone.txt"), "to be deleted\n").expect("gone");
    std::fs::write(ws.join("run.sh"), "echo hi\n").expect("run.sh");
    git(&ws, &["init", "-q"]);
    git(
        &ws,
        &["-c", "user.name=t", "-c", "user.email=t@t", "add", "-A"],
    );
    git(
        &ws,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "base",
        ],
    );
    std::fs::write(ws.join("notes.txt"), "alpha beta staged\n").expect("notes2");
    git(&ws, &["add", "notes.txt"]);
    let head_before = std::fs::read(ws.join(".git/HEAD")).expect("HEAD");
    let index_before = std::fs::read(ws.join(".git/index")).expect("index");
    let refs_before = git(&ws, &["show-ref"]);

    let (home, w2) = (env.home.clone(), ws.clone());
    let out = tokio::task::spawn_blocking(move || {
        reasonix_in(&home, &w2, &["run", "--json", "--yolo", "change things"])
    })
    .await
    .expect("join");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("gen.txt")).expect("gen"),
        "generated\n"
    );
    assert!(!ws.join("gone.txt").exists());

    // Dry run changes nothing.
    let dry = reasonix(
        &env,
        &["rewind", "--to", "1", "--scope", "code", "--dry-run"],
    );
    assert!(
        dry.status.success(),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    assert!(ws.join("gen.txt").exists());

    let rw = reasonix(&env, &["rewind", "--to", "1", "--scope", "both"]);
    let rw_out = String::from_utf8_lossy(&rw.stdout).to_string();
    assert!(
        rw.status.success(),
        "{rw_out}{}",
        String::from_utf8_lossy(&rw.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("src/lib.txt")).expect("lib"),
        "original\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).expect("notes"),
        "alpha beta staged\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("gone.txt")).expect("gone"),
        "to be deleted\n"
    );
    assert!(
        !ws.join("gen.txt").exists(),
        "files created by bash are removed"
    );
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(ws.join("run.sh"))
            .expect("meta")
            .permissions(),
    );
    assert_eq!(mode & 0o111, 0, "executable bit restored");
    // The user's repository is untouched.
    assert_eq!(
        std::fs::read(ws.join(".git/HEAD")).expect("HEAD"),
        head_before
    );
    assert_eq!(
        std::fs::read(ws.join(".git/index")).expect("index"),
        index_before
    );
    assert_eq!(git(&ws, &["show-ref"]), refs_before);
    assert!(rw_out.contains("undo"), "{rw_out}");
    stop_daemon(&env);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn laptop_mcp_server_is_tunnelled_through_the_link() {
    if Command::new("mcp-server-everything")
        .arg("--help")
        .output()
        .is_err()
    {
        panic!("mcp-server-everything is not installed; run .ci/run (npm install -g @modelcontextprotocol/server-everything)");
    }
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new("call_e", "mcp__lap__get-env", "{}")],
            3,
        ),
        MockReply::text(&["Got the environment."]),
    ])
    .await;
    let env = setup(&mock.base_url());
    let mut cfg = std::fs::read_to_string(env.home.join("config.toml")).expect("config");
    cfg.push_str(
        "\n[[mcp]]\nname = \"lap\"\ncommand = \"mcp-server-everything\"\nargs = [\"stdio\"]\nrun_on = \"laptop\"\n",
    );
    std::fs::write(env.home.join("config.toml"), cfg).expect("config");
    let (home, ws) = (env.home.clone(), env.ws.clone());
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_reasonix"))
            .args(["run", "--json", "--yolo", "show the laptop environment"])
            .current_dir(&ws)
            .env("REASONIX_HOME", &home)
            .env("REASONIX_REMOTE_BIN", host_bin())
            .env("RX_E2E_KEY", KEY)
            // Only the laptop process has this variable: the host gets an allow-listed
            // environment, so seeing it proves where the server ran.
            .env("LAPTOP_ONLY_MARKER", "laptop-side-7f3a")
            .env_remove("XDG_RUNTIME_DIR")
            .output()
            .expect("run")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = json_lines(&out.stdout);
    let finished = events
        .iter()
        .find(|e| e["type"] == "tool_finished")
        .expect("tool finished");
    assert_eq!(finished["name"], "mcp__lap__get-env");
    assert_eq!(finished["is_error"], false, "{stdout}");
    let last = mock.requests()[1].messages();
    let tool_msg = last.iter().find(|m| m["role"] == "tool").expect("tool msg");
    assert!(
        tool_msg["content"]
            .as_str()
            .unwrap_or("")
            .contains("laptop-side-7f3a"),
        "the server ran on the laptop side: {tool_msg}"
    );
    stop_daemon(&env);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_run_denies_asks_and_a_step_limit_pauses_the_turn() {
    let mock = MockProvider::start(vec![
        // Turn 1 (no --auto): the write needs approval; headless answers with a denial.
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "w",
                "write_file",
                &json!({"path": "x.txt", "content": "x"}).to_string(),
            )],
            4,
        ),
        MockReply::text(&["could not write"]),
        // Turn 2 (max_steps = 1): one step with a tool call, then the turn pauses.
        MockReply::tool_calls(vec![MockToolCall::new("l", "ls", "{}")], 4),
    ])
    .await;
    let env = setup(&mock.base_url());
    let out = reasonix(&env, &["run", "--json", "write x"]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        out.status.code(),
        Some(4),
        "a writer denied for being headless exits 4: {stdout}"
    );
    assert!(
        !env.ws.join("x.txt").exists(),
        "an ask is never run headless"
    );
    let events = json_lines(&out.stdout);
    let denied = events
        .iter()
        .find(|e| e["type"] == "tool_finished")
        .expect("tool finished");
    assert_eq!(denied["is_error"], true);
    assert!(
        denied["summary"].as_str().unwrap_or("").contains("denied"),
        "{stdout}"
    );
    let reqs = mock.requests();
    let tool_msg = reqs[1]
        .messages()
        .into_iter()
        .find(|m| m["role"] == "tool")
        .expect("tool result sent to the model");
    assert!(tool_msg["content"]
        .as_str()
        .unwrap_or("")
        .contains("denied"));

    let mut cfg = std::fs::read_to_string(env.home.join("config.toml")).expect("config");
    cfg.push_str("\n[agent]\nmax_steps = 1\n");
    std::fs::write(env.home.join("config.toml"), cfg).expect("config");
    let out = reasonix(&env, &["run", "--json", "--yolo", "--continue", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        out.status.code(),
        Some(3),
        "a paused turn exits 3: {stdout}"
    );
    let done = json_lines(&out.stdout)
        .into_iter()
        .find(|e| e["type"] == "turn_finished")
        .expect("turn_finished");
    assert_eq!(done["outcome"], "paused");
    assert_eq!(
        mock.request_count(),
        3,
        "the paused turn did not ask the model again"
    );
    stop_daemon(&env);
}
