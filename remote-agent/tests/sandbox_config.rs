//! Sandbox settings: defaults and the bwrap command line (the tighten-only merge of a
//! project file is `reasonix_forward::policy::tighten`, tested there and end to end).

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::ffi::OsString;
use std::path::PathBuf;

use reasonix_remote::sandbox::{Sandbox, SandboxConfig, SandboxMode};

#[test]
fn defaults_hide_secrets_and_enforce() {
    let c = SandboxConfig::defaults_for_home(Some(&PathBuf::from("/home/u")));
    assert_eq!(c.bash, SandboxMode::Enforce);
    for p in [
        "/home/u/.ssh",
        "/home/u/.aws",
        "/home/u/.gnupg",
        "/home/u/.reasonix/.env",
    ] {
        assert!(c.forbid_read.contains(&PathBuf::from(p)), "{p}");
    }
    assert!(c
        .cache_dirs
        .contains(&PathBuf::from("/home/u/.cargo/registry")));
}

#[test]
fn bwrap_command_line_has_the_contract_flags_in_order() {
    let ws = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::create_dir(ws.path().join(".git")).unwrap();
    let hidden = tempfile::tempdir_in("/var/tmp").unwrap();
    let secret_file = hidden.path().join("key");
    std::fs::write(&secret_file, "k").unwrap();
    let cfg = SandboxConfig {
        bash: SandboxMode::Enforce,
        network: false,
        allow_write: vec![],
        forbid_read: vec![
            hidden.path().to_path_buf(),
            secret_file.clone(),
            PathBuf::from("/does/not/exist"),
        ],
        cache_dirs: vec![PathBuf::from("/does/not/exist/either")],
        bwrap_path: PathBuf::from("bwrap"),
        ssh_agent: false,
    };
    let sb = Sandbox::probe(cfg, ws.path());
    let ws_c = std::fs::canonicalize(ws.path()).unwrap();
    let args: Vec<String> = sb
        .bwrap_args(&ws_c)
        .iter()
        .map(|a: &OsString| a.to_string_lossy().into_owned())
        .collect();
    let line = args.join(" ");
    let ws_s = ws_c.display().to_string();
    let hid = std::fs::canonicalize(hidden.path())
        .unwrap()
        .display()
        .to_string();
    let want = format!(
        "--ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --bind {ws_s} {ws_s} --ro-bind {ws_s}/.git {ws_s}/.git \
         --tmpfs {hid} --remount-ro {hid} --ro-bind /dev/null {hid}/key --unshare-net --die-with-parent --unshare-pid --new-session --chdir {ws_s}"
    );
    assert_eq!(line, want);
}
