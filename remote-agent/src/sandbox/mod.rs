//! The bash sandbox: bubblewrap (`bwrap`) with the whole filesystem read-only except the
//! writable roots, a private `/tmp`, `.git` internals re-protected, secrets masked, and
//! optionally no network. When bubblewrap cannot run, [`landlock`] confines bash instead
//! (`enforce` accepts either; `bwrap` insists on bubblewrap). Probed once per session; when
//! enforced but unusable, bash refuses to run (never silently unconfined), saying why.

pub mod landlock;
pub mod probe;

use reasonix_forward::sync::LockExt;
use std::collections::HashSet;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How bash commands are confined (`[sandbox] bash`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// Run under bwrap, else under Landlock; refuse to run when neither works.
    Enforce,
    /// Run under bwrap only; refuse to run when bwrap does not work.
    Bwrap,
    /// Run commands unconfined (an explicit user choice).
    Off,
}

/// Sandbox settings (the `[sandbox]` table, already merged and with `~` expanded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// Enforce or off.
    pub bash: SandboxMode,
    /// When false, commands get their own empty network namespace (`--unshare-net`).
    pub network: bool,
    /// Writable roots besides the workspace.
    pub allow_write: Vec<PathBuf>,
    /// Paths hidden from commands (dirs become empty, files read as empty).
    pub forbid_read: Vec<PathBuf>,
    /// Toolchain caches made writable when they exist (cargo registry, `~/.cache`, npm).
    pub cache_dirs: Vec<PathBuf>,
    /// The bwrap program: a bare name is looked up in `PATH`. Injectable so tests can point it
    /// at a missing binary.
    pub bwrap_path: PathBuf,
    /// Give commands the forwarded ssh-agent (`SSH_AUTH_SOCK`) when the daemon serves one
    /// (`[sandbox] ssh_agent`); otherwise the variable is removed and, under bwrap, the
    /// socket's directory is hidden.
    pub ssh_agent: bool,
}

impl SandboxConfig {
    /// Defaults for a user whose home is `home`: enforce, network on, nothing extra writable,
    /// `~/.ssh`, `~/.aws`, `~/.gnupg`, `~/.reasonix/.env` (or `$REASONIX_HOME/.env`) hidden,
    /// cargo/npm/`~/.cache` caches writable.
    pub fn defaults_for_home(home: Option<&Path>) -> Self {
        let mut forbid_read = Vec::new();
        let mut cache_dirs = Vec::new();
        if let Some(h) = home {
            for d in [".ssh", ".aws", ".gnupg"] {
                forbid_read.push(h.join(d));
            }
            forbid_read.push(h.join(".reasonix").join(".env"));
            for d in [".cargo/registry", ".cargo/git", ".cache", ".npm"] {
                cache_dirs.push(h.join(d));
            }
        }
        if let Some(rh) = std::env::var_os("REASONIX_HOME") {
            let p = PathBuf::from(rh).join(".env");
            if !forbid_read.contains(&p) {
                forbid_read.push(p);
            }
        }
        Self {
            bash: SandboxMode::Enforce,
            network: true,
            allow_write: Vec::new(),
            forbid_read,
            cache_dirs,
            bwrap_path: PathBuf::from("bwrap"),
            ssh_agent: false,
        }
    }
}

impl Default for SandboxConfig {
    /// [`SandboxConfig::defaults_for_home`] with `$HOME`.
    fn default() -> Self {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        Self::defaults_for_home(home.as_deref())
    }
}

/// Why a command was not started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// Enforced, but no sandbox mechanism works (bwrap, and Landlock unless `bwrap` is insisted on).
    #[error(
        "refusing to run bash: the sandbox is enforced ([sandbox] bash = \"enforce\" or \"bwrap\") but no sandbox mechanism is available: {why}. \
         Install bubblewrap (e.g. `apt-get install bubblewrap`) or allow it user namespaces, or choose to run commands unconfined with \
         `bash = \"off\"` under `[sandbox]` in ~/.reasonix/config.toml."
    )]
    Unavailable {
        /// What the probe found.
        why: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Off,
    Bwrap(PathBuf),
    /// Landlock with this kernel ABI, because bubblewrap failed for `bwrap_why`.
    Landlock {
        abi: i32,
        bwrap_why: String,
    },
    Unavailable(String),
}

