//! Shared rig of the reconnect fault tests and the reconnect benchmark: a private network
//! namespace holding a real sshd, a throwaway host user, the scripted mock provider and the
//! real `reasonix` client, with iptables faults applied inside the namespace only.
//!
//! The test thread enters the namespace (`setns`) before it builds its tokio runtime, so the
//! in-process mock provider and delay proxy listen inside it; the client binary is started
//! with `ip netns exec` (see `reasonix_testkit::netfault`).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reasonix_bootstrap::{Destination, NonInteractivePrompter, SshOptions};
use reasonix_forward::sync::LockExt;
use reasonix_local::client::{Client, ClientEvent, ClientOptions};
use reasonix_local::config::{Config, LoadOptions};
use reasonix_local::gateway::Gateway;
use reasonix_local::ssh::SshConnector;
use reasonix_testkit::mock_provider::{MockProvider, MockReply};
use reasonix_testkit::netfault::NetNs;
use reasonix_testkit::sshd::{ClientKey, Sshd, SshdConfig, TestUser, UserOptions};
use serde_json::Value;

/// The API key the laptop holds (never on the host).
pub const KEY: &str = "sk-test-RECONNECT-9f8e7d";

/// Short liveness settings for the tests: real defaults are 5 s heartbeat / 15 s dead; the
/// tests scale them down 10x (500 ms / 2 s) so a blackhole is detected in about 2 s.
pub const HEARTBEAT_MS: u64 = 500;
/// See [`HEARTBEAT_MS`].
pub const DEAD_AFTER_MS: u64 = 2000;

pub fn musl_host_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let debug = [
        root.join("x86_64-unknown-linux-musl/debug/reasonix-remote"),
        root.join("debug/reasonix-remote-x86_64-unknown-linux-musl"),
    ];
    let release = [
        root.join("release/reasonix-remote-x86_64-unknown-linux-musl"),
        root.join("x86_64-unknown-linux-musl/release/reasonix-remote"),
    ];
    // The host binary of this test build's profile first (a `--release` benchmark measures
    // release builds on both ends).
    let candidates: Vec<PathBuf> = if cfg!(debug_assertions) {
        debug.into_iter().chain(release).collect()
    } else {
        release.into_iter().chain(debug).collect()
    };
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!("no static host binary ({candidates:?}); run `cargo build -p reasonix-remote --target x86_64-unknown-linux-musl`")
        })
}

/// Run `body` on this (test) thread after moving it into a fresh network namespace, inside a
/// tokio runtime whose threads are all in the namespace too.
pub fn in_netns<F, Fut>(body: F)
where
    F: FnOnce(Arc<NetNs>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let ns = Arc::new(NetNs::create().expect("create network namespace (needs root)"));
    ns.enter_current_thread().expect("enter network namespace");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(body(Arc::clone(&ns)));
    rt.shutdown_timeout(Duration::from_secs(2));
}

/// Everything a scenario needs. Field order is drop order: the host user (and its daemon)
/// goes before the sshd listener; the namespace itself is owned by the caller.
pub struct Rig {
    pub mock: MockProvider,
    pub user: TestUser,
    pub sshd: Sshd,
    pub laptop: tempfile::TempDir,
    pub key: ClientKey,
    pub ns: Arc<NetNs>,
}

impl Rig {
    /// sshd inside `ns`, a host user with `~/ws`, a laptop home with key, known_hosts and a
    /// config pointing at the mock provider (which must be started inside the namespace).
    pub async fn new(ns: Arc<NetNs>, script: Vec<MockReply>) -> Rig {
        Self::new_with_sshd(ns, script, Vec::new()).await
    }

