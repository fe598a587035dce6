//! The host daemon under bad input and over its lifetime: a client that sends a malformed
//! frame is dropped while the daemon keeps serving others; the daemon exits cleanly when idle.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{host_bin, LocalRig};
use reasonix_testkit::mock_provider::{MockProvider, MockReply};
use serde_json::Value;

fn setup(base_url: &str) -> (LocalRig, PathBuf, PathBuf) {
    let rig = LocalRig::new(base_url, "RX_D_KEY", "sk-daemon");
    let (home, ws) = (rig.home.clone(), rig.ws.clone());
    (rig, home, ws)
}

fn marker(home: &Path) -> Option<Value> {
    let sessions = home.join("sessions");
    for e in std::fs::read_dir(sessions).ok()?.flatten() {
        if let Ok(b) = std::fs::read(e.path().join("daemon.json")) {
            return serde_json::from_slice(&b).ok();
        }
    }
    None
}

fn alive(pid: u64) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

fn run_turn(home: &Path, ws: &Path, idle: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .args(["run", "--yolo", "hello"])
        .current_dir(ws)
        .env("REASONIX_HOME", home)
        .env("REASONIX_REMOTE_BIN", host_bin())
        .env("REASONIX_IDLE_TIMEOUT_SECS", idle)
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("run")
}

/// Runs one headless turn (starting the daemon with idle timeout `idle` seconds) and returns
/// the daemon's pid from its marker.
fn first_turn(home: &Path, ws: &Path, idle: &str) -> u64 {
    let out = tokio::task::block_in_place(|| run_turn(home, ws, idle));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    marker(home).expect("marker")["pid"].as_u64().expect("pid")
}

/// Everything the daemon logged so far.
fn daemon_log(home: &Path) -> String {
    std::fs::read_dir(home.join("logs"))
        .expect("logs")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frame_drops_that_client_and_the_daemon_keeps_serving() {
    let mock = MockProvider::start(vec![
        MockReply::text(&["first"]),
        MockReply::text(&["second"]),
    ])
    .await;
    let (_dir, home, ws) = setup(&mock.base_url());
    let pid = first_turn(&home, &ws, "60");

    // A hostile or broken client: valid preamble from the daemon, then an absurd frame.
    let mut child = Command::new(host_bin())
        .args(["attach", "--workspace"])
        .arg(&ws)
        .env("REASONIX_HOME", &home)
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("attach");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut preamble = String::new();
    stdout.read_line(&mut preamble).expect("preamble");
    assert!(
        preamble.starts_with(&format!("{} ", reasonix_forward::proto::PREAMBLE_MAGIC)),
        "{preamble:?}"
    );
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(&[0xff, 0xff, 0xff, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8])
        .expect("write garbage");
    stdin.flush().expect("flush");
    // The daemon ends that connection: the bridge sees EOF and exits.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = stdout.read_to_end(&mut rest);
        let _ = tx.send(rest);
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the daemon closed the malformed connection");
    let _ = child.wait();

    // The daemon survived and serves the next client.
    assert!(alive(pid), "the daemon must survive a malformed frame");
    let out = tokio::task::block_in_place(|| run_turn(&home, &ws, "60"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("second"));
    assert_eq!(marker(&home).expect("marker")["pid"].as_u64(), Some(pid));
    let log = daemon_log(&home);
    assert!(
        log.contains("exceeds the limit") || log.contains("malformed"),
        "the daemon log names the problem:\n{log}"
    );
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_daemon_exits_cleanly() {
    let mock = MockProvider::start(vec![MockReply::text(&["bye"])]).await;
    let (_dir, home, ws) = setup(&mock.base_url());
    let pid = first_turn(&home, &ws, "2");
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(pid) {
        assert!(
            Instant::now() < deadline,
            "daemon {pid} did not exit after its idle timeout"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let m = marker(&home).expect("marker");
    assert_eq!(m["clean"], true, "a clean idle exit is recorded: {m}");
}

/// Connect to `socket` as `uid` and return what the daemon sent first (empty: it hung up).
fn first_bytes_as(uid: u32, socket: &Path) -> String {
    use std::os::unix::process::CommandExt;
    let script = "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.settimeout(10)\ns.connect(sys.argv[1])\nd=s.recv(15)\nsys.stdout.write(d.decode('latin-1'))\n";
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(socket)
        .uid(uid)
        .gid(uid)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "connect as uid {uid}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_socket_is_private_and_other_users_are_refused() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let mock = MockProvider::start(vec![MockReply::text(&["hi"])]).await;
    let (_rig, home, ws) = setup(&mock.base_url());
    let pid = first_turn(&home, &ws, "60");
    let run = home.join("run");
    let socket = std::fs::read_dir(&run)
        .expect("run dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "sock"))
        .expect("the daemon socket");
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").mode() & 0o777;
    assert_eq!(mode(&run), 0o700, "socket directory");
    assert_eq!(mode(&socket), 0o600, "socket");
    assert_eq!(mode(&home), 0o700, "state home");

    // The owner is served: the daemon greets with its preamble.
    assert!(first_bytes_as(0, &socket).starts_with("REASONIX-LINK/"));
    // Open every door the modes close, so only the daemon's own peer check is left: another
    // user reaches the socket and is hung up on without a byte.
    let open = |p: &Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod")
    };
    let mut dir = socket.parent().map(Path::to_path_buf);
    while let Some(d) = dir {
        if d == Path::new("/") {
            break;
        }
        if mode(&d) & 0o001 == 0 {
            open(&d, mode(&d) | 0o011);
        }
        dir = d.parent().map(Path::to_path_buf);
    }
    open(&socket, 0o666);
    assert_eq!(
        first_bytes_as(65534, &socket),
        "",
        "another user was served"
    );
    assert!(alive(pid), "the daemon keeps running");
    let log = daemon_log(&home);
    assert!(
        log.contains("refused a client with uid 65534"),
        "the daemon log names the refused uid:\n{log}"
    );
    // And the owner is still served.
    assert!(first_bytes_as(0, &socket).starts_with("REASONIX-LINK/"));
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
}
