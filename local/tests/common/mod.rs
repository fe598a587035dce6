//! Shared fixture of the local-mode end-to-end tests: a laptop home whose config points at
//! the scripted mock provider, a workspace folder, and the host binary built next to
//! `reasonix`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use reasonix_local::client::{Client, ClientEvent};
use reasonix_local::config::{Config, LoadOptions};
use reasonix_local::connect::LocalConnector;
use reasonix_local::gateway::Gateway;
use tokio::sync::mpsc::UnboundedReceiver;

/// The `reasonix-remote` built by `cargo build --workspace --bins`.
pub fn host_bin() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_BIN_EXE_reasonix"))
        .parent()
        .expect("bin dir")
        .join("reasonix-remote");
    assert!(p.is_file(), "build the workspace binaries first");
    p
}

/// A temporary laptop home (`home/`, used as `REASONIX_HOME`) and workspace (`ws/`).
pub struct LocalRig {
    /// Owns both folders.
    pub dir: tempfile::TempDir,
    /// `REASONIX_HOME`: `config.toml` and `.env` live here.
    pub home: PathBuf,
    /// The workspace.
    pub ws: PathBuf,
}

impl LocalRig {
    /// A home whose only provider is the mock at `base_url` (model `mock/m`), its key in
    /// `home/.env` as `key_env=key`.
    pub fn new(base_url: &str, key_env: &str, key: &str) -> LocalRig {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::create_dir_all(&ws).expect("ws");
        std::fs::write(
            home.join("config.toml"),
            format!("default_model = \"mock/m\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{base_url}\"\nmodels = [\"m\"]\ndefault = \"m\"\napi_key_env = \"{key_env}\"\n"),
        )
        .expect("config");
        std::fs::write(home.join(".env"), format!("{key_env}={key}\n")).expect(".env");
        LocalRig { dir, home, ws }
    }

    /// Point this process (and the host processes it starts, which read `REASONIX_HOME`
    /// from their allow-listed environment) at the rig's home and load its config.
    pub fn config(&self) -> Config {
        std::env::set_var("REASONIX_HOME", &self.home);
        std::env::remove_var("XDG_RUNTIME_DIR");
        Config::load(&LoadOptions {
            home: Some(self.home.clone()),
            project_dir: Some(self.ws.clone()),
            ..LoadOptions::default()
        })
        .expect("config")
    }

    /// A library client of the workspace through `binary` (normally [`host_bin`]).
    pub fn client_via(
        &self,
        config: &Config,
        binary: &Path,
    ) -> (Client, UnboundedReceiver<ClientEvent>) {
        Client::start(
            Arc::new(LocalConnector::new(binary.to_path_buf(), self.ws.clone())),
            Arc::new(Gateway::new(config)),
            reasonix_local::client::options_for(config).0,
        )
    }

    /// A library client of the workspace through the real host binary.
    pub fn client(&self, config: &Config) -> (Client, UnboundedReceiver<ClientEvent>) {
        self.client_via(config, &host_bin())
    }
}

/// `reasonix ARGS` in the rig's workspace, against its home and the host binary (stdin
/// closed; the daemon it starts exits 5 s after its last client).
pub fn reasonix(rig: &LocalRig, args: &[&str]) -> std::process::Output {
    reasonix_command(rig, &host_bin(), args)
        .output()
        .expect("run reasonix")
}

/// The command of [`reasonix`] with `REASONIX_REMOTE_BIN` = `remote_bin`.
pub fn reasonix_command(rig: &LocalRig, remote_bin: &Path, args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_reasonix"));
    c.args(args)
        .current_dir(&rig.ws)
        .env("REASONIX_HOME", &rig.home)
        .env("REASONIX_REMOTE_BIN", remote_bin)
        .env("REASONIX_IDLE_TIMEOUT_SECS", "5")
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(std::process::Stdio::null());
    c
}

/// The stdout of a run that must have succeeded (else both outputs in the panic).
pub fn ok(out: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The `config.toml` of a home whose default model is `mock/<model>` at the scripted mock
/// provider `base_url`, its key read from `key_env`; `extra` is appended (an `[agent]` table,
/// more providers).
pub fn mock_config(base_url: &str, model: &str, key_env: &str, extra: &str) -> String {
    format!(
        "default_model = \"mock/{model}\"\n[[providers]]\nname = \"mock\"\nkind = \"openai\"\nbase_url = \"{base_url}\"\nmodels = [\"{model}\"]\ndefault = \"{model}\"\napi_key_env = \"{key_env}\"\n{extra}"
    )
}

impl LocalRig {
    /// A home whose `config.toml` is `config` and whose `.env` holds `key_env=key`.
    pub fn with_config(config: &str, key_env: &str, key: &str) -> LocalRig {
        let rig = LocalRig::new("http://127.0.0.1:9", key_env, key);
        std::fs::write(rig.home.join("config.toml"), config).expect("config");
        rig
    }
}

/// [`reasonix_command`] through the real host binary with both outputs captured, its daemon
/// leaving `idle_secs` after the last client.
pub fn headless(rig: &LocalRig, args: &[&str], idle_secs: u32) -> std::process::Command {
    let mut c = reasonix_command(rig, &host_bin(), args);
    c.env("REASONIX_IDLE_TIMEOUT_SECS", idle_secs.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    c
}

/// The JSON records among the lines of `out` (`run --json`).
pub fn json_lines(out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Exit code and both outputs of a run, for assertion messages.
pub fn text(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// [`headless`] run on a blocking thread, for async tests.
pub async fn run_async(rig: &LocalRig, args: &[&str], idle_secs: u32) -> std::process::Output {
    let mut c = headless(rig, args, idle_secs);
    tokio::task::spawn_blocking(move || c.output().expect("run reasonix"))
        .await
        .expect("join")
}

/// `reasonix acp` in the rig's workspace with its stdin and stdout piped (an editor's end),
/// killed when dropped.
pub fn spawn_acp(rig: &LocalRig) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_reasonix"))
        .arg("acp")
        .current_dir(&rig.ws)
        .env("REASONIX_HOME", &rig.home)
        .env("REASONIX_REMOTE_BIN", host_bin())
        .env("REASONIX_IDLE_TIMEOUT_SECS", "60")
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn reasonix acp")
}
