//! Hostile workspace paths end to end over SSH: the real `reasonix run --ssh` against a real
//! OpenSSH sshd, host users whose login shells are bash and tcsh, and workspace folders
//! named with spaces, quotes, `$(...)`, backticks, a leading `-`, non-ASCII, `;` and `*`.
//! In each one a turn writes a file with `write_file` and another with `bash`; both must
//! land in that folder on the host, and nothing in a name may ever run as a command.

use std::path::{Path, PathBuf};
use std::process::Command;

use reasonix_testkit::mock_provider::{MockProvider, MockReply, MockToolCall};
use reasonix_testkit::sshd::{ClientKey, Sshd, SshdConfig, TestUser, UserOptions};
use serde_json::{json, Value};

/// Folder names under the host user's home. Every `$(...)` and backtick would create a
/// `pwned*` file if a shell ever evaluated the name.
const HOSTILE: &[&str] = &[
    "with space",
    "it's",
    "say \"hi\"",
    "$(touch pwned-dollar)",
    "`touch pwned-backtick`",
    "-leading-dash",
    "ünïcødé 目录",
    "semi;colon",
    "star*",
    "all of 'it' \"$(touch pwned-mix)\" `touch pwned-mix2`; -x *",
];

fn musl_host_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    [
        root.join("x86_64-unknown-linux-musl/debug/reasonix-remote"),
        root.join("debug/reasonix-remote-x86_64-unknown-linux-musl"),
        root.join("x86_64-unknown-linux-musl/release/reasonix-remote"),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .expect("run `cargo build -p reasonix-remote --target x86_64-unknown-linux-musl` first")
}

struct Laptop {
    dir: tempfile::TempDir,
    key: ClientKey,
}

fn laptop(sshd: &Sshd, base_url: &str) -> Laptop {
    let dir = tempfile::tempdir().expect("tempdir");
    let ssh = dir.path().join("home/.ssh");
    std::fs::create_dir_all(&ssh).expect("ssh dir");
    std::fs::write(ssh.join("known_hosts"), sshd.known_hosts_line()).expect("known_hosts");
    let key = ClientKey::generate(&ssh, "id_paths", None).expect("key");
    let rx = dir.path().join("rxhome");
    std::fs::create_dir_all(&rx).expect("rxhome");
    std::fs::write(
        rx.join("config.toml"),
        format!(
            "default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{base_url}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"RX_PATHS_KEY\"\n"
        ),
    )
    .expect("config");
    Laptop { dir, key }
}

fn run_over_ssh(l: &Laptop, sshd: &Sshd, dest: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .args(["run", "--ssh", dest, "--json", "--yolo", "write the files"])
        .args(["-p", &sshd.port().to_string(), "-F", "none"])
        .arg("-i")
        .arg(&l.key.private)
        .args(["-o", "IdentityAgent=none"])
        .current_dir(l.dir.path())
        .env("HOME", l.dir.path().join("home"))
        .env("REASONIX_HOME", l.dir.path().join("rxhome"))
        .env("RX_PATHS_KEY", "sk-paths")
        .env(
            "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
            musl_host_binary(),
        )
        .env_remove("SSH_AUTH_SOCK")
        .output()
        .expect("run reasonix")
}

/// Every file under `root` named `name` (to catch a file written to the wrong folder).
fn find_named(root: &Path, name: &str) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        } else if p
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(name))
        {
            hits.push(p);
        }
    }
    hits
}

