//! Steering, `!` and the shared prompt history in the real `reasonix` TUI under tmux: Enter
//! mid-turn steers (the provider receives it in the same turn), and over a real sshd a second
//! laptop finds the first one's prompts with Up and Ctrl-R.

mod term_common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use reasonix_testkit::sshd::{ClientKey, Sshd, SshdConfig, TestUser, UserOptions};
use serde_json::json;
use term_common::{stop_daemons, write_mock_config, Tmux};

fn write_config(home: &Path, base_url: &str) {
    write_mock_config(
        home,
        base_url,
        "RX_TUI_KEY",
        "[permissions]\nmode = \"yolo\"\n",
    );
}

/// A folder with a workspace `ws/` and a laptop home `rxhome/` whose provider is
/// `base_url`, and the command line of the TUI on that workspace in local mode.
fn local_tui(base_url: &str) -> (tempfile::TempDir, PathBuf, PathBuf, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    let rx_home = dir.path().join("rxhome");
    write_config(&rx_home, base_url);
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"));
    let host = bin.parent().expect("bin dir").join("reasonix-remote");
    let cmd = format!(
        "cd {} && env HOME={} REASONIX_HOME={} REASONIX_REMOTE_BIN={} {}",
        ws.display(),
        dir.path().display(),
        rx_home.display(),
        host.display(),
        bin.display()
    );
    (dir, ws, rx_home, cmd)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tui_enter_mid_turn_steers_the_running_turn() {
    let mock = MockProvider::start(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "c1",
                "bash",
                &json!({"command": "while [ ! -e go ]; do sleep 0.05; done; echo held-done"})
                    .to_string(),
            )],
            16,
        ),
        MockReply::text(&["steered-answer"]),
    ])
    .await;
    let (_dir, ws, rx_home, cmd) = local_tui(&mock.base_url());
    let t = Tmux::tui(&cmd);
    tokio::task::block_in_place(|| {
        t.wait_for("connected");
        t.send_keys(&["indent it", "Enter"]);
        t.wait_for("Enter steer");
        // Steer once the first model step is under way (a steer typed before it would,
        // rightly, go with that first step).
        let guard = Instant::now() + Duration::from_secs(60);
        while mock.request_count() < 1 {
            assert!(Instant::now() < guard, "the turn never reached the model");
            std::thread::sleep(Duration::from_millis(20));
        }
        t.send_keys(&["use tabs please", "Enter"]);
        t.wait_for("steer · waiting for the next model step");
        std::fs::write(ws.join("go"), "").expect("gate");
        let s = t.wait_for("steered-answer");
        assert!(s.contains("steer · given to the model"), "{s}");
    });
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2, "one turn, two steps");
    let last = reqs[1].messages();
    let m = last.last().expect("message");
    assert_eq!(m["role"], "user", "{last:#?}");
    assert_eq!(m["content"], "use tabs please");
    t.send_keys(&["C-c"]);
    t.send_keys(&["C-c"]);
    stop_daemons(&rx_home);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_laptops_over_ssh_share_the_prompt_history() {
    let host_bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/x86_64-unknown-linux-musl/debug/reasonix-remote");
    assert!(host_bin.is_file(), "build the static host binary first");
    let sshd = Sshd::start(SshdConfig::default()).expect("sshd");
    let user = TestUser::create(&UserOptions::default()).expect("user");
    user.write_file("proj/README", "x\n", 0o644)
        .expect("workspace");
    let mock = MockProvider::start(vec![MockReply::text(&["answer-from-a"])]).await;
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"));
    let laptop = |name: &str| {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".ssh")).expect("ssh");
        std::fs::write(home.join(".ssh/known_hosts"), sshd.known_hosts_line()).expect("kh");
        let key = ClientKey::generate(&home.join(".ssh"), name, None).expect("key");
        user.authorize(&key.public).expect("authorize");
        let rx_home = dir.path().join("rxhome");
        write_config(&rx_home, &mock.base_url());
        let cmd = format!(
            "cd {} && env -u SSH_AUTH_SOCK HOME={} REASONIX_HOME={} REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL={} {} ssh {}@127.0.0.1:proj -p {} -F none -i {} -o IdentityAgent=none",
            dir.path().display(),
            home.display(),
            rx_home.display(),
            host_bin.display(),
            bin.display(),
            user.name,
            sshd.port(),
            key.private.display()
        );
        (dir, cmd)
    };
    let (_a_dir, a_cmd) = laptop("id_a");
    let (_b_dir, b_cmd) = laptop("id_b");
    let a = Tmux::tui(&a_cmd);
    tokio::task::block_in_place(|| {
        a.wait_for("connected");
        a.send_keys(&["alpha prompt from laptop a", "Enter"]);
        a.wait_for("answer-from-a");
    });
    a.send_keys(&["C-c"]);
    a.send_keys(&["C-c"]);
    drop(a);
    let b = Tmux::tui(&b_cmd);
    tokio::task::block_in_place(|| {
        b.wait_for("connected");
        // Up recalls laptop a's prompt (loaded from the host at open).
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            b.send_keys(&["Up"]);
            std::thread::sleep(Duration::from_millis(200));
            if b.screen().contains("> alpha prompt from laptop a") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "Up never recalled a's prompt:\n{}",
                b.screen()
            );
        }
        b.send_keys(&["C-u"]);
        b.send_keys(&["C-r"]);
        b.send_keys(&["from laptop"]);
        let s = b.wait_for("search: from laptop");
        assert!(s.contains("> alpha prompt from laptop a"), "{s}");
        b.send_keys(&["Escape"]);
    });
    b.send_keys(&["C-c"]);
    b.send_keys(&["C-c"]);
    // The history file is on the host, private to the user.
    let file = std::fs::read_dir(user.home.join(".reasonix/sessions"))
        .expect("sessions on the host")
        .flatten()
        .map(|d| d.path().join("prompt-history.ndjson"))
        .find(|p| p.exists())
        .expect("history file on the host");
    let body = std::fs::read_to_string(&file).expect("history");
    assert_eq!(body, "\"alpha prompt from laptop a\"\n");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