/// A probed sandbox for one workspace.
#[derive(Debug, Clone)]
pub struct Sandbox {
    config: SandboxConfig,
    workspace: PathBuf,
    state: State,
    shell: PathBuf,
    /// Plan mode ([`Sandbox::read_only`]): the workspace and every writable root are mounted
    /// read-only, and the host's /tmp is not writable either.
    all_read_only: bool,
    /// A writing subagent's `write_paths` ([`Sandbox::with_write_paths`]): the writable roots
    /// are mounted read-only and only these (canonical, existing) paths are writable.
    write_only: Option<Vec<PathBuf>>,
}

/// How long the bwrap probe may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The bwrap binaries (with the network flag probed) whose probe passed in this process.
/// Every session open builds its sandbox again (the policy may differ), and the daemon
/// does that on its runtime: a probe that passed once is not run again, so an open costs no
/// process and no blocked worker. A failed probe is not remembered: the next open tries
/// again (the user may have fixed the host meanwhile).
fn passed_probes() -> &'static Mutex<HashSet<(PathBuf, bool)>> {
    static PASSED: OnceLock<Mutex<HashSet<(PathBuf, bool)>>> = OnceLock::new();
    PASSED.get_or_init(Mutex::default)
}

fn probe_passed(bwrap: &Path, network: bool) -> bool {
    passed_probes()
        .lock_or_recover()
        .contains(&(bwrap.to_path_buf(), network))
}

fn remember_passed(bwrap: &Path, network: bool) {
    passed_probes()
        .lock_or_recover()
        .insert((bwrap.to_path_buf(), network));
}

impl Sandbox {
    /// Probes bwrap once (2 s budget) with the namespaces we use and records the outcome.
    /// Blocks the calling thread while the probe runs: async code uses
    /// [`Sandbox::probe_async`].
    pub fn probe(config: SandboxConfig, workspace: &Path) -> Sandbox {
        let state = match config.bash {
            SandboxMode::Off => State::Off,
            SandboxMode::Enforce | SandboxMode::Bwrap => match find_bwrap(&config) {
                Err(why) => fallback(&config, why),
                Ok(bwrap) if probe_passed(&bwrap, config.network) => State::Bwrap(bwrap),
                Ok(bwrap) => match run_probe(&bwrap, config.network) {
                    Ok(()) => {
                        remember_passed(&bwrap, config.network);
                        State::Bwrap(bwrap)
                    }
                    Err(why) => fallback(&config, why),
                },
            },
        };
        Self::with_state(config, workspace, state)
    }

    /// [`Sandbox::probe`] for async callers: the probe process is awaited with tokio's
    /// process and timer, so no runtime worker sleeps or blocks on it.
    pub async fn probe_async(config: SandboxConfig, workspace: &Path) -> Sandbox {
        let state = match config.bash {
            SandboxMode::Off => State::Off,
            SandboxMode::Enforce | SandboxMode::Bwrap => match find_bwrap(&config) {
                Err(why) => fallback(&config, why),
                Ok(bwrap) if probe_passed(&bwrap, config.network) => State::Bwrap(bwrap),
                Ok(bwrap) => match run_probe_async(&bwrap, config.network).await {
                    Ok(()) => {
                        remember_passed(&bwrap, config.network);
                        State::Bwrap(bwrap)
                    }
                    Err(why) => fallback(&config, why),
                },
            },
        };
        Self::with_state(config, workspace, state)
    }

    fn with_state(config: SandboxConfig, workspace: &Path, state: State) -> Sandbox {
        let workspace =
            std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
        let shell = if Path::new("/bin/bash").exists() {
            "/bin/bash"
        } else {
            "/bin/sh"
        };
        Sandbox {
            config,
            workspace,
            state,
            shell: PathBuf::from(shell),
            all_read_only: false,
            write_only: None,
        }
    }

    /// This sandbox with nothing writable (plan mode): under bwrap the workspace and the
    /// other writable roots are bound read-only (and /tmp is private, as always); under
    /// Landlock no write right is granted outside the device files. Off or unavailable stays
    /// so ([`Sandbox::is_active`] tells; plan mode then runs only read-only commands).
    pub fn read_only(&self) -> Sandbox {
        let mut s = self.clone();
        s.all_read_only = true;
        s
    }

    /// This sandbox with only `paths` writable (a subagent's canonical `write_paths`): under
    /// bwrap the writable roots are bound read-only and each existing write path is bound
    /// writable over them; under Landlock only the write paths get write rights. A write path
    /// that does not exist yet is not writable for bash (the file tools may create it).
    pub fn with_write_paths(&self, paths: &[PathBuf]) -> Sandbox {
        let mut s = self.clone();
        s.write_only = Some(paths.to_vec());
        s
    }

