//! The Windows laptop build (`reasonix.exe`) in a Windows console (issue 39): wine's console
//! on a tmux pane (wine gives a program started on a Unix terminal a console whose screen is
//! that terminal), with keys typed into it as a user types them.
//!
//! - The prompts `reasonix.exe run --ssh` asks on the console (`CONIN$`/`CONOUT$`, echo off
//!   through `SetConsoleMode`): a key's passphrase (a wrong one first, asked again), the
//!   host-key question and a password, and keyboard-interactive rounds from PAM. The secrets
//!   never show on the screen, and the run completes with the mock provider's answer.
//! - The workbench (`reasonix.exe ssh`): a prompt typed, the mock answer shown, `/quit`.
//! - Terminals, both ways a user opens one: `reasonix.exe term DEST` (keys read as console
//!   key events and encoded as xterm bytes) and the workbench's Ctrl-T tab (crossterm's key
//!   events, the same encoder): a command and its output, Ctrl-Z stopping the host's
//!   foreground job (SIGTSTP), Backspace, Left and Up (bash's history), Ctrl-C reaching the
//!   host's job (SIGINT) instead of ending `reasonix.exe`; for `term`, the shell's `exit`
//!   ending the client with exit 0; for the tab, Ctrl-C in the conversation being the
//!   workbench's (a hint, no quit) and `/quit` exiting 0.
//!   Wine's console leaves the Unix terminal's signal keys on (see `no_signal_keys`), so
//!   Ctrl-C arrives as a console event, which `reasonix.exe term` and the workbench take as
//!   the Ctrl-C key.
//!
//! Wine 8's console does not interpret VT output and broke rows of the workbench's screen
//! (see `platform::console_rows`, which writes it in row-sized pieces). To see what a pane
//! was sent, set `RX_WINE_PANE_LOG=FILE` for the Ctrl-T test: the raw output goes there.
//!
//! Like `wine_e2e`, these need the Windows build and are `#[ignore]`d in the workspace run;
//! `.ci/run` runs them after `.ci/cross_build.sh` with `REASONIX_WINE_EXE` and `WINEPREFIX`.
//! By hand: `REASONIX_WINE_EXE=target/cross/x86_64-pc-windows-gnu/debug/reasonix.exe
//! WINEPREFIX=$PWD/target/wineprefix cargo nextest run -p reasonix --test wine_console
//! --run-ignored ignored-only`.

mod term_common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use reasonix_testkit::mock_provider::{MockProvider, MockReply};
use reasonix_testkit::sshd::{ClientKey, Sshd, SshdConfig, TestUser, UserOptions};
use term_common::{sh_quote, write_mock_config, Tmux};

/// The Windows build; the run fails (never skips) when it is not there.
fn wine_exe() -> PathBuf {
    let exe = std::env::var_os("REASONIX_WINE_EXE").map(PathBuf::from).unwrap_or_else(|| {
        panic!("REASONIX_WINE_EXE is not set: build reasonix.exe with .ci/cross_build.sh and point it there")
    });
    let exe = if exe.is_relative() {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(exe)
    } else {
        exe
    };
    assert!(exe.is_file(), "no Windows build at {}", exe.display());
    wine_prefix();
    no_other_wineserver();
    std::fs::canonicalize(exe).expect("absolute path")
}

/// Waits until no wineserver runs for the prefix. Wine makes and connects sockets in its
/// wineserver, one per prefix shared by every wine process: a server left (for its few
/// seconds of idle life) by a test in another network namespace would make this test's
/// connections in that namespace.
fn no_other_wineserver() {
    let status = std::process::Command::new("wineserver")
        .arg("-w")
        .status()
        .expect("run wineserver -w (wine is installed with .ci/cross_build.sh)");
    assert!(status.success(), "wineserver -w: {status}");
}

fn wine_prefix() -> PathBuf {
    std::env::var_os("WINEPREFIX")
        .map(PathBuf::from)
        .expect("set WINEPREFIX to a prefix prepared by .ci/cross_build.sh")
}

fn musl_host_binary() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/x86_64-unknown-linux-musl/debug/reasonix-remote");
    assert!(
        p.is_file(),
        "no static host binary: run `cargo build -p reasonix-remote --target x86_64-unknown-linux-musl`"
    );
    p
}

/// Hang guard for one screen (the first wine start in a prefix and the first upload are
/// slow).
const GUARD: Duration = Duration::from_secs(90);

/// A real sshd, a host user with `~/ws`, the mock provider and a laptop folder (home,
/// `REASONIX_HOME`).
struct ConsoleRig {
    mock: MockProvider,
    user: TestUser,
    sshd: Sshd,
    dir: tempfile::TempDir,
}

