//! Warm attach in one exec: probe, version check and attach in ONE remote command.
//!
//! The client opens one exec channel running `sh -s` and sends a short script on its stdin.
//! The script `exec`s `~/.reasonix/remote/bin/reasonix-remote-<build> attach` when that file
//! is there, handing it the client's `Hello` frame in a here-document on fd 3 (the bridge
//! writes it to the daemon first), so the client never waits for the preamble before its
//! handshake: the `Welcome` comes back in the same round trip as the preamble. When the build
//! is missing the script prints the install probe (see [`crate::install::PROBE_SCRIPT`])
//! between report lines and exits; the client installs and runs the script again.
//!
//! Why a here-document and not the bytes after the script: `sh` (dash) reads its script in
//! blocks, so bytes sent after the script on the same stdin would be swallowed by the shell
//! instead of reaching the program it `exec`s. Nothing else is sent on stdin until the
//! `Welcome` arrived, and the script is one `{ ...; exit; }` group, which the shell reads to
//! its end before running any of it.
//!
//! The bridge's own reports (`REASONIX-ATTACH/1 <tag> <json>`, see
//! [`reasonix_forward::attach`]) and the `missing` block carry a random tag, so nothing a
//! login shell or rc file prints can be taken for them.

use std::io::Cursor;
use std::pin::Pin;

use reasonix_forward::attach::{parse_report_line, AttachReport, BusySession, ATTACH_REPORT_MAGIC};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::error::BootstrapError;
use crate::install::{
    lock_script, parse_probe, sh_quote, Probe, PROBE_SCRIPT, REMOTE_BIN_DIR, REMOTE_BIN_PREFIX,
};
use crate::prompter::Stage;
use crate::transport::ssh_exec::{ExecWriter, ExitInfo, ScriptOutput, SessionChannel, StderrTail};
use crate::transport::Remote;

/// Most bytes of shell noise skipped before the preamble or a report.
const MAX_NOISE: usize = 64 * 1024;
/// Prefix of the link preamble (`REASONIX-LINK/<version> <build>`).
const LINK_PREFIX: &str = "REASONIX-LINK/";

/// What to do about a running daemon of another build (`--other-build` of the bridge).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtherBuild {
    /// Replace it when idle, report it when a turn runs.
    Ask,
    /// Replace it even when a turn runs (interrupting it).
    Replace,
    /// Bridge to it as it is (the client attaches read-only).
    Attach,
}

impl OtherBuild {
    /// The bridge's `--other-build` value.
    pub fn flag(self) -> &'static str {
        match self {
            OtherBuild::Ask => "ask",
            OtherBuild::Replace => "replace",
            OtherBuild::Attach => "attach",
        }
    }
}

/// One attach attempt.
#[derive(Debug, Clone)]
pub struct AttachSpec {
    /// The build to attach with (the client's).
    pub build_id: String,
    /// Workspace path on the host as given (relative paths are relative to the home).
    pub workspace: String,
    /// Extra daemon arguments (tunables).
    pub daemon_args: Vec<String>,
    /// The client's encoded `Hello` frame (see `reasonix_forward::handshake::hello_frame`).
    pub hello: Vec<u8>,
    /// Policy for a daemon of another build.
    pub other_build: OtherBuild,
    /// Create the workspace folder when it does not exist (`--mkdir`).
    pub mkdir: bool,
}

/// `--workspace=PATH` as one word, so a workspace whose name starts with `-` stays a value
/// instead of being parsed as flags (shell quoting is `sh_quote`'s job).
pub fn workspace_flag(path: &str) -> String {
    format!("--workspace={path}")
}

/// The script for `spec` with report tag `tag`.
pub fn attach_script(spec: &AttachSpec, tag: &str) -> String {
    attach_script_after(spec, tag, None)
}

