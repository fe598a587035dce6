//! `reasonix-remote attach`: make sure the workspace daemon of this build runs, then bridge
//! this process's stdin/stdout (the SSH channel or the local pipes) to the daemon's socket,
//! byte for byte.
//!
//! The bridge is deliberately dumb: the link protocol (preamble, handshake, frames) is spoken
//! end to end between the client and the daemon, so a bridge that dies with its SSH channel
//! loses nothing — the daemon keeps the link for a resume.
//!
//! Two things make a warm attach one round trip (see `docs/REMOTE.md`, "Attach"):
//! - the client's `Hello` frame may come with the command (`--hello-fd`, hex text), and is
//!   written to the daemon before anything is read from stdin, so the client does not wait
//!   for the preamble before sending it;
//! - a daemon of another build is only replaced when it is idle (or the client said
//!   `--other-build replace`); otherwise the bridge reports it ([`AttachReport::Busy`]) and
//!   exits, and the client asks the user.

use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use reasonix_forward::attach::{report_line, AttachReport, BusySession};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;

use crate::paths::HostPaths;
use crate::workspaces;

/// Errors of the attach bridge.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// The workspace or state directories are unusable.
    #[error("{0}")]
    Paths(io::Error),
    /// The daemon could not be started.
    #[error("could not start the reasonix-remote daemon: {0}; see its log at {1}")]
    Spawn(io::Error, String),
    /// The daemon did not come up.
    #[error("the reasonix-remote daemon did not open its socket {socket} within {secs} s{exit}; see its log at {log}")]
    NoSocket {
        /// Socket path.
        socket: String,
        /// Log path.
        log: String,
        /// How long we waited.
        secs: u64,
        /// How the daemon process ended, when it did (", it exited with ...").
        exit: String,
    },
    /// Bridging failed.
    #[error("bridge failed: {0}")]
    Bridge(io::Error),
    /// A daemon of another build runs a turn and the client did not ask to replace it.
    #[error("the workspace daemon of build {build_id} is running a turn in session(s) {sessions}; it was left running. Attach again with the upgrade confirmed to interrupt it, or wait until the turn ends")]
    OtherBuildBusy {
        /// Its build.
        build_id: String,
        /// Busy session ids.
        sessions: String,
    },
    /// The workspace cannot be used (reported to the client; retrying does not help).
    #[error("{0}")]
    Refused(crate::preflight::Refusal),
    /// The `--hello-fd` input is unusable.
    #[error("the pipelined hello on fd {fd} is unusable: {reason}")]
    Hello {
        /// The fd.
        fd: i32,
        /// Why.
        reason: String,
    },
}

/// What to do when the daemon on the workspace socket is of another build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtherBuild {
    /// Replace it when no turn runs; otherwise report [`AttachReport::Busy`] and exit.
    Ask,
    /// Replace it even if a turn runs (the turn is interrupted; the journal keeps it).
    Replace,
    /// Leave it running and bridge to it (the client attaches read-only).
    Attach,
}

impl OtherBuild {
    /// The value of `--other-build` (`ask`, `replace`, `attach`).
    pub fn from_flag(s: &str) -> Option<Self> {
        match s {
            "ask" => Some(Self::Ask),
            "replace" => Some(Self::Replace),
            "attach" => Some(Self::Attach),
            _ => None,
        }
    }
}

/// Options of one attach.
#[derive(Debug, Clone)]
pub struct AttachOptions {
    /// Workspace directory.
    pub workspace: PathBuf,
    /// Extra arguments for `reasonix-remote daemon`.
    pub daemon_args: Vec<String>,
    /// The client's `Hello` frame, already encoded, sent before stdin is bridged.
    pub hello: Option<Vec<u8>>,
    /// Token of the client's report lines; without it reports go to stderr only.
    pub tag: Option<String>,
    /// Policy for a daemon of another build.
    pub other_build: OtherBuild,
    /// Create the workspace folder when it does not exist (`--mkdir`).
    pub mkdir: bool,
}

