//! Containers as workspaces over the exec transport, with a real container engine (Podman,
//! installed by `.ci/run`): an image built offline from a minimal root filesystem (the static
//! busybox and nothing else: no bash, no git), `reasonix run --podman CTR:/path` installing
//! the host binary through the exec stream and running a turn whose bash call is sandboxed
//! (the mechanism named in the session line), a dropped `podman exec` link and a container
//! killed and restarted mid-tool, each taken as a link drop with no tool call run twice.
//!
//! The `kubectl` shorthand is checked by its argv (no cluster here): a `kubectl` on PATH that
//! records its arguments. Build first: `cargo build --workspace --bins && cargo build -p
//! reasonix-remote --target x86_64-unknown-linux-musl`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use serde_json::{json, Value};

const IMAGE: &str = "localhost/reasonix-test-mini:1";

fn podman(args: &[&str]) -> Output {
    Command::new("podman")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("podman is not installed ({e}); run .ci/run"))
}

fn podman_ok(args: &[&str]) -> String {
    let out = podman(args);
    assert!(
        out.status.success(),
        "podman {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The minimal image: `/bin/busybox` (static) with its applets, `/tmp`, `/root`, a passwd
/// file and the workspace `/work/repo`; imported from a tarball, no registry involved.
fn ensure_image() {
    if podman(&["image", "exists", IMAGE]).status.success() {
        return;
    }
    let busybox = Path::new("/bin/busybox");
    assert!(
        busybox.is_file(),
        "busybox-static is not installed; run .ci/run"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("rootfs");
    for d in ["bin", "tmp", "root", "etc", "work/repo"] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    std::fs::copy(busybox, root.join("bin/busybox")).expect("copy busybox");
    let list = Command::new(busybox).arg("--list").output().expect("list");
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        if applet != "busybox" && !applet.is_empty() {
            std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).expect("link");
        }
    }
    std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").expect("passwd");
    std::fs::write(root.join("etc/group"), "root:x:0:\n").expect("group");
    let tar = dir.path().join("rootfs.tar");
    let st = Command::new("tar")
        .arg("-C")
        .arg(&root)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .expect("tar");
    assert!(st.success());
    // Parallel tests may import at once: the same content under the same tag is harmless.
    podman_ok(&["import", tar.to_str().expect("utf8"), IMAGE]);
}

/// A running container of the minimal image, removed on drop.
struct Container {
    name: String,
}

impl Container {
    fn start(tag: &str) -> Container {
        ensure_image();
        let name = format!("rx-{tag}-{}-{:x}", std::process::id(), rand_u32());
        podman_ok(&["run", "-d", "--name", &name, IMAGE, "/bin/sleep", "100000"]);
        Container { name }
    }

    fn sh(&self, script: &str) -> Output {
        podman(&["exec", "-i", &self.name, "sh", "-c", script])
    }

    fn read(&self, path: &str) -> Option<String> {
        let out = self.sh(&format!("cat {path}"));
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).to_string())
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman(&["rm", "-f", "-t", "0", &self.name]);
    }
}

fn rand_u32() -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    t ^ std::process::id().rotate_left(16)
}

struct Laptop {
    _dir: tempfile::TempDir,
    home: PathBuf,
    cwd: PathBuf,
}

fn laptop(base_url: &str) -> Laptop {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("rxhome");
    let cwd = dir.path().join("cwd");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&cwd).expect("cwd");
    std::fs::write(
        home.join("config.toml"),
        format!(
            "default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{base_url}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"RX_CT_KEY\"\n"
        ),
    )
    .expect("config");
    Laptop {
        _dir: dir,
        home,
        cwd,
    }
}

