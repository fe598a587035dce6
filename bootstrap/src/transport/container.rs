//! A container on an SSH host: `reasonix ssh me@devbox --container CTR:/path`. The SSH
//! connection runs `docker exec -i CTR sh …` (or `podman`) on the host for every script and
//! for the link, so probe, install and attach speak to a shell inside the container, the same
//! protocol as the local exec transport ([`super::exec`]); the host binary is uploaded through
//! the stream (SFTP would reach the host, not the container).
//!
//! The command runs under `sh -c` on the host whatever the user's login shell is. With no
//! engine named, the host's `docker` is used when it is on `PATH`, else `podman`.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::BootstrapError;
use crate::install::sh_quote;
use crate::prompter::{Prompter, Stage};
use crate::transport::ssh::SshConnection;
use crate::transport::ssh_exec::{cut, fence, ExecStream, ExitInfo, ScriptOutput, SCRIPT_TIMEOUT};
use crate::transport::Remote;

/// A container engine on the SSH host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// `docker` when it is on the host's `PATH`, else `podman`.
    Auto,
    /// `docker`.
    Docker,
    /// `podman`.
    Podman,
}

impl Engine {
    /// `auto`, `docker` or `podman`.
    pub fn parse(s: &str) -> Result<Engine, String> {
        match s {
            "auto" => Ok(Engine::Auto),
            "docker" => Ok(Engine::Docker),
            "podman" => Ok(Engine::Podman),
            other => Err(format!(
                "`{other}` is not a container engine; use docker, podman or auto"
            )),
        }
    }
}

/// The host command line that runs `tail` (`sh -s`, `sh -c LINE`) in `container` through
/// `engine`, for any login shell.
pub fn container_command(engine: Engine, container: &str, tail: &[&str]) -> String {
    let pick = match engine {
        Engine::Docker => "e=docker".to_string(),
        Engine::Podman => "e=podman".to_string(),
        Engine::Auto => "e=$(command -v docker || command -v podman) || { echo 'reasonix: neither docker nor podman is on PATH on this host; install one, or name it with --engine' >&2; exit 127; }".to_string(),
    };
    let script = format!("{pick}; c=$1; shift; exec \"$e\" exec -i \"$c\" \"$@\"");
    let mut line = format!("sh -c {} sh {}", sh_quote(&script), sh_quote(container));
    for w in tail {
        line.push(' ');
        line.push_str(&sh_quote(w));
    }
    line
}

/// A container reached through an SSH connection (see the module docs).
pub struct ContainerOnHost {
    ssh: SshConnection,
    engine: Engine,
    container: String,
    label: String,
}

impl std::fmt::Debug for ContainerOnHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerOnHost")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl ContainerOnHost {
    /// `container` on the host of `ssh`, named `host/container` in messages.
    pub fn new(ssh: SshConnection, engine: Engine, container: &str) -> Self {
        let label = format!("{}/{container}", ssh.host());
        Self {
            ssh,
            engine,
            container: container.to_string(),
            label,
        }
    }

    /// Failures to open the SSH channel are the SSH host's and are named so.
    async fn stream(&self, tail: &[&str]) -> Result<ExecStream, BootstrapError> {
        let line = container_command(self.engine, &self.container, tail);
        self.ssh.exec_stream(&line).await
    }
}

#[async_trait::async_trait]
impl Remote for ContainerOnHost {
    fn host(&self) -> &str {
        &self.label
    }

    fn prompter(&self) -> &Arc<dyn Prompter> {
        self.ssh.prompter()
    }