    /// The write paths of a [`Sandbox::with_write_paths`] sandbox.
    pub fn write_paths(&self) -> Option<&[PathBuf]> {
        self.write_only.as_deref()
    }

    /// True for a [`Sandbox::read_only`] sandbox.
    pub fn is_read_only(&self) -> bool {
        self.all_read_only
    }

    /// A sandbox that runs commands unconfined (tests, and `bash = "off"`).
    pub fn off(workspace: &Path) -> Sandbox {
        let config = SandboxConfig {
            bash: SandboxMode::Off,
            ..SandboxConfig::default()
        };
        Self::probe(config, workspace)
    }

    /// `"bwrap"`, `"landlock (…what it does not cover…)"`, `"unavailable (why)"` or `"off"`.
    pub fn status(&self) -> String {
        match &self.state {
            State::Off => "off".to_string(),
            State::Bwrap(_) => "bwrap".to_string(),
            State::Landlock { abi, bwrap_why } => {
                let net = if self.config.network {
                    "network allowed by config"
                } else if landlock::can_block_tcp(*abi) {
                    "network: TCP blocked, UDP and local sockets are not"
                } else {
                    "network is NOT restricted (Landlock ABI below 4 cannot block TCP)"
                };
                format!(
                    "landlock (ABI {abi}; bubblewrap unavailable: {bwrap_why}; {net}; {})",
                    landlock::NOT_COVERED
                )
            }
            State::Unavailable(why) => format!("unavailable ({why})"),
        }
    }

