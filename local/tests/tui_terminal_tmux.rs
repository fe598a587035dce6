//! Terminal tabs in the real `reasonix` TUI (local mode), driven through tmux: Ctrl-T opens
//! a host shell beside the conversation, vim edits a file in it, the TUI quits and comes
//! back with the same shell (same `$$`, its screen restored), and `@term:1` in a prompt
//! puts that terminal's screen into the request the provider receives.

mod term_common;

use std::path::Path;
use std::time::Duration;

use reasonix_testkit::mock_provider::{MockProvider, MockReply};
use term_common::*;

const GUARD: Duration = Duration::from_secs(40);

fn write_config(home: &Path, base_url: &str) {
    write_mock_config(home, base_url, "RX_TAB_KEY", "");
}

/// The TUI command line; the shells get a fresh HOME (no login profile of the machine user).
fn tui_command(rx_home: &Path, ws: &Path) -> String {
    let home = rx_home.with_file_name("shell-home");
    std::fs::create_dir_all(&home).expect("shell home");
    format!(
        "cd {} && exec env -u XDG_RUNTIME_DIR HOME={} REASONIX_HOME={} REASONIX_IDLE_TIMEOUT_SECS=20 {}",
        sh_quote(&ws.display().to_string()),
        sh_quote(&home.display().to_string()),
        sh_quote(&rx_home.display().to_string()),
        sh_quote(env!("CARGO_BIN_EXE_reasonix")),
    )
}