    /// [`Rig::new`] with extra `sshd_config` lines (`AllowAgentForwarding no`, ...).
    pub async fn new_with_sshd(ns: Arc<NetNs>, script: Vec<MockReply>, extra: Vec<String>) -> Rig {
        let sshd = Sshd::start(SshdConfig {
            netns: Some(ns.name().to_string()),
            allow_tcp_forwarding: false,
            allow_stream_local_forwarding: false,
            extra,
            ..SshdConfig::default()
        })
        .expect("sshd in namespace");
        let user = TestUser::create(&UserOptions::default()).expect("user");
        user.write_file("ws/README.md", "# reconnect workspace\n", 0o644)
            .expect("workspace");
        let mock = MockProvider::start(script).await;
        let laptop = tempfile::tempdir().expect("tempdir");
        let ssh = laptop.path().join("home/.ssh");
        std::fs::create_dir_all(&ssh).expect("ssh dir");
        let key = ClientKey::generate(&ssh, "id_rx", None).expect("key");
        user.authorize(&key.public).expect("authorize");
        let rig = Rig {
            mock,
            user,
            sshd,
            laptop,
            key,
            ns,
        };
        rig.trust_port(rig.sshd.port());
        let rx = rig.rx_home();
        std::fs::create_dir_all(&rx).expect("rxhome");
        std::fs::write(
            rx.join("config.toml"),
            format!(
                "default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"RX_RECONNECT_KEY\"\n",
                rig.mock.base_url()
            ),
        )
        .expect("config");
        std::fs::write(rx.join(".env"), format!("RX_RECONNECT_KEY={KEY}\n")).expect(".env");
        rig
    }

    pub fn home(&self) -> PathBuf {
        self.laptop.path().join("home")
    }

    pub fn rx_home(&self) -> PathBuf {
        self.laptop.path().join("rxhome")
    }

    pub fn dest(&self) -> String {
        format!("{}@127.0.0.1:ws", self.user.name)
    }

    /// Add a known_hosts entry for the sshd's host key as reached at `127.0.0.1:port` (the
    /// sshd itself or a proxy in front of it).
    pub fn trust_port(&self, port: u16) {
        let path = self.home().join(".ssh/known_hosts");
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        let mut parts = self.sshd.host_public_key().split_whitespace();
        let (kt, kb) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        text.push_str(&format!("[127.0.0.1]:{port} {kt} {kb}\n"));
        std::fs::write(path, text).expect("known_hosts");
    }

    /// A file in the host workspace.
    pub fn host_file(&self, rel: &str) -> PathBuf {
        self.user.home.join("ws").join(rel)
    }

    /// Start `reasonix run --ssh DEST --json --yolo [extra...] PROMPT` inside the namespace,
    /// reaching sshd through `port`, with liveness settings `(heartbeat_ms, dead_after_ms)`.
    pub fn spawn_client(
        &self,
        port: u16,
        liveness: (u64, u64),
        extra: &[&str],
        prompt: &str,
    ) -> ClientProc {
        self.spawn_client_via(
            &[env!("CARGO_BIN_EXE_reasonix")],
            port,
            liveness,
            extra,
            prompt,
        )
    }

    /// [`Rig::spawn_client`] with another program in front of the arguments (e.g. `wine
    /// reasonix.exe`: the Windows build).
    pub fn spawn_client_via(
        &self,
        program: &[&str],
        port: u16,
        liveness: (u64, u64),
        extra: &[&str],
        prompt: &str,
    ) -> ClientProc {
        let mut cmd = self.ns.command(program[0]);
        cmd.args(&program[1..])
            .args(["run", "--ssh", &self.dest(), "--json", "--yolo"])
            .args(extra)
            .arg(prompt)
            .args(["-p", &port.to_string(), "-F", "none"])
            .arg("-i")
            .arg(&self.key.private)
            .args(["-o", "IdentityAgent=none"])
            .current_dir(self.laptop.path())
            .env("HOME", self.home())
            .env("REASONIX_HOME", self.rx_home())
            .env(
                "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
                musl_host_binary(),
            )
            .env("REASONIX_HEARTBEAT_MS", liveness.0.to_string())
            .env("REASONIX_DEAD_AFTER_MS", liveness.1.to_string())
            .env("REASONIX_IDLE_TIMEOUT_SECS", "120")
            .env("REASONIX_LOG", "debug")
            .env_remove("RX_RECONNECT_KEY")
            .env_remove("SSH_AUTH_SOCK")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        ClientProc::spawn(cmd)
    }