    async fn run_script_at(
        &self,
        stage: Stage,
        script: &str,
    ) -> Result<ScriptOutput, BootstrapError> {
        let marker = format!("__REASONIX_{}_", hex::encode(rand::random::<[u8; 16]>()));
        let mut s = self.stream(&["sh", "-s"]).await?;
        let run = async {
            // A failed write shows as missing fences below (with the command's stderr).
            let _ = s.writer.write_all(fence(script, &marker).as_bytes()).await;
            let _ = s.writer.shutdown().await;
            let mut out = Vec::new();
            let _ = s.reader.read_to_end(&mut out).await;
            let exit = s.wait_exit().await;
            (out, exit)
        };
        let (out, exit) = tokio::time::timeout(SCRIPT_TIMEOUT, run)
            .await
            .map_err(|_| BootstrapError::Timeout {
                stage,
                host: self.label.clone(),
                secs: SCRIPT_TIMEOUT.as_secs(),
            })?;
        let stdout_raw = String::from_utf8_lossy(&out);
        let stderr_raw = s.stderr.text();
        let Some((stdout, noise, code)) = cut(&stdout_raw, &marker) else {
            return Err(BootstrapError::remote(
                stage,
                &self.label,
                format!(
                    "the container did not run a shell ({}): {}. Check on the host that the container `{}` is running (`docker ps` / `podman ps`), that you may use the engine, and that the image has /bin/sh",
                    match exit {
                        ExitInfo::Status(c) => format!("exit status {c}"),
                        ExitInfo::Signal(s) => format!("killed by signal {s}"),
                        ExitInfo::Refused => "the server refused the command".into(),
                        ExitInfo::Closed => "no exit status".into(),
                    },
                    stderr_raw.trim(),
                    self.container
                ),
            ));
        };
        let stderr = cut(&stderr_raw, &marker)
            .map(|(s, _, _)| s)
            .unwrap_or_else(|| stderr_raw.to_string());
        Ok(ScriptOutput {
            stdout,
            stderr,
            exit_code: code.unwrap_or(-1),
            noise,
        })
    }

    async fn exec_stream(&self, command: &str) -> Result<ExecStream, BootstrapError> {
        if command == "sh -s" {
            self.stream(&["sh", "-s"]).await
        } else {
            self.stream(&["sh", "-c", command]).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command line, run by a real `sh` as a login shell would, reaches the engine with
    /// the container and the tail intact, whatever they contain.
    #[test]
    fn the_command_line_survives_a_shell() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for engine in ["docker", "podman"] {
            let p = bin.join(engine);
            std::fs::write(
                &p,
                format!(
                    "#!/bin/sh\necho {engine}; for a in \"$@\"; do printf '[%s]' \"$a\"; done\n"
                ),
            )
            .unwrap();
            let mut perms = std::fs::metadata(&p).unwrap().permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
            std::fs::set_permissions(&p, perms).unwrap();
        }
        let run = |line: &str, path: &str| {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(line)
                .env("PATH", path)
                .output()
                .unwrap();
            (
                String::from_utf8_lossy(&out.stdout).to_string(),
                String::from_utf8_lossy(&out.stderr).to_string(),
                out.status.code(),
            )
        };
        let path = format!("{}:/usr/bin:/bin", bin.display());
        let tricky = "it's $HOME; `x` \"q\"";
        let (out, _, _) = run(
            &container_command(Engine::Podman, "my ctr", &["sh", "-c", tricky]),
            &path,
        );
        assert_eq!(out, format!("podman\n[exec][-i][my ctr][sh][-c][{tricky}]"));
        let (out, _, _) = run(&container_command(Engine::Auto, "c", &["sh", "-s"]), &path);
        assert_eq!(out, "docker\n[exec][-i][c][sh][-s]");
        std::fs::remove_file(bin.join("docker")).unwrap();
        let (out, _, _) = run(&container_command(Engine::Auto, "c", &["sh", "-s"]), &path);
        assert_eq!(out, "podman\n[exec][-i][c][sh][-s]");
        // A PATH with a shell and no engine at all.
        let bare = dir.path().join("bare");
        std::fs::create_dir_all(&bare).unwrap();
        std::os::unix::fs::symlink("/bin/sh", bare.join("sh")).unwrap();
        let (_, err, code) = run(
            &container_command(Engine::Auto, "c", &["sh", "-s"]),
            &bare.display().to_string(),
        );
        assert_eq!(code, Some(127));
        assert!(err.contains("neither docker nor podman"), "{err}");
        assert!(Engine::parse("lxc")
            .unwrap_err()
            .contains("docker, podman or auto"));
    }
}