    /// The mechanism in use: `bwrap`, `landlock` or `none`.
    pub fn mechanism(&self) -> &'static str {
        match &self.state {
            State::Bwrap(_) => "bwrap",
            State::Landlock { .. } => "landlock",
            State::Off | State::Unavailable(_) => "none",
        }
    }

    /// True when commands run confined (bwrap or Landlock).
    pub fn is_active(&self) -> bool {
        matches!(self.state, State::Bwrap(_) | State::Landlock { .. })
    }

    /// The settings this sandbox was built from.
    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// The workspace (canonical).
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The command that runs `shell_command` in `cwd`: under bwrap when enforced, plain
    /// `bash -c` when off. Enforced but unavailable → the refusal, and nothing runs.
    pub fn command(
        &self,
        shell_command: &str,
        cwd: &Path,
    ) -> Result<tokio::process::Command, SandboxError> {
        self.command_with(shell_command, cwd, &[])
    }

    /// [`Sandbox::command`] with `read_only` (existing paths inside the writable roots,
    /// canonical) mounted read-only for this command: the paths a deny rule on file writers
    /// covers (see [`crate::tools::deny_guard::read_only_paths`]). Unconfined commands get
    /// no mounts; the after-call check is their only guard.
    pub fn command_with(
        &self,
        shell_command: &str,
        cwd: &Path,
        read_only: &[PathBuf],
    ) -> Result<tokio::process::Command, SandboxError> {
        let mut c = self.confined(shell_command, cwd, read_only)?;
        match (self.config.ssh_agent, crate::agent_sock::socket_path()) {
            (true, Some(sock)) => c.env("SSH_AUTH_SOCK", sock),
            _ => c.env_remove("SSH_AUTH_SOCK"),
        };
        Ok(c)
    }

    /// The bwrap mounts of the forwarded ssh-agent's directory, when the daemon serves one:
    /// bound in (a run directory under `/tmp` is behind the private `/tmp` otherwise) when
    /// `ssh_agent` is on, hidden under an empty tmpfs when it is off.
    fn agent_mounts(&self) -> Vec<OsString> {
        let Some(dir) = crate::agent_sock::socket_dir().filter(|d| d.is_dir()) else {
            return Vec::new();
        };
        let d = dir.as_os_str().to_os_string();
        if self.config.ssh_agent {
            vec!["--bind".into(), d.clone(), d]
        } else {
            vec!["--tmpfs".into(), d]
        }
    }

    fn confined(
        &self,
        shell_command: &str,
        cwd: &Path,
        read_only: &[PathBuf],
    ) -> Result<tokio::process::Command, SandboxError> {
        match &self.state {
            State::Off => {
                let mut c = tokio::process::Command::new(&self.shell);
                c.arg("-c").arg(shell_command).current_dir(cwd);
                Ok(c)
            }
            State::Bwrap(bwrap) => {
                let mut c = tokio::process::Command::new(bwrap);
                c.args(self.bwrap_args_with(cwd, read_only));
                c.args(self.agent_mounts());
                c.arg("--").arg(&self.shell).arg("-c").arg(shell_command);
                Ok(c)
            }
            State::Landlock { abi, .. } => {
                let writable = if self.all_read_only {
                    Vec::new()
                } else if let Some(paths) = &self.write_only {
                    existing(paths)
                } else {
                    self.writable_roots()
                };
                let plan = landlock::Plan {
                    abi: *abi,
                    // Landlock's /tmp grant would cover a workspace under /tmp: a writing
                    // subagent gets none (bwrap gives every command a private /tmp instead).
                    tmp_writable: !self.all_read_only && self.write_only.is_none(),
                    writable: &writable,
                    read_only,
                    forbid_read: &self.config.forbid_read,
                    block_tcp: !self.config.network && landlock::can_block_tcp(*abi),
                };
                let prepared =
                    landlock::prepare(&plan).map_err(|why| SandboxError::Unavailable { why })?;
                let mut c = tokio::process::Command::new(&self.shell);
                c.arg("-c").arg(shell_command).current_dir(cwd);
                prepared.apply_to(&mut c);
                Ok(c)
            }
            State::Unavailable(why) => Err(SandboxError::Unavailable { why: why.clone() }),
        }
    }

    /// The directories a sandboxed command may write: workspace, `allow_write` and the
    /// existing toolchain caches, canonical, without duplicates.
    pub fn writable_roots(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        let candidates = std::iter::once(&self.workspace)
            .chain(self.config.allow_write.iter())
            .chain(self.config.cache_dirs.iter());
        for p in candidates {
            if let Ok(c) = std::fs::canonicalize(p) {
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
        out
    }

    /// The bwrap options (everything before `--`) without extra read-only paths.
    pub fn bwrap_args(&self, cwd: &Path) -> Vec<OsString> {
        self.bwrap_args_with(cwd, &[])
    }

    /// The bwrap options (everything before `--`). Later mounts override earlier ones, so the
    /// order is: read-only root, devices, proc, private /tmp, writable roots, `.git`
    /// re-protected, `read_only` (deny-rule paths) re-protected, secrets masked (last, so a
    /// read-only bind never uncovers a masked path).
    pub fn bwrap_args_with(&self, cwd: &Path, read_only: &[PathBuf]) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        let mut push =
            |items: &[&std::ffi::OsStr]| a.extend(items.iter().map(|s| s.to_os_string()));
        push(&["--ro-bind".as_ref(), "/".as_ref(), "/".as_ref()]);
        push(&["--dev".as_ref(), "/dev".as_ref()]);
        push(&["--proc".as_ref(), "/proc".as_ref()]);
        push(&["--tmpfs".as_ref(), "/tmp".as_ref()]);
        let roots = self.writable_roots();
        // Plan mode binds them read-only: still visible (a root under /tmp would otherwise be
        // hidden by the private /tmp), not writable.
        let bind = if self.all_read_only || self.write_only.is_some() {
            "--ro-bind"
        } else {
            "--bind"
        };
        for r in &roots {
            push(&[bind.as_ref(), r.as_os_str(), r.as_os_str()]);
        }
        // A writing subagent: only its write paths are writable, over the read-only roots.
        if let (Some(paths), false) = (&self.write_only, self.all_read_only) {
            for p in existing(paths) {
                push(&["--bind".as_ref(), p.as_os_str(), p.as_os_str()]);
            }
        }
        for r in &roots {
            let git = r.join(".git");
            if std::fs::symlink_metadata(&git).is_ok() {
                let git = std::fs::canonicalize(&git).unwrap_or(git);
                push(&["--ro-bind".as_ref(), git.as_os_str(), git.as_os_str()]);
            }
        }
        // `-try`: a path removed between the walk and the start is no reason to fail.
        for p in read_only {
            push(&["--ro-bind-try".as_ref(), p.as_os_str(), p.as_os_str()]);
        }
        for f in &self.config.forbid_read {
            let Ok(meta) = std::fs::metadata(f) else {
                continue;
            };
            let f = std::fs::canonicalize(f).unwrap_or_else(|_| f.clone());
            if meta.is_dir() {
                push(&["--tmpfs".as_ref(), f.as_os_str()]);
                push(&["--remount-ro".as_ref(), f.as_os_str()]);
            } else {
                push(&["--ro-bind".as_ref(), "/dev/null".as_ref(), f.as_os_str()]);
            }
        }
        if !self.config.network {
            push(&["--unshare-net".as_ref()]);
        }
        push(&[
            "--die-with-parent".as_ref(),
            "--unshare-pid".as_ref(),
            "--new-session".as_ref(),
        ]);
        push(&["--chdir".as_ref(), cwd.as_os_str()]);
        a
    }
}