/// `reasonix sessions [--trash] --json` against the same local host: the titles it lists.
fn cli_titles(ws: &Path, home: &Path, rx_home: &Path, trash: bool) -> Vec<String> {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"));
    let host = bin.parent().expect("bin dir").join("reasonix-remote");
    let mut cmd = std::process::Command::new(&bin);
    cmd.current_dir(ws)
        .env("HOME", home)
        .env("REASONIX_HOME", rx_home)
        .env("REASONIX_REMOTE_BIN", host)
        .args(["sessions", "--json"]);
    if trash {
        cmd.arg("--trash");
    }
    let out = cmd.output().expect("reasonix sessions");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("json line");
            let info = if trash { &v["info"] } else { &v };
            info["title"].as_str().unwrap_or("").to_string()
        })
        .collect()
}

/// In the open `/sessions` overlay, move the cursor (which starts on the first row) to the row
/// titled `title`. The list is newest first by journal time, so whether the just-made empty
/// session sorts above the older one depends on which journal was written last.
fn choose_session(t: &Tmux, title: &str) {
    let screen = t.wait_for(title);
    let rows: Vec<&str> = screen
        .lines()
        .skip_while(|l| !l.contains("Sessions"))
        .filter(|l| l.contains(" turn"))
        .collect();
    let at = rows
        .iter()
        .position(|l| l.contains(title))
        .unwrap_or_else(|| panic!("no session row titled {title:?}:\n{screen}"));
    for _ in 0..at {
        t.send_keys(&["Down"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tui_streams_bang_finds_a_late_command_file_and_restores_and_purges_from_the_trash() {
    let mock = MockProvider::start(vec![MockReply::text(&["late-answer"])]).await;
    let (dir, ws, rx_home, cmd) = local_tui(&mock.base_url());
    let t = Tmux::tui(&cmd);
    tokio::task::block_in_place(|| {
        t.wait_for("new session");
        // `!` streams: the first line shows while the command still waits for `go`.
        t.send_keys(&[
            "!!echo bang-first; while [ ! -e go ]; do sleep 0.05; done; echo bang-second",
            "Enter",
        ]);
        let s = t.wait_for("│ bang-first");
        assert!(s.contains("shell · running…"), "{s}");
        assert!(!s.contains("│ bang-second"), "{s}");
        std::fs::write(ws.join("go"), "").expect("gate");
        t.wait_for("│ bang-second");
        let s = t.wait_for("output kept out of the model's context");
        assert!(!s.contains("running…"), "{s}");
        // Added after the TUI read its command files: found all the same.
        std::fs::create_dir_all(ws.join(".reasonix/commands")).expect("commands dir");
        std::fs::write(
            ws.join(".reasonix/commands/late.md"),
            "---\ndescription: added late\n---\nSay late-$ARGUMENTS",
        )
        .expect("command file");
        t.send_keys(&["/late one", "Enter"]);
        t.wait_for("late-answer");
    });
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    let msgs = reqs[0].messages();
    assert_eq!(msgs.last().expect("user")["content"], "Say late-one");

    tokio::task::block_in_place(|| {
        // A new session, then the first one goes to the trash from /sessions.
        t.new_session();
        t.send_keys(&["/sessions", "Enter"]);
        choose_session(&t, "Say late-one");
        t.send_keys(&["d"]);
        t.wait_for("moved to the trash");
        t.send_keys(&["t"]);
        t.wait_for("kept until");
        // Enter restores it.
        t.send_keys(&["Enter"]);
        t.wait_for("restored from the trash");
        t.wait_for("the trash is empty");
    });
    assert!(cli_titles(&ws, dir.path(), &rx_home, true).is_empty());
    assert!(cli_titles(&ws, dir.path(), &rx_home, false).contains(&"Say late-one".to_string()));
    tokio::task::block_in_place(|| {
        // Back to the sessions, delete again, then purge (asked first).
        t.send_keys(&["s"]);
        choose_session(&t, "Say late-one");
        t.send_keys(&["d"]);
        t.wait_for("moved to the trash");
        t.send_keys(&["t"]);
        t.wait_for("kept until");
        t.send_keys(&["p"]);
        t.wait_for("for good?");
        t.send_keys(&["y"]);
        t.wait_for("purged for good");
    });
    assert!(cli_titles(&ws, dir.path(), &rx_home, true).is_empty());
    assert!(!cli_titles(&ws, dir.path(), &rx_home, false).contains(&"Say late-one".to_string()));
    t.send_keys(&["Escape"]);
    t.send_keys(&["C-c"]);
    t.send_keys(&["C-c"]);
    stop_daemons(&rx_home);
}

/// `/compact <focus>` in the TUI (issue #14): the host asks the model for one summary
/// through this laptop's gateway with the focus in it, the transcript says what was
/// rewritten and that the next request misses the cache once, `/context` counts the
/// summary, and the next turn's first request starts from the summary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tui_compact_with_a_focus_summarises_once_and_context_counts_it() {
    const FOCUS: &str = "keep the fox line numbers";
    let read = |id: &str, path: &str| {
        MockReply::tool_calls(
            vec![MockToolCall::new(
                id,
                "read_file",
                &json!({ "path": path }).to_string(),
            )],
            16,
        )
    };
    let mock = MockProvider::start(vec![
        read("r1", "notes.txt"),
        MockReply::text(&["first-answer"]),
        read("r2", "other.txt"),
        MockReply::text(&["second-answer"]),
        MockReply::text(&["## Goal\n- read notes.txt\n## Pending work\n- none\n"]),
        MockReply::text(&["third-answer"]),
    ])
    .await;
    mock.enable_prompt_cache(Some(32_000));
    let (_dir, ws, rx_home, cmd) = local_tui(&mock.base_url());
    // Two results of about 10k tokens each: the tail (a quarter of the 32k window) keeps
    // the second, so the first turn is what a summary replaces.
    for (file, word) in [("notes.txt", "alpha"), ("other.txt", "beta")] {
        let text: String = (0..800)
            .map(|n| format!("{word} line {n}: the quick brown fox jumps over the lazy dog\n"))
            .collect();
        std::fs::write(ws.join(file), text).expect("file");
    }
    // The window and prices of this test, in place of `local_tui`'s config.
    write_mock_config(
        &rx_home,
        &mock.base_url(),
        "RX_TUI_KEY",
        "context_window = 32000\nprices = { input = 0.14, cached = 0.0028, output = 0.28 }\n[permissions]\nmode = \"yolo\"\n",
    );
    let t = Tmux::tui(&cmd);
    tokio::task::block_in_place(|| {
        t.wait_for("connected");
        t.send_keys(&["read the notes", "Enter"]);
        let s = t.wait_for("first-answer");
        assert!(s.contains("ctx "), "the status bar shows context used: {s}");
        t.send_keys(&["read the other one", "Enter"]);
        t.wait_for("second-answer");
        t.send_keys(&[&format!("/compact {FOCUS}"), "Enter"]);
        let s = t.wait_for("summarised");
        assert!(s.contains("context compacted"), "{s}");
        t.send_keys(&["/context", "Enter"]);
        let s = t.wait_screen(Duration::from_secs(60), "the context overlay", |s| {
            s.contains("Compactions") && s.contains("1 summary(ies)")
        });
        assert!(s.contains("Cost so far"), "{s}");
        assert!(s.contains("at the configured prices"), "{s}");
        t.send_keys(&["Escape"]);
        t.send_keys(&["and now?", "Enter"]);
        t.wait_for("third-answer");
    });
    let reqs = mock.requests();
    assert_eq!(
        reqs.len(),
        6,
        "two turns of two steps, one summary, one step"
    );
    let summary_req = reqs[4].messages();
    let ask = summary_req.last().expect("a message");
    let ask = ask["content"].as_str().unwrap_or("");
    assert!(ask.contains("<compaction-request>"), "{ask}");
    assert!(ask.contains(&format!("focus on: {FOCUS}")), "{ask}");
    let has_alpha = |msgs: &[serde_json::Value]| {
        msgs.iter().any(|m| {
            m["content"]
                .as_str()
                .unwrap_or("")
                .contains("alpha line 799:")
        })
    };
    assert!(
        has_alpha(&reqs[3].messages()),
        "before /compact the first result is sent whole"
    );
    let next = reqs[5].messages();
    assert!(
        next.iter().any(|m| m["content"]
            .as_str()
            .unwrap_or("")
            .starts_with("<compaction-summary>")),
        "the next request starts from the summary: {next:#?}"
    );
    assert!(
        !has_alpha(&next),
        "the summarised tool result is no longer sent"
    );
    t.send_keys(&["C-c"]);
    t.send_keys(&["C-c"]);
    stop_daemons(&rx_home);
}
