//! `reasonix term` in local mode (no SSH), driven through tmux: the shell's size follows the
//! window, `~.` detaches without ending the shell, `kill -9` of the client neither, and a new
//! client gets the current screen and the same shell process.

mod term_common;

use std::time::Duration;

use term_common::*;

const GUARD: Duration = Duration::from_secs(30);

/// The `reasonix term` command line. The shell's HOME is a fresh folder next to the
/// Reasonix home: the machine user's own login profile (pyenv's rehash lock, say, which a
/// shell killed mid-startup leaves behind for 60 s) must not decide whether a prompt comes.
fn term_command(rx_home: &std::path::Path, ws: &std::path::Path, extra: &str) -> String {
    let home = rx_home.with_file_name("shell-home");
    std::fs::create_dir_all(&home).expect("shell home");
    format!(
        "cd {} && exec env HOME={} REASONIX_HOME={} REASONIX_IDLE_TIMEOUT_SECS=20 SECRET_PROVIDER_KEY=sk-never-on-host {} term {extra}",
        sh_quote(&ws.display().to_string()),
        sh_quote(&home.display().to_string()),
        sh_quote(&rx_home.display().to_string()),
        sh_quote(env!("CARGO_BIN_EXE_reasonix")),
    )
}

fn reasonix(rx_home: &std::path::Path, ws: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .arg("term")
        .args(args)
        .current_dir(ws)
        .env("REASONIX_HOME", rx_home)
        .output()
        .expect("run reasonix term");
    assert!(
        out.status.success(),
        "reasonix term {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn local_terminal_resizes_detaches_and_survives_a_killed_client() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    let rx = dir.path().join("rx");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::create_dir_all(&rx).expect("rx");

    let t = Tmux::start(dir.path(), &term_command(&rx, &ws, ""), 100, 30, 2000);
    t.wait_screen(GUARD, "the banner", |s| s.contains("~. at the start"));
    t.line("stty size; echo KEY=${SECRET_PROVIDER_KEY:-none}");
    t.wait_line(GUARD, "30 100");
    // The laptop's environment (a provider key in particular) is not the shell's.
    t.wait_line(GUARD, "KEY=none");
    t.resize(77, 21);
    std::thread::sleep(Duration::from_millis(300));
    t.line("stty size");
    t.wait_line(GUARD, "21 77");
    t.line("echo PID=$$");
    let pid = value_of(
        &t.wait_screen(GUARD, "PID", |s| value_of(s, "PID=").is_some()),
        "PID=",
    )
    .expect("pid");

    // `~.` detaches: the client exits, the shell does not.
    t.type_text("~.");
    t.wait_screen(GUARD, "the detach message", |s| {
        s.contains("reasonix: detached")
    });
    let list = reasonix(&rx, &ws, &["--list"]);
    assert!(list.contains(&pid) && list.contains("running"), "{list}");
    drop(t);

    // A new client shows the same shell, current screen first.
    let t = Tmux::start(dir.path(), &term_command(&rx, &ws, ""), 77, 21, 2000);
    t.wait_screen(GUARD, "the old screen", |s| {
        s.contains(&format!("PID={pid}"))
    });
    t.line("echo AGAIN=$$");
    let again = value_of(
        &t.wait_screen(GUARD, "AGAIN", |s| value_of(s, "AGAIN=").is_some()),
        "AGAIN=",
    );
    assert_eq!(
        again.as_deref(),
        Some(pid.as_str()),
        "same shell after a reattach"
    );

    // kill -9 of the client: the shell keeps running and a new client gets its screen.
    t.line("printf 'MARK-%s\\n' $((6*7))");
    t.wait_line(GUARD, "MARK-42");
    let client = t.pane_pid();
    // SAFETY: signalling a child process of this test's tmux server by pid.
    assert_eq!(unsafe { libc::kill(client, libc::SIGKILL) }, 0);
    t.wait_screen(GUARD, "the client to die", |_| t.pane_dead());
    drop(t);
    let t = Tmux::start(dir.path(), &term_command(&rx, &ws, ""), 77, 21, 2000);
    t.wait_line(GUARD, "MARK-42");
    t.line("echo THIRD=$$");
    let third = value_of(
        &t.wait_screen(GUARD, "THIRD", |s| value_of(s, "THIRD=").is_some()),
        "THIRD=",
    );
    assert_eq!(
        third.as_deref(),
        Some(pid.as_str()),
        "same shell after kill -9"
    );

    // `exit` ends the shell and the client says so.
    t.line("exit 3");
    t.wait_screen(GUARD, "the exit message", |s| {
        s.contains("the shell exited (exit status 3)")
    });
    let list = reasonix(&rx, &ws, &["--list"]);
    assert!(!list.contains("running"), "{list}");
}

#[test]
fn list_and_close_without_a_terminal_on_stdin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    let rx = dir.path().join("rx");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::create_dir_all(&rx).expect("rx");
    // Showing a terminal needs a terminal; the error says what to do.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .arg("term")
        .current_dir(&ws)
        .env("REASONIX_HOME", &rx)
        .env("REASONIX_IDLE_TIMEOUT_SECS", "5")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("needs a terminal") && err.contains("--list"),
        "{err}"
    );
    let t = Tmux::start(dir.path(), &term_command(&rx, &ws, "--new"), 80, 24, 100);
    t.wait_screen(GUARD, "the banner", |s| s.contains("~. at the start"));
    let list = reasonix(&rx, &ws, &["--list"]);
    let id = list
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .expect("one terminal listed")
        .to_string();
    assert!(list.contains("running"), "{list}");
    reasonix(&rx, &ws, &["--close", &id]);
    t.wait_screen(GUARD, "the shell to end", |s| {
        s.contains("the shell exited")
    });
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .args(["term", "--close", &id])
        .current_dir(&ws)
        .env("REASONIX_HOME", &rx)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("no terminal {id}")), "{err}");
}