/// The canonical forms of those of `paths` that exist.
fn existing(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in paths {
        if let Ok(c) = std::fs::canonicalize(p) {
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out
}

/// After bubblewrap failed for `why`: Landlock when `enforce` allows it and the kernel has
/// it, else unavailable with both reasons.
fn fallback(config: &SandboxConfig, why: String) -> State {
    let why = probe::explain_bwrap_failure(&why, &probe::read_host_setting);
    match config.bash {
        SandboxMode::Bwrap | SandboxMode::Off => State::Unavailable(format!(
            "bubblewrap: {why} (`bash = \"bwrap\"` does not accept the Landlock fallback)"
        )),
        SandboxMode::Enforce => match landlock::abi_version() {
            Ok(abi) => State::Landlock {
                abi,
                bwrap_why: why,
            },
            Err(ll) => State::Unavailable(format!("bubblewrap: {why}; landlock: {ll}")),
        },
    }
}

/// `name` itself when it has a slash, else the first match in `PATH`.
fn find_program(name: &Path) -> Option<PathBuf> {
    if name.components().count() > 1 {
        return name.is_file().then(|| name.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The bwrap binary of `config`, or why there is none.
fn find_bwrap(config: &SandboxConfig) -> Result<PathBuf, String> {
    find_program(&config.bwrap_path).ok_or_else(|| {
        format!(
            "{} not found{}",
            config.bwrap_path.display(),
            if config.bwrap_path.components().count() > 1 {
                ""
            } else {
                " in PATH"
            }
        )
    })
}

/// The probe command: `bwrap … -- true` with the namespaces we use.
fn probe_command(bwrap: &Path, network: bool) -> std::process::Command {
    let mut cmd = std::process::Command::new(bwrap);
    cmd.args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
    cmd.args(["--die-with-parent", "--unshare-pid", "--new-session"]);
    if !network {
        cmd.arg("--unshare-net");
    }
    cmd.args(["--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// Why a probe that exited with `status` failed, from its first stderr line.
fn probe_failure(bwrap: &Path, status: std::process::ExitStatus, stderr: &str) -> String {
    let first = stderr.lines().next().unwrap_or("").trim().to_string();
    format!(
        "probe `{} --ro-bind / / --dev /dev --proc /proc -- true` failed ({status}){}",
        bwrap.display(),
        if first.is_empty() {
            String::new()
        } else {
            format!(": {first}")
        }
    )
}

fn probe_timeout() -> String {
    format!("probe did not finish within {} s", PROBE_TIMEOUT.as_secs())
}

/// [`run_probe`] on tokio: the child is awaited, the budget is a tokio timer.
async fn run_probe_async(bwrap: &Path, network: bool) -> Result<(), String> {
    let mut cmd = tokio::process::Command::from(probe_command(bwrap, network));
    cmd.kill_on_drop(true);
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", bwrap.display()))?;
    match tokio::time::timeout(PROBE_TIMEOUT, child.wait_with_output()).await {
        // Dropping the future drops the child, which kill_on_drop kills.
        Err(_) => Err(probe_timeout()),
        Ok(Err(e)) => Err(format!("probe wait failed: {e}")),
        Ok(Ok(out)) if out.status.success() => Ok(()),
        Ok(Ok(out)) => Err(probe_failure(
            bwrap,
            out.status,
            &String::from_utf8_lossy(&out.stderr),
        )),
    }
}

/// Runs the probe within [`PROBE_TIMEOUT`], blocking the calling thread (sync callers only).
fn run_probe(bwrap: &Path, network: bool) -> Result<(), String> {
    let mut cmd = probe_command(bwrap, network);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", bwrap.display()))?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut s) = child.stderr.take() {
                    let _ = s.read_to_string(&mut err);
                }
                return Err(probe_failure(bwrap, status, &err));
            }
            Ok(None) if started.elapsed() > PROBE_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(probe_timeout());
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("probe wait failed: {e}")),
        }
    }
}
