//! End to end over SSH: the real `reasonix` binary against a real OpenSSH sshd (no TCP or
//! streamlocal forwarding allowed), a host user whose login shell is tcsh with a chatty rc
//! file, the static `reasonix-remote` installed over SFTP, and the scripted mock provider.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use reasonix_testkit::sshd::{ClientKey, Sshd, SshdConfig, TestUser, UserOptions};
use serde_json::{json, Value};

const KEY: &str = "sk-test-SSH-0a1b2c3d4e5f";

fn musl_host_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let candidates = [
        root.join("x86_64-unknown-linux-musl/debug/reasonix-remote"),
        root.join("debug/reasonix-remote-x86_64-unknown-linux-musl"),
        root.join("x86_64-unknown-linux-musl/release/reasonix-remote"),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!("no static host binary ({candidates:?}); run `cargo build -p reasonix-remote --target x86_64-unknown-linux-musl`")
        })
}

struct Laptop {
    dir: tempfile::TempDir,
    key: ClientKey,
}

impl Laptop {
    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }
    fn rx_home(&self) -> PathBuf {
        self.dir.path().join("rxhome")
    }
}

fn laptop(sshd: &Sshd, base_url: &str) -> Laptop {
    // A laptop-side MCP server (server-everything), tunnelled to the host over the link.
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let ssh = home.join(".ssh");
    std::fs::create_dir_all(&ssh).expect("ssh dir");
    std::fs::write(ssh.join("known_hosts"), sshd.known_hosts_line()).expect("known_hosts");
    let key = ClientKey::generate(&ssh, "id_e2e", None).expect("key");
    let rx = dir.path().join("rxhome");
    std::fs::create_dir_all(&rx).expect("rxhome");
    std::fs::write(
        rx.join("config.toml"),
        format!(
            "default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{base_url}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"RX_SSH_KEY\"\n\n[[mcp]]\nname = \"lap\"\ncommand = \"mcp-server-everything\"\nargs = [\"stdio\"]\nrun_on = \"laptop\"\n"
        ),
    )
    .expect("config");
    Laptop { dir, key }
}

/// `reasonix ARGS` as the laptop `l` runs it against `sshd` (its key, its homes, the musl
/// host binary to install).
/// A laptop as [`laptop`], without the laptop MCP server (for tests about daemons and turns).
fn laptop_without_mcp(sshd: &Sshd, base_url: &str) -> Laptop {
    let l = laptop(sshd, base_url);
    std::fs::write(
        l.rx_home().join("config.toml"),
        format!(
            "default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{base_url}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"RX_SSH_KEY\"\n"
        ),
    )
    .expect("config");
    l
}

fn reasonix_command(l: &Laptop, sshd: &Sshd, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reasonix"));
    cmd.args(args)
        .args(["-p", &sshd.port().to_string(), "-F", "none"])
        .arg("-i")
        .arg(&l.key.private)
        .args(["-o", "IdentityAgent=none"])
        .current_dir(l.dir.path())
        .env("HOME", l.home())
        .env("REASONIX_HOME", l.rx_home())
        .env("RX_SSH_KEY", KEY)
        .env("LAPTOP_ONLY_MARKER", "laptop-side-5e6f")
        .env(
            "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
            musl_host_binary(),
        )
        .env_remove("SSH_AUTH_SOCK");
    cmd
}