/// [`attach_script`], with `prelude` run first in a subshell (an install's finishing
/// script: its `${report}` lines carry the tag).
fn attach_script_after(spec: &AttachSpec, tag: &str, prelude: Option<&str>) -> String {
    let q = sh_quote;
    let mut args = vec!["attach".to_string(), workspace_flag(&spec.workspace)];
    args.extend(spec.daemon_args.iter().cloned());
    if spec.mkdir {
        args.push("--mkdir".into());
    }
    args.extend([
        "--tag".into(),
        tag.to_string(),
        "--other-build".into(),
        spec.other_build.flag().into(),
        "--hello-fd".into(),
        "3".into(),
    ]);
    let args: Vec<String> = args.iter().map(|a| q(a)).collect();
    // 76-column lines keep the here-document friendly to any shell's line handling.
    let hex = hex::encode(&spec.hello);
    let hello: Vec<&str> = hex
        .as_bytes()
        .chunks(76)
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect();
    let prelude = match prelude {
        Some(p) => format!("report='{ATTACH_REPORT_MAGIC} {tag} '\n(\n{p}\n) </dev/null\n"),
        None => String::new(),
    };
    // Missing: the probe, then the install lock (the install that follows holds it; one
    // that waited for another install finds the build there then, see `lock_script`).
    format!(
        "{{\n{prelude}b=\"$HOME\"/{dir}/{prefix}{build}\nif [ -x \"$b\" ]; then\n  exec \"$b\" {args} 3<<'__REASONIX_HELLO__'\n{hello}\n__REASONIX_HELLO__\nfi\n\
         echo '{magic} {tag} missing'\n(\n{probe}\n) </dev/null\n(\n{lock}\n) </dev/null\necho '{magic} {tag} end'\nexit 0\n}}\n",
        dir = REMOTE_BIN_DIR,
        prefix = REMOTE_BIN_PREFIX,
        build = spec.build_id,
        args = args.join(" "),
        hello = hello.join("\n"),
        magic = ATTACH_REPORT_MAGIC,
        probe = PROBE_SCRIPT.trim(),
        lock = lock_script("\"$HOME\"/.reasonix", &spec.build_id),
    )
}

/// What the remote side printed first.
#[derive(Debug)]
pub enum Scanned {
    /// The link preamble arrived: `prefix` holds the bytes read from its first byte on;
    /// `report` is a bridge report that came before it (a fallback).
    Preamble {
        /// Bytes from `REASONIX-LINK/` on.
        prefix: Vec<u8>,
        /// A report line seen before the preamble.
        report: Option<AttachReport>,
    },
    /// The bridge reported instead of linking.
    Report(AttachReport),
    /// The script found the build missing; this is what the probe printed.
    Missing(String),
    /// The output ended without any of these; `output` is what was printed (for errors).
    Ended {
        /// The first bytes printed (shell noise, error messages).
        output: String,
    },
    /// Too much came before anything we know.
    TooMuchNoise {
        /// The first bytes printed.
        output: String,
    },
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Read `reader` until the preamble, a report, the `missing` block or the end.
pub async fn scan<R: AsyncRead + Unpin>(reader: &mut R, tag: &str) -> std::io::Result<Scanned> {
    Ok(scan_after(reader, tag).await?.0)
}

/// [`scan`], with what a prelude's `verify=` line said (the last one, if any).
async fn scan_after<R: AsyncRead + Unpin>(
    reader: &mut R,
    tag: &str,
) -> std::io::Result<(Scanned, Option<String>)> {
    let verify_key = format!("{ATTACH_REPORT_MAGIC} {tag} verify=");
    let mut verify = None;
    let scanned = scan_lines(reader, tag, |line| {
        let at = line.find(&verify_key)?;
        verify = Some(line[at + verify_key.len()..].trim_end().to_string());
        Some(())
    })
    .await?;
    Ok((scanned, verify))
}

async fn scan_lines<R: AsyncRead + Unpin>(
    reader: &mut R,
    tag: &str,
    mut extra: impl FnMut(&str) -> Option<()>,
) -> std::io::Result<Scanned> {
    let missing = format!("{ATTACH_REPORT_MAGIC} {tag} missing");
    let end = format!("{ATTACH_REPORT_MAGIC} {tag} end");
    let mut buf: Vec<u8> = Vec::new();
    let mut noise: Vec<u8> = Vec::new();
    let mut skipped = 0usize;
    let mut report: Option<AttachReport> = None;
    let mut probe: Option<String> = None;
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        // The preamble may follow noise on the same line (a banner without a newline).
        if probe.is_none() {
            if let Some(i) = find(&buf, LINK_PREFIX.as_bytes()) {
                for line in buf[..i].split(|b| *b == b'\n') {
                    let line = String::from_utf8_lossy(line);
                    if let Some(Ok(r)) = parse_report_line(&line, tag) {
                        report = Some(r);
                    }
                }
                return Ok(Scanned::Preamble {
                    prefix: buf[i..].to_vec(),
                    report,
                });
            }
        }
        while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=nl).collect();
            let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
            if let Some(p) = probe.as_mut() {
                if text.trim_end() == end {
                    return Ok(Scanned::Missing(std::mem::take(p)));
                }
                p.push_str(&text);
                p.push('\n');
                continue;
            }
            if text.trim_end().ends_with(&missing) {
                probe = Some(String::new());
                continue;
            }
            if extra(&text).is_some() {
                continue;
            }
            match parse_report_line(&text, tag) {
                Some(Ok(r @ (AttachReport::Busy { .. } | AttachReport::Refused { .. }))) => {
                    return Ok(Scanned::Report(r))
                }
                Some(Ok(r @ AttachReport::Fallback { .. })) => report = Some(r),
                Some(Err(_)) | None => {
                    skipped += line.len();
                    if noise.len() < 2048 {
                        noise.extend_from_slice(&line);
                    }
                }
            }
        }
        if skipped + buf.len() > MAX_NOISE {
            return Ok(Scanned::TooMuchNoise {
                output: String::from_utf8_lossy(&noise).into_owned(),
            });
        }
        let n = reader.read(&mut chunk).await?;
        if n == 0 {
            noise.extend_from_slice(&buf);
            return Ok(Scanned::Ended {
                output: String::from_utf8_lossy(&noise).into_owned(),
            });
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A link stream after a successful attach.
pub struct AttachedStream {
    /// Bytes from the host, starting at the preamble.
    pub reader: Pin<Box<dyn AsyncRead + Send>>,
    /// Bytes to the host.
    pub writer: ExecWriter,
    /// Tail of the remote stderr.
    pub stderr: StderrTail,
    /// Becomes `Some` when the remote command ended.
    pub exit: tokio::sync::watch::Receiver<Option<ExitInfo>>,
    /// The bridge fell back to the old build (`Fallback` report), if it did.
    pub report: Option<AttachReport>,
}

impl std::fmt::Debug for AttachedStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttachedStream")
            .field("report", &self.report)
            .finish_non_exhaustive()
    }
}