    /// A library [`Client`] in this process (its threads are in the namespace) reaching the
    /// host over SSH through `port`, with liveness `(heartbeat_ms, dead_after_ms)`. The
    /// liveness and the host binary are process environment (read by `ClientOptions` and
    /// passed on to the host daemon by the connector), so every library client of one test
    /// shares them.
    pub fn library_client(
        &self,
        port: u16,
        liveness: (u64, u64),
    ) -> (Client, tokio::sync::mpsc::UnboundedReceiver<ClientEvent>) {
        self.library_client_with(port, liveness, ClientOptions::default())
    }

    /// [`Rig::library_client`] with `options` (forwarded ports, ...).
    pub fn library_client_with(
        &self,
        port: u16,
        liveness: (u64, u64),
        options: ClientOptions,
    ) -> (Client, tokio::sync::mpsc::UnboundedReceiver<ClientEvent>) {
        self.library_client_ssh(port, liveness, options, &[])
    }

    /// [`Rig::library_client_with`] with extra `-o Key=Value` SSH options
    /// (`ForwardAgent=...`).
    pub fn library_client_ssh(
        &self,
        port: u16,
        liveness: (u64, u64),
        options: ClientOptions,
        ssh_options: &[&str],
    ) -> (Client, tokio::sync::mpsc::UnboundedReceiver<ClientEvent>) {
        std::env::set_var(
            "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
            musl_host_binary(),
        );
        std::env::set_var("REASONIX_HEARTBEAT_MS", liveness.0.to_string());
        std::env::set_var("REASONIX_DEAD_AFTER_MS", liveness.1.to_string());
        std::env::set_var("REASONIX_IDLE_TIMEOUT_SECS", "120");
        let config = Config::load(&LoadOptions {
            home: Some(self.rx_home()),
            project_dir: Some(self.laptop.path().to_path_buf()),
            ..LoadOptions::default()
        })
        .expect("config");
        let mut opts = SshOptions {
            port: Some(port),
            identity_files: vec![self.key.private.clone()],
            config_file: Some("none".into()),
            home: Some(self.home()),
            ..SshOptions::default()
        };
        opts.push_option("IdentityAgent=none").expect("option");
        for o in ssh_options {
            opts.push_option(o).expect("ssh option");
        }
        let connector = SshConnector::new(
            Destination::parse(&self.dest()).expect("dest"),
            opts,
            Arc::new(NonInteractivePrompter),
        );
        Client::start(
            Arc::new(connector),
            Arc::new(Gateway::new(&config)),
            options,
        )
    }

    /// Pids of the host user's `reasonix-remote daemon` processes (not the attach bridges),
    /// found by owner uid and command line in /proc.
    pub fn daemon_pids(&self) -> Vec<i32> {
        let mut out = Vec::new();
        let Ok(rd) = std::fs::read_dir("/proc") else {
            return out;
        };
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let owned = std::fs::read_to_string(e.path().join("status"))
                .ok()
                .and_then(|st| {
                    st.lines()
                        .find(|l| l.starts_with("Uid:"))
                        .and_then(|l| l.split_whitespace().nth(1))
                        .and_then(|u| u.parse::<u32>().ok())
                })
                == Some(self.user.uid);
            if !owned {
                continue;
            }
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let argv: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            let is_remote = argv.first().is_some_and(|a0| {
                String::from_utf8_lossy(a0)
                    .rsplit('/')
                    .next()
                    .is_some_and(|n| n.starts_with("reasonix-remote"))
            });
            if is_remote && argv.get(1) == Some(&&b"daemon"[..]) {
                out.push(pid);
            }
        }
        out
    }

    /// The daemon state marker (`daemon.json`: pid, start time, clean shutdown) on the host.
    pub fn daemon_marker(&self) -> Option<Value> {
        let mut stack = vec![self.user.home.join(".reasonix")];
        while let Some(p) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&p) else {
                continue;
            };
            for e in rd.flatten() {
                let path = e.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.file_name().is_some_and(|n| n == "daemon.json") {
                    return std::fs::read(&path)
                        .ok()
                        .and_then(|b| serde_json::from_slice(&b).ok());
                }
            }
        }
        None
    }

    /// The session journal files on the host (JSONL), any workspace.
    pub fn host_journals(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut stack = vec![self.user.home.join(".reasonix")];
        while let Some(p) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&p) else {
                continue;
            };
            for e in rd.flatten() {
                let path = e.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|x| x == "jsonl")
                    && path.components().any(|c| c.as_os_str() == "sessions")
                {
                    out.push(path);
                }
            }
        }
        out
    }
}