fn reasonix(l: &Laptop, sshd: &Sshd, args: &[&str]) -> std::process::Output {
    reasonix_command(l, sshd, args)
        .output()
        .expect("run reasonix")
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

fn files_containing(root: &Path, needle: &str) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        } else if meta.is_file() {
            if let Ok(b) = std::fs::read(&p) {
                if contains(&b, needle) {
                    hits.push(p);
                }
            }
        }
    }
    hits
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_over_ssh_installs_the_host_binary_and_keeps_the_key_on_the_laptop() {
    let sshd = Sshd::start(SshdConfig {
        allow_tcp_forwarding: false,
        allow_stream_local_forwarding: false,
        ..SshdConfig::default()
    })
    .expect("sshd");
    let user = TestUser::create(&UserOptions {
        shell: Some("/usr/bin/tcsh".into()),
        ..UserOptions::default()
    })
    .expect("user");
    user.write_file(".cshrc", "echo 'welcome to the test box'\n", 0o644)
        .expect("cshrc");
    user.write_file("ws/README.md", "# remote workspace\n", 0o644)
        .expect("workspace");
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "w1",
                "write_file",
                &json!({"path": "out/result.txt", "content": "made on the host\n"}).to_string(),
            )],
            5,
        ),
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "r1",
                "read_file",
                &json!({"path": "README.md"}).to_string(),
            )],
            5,
        ),
        MockReply::tool_calls(vec![MockToolCall::new("m1", "mcp__lap__get-env", "{}")], 3),
        MockReply::text(&["All ", "done."]),
    ])
    .await;
    let l = laptop(&sshd, &mock.base_url());
    user.authorize(&l.key.public).expect("authorize");
    let dest = format!("{}@127.0.0.1:ws", user.name);

    let out = {
        let (l2, s2, d2) = (&l, &sshd, dest.clone());
        tokio::task::block_in_place(|| {
            reasonix(
                l2,
                s2,
                &[
                    "run",
                    "--ssh",
                    &d2,
                    "--json",
                    "--yolo",
                    "make the result file",
                ],
            )
        })
    };
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The cold install took two execs and one SFTP session, as sshd saw them: the attach
    // script that found the build missing (probe and lock in it), the upload, and the
    // attach script that finished the install and linked (docs/REMOTE.md, "Bootstrap").
    let requests = |log: &str, what: &str| {
        log.lines()
            .filter(|l| {
                l.contains("server_input_channel_req") && l.contains(&format!("request {what} "))
            })
            .count()
    };
    let log = sshd.log();
    assert_eq!(
        (requests(&log, "exec"), requests(&log, "subsystem")),
        (2, 1),
        "execs and subsystems of a cold install, sshd log:\n{log}"
    );
    // The key went first: no `none` request to learn the methods (one round trip less).
    let methods: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("userauth-request for user"))
        .filter_map(|l| l.split(" method ").nth(1))
        .filter_map(|m| m.split_whitespace().next())
        .collect();
    assert!(
        !methods.is_empty() && methods.iter().all(|m| *m == "publickey"),
        "auth methods the client asked for: {methods:?}"
    );
    let events: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "text")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(text, "All done.");
    let read = events
        .iter()
        .find(|e| e["type"] == "tool_finished" && e["name"] == "read_file")
        .expect("read_file finished");
    assert_eq!(read["is_error"], false, "{stdout}");

    // The laptop MCP server ran on the laptop (it sees a variable only the laptop has) and
    // its answer reached the host's agent through the link.
    let mcp = events
        .iter()
        .find(|e| e["type"] == "tool_finished" && e["name"] == "mcp__lap__get-env")
        .expect("laptop MCP tool finished");
    assert_eq!(mcp["is_error"], false, "{stdout}");
    let reqs = mock.requests();
    let last = reqs.last().expect("requests").messages();
    assert!(
        last.iter().any(|m| m["role"] == "tool"
            && m["content"]
                .as_str()
                .unwrap_or("")
                .contains("laptop-side-5e6f")),
        "the laptop server's output reached the model"
    );

    // The work happened on the host, as the host user.
    let result = user.home.join("ws/out/result.txt");
    assert_eq!(
        std::fs::read_to_string(&result).expect("result on host"),
        "made on the host\n"
    );
    let meta = std::fs::metadata(&result).expect("meta");
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), user.uid);
    // The static binary was installed in the versioned path.
    let bin_dir = user.home.join(".reasonix/remote/bin");
    let installed: Vec<String> = std::fs::read_dir(&bin_dir)
        .expect("bin dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        installed
            .iter()
            .any(|n| n == &format!("reasonix-remote-{}", reasonix_forward::build_id())),
        "{installed:?}"
    );

    // The key went to the provider and nowhere on the host.
    assert!(mock
        .requests()
        .iter()
        .all(|r| r.header("authorization") == Some(&format!("Bearer {KEY}"))));
    let hits = files_containing(&user.home, KEY);
    assert!(hits.is_empty(), "key found on the host in {hits:?}");
    let pids = user.pids();
    assert!(
        !pids.is_empty(),
        "the daemon keeps running for the next attach"
    );
    for pid in pids {
        for part in ["environ", "cmdline"] {
            if let Ok(b) = std::fs::read(format!("/proc/{pid}/{part}")) {
                assert!(!contains(&b, KEY), "key in /proc/{pid}/{part}");
            }
        }
    }

    // Rewind over SSH restores the remote workspace (the file made in turn 1 goes away).
    let rw = tokio::task::block_in_place(|| {
        reasonix(
            &l,
            &sshd,
            &["rewind", "--ssh", &dest, "--to", "1", "--scope", "code"],
        )
    });
    assert!(
        rw.status.success(),
        "{}{}",
        String::from_utf8_lossy(&rw.stdout),
        String::from_utf8_lossy(&rw.stderr)
    );
    // A warm attach is one exec, and this laptop knew the build is there: no SFTP.
    let log = sshd.log();
    assert_eq!(
        (requests(&log, "exec"), requests(&log, "subsystem")),
        (3, 1),
        "execs and subsystems after one warm attach, sshd log:\n{log}"
    );
    assert!(
        !result.exists(),
        "rewind removed the file the turn created on the host"
    );
    assert!(user.home.join("ws/README.md").exists());

    // `remote status` sees the install; `remote uninstall --purge` removes everything.
    let status = tokio::task::block_in_place(|| reasonix(&l, &sshd, &["remote", "status", &dest]));
    let status_out = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(
        status.status.success(),
        "{status_out}{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert!(
        status_out.contains(reasonix_forward::build_id()),
        "{status_out}"
    );
    let un = tokio::task::block_in_place(|| {
        reasonix(&l, &sshd, &["remote", "uninstall", "--purge", &dest])
    });
    assert!(
        un.status.success(),
        "{}",
        String::from_utf8_lossy(&un.stderr)
    );
    assert!(
        !user.home.join(".reasonix").exists(),
        "uninstall left ~/.reasonix behind"
    );
    // Ours are gone (sshd's own per-connection process may linger a moment after logout).
    let ours = || -> Vec<String> {
        user.pids()
            .into_iter()
            .filter_map(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).ok())
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .filter(|c| c.contains("reasonix-remote"))
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !ours().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        ours().is_empty(),
        "still running after uninstall: {:?}",
        ours()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_list_over_ssh_shows_host_and_laptop_servers() {
    let sshd = Sshd::start(SshdConfig {
        allow_tcp_forwarding: false,
        allow_stream_local_forwarding: false,
        ..SshdConfig::default()
    })
    .expect("sshd");
    let user = TestUser::create(&UserOptions::default()).expect("user");
    // Host servers of the workspace: a real one and one whose command does not exist.
    user.write_file(
        "ws/reasonix.toml",
        "[[mcp]]\nname = \"hev\"\ncommand = \"mcp-server-everything\"\nargs = [\"stdio\"]\n\n[[mcp]]\nname = \"gone\"\ncommand = \"reasonix-test-no-such-mcp-server\"\n",
        0o644,
    )
    .expect("workspace config");
    // No model request is made: the provider is never contacted.
    let l = laptop(&sshd, "http://127.0.0.1:9");
    user.authorize(&l.key.public).expect("authorize");
    let dest = format!("{}@127.0.0.1:ws", user.name);

    let out = tokio::task::block_in_place(|| {
        reasonix(&l, &sshd, &["mcp", "list", "--json", "--ssh", &dest])
    });
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let servers: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    let get = |name: &str| {
        servers
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {stdout}"))
            .clone()
    };
    assert_eq!(servers.len(), 3, "{stdout}");
    let lap = get("lap");
    assert_eq!(lap["run_on"], "laptop", "{stdout}");
    assert_eq!(lap["state"], "ready", "{stdout}");
    let lap_tools: Vec<&str> = lap["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(lap_tools.contains(&"mcp__lap__echo"), "{stdout}");
    let hev = get("hev");
    assert_eq!(hev["run_on"], "host", "{stdout}");
    assert_eq!(hev["state"], "ready", "{stdout}");
    assert!(
        hev["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .any(|t| t == "mcp__hev__echo"),
        "{stdout}"
    );
    let gone = get("gone");
    assert_eq!(gone["run_on"], "host", "{stdout}");
    assert_eq!(gone["state"], "failed", "{stdout}");
    assert!(
        gone["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("reasonix-test-no-such-mcp-server"),
        "{stdout}"
    );
}

mod adversarial;

/// A workspace MCP declaration the host cannot use is reported to the user over SSH (the
/// laptop never reads the host's files): the file, the line and the key are named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_ssh_a_bad_workspace_mcp_entry_is_reported_to_the_user() {
    let sshd = Sshd::start(SshdConfig::default()).expect("sshd");
    let user = TestUser::create(&UserOptions::default()).expect("user");
    user.write_file(
        "ws/reasonix.toml",
        "[[mcp]]\nname = \"t\"\ncommand = \"mcp-server-everything\"\ntimeout_secs = 5\n",
        0o644,
    )
    .expect("workspace config");
    let mock = MockProvider::start(vec![MockReply::text(&["hello"])]).await;
    let l = laptop_without_mcp(&sshd, &mock.base_url());
    user.authorize(&l.key.public).expect("authorize");
    let dest = format!("{}@127.0.0.1:ws", user.name);
    let out = tokio::task::block_in_place(|| {
        reasonix(&l, &sshd, &["run", "--ssh", &dest, "--json", "hi"])
    });
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let notices: Vec<String> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "notice")
        .filter_map(|v| v["text"].as_str().map(str::to_string))
        .collect();
    let mcp = notices
        .iter()
        .find(|n| n.contains("workspace MCP servers"))
        .unwrap_or_else(|| panic!("no MCP notice in {notices:#?}"));
    assert!(mcp.contains("reasonix.toml"), "{mcp}");
    assert!(mcp.contains("line 4"), "{mcp}");
    assert!(mcp.contains("unknown field `timeout_secs`"), "{mcp}");
    // The turn itself went on.
    assert_eq!(mock.request_count(), 1);
}

/// The host's workspace holds the adversarial `reasonix.toml` and `.mcp.json`; the laptop
/// never sees them (a decoy in the laptop folder is not read either). The host applies the
/// file with the shared tighten-only merge and reports what it ignored, and nothing of it
/// takes effect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_ssh_a_host_project_file_cannot_loosen_anything() {
    use adversarial::{json_lines, sandbox_of, Attack, MCP_JSON, USER_CONFIG_EXTRA};
    let sshd = Sshd::start(SshdConfig::default()).expect("sshd");
    let user = TestUser::create(&UserOptions::default()).expect("user");
    user.write_file("outside/.keep", "", 0o644)
        .expect("outside");
    user.write_file("ws/README.md", "# ws\n", 0o644)
        .expect("ws");
    let attack = Attack::new(&user.home.join("ws"), &user.home.join("outside"));
    user.write_file("ws/reasonix.toml", &attack.project_toml(), 0o644)
        .expect("project");
    user.write_file("ws/.mcp.json", MCP_JSON, 0o644)
        .expect(".mcp.json");
    let mock = MockProvider::start(attack.phase1_replies()).await;
    let l = laptop(&sshd, &mock.base_url());
    let cfg_path = l.rx_home().join("config.toml");
    let mut cfg = std::fs::read_to_string(&cfg_path).expect("config");
    cfg.push_str(USER_CONFIG_EXTRA);
    std::fs::write(&cfg_path, &cfg).expect("config");
    std::fs::write(
        l.dir.path().join("reasonix.toml"),
        "[permissions]\nmode = \"yolo\"\n",
    )
    .expect("decoy");
    user.authorize(&l.key.public).expect("authorize");
    let dest = format!("{}@127.0.0.1:ws", user.name);

    let out = tokio::task::block_in_place(|| {
        reasonix(&l, &sshd, &["run", "--ssh", &dest, "--json", "try it"])
    });
    let events = json_lines(&out.stdout);
    // The user's ask rule is denied headless (checked in check_phase1): exit 4.
    assert_eq!(
        out.status.code(),
        Some(4),
        "{events:#?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    attack.check_phase1(&events, &sandbox_of(&events));
    let warnings: String = events
        .iter()
        .filter(|e| e["type"] == "warning")
        .filter_map(|e| e["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    Attack::check_warnings(&warnings);
    assert!(
        warnings
            .lines()
            .all(|w| w.starts_with("host: reasonix.toml: ignored")),
        "only the host's file is reported: {warnings}"
    );

    std::fs::write(&cfg_path, cfg.replace("mode = \"auto\"", "mode = \"ask\"")).expect("config");
    mock.push(Attack::phase2_replies());
    let out = tokio::task::block_in_place(|| {
        reasonix(
            &l,
            &sshd,
            &["run", "--ssh", &dest, "--json", "--continue", "try again"],
        )
    });
    attack.check_phase2(&json_lines(&out.stdout));
}

/// `reasonix` with the rest of the arguments, as a child process (not waited for).
fn reasonix_spawn(l: &Laptop, sshd: &Sshd, args: &[&str]) -> std::process::Child {
    reasonix_command(l, sshd, args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn reasonix")
}

fn status_json(l: &Laptop, sshd: &Sshd, dest: &str) -> Value {
    let out = reasonix(l, sshd, &["remote", "status", "--json", dest]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("status json")
}

fn workspace_of<'a>(status: &'a Value, suffix: &str) -> Option<&'a Value> {
    status["workspaces"]
        .as_array()?
        .iter()
        .find(|w| w["workspace"].as_str().is_some_and(|p| p.ends_with(suffix)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workspaces_on_one_host_stop_one_and_the_other_keeps_running() {
    let sshd = Sshd::start(SshdConfig::default()).expect("sshd");
    let user = TestUser::create(&UserOptions::default()).expect("user");
    user.write_file("ws1/a.txt", "one\n", 0o644).expect("ws1");
    user.write_file("ws2/b.txt", "two\n", 0o644).expect("ws2");
    // ws2's turn streams for 30 s (longer than the rest of the test); ws1's answers at once.
    let slow: Vec<String> = (0..400).map(|i| format!("s{i} ")).collect();
    let mock = MockProvider::start(vec![
        MockReply::text(&slow).slow(Duration::from_millis(75)),
        MockReply::text(&["ws1 done"]),
        MockReply::text(&slow).slow(Duration::from_millis(75)),
    ])
    .await;
    let l = laptop_without_mcp(&sshd, &mock.base_url());
    user.authorize(&l.key.public).expect("authorize");
    let host = format!("{}@127.0.0.1", user.name);
    let ws1 = format!("{host}:ws1");
    let ws2 = format!("{host}:ws2");

    let long = reasonix_spawn(&l, &sshd, &["run", "--ssh", &ws2, "--yolo", "long one"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while mock.request_count() < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "ws2 turn never reached the model"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let quick = tokio::task::block_in_place(|| {
        reasonix(&l, &sshd, &["run", "--ssh", &ws1, "--yolo", "quick one"])
    });
    assert!(
        quick.status.success(),
        "{}",
        String::from_utf8_lossy(&quick.stderr)
    );

    // Both daemons are listed, with their sessions and states.
    let st = tokio::task::block_in_place(|| status_json(&l, &sshd, &host));
    let w1 = workspace_of(&st, "/ws1").unwrap_or_else(|| panic!("ws1 missing: {st}"));
    let w2 = workspace_of(&st, "/ws2").unwrap_or_else(|| panic!("ws2 missing: {st}"));
    assert_eq!(w1["sessions"][0]["state"], "idle", "{st}");
    assert_eq!(w2["sessions"][0]["state"], "running", "{st}");
    assert_eq!(w1["build_id"], reasonix_forward::build_id());
    let w2_pid = w2["pid"].clone();
    // The table names both workspaces too.
    let table = tokio::task::block_in_place(|| reasonix(&l, &sshd, &["remote", "status", &host]));
    let table = String::from_utf8_lossy(&table.stdout).to_string();
    assert!(table.contains("/ws1") && table.contains("/ws2"), "{table}");
    assert!(table.contains("running"), "{table}");

    // `DEST` alone, headless: refused, nothing stopped.
    let bare = tokio::task::block_in_place(|| reasonix(&l, &sshd, &["remote", "stop", &host]));
    assert!(!bare.status.success());
    assert!(
        String::from_utf8_lossy(&bare.stderr).contains("--all"),
        "{}",
        String::from_utf8_lossy(&bare.stderr)
    );

    // Stop ws1 only.
    let stop = tokio::task::block_in_place(|| reasonix(&l, &sshd, &["remote", "stop", &ws1]));
    let stop_out = String::from_utf8_lossy(&stop.stdout).to_string();
    assert!(
        stop.status.success(),
        "{stop_out}{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    assert!(
        stop_out.contains("stopped") && stop_out.contains("/ws1"),
        "{stop_out}"
    );
    let st = tokio::task::block_in_place(|| status_json(&l, &sshd, &host));
    assert!(
        workspace_of(&st, "/ws1").is_none(),
        "ws1 still listed: {st}"
    );
    let w2 = workspace_of(&st, "/ws2").unwrap_or_else(|| panic!("ws2 gone: {st}"));
    assert_eq!(w2["pid"], w2_pid, "{st}");
    assert_eq!(w2["sessions"][0]["state"], "running", "{st}");

    // ws2's turn runs to its end, undisturbed.
    let out = tokio::task::block_in_place(|| long.wait_with_output()).expect("long run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("s399"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // Stopping a daemon a client is attached to warns; the client reconnects and starts the
    // daemon again, and `remote stop` says so (#15 item 7).
    let mut attached = reasonix_spawn(
        &l,
        &sshd,
        &["run", "--ssh", &ws2, "--continue", "--yolo", "again"],
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while mock.request_count() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the second ws2 turn never reached the model"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stop =
        tokio::task::block_in_place(|| reasonix(&l, &sshd, &["--verbose", "remote", "stop", &ws2]));
    let stop_out = String::from_utf8_lossy(&stop.stdout).to_string();
    assert!(stop.status.success(), "{stop_out}");
    // `--verbose` (docs/REMOTE.md) writes the connect trace to the laptop's log file.
    let log = l.rx_home().join("logs/reasonix.log");
    assert!(
        String::from_utf8_lossy(&stop.stderr).contains(&format!("debug log in {}", log.display())),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    let trace = std::fs::read_to_string(&log).expect("the --verbose log");
    assert!(trace.contains("DEBUG reasonix_bootstrap"), "{trace}");
    assert!(
        stop_out.contains("; interrupted the turn in session(s)"),
        "{stop_out}"
    );
    assert_eq!(
        stop_out
            .matches("warning: 1 client was attached to")
            .count(),
        1,
        "{stop_out}"
    );
    // The run is still attached mid-turn: it reconnects within the watch of `remote stop`.
    assert!(
        stop_out.contains("a client restarted the daemon of") && stop_out.contains("/ws2 (pid "),
        "{stop_out}"
    );
    let _ = attached.kill();
    let _ = tokio::task::block_in_place(|| attached.wait_with_output());

    let all =
        tokio::task::block_in_place(|| reasonix(&l, &sshd, &["remote", "stop", "--all", &host]));
    assert!(all.status.success());
    let all_out = String::from_utf8_lossy(&all.stdout).to_string();
    assert!(all_out.contains("/ws2"), "{all_out}");
    assert!(!all_out.contains("warning:"), "nobody attached: {all_out}");

    // Uninstall keeps the journals and says so; a second one has nothing to remove.
    let un = tokio::task::block_in_place(|| reasonix(&l, &sshd, &["remote", "uninstall", &host]));
    let un_out = String::from_utf8_lossy(&un.stdout).to_string();
    assert!(un.status.success(), "{un_out}");
    assert!(un_out.contains("removed "), "{un_out}");
    assert!(
        un_out.contains(&format!(
            "kept {}/.reasonix/sessions (session journals and checkpoints; `reasonix remote uninstall --purge {host}` removes them too)",
            user.home.display()
        )),
        "{un_out}"
    );
    assert!(user.home.join(".reasonix/sessions").is_dir());
    let again =
        tokio::task::block_in_place(|| reasonix(&l, &sshd, &["remote", "uninstall", &host]));
    let again_out = String::from_utf8_lossy(&again.stdout).to_string();
    assert!(again.status.success(), "{again_out}");
    assert!(
        again_out.contains("nothing to remove: Reasonix has nothing installed on 127.0.0.1"),
        "{again_out}"
    );
    assert!(!again_out.contains("removed "), "{again_out}");
}

/// Session management and custom commands over SSH: the host reads the workspace's command
/// file (the provider receives its expansion); `reasonix sessions --ssh` lists with every
/// field, renames, deletes to the trash and restores; `run --ssh --session ID` resumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_and_custom_commands_over_ssh() {
    let sshd = Sshd::start(SshdConfig::default()).expect("sshd");
    let user = TestUser::create(&UserOptions::default()).expect("user");
    user.write_file(
        "ws/.reasonix/commands/ship.md",
        "---\ndescription: Ship it\n---\nShip $1 to $2 ($ARGUMENTS)\n",
        0o644,
    )
    .expect("command file");
    let mock = MockProvider::start(vec![
        MockReply::text(&["shipped"]),
        MockReply::text(&["again"]),
        MockReply::text(&["weather"]),
    ])
    .await;
    let l = laptop(&sshd, &mock.base_url());
    user.authorize(&l.key.public).expect("authorize");
    let dest = format!("{}@127.0.0.1:ws", user.name);
    let run = |args: &[&str]| {
        let out = tokio::task::block_in_place(|| reasonix(&l, &sshd, args));
        assert!(
            out.status.success(),
            "{args:?}\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let list = |extra: &[&str]| -> Vec<Value> {
        let mut args = vec!["sessions", "--json"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--ssh", &dest]);
        run(&args)
            .lines()
            .map(|l| serde_json::from_str(l).expect("json line"))
            .collect()
    };

    run(&["run", "--ssh", &dest, "/ship v2 prod"]);
    let first = mock.requests()[0].messages();
    let sent = first
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .expect("user message")["content"]
        .to_string();
    assert!(sent.contains("Ship v2 to prod (v2 prod)"), "{sent}");

    let sessions = list(&[]);
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let s = &sessions[0];
    let id = s["id"].as_str().expect("id").to_string();
    assert_eq!(s["turns"], 1);
    assert_eq!(s["state"], "idle");
    assert_eq!(s["driver_attached"], false);
    assert!(
        s["title"]
            .as_str()
            .expect("title")
            .starts_with("Ship v2 to prod"),
        "{s}"
    );
    assert!(
        s["last_activity"].as_str().expect("ts").ends_with('Z'),
        "{s}"
    );

    run(&["sessions", "rename", &id, "Release v2", "--ssh", &dest]);
    assert_eq!(list(&[])[0]["title"], "Release v2");
    run(&["sessions", "delete", &id, "--ssh", &dest]);
    assert!(list(&[]).is_empty());
    let trash = list(&["--trash"]);
    assert_eq!(trash.len(), 1);
    assert_eq!(trash[0]["info"]["title"], "Release v2");
    run(&["sessions", "restore", &id, "--ssh", &dest]);
    let back = list(&[]);
    assert_eq!(
        (back[0]["id"].as_str(), back[0]["title"].as_str()),
        (Some(id.as_str()), Some("Release v2"))
    );

    // `--session ID` resumes it: the provider sees the first turn again.
    run(&["run", "--ssh", &dest, "--session", &id, "and tag it"]);
    let second = mock.requests()[1].messages();
    let users: Vec<String> = second
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect();
    assert!(
        users.iter().any(|u| u.contains("Ship v2 to prod")),
        "{users:?}"
    );
    assert!(users.iter().any(|u| u.contains("and tag it")), "{users:?}");
    assert_eq!(list(&[])[0]["turns"], 2);

    // An MCP prompt of the laptop's server `lap` (tunnelled; the MCP client runs on the
    // host), expanded on the host with a positional and a key=value argument.
    run(&[
        "run",
        "--ssh",
        &dest,
        "/mcp__lap__args-prompt Lyon state=RH",
    ]);
    let third = mock.requests()[2].messages();
    let sent = third
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .expect("user message")["content"]
        .to_string();
    assert!(sent.contains("What's weather in Lyon, RH?"), "{sent}");
    let host = format!("{}@127.0.0.1", user.name);
    run(&["remote", "stop", "--all", &host]);
}

/// Ctrl-C on `reasonix run --ssh` cancels the turn on the host, which ends the provider's
/// HTTP stream on the laptop (the mock sees its connection close before the reply ended),
/// and the next `--continue` runs its own turn only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_over_ssh_cancels_the_turn_and_closes_the_provider_stream() {
    let sshd = Sshd::start(SshdConfig::default()).expect("sshd");
    let user = TestUser::create(&UserOptions::default()).expect("user");
    user.write_file("ws/a.txt", "one\n", 0o644).expect("ws");
    let mock = MockProvider::start(vec![
        MockReply::Hang {
            chunks: vec!["thinking".into()],
        },
        MockReply::text(&["second turn"]),
    ])
    .await;
    let l = laptop_without_mcp(&sshd, &mock.base_url());
    user.authorize(&l.key.public).expect("authorize");
    let ws = format!("{}@127.0.0.1:ws", user.name);
    let child = reasonix_spawn(&l, &sshd, &["run", "--ssh", &ws, "--json", "slow one"]);
    let guard = std::time::Instant::now() + Duration::from_secs(90);
    while mock.request_count() == 0 {
        assert!(
            std::time::Instant::now() < guard,
            "the model request never arrived"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // SAFETY: signalling the child this test spawned.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        out.status.code(),
        Some(130),
        "cancelled: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "turn_finished")
        .collect();
    assert_eq!(done.len(), 1, "the host confirmed the end: {stdout}");
    assert_eq!(done[0]["outcome"], "cancelled");
    tokio::time::timeout(Duration::from_secs(30), mock.wait_closed_early(0))
        .await
        .expect("the laptop closed the provider stream of the cancelled turn");

    let out = tokio::task::block_in_place(|| {
        reasonix(
            &l,
            &sshd,
            &["run", "--ssh", &ws, "--json", "--continue", "next"],
        )
    });
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("second turn"), "{stdout}");
    assert_eq!(mock.request_count(), 2, "one request per turn: {stdout}");
    let _ = tokio::task::block_in_place(|| reasonix(&l, &sshd, &["remote", "stop", &ws]));
}

/// Safe upgrades over SSH (issue #17): the host runs "another build" (the same static
/// binary under another build id: a wrapper the old laptop installs sets
/// `REASONIX_TEST_BUILD_ID` for it and everything it starts), busy with a turn. A headless
/// client of this build installs its own binary beside it and refuses to replace the busy
/// daemon (the turn goes on); with `--upgrade` it replaces it, and the new daemon resumes the
/// old session from its journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_ssh_a_busy_daemon_of_another_build_is_replaced_only_with_upgrade() {
    const OLD: &str = "0.0.1-sshold";
    let sshd = Sshd::start(SshdConfig::default()).expect("sshd");
    let user = TestUser::create(&UserOptions::default()).expect("user");
    user.write_file("ws/a.txt", "one\n", 0o644).expect("ws");
    // The old build: this very binary, in the host user's home, started by a wrapper that
    // gives it (and the daemon it starts) the old build id.
    let real = std::fs::read(musl_host_binary()).expect("host binary");
    user.write_file("old-build/reasonix-remote", "", 0o755)
        .expect("old binary");
    std::fs::write(user.home.join("old-build/reasonix-remote"), real).expect("old binary");
    let laptop_dir = tempfile::tempdir().expect("wrapper dir");
    let wrapper = laptop_dir.path().join("reasonix-remote-old");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nREASONIX_TEST_BUILD_ID={OLD} exec {} \"$@\"\n",
            user.home.join("old-build/reasonix-remote").display()
        ),
    )
    .expect("wrapper");
    let slow: Vec<String> = (0..400).map(|i| format!("w{i} ")).collect();
    let mock = MockProvider::start(vec![
        MockReply::text(&slow).slow(Duration::from_millis(100)),
        MockReply::text(&["upgraded answer"]),
        MockReply::text(&["resumed after the upgrade"]),
    ])
    .await;
    let l = laptop_without_mcp(&sshd, &mock.base_url());
    user.authorize(&l.key.public).expect("authorize");
    let dest = format!("{}@127.0.0.1:ws", user.name);

    let mut old = reasonix_command(&l, &sshd, &["run", "--ssh", &dest, "--yolo", "long job"])
        .env("REASONIX_TEST_BUILD_ID", OLD)
        .env("REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL", &wrapper)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("old run");
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while mock.request_count() < 1 {
        if let Some(st) = old.try_wait().expect("old") {
            let out = old.wait_with_output().expect("old output");
            panic!(
                "the old build's run ended ({st}) before its turn reached the model: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the old build's turn never reached the model"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let st = tokio::task::block_in_place(|| status_json(&l, &sshd, &dest));
    let w = workspace_of(&st, "/ws").unwrap_or_else(|| panic!("no daemon: {st}"));
    assert_eq!(w["build_id"], OLD, "{st}");
    assert_eq!(w["sessions"][0]["state"], "running", "{st}");
    let old_session = w["sessions"][0]["id"].as_str().expect("id").to_string();

    // Headless, no --upgrade: refused with what to do; the old turn goes on.
    let refused = tokio::task::block_in_place(|| {
        reasonix(&l, &sshd, &["run", "--ssh", &dest, "--yolo", "quick"])
    });
    let err = String::from_utf8_lossy(&refused.stderr).to_string();
    assert!(!refused.status.success(), "{err}");
    assert!(err.contains(OLD) && err.contains("--upgrade"), "{err}");
    assert!(err.contains("middle of a turn"), "{err}");
    assert!(
        old.try_wait().expect("old").is_none(),
        "the old run must still be going"
    );
    assert_eq!(mock.request_count(), 1, "nothing else reached the model");
    let bin_dir = user.home.join(".reasonix/remote/bin");
    for build in [OLD, reasonix_forward::build_id()] {
        assert!(
            bin_dir.join(format!("reasonix-remote-{build}")).is_file(),
            "{build} installed beside the other"
        );
    }
    let st = tokio::task::block_in_place(|| status_json(&l, &sshd, &dest));
    let w = workspace_of(&st, "/ws").unwrap_or_else(|| panic!("no daemon: {st}"));
    assert_eq!(w["build_id"], OLD, "still the old daemon: {st}");
    assert_eq!(w["sessions"][0]["state"], "running", "{st}");

    // --upgrade: the old daemon is replaced and this build answers.
    let up = tokio::task::block_in_place(|| {
        reasonix(
            &l,
            &sshd,
            &["run", "--ssh", &dest, "--yolo", "--upgrade", "quick"],
        )
    });
    let up_out = String::from_utf8_lossy(&up.stdout).to_string();
    assert!(
        up.status.success() && up_out.contains("upgraded answer"),
        "{up_out}{}",
        String::from_utf8_lossy(&up.stderr)
    );
    // The old client loses its daemon and ends; it does not hang.
    let _ = tokio::task::block_in_place(|| old.wait());
    let st = tokio::task::block_in_place(|| status_json(&l, &sshd, &dest));
    let w = workspace_of(&st, "/ws").unwrap_or_else(|| panic!("no daemon: {st}"));
    assert_eq!(w["build_id"], reasonix_forward::build_id(), "{st}");
    let resumed = w["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|s| s["id"] == old_session.as_str())
        .unwrap_or_else(|| panic!("the old session is not in the new daemon: {st}"));
    assert_eq!(resumed["state"], "idle", "{st}");
    // The old session goes on with the new build.
    let again = tokio::task::block_in_place(|| {
        reasonix(
            &l,
            &sshd,
            &[
                "run",
                "--ssh",
                &dest,
                "--yolo",
                "--session",
                &old_session,
                "go on",
            ],
        )
    });
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("resumed after the upgrade"),
        "{}{}",
        String::from_utf8_lossy(&again.stdout),
        String::from_utf8_lossy(&again.stderr)
    );
    let _ = tokio::task::block_in_place(|| reasonix(&l, &sshd, &["remote", "stop", &dest]));
}