/// What one attach attempt gave.
#[derive(Debug)]
pub enum AttachOutcome {
    /// Linked: the `Hello` is already with the daemon; read the preamble and `Welcome`.
    Linked(AttachedStream),
    /// Our build is not installed; the probe the script made, for the install.
    Missing(Probe),
    /// A daemon of another build runs a turn; nothing was changed.
    Busy {
        /// Its build.
        build_id: String,
        /// Sessions with a turn in progress.
        sessions: Vec<BusySession>,
    },
}

/// Run the attach script of `spec` on one exec channel (see the module docs).
pub async fn attach(conn: &dyn Remote, spec: &AttachSpec) -> Result<AttachOutcome, BootstrapError> {
    Ok(attach_with(conn, spec, None, None).await?.0)
}

/// [`attach`] with `prelude` (an install's finishing script) run first in the same exec;
/// also returns what its `verify=` line said.
/// `channel`, when given, is a session channel opened before (while the upload ran).
pub(crate) async fn attach_after(
    conn: &dyn Remote,
    spec: &AttachSpec,
    prelude: &str,
    channel: Option<SessionChannel>,
) -> Result<(AttachOutcome, Option<String>), BootstrapError> {
    attach_with(conn, spec, Some(prelude), channel).await
}

async fn attach_with(
    conn: &dyn Remote,
    spec: &AttachSpec,
    prelude: Option<&str>,
    channel: Option<SessionChannel>,
) -> Result<(AttachOutcome, Option<String>), BootstrapError> {
    let host = conn.host().to_string();
    let tag = hex::encode(rand::random::<[u8; 8]>());
    let script = attach_script_after(spec, &tag, prelude);
    let stream = match (channel, conn.as_ssh()) {
        (Some(ch), Some(ssh)) => ssh.exec_stream_on(ch, "sh -s").await?,
        _ => conn.exec_stream("sh -s").await?,
    };
    let crate::transport::ssh_exec::ExecStream {
        mut reader,
        mut writer,
        stderr,
        mut exit,
    } = stream;
    // A command that exits at once (a `kubectl` that is not signed in, a stopped container)
    // closes its stdin before the script is in: keep reading, so the user sees why it ended
    // (its stderr and exit status) rather than a bare "broken pipe".
    let mut write_error = tokio::io::AsyncWriteExt::write_all(&mut writer, script.as_bytes())
        .await
        .err();
    let (scanned, verify) = scan_after(&mut reader, &tag)
        .await
        .map_err(|e| BootstrapError::ssh(Stage::Attach, &host, "read the attach output", e))?;
    if let Some(e) = write_error {
        if !matches!(scanned, Scanned::Ended { .. }) {
            return Err(BootstrapError::ssh(
                Stage::Attach,
                &host,
                "send the attach script",
                e,
            ));
        }
        write_error = Some(e);
    }
    let outcome = match scanned {
        Scanned::Preamble { prefix, report } => {
            let reader: Pin<Box<dyn AsyncRead + Send>> =
                Box::pin(AsyncReadExt::chain(Cursor::new(prefix), reader));
            Ok(AttachOutcome::Linked(AttachedStream {
                reader,
                writer,
                stderr,
                exit,
                report,
            }))
        }
        Scanned::Report(AttachReport::Busy { build_id, sessions }) => {
            Ok(AttachOutcome::Busy { build_id, sessions })
        }
        Scanned::Report(AttachReport::Refused {
            problem,
            path,
            detail,
        }) => Err(BootstrapError::Workspace {
            host,
            problem,
            path,
            detail,
        }),
        Scanned::Report(AttachReport::Fallback { .. }) => Err(BootstrapError::remote(
            Stage::Attach,
            &host,
            "the attach bridge reported a fallback without a link",
        )),
        Scanned::Missing(probe_out) => {
            let out = ScriptOutput {
                stdout: probe_out,
                stderr: String::new(),
                exit_code: 0,
                noise: String::new(),
            };
            Ok(AttachOutcome::Missing(parse_probe(&host, &out)?))
        }
        Scanned::Ended { output } => {
            // Let the exit status arrive (it follows the end of the output).
            let status = tokio::time::timeout(std::time::Duration::from_secs(2), async {
                loop {
                    if let Some(e) = exit.borrow().clone() {
                        return Some(e);
                    }
                    if exit.changed().await.is_err() {
                        return None;
                    }
                }
            })
            .await
            .ok()
            .flatten();
            Err(BootstrapError::remote(
                Stage::Attach,
                &host,
                format!(
                    "the attach command ended without a link ({}{}); it printed {:?}; stderr: {:?}",
                    match status {
                        Some(ExitInfo::Status(c)) => format!("exit status {c}"),
                        Some(ExitInfo::Signal(s)) => format!("killed by signal {s}"),
                        Some(ExitInfo::Refused) => "the server refused to run `sh -s`".into(),
                        Some(ExitInfo::Closed) | None => "no exit status".into(),
                    },
                    match &write_error {
                        Some(e) => format!("; it stopped reading the attach script: {e}"),
                        None => String::new(),
                    },
                    tail(&output, 400),
                    tail(stderr.text().trim(), 400),
                ),
            ))
        }
        Scanned::TooMuchNoise { output } => Err(BootstrapError::remote(
            Stage::Attach,
            &host,
            format!(
                "more than {MAX_NOISE} bytes arrived before the link preamble: a shell rc file on the host prints too much. It printed {:?}",
                tail(&output, 300)
            ),
        )),
    };
    Ok((outcome?, verify))
}

