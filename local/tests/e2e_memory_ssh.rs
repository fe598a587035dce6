//! Memory over SSH: a real OpenSSH sshd, the static `reasonix-remote` installed over SFTP,
//! the scripted mock provider. A global fact on the laptop is recalled in a session on a host
//! workspace; a global fact that was not recalled appears in no file on the host.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::path::{Path, PathBuf};
use std::process::Command;

use reasonix_testkit::mock_provider::{MockProvider, MockReply};
use reasonix_testkit::sshd::{ClientKey, Sshd, SshdConfig, TestUser, UserOptions};
use serde_json::Value;

const KEY: &str = "sk-test-MEMSSH-0a1b2c3d";

fn musl_host_binary() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let candidates = [
        root.join("x86_64-unknown-linux-musl/debug/reasonix-remote"),
        root.join("debug/reasonix-remote-x86_64-unknown-linux-musl"),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!("no static host binary ({candidates:?}); run `cargo build -p reasonix-remote --target x86_64-unknown-linux-musl`")
        })
}

fn files_containing(root: &Path, needle: &str) -> Vec<PathBuf> {
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
        } else if meta.is_file() {
            if let Ok(b) = std::fs::read(&p) {
                if b.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                    hits.push(p);
                }
            }
        }
    }
    hits
}

fn global_fact(id: &str, body: &str) -> String {
    format!("---\nid: {id}\nrevision: 1\ntype: user\nscope: global\ncreated: 2026-12-01T00:00:00Z\n---\n{body}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_fact_is_recalled_on_a_host_and_an_unrecalled_one_leaves_no_trace() {
    let sshd = Sshd::start(SshdConfig::default()).expect("sshd");
    let user = TestUser::create(&UserOptions::default()).expect("user");
    user.write_file("ws2/README.md", "# ws2\n", 0o644)
        .expect("ws2");
    let mock = MockProvider::start(vec![MockReply::text(&["Kakoune."])]).await;

    // The laptop: ssh key, config, and two global facts in its own store.
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let ssh = home.join(".ssh");
    std::fs::create_dir_all(&ssh).expect("ssh dir");
    std::fs::write(ssh.join("known_hosts"), sshd.known_hosts_line()).expect("known_hosts");
    let key = ClientKey::generate(&ssh, "id_e2e", None).expect("key");
    let rx = dir.path().join("rxhome");
    std::fs::create_dir_all(rx.join("memory")).expect("memory");
    std::fs::write(
        rx.join("config.toml"),
        format!(
            "default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"RX_SSH_KEY\"\n",
            mock.base_url()
        ),
    )
    .expect("config");
    std::fs::write(
        rx.join("memory/g-editor.md"),
        global_fact(
            "g-editor",
            "The user reviews diffs in the kakoune-narwhal-88 editor.",
        ),
    )
    .expect("fact");
    std::fs::write(
        rx.join("memory/g-coffee.md"),
        global_fact(
            "g-coffee",
            "The user drinks espresso-otter-51 before standups.",
        ),
    )
    .expect("fact");
    user.authorize(&key.public).expect("authorize");
    let dest = format!("{}@127.0.0.1:ws2", user.name);

    let out = tokio::task::block_in_place(|| {
        Command::new(env!("CARGO_BIN_EXE_reasonix"))
            .args([
                "run",
                "--ssh",
                &dest,
                "--json",
                "which editor do I review diffs in?",
            ])
            .args(["-p", &sshd.port().to_string(), "-F", "none"])
            .arg("-i")
            .arg(&key.private)
            .args(["-o", "IdentityAgent=none"])
            .current_dir(dir.path())
            .env("HOME", &home)
            .env("REASONIX_HOME", &rx)
            .env("RX_SSH_KEY", KEY)
            .env(
                "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
                musl_host_binary(),
            )
            .env_remove("SSH_AUTH_SOCK")
            .output()
            .expect("run reasonix")
    });
    assert!(
        out.status.success(),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let reqs = mock.requests();
    let msgs = reqs.last().expect("a request").messages();
    let user_msg: String = msgs
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str().map(str::to_string))
        .unwrap_or_default();
    assert!(
        user_msg.contains("<recalled-memory") && user_msg.contains("kakoune-narwhal-88"),
        "{user_msg}"
    );
    assert!(!user_msg.contains("espresso-otter-51"), "{user_msg}");
    assert!(
        !msgs[0].to_string().contains("kakoune"),
        "never in the system prompt"
    );
    let _: Vec<Value> = msgs;
    // The host: the recalled fact is part of the conversation's journal; the other one is in
    // no file of the host user's home (state, journals, logs, binaries) nor the workspace.
    assert!(!files_containing(&user.home, "kakoune-narwhal-88").is_empty());
    assert_eq!(
        files_containing(&user.home, "espresso-otter-51"),
        Vec::<PathBuf>::new()
    );
}

/// Runs `reasonix ARGS --ssh DEST` with the test's ssh options and `EDITOR`.
fn reasonix_ssh(
    dir: &Path,
    home: &Path,
    rx: &Path,
    ssh: (&str, u16, &Path),
    editor: &str,
    args: &[&str],
) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .args(args)
        .args(["--ssh", ssh.0, "-p", &ssh.1.to_string(), "-F", "none"])
        .arg("-i")
        .arg(ssh.2)
        .args(["-o", "IdentityAgent=none"])
        .current_dir(dir)
        .env("HOME", home)
        .env("REASONIX_HOME", rx)
        .env("RX_SSH_KEY", KEY)
        .env("EDITOR", editor)
        .env_remove("VISUAL")
        .env(
            "REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL",
            musl_host_binary(),
        )
        .env_remove("SSH_AUTH_SOCK")
        .output()
        .expect("run reasonix")
}

