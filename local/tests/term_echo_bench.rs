//! Keystroke-echo latency through `reasonix term` against plain `ssh -tt`, both to the same
//! real sshd behind the testkit delay proxy (50 ms round trip by default), both on a PTY this
//! test owns: type one character, wait for the shell's echo of it, 100 times; medians.
//! Run by `bench/term_echo.sh` (ignored in the normal test run: it is a measurement).

mod reconnect_common;

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reasonix_testkit::netfault::DelayProxy;
use reconnect_common::*;

/// A child on a fresh PTY: its master end.
struct OnPty {
    child: Child,
    master: std::fs::File,
}

fn spawn_on_pty(mut cmd: Command) -> OnPty {
    let (mut master, mut slave) = (-1, -1);
    let ws = libc::winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty fills two fds; the null pointers mean no name and default termios.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &ws,
        )
    };
    assert_eq!(rc, 0, "openpty");
    // SAFETY: both fds were just opened by openpty and are owned here.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let slave_fd = slave.as_raw_fd();
    cmd.stdin(Stdio::from(slave.try_clone().expect("dup")))
        .stdout(Stdio::from(slave.try_clone().expect("dup")))
        .stderr(Stdio::from(slave));
    // SAFETY: only async-signal-safe calls between fork and exec: a new session whose
    // controlling terminal is the PTY (what a terminal emulator does).
    unsafe {
        cmd.pre_exec(move || {
            libc::setsid();
            libc::ioctl(slave_fd, libc::TIOCSCTTY, 0);
            Ok(())
        });
    }
    let child = cmd.spawn().expect("spawn on pty");
    OnPty {
        child,
        master: std::fs::File::from(master),
    }
}

impl OnPty {
    /// Read until `needle` has been seen (hang guard 60 s).
    fn read_until(&mut self, needle: &[u8]) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !seen.windows(needle.len()).any(|w| w == needle) {
            assert!(
                Instant::now() < deadline,
                "no {:?} in {:?}",
                String::from_utf8_lossy(needle),
                String::from_utf8_lossy(&seen)
            );
            let n = self.master.read(&mut buf).expect("read pty");
            assert!(
                n > 0,
                "the client ended: {:?}",
                String::from_utf8_lossy(&seen)
            );
            seen.extend_from_slice(&buf[..n]);
        }
    }

    /// Median echo time of `count` characters typed one at a time.
    fn echo_median(&mut self, count: usize) -> Duration {
        self.master
            .write_all(b"echo READY-$((40+2))\r")
            .expect("write");
        self.read_until(b"READY-42\r\n");
        // Let the prompt arrive.
        std::thread::sleep(Duration::from_millis(500));
        let mut buf = [0u8; 4096];
        // Drain what is there (prompt), without blocking forever: the prompt is all.
        set_nonblocking(&self.master, true);
        while self.master.read(&mut buf).is_ok_and(|n| n > 0) {}
        set_nonblocking(&self.master, false);
        let mut times = Vec::with_capacity(count);
        for i in 0..count {
            let c = b'a' + (i % 26) as u8;
            let t0 = Instant::now();
            self.master.write_all(&[c]).expect("type");
            self.read_until(&[c]);
            times.push(t0.elapsed());
        }
        // Erase the typed line.
        self.master.write_all(b"\x15").expect("ctrl-u");
        times.sort();
        times[times.len() / 2]
    }
}

fn set_nonblocking(f: &std::fs::File, on: bool) {
    // SAFETY: fcntl on an fd owned by `f`.
    unsafe {
        let flags = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
        let flags = if on {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        libc::fcntl(f.as_raw_fd(), libc::F_SETFL, flags);
    }
}

#[test]
#[ignore = "benchmark: run by bench/term_echo.sh"]
fn term_echo_latency_against_ssh() {
    let delay_ms: u64 = std::env::var("BENCH_DELAY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25);
    let count: usize = std::env::var("BENCH_CHARS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    in_netns(|ns| async move {
        let rig = Rig::new(ns, vec![]).await;
        let target = format!("127.0.0.1:{}", rig.sshd.port())
            .parse()
            .expect("addr");
        let proxy = DelayProxy::start(target, Duration::from_millis(delay_ms))
            .await
            .expect("proxy");
        rig.trust_port(proxy.port());
        let port = proxy.port().to_string();
        let key = rig.key.private.display().to_string();
        let user_host = format!("{}@127.0.0.1", rig.user.name);
        let known = rig.home().join(".ssh/known_hosts").display().to_string();

        // Baseline: OpenSSH with a PTY, same proxy, same shell.
        let mut ssh = rig.ns.command("ssh");
        ssh.args(["-tt", "-p", &port, "-i", &key, "-F", "/dev/null"])
            .args(["-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"])
            .args(["-o", &format!("UserKnownHostsFile={known}")])
            .arg(&user_host)
            .env("HOME", rig.home())
            .env("TERM", "xterm")
            .env_remove("SSH_AUTH_SOCK");
        let mut base = spawn_on_pty(ssh);
        let ssh_median = base.echo_median(count);
        let _ = base.child.kill();
        let _ = base.child.wait();

        let mut term = rig.ns.command(env!("CARGO_BIN_EXE_reasonix"));
        term.args(["term", &rig.dest(), "-p", &port, "-F", "none", "-i", &key])
            .args(["-o", "IdentityAgent=none"])
            .current_dir(rig.laptop.path())
            .env("HOME", rig.home())
            .env("REASONIX_HOME", rig.rx_home())
            .env(
                "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
                musl_host_binary(),
            )
            .env("REASONIX_IDLE_TIMEOUT_SECS", "30")
            .env("TERM", "xterm")
            .env_remove("SSH_AUTH_SOCK");
        let mut ours = spawn_on_pty(term);
        let term_median = ours.echo_median(count);
        let _ = ours.master.write_all(b"exit\r");
        ours.read_until(b"the shell exited");
        let _ = ours.child.wait();
        println!(
            "RESULT term_echo: rtt {} ms, {count} chars, median ssh -tt {:.1} ms, reasonix term {:.1} ms, difference {:+.1} ms",
            2 * delay_ms,
            ssh_median.as_secs_f64() * 1e3,
            term_median.as_secs_f64() * 1e3,
            (term_median.as_secs_f64() - ssh_median.as_secs_f64()) * 1e3
        );
    });
}