/// Read the pipelined hello: hex text on `fd` (a here-document of the attach script), up to
/// EOF, whitespace ignored.
pub fn read_hello_fd(fd: i32) -> Result<Vec<u8>, AttachError> {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let bad = |reason: String| AttachError::Hello { fd, reason };
    // SAFETY: fcntl(F_GETFD) only checks that the descriptor is open.
    if fd < 3 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(bad("not an open descriptor (above 2)".into()));
    }
    // SAFETY: the descriptor is open (checked above) and owned by nobody else in this
    // process: the attach script opened it for us only.
    let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
    let mut text = String::new();
    f.by_ref()
        .take(2 * 1024 * 1024)
        .read_to_string(&mut text)
        .map_err(|e| bad(e.to_string()))?;
    let hex: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    hex::decode(hex).map_err(|e| bad(e.to_string()))
}

/// Spawn `reasonix-remote daemon` for `paths` detached (own session, stdio to its log).
fn spawn_daemon(
    exe: &Path,
    paths: &HostPaths,
    daemon_args: &[String],
) -> Result<std::process::Child, AttachError> {
    let log = open_stderr_log(paths)?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("daemon")
        .arg("--workspace")
        .arg(&paths.workspace)
        .args(daemon_args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .current_dir(&paths.workspace);
    detach(&mut cmd);
    cmd.spawn()
        .map_err(|e| AttachError::Spawn(e, paths.log_file.display().to_string()))
}

fn open_stderr_log(paths: &HostPaths) -> Result<std::fs::File, AttachError> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(
            paths
                .home
                .join("logs")
                .join(format!("daemon-{}.stderr", paths.key)),
        )
        .map_err(|e| AttachError::Spawn(e, paths.log_file.display().to_string()))
}

fn detach(cmd: &mut std::process::Command) {
    // SAFETY: setsid is async-signal-safe; it detaches the daemon from our session so it
    // survives the SSH channel (and the terminal) going away.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
}

