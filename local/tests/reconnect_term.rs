//! `reasonix term` over real SSH through real network faults, driven through tmux (issue 18):
//! the window size reaches the host shell; 200 000 lines of output with the SSH port
//! blackholed for 20 s in the middle arrive complete and in order; a line typed during the
//! blackhole runs exactly once; `kill -9` of the client leaves the host shell running and a
//! new client gets its current screen and the same `$$`.
//!
//! sshd runs in a private network namespace (`reconnect_common`); the client runs in it
//! through `ip netns exec`, inside a tmux pane, which is the terminal and the oracle.

mod reconnect_common;
mod term_common;

use std::time::{Duration, Instant};

use reasonix_testkit::netfault::Fault;
use reconnect_common::*;
use term_common::*;

const GUARD: Duration = Duration::from_secs(60);
const BLACKHOLE: Duration = Duration::from_secs(20);
const LINES: u32 = 200_000;

fn term_command(rig: &Rig) -> String {
    let env = [
        ("HOME", rig.home().display().to_string()),
        ("REASONIX_HOME", rig.rx_home().display().to_string()),
        (
            "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
            musl_host_binary().display().to_string(),
        ),
        ("REASONIX_HEARTBEAT_MS", HEARTBEAT_MS.to_string()),
        ("REASONIX_DEAD_AFTER_MS", DEAD_AFTER_MS.to_string()),
        ("REASONIX_IDLE_TIMEOUT_SECS", "60".to_string()),
        ("TERM", "xterm-256color".to_string()),
    ];
    let env: Vec<String> = env
        .iter()
        .map(|(k, v)| format!("{k}={}", sh_quote(v)))
        .collect();
    format!(
        "exec ip netns exec {} env -u SSH_AUTH_SOCK {} {} term {} -p {} -F none -i {} -o IdentityAgent=none",
        rig.ns.name(),
        env.join(" "),
        sh_quote(env!("CARGO_BIN_EXE_reasonix")),
        sh_quote(&rig.dest()),
        rig.sshd.port(),
        sh_quote(&rig.key.private.display().to_string()),
    )
}

#[test]
fn host_terminal_survives_a_blackhole_and_a_killed_client() {
    in_netns(|ns| async move {
        let rig = Rig::new(ns, vec![]).await;
        let t = Tmux::start(rig.laptop.path(), &term_command(&rig), 100, 30, 250_000);
        t.wait_screen(GUARD, "the banner", |s| s.contains("~. at the start"));

        // The size reaches the host shell, and follows the window.
        t.line("stty size");
        t.wait_line(GUARD, "30 100");
        t.resize(90, 25);
        std::thread::sleep(Duration::from_millis(300));
        t.line("stty size");
        t.wait_line(GUARD, "25 90");
        t.line("echo PID=$$");
        let pid = value_of(
            &t.wait_screen(GUARD, "PID", |s| value_of(s, "PID=").is_some()),
            "PID=",
        )
        .expect("pid");

        // Half the output, a pause in which the SSH port is blackholed, the other half
        // produced while nothing gets through.
        t.line(&format!(
            "seq 1 {}; sleep 8; seq {} {LINES}",
            LINES / 2,
            LINES / 2 + 1
        ));
        t.wait_line(GUARD, &(LINES / 2).to_string());
        let fault = rig
            .ns
            .fault(Fault::Blackhole, rig.sshd.port())
            .expect("blackhole");
        // Typed while nothing gets through: queued in the link and run once after the resume.
        std::thread::sleep(Duration::from_secs(4));
        t.line("echo TYPED-$((40+2))");
        t.wait_screen(GUARD, "the reconnect status", |s| {
            s.contains("reasonix: connection to") && s.contains("reconnecting")
        });
        let left = BLACKHOLE.saturating_sub(fault.since().elapsed());
        std::thread::sleep(left);
        // The second half was produced during the blackhole and has not got through yet.
        assert!(
            !t.screen()
                .lines()
                .any(|l| l.trim_end() == LINES.to_string()),
            "the blackhole did not hold the output back"
        );
        fault.lift().expect("lift");
        let restored = Instant::now();
        t.wait_line(GUARD, "TYPED-42");
        assert!(
            !t.screen().contains("reasonix: connection to"),
            "the status line is taken away after the resume ({:?} after the lift)",
            restored.elapsed()
        );

        let all = t.everything();
        if let Ok(dump) = std::env::var("RX_TERM_DUMP") {
            let _ = std::fs::write(dump, &all);
        }
        let numbers: Vec<u32> = all
            .lines()
            .filter(|l| !l.is_empty() && l.trim_end().chars().all(|c| c.is_ascii_digit()))
            .filter_map(|l| l.trim_end().parse().ok())
            .collect();
        // `stty size` lines are "R C", not bare numbers; everything bare is seq's.
        let want: Vec<u32> = (1..=LINES).collect();
        if numbers != want {
            let first_bad = numbers
                .iter()
                .zip(&want)
                .position(|(a, b)| a != b)
                .unwrap_or(numbers.len().min(want.len()));
            panic!(
                "output is not 1..={LINES} in order: {} numbers, first difference at index {first_bad}: {:?}",
                numbers.len(),
                &numbers[first_bad.saturating_sub(2)..(first_bad + 3).min(numbers.len())]
            );
        }
        let typed = all.lines().filter(|l| l.trim_end() == "TYPED-42").count();
        assert_eq!(typed, 1, "the typed line ran exactly once");
        let echoed = all
            .lines()
            .filter(|l| l.contains("echo TYPED-$((40+2))"))
            .count();
        assert_eq!(echoed, 1, "the typed keys arrived exactly once");

        // kill -9 of the client: the host shell keeps running; a new client gets its screen
        // and the same process.
        t.line("printf 'MARK-%s\\n' $((6*7))");
        t.wait_line(GUARD, "MARK-42");
        let client = t.pane_pid();
        // SAFETY: signalling this test's own child process (the tmux pane) by pid.
        assert_eq!(unsafe { libc::kill(client, libc::SIGKILL) }, 0);
        t.wait_screen(GUARD, "the client to die", |_| t.pane_dead());
        drop(t);
        let t = Tmux::start(rig.laptop.path(), &term_command(&rig), 90, 25, 1000);
        t.wait_line(GUARD, "MARK-42");
        t.line("echo AGAIN=$$");
        let again = value_of(
            &t.wait_screen(GUARD, "AGAIN", |s| value_of(s, "AGAIN=").is_some()),
            "AGAIN=",
        );
        assert_eq!(
            again.as_deref(),
            Some(pid.as_str()),
            "same host shell after kill -9"
        );
        t.line("exit");
        t.wait_screen(GUARD, "the exit message", |s| {
            s.contains("the shell exited")
        });
    });
}
