//! The real `reasonix` TUI driven under tmux: type a prompt, approve an edit, see the diff and
//! the final answer, both locally and over SSH against a real sshd.

mod term_common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use reasonix_testkit::sshd::{ClientKey, Sshd, SshdConfig, TestUser, UserOptions};
use serde_json::json;
use term_common::{stop_daemons, write_mock_config, Tmux};

fn script() -> Vec<MockReply> {
    vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "e1",
                "edit_file",
                &json!({"path": "greet.py", "old_string": "print('hello')", "new_string": "print('hello, world')"}).to_string(),
            )],
            5,
        ),
        MockReply::text(&["Updated the ", "**greeting**."]),
    ]
}

fn write_config(home: &Path, base_url: &str) {
    write_mock_config(home, base_url, "RX_TUI_KEY", "");
}

fn drive(t: &Tmux) -> String {
    t.wait_for("connected");
    t.send_keys(&["please fix the greeting", "Enter"]);
    let approval = t.wait_for("Approval needed");
    assert!(approval.contains("greet.py"), "{approval}");
    assert!(
        approval.contains("hello, world"),
        "the diff preview shows the edit:\n{approval}"
    );
    t.send_keys(&["y"]);
    t.wait_for("Updated the greeting")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tui_local_prompt_approve_diff_answer() {
    let mut replies = script();
    replies.push(MockReply::text(&["Still here."]));
    let mock = MockProvider::start(replies).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::write(ws.join("greet.py"), "print('hello')\n").expect("greet");
    write_config(&home, &mock.base_url());
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"));
    let cmd = format!(
        "cd {} && env -u XDG_RUNTIME_DIR REASONIX_HOME={} {}",
        ws.display(),
        home.display(),
        bin.display()
    );
    let t = Tmux::tui(&cmd);
    let screen = tokio::task::block_in_place(|| drive(&t));
    assert!(screen.contains("Updated the greeting"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(ws.join("greet.py")).expect("greet"),
        "print('hello, world')\n"
    );

    // Cut the link under the TUI (the attach bridge dies, as when SSH drops): the screen
    // reports the loss and the resume, the transcript stays, and the next turn works.
    let pattern = format!("reasonix-remote attach --workspace={}", ws.display());
    let st = Command::new("pkill")
        .args(["-KILL", "-f", &pattern])
        .status()
        .expect("pkill");
    assert!(st.success(), "the attach bridge was running");
    let screen = tokio::task::block_in_place(|| t.wait_for("reconnected; the session resumed"));
    assert!(screen.contains("connection lost"), "{screen}");
    assert!(
        screen.contains("Updated the greeting"),
        "transcript kept:\n{screen}"
    );
    t.send_keys(&["and now?", "Enter"]);
    let screen = tokio::task::block_in_place(|| t.wait_for("Still here."));
    assert!(screen.contains("connected"), "{screen}");
    t.send_keys(&["C-c"]);
    t.send_keys(&["C-c"]);
    stop_daemons(&home);
}

/// #15 item 6: a 10,000-line bracketed paste shows as one collapsed line in the composer,
/// and Enter sends every line of it to the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tui_big_paste_is_collapsed_and_sent_whole() {
    let mock = MockProvider::start(vec![MockReply::text(&["Read it all."])]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    write_config(&home, &mock.base_url());
    let cmd = format!(
        "cd {} && env -u XDG_RUNTIME_DIR REASONIX_HOME={} {}",
        ws.display(),
        home.display(),
        PathBuf::from(env!("CARGO_BIN_EXE_reasonix")).display()
    );
    let t = Tmux::tui(&cmd);
    let big: String = (1..=10_000)
        .map(|i| format!("pasted line {i:05}\n"))
        .collect();
    tokio::task::block_in_place(|| {
        t.wait_for("connected");
        t.send_keys(&["-l", "summarize: "]);
        t.paste(dir.path(), &big);
        let screen = t.wait_for("[pasted 10,000 lines, 176 KB]");
        assert!(
            screen.contains("summarize: [pasted 10,000 lines, 176 KB]"),
            "{screen}"
        );
        assert!(
            !screen.contains("pasted line 00001"),
            "the lines are not in the composer:\n{screen}"
        );
        // 45,000 tokens is over a quarter of the default 128k window: Enter asks first.
        t.send_keys(&["Enter"]);
        let ask = t.wait_for("Send a big prompt?");
        assert!(ask.contains("about 45003 tokens"), "{ask}");
        assert_eq!(mock.request_count(), 0, "nothing sent before the answer");
        t.send_keys(&["Enter"]);
        t.wait_for("Read it all.");
    });
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    let user = reqs[0]
        .messages()
        .into_iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .find(|c| c.contains("summarize: "))
        .expect("the prompt reached the model");
    assert!(
        user.contains(&format!("summarize: {}", big.trim_end())),
        "every line, in order"
    );
    assert_eq!(user.matches("pasted line ").count(), 10_000);
    t.send_keys(&["C-c"]);
    t.send_keys(&["C-c"]);
    stop_daemons(&home);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tui_over_ssh_prompt_approve_diff_answer() {
    let host_bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/x86_64-unknown-linux-musl/debug/reasonix-remote");
    assert!(host_bin.is_file(), "build the static host binary first");
    let sshd = Sshd::start(SshdConfig::default()).expect("sshd");
    let user = TestUser::create(&UserOptions::default()).expect("user");
    user.write_file("proj/greet.py", "print('hello')\n", 0o644)
        .expect("workspace");
    let mock = MockProvider::start(script()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let laptop_home = dir.path().join("home");
    std::fs::create_dir_all(laptop_home.join(".ssh")).expect("ssh");
    std::fs::write(
        laptop_home.join(".ssh/known_hosts"),
        sshd.known_hosts_line(),
    )
    .expect("kh");
    let key = ClientKey::generate(&laptop_home.join(".ssh"), "id_tui", None).expect("key");
    user.authorize(&key.public).expect("authorize");
    let rx_home = dir.path().join("rxhome");
    write_config(&rx_home, &mock.base_url());
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"));
    let cmd = format!(
        "cd {} && env -u SSH_AUTH_SOCK HOME={} REASONIX_HOME={} REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL={} {} ssh {}@127.0.0.1:proj -p {} -F none -i {} -o IdentityAgent=none",
        dir.path().display(),
        laptop_home.display(),
        rx_home.display(),
        host_bin.display(),
        bin.display(),
        user.name,
        sshd.port(),
        key.private.display()
    );
    let t = Tmux::tui(&cmd);
    let screen = tokio::task::block_in_place(|| drive(&t));
    assert!(screen.contains("Updated the greeting"), "{screen}");
    assert!(
        screen.contains("127.0.0.1:proj"),
        "status bar shows host:path\n{screen}"
    );
    assert_eq!(
        std::fs::read_to_string(user.home.join("proj/greet.py")).expect("greet on host"),
        "print('hello, world')\n"
    );
    t.send_keys(&["C-c"]);
    t.send_keys(&["C-c"]);
}

/// Logins sshd accepted so far.
fn logins(sshd: &Sshd) -> usize {
    sshd.log().matches("Accepted publickey").count()
}

/// Wait for `path` to exist and return its content (hang guard: 60 s).
fn wait_file(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(s) = std::fs::read_to_string(path) {
            if s.ends_with('\n') {
                return s;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} never written",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A fatal connection error over a real sshd: the TUI shows a modal with the stage and the
/// path that stays until dismissed, logs in once (no reconnect loop), and exits 5 with the
/// message printed once on stderr. A missing workspace is created from the modal and the
/// session opens there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tui_over_ssh_fatal_modal_and_create_workspace() {
    let host_bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/x86_64-unknown-linux-musl/debug/reasonix-remote");
    assert!(host_bin.is_file(), "build the static host binary first");
    let sshd = Sshd::start(SshdConfig::default()).expect("sshd");
    let user = TestUser::create(&UserOptions::default()).expect("user");
    user.write_file("plain-file", "x", 0o644).expect("file");
    let mock = MockProvider::start(vec![MockReply::text(&["Opened in the new folder."])]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let laptop_home = dir.path().join("home");
    std::fs::create_dir_all(laptop_home.join(".ssh")).expect("ssh");
    std::fs::write(
        laptop_home.join(".ssh/known_hosts"),
        sshd.known_hosts_line(),
    )
    .expect("kh");
    let key = ClientKey::generate(&laptop_home.join(".ssh"), "id_tui", None).expect("key");
    user.authorize(&key.public).expect("authorize");
    let rx_home = dir.path().join("rxhome");
    write_config(&rx_home, &mock.base_url());
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"));
    let cmd = |path: &str, tag: &str| {
        format!(
            "cd {} && env -u SSH_AUTH_SOCK HOME={} REASONIX_HOME={} REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL={} {} ssh {}@127.0.0.1:{path} -p {} -F none -i {} -o IdentityAgent=none 2>{tag}.err; echo $? >{tag}.rc",
            dir.path().display(),
            laptop_home.display(),
            rx_home.display(),
            host_bin.display(),
            bin.display(),
            user.name,
            sshd.port(),
            key.private.display()
        )
    };

    // A path that is a file.
    let before = logins(&sshd);
    let t = Tmux::tui(&cmd("plain-file", "file"));
    // The whole modal, not only its title: tmux can show a frame painted half over the
    // connection panel it replaces.
    let screen = tokio::task::block_in_place(|| {
        t.wait_screen(Duration::from_secs(60), "the whole modal", |s| {
            s.contains("Cannot connect") && s.contains("Enter  quit")
        })
    });
    for needle in [
        "Stage",
        "attach",
        "127.0.0.1:plain-file",
        "the workspace path is not a folder",
        "Enter  quit",
    ] {
        assert!(screen.contains(needle), "modal shows {needle:?}:\n{screen}");
    }
    // Other keys do not dismiss it.
    t.send_keys(&["x"]);
    let screen = tokio::task::block_in_place(|| t.wait_for("Cannot connect"));
    assert!(!screen.contains("reconnecting"), "{screen}");
    t.send_keys(&["Enter"]);
    let rc = tokio::task::block_in_place(|| wait_file(&dir.path().join("file.rc")));
    assert_eq!(rc.trim(), "5", "exit code of a connection failure");
    let stderr = std::fs::read_to_string(dir.path().join("file.err")).expect("stderr");
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.contains("the workspace path is not a folder"))
            .count(),
        1,
        "the message once on stderr: {stderr}"
    );
    assert!(stderr.contains("plain-file"), "{stderr}");
    assert_eq!(logins(&sshd) - before, 1, "one login, nothing retried");
    drop(t);

    // A missing path: created from the modal, and the session opens there.
    let before = logins(&sshd);
    let t = Tmux::tui(&cmd("new/ws", "new"));
    let screen = tokio::task::block_in_place(|| {
        // The modal's key row, not the error text (which also says "create it"): a frame
        // caught while the modal is painted over the connection panel has the text but
        // not the row.
        t.wait_screen(Duration::from_secs(60), "the whole modal", |s| {
            s.contains("Cannot connect") && s.contains("y  create it")
        })
    });
    assert!(
        screen.contains("the workspace folder does not exist"),
        "{screen}"
    );
    assert!(screen.contains("y  create it"), "{screen}");
    assert!(
        !user.home.join("new").exists(),
        "nothing created before yes"
    );
    t.send_keys(&["y"]);
    tokio::task::block_in_place(|| t.wait_for("│ connected"));
    let made = user.home.join("new/ws");
    assert!(made.is_dir(), "the workspace was created on the host");
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&made).expect("meta"));
    assert_eq!(owner, user.uid, "created as the SSH user");
    t.send_keys(&["hello there", "Enter"]);
    let screen = tokio::task::block_in_place(|| t.wait_for("Opened in the new folder."));
    assert!(!screen.contains("Cannot connect"), "{screen}");
    assert_eq!(
        logins(&sshd) - before,
        2,
        "the first try and the one after yes"
    );
    assert_eq!(mock.request_count(), 1);
    t.send_keys(&["C-c"]);
    t.send_keys(&["C-c"]);
    let rc = tokio::task::block_in_place(|| wait_file(&dir.path().join("new.rc")));
    assert_eq!(
        rc.trim(),
        "0",
        "{}",
        std::fs::read_to_string(dir.path().join("new.err")).unwrap_or_default()
    );
}

/// A provider that returns the same tool-call id every turn (several OpenAI-compatible
/// servers do): every approval prompt still appears in the TUI and is answered, over four
/// turns and two sessions, and again after a restart replays the session's history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tui_repeated_tool_call_ids_every_approval_shows() {
    let mut replies = Vec::new();
    for i in 0..5 {
        replies.push(MockReply::tool_calls(
            vec![MockToolCall::new(
                "call_0",
                "write_file",
                &json!({"path": format!("f{i}.txt"), "content": format!("turn {i}\n")}).to_string(),
            )],
            5,
        ));
        replies.push(MockReply::text(&[&format!("Wrote file number {i}.")]));
    }
    let mock = MockProvider::start(replies).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    write_config(&home, &mock.base_url());
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"));
    let cmd = format!(
        "cd {} && env -u XDG_RUNTIME_DIR REASONIX_HOME={} {}",
        ws.display(),
        home.display(),
        bin.display()
    );
    let t = Tmux::tui(&cmd);
    tokio::task::block_in_place(|| {
        t.wait_for("│ connected");
        for i in 0..4 {
            if i == 2 {
                // A second session: the TUI's memory of answered approvals is per session.
                t.new_session();
            }
            t.send_keys(&[&format!("write file {i}"), "Enter"]);
            let approval = t.wait_for("Approval needed");
            assert!(
                approval.contains(&format!("f{i}.txt")),
                "turn {i}:\n{approval}"
            );
            t.send_keys(&["y"]);
            t.wait_for(&format!("Wrote file number {i}."));
            assert_eq!(
                std::fs::read_to_string(ws.join(format!("f{i}.txt"))).expect("written"),
                format!("turn {i}\n"),
                "turn {i} was approved and ran"
            );
        }
    });
    assert_eq!(mock.request_count(), 8, "two requests per turn, none hung");
    t.send_keys(&["C-c"]);
    t.send_keys(&["C-c"]);
    drop(t);

    // A new TUI replays the second session's history (answered approvals included); the
    // next turn's question with the same tool-call id still appears.
    let t = Tmux::tui(&format!("{cmd} --continue"));
    tokio::task::block_in_place(|| {
        t.wait_for("Wrote file number 3.");
        t.send_keys(&["write file 4", "Enter"]);
        let approval = t.wait_for("Approval needed");
        assert!(approval.contains("f4.txt"), "after replay:\n{approval}");
        t.send_keys(&["y"]);
        t.wait_for("Wrote file number 4.");
    });
    assert!(ws.join("f4.txt").is_file(), "turn 4 was approved and ran");
    assert_eq!(mock.request_count(), 10);
    t.send_keys(&["C-c"]);
    t.send_keys(&["C-c"]);
    stop_daemons(&home);
}

/// `/permissions` lists the rules in force with their sources (user config, this workspace's
/// table, the project file) and removes one: the user config no longer has it, and the next
/// session asks for what it allowed before. A project-file rule cannot be removed from here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tui_permissions_list_and_remove() {
    let write = |i: usize| {
        MockReply::tool_calls(
            vec![MockToolCall::new(
                &format!("w{i}"),
                "write_file",
                &json!({"path": format!("p{i}.txt"), "content": "x\n"}).to_string(),
            )],
            5,
        )
    };
    let mock = MockProvider::start(vec![
        write(0),
        MockReply::text(&["First write done."]),
        write(1),
        MockReply::text(&["Second write done."]),
    ])
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    let ws = ws.canonicalize().expect("canonical");
    write_config(&home, &mock.base_url());
    let mut cfg = std::fs::read_to_string(home.join("config.toml")).expect("config");
    cfg.push_str(&format!(
        "[permissions]\nallow = [\"Bash(ls:*)\"]\n\n[workspaces.\"local:{}\".permissions]\nallow = [\"Edit\"]\n",
        ws.display()
    ));
    std::fs::write(home.join("config.toml"), cfg).expect("config");
    std::fs::write(
        ws.join("reasonix.toml"),
        "[permissions]\ndeny = [\"Bash(rm:*)\"]\n",
    )
    .expect("project");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"));
    let cmd = format!(
        "cd {} && env -u XDG_RUNTIME_DIR REASONIX_HOME={} {}",
        ws.display(),
        home.display(),
        bin.display()
    );
    let t = Tmux::tui(&cmd);
    tokio::task::block_in_place(|| {
        t.wait_for("│ connected");
        // The workspace rule allows the write: no question.
        t.send_keys(&["write p0", "Enter"]);
        let screen = t.wait_for("First write done.");
        assert!(!screen.contains("Approval needed"), "{screen}");
        assert!(ws.join("p0.txt").is_file());

        t.send_keys(&["/permissions", "Enter"]);
        let screen = t.wait_for("/permissions remove N");
        assert!(
            screen.contains("1. allow Bash(ls:*)  — user config [permissions] allow"),
            "{screen}"
        );
        assert!(
            screen.contains("2. allow Edit  — user config [workspaces."),
            "{screen}"
        );
        assert!(
            screen.contains("3. deny  Bash(rm:*)  — project file (reasonix.toml) deny"),
            "{screen}"
        );

        t.send_keys(&["/permissions remove 3", "Enter"]);
        let screen = t.wait_for("cannot remove deny Bash(rm:*) from here");
        assert!(
            screen.contains("project file (reasonix.toml); edit"),
            "{screen}"
        );

        t.send_keys(&["/permissions remove 2", "Enter"]);
        t.wait_for("removed allow Edit from");
    });
    let cfg = std::fs::read_to_string(home.join("config.toml")).expect("config");
    assert!(
        !cfg.contains("\"Edit\""),
        "the rule left the user config:\n{cfg}"
    );
    assert!(cfg.contains("Bash(ls:*)"), "the other rule stays:\n{cfg}");
    tokio::task::block_in_place(|| {
        // A new session no longer has the rule: the same write is asked for.
        t.new_session();
        t.send_keys(&["write p1", "Enter"]);
        let screen = t.wait_for("Approval needed");
        assert!(screen.contains("p1.txt"), "{screen}");
        t.send_keys(&["y"]);
        t.wait_for("Second write done.");
    });
    assert!(ws.join("p1.txt").is_file());
    t.send_keys(&["C-c"]);
    t.send_keys(&["C-c"]);
    stop_daemons(&home);
}
