//! The goal keeper over SSH (issue 38 §3; real OpenSSH sshd, the static `reasonix-remote`
//! installed over SFTP, the scripted mock provider): `run --goal` starts a goal and a
//! detached `reasonix keep` for it; the client is killed with SIGKILL while the goal's bash
//! command runs; with NO client attached the goal goes on through the keeper's gateway and
//! completes (polled with `reasonix sessions --json`, which opens no session); exactly one
//! provider request per step, the command ran once; the keeper then exits and removes its
//! pid file, and a later `reasonix sessions` finds the goal complete.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod goal_ssh_common;

use std::io::BufRead;
use std::time::{Duration, Instant};

use goal_ssh_common::{goal_rig, listed, GoalRig};
use serde_json::Value;

fn keeper_pid(lines: &[String]) -> Option<u32> {
    lines.iter().find_map(|l| {
        let v: Value = serde_json::from_str(l).ok()?;
        let text = v["text"].as_str()?;
        let rest = text.strip_prefix("goal kept by this laptop (pid ")?;
        rest.split(')').next()?.parse().ok()
    })
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_goal_completes_with_no_client_attached_after_the_client_is_killed() {
    let GoalRig {
        sshd: _sshd,
        user,
        mock,
        laptop: l,
        dest,
    } = goal_rig(true).await;
    let rx = l.rx.clone();

    // 1. Start the goal; once the bash command runs and the keeper is reported, SIGKILL the
    //    client.
    let mut child = l
        .command(&[
            "run",
            "--ssh",
            &dest,
            "--yolo",
            "--json",
            "--goal",
            "write runs.txt once",
        ])
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let seen = tokio::task::block_in_place(|| {
        let mut seen = Vec::new();
        let mut started = false;
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.unwrap();
            started |= line.contains("\"tool_started\"") && line.contains("\"b1\"");
            seen.push(line);
            if started && keeper_pid(&seen).is_some() {
                return seen;
            }
        }
        panic!("the client ended before the bash command started with a keeper: {seen:?}");
    });
    child.kill().unwrap(); // SIGKILL
    let _ = child.wait();
    let killed_at = Instant::now();
    let pid = keeper_pid(&seen).unwrap();
    assert!(alive(pid), "the keeper runs: {seen:?}");
    let session = seen
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|v| v["session"].as_str().map(str::to_string))
        .expect("the session id was printed");
    let pid_file = rx.join("keepers").join(format!("{session}.pid"));
    // The keeper claims the session as it starts (the notice comes when it was spawned).
    let claimed = tokio::task::block_in_place(|| {
        let t = Instant::now();
        loop {
            if let Ok(text) = std::fs::read_to_string(&pid_file) {
                if !text.is_empty() {
                    return text;
                }
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "the keeper never wrote {}",
                pid_file.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    assert_eq!(claimed.trim(), pid.to_string());
    // Its arguments hold the destination and SSH options, never the key.
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(
        cmdline.contains(&format!("keep --session {session} --ssh {dest}")),
        "{cmdline}"
    );
    assert!(!cmdline.contains("sk-goal-ssh"), "{cmdline}");

    // 2. With no client attached (the listing opens no session), the goal completes through
    //    the keeper.
    let row = tokio::task::block_in_place(|| loop {
        let row = listed(&l, &dest);
        if row["goal"]["status"] != "running" || killed_at.elapsed() > Duration::from_secs(120) {
            return row;
        }
        assert_eq!(row["driver_attached"], false, "{row}");
        std::thread::sleep(Duration::from_millis(300));
    });
    assert_eq!(row["goal"]["status"], "complete", "{row}");
    assert_eq!(row["goal"]["turns"], 2, "{row}");
    assert_eq!(row["goal"]["progress"], "runs.txt has one line", "{row}");
    assert_eq!(row["driver_attached"], false, "{row}");
    // Exactly one provider request per step; the command ran once.
    assert_eq!(mock.request_count(), 5);
    let runs = user.home.join("ws/runs.txt");
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run\n");
    let reqs = mock.requests();
    assert!(reqs[1].body["messages"].to_string().contains("finished"));

    // 3. The keeper exits by itself once the goal ended, and takes its pid file with it.
    tokio::task::block_in_place(|| {
        let t = Instant::now();
        while alive(pid) || pid_file.exists() {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "the keeper (pid {pid}) did not exit after the goal completed"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let log = std::fs::read_to_string(rx.join("logs").join(format!("keeper-{session}.log")))
        .unwrap_or_default();
    assert!(log.contains("is complete"), "{log}");
    // A later `reasonix sessions` finds it complete, with no keeper.
    let row = tokio::task::block_in_place(|| listed(&l, &dest));
    assert_eq!(row["goal"]["status"], "complete", "{row}");
    assert!(row.get("keeper_attached").is_none(), "{row}");
}