fn tail(s: &str, n: usize) -> &str {
    let mut start = s.len().saturating_sub(n);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use reasonix_forward::attach::report_line;

    fn spec() -> AttachSpec {
        AttachSpec {
            build_id: "0.1.0-abc".into(),
            workspace: "my ws/it's".into(),
            daemon_args: vec!["--idle-timeout=5".into()],
            hello: (0u8..=255).collect(),
            other_build: OtherBuild::Ask,
            mkdir: false,
        }
    }

    async fn run_sh(script: &str, home: &std::path::Path) -> Vec<u8> {
        use tokio::io::AsyncWriteExt;
        let mut child = tokio::process::Command::new("sh")
            .arg("-s")
            .env("HOME", home)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(script.as_bytes()).await.unwrap();
        // Keep stdin open like the SSH channel does: the script must not wait for EOF.
        let out = tokio::time::timeout(std::time::Duration::from_secs(20), async {
            let mut out = Vec::new();
            child
                .stdout
                .take()
                .unwrap()
                .read_to_end(&mut out)
                .await
                .unwrap();
            out
        })
        .await
        .unwrap();
        drop(stdin);
        let _ = child.wait().await;
        out
    }

    #[tokio::test]
    async fn missing_build_prints_the_probe_between_tagged_lines() {
        let home = tempfile::tempdir().unwrap();
        let script = attach_script(&spec(), "t1");
        let out = run_sh(&script, home.path()).await;
        let noisy = [b"banner without newline ".as_slice(), &out].concat();
        let scanned = scan(&mut noisy.as_slice(), "t1").await.unwrap();
        let Scanned::Missing(p) = scanned else {
            panic!("{scanned:?}");
        };
        assert!(p.contains("os=Linux"), "{p}");
        assert!(
            p.contains(&format!("home={}", home.path().display())),
            "{p}"
        );
    }

    #[tokio::test]
    async fn present_build_is_execed_with_the_hello_on_fd_3() {
        // A fake "reasonix-remote" that prints its arguments and what fd 3 holds.
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join(REMOTE_BIN_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        let bin = dir.join(format!("{REMOTE_BIN_PREFIX}0.1.0-abc"));
        std::fs::write(
            &bin,
            "#!/bin/sh\nprintf 'REASONIX-LINK/1 fake\\n'\nfor a in \"$@\"; do printf '[%s]' \"$a\"; done\necho\ntr -d '\\n' <&3\n",
        )
        .unwrap();
        std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let s = spec();
        let out = run_sh(&attach_script(&s, "t2"), home.path()).await;
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("REASONIX-LINK/1 fake\n"), "{text}");
        assert!(
            text.contains("[attach][--workspace=my ws/it's][--idle-timeout=5][--tag][t2][--other-build][ask][--hello-fd][3]"),
            "{text}"
        );
        assert!(text.trim_end().ends_with(&hex::encode(&s.hello)), "{text}");
    }

    #[tokio::test]
    async fn scan_finds_reports_and_preamble_after_noise() {
        let busy = AttachReport::Busy {
            build_id: "old".into(),
            sessions: vec![],
        };
        let out = format!(
            "motd\nREASONIX-ATTACH/1 othertag {{}}\n{}",
            report_line("tg", &busy)
        );
        let s = scan(&mut out.as_bytes(), "tg").await.unwrap();
        assert!(matches!(s, Scanned::Report(r) if r == busy));
        let fb = AttachReport::Fallback {
            build_id: "old".into(),
            reason: "x".into(),
        };
        let out = format!("{}hi REASONIX-LINK/1 old\nFRAMES", report_line("tg", &fb));
        let Scanned::Preamble { prefix, report } = scan(&mut out.as_bytes(), "tg").await.unwrap()
        else {
            panic!()
        };
        assert_eq!(prefix, b"REASONIX-LINK/1 old\nFRAMES");
        assert_eq!(report, Some(fb));
        let s = scan(&mut "sh: 1: exec: nope: not found\n".as_bytes(), "tg")
            .await
            .unwrap();
        assert!(matches!(s, Scanned::Ended { output } if output.contains("not found")));
    }

    #[tokio::test]
    async fn a_command_that_exits_before_reading_reports_its_stderr() {
        // Like `kubectl exec` when not signed in: stdin is closed at once, so sending the
        // script may fail with a broken pipe (or land in the pipe first): either way the user
        // sees the command's own error and its exit status. A big `Hello` makes the script
        // larger than a pipe's buffer, so the broken pipe is certain.
        let mut big = spec();
        big.hello = vec![7; 300_000];
        for spec in [spec(), big] {
            let conn = crate::transport::exec::ExecConnection::new(
                vec![
                    "sh".into(),
                    "-c".into(),
                    "exec 0<&-; echo 'error: Unauthorized' >&2; exit 1".into(),
                ],
                "kube:dev/ws-7",
                std::sync::Arc::new(crate::NonInteractivePrompter),
            );
            let e = attach(&conn, &spec).await.unwrap_err().to_string();
            assert!(
                e.contains("Unauthorized") && e.contains("exit status 1"),
                "{e}"
            );
        }
    }
}