/// Wait for the socket of a daemon we just spawned.
async fn wait_for_socket(
    paths: &HostPaths,
    mut child: std::process::Child,
) -> Result<UnixStream, AttachError> {
    // MCP servers start before the socket opens (startup timeout 30 s each, in parallel).
    let limit = Duration::from_secs(45);
    let deadline = Instant::now() + limit;
    let mut exited: Option<(Instant, String)> = None;
    loop {
        if let Ok(s) = UnixStream::connect(&paths.socket).await {
            // Reap the child in the background if it ever exits; it is a daemon now.
            std::thread::spawn(move || {
                let _ = child.wait();
            });
            return Ok(s);
        }
        if exited.is_none() {
            if let Ok(Some(status)) = child.try_wait() {
                exited = Some((Instant::now(), format!(", it exited with {status}")));
            }
        }
        // A daemon that exited may have lost a start race with another one whose socket
        // shows up shortly; give that one 3 s, not the whole startup allowance.
        let gave_up = match &exited {
            Some((at, _)) => at.elapsed() > Duration::from_secs(3),
            None => false,
        };
        if gave_up || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(AttachError::NoSocket {
        socket: paths.socket.display().to_string(),
        log: paths.log_file.display().to_string(),
        secs: limit.as_secs(),
        exit: exited.map(|(_, e)| e).unwrap_or_default(),
    })
}

/// Held while a bridge starts or replaces the workspace daemon (`<run dir>/<key>.spawn`,
/// flock): a bridge that finds no socket waits for it instead of starting a daemon of its own
/// build in the middle of another bridge's upgrade.
struct SpawnLock {
    _file: std::fs::File,
}

impl SpawnLock {
    async fn acquire(paths: &HostPaths) -> Result<SpawnLock, AttachError> {
        let path = paths.run_dir.join(format!("{}.spawn", paths.key));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(AttachError::Paths)?;
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            // SAFETY: flock on a valid fd owned by `file`, which the guard keeps open.
            let rc = unsafe {
                libc::flock(
                    std::os::fd::AsRawFd::as_raw_fd(&file),
                    libc::LOCK_EX | libc::LOCK_NB,
                )
            };
            if rc == 0 {
                return Ok(SpawnLock { _file: file });
            }
            if Instant::now() > deadline {
                return Err(AttachError::Bridge(io::Error::other(format!(
                    "another attach has been starting the workspace daemon for 90 s (lock {})",
                    path.display()
                ))));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Connect to the daemon of `workspace`, starting it detached if needed. `daemon_args` are
/// extra arguments passed to `reasonix-remote daemon`.
pub async fn connect_or_spawn(
    workspace: &Path,
    daemon_args: &[String],
) -> Result<(UnixStream, HostPaths), AttachError> {
    let paths = HostPaths::for_workspace(workspace).map_err(AttachError::Paths)?;
    if let Ok(s) = UnixStream::connect(&paths.socket).await {
        return Ok((s, paths));
    }
    let _spawning = SpawnLock::acquire(&paths).await?;
    // Another bridge may have started (or replaced) the daemon while we waited.
    if let Ok(s) = UnixStream::connect(&paths.socket).await {
        return Ok((s, paths));
    }
    let exe = std::env::current_exe()
        .map_err(|e| AttachError::Spawn(e, paths.log_file.display().to_string()))?;
    let child = spawn_daemon(&exe, &paths, daemon_args)?;
    let s = wait_for_socket(&paths, child).await?;
    Ok((s, paths))
}

/// Read the daemon's preamble line. Returns the line (with its newline) and whether the
/// daemon is of our own build.
pub async fn read_preamble(stream: &mut UnixStream) -> Result<(Vec<u8>, bool), AttachError> {
    use tokio::io::AsyncReadExt;
    let mut line = Vec::with_capacity(64);
    let mut byte = [0u8; 1];
    while line.len() < 512 {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut byte))
            .await
            .map_err(|_| {
                AttachError::Bridge(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the daemon sent no preamble within 10 s",
                ))
            })?
            .map_err(AttachError::Bridge)?;
        if n == 0 {
            return Err(AttachError::Bridge(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the daemon closed the connection before its preamble",
            )));
        }
        line.push(byte[0]);
        if byte[0] == b'\n' {
            break;
        }
    }
    let expected = format!(
        "{} {}\n",
        reasonix_forward::proto::PREAMBLE_MAGIC,
        reasonix_forward::build_id()
    );
    let same = line == expected.as_bytes();
    Ok((line, same))
}

/// Build id on a preamble line.
fn preamble_build(preamble: &[u8]) -> String {
    let text = String::from_utf8_lossy(preamble);
    text.trim()
        .split_once(' ')
        .map(|(_, b)| b.to_string())
        .unwrap_or_else(|| text.trim().to_string())
}

/// How a daemon process was started, read from `/proc` before it is stopped, so it can be
/// started again exactly so if its successor fails.
#[derive(Debug, Clone)]
struct Relaunch {
    exe: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    cwd: PathBuf,
}

