//! A goal over SSH with the client killed mid-goal and no goal keeper (`[agent] goal_keeper =
//! false`; `e2e_goal_keeper.rs` has the keeper) (real OpenSSH sshd, the static
//! `reasonix-remote` installed over SFTP, the scripted mock provider): `run --goal` starts it,
//! the client is killed with SIGKILL while the goal's bash command runs; the command finishes
//! on the host with no client attached and the goal waits for a laptop to reach the model
//! (`reasonix sessions` shows it running and says "goal waiting for a laptop (the model key
//! is on the laptop)"); a later client attaches (`run --continue --goal resume`: the goal is
//! still running, the attach alone lets its parked step go on) and the goal completes;
//! `reasonix sessions` then shows it complete. Exactly one provider request per step, the
//! command ran once.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod goal_ssh_common;

use std::io::BufRead;
use std::time::{Duration, Instant};

use goal_ssh_common::{goal_rig, listed, output, GoalRig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_goes_on_after_the_client_is_killed_and_a_later_client_finds_it_complete() {
    let GoalRig {
        sshd: _sshd,
        user,
        mock,
        laptop: l,
        dest,
    } = goal_rig(false).await;

    // 1. Start the goal; kill the client (SIGKILL) once the bash command is running.
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
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.unwrap();
            let started = line.contains("\"tool_started\"") && line.contains("\"b1\"");
            seen.push(line);
            if started {
                return seen;
            }
        }
        panic!("the client ended before the bash command started: {seen:?}");
    });
    child.kill().unwrap(); // SIGKILL
    let _ = child.wait();
    let killed_at = Instant::now();
    assert!(
        seen.iter().any(|l| l.contains("\"goal\"")),
        "the goal started: {seen:?}"
    );

    // 2. With no client, the command finishes on the host and the goal waits for a laptop.
    let runs = user.home.join("ws/runs.txt");
    tokio::task::block_in_place(|| {
        while !runs.is_file() {
            assert!(
                killed_at.elapsed() < Duration::from_secs(60),
                "the command never finished on the host"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let row = tokio::task::block_in_place(|| loop {
        let row = listed(&l, &dest);
        if row["state"] == "waiting_for_laptop" || killed_at.elapsed() > Duration::from_secs(60) {
            return row;
        }
        std::thread::sleep(Duration::from_millis(200));
    });
    assert_eq!(row["state"], "waiting_for_laptop", "{row}");
    assert_eq!(row["goal"]["status"], "running", "{row}");
    assert_eq!(row["goal"]["objective"], "write runs.txt once", "{row}");
    // The listing says why it waits and where the key is.
    let out =
        tokio::task::block_in_place(|| l.command(&["sessions", "--ssh", &dest]).output().unwrap());
    assert!(out.status.success(), "{}", output(&out));
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        table.contains("goal waiting for a laptop (the model key is on the laptop)"),
        "{table}"
    );
    // The first step's request only: the rest waits for a laptop.
    assert_eq!(mock.request_count(), 1);

    // 3. A later client attaches; the goal goes on and completes.
    let out = tokio::task::block_in_place(|| {
        l.command(&[
            "run",
            "--ssh",
            &dest,
            "--yolo",
            "--json",
            "--continue",
            "--goal",
            "resume",
        ])
        .output()
        .unwrap()
    });
    assert_eq!(out.status.code(), Some(0), "{}", output(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"status\":\"complete\""), "{}", output(&out));

    // 4. `reasonix sessions` finds it complete; one request per step, one run.
    let row = tokio::task::block_in_place(|| listed(&l, &dest));
    assert_eq!(row["goal"]["status"], "complete", "{row}");
    assert_eq!(row["goal"]["turns"], 2, "{row}");
    assert_eq!(row["goal"]["progress"], "runs.txt has one line", "{row}");
    assert_eq!(mock.request_count(), 5);
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run\n");
    // The model saw the command's full output, produced while no client was attached.
    let reqs = mock.requests();
    assert!(reqs[1].body["messages"].to_string().contains("finished"));
}