fn text(o: &std::process::Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_cli_over_ssh_adds_edits_and_forgets_in_the_hosts_project_store() {
    let sshd = Sshd::start(SshdConfig::default()).expect("sshd");
    let user = TestUser::create(&UserOptions::default()).expect("user");
    user.write_file("ws3/README.md", "# ws3\n", 0o644)
        .expect("ws3");
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let ssh = home.join(".ssh");
    std::fs::create_dir_all(&ssh).expect("ssh dir");
    std::fs::write(ssh.join("known_hosts"), sshd.known_hosts_line()).expect("known_hosts");
    let key = ClientKey::generate(&ssh, "id_e2e", None).expect("key");
    let rx = dir.path().join("rxhome");
    std::fs::create_dir_all(&rx).expect("rx");
    std::fs::write(
        rx.join("config.toml"),
        "default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"RX_SSH_KEY\"\n",
    )
    .expect("config");
    user.authorize(&key.public).expect("authorize");
    let dest = format!("{}@127.0.0.1:ws3", user.name);
    let target = (dest.as_str(), sshd.port(), key.private.as_path());
    let run = |editor: &str, args: &[&str]| {
        tokio::task::block_in_place(|| reasonix_ssh(dir.path(), &home, &rx, target, editor, args))
    };

    // add: the fact lands in the host's project store, not on the laptop.
    let out = run(
        "false",
        &[
            "memory",
            "add",
            "Releases are cut from the trunk-osprey-31 branch.",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let on_host = files_containing(&user.home, "trunk-osprey-31");
    assert_eq!(on_host.len(), 1, "{on_host:?}");
    let fact_path = on_host[0].clone();
    assert!(
        fact_path
            .to_string_lossy()
            .contains(".reasonix/project-memory/")
            && fact_path.ends_with(format!("{id}.md")),
        "{fact_path:?}"
    );
    assert!(files_containing(&rx, "trunk-osprey-31").is_empty());

    // list and search read the host's store.
    let out = run("false", &["memory", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&id),
        "{}",
        text(&out)
    );
    let out = run("false", &["memory", "search", "osprey"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("trunk-osprey-31"),
        "{}",
        text(&out)
    );

    // edit with a scripted $EDITOR: saved as revision 2 on the host.
    let out = run(
        "sed -i s/trunk-osprey-31/main-osprey-32/",
        &["memory", "edit", &id],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("revision 2"));
    let now = std::fs::read_to_string(&fact_path).unwrap();
    assert!(
        now.contains("main-osprey-32") && now.contains("revision: 2"),
        "{now}"
    );

    // A malformed edit is refused with its line named; the fact stays as it was.
    let out = run(
        "sed -i s/scope:.project/scope:.everywhere/",
        &["memory", "edit", &id],
    );
    assert!(!out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("front matter line 5")
            && err.contains("everywhere")
            && err.contains("unchanged"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&fact_path).unwrap(), now);

    // forget archives it on the host.
    let out = run("false", &["memory", "forget", &id]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!fact_path.exists());
    let archived = files_containing(&user.home, "main-osprey-32");
    assert!(
        archived
            .iter()
            .any(|p| p.to_string_lossy().contains("/archive/")),
        "{archived:?}"
    );
    // --global stays on the laptop: it cannot be combined with --ssh.
    let out = run("false", &["memory", "list", "--global"]);
    assert!(!out.status.success(), "{}", text(&out));
}
