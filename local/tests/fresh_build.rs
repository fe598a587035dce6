//! Issue 31: what README's first command builds on a fresh machine reaches hosts.
//!
//! `.ci/fresh_build.sh` makes the build: a clean clone, a rustup home holding the default
//! toolchain without the musl targets, an empty cargo home, the cross gcc and musl-gcc
//! hidden, then `cargo build --release --workspace --bins`. It runs this test with
//! `REASONIX_FRESH_RELEASE_DIR` set to that clone's `target/release`; in the normal suite the
//! test is ignored (it has no such build to test).
//!
//! With that build's own files only (no `REASONIX_REMOTE_BIN*`): the other half of README's
//! first command (`reasonix run "explain this repo"`, local mode), `reasonix run --ssh` to the
//! test sshd's x86_64 host and to a host whose `uname -m` says aarch64 (the aarch64 binary runs
//! there under qemu when binfmt_misc has it, as `.ci/run` sets up); each host ends up with
//! exactly the shipped binary. A copy of `reasonix` with no host binaries beside it fails with
//! the same one command the build prints.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use reasonix_bootstrap::build_hint::build_host_binaries_command;
use reasonix_testkit::mock_provider::{MockProvider, MockReply};
use reasonix_testkit::sshd::{ClientKey, Sshd, SshdConfig, TestUser, UserOptions};
use serde_json::Value;

const KEY: &str = "sk-test-FRESH-7c1d";
const X86: &str = "x86_64-unknown-linux-musl";
const ARM: &str = "aarch64-unknown-linux-musl";

fn release_dir() -> PathBuf {
    let dir = std::env::var_os("REASONIX_FRESH_RELEASE_DIR").map(PathBuf::from).expect(
        "REASONIX_FRESH_RELEASE_DIR: run this test through .ci/fresh_build.sh, which makes the build it tests",
    );
    assert!(
        dir.join("reasonix").is_file(),
        "no reasonix in {}",
        dir.display()
    );
    dir
}

/// SHA-256 of a file, by coreutils' `sha256sum`.
fn sha256_file(p: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(p)
        .output()
        .expect("sha256sum");
    assert!(out.status.success(), "sha256sum {}", p.display());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// ELF machine (`e_machine`) and whether the file asks for a program interpreter (a
/// dynamically linked program does; a static one does not).
fn elf_machine_and_interp(p: &Path) -> (u16, bool) {
    let b = std::fs::read(p).expect("read binary");
    assert_eq!(&b[..5], b"\x7fELF\x02", "{}: not a 64-bit ELF", p.display());
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let u64_at = |o: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[o..o + 8]);
        u64::from_le_bytes(a)
    };
    let (phoff, phentsize, phnum) = (u64_at(0x20) as usize, u16_at(0x36), u16_at(0x38));
    let interp = (0..phnum as usize).any(|i| {
        let h = phoff + i * phentsize as usize;
        u32::from_le_bytes([b[h], b[h + 1], b[h + 2], b[h + 3]]) == 3 // PT_INTERP
    });
    (u16_at(18), interp)
}

fn text_of(stdout: &str) -> String {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "text")
        .filter_map(|e| e["text"].as_str().map(str::to_string))
        .collect()
}