/// One line the client printed, with the time it was read.
#[derive(Debug, Clone)]
pub struct Line {
    pub at: Instant,
    pub value: Value,
}

/// A running `reasonix` client whose JSON lines are collected as they arrive.
pub struct ClientProc {
    pub child: Child,
    lines: Arc<Mutex<Vec<Line>>>,
    stderr: Arc<Mutex<String>>,
}

impl ClientProc {
    fn spawn(mut cmd: Command) -> ClientProc {
        let mut child = cmd.spawn().expect("spawn reasonix");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let out = child.stdout.take().expect("stdout");
        let l = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|_| serde_json::json!({"type": "raw", "text": line}));
                l.lock_or_recover().push(Line {
                    at: Instant::now(),
                    value,
                });
            }
        });
        let err = child.stderr.take().expect("stderr");
        let e = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                let mut s = e.lock_or_recover();
                s.push_str(&line);
                s.push('\n');
            }
        });
        ClientProc {
            child,
            lines,
            stderr,
        }
    }

    pub fn lines(&self) -> Vec<Line> {
        self.lines.lock_or_recover().clone()
    }

    pub fn values(&self) -> Vec<Value> {
        self.lines().into_iter().map(|l| l.value).collect()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock_or_recover().clone()
    }

    /// Everything printed so far, for failure messages.
    pub fn transcript(&self) -> String {
        let mut s = String::new();
        for v in self.values() {
            s.push_str(&v.to_string());
            s.push('\n');
        }
        s.push_str("--- stderr ---\n");
        s.push_str(&self.stderr());
        s
    }

    /// Wait (polling, hang guard `timeout`) for the first line at index >= `from` matching
    /// `pred`; returns its index and the line.
    pub async fn wait_for(
        &mut self,
        from: usize,
        timeout: Duration,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> (usize, Line) {
        let deadline = Instant::now() + timeout;
        loop {
            let lines = self.lines();
            if let Some((i, l)) = lines
                .iter()
                .enumerate()
                .skip(from)
                .find(|(_, l)| pred(&l.value))
            {
                return (i, l.clone());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                // Give the reader thread a moment to drain the pipe.
                tokio::time::sleep(Duration::from_millis(200)).await;
                if let Some((i, l)) = self
                    .lines()
                    .iter()
                    .enumerate()
                    .skip(from)
                    .find(|(_, l)| pred(&l.value))
                {
                    return (i, l.clone());
                }
                panic!(
                    "client exited ({status}) before {what}:\n{}",
                    self.transcript()
                );
            }
            if Instant::now() > deadline {
                panic!("no {what} within {timeout:?}:\n{}", self.transcript());
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Wait for the process to exit (hang guard `timeout`), then for its output to drain.
    pub async fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                tokio::time::sleep(Duration::from_millis(200)).await;
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "client still running after {timeout:?}:\n{}",
                    self.transcript()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `kill -9` the client (the process itself: `ip netns exec` exec'd into it).
    pub fn kill9(&mut self) {
        // SAFETY: kill(2) of our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

impl Drop for ClientProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Concatenated `text` events.
pub fn text_of(values: &[Value]) -> String {
    values
        .iter()
        .filter(|e| e["type"] == "text")
        .filter_map(|e| e["text"].as_str())
        .collect()
}

pub fn is_conn(v: &Value, state: &str) -> bool {
    v["type"] == "connection" && v["state"] == state
}

pub fn is_resumed(v: &Value) -> bool {
    is_conn(v, "connected") && v["resumed"] == true
}

/// Journal events (parsed JSON lines) of one journal file.
pub fn journal_events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}
