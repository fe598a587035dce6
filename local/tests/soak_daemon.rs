//! Soak: several hostile clients throw random, truncated and mis-sequenced frames (and junk
//! before and after a valid handshake) at the daemon socket while an honest `reasonix run`
//! turn streams through the real host binary. The daemon must not die, the honest turn must
//! complete with every chunk, and the daemon's memory must stay bounded.
//!
//! `REASONIX_SOAK_SECS` sets the hostile window (default 60). nextest runs this test alone
//! (`.config/nextest.toml`), it is not timed: the bounds are on outcomes and on memory.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{host_bin, LocalRig};
use reasonix_forward::frame::FrameKind;
use reasonix_forward::proto::{Hello, PROTOCOL_VERSION};
use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

/// Hostile connections at once.
const HOSTILE_CLIENTS: usize = 4;

fn soak_secs() -> u64 {
    std::env::var("REASONIX_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60)
}

fn marker_pid(home: &Path) -> u64 {
    for e in std::fs::read_dir(home.join("sessions"))
        .expect("sessions")
        .flatten()
    {
        if let Ok(b) = std::fs::read(e.path().join("daemon.json")) {
            if let Some(pid) = serde_json::from_slice::<Value>(&b)
                .ok()
                .and_then(|v| v["pid"].as_u64())
            {
                return pid;
            }
        }
    }
    panic!("no daemon marker under {}", home.display());
}

fn socket(home: &Path) -> PathBuf {
    std::fs::read_dir(home.join("run"))
        .expect("run dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "sock"))
        .expect("the daemon socket")
}

fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

/// Resident set of `pid` in KiB, from /proc.
fn rss_kib(pid: u64) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

fn run(home: &Path, ws: &Path, prompt: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .args(["run", "--yolo", "--json", prompt])
        .current_dir(ws)
        .env("REASONIX_HOME", home)
        .env("REASONIX_REMOTE_BIN", host_bin())
        .env("REASONIX_IDLE_TIMEOUT_SECS", "600")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("run reasonix")
}

fn texts(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "text")
        .filter_map(|e| e["text"].as_str().map(str::to_string))
        .collect()
}

/// xorshift64*: reproducible junk without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[derive(Default)]
struct Tally {
    connections: AtomicU64,
    frames: AtomicU64,
    junk_bytes: AtomicU64,
    handshakes: AtomicU64,
}

/// One frame as docs/PROTOCOL.md lays it out: `u32 len | u8 kind | u64 seq | u64 ack | payload`.
fn frame(kind: FrameKind, seq: u64, ack: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(21 + payload.len());
    out.extend_from_slice(&(17 + payload.len() as u32).to_be_bytes());
    out.push(kind as u8);
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(&ack.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

fn hello(rng: &mut Rng) -> Vec<u8> {
    let h = Hello {
        protocol: PROTOCOL_VERSION,
        build_id: reasonix_forward::build_id().to_string(),
        client_id: format!("hostile-{:x}", rng.next()),
        resume: None,
        bytes_frames: rng.next() & 1 == 0,
        early_data: rng.next() & 1 == 0,
    };
    frame(
        FrameKind::Hello,
        0,
        0,
        &serde_json::to_vec(&h).expect("hello json"),
    )
}

/// Payloads that look like envelopes: valid ones the daemon answers, and near misses.
fn envelope_like(rng: &mut Rng, id: u64) -> Vec<u8> {
    let v = match rng.below(8) {
        0 => json!({"t": "request", "id": id, "body": {"m": "status"}}),
        1 => json!({"t": "request", "id": id, "body": {"m": "list_sessions"}}),
        2 => json!({"t": "request", "id": id, "body": {"m": "no_such_method"}}),
        3 => json!({"t": "response", "id": rng.next(), "result": {"Ok": {"r": "ok"}}}),
        4 => {
            json!({"t": "notify", "body": {"n": "provider_chunk", "stream_id": rng.next(), "chunk": {"k": "text", "text": "x"}}})
        }
        5 => {
            json!({"t": "request", "id": id, "body": {"m": "submit_turn", "request_id": "r", "text": "no session open"}})
        }
        6 => json!({"t": "request", "id": id}),
        _ => json!([1, {"t": null}, "x".repeat(rng.below(2000) as usize)]),
    };
    let mut b = serde_json::to_vec(&v).expect("json");
    if rng.below(4) == 0 {
        let cut = rng.below(b.len() as u64) as usize;
        b.truncate(cut);
    }
    b
}

/// One hostile connection; returns when the daemon hangs up or the script ends.
fn hostile_connection(sock: &Path, rng: &mut Rng, tally: &Tally) {
    let Ok(mut s) = UnixStream::connect(sock) else {
        return;
    };
    tally.connections.fetch_add(1, Ordering::Relaxed);
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
    // Drain whatever the daemon says, so its writes never block on us.
    if let Ok(mut r) = s.try_clone() {
        std::thread::spawn(move || {
            let mut buf = [0u8; 16 * 1024];
            while matches!(r.read(&mut buf), Ok(n) if n > 0) {}
        });
    }
    let mut send = |b: &[u8], frames: u64| -> bool {
        tally.frames.fetch_add(frames, Ordering::Relaxed);
        s.write_all(b).is_ok()
    };
    match rng.below(7) {
        // Junk straight away (before reading the preamble).
        0 => {
            let n = 1 + rng.below(64 * 1024) as usize;
            tally.junk_bytes.fetch_add(n as u64, Ordering::Relaxed);
            send(&rng.bytes(n), 0);
        }
        // Junk, then a valid hello (the daemon reads frames, not lines: this is garbage).
        1 => {
            let n = 1 + rng.below(512) as usize;
            tally.junk_bytes.fetch_add(n as u64, Ordering::Relaxed);
            let mut b = rng.bytes(n);
            b.extend(hello(rng));
            send(&b, 1);
        }
        // A truncated hello, then silence for a moment, then hang up.
        2 => {
            let h = hello(rng);
            let cut = 1 + rng.below(h.len() as u64 - 1) as usize;
            send(&h[..cut], 1);
            std::thread::sleep(Duration::from_millis(rng.below(300)));
        }
        // A valid handshake, then random frames: any kind, any seq and ack, junk payloads,
        // oversized and short length prefixes, a truncated last frame.
        3..=5 => {
            if !send(&hello(rng), 1) {
                return;
            }
            tally.handshakes.fetch_add(1, Ordering::Relaxed);
            let mut seq = 1;
            for _ in 0..(1 + rng.below(40)) {
                let b = match rng.below(10) {
                    0 => {
                        let n = rng.below(4096) as usize;
                        tally.junk_bytes.fetch_add(n as u64, Ordering::Relaxed);
                        rng.bytes(n)
                    }
                    1 => vec![0xff, 0xff, 0xff, 0xf0, 3, 0, 0],
                    2 => vec![0, 0, 0, 3, 1, 2, 3],
                    3 => {
                        let kind = [
                            FrameKind::Ack,
                            FrameKind::Ping,
                            FrameKind::Pong,
                            FrameKind::Close,
                        ][rng.below(4) as usize];
                        let n = rng.below(64) as usize;
                        let payload = rng.bytes(n);
                        frame(kind, rng.next(), rng.below(100), &payload)
                    }
                    4 => frame(FrameKind::Data, rng.next(), rng.next(), b"{}"),
                    5 => frame(FrameKind::Hello, 0, 0, b"{}"),
                    _ => {
                        let f = frame(FrameKind::Data, seq, 0, &envelope_like(rng, seq));
                        seq += 1;
                        f
                    }
                };
                if !send(&b, 1) {
                    return;
                }
            }
            if rng.below(2) == 0 {
                let f = frame(FrameKind::Data, seq, 0, &envelope_like(rng, seq));
                let cut = rng.below(f.len() as u64) as usize;
                send(&f[..cut], 1);
            }
        }
        // Connect and hang up, or idle a little without a byte.
        _ => {
            if rng.below(2) == 0 {
                std::thread::sleep(Duration::from_millis(rng.below(500)));
            }
        }
    }
    let _ = s.shutdown(std::net::Shutdown::Both);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_do_not_kill_the_daemon_or_the_honest_turn() {
    let secs = soak_secs();
    // The honest turn: a tool that writes a file, then a reply streamed slowly enough to
    // last through most of the hostile window.
    let chunks: Vec<String> = (0..secs.saturating_sub(10).max(5))
        .map(|i| format!("c{i} "))
        .collect();
    let mock = MockProvider::start(vec![
        MockReply::text(&["warm"]),
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "w1",
                "write_file",
                &json!({"path": "soak/honest.txt", "content": "written during the soak\n"})
                    .to_string(),
            )],
            4,
        ),
        MockReply::text(&chunks).slow(Duration::from_secs(1)),
        MockReply::text(&["after"]),
    ])
    .await;
    let rig = LocalRig::new(&mock.base_url(), "RX_SOAK_KEY", "sk-soak");
    let (home, ws) = (rig.home.clone(), rig.ws.clone());

    // Start the daemon with a first turn and take its baseline.
    let warm = tokio::task::block_in_place(|| run(&home, &ws, "warm up"));
    assert!(
        warm.status.success(),
        "{}",
        String::from_utf8_lossy(&warm.stderr)
    );
    let pid = marker_pid(&home);
    let sock = socket(&home);
    let rss_before = rss_kib(pid);

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let mut hostile = Vec::new();
    for c in 0..HOSTILE_CLIENTS {
        let (stop, tally, sock) = (Arc::clone(&stop), Arc::clone(&tally), sock.clone());
        hostile.push(std::thread::spawn(move || {
            let mut rng = Rng(0x5eed_0000 + c as u64 * 7919);
            while !stop.load(Ordering::Relaxed) {
                hostile_connection(&sock, &mut rng, &tally);
            }
        }));
    }
    let started = Instant::now();
    let (home2, ws2) = (home.clone(), ws.clone());
    let honest = tokio::task::spawn_blocking(move || run(&home2, &ws2, "write the file and talk"));
    let mut peak = rss_before;
    while started.elapsed() < Duration::from_secs(secs) || !honest.is_finished() {
        assert!(alive(pid), "the daemon died during the soak");
        peak = peak.max(rss_kib(pid));
        tokio::time::sleep(Duration::from_millis(500)).await;
        // The honest turn has its own deadline: the slow reply lasts about `secs` seconds.
        assert!(
            started.elapsed() < Duration::from_secs(secs * 4 + 60),
            "the honest turn did not finish"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for h in hostile {
        h.join().expect("hostile client thread");
    }
    let out = honest.await.expect("honest run");
    assert!(
        out.status.success(),
        "the honest turn failed:\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        texts(&out),
        chunks.concat(),
        "every chunk of the honest reply arrived"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("soak/honest.txt")).expect("the tool's file"),
        "written during the soak\n"
    );
    assert!(alive(pid), "the daemon died");
    // Let the hostile transports wind down before the last sample.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_after = rss_kib(pid);
    peak = peak.max(rss_after);

    // The daemon still serves a normal turn, and it is the same daemon.
    let next = tokio::task::block_in_place(|| run(&home, &ws, "still there?"));
    assert!(
        next.status.success(),
        "{}",
        String::from_utf8_lossy(&next.stderr)
    );
    assert_eq!(texts(&next), "after");
    assert_eq!(marker_pid(&home), pid, "the daemon was restarted");

    let t = &tally;
    eprintln!(
        "soak: {secs} s, {} hostile connections ({} of them sent a valid hello), {} frames and {} junk bytes thrown; daemon RSS {} KiB before, {} KiB after, {} KiB peak",
        t.connections.load(Ordering::Relaxed),
        t.handshakes.load(Ordering::Relaxed),
        t.frames.load(Ordering::Relaxed),
        t.junk_bytes.load(Ordering::Relaxed),
        rss_before,
        rss_after,
        peak
    );
    let bound = rss_before * 3 + 50 * 1024;
    assert!(
        peak <= bound,
        "daemon memory grew from {rss_before} KiB to a peak of {peak} KiB (bound {bound} KiB)"
    );
    assert!(
        t.connections.load(Ordering::Relaxed) >= HOSTILE_CLIENTS as u64,
        "the hostile clients never connected"
    );
    let daemon_log: String = std::fs::read_dir(home.join("logs"))
        .expect("logs")
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    assert!(
        daemon_log.contains("malformed") || daemon_log.contains("exceeds the limit"),
        "the daemon log names the bad frames"
    );
    // SAFETY: plain kill(2) of the daemon this test started.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
}