/// One turn in `~/<folder>` (relative form, or absolute when `absolute`); returns a line for
/// the matrix, or why it failed.
fn one_path(
    sshd: &Sshd,
    l: &Laptop,
    mock: &MockProvider,
    user: &TestUser,
    folder: &str,
    absolute: bool,
) -> Result<(), String> {
    user.write_file(&format!("{folder}/README.md"), "# hostile\n", 0o644)
        .map_err(|e| format!("cannot create the folder: {e}"))?;
    let ws = user.home.join(folder);
    mock.push(vec![
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "w1",
                "write_file",
                &json!({"path": "sub/made-by-write.txt", "content": folder}).to_string(),
            )],
            7,
        ),
        MockReply::tool_calls(
            vec![MockToolCall::new(
                "b1",
                "bash",
                &json!({"command": "pwd > made-by-bash.txt"}).to_string(),
            )],
            7,
        ),
        MockReply::text(&["done"]),
    ]);
    let path = if absolute {
        ws.display().to_string()
    } else {
        folder.to_string()
    };
    let dest = format!("{}@127.0.0.1:{path}", user.name);
    let out = run_over_ssh(l, sshd, &dest);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        return Err(format!(
            "run failed: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let errors: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "tool_finished" && e["is_error"] == true)
        .collect();
    if !errors.is_empty() {
        return Err(format!("a tool failed: {errors:?}"));
    }
    let written = std::fs::read_to_string(ws.join("sub/made-by-write.txt"))
        .map_err(|e| format!("write_file's file is not in the workspace: {e}"))?;
    if written != folder {
        return Err(format!("write_file wrote {written:?}"));
    }
    let pwd = std::fs::read_to_string(ws.join("made-by-bash.txt"))
        .map_err(|e| format!("bash's file is not in the workspace: {e}"))?;
    let real = std::fs::canonicalize(&ws).map_err(|e| e.to_string())?;
    if Path::new(pwd.trim_end_matches('\n')) != real {
        return Err(format!("bash ran in {pwd:?}, not {}", real.display()));
    }
    Ok(())
}

fn matrix(shell: &str) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mock = rt.block_on(MockProvider::start(Vec::new()));
    let sshd = Sshd::start(SshdConfig {
        allow_tcp_forwarding: false,
        allow_stream_local_forwarding: false,
        ..SshdConfig::default()
    })
    .expect("sshd");
    let user = TestUser::create(&UserOptions {
        shell: Some(shell.into()),
        ..UserOptions::default()
    })
    .expect("user");
    let l = laptop(&sshd, &mock.base_url());
    user.authorize(&l.key.public).expect("authorize");

    let mut failures = Vec::new();
    let mut cases: Vec<(&str, bool)> = HOSTILE.iter().map(|f| (*f, false)).collect();
    // The absolute form too, for the name that has everything in it.
    cases.push((HOSTILE[HOSTILE.len() - 1], true));
    for (folder, absolute) in cases {
        let how = if absolute { "absolute" } else { "relative" };
        match one_path(&sshd, &l, &mock, &user, folder, absolute) {
            Ok(()) => eprintln!("{shell}: ok   {how:8} {folder:?}"),
            Err(e) => {
                eprintln!("{shell}: FAIL {how:8} {folder:?}: {e}");
                failures.push(format!("{how} {folder:?}: {e}"));
            }
        }
    }
    let pwned = find_named(&user.home, "pwned");
    let strays: Vec<PathBuf> = find_named(&user.home, "made-by-")
        .into_iter()
        .filter(|p| !HOSTILE.iter().any(|f| p.starts_with(user.home.join(f))))
        .collect();
    drop(rt);
    assert!(
        pwned.is_empty(),
        "a folder name ran as a command: {pwned:?}"
    );
    assert!(
        strays.is_empty(),
        "files landed outside their workspace: {strays:?}"
    );
    assert!(
        failures.is_empty(),
        "{shell}: {} of {} hostile paths failed:\n{}",
        failures.len(),
        HOSTILE.len() + 1,
        failures.join("\n")
    );
}

#[test]
fn hostile_workspace_paths_work_under_a_bash_login_shell() {
    matrix("/bin/bash");
}

#[test]
fn hostile_workspace_paths_work_under_a_tcsh_login_shell() {
    matrix("/usr/bin/tcsh");
}