fn keys(t: &Tmux, k: &[&str]) {
    t.send_keys(k);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_tab_runs_vim_survives_the_tui_and_attaches_with_at_term() {
    let mock = MockProvider::start(vec![MockReply::text(&["I see the ", "terminal."])]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    let rx = dir.path().join("rx");
    std::fs::create_dir_all(&ws).expect("ws");
    write_config(&rx, &mock.base_url());
    let _daemons = Daemons(&rx);

    tokio::task::block_in_place(|| {
        let t = Tmux::start(dir.path(), &tui_command(&rx, &ws), 100, 30, 2000);
        t.wait_screen(GUARD, "connected", |s| s.contains("connected"));
        // Ctrl-T with no terminal opens one and shows it; the tab bar names it.
        keys(&t, &["C-t"]);
        t.wait_screen(GUARD, "the tab bar", |s| {
            s.contains("chat") && s.contains("1 bash")
        });
        t.line("stty size; echo PID=$$");
        // 30 rows minus the tab bar and the status line.
        t.wait_line(GUARD, "28 100");
        let pid = value_of(
            &t.wait_screen(GUARD, "PID", |s| value_of(s, "PID=").is_some()),
            "PID=",
        )
        .expect("pid");

        // vim, with arrow keys in insert mode (vim asks for application cursor keys).
        t.line("vim -u NONE -N f.txt");
        t.wait_screen(GUARD, "vim", |s| s.contains("\"f.txt\""));
        t.type_text("iworld");
        keys(&t, &["Left", "Left", "Left", "Left", "Left"]);
        t.type_text("hello ");
        keys(&t, &["Escape"]);
        t.line(":wq");
        // vim leaves the alternate screen: the shell's screen is back as it was.
        t.wait_screen(GUARD, "the shell after vim", |s| {
            s.lines().any(|l| l.trim_end() == "28 100") && !s.contains("\"f.txt\"")
        });
        let f = ws.join("f.txt");
        t.wait_screen(GUARD, "f.txt on the host", |_| f.is_file());
        assert_eq!(
            std::fs::read_to_string(&f).expect("f.txt on the host"),
            "hello world\n"
        );

        // Resizing the TUI resizes the PTY.
        t.resize(90, 26);
        std::thread::sleep(Duration::from_millis(300));
        t.line("stty size");
        t.wait_line(GUARD, "24 90");

        // Back to the conversation (Ctrl-T cycles), then quit the TUI: the shell stays.
        keys(&t, &["C-t"]);
        t.wait_screen(GUARD, "the conversation", |s| s.contains("Ask Reasonix"));
        keys(&t, &["C-c"]);
        keys(&t, &["C-c"]);
        t.wait_screen(GUARD, "the TUI to quit", |_| t.pane_dead());
        drop(t);

        let t = Tmux::start(dir.path(), &tui_command(&rx, &ws), 90, 26, 2000);
        t.wait_screen(GUARD, "the terminal listed again", |s| {
            s.contains("1 bash") && s.contains("still running")
        });
        keys(&t, &["C-t"]);
        // The screen comes back from the host's screen state.
        t.wait_line(GUARD, "24 90");
        t.line("echo AGAIN=$$; echo SCREEN-MARK-$((6*7))");
        let again = value_of(
            &t.wait_screen(GUARD, "AGAIN", |s| value_of(s, "AGAIN=").is_some()),
            "AGAIN=",
        );
        assert_eq!(
            again.as_deref(),
            Some(pid.as_str()),
            "same shell after the TUI came back"
        );
        t.wait_line(GUARD, "SCREEN-MARK-42");

        // `@term:1` in the composer: completion offers it, and the screen reaches the model.
        keys(&t, &["C-t"]);
        t.wait_screen(GUARD, "the conversation", |s| s.contains("Ask Reasonix"));
        t.type_text("what does @te");
        t.wait_screen(GUARD, "the completion", |s| s.contains("terminal screen"));
        keys(&t, &["Tab"]);
        t.type_text("show?");
        keys(&t, &["Enter"]);
        t.wait_screen(GUARD, "the answer", |s| s.contains("I see the terminal."));
        t.wait_screen(GUARD, "the prompt in the transcript", |s| {
            s.contains("@term:1 show?")
        });
        keys(&t, &["C-c"]);
        keys(&t, &["C-c"]);
    });

    let reqs = mock.requests();
    let last_user = reqs
        .last()
        .expect("one provider request")
        .messages()
        .into_iter()
        .rev()
        .find(|m| m["role"] == "user")
        .expect("a user message");
    let content = last_user["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(content.contains("<attached-terminal id=\"1\""), "{content}");
    assert!(content.contains("SCREEN-MARK-42"), "{content}");
    assert!(content.contains("AGAIN="), "{content}");

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .args(["term", "--close", "1"])
        .current_dir(&ws)
        .env("REASONIX_HOME", &rx)
        .output()
        .expect("close");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The same over a real sshd: the tab's shell runs on the host as the SSH user, through
/// the TUI's one SSH connection, and survives the TUI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_tab_over_ssh_runs_on_the_host_and_survives_the_tui() {
    use reasonix_testkit::sshd::{ClientKey, Sshd, SshdConfig, TestUser, UserOptions};
    let host_bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/x86_64-unknown-linux-musl/debug/reasonix-remote");
    assert!(host_bin.is_file(), "build the static host binary first");
    let sshd = Sshd::start(SshdConfig::default()).expect("sshd");
    let user = TestUser::create(&UserOptions::default()).expect("user");
    user.write_file("proj/README", "hi\n", 0o644)
        .expect("workspace");
    let mock = MockProvider::start(vec![]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let laptop_home = dir.path().join("home");
    std::fs::create_dir_all(laptop_home.join(".ssh")).expect("ssh");
    std::fs::write(
        laptop_home.join(".ssh/known_hosts"),
        sshd.known_hosts_line(),
    )
    .expect("kh");
    let key = ClientKey::generate(&laptop_home.join(".ssh"), "id_tab", None).expect("key");
    user.authorize(&key.public).expect("authorize");
    let rx = dir.path().join("rx");
    write_config(&rx, &mock.base_url());
    let cmd = format!(
        "cd {} && exec env -u SSH_AUTH_SOCK HOME={} REASONIX_HOME={} REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL={} {} ssh {}@127.0.0.1:proj -p {} -F none -i {} -o IdentityAgent=none",
        sh_quote(&dir.path().display().to_string()),
        sh_quote(&laptop_home.display().to_string()),
        sh_quote(&rx.display().to_string()),
        sh_quote(&host_bin.display().to_string()),
        sh_quote(env!("CARGO_BIN_EXE_reasonix")),
        user.name,
        sshd.port(),
        sh_quote(&key.private.display().to_string()),
    );
    tokio::task::block_in_place(|| {
        let t = Tmux::start(dir.path(), &cmd, 100, 30, 2000);
        t.wait_screen(GUARD, "connected", |s| s.contains("connected"));
        t.send_keys(&["C-t"]);
        t.wait_screen(GUARD, "the tab bar", |s| s.contains("chat │ 1 "));
        t.line("echo PID=$$ USER=$(id -un) DIR=$(basename $(pwd))");
        let screen = t.wait_screen(GUARD, "PID", |s| {
            value_of(s, "PID=").is_some() || s.contains("DIR=proj")
        });
        assert!(
            screen.contains(&format!("USER={} DIR=proj", user.name)),
            "the shell is the SSH user's, in the workspace:\n{screen}"
        );
        let pid: String = screen
            .lines()
            .find_map(|l| l.trim().strip_prefix("PID="))
            .and_then(|r| r.split_whitespace().next())
            .expect("pid")
            .to_string();
        t.line("printf 'typed over ssh\\n' > f.txt");
        let f = user.home.join("proj/f.txt");
        t.wait_screen(GUARD, "f.txt on the host", |_| f.is_file());
        t.send_keys(&["C-t"]);
        t.wait_screen(GUARD, "the conversation", |s| s.contains("Ask Reasonix"));
        t.send_keys(&["C-c"]);
        t.send_keys(&["C-c"]);
        t.wait_screen(GUARD, "the TUI to quit", |_| t.pane_dead());
        drop(t);

        let t = Tmux::start(dir.path(), &cmd, 100, 30, 2000);
        t.wait_screen(GUARD, "the terminal listed again", |s| {
            s.contains("still running")
        });
        t.send_keys(&["C-t"]);
        t.line("echo AGAIN=$$");
        let again = value_of(
            &t.wait_screen(GUARD, "AGAIN", |s| value_of(s, "AGAIN=").is_some()),
            "AGAIN=",
        );
        assert_eq!(again.as_deref(), Some(pid.as_str()), "same host shell");
        // End the shell from the TUI: its tab goes.
        t.send_keys(&["C-t"]);
        t.type_text("/shell close 1");
        t.send_keys(&["Enter"]);
        t.wait_screen(GUARD, "the tab to go", |s| !s.contains("chat │ 1 "));
        t.send_keys(&["C-c"]);
        t.send_keys(&["C-c"]);
    });
    assert_eq!(
        std::fs::read_to_string(user.home.join("proj/f.txt")).expect("f.txt"),
        "typed over ssh\n"
    );
}