fn capture_relaunch(pid: u32) -> Option<Relaunch> {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let exe = std::fs::read_link(proc_dir.join("exe")).ok()?;
    let exe_text = exe.to_string_lossy();
    if exe_text.ends_with(" (deleted)") {
        return None;
    }
    let split = |b: Vec<u8>| -> Vec<String> {
        b.split(|c| *c == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect()
    };
    let args = split(std::fs::read(proc_dir.join("cmdline")).ok()?);
    let env = split(std::fs::read(proc_dir.join("environ")).ok()?)
        .into_iter()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    let cwd = std::fs::read_link(proc_dir.join("cwd")).ok()?;
    Some(Relaunch {
        exe,
        args: args.into_iter().skip(1).collect(),
        env,
        cwd,
    })
}

fn relaunch(r: &Relaunch, paths: &HostPaths) -> Result<std::process::Child, AttachError> {
    let log = open_stderr_log(paths)?;
    let mut cmd = std::process::Command::new(&r.exe);
    cmd.args(&r.args)
        .env_clear()
        .envs(r.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .current_dir(&r.cwd);
    detach(&mut cmd);
    cmd.spawn()
        .map_err(|e| AttachError::Spawn(e, paths.log_file.display().to_string()))
}

/// What [`connect_daemon`] found.
#[derive(Debug)]
pub enum Attached {
    /// A daemon to bridge to: the stream, its preamble line, and a report to print before
    /// the preamble (a fallback to the old build).
    Link {
        /// Socket stream, positioned after the preamble.
        stream: UnixStream,
        /// The preamble line (with newline).
        preamble: Vec<u8>,
        /// Printed before the preamble.
        report: Option<AttachReport>,
    },
    /// Nothing to bridge: report this and exit.
    Report(AttachReport),
}

/// Connect to the workspace daemon, handling a daemon of another build per `opts`.
pub async fn connect_daemon(opts: &AttachOptions) -> Result<Attached, AttachError> {
    let (mut stream, paths) = connect_or_spawn(&opts.workspace, &opts.daemon_args).await?;
    let (preamble, same) = read_preamble(&mut stream).await?;
    if same {
        return Ok(Attached::Link {
            stream,
            preamble,
            report: None,
        });
    }
    let old_build = preamble_build(&preamble);
    if opts.other_build == OtherBuild::Attach {
        return Ok(Attached::Link {
            stream,
            preamble,
            report: None,
        });
    }
    drop(stream);
    let report = workspaces::query(&paths.socket).await.ok();
    if let Some(r) = &report {
        if r.busy() && opts.other_build == OtherBuild::Ask {
            let sessions: Vec<BusySession> = r
                .sessions
                .iter()
                .filter(|s| workspaces::state_busy(s.state))
                .map(|s| BusySession {
                    id: s.id.clone(),
                    state: s.state,
                    title: s.title.clone(),
                })
                .collect();
            if opts.tag.is_some() {
                return Ok(Attached::Report(AttachReport::Busy {
                    build_id: r.build_id.clone(),
                    sessions,
                }));
            }
            return Err(AttachError::OtherBuildBusy {
                build_id: r.build_id.clone(),
                sessions: sessions
                    .iter()
                    .map(|s| s.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    // Replace it. Its pid comes from its own status, else from the state marker.
    let pid = report.as_ref().map(|r| r.pid).or_else(|| {
        std::fs::read(&paths.daemon_state)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["pid"].as_u64())
            .map(|p| p as u32)
    });
    eprintln!(
        "reasonix-remote: replacing the workspace daemon of build {old_build} with build {}",
        reasonix_forward::build_id()
    );
    let previous = pid.and_then(capture_relaunch);
    // From here until a daemon answers again, no other bridge starts one.
    let _spawning = SpawnLock::acquire(&paths).await?;
    match pid {
        Some(pid) => {
            workspaces::terminate(pid).await;
        }
        None => {
            // No pid to signal: wait for it to go away by itself (idle timeout) briefly.
            let deadline = Instant::now() + Duration::from_secs(10);
            while paths.socket.exists() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    let exe = std::env::current_exe()
        .map_err(|e| AttachError::Spawn(e, paths.log_file.display().to_string()))?;
    let started = match UnixStream::connect(&paths.socket).await {
        // Someone else started a daemon meanwhile (a concurrent attach).
        Ok(s) => Ok(s),
        Err(_) => match spawn_daemon(&exe, &paths, &opts.daemon_args) {
            Ok(child) => wait_for_socket(&paths, child).await,
            Err(e) => Err(e),
        },
    };
    let failure = match started {
        Ok(mut s) => {
            let (preamble, same) = read_preamble(&mut s).await?;
            if same {
                return Ok(Attached::Link {
                    stream: s,
                    preamble,
                    report: None,
                });
            }
            format!(
                "another daemon of build {} took the socket",
                preamble_build(&preamble)
            )
        }
        Err(e) => e.to_string(),
    };
    // The new daemon did not come up: start the old one again, exactly as it ran.
    let Some(previous) = previous else {
        return Err(AttachError::Bridge(io::Error::other(format!(
            "{failure}; the previous daemon (build {old_build}) could not be restarted because its executable is gone"
        ))));
    };
    eprintln!(
        "reasonix-remote: the new daemon did not start ({failure}); restarting build {old_build}"
    );
    let child = relaunch(&previous, &paths)?;
    let mut s = wait_for_socket(&paths, child).await?;
    let (preamble, _) = read_preamble(&mut s).await?;
    Ok(Attached::Link {
        report: Some(AttachReport::Fallback {
            build_id: preamble_build(&preamble),
            reason: failure,
        }),
        stream: s,
        preamble,
    })
}

/// Connect to a daemon of our own build, replacing an idle daemon of another build (the
/// behaviour of a plain `attach` without a client tag).
pub async fn connect_own_build(
    workspace: &Path,
    daemon_args: &[String],
) -> Result<(UnixStream, Vec<u8>), AttachError> {
    let opts = AttachOptions {
        workspace: workspace.to_path_buf(),
        daemon_args: daemon_args.to_vec(),
        hello: None,
        tag: None,
        other_build: OtherBuild::Ask,
        mkdir: false,
    };
    match connect_daemon(&opts).await? {
        Attached::Link {
            stream, preamble, ..
        } => Ok((stream, preamble)),
        Attached::Report(r) => Err(AttachError::Bridge(io::Error::other(format!("{r:?}")))),
    }
}

/// The whole `attach` command: connect, print a report or bridge.
pub async fn run(opts: AttachOptions) -> Result<(), AttachError> {
    let mut stdout = tokio::io::stdout();
    if let Err(refusal) = crate::preflight::check(&opts.workspace, opts.mkdir) {
        // The report tells the client this is final; the error goes to stderr as well.
        if let Some(tag) = &opts.tag {
            let _ = stdout
                .write_all(report_line(tag, &refusal.report()).as_bytes())
                .await;
            let _ = stdout.flush().await;
        }
        return Err(AttachError::Refused(refusal));
    }
    match connect_daemon(&opts).await? {
        Attached::Report(report) => {
            let tag = opts.tag.as_deref().unwrap_or("-");
            stdout
                .write_all(report_line(tag, &report).as_bytes())
                .await
                .map_err(AttachError::Bridge)?;
            stdout.flush().await.map_err(AttachError::Bridge)?;
            Ok(())
        }
        Attached::Link {
            stream,
            preamble,
            report,
        } => {
            let mut head = Vec::new();
            if let (Some(r), Some(tag)) = (&report, &opts.tag) {
                head.extend_from_slice(report_line(tag, r).as_bytes());
            }
            head.extend_from_slice(&preamble);
            bridge(stream, head, opts.hello.unwrap_or_default()).await
        }
    }
}

/// Bridge stdin/stdout to the daemon until either side closes. `head` (the preamble already
/// read from the daemon) is written to stdout first, `hello` (a pipelined client frame) to
/// the daemon before stdin.
pub async fn bridge(stream: UnixStream, head: Vec<u8>, hello: Vec<u8>) -> Result<(), AttachError> {
    let (mut sr, mut sw) = stream.into_split();
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    let up = async {
        if !hello.is_empty() {
            sw.write_all(&hello).await?;
        }
        let r = tokio::io::copy(&mut stdin, &mut sw).await;
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut sw).await;
        r
    };
    let down = async {
        stdout.write_all(&head).await?;
        stdout.flush().await?;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = tokio::io::AsyncReadExt::read(&mut sr, &mut buf).await?;
            if n == 0 {
                return Ok::<_, io::Error>(());
            }
            stdout.write_all(&buf[..n]).await?;
            stdout.flush().await?;
        }
    };
    tokio::select! {
        r = up => r.map(|_| ()).map_err(AttachError::Bridge),
        r = down => r.map_err(AttachError::Bridge),
    }
}
