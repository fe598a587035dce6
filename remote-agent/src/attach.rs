//! `reasonix-remote attach`: make sure the workspace daemon runs, then bridge this process's
//! stdin/stdout (the SSH channel or the local pipes) to the daemon's socket, byte for byte.
//!
//! The bridge is deliberately dumb: the link protocol (preamble, handshake, frames) is spoken
//! end to end between the client and the daemon, so a bridge that dies with its SSH channel
//! loses nothing — the daemon keeps the link for a resume.

use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::net::UnixStream;

use crate::paths::HostPaths;

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
    #[error("the reasonix-remote daemon did not open its socket {socket} within {secs} s; see its log at {log}")]
    NoSocket {
        /// Socket path.
        socket: String,
        /// Log path.
        log: String,
        /// How long we waited.
        secs: u64,
    },
    /// Bridging failed.
    #[error("bridge failed: {0}")]
    Bridge(io::Error),
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
    let exe = std::env::current_exe()
        .map_err(|e| AttachError::Spawn(e, paths.log_file.display().to_string()))?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(
            paths
                .home
                .join("logs")
                .join(format!("daemon-{}.stderr", paths.key)),
        )
        .map_err(|e| AttachError::Spawn(e, paths.log_file.display().to_string()))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("daemon")
        .arg("--workspace")
        .arg(&paths.workspace)
        .args(daemon_args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .current_dir(&paths.workspace);
    // SAFETY: setsid is async-signal-safe; it detaches the daemon from our session so it
    // survives the SSH channel (and the terminal) going away.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| AttachError::Spawn(e, paths.log_file.display().to_string()))?;
    // MCP servers start before the socket opens (startup timeout 30 s each, in parallel).
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        if let Ok(s) = UnixStream::connect(&paths.socket).await {
            // Reap the child in the background if it ever exits; it is a daemon now.
            std::thread::spawn(move || {
                let _ = child.wait();
            });
            return Ok((s, paths));
        }
        if let Ok(Some(_)) = child.try_wait() {
            // Lost a race with another daemon start: its socket will show up shortly.
            if Instant::now() > deadline {
                break;
            }
        }
        if Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(AttachError::NoSocket {
        socket: paths.socket.display().to_string(),
        log: paths.log_file.display().to_string(),
        secs: 45,
    })
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

/// Connect to a daemon of our own build: a daemon left running by another build (an upgrade)
/// is asked to exit (SIGTERM; its sessions are journaled) and replaced.
pub async fn connect_own_build(
    workspace: &Path,
    daemon_args: &[String],
) -> Result<(UnixStream, Vec<u8>), AttachError> {
    for _ in 0..3 {
        let (mut stream, paths) = connect_or_spawn(workspace, daemon_args).await?;
        let (preamble, same) = read_preamble(&mut stream).await?;
        if same {
            return Ok((stream, preamble));
        }
        drop(stream);
        let old = std::fs::read(&paths.daemon_state)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["pid"].as_u64());
        eprintln!(
            "reasonix-remote: replacing a daemon of another build ({}) with build {}",
            String::from_utf8_lossy(&preamble).trim(),
            reasonix_forward::build_id()
        );
        if let Some(pid) = old {
            // SAFETY: plain kill(2) on a pid read from our own state file.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while paths.socket.exists() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Err(AttachError::Bridge(io::Error::other(
        "a daemon of another build keeps answering on the workspace socket; stop it with `reasonix remote stop`",
    )))
}

/// Bridge stdin/stdout to the daemon until either side closes. `preamble` (already read from
/// the daemon) is written to stdout first.
pub async fn bridge(stream: UnixStream, preamble: Vec<u8>) -> Result<(), AttachError> {
    let (mut sr, mut sw) = stream.into_split();
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    let up = async {
        let r = tokio::io::copy(&mut stdin, &mut sw).await;
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut sw).await;
        r
    };
    let down = async {
        tokio::io::AsyncWriteExt::write_all(&mut stdout, &preamble).await?;
        tokio::io::AsyncWriteExt::flush(&mut stdout).await?;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = tokio::io::AsyncReadExt::read(&mut sr, &mut buf).await?;
            if n == 0 {
                return Ok::<_, io::Error>(());
            }
            tokio::io::AsyncWriteExt::write_all(&mut stdout, &buf[..n]).await?;
            tokio::io::AsyncWriteExt::flush(&mut stdout).await?;
        }
    };
    tokio::select! {
        r = up => r.map(|_| ()).map_err(AttachError::Bridge),
        r = down => r.map_err(AttachError::Bridge),
    }
}
