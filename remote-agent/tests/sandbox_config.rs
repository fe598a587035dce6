//! Sandbox settings: defaults, tighten-only merging, the bwrap command line.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::ffi::OsString;
use std::path::PathBuf;

use reasonix_remote::sandbox::{Sandbox, SandboxConfig, SandboxMode, SandboxOverrides};

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
fn project_settings_only_tighten() {
    let mut user = SandboxConfig::defaults_for_home(None);
    user.bash = SandboxMode::Off;
    user.network = true;
    let project = SandboxOverrides {
        bash: Some(SandboxMode::Enforce),
        network: Some(false),
        allow_write: vec![],
        forbid_read: vec![PathBuf::from("/secret")],
    };
    let (merged, warnings) = user.tighten_only(&project);
    assert_eq!((merged.bash, merged.network), (SandboxMode::Enforce, false));
    assert!(merged.forbid_read.contains(&PathBuf::from("/secret")));
    assert!(warnings.is_empty(), "{warnings:?}");

    let strict = merged;
    let loosen = SandboxOverrides {
        bash: Some(SandboxMode::Off),
        network: Some(true),
        allow_write: vec![PathBuf::from("/")],
        forbid_read: vec![],
    };
    let (merged, warnings) = strict.tighten_only(&loosen);
    assert_eq!(merged, strict, "nothing loosened");
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(warnings[0].contains("sandbox.bash = \"off\""));
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