fn reasonix(l: &Laptop, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_reasonix"));
    c.args(args)
        .current_dir(&l.cwd)
        .env("REASONIX_HOME", &l.home)
        .env("RX_CT_KEY", "sk-container")
        .env("REASONIX_IDLE_TIMEOUT_SECS", "5")
        .env("REASONIX_HEARTBEAT_MS", "500")
        .env("REASONIX_DEAD_AFTER_MS", "3000")
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn show(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn bash_call(id: &str, command: &str) -> MockReply {
    MockReply::tool_calls(
        vec![MockToolCall::new(
            id,
            "bash",
            &json!({ "command": command }).to_string(),
        )],
        4,
    )
}

fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installs_through_the_stream_and_runs_a_sandboxed_turn_in_a_minimal_image() {
    let ctr = Container::start("turn");
    let mock = MockProvider::start(vec![
        bash_call(
            "b1",
            "echo \"$(id -u) in $(pwd)\" > out.txt; echo escape > /root/escape.txt 2>/dev/null && echo wrote-outside || echo outside-blocked",
        ),
        MockReply::text(&["done"]),
    ])
    .await;
    let l = laptop(&mock.base_url());
    let spec = format!("{}:/work/repo", ctr.name);
    let out = tokio::task::spawn_blocking({
        let mut c = reasonix(&l, &["run", "--json", "--yolo", "--podman", &spec, "go"]);
        move || c.output().expect("run")
    })
    .await
    .expect("join");
    assert!(out.status.success(), "{}", show(&out));
    let events = json_lines(&out.stdout);
    let session = events
        .iter()
        .find(|e| e["type"] == "session")
        .unwrap_or_else(|| panic!("a session line: {}", show(&out)));
    let sandbox = session["sandbox"].as_str().unwrap_or("");
    assert!(
        sandbox.starts_with("landlock") || sandbox.starts_with("bwrap"),
        "the bash tool is sandboxed and the session names how: {sandbox:?}"
    );
    // The binary went through the exec stream (no SFTP in a container) and verified.
    let bin = ctr.sh("ls /root/.reasonix/remote/bin/").stdout;
    assert!(
        String::from_utf8_lossy(&bin).contains("reasonix-remote-"),
        "installed: {}",
        String::from_utf8_lossy(&bin)
    );
    assert_eq!(
        ctr.read("/work/repo/out.txt").as_deref(),
        Some("0 in /work/repo\n"),
        "the bash call ran in the workspace"
    );
    assert!(
        ctr.read("/root/escape.txt").is_none(),
        "the sandbox kept the bash call from writing outside the workspace"
    );
    let reqs = mock.requests();
    let last = reqs.last().expect("requests").messages();
    assert!(
        last.iter().any(|m| m["role"] == "tool"
            && m["content"]
                .as_str()
                .unwrap_or("")
                .contains("outside-blocked")),
        "the tool result says the write outside failed: {last:?}"
    );

    // The warm path: the same build is found, nothing is uploaded again.
    mock.push(vec![MockReply::text(&["again"])]);
    let before = ctr
        .sh("ls -l --full-time /root/.reasonix/remote/bin/")
        .stdout;
    let out = tokio::task::spawn_blocking({
        let mut c = reasonix(
            &l,
            &[
                "run",
                "--json",
                "--yolo",
                "--podman",
                &spec,
                "--continue",
                "again",
            ],
        );
        move || c.output().expect("run")
    })
    .await
    .expect("join");
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(
        before,
        ctr.sh("ls -l --full-time /root/.reasonix/remote/bin/")
            .stdout,
        "no second install"
    );
}

/// The local pid of the `podman exec -i CTR sh -s` that carries the link of `reasonix`
/// `root` (once the bash call runs, the install's short scripts are over).
fn link_process(root: u32, ctr: &str) -> Option<i32> {
    let mut found = None;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let words: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|w| String::from_utf8_lossy(w).to_string())
            .collect();
        let ppid = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                let after = s.rsplit_once(')')?.1.to_string();
                after.split_whitespace().nth(1)?.parse::<u32>().ok()
            });
        if ppid == Some(root)
            && words.first().is_some_and(|w| w.ends_with("podman"))
            && words.iter().any(|w| w == ctr)
            && words.iter().any(|w| w == "-s")
        {
            found = Some(pid);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_exec_link_mid_tool_is_a_link_drop_and_the_turn_completes() {
    let ctr = Container::start("drop");
    let mock = MockProvider::start(vec![
        bash_call("s1", "echo ran >> counter.txt; sleep 4; echo slept-through"),
        MockReply::text(&["finished"]),
    ])
    .await;
    let l = laptop(&mock.base_url());
    let spec = format!("{}:/work/repo", ctr.name);
    let child = reasonix(&l, &["run", "--json", "--yolo", "--podman", &spec, "go"])
        .spawn()
        .expect("spawn");
    let root = child.id();
    wait_for("the bash call to start", 120, || {
        ctr.read("/work/repo/counter.txt").is_some()
    });
    // Polled: on a loaded machine the link may be between two `podman exec` processes (a
    // reconnect after missed heartbeats) at the moment the call starts.
    let mut link = None;
    wait_for("the link's podman exec process", 60, || {
        link = link_process(root, &ctr.name);
        link.is_some()
    });
    let link = link.expect("found");
    // Like a dropped `kubectl exec` connection: the local end of the link dies.
    unsafe {
        libc::kill(link, libc::SIGKILL);
    }
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().expect("wait"))
        .await
        .expect("join");
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("finished"),
        "{}",
        show(&out)
    );
    assert_eq!(
        ctr.read("/work/repo/counter.txt").as_deref(),
        Some("ran\n"),
        "the command ran exactly once"
    );
    assert_eq!(
        mock.request_count(),
        2,
        "one request per step, none repeated"
    );
    let last = mock.requests().last().expect("requests").messages();
    assert!(last.iter().any(|m| m["role"] == "tool"
        && m["content"]
            .as_str()
            .unwrap_or("")
            .contains("slept-through")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_killed_and_restarted_mid_tool_reconnects_and_runs_nothing_twice() {
    let ctr = Container::start("kill");
    let mock = MockProvider::start(vec![
        bash_call("k1", "echo ran >> counter.txt; sleep 30"),
        MockReply::text(&["recovered"]),
    ])
    .await;
    let l = laptop(&mock.base_url());
    let spec = format!("{}:/work/repo", ctr.name);
    let child = reasonix(&l, &["run", "--json", "--yolo", "--podman", &spec, "go"])
        .spawn()
        .expect("spawn");
    wait_for("the bash call to start", 120, || {
        ctr.read("/work/repo/counter.txt").is_some()
    });
    podman_ok(&["kill", &ctr.name]);
    podman_ok(&["wait", &ctr.name]);
    podman_ok(&["start", &ctr.name]);
    // The client reconnects by running `podman exec` again: a new daemon in the restarted
    // container resumes the session from its journal (kept in the container's filesystem)
    // and reports the turn whose daemon died as interrupted.
    let first = tokio::task::spawn_blocking(move || child.wait_with_output().expect("wait"))
        .await
        .expect("join");
    let first_out = String::from_utf8_lossy(&first.stdout).to_string();
    assert!(first_out.contains("interrupted"), "{}", show(&first));
    let out = tokio::task::spawn_blocking({
        let mut c = reasonix(
            &l,
            &[
                "run",
                "--json",
                "--yolo",
                "--podman",
                &spec,
                "--continue",
                "carry on",
            ],
        );
        move || c.output().expect("run")
    })
    .await
    .expect("join");
    assert!(out.status.success(), "{}", show(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("recovered"));
    assert_eq!(
        ctr.read("/work/repo/counter.txt").as_deref(),
        Some("ran\n"),
        "the command ran exactly once"
    );
    let last = mock.requests().last().expect("requests").messages();
    assert!(
        last.iter()
            .any(|m| m["role"] == "tool"
                && m["content"].as_str().unwrap_or("").contains("interrupted")),
        "the interrupted call is reported to the model, not run again: {last:?}"
    );
}

/// A `kubectl` that records its argv and fails like an unreachable cluster.
fn fake_kubectl(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    let log = dir.join("kubectl.argv");
    let script = format!(
        "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done >> {log}\necho --- >> {log}\necho 'error: You must be logged in to the server (Unauthorized)' >&2\nexit 1\n",
        log = log.display()
    );
    let path = bin.join("kubectl");
    std::fs::write(&path, script).expect("write");
    let mut perms = std::fs::metadata(&path).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).expect("chmod");
    log
}

#[test]
fn kube_runs_kubectl_exec_with_namespace_container_and_sh() {
    let l = laptop("http://127.0.0.1:9");
    let out = reasonix(
        &l,
        &[
            "kube",
            "-n",
            "dev",
            "-c",
            "main",
            "ws-7:/src/app",
            "--print-command",
        ],
    )
    .output()
    .expect("run");
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "kubectl exec -i -n dev ws-7 -c main -- sh -s\nworkspace /src/app\n"
    );
    // `run --kube` really runs that argv (through a recording kubectl), and the cluster's
    // error reaches the user.
    let log = fake_kubectl(&l.cwd);
    let path = format!(
        "{}:{}",
        l.cwd.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = reasonix(
        &l,
        &[
            "run",
            "--kube",
            "ws-7:/src/app",
            "--kube-namespace",
            "dev",
            "--kube-container",
            "main",
            "hi",
        ],
    )
    .env("PATH", path)
    .output()
    .expect("run");
    assert!(!out.status.success(), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Unauthorized"), "{}", show(&out));
    let argv = std::fs::read_to_string(&log).expect("kubectl ran");
    let first = argv.split("---\n").next().unwrap_or("");
    assert_eq!(
        first, "exec\n-i\n-n\ndev\nws-7\n-c\nmain\n--\nsh\n-s\n",
        "{argv}"
    );
}

/// `reasonix run --ssh root@HOST --container CTR:/path`: the test sshd's host runs `podman
/// exec -i CTR sh …` for every script and for the link, the host binary is installed inside
/// the container (through the stream), and the turn's bash call runs there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_on_an_ssh_host_is_reached_through_the_test_sshd() {
    use reasonix_testkit::sshd::{ClientKey, Sshd, SshdConfig};
    let ctr = Container::start("ssh");
    // Root may log in with this test's key only (the engine is root's Podman). The key file
    // sits in a root-only folder, as sshd's StrictModes wants.
    let keys_dir = PathBuf::from(format!(
        "/var/lib/reasonix-tests/{}-{:x}",
        std::process::id(),
        rand_u32()
    ));
    std::fs::create_dir_all(&keys_dir).expect("keys dir");
    std::fs::set_permissions(
        &keys_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod");
    struct Cleanup(PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _cleanup = Cleanup(keys_dir.clone());
    let sshd = Sshd::start(SshdConfig {
        extra: vec![
            "Match User root".into(),
            "    PermitRootLogin prohibit-password".into(),
            format!(
                "    AuthorizedKeysFile {}",
                keys_dir.join("root.keys").display()
            ),
        ],
        ..SshdConfig::default()
    })
    .expect("sshd");
    let mock = MockProvider::start(vec![
        bash_call("b1", "echo \"in $(pwd) of $(hostname)\" > out.txt; echo ok"),
        MockReply::text(&["done"]),
    ])
    .await;
    let l = laptop(&mock.base_url());
    let ssh_dir = l.home.join("dot-home/.ssh");
    std::fs::create_dir_all(&ssh_dir).expect("ssh dir");
    std::fs::write(ssh_dir.join("known_hosts"), sshd.known_hosts_line()).expect("known_hosts");
    let key = ClientKey::generate(&ssh_dir, "id_ctr", None).expect("key");
    std::fs::write(keys_dir.join("root.keys"), &key.public).expect("authorize");
    let spec = format!("{}:/work/repo", ctr.name);
    let port = sshd.port().to_string();
    let key_path = key.private.to_string_lossy().to_string();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--json",
            "--yolo",
            "--ssh",
            "root@127.0.0.1",
            "--container",
            &spec,
            "--engine",
            "podman",
            "-p",
            &port,
            "-F",
            "none",
            "-i",
            &key_path,
            "-o",
            "IdentityAgent=none",
        ];
        args.extend_from_slice(extra);
        let mut c = reasonix(&l, &args);
        c.env("HOME", l.home.join("dot-home"))
            .env_remove("SSH_AUTH_SOCK");
        c
    };
    let out = tokio::task::spawn_blocking({
        let mut c = run(&["go"]);
        move || c.output().expect("run")
    })
    .await
    .expect("join");
    assert!(
        out.status.success(),
        "{}\nsshd log:\n{}",
        show(&out),
        sshd.log()
    );
    let events = json_lines(&out.stdout);
    assert!(
        events.iter().any(|e| e["type"] == "session"),
        "a session line: {}",
        show(&out)
    );
    let hostname = ctr.sh("hostname").stdout;
    assert_eq!(
        ctr.read("/work/repo/out.txt"),
        Some(format!(
            "in /work/repo of {}",
            String::from_utf8_lossy(&hostname)
        )),
        "the bash call ran inside the container"
    );
    let bin = ctr.sh("ls /root/.reasonix/remote/bin/").stdout;
    assert!(
        String::from_utf8_lossy(&bin).contains("reasonix-remote-"),
        "installed inside the container: {}",
        String::from_utf8_lossy(&bin)
    );
    // The session lives in the container: `--continue` finds it on the warm path.
    mock.push(vec![MockReply::text(&["again"])]);
    let out = tokio::task::spawn_blocking({
        let mut c = run(&["--continue", "again"]);
        move || c.output().expect("run")
    })
    .await
    .expect("join");
    assert!(out.status.success(), "{}", show(&out));
    let reqs = mock.requests();
    let last = reqs.last().expect("requests").messages();
    assert!(
        last.iter()
            .any(|m| m["role"] == "tool" && m["content"].as_str().unwrap_or("").contains("ok")),
        "the continued session carries the first turn: {last:?}"
    );

    // Without --ssh, --container is refused with what to use instead.
    let out = reasonix(&l, &["run", "--container", &spec, "hi"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--podman CTR:/path"),
        "{}",
        show(&out)
    );
}