fn show(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A laptop: `$HOME` with the sshd's host key in known_hosts and a client key, and a
/// `REASONIX_HOME` whose only provider is the mock.
struct Laptop {
    dir: tempfile::TempDir,
    key: ClientKey,
}

impl Laptop {
    fn new(sshd: &Sshd, base_url: &str) -> Laptop {
        let dir = tempfile::tempdir().expect("tempdir");
        let ssh = dir.path().join("home/.ssh");
        std::fs::create_dir_all(&ssh).expect("ssh dir");
        std::fs::write(ssh.join("known_hosts"), sshd.known_hosts_line()).expect("known_hosts");
        let key = ClientKey::generate(&ssh, "id_fresh", None).expect("key");
        let rx = dir.path().join("rxhome");
        std::fs::create_dir_all(&rx).expect("rxhome");
        std::fs::write(
            rx.join("config.toml"),
            format!("default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{base_url}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"RX_FRESH_KEY\"\n"),
        )
        .expect("config");
        Laptop { dir, key }
    }

    /// `reasonix run --ssh USER@127.0.0.1:ws --json PROMPT` with the `reasonix` at `exe`.
    fn run_ssh(&self, exe: &Path, sshd: &Sshd, user: &TestUser, prompt: &str) -> Output {
        Command::new(exe)
            .args([
                "run",
                "--json",
                "--ssh",
                &format!("{}@127.0.0.1:ws", user.name),
            ])
            .args(["-p", &sshd.port().to_string(), "-F", "none"])
            .arg("-i")
            .arg(&self.key.private)
            .args(["-o", "IdentityAgent=none", prompt])
            .current_dir(self.dir.path())
            .env("HOME", self.dir.path().join("home"))
            .env("REASONIX_HOME", self.dir.path().join("rxhome"))
            .env("RX_FRESH_KEY", KEY)
            .env_remove("SSH_AUTH_SOCK")
            .env_remove("REASONIX_REMOTE_DIR")
            .env_remove("REASONIX_REMOTE_BIN")
            .env_remove("REASONIX_REMOTE_BIN_X86_64_UNKNOWN_LINUX_MUSL")
            .env_remove("REASONIX_REMOTE_BIN_AARCH64_UNKNOWN_LINUX_MUSL")
            .stdin(Stdio::null())
            .output()
            .expect("run reasonix")
    }
}

/// A host user with a workspace `ws`, whose `uname -m` says `arch` (a shim first on the PATH
/// sshd gives the session; `PermitUserEnvironment` is on in [`sshd`]).
fn host_user(laptop: &Laptop, arch: &str) -> TestUser {
    let user = TestUser::create(&UserOptions::default()).expect("user");
    user.write_file("ws/README.md", "# a workspace\n", 0o644)
        .expect("workspace");
    user.authorize(&laptop.key.public).expect("authorize");
    let shim = user
        .write_file(
            "shim/uname",
            &format!(
                "#!/bin/sh\nif [ \"$1\" = -m ]; then echo {arch}; else exec /bin/uname \"$@\"; fi\n"
            ),
            0o755,
        )
        .expect("uname shim");
    std::fs::set_permissions(
        shim.parent().expect("dir"),
        PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    user.write_file(
        ".ssh/environment",
        &format!(
            "PATH={}:/usr/local/bin:/usr/bin:/bin\n",
            user.home.join("shim").display()
        ),
        0o600,
    )
    .expect("environment");
    user
}

fn sshd() -> Sshd {
    Sshd::start(SshdConfig {
        extra: vec!["PermitUserEnvironment yes".into()],
        ..SshdConfig::default()
    })
    .expect("sshd")
}

/// The files installed on the host, by SHA-256.
fn installed_shas(user: &TestUser) -> Vec<String> {
    let dir = user.home.join(".reasonix/remote/bin");
    let mut out: Vec<String> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with("reasonix-remote-")
                })
                .map(|e| sha256_file(&e.path()))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn binfmt_runs_aarch64() -> bool {
    Path::new("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "tests the fresh release build that .ci/fresh_build.sh makes and then runs this with"]
async fn the_fresh_release_build_reaches_x86_64_and_aarch64_hosts() {
    let dir = release_dir();
    let reasonix = dir.join("reasonix");

    // The shipped host binaries: static programs for their machines, with their copies.
    for (triple, machine) in [(X86, 0x3e), (ARM, 0xb7)] {
        let bin = dir.join(format!("reasonix-remote-{triple}"));
        assert!(bin.is_file(), "the build placed no {}", bin.display());
        assert_eq!(elf_machine_and_interp(&bin), (machine, false), "{triple}");
        for suffix in [".xz", ".zst", ".gz"] {
            let copy = dir.join(format!("reasonix-remote-{triple}{suffix}"));
            assert!(copy.is_file(), "no {}", copy.display());
            let sums = std::fs::read_to_string(
                dir.join(format!("reasonix-remote-{triple}{suffix}.sha256")),
            )
            .expect("copy hashes");
            assert_eq!(
                sums.trim(),
                format!("{} {}", sha256_file(&copy), sha256_file(&bin)),
                "{triple}{suffix}"
            );
        }
    }

    // README's first command, second half: a headless turn in the current folder, local mode
    // (the `reasonix-remote` beside `reasonix` serves it).
    let mock = MockProvider::start(vec![MockReply::text(&["a small ", "repo"])]).await;
    let rig = tempfile::tempdir().expect("tempdir");
    let (home, ws) = (rig.path().join("home"), rig.path().join("ws"));
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::write(
        home.join("config.toml"),
        format!("default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"RX_FRESH_KEY\"\n", mock.base_url()),
    )
    .expect("config");
    let out = tokio::task::block_in_place(|| {
        Command::new(&reasonix)
            .args(["run", "--json", "explain this repo"])
            .current_dir(&ws)
            .env("REASONIX_HOME", &home)
            .env("RX_FRESH_KEY", KEY)
            .env("REASONIX_IDLE_TIMEOUT_SECS", "5")
            .env_remove("REASONIX_REMOTE_BIN")
            .env_remove("XDG_RUNTIME_DIR")
            .stdin(Stdio::null())
            .output()
            .expect("run reasonix")
    });
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(
        text_of(&String::from_utf8_lossy(&out.stdout)),
        "a small repo"
    );

    let sshd = sshd();

    // An x86_64 host gets the shipped x86_64 binary, and it serves the turn.
    let mock = MockProvider::start(vec![MockReply::text(&["hello from ", "x86_64"])]).await;
    let laptop = Laptop::new(&sshd, &mock.base_url());
    let user = host_user(&laptop, "x86_64");
    let out = tokio::task::block_in_place(|| laptop.run_ssh(&reasonix, &sshd, &user, "hi"));
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(
        text_of(&String::from_utf8_lossy(&out.stdout)),
        "hello from x86_64"
    );
    assert_eq!(
        installed_shas(&user),
        vec![sha256_file(&dir.join(format!("reasonix-remote-{X86}")))]
    );
    drop(user);

    // A host whose `uname -m` says aarch64 gets the shipped aarch64 binary.
    let mock = MockProvider::start(vec![MockReply::text(&["hello from ", "aarch64"])]).await;
    let laptop = Laptop::new(&sshd, &mock.base_url());
    let user = host_user(&laptop, "aarch64");
    let out = tokio::task::block_in_place(|| laptop.run_ssh(&reasonix, &sshd, &user, "hi"));
    assert_eq!(
        installed_shas(&user),
        vec![sha256_file(&dir.join(format!("reasonix-remote-{ARM}")))],
        "{}",
        show(&out)
    );
    if binfmt_runs_aarch64() {
        // The kernel runs it there (qemu-user through binfmt_misc): it served the turn.
        assert!(out.status.success(), "{}", show(&out));
        assert_eq!(
            text_of(&String::from_utf8_lossy(&out.stdout)),
            "hello from aarch64"
        );
    } else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI registers qemu-aarch64 with binfmt_misc (.ci/run); without it the aarch64 binary cannot serve the turn"
        );
        eprintln!(
            "\n*** binfmt_misc has no qemu-aarch64 entry: the aarch64 binary was installed and \
             verified on the host but not run there ***\n"
        );
    }
    drop(user);

    // A `reasonix` with no host binaries beside it names the one command that builds them,
    // the same the build prints.
    let alone = tempfile::tempdir().expect("tempdir");
    let lone = alone.path().join("reasonix");
    std::fs::copy(&reasonix, &lone).expect("copy reasonix");
    let mock = MockProvider::start(vec![MockReply::text(&["never"])]).await;
    let laptop = Laptop::new(&sshd, &mock.base_url());
    let user = host_user(&laptop, "x86_64");
    let out = tokio::task::block_in_place(|| laptop.run_ssh(&lone, &sshd, &user, "hi"));
    assert!(!out.status.success(), "{}", show(&out));
    // (`--json` puts the error on stdout as an `error` event.)
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains(&format!("no reasonix-remote binary for {X86}"))
            && said.contains(&build_host_binaries_command(&[X86])),
        "{}",
        show(&out)
    );
    assert!(installed_shas(&user).is_empty());
    assert_eq!(mock.request_count(), 0);
}