impl ConsoleRig {
    /// The host key trusted, a fresh client key authorized, and `reasonix.exe SUB DEST` with
    /// that key (no agent) started in wine's console on a tmux pane.
    fn keyed_pane(&self, sub: &str) -> Tmux {
        self.trust();
        let key = ClientKey::generate(&self.ssh_dir(), "id_rx", None).expect("key");
        self.user.authorize(&key.public).expect("authorize");
        let line = self.wine_line(
            &[sub, &self.dest()],
            &[
                "-i",
                &key.private.display().to_string(),
                "-o",
                "IdentityAgent=none",
            ],
        );
        Tmux::tui(&line)
    }

    /// Bash's bracketed paste off on the host: wine's console prints the tail of escape
    /// sequences it does not know (the switch `ESC [ ? 2004 l` shows as `04l`); a Windows
    /// console ignores them.
    fn no_bracketed_paste(&self) {
        self.user
            .write_file(".inputrc", "set enable-bracketed-paste off\n", 0o644)
            .expect("inputrc");
    }

    async fn new(config: SshdConfig, user: UserOptions, script: Vec<MockReply>) -> ConsoleRig {
        let sshd = Sshd::start(config).expect("sshd");
        let user = TestUser::create(&user).expect("user");
        user.write_file("ws/README.md", "# console workspace\n", 0o644)
            .expect("workspace");
        let mock = MockProvider::start(script).await;
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("home/.ssh")).expect("ssh dir");
        write_mock_config(
            &dir.path().join("rxhome"),
            &mock.base_url(),
            "RX_WINE_KEY",
            "",
        );
        ConsoleRig {
            mock,
            user,
            sshd,
            dir,
        }
    }

    fn ssh_dir(&self) -> PathBuf {
        self.dir.path().join("home/.ssh")
    }

    fn known_hosts(&self) -> PathBuf {
        self.ssh_dir().join("known_hosts")
    }

    fn trust(&self) {
        std::fs::write(self.known_hosts(), self.sshd.known_hosts_line()).expect("known_hosts");
    }

    /// A shell line for tmux running `reasonix.exe ARGS... -p PORT -F none -o
    /// UserKnownHostsFile=… EXTRA...` under wine in the laptop folder, then writing its exit
    /// code to `exit.code` there (not to the screen: wine's console can clear the terminal
    /// after the program ends, as the workbench leaves its alternate screen).
    fn wine_line(&self, args: &[&str], extra: &[&str]) -> String {
        let mut argv: Vec<String> = args.iter().map(|a| sh_quote(a)).collect();
        argv.extend(["-p".into(), self.sshd.port().to_string()]);
        argv.extend(["-F".into(), "none".into()]);
        argv.push("-o".into());
        argv.push(sh_quote(&format!(
            "UserKnownHostsFile={}",
            self.known_hosts().display()
        )));
        argv.extend(extra.iter().map(|a| sh_quote(a)));
        format!(
            "cd {dir} && env -u SSH_AUTH_SOCK -u DISPLAY WINEDEBUG=-all WINEPREFIX={prefix} HOME={home} REASONIX_HOME={rx} REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL={host} REASONIX_IDLE_TIMEOUT_SECS=120 wine {exe} {argv}; echo $? > exit.code",
            dir = sh_quote(&self.dir.path().display().to_string()),
            prefix = sh_quote(&wine_prefix().display().to_string()),
            home = sh_quote(&self.dir.path().join("home").display().to_string()),
            rx = sh_quote(&self.dir.path().join("rxhome").display().to_string()),
            host = sh_quote(&musl_host_binary().display().to_string()),
            exe = sh_quote(&wine_exe().display().to_string()),
            argv = argv.join(" "),
        )
    }

    fn dest(&self) -> String {
        format!("{}@127.0.0.1:ws", self.user.name)
    }
}

/// Wait for `needle` on the screen (hang guard [`GUARD`]), matched by [`on_screen`].
fn wait(t: &Tmux, needle: &str) -> String {
    t.wait_screen(GUARD, needle, |s| on_screen(s, needle))
}

/// Whether `needle` is on `screen` with all white space ignored on both sides: wine's
/// console now and then draws a line's tail at the start of the next row (a status bar's
/// `connected` came out as `conn` and, a row down, `ected`), so a plain `contains` fails
/// on text that is there. The order of the characters still has to match.
fn on_screen(screen: &str, needle: &str) -> bool {
    let squeeze = |t: &str| t.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    squeeze(screen).contains(&squeeze(needle))
}

/// Wait for the exit code the tmux command writes (hang guard [`GUARD`]).
fn wait_exit(t: &Tmux, dir: &Path) -> i32 {
    let path = dir.join("exit.code");
    let deadline = std::time::Instant::now() + GUARD;
    loop {
        if let Ok(text) = std::fs::read_to_string(&path) {
            if text.ends_with('\n') {
                return text.trim().parse().expect("an exit code");
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the program did not end; screen:\n{}",
            t.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Windows build under wine: run by .ci/run after .ci/cross_build.sh"]
async fn windows_console_passphrase_typed_wrong_then_right() {
    const PASS: &str = "Winter-Passphrase-7";
    const WRONG: &str = "not-it-3";
    let rig = ConsoleRig::new(
        SshdConfig::default(),
        UserOptions::default(),
        vec![MockReply::text(&["The passphrase ", "worked."])],
    )
    .await;
    rig.trust();
    let key = ClientKey::generate(&rig.ssh_dir(), "id_locked", Some(PASS)).expect("key");
    rig.user.authorize(&key.public).expect("authorize");
    let line = rig.wine_line(
        &["run", "--ssh", &rig.dest(), "say hello"],
        &[
            "-i",
            &key.private.display().to_string(),
            "-o",
            "IdentityAgent=none",
        ],
    );
    let t = Tmux::tui(&line);
    let code = tokio::task::block_in_place(|| {
        wait(&t, "Enter passphrase for key");
        t.line(WRONG);
        wait(&t, "Bad passphrase, try again");
        t.line(PASS);
        wait(&t, "The passphrase worked.");
        wait_exit(&t, rig.dir.path())
    });
    let all = t.everything();
    assert_eq!(code, 0, "{all}");
    assert!(all.contains("The passphrase worked."), "{all}");
    assert!(!all.contains(PASS), "the passphrase was echoed:\n{all}");
    assert!(
        !all.contains(WRONG),
        "the wrong passphrase was echoed:\n{all}"
    );
    assert_eq!(rig.mock.request_count(), 1, "{all}");
    assert_eq!(
        rig.sshd.log().matches("Accepted publickey").count(),
        1,
        "one login with the decrypted key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Windows build under wine: run by .ci/run after .ci/cross_build.sh"]
async fn windows_console_host_key_question_and_password() {
    const PW: &str = "pw-Console-4";
    let rig = ConsoleRig::new(
        SshdConfig {
            password_auth: true,
            use_pam: true,
            pubkey_auth: false,
            ..Default::default()
        },
        UserOptions {
            password: Some(PW.into()),
            ..Default::default()
        },
        vec![MockReply::text(&["Logged in ", "by password."])],
    )
    .await;
    // No known_hosts entry: the host-key question comes first, answered on the console.
    let line = rig.wine_line(&["run", "--ssh", &rig.dest(), "say hello"], &[]);
    let t = Tmux::tui(&line);
    let code = tokio::task::block_in_place(|| {
        wait(&t, "Are you sure you want to continue connecting");
        t.line("yes");
        wait(&t, "'s password:");
        t.line(PW);
        wait(&t, "Logged in by password.");
        wait_exit(&t, rig.dir.path())
    });
    let all = t.everything();
    assert_eq!(code, 0, "{all}");
    assert!(!all.contains(PW), "the password was echoed:\n{all}");
    let kh = std::fs::read_to_string(rig.known_hosts()).expect("known_hosts written");
    let key_b64 = rig
        .sshd
        .host_public_key()
        .split_whitespace()
        .nth(1)
        .expect("key");
    assert!(kh.contains(key_b64), "the accepted key was recorded: {kh}");
    assert_eq!(
        rig.sshd.log().matches("Accepted password").count(),
        1,
        "{}",
        rig.sshd.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Windows build under wine: run by .ci/run after .ci/cross_build.sh"]
async fn windows_console_keyboard_interactive() {
    const PW: &str = "kbd-Console-5";
    let rig = ConsoleRig::new(
        SshdConfig {
            kbd_interactive: true,
            use_pam: true,
            pubkey_auth: false,
            ..Default::default()
        },
        UserOptions {
            password: Some(PW.into()),
            ..Default::default()
        },
        vec![MockReply::text(&["Keyboard-interactive ", "done."])],
    )
    .await;
    rig.trust();
    let line = rig.wine_line(&["run", "--ssh", &rig.dest(), "say hello"], &[]);
    let t = Tmux::tui(&line);
    let code = tokio::task::block_in_place(|| {
        // PAM's own prompt, relayed as a keyboard-interactive round.
        wait(&t, "Password:");
        t.line(PW);
        wait(&t, "Keyboard-interactive done.");
        wait_exit(&t, rig.dir.path())
    });
    let all = t.everything();
    assert_eq!(code, 0, "{all}");
    assert!(!all.contains(PW), "the answer was echoed:\n{all}");
    assert!(
        rig.sshd.log().contains("Accepted keyboard-interactive"),
        "{}",
        rig.sshd.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Windows build under wine: run by .ci/run after .ci/cross_build.sh"]
async fn windows_workbench_prompt_answer_quit() {
    let rig = ConsoleRig::new(
        SshdConfig::default(),
        UserOptions::default(),
        vec![MockReply::text(&["Hello from the ", "Windows workbench."])],
    )
    .await;
    let t = rig.keyed_pane("ssh");
    let (screen, code) = tokio::task::block_in_place(|| {
        wait(&t, "connected");
        t.type_text("hello there");
        t.enter();
        let answer = wait(&t, "Windows workbench.");
        t.line("/quit");
        (answer, wait_exit(&t, rig.dir.path()))
    });
    // Both streamed pieces, as one string: the workbench writes its screen in pieces that fit
    // a console row (`platform::console_rows`), so wine's console no longer breaks rows.
    assert!(
        on_screen(&screen, "Hello from the Windows workbench."),
        "{screen}"
    );
    let asked = rig.mock.requests();
    assert!(
        asked
            .iter()
            .any(|r| r.body.to_string().contains("hello there")),
        "the prompt did not reach the model"
    );
    assert!(
        on_screen(&screen, "127.0.0.1:ws"),
        "status bar shows host:path\n{screen}"
    );
    assert_eq!(code, 0, "the workbench quit cleanly");
    assert_eq!(rig.mock.request_count(), 1);
}

/// Wine's console on a Unix terminal leaves that terminal's line discipline on: its Ctrl-C
/// and Ctrl-Z become SIGINT and SIGTSTP for the wine processes (SIGINT arrives as a
/// `CTRL_C_EVENT`; SIGTSTP is lost) before the console sees a key. A Windows console has no
/// such layer, so the tests switch it off (`stty -isig`) to type those keys the way a
/// Windows console delivers them, as key events.
fn no_signal_keys(t: &Tmux) {
    let status = std::process::Command::new("stty")
        .args(["-F", &t.pane_tty(), "-isig"])
        .status()
        .expect("run stty");
    assert!(status.success(), "stty -isig: {status}");
}

/// A bash on the host, typed into through wine's console: a command and its output, Ctrl-Z
/// to the host's foreground job, Backspace, Left, Up. The pane's Unix terminal has no signal
/// keys (`stty -isig`, see [`no_signal_keys`]), so Ctrl-Z reaches wine's console as a key, as
/// it reaches a Windows console. (Ctrl-C cannot be typed that way under wine: with processed
/// input off, wine 8's console drops the `0x03` it reads from the terminal, no key event and
/// no console event; a Windows console delivers it as a key event.) The outputs are spelled so that only
/// the shell's output, never the echoed command line, contains them (`A""B` prints `AB`).
fn drive_host_shell(t: &Tmux) {
    t.line("echo RX_$((6*7))");
    wait(t, "RX_42");

    // Ctrl-Z: `0x1a` reaches the PTY (SIGTSTP, the job stopped), not taken for the end of
    // the console's input as std's stdin on Windows takes it.
    t.line(r#"echo ZZ_""STARTED; sleep 60"#);
    wait(t, "ZZ_STARTED");
    t.send_keys(&["C-z"]);
    t.wait_screen(GUARD, "the stopped job", |s| s.contains("Stopped"));
    // The stopped job killed and reaped before anything else: a kill alone left bash's job
    // table to catch up later, and the `exit` at the end met "There are stopped jobs".
    // (`wait` does not wait for a stopped job: the loop asks until bash has reaped it.)
    t.line(
        r#"echo STOPPED_JOBS=$(jobs -s | wc -l); kill -9 %1; while jobs %1 >/dev/null 2>&1; do sleep 0.2; done; echo JOBS_""LEFT=$(jobs | wc -l)"#,
    );
    wait(t, "STOPPED_JOBS=1");
    wait(t, "JOBS_LEFT=0");

    // Backspace and Left edit the line in bash's readline: `echo O''K_ABX` ⌫ `C` ← ← `-`
    // gives `echo O''K_A-BC`, which prints `OK_A-BC`.
    t.type_text("echo O''K_ABX");
    t.send_keys(&["BSpace"]);
    t.type_text("C");
    t.send_keys(&["Left", "Left"]);
    t.type_text("-");
    t.enter();
    wait(t, "OK_A-BC");
    // Up brings the line back from bash's history; Enter runs it again. Counted by its tail
    // (the line typed, its output, the line recalled): wine's console can leave cells of
    // the workbench's earlier connect box over the prompt's start.
    t.send_keys(&["Up"]);
    t.wait_screen(GUARD, "the recalled line", |s| {
        s.matches("K_A-BC").count() >= 3
    });
    t.enter();
    t.wait_screen(GUARD, "the line run again", |s| {
        s.matches("OK_A-BC").count() == 2
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Windows build under wine: run by .ci/run after .ci/cross_build.sh"]
async fn windows_term_raw_keys_reach_the_host_shell() {
    let rig = ConsoleRig::new(SshdConfig::default(), UserOptions::default(), vec![]).await;
    rig.no_bracketed_paste();
    let t = rig.keyed_pane("term");
    let code = tokio::task::block_in_place(|| {
        wait(&t, "type ~. at the start of a line to detach");
        // With the Unix terminal's signal keys as wine leaves them, Ctrl-C comes to
        // `reasonix.exe` as a console event (SIGINT through wine): it sends the key to the
        // host's shell instead of ending.
        t.line(r#"echo EV_""STARTED; sleep 60"#);
        wait(&t, "EV_STARTED");
        // The event comes another way than typed keys (see the Ctrl-T test): the next line
        // is typed once the host's terminal echoed the `0x03` (`^C`).
        t.send_keys(&["C-c"]);
        wait(&t, "^C");
        t.line("echo EV_STATUS=$?");
        wait(&t, "EV_STATUS=130");
        no_signal_keys(&t);
        drive_host_shell(&t);
        // The shell's own `exit` ends the client, which says so and exits 0.
        t.line("exit 7");
        wait(&t, "the shell exited");
        wait_exit(&t, rig.dir.path())
    });
    let all = t.everything();
    assert_eq!(code, 0, "{all}");
    assert!(
        all.contains("reasonix: the shell exited (exit status 7)"),
        "{all}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Windows build under wine: run by .ci/run after .ci/cross_build.sh"]
async fn windows_workbench_terminal_tab_ctrl_t() {
    let rig = ConsoleRig::new(SshdConfig::default(), UserOptions::default(), vec![]).await;
    rig.no_bracketed_paste();
    let t = rig.keyed_pane("ssh");
    if let Some(p) = std::env::var_os("RX_WINE_PANE_LOG") {
        t.log_output(Path::new(&p));
    }
    let code = tokio::task::block_in_place(|| {
        wait(&t, "connected");
        // Ctrl-T opens a host shell in a tab beside the conversation.
        t.send_keys(&["C-t"]);
        t.wait_screen(GUARD, "the tab bar", |s| {
            on_screen(s, "chat") && on_screen(s, "1 bash")
        });
        // The host's shell runs what is typed: only its output has `RX_42`.
        t.line("clear; echo; echo RX_$((6*7))");
        wait(&t, "RX_42");
        // Ctrl-C with the Unix terminal's signal keys on, as wine leaves them: a console
        // event (SIGINT through wine), which the tab sends to the host's shell as the key.
        t.line(r#"clear; echo; echo EV_""STARTED; sleep 60"#);
        wait(&t, "EV_STARTED");
        // The event takes another way than typed keys (a signal, then a console event):
        // the next line is typed once the host's terminal echoed the `0x03` (`^C`).
        t.send_keys(&["C-c"]);
        wait(&t, "^C");
        t.line("echo EV_STATUS=$?");
        wait(&t, "EV_STATUS=130");
        // Back to the conversation (its input line shown): Ctrl-C there is the workbench's
        // (once: a hint, no quit).
        t.send_keys(&["C-t"]);
        wait(&t, "Ask Reasonix");
        t.send_keys(&["C-c"]);
        wait(&t, "press Ctrl-C again to quit");
        // The tab again, its shell as it was; the other keys as a Windows console delivers
        // them (key events: see `no_signal_keys`).
        t.send_keys(&["C-t"]);
        wait(&t, "EV_STATUS=130");
        no_signal_keys(&t);
        drive_host_shell(&t);
        t.send_keys(&["C-t"]);
        wait(&t, "Ask Reasonix");
        t.line("/quit");
        wait_exit(&t, rig.dir.path())
    });
    assert_eq!(code, 0, "the workbench quit cleanly:\n{}", t.everything());
    assert_eq!(rig.mock.request_count(), 0, "no prompt was sent");
}
