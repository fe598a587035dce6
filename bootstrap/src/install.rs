//! Probe the host, install the matching `reasonix-remote`, and the `remote status / stop /
//! uninstall` helpers.
//!
//! What lands on the host (all under the remote user's home, nothing needs root):
//! - `~/.reasonix/remote/bin/reasonix-remote-<build-id>` (mode 0755, dirs 0700), at most two
//!   versions;
//! - `~/.reasonix/remote/install.lock` (a directory) while an install runs;
//! - temporary uploads `~/.reasonix/remote/bin/.reasonix-remote-<build-id>.tmp-<random>[.gz]`,
//!   which are never executed and are removed by the next install.
//!
//! The daemon itself (not this module) creates `~/.reasonix/{sessions,logs,run}` and a run
//! directory under `$XDG_RUNTIME_DIR/reasonix` or `/tmp/reasonix-<uid>`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::error::BootstrapError;
use crate::exec::ScriptOutput;
use crate::prompter::Stage;
use crate::session::SshConnection;
use reasonix_sftpfs::Fs;

/// Directory of installed binaries, relative to the remote home.
pub const REMOTE_BIN_DIR: &str = ".reasonix/remote/bin";
/// Binary name prefix on the host.
pub const REMOTE_BIN_PREFIX: &str = "reasonix-remote-";
/// How often the install lock is refreshed while an upload runs (the lock goes stale after
/// 60 s without refresh).
const LOCK_REFRESH: Duration = Duration::from_secs(15);

/// A host platform we ship a binary for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// Linux on x86_64.
    X86_64Linux,
    /// Linux on aarch64.
    Aarch64Linux,
}

impl Target {
    /// Rust target triple of the static binary.
    pub fn triple(self) -> &'static str {
        match self {
            Target::X86_64Linux => "x86_64-unknown-linux-musl",
            Target::Aarch64Linux => "aarch64-unknown-linux-musl",
        }
    }

    /// Map `uname -s` / `uname -m` output.
    pub fn from_uname(os: &str, arch: &str) -> Option<Target> {
        if os != "Linux" {
            return None;
        }
        match arch {
            "x86_64" | "amd64" => Some(Target::X86_64Linux),
            "aarch64" | "arm64" | "armv8l" => Some(Target::Aarch64Linux),
            _ => None,
        }
    }

    /// Every target.
    pub fn all() -> [Target; 2] {
        [Target::X86_64Linux, Target::Aarch64Linux]
    }
}

/// Finds the static host binary for a target on the laptop.
///
/// Search order for target triple `T` (e.g. `x86_64-unknown-linux-musl`):
/// 1. `$REASONIX_REMOTE_BIN_<T upper-cased, '-' → '_'>` (a file path);
/// 2. `$REASONIX_REMOTE_DIR/reasonix-remote-T`;
/// 3. `<dir of the running executable>/reasonix-remote-T`;
/// 4. `<dir of the running executable>/../share/reasonix/reasonix-remote-T`;
/// 5. extra directories given with [`ShippedBinaries::with_dir`] (tests, dev builds).
#[derive(Debug, Clone, Default)]
pub struct ShippedBinaries {
    extra_dirs: Vec<PathBuf>,
    explicit: Vec<(Target, PathBuf)>,
}

impl ShippedBinaries {
    /// The default search (environment and next to the current executable).
    pub fn new() -> Self {
        Self::default()
    }

    /// Also look in `dir` for `reasonix-remote-<triple>`.
    pub fn with_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.extra_dirs.push(dir.into());
        self
    }

    /// Use exactly `path` for `target` (checked first).
    pub fn with_file(mut self, target: Target, path: impl Into<PathBuf>) -> Self {
        self.explicit.push((target, path.into()));
        self
    }

    /// Candidate paths, in search order.
    pub fn candidates(&self, target: Target) -> Vec<PathBuf> {
        let name = format!("{REMOTE_BIN_PREFIX}{}", target.triple());
        let mut out: Vec<PathBuf> = self
            .explicit
            .iter()
            .filter(|(t, _)| *t == target)
            .map(|(_, p)| p.clone())
            .collect();
        let var = format!(
            "REASONIX_REMOTE_BIN_{}",
            target.triple().replace('-', "_").to_uppercase()
        );
        if let Some(p) = std::env::var_os(&var).filter(|v| !v.is_empty()) {
            out.push(PathBuf::from(p));
        }
        if let Some(d) = std::env::var_os("REASONIX_REMOTE_DIR").filter(|v| !v.is_empty()) {
            out.push(PathBuf::from(d).join(&name));
        }
        if let Some(dir) = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf))
        {
            out.push(dir.join(&name));
            out.push(dir.join("../share/reasonix").join(&name));
        }
        for d in &self.extra_dirs {
            out.push(d.join(&name));
        }
        out
    }

    /// The first existing candidate.
    pub fn locate(&self, target: Target) -> Result<PathBuf, BootstrapError> {
        let candidates = self.candidates(target);
        candidates
            .iter()
            .find(|p| p.is_file())
            .cloned()
            .ok_or_else(|| BootstrapError::MissingBinary {
                target: target.triple().to_string(),
                searched: candidates,
            })
    }
}

/// One installed version found on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledVersion {
    /// Build id (file name without the prefix).
    pub build_id: String,
    /// Size in bytes.
    pub size: u64,
}

/// What the probe learned about the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// Platform.
    pub target: Target,
    /// `uname -s`.
    pub os: String,
    /// `uname -m`.
    pub arch: String,
    /// Remote `$HOME` (absolute).
    pub home: String,
    /// Installed versions.
    pub installed: Vec<InstalledVersion>,
    /// Free space in the home's filesystem, when `df` worked.
    pub free_bytes: Option<u64>,
    /// Command computing SHA-256 (`sha256sum` or `shasum -a 256`), if any.
    pub sha256_tool: Option<String>,
    /// `gzip` is available (uploads are compressed).
    pub gzip: bool,
    /// `bwrap` is available (sandbox possible).
    pub bwrap: bool,
}

/// Prints what the host offers as `key=value` lines (see [`parse_probe`]).
pub(crate) const PROBE_SCRIPT: &str = r#"
echo "os=$(uname -s)"
echo "arch=$(uname -m)"
echo "home=$HOME"
for f in "$HOME/.reasonix/remote/bin/reasonix-remote-"*; do
  [ -f "$f" ] && echo "installed=${f##*/reasonix-remote-} $(wc -c < "$f" | tr -d ' ')"
done
df -Pk "$HOME" 2>/dev/null | awk 'NR==2 {print "free_kb=" $4}'
if command -v sha256sum >/dev/null 2>&1; then echo "sha256=sha256sum";
elif command -v shasum >/dev/null 2>&1; then echo "sha256=shasum -a 256"; fi
command -v gzip >/dev/null 2>&1 && echo "gzip=1"
command -v bwrap >/dev/null 2>&1 && echo "bwrap=1"
exit 0
"#;

/// The command line for [`SshConnection::exec_stream`] that runs the installed binary with
/// `args`, each single-quoted (safe for sh, bash, zsh, tcsh and fish login shells).
pub fn launch_command(install: &RemoteInstall, args: &[&str]) -> String {
    let mut cmd = sh_quote(&install.path);
    for a in args {
        cmd.push(' ');
        cmd.push_str(&sh_quote(a));
    }
    cmd
}

/// Single-quote `s` for sh.
pub(crate) fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn valid_build_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+'))
}

/// Probe the host (one fenced script).
pub async fn probe(conn: &SshConnection) -> Result<Probe, BootstrapError> {
    conn.prompter()
        .progress(Stage::Probe, "probing the host", None);
    let out = conn.run_script_at(Stage::Probe, PROBE_SCRIPT).await?;
    parse_probe(conn.host(), &out)
}

/// Read what [`PROBE_SCRIPT`] printed (also embedded in the attach script, see
/// [`crate::attach`]).
pub(crate) fn parse_probe(host: &str, out: &ScriptOutput) -> Result<Probe, BootstrapError> {
    let host = host.to_string();
    let mut os = String::new();
    let mut arch = String::new();
    let mut home = String::new();
    let mut installed = Vec::new();
    let mut free_bytes = None;
    let mut sha256_tool = None;
    let mut gzip = false;
    let mut bwrap = false;
    for line in out.stdout.lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        match k {
            "os" => os = v.trim().to_string(),
            "arch" => arch = v.trim().to_string(),
            "home" => home = v.to_string(),
            "installed" => {
                if let Some((id, size)) = v.rsplit_once(' ') {
                    if valid_build_id(id) {
                        installed.push(InstalledVersion {
                            build_id: id.to_string(),
                            size: size.parse().unwrap_or(0),
                        });
                    }
                }
            }
            "free_kb" => free_bytes = v.trim().parse::<u64>().ok().map(|k| k * 1024),
            "sha256" => sha256_tool = Some(v.to_string()),
            "gzip" => gzip = true,
            "bwrap" => bwrap = true,
            _ => {}
        }
    }
    if home.is_empty() || !home.starts_with('/') {
        return Err(BootstrapError::remote(
            Stage::Probe,
            &host,
            format!(
                "the host did not report an absolute $HOME (got {home:?}); stderr: {}",
                out.stderr.trim()
            ),
        ));
    }
    let target =
        Target::from_uname(&os, &arch).ok_or_else(|| BootstrapError::UnsupportedPlatform {
            host: host.clone(),
            os: os.clone(),
            arch: arch.clone(),
        })?;
    Ok(Probe {
        target,
        os,
        arch,
        home,
        installed,
        free_bytes,
        sha256_tool,
        gzip,
        bwrap,
    })
}

/// The result of [`install`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteInstall {
    /// Absolute path of the binary on the host.
    pub path: String,
    /// Build id installed.
    pub build_id: String,
    /// SHA-256 (hex) of the binary.
    pub sha256: String,
    /// True if this call uploaded it; false if an identical binary was reused.
    pub uploaded: bool,
    /// Bytes sent over SFTP (compressed size when gzip was used).
    pub bytes_sent: u64,
    /// What the probe found.
    pub probe: Probe,
}

fn sha256_file(path: &Path) -> Result<(String, u64), BootstrapError> {
    let local = |e: std::io::Error| BootstrapError::Local {
        stage: Stage::Upload,
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let mut f = std::fs::File::open(path).map_err(local)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut n_total = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(local)?;
        if n == 0 {
            break;
        }
        n_total += n as u64;
        h.update(&buf[..n]);
    }
    Ok((hex::encode(h.finalize()), n_total))
}

fn gzip_file(path: &Path) -> Result<Vec<u8>, BootstrapError> {
    let data = std::fs::read(path).map_err(|e| BootstrapError::Local {
        stage: Stage::Upload,
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
    std::io::Write::write_all(&mut enc, &data)
        .and_then(|_| enc.finish())
        .map_err(|e| BootstrapError::Local {
            stage: Stage::Upload,
            path: path.to_path_buf(),
            reason: format!("gzip: {e}"),
        })
}

/// Shell snippet printing the SHA-256 of `$1`-like path `p` as `sha=<hex>` (or nothing).
fn sha_line(tool: &str, p: &str) -> String {
    format!("{tool} {p} 2>/dev/null | awk '{{print \"sha=\" $1}}'")
}

fn parse_kv<'a>(out: &'a str, key: &str) -> Option<&'a str> {
    out.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

/// Install (or reuse) `reasonix-remote-<build_id>` on the host behind `conn`.
///
/// Serialised per host user by a lock directory (stale after 60 s without refresh); a second
/// concurrent caller waits and then reuses the first one's install. Progress goes to the
/// connection's prompter ([`Stage::Probe`], [`Stage::Upload`] with byte counts,
/// [`Stage::Verify`]).
pub async fn install(
    conn: &SshConnection,
    build_id: &str,
    binaries: &ShippedBinaries,
) -> Result<RemoteInstall, BootstrapError> {
    install_probed(conn, build_id, binaries, None).await
}

/// [`install`], reusing a probe already made (the attach script reports one when the build
/// is missing, see [`crate::attach`]); `None` probes first.
pub async fn install_probed(
    conn: &SshConnection,
    build_id: &str,
    binaries: &ShippedBinaries,
    probed: Option<Probe>,
) -> Result<RemoteInstall, BootstrapError> {
    let host = conn.host().to_string();
    if !valid_build_id(build_id) {
        return Err(BootstrapError::remote(
            Stage::Upload,
            &host,
            format!("invalid build id {build_id:?}"),
        ));
    }
    let probe = match probed {
        Some(p) => p,
        None => probe(conn).await?,
    };
    let Some(tool) = probe.sha256_tool.clone() else {
        return Err(BootstrapError::remote(
            Stage::Verify,
            &host,
            "the host has neither sha256sum nor shasum, so an upload cannot be verified; install coreutils (or perl's shasum)",
        ));
    };
    let local = binaries.locate(probe.target)?;
    let (sha, size) = sha256_file(&local)?;
    if let Some(free) = probe.free_bytes {
        // Temp copy + compressed copy + final file must fit.
        if free < size.saturating_mul(2) {
            return Err(BootstrapError::remote(
                Stage::Upload,
                &host,
                format!(
                    "not enough space in {}: {} MiB free, {} MiB needed; free some space and retry",
                    probe.home,
                    free / (1 << 20),
                    size.saturating_mul(2) / (1 << 20)
                ),
            ));
        }
    }
    let home = probe.home.clone();
    let bin_dir = format!("{home}/{REMOTE_BIN_DIR}");
    let root = format!("{home}/.reasonix/remote");
    let lock = format!("{root}/install.lock");
    let final_path = format!("{bin_dir}/{REMOTE_BIN_PREFIX}{build_id}");
    let q = sh_quote;

    // 1. Take the lock and check the final path, in one round trip.
    let take_lock = format!(
        r#"umask 077
mkdir -p {bin} && chmod 700 {home_rx} {root} {bin} || exit 20
n=0
while ! mkdir {lock} 2>/dev/null; do
  if [ -n "$(find {lock} -maxdepth 0 -mmin +1 2>/dev/null)" ]; then
    rmdir {lock} 2>/dev/null || rm -rf {lock}
    continue
  fi
  n=$((n+1))
  [ $n -ge 120 ] && {{ echo lock=busy; exit 0; }}
  sleep 1
done
echo lock=held
# Anything temporary left here is from an interrupted install: we hold the lock.
rm -f {bin}/.{prefix}*.tmp-* 2>/dev/null
[ -f {final} ] && {sha_final}
exit 0"#,
        bin = q(&bin_dir),
        home_rx = q(&format!("{home}/.reasonix")),
        root = q(&root),
        lock = q(&lock),
        prefix = REMOTE_BIN_PREFIX,
        final = q(&final_path),
        sha_final = sha_line(&tool, &q(&final_path)),
    );
    conn.prompter()
        .progress(Stage::Upload, "waiting for the install lock", None);
    let out = conn.run_script_at(Stage::Upload, &take_lock).await?;
    if out.exit_code != 0 {
        return Err(BootstrapError::remote(
            Stage::Upload,
            &host,
            format!(
                "cannot create {bin_dir} (exit {}): {}",
                out.exit_code,
                out.stderr.trim()
            ),
        ));
    }
    match parse_kv(&out.stdout, "lock") {
        Some("held") => {}
        _ => {
            return Err(BootstrapError::remote(
                Stage::Upload,
                &host,
                format!("another install on this host holds {lock} and did not finish within 2 minutes; retry, or remove the directory if no install is running"),
            ))
        }
    }
    let release = format!("rmdir {} 2>/dev/null; exit 0", q(&lock));
    let result = install_locked(
        conn,
        &probe,
        &tool,
        &local,
        &sha,
        size,
        build_id,
        &final_path,
        &lock,
        parse_kv(&out.stdout, "sha").map(str::to_string),
    )
    .await;
    // Release even on failure; a lost release goes stale after 60 s.
    let _ = conn.run_script_at(Stage::Upload, &release).await;
    result
}

#[allow(clippy::too_many_arguments)]
async fn install_locked(
    conn: &SshConnection,
    probe: &Probe,
    tool: &str,
    local: &Path,
    sha: &str,
    size: u64,
    build_id: &str,
    final_path: &str,
    lock: &str,
    existing_sha: Option<String>,
) -> Result<RemoteInstall, BootstrapError> {
    let host = conn.host().to_string();
    let q = sh_quote;
    let prune = format!(
        // Keep the installed version and the newest other one.
        "cd {bin} && ls -t {prefix}* 2>/dev/null | grep -v -x -F {keep} | tail -n +2 | while IFS= read -r f; do rm -f \"./$f\"; done; exit 0",
        bin = q(&format!("{}/{REMOTE_BIN_DIR}", probe.home)),
        prefix = REMOTE_BIN_PREFIX,
        keep = q(&format!("{REMOTE_BIN_PREFIX}{build_id}")),
    );
    if existing_sha.as_deref() == Some(sha) {
        conn.prompter().progress(
            Stage::Verify,
            &format!("reusing installed reasonix-remote {build_id}"),
            None,
        );
        let _ = conn.run_script_at(Stage::Upload, &prune).await;
        return Ok(RemoteInstall {
            path: final_path.to_string(),
            build_id: build_id.to_string(),
            sha256: sha.to_string(),
            uploaded: false,
            bytes_sent: 0,
            probe: probe.clone(),
        });
    }
    if let Some(bad) = &existing_sha {
        tracing::warn!(host = %host, path = final_path, found = %bad, expected = sha, "installed binary is corrupt; replacing it");
    }

    // 2. Upload to a temporary name in the same directory.
    let tmp = format!(
        "{}/.{REMOTE_BIN_PREFIX}{build_id}.tmp-{:016x}",
        probe.home.trim_end_matches('/').to_string() + "/" + REMOTE_BIN_DIR,
        rand::random::<u64>()
    );
    let (payload, upload_path): (Vec<u8>, String) = if probe.gzip {
        (gzip_file(local)?, format!("{tmp}.gz"))
    } else {
        let data = std::fs::read(local).map_err(|e| BootstrapError::Local {
            stage: Stage::Upload,
            path: local.to_path_buf(),
            reason: e.to_string(),
        })?;
        (data, tmp.clone())
    };
    let sftp = conn.sftp().await?;
    let total = payload.len() as u64;
    let prompter = conn.prompter().clone();
    let label = format!(
        "uploading reasonix-remote {build_id} ({} MiB{})",
        (total + (1 << 19)) >> 20,
        if probe.gzip { ", gzip" } else { "" }
    );
    prompter.progress(Stage::Upload, &label, Some((0, total)));
    let upload = async {
        let mut src: &[u8] = &payload;
        sftp.write_stream(&upload_path, &mut src, 0o600, &|done| {
            prompter.progress(Stage::Upload, &label, Some((done, total)))
        })
        .await
    };
    // Keep the lock fresh while the upload runs (slow links take longer than 60 s).
    let refresh = async {
        loop {
            tokio::time::sleep(LOCK_REFRESH).await;
            let _ = conn
                .run_script_at(
                    Stage::Upload,
                    &format!("touch {} 2>/dev/null; exit 0", q(lock)),
                )
                .await;
        }
    };
    let sent = tokio::select! {
        r = upload => r,
        _ = refresh => unreachable_refresh(),
    };
    let sent = match sent {
        Ok(n) => n,
        Err(e) => {
            let _ = sftp.remove(&upload_path).await;
            return Err(BootstrapError::remote(
                Stage::Upload,
                &host,
                format!("SFTP upload to {upload_path} failed: {e}. Is the sftp subsystem enabled on the host (Subsystem sftp in sshd_config)?"),
            ));
        }
    };

    // 3. Decompress, verify, chmod, move into place, prune — one round trip.
    conn.prompter()
        .progress(Stage::Verify, "verifying SHA-256 on the host", None);
    let finish = format!(
        r#"set -u
tmp={tmp}
{decompress}
sha=$({tool} "$tmp" 2>/dev/null | awk '{{print $1}}')
if [ "$sha" != {sha} ]; then rm -f "$tmp" {gz}; echo "verify=mismatch $sha"; exit 0; fi
chmod 755 "$tmp" && mv -f "$tmp" {final} || {{ rm -f "$tmp"; echo verify=mvfailed; exit 0; }}
echo verify=ok
exit 0"#,
        tmp = q(&tmp),
        decompress = if probe.gzip {
            format!(
                "gzip -dc {gz} > \"$tmp\" || {{ rm -f \"$tmp\" {gz}; echo verify=gunzip; exit 0; }}\nrm -f {gz}",
                gz = q(&upload_path)
            )
        } else {
            String::new()
        },
        gz = if probe.gzip { q(&upload_path) } else { String::new() },
        tool = tool,
        sha = q(sha),
        final = q(final_path),
    );
    let out = conn.run_script_at(Stage::Verify, &finish).await?;
    match parse_kv(&out.stdout, "verify") {
        Some("ok") => {}
        Some(other) => {
            return Err(BootstrapError::remote(
                Stage::Verify,
                &host,
                format!(
                    "the uploaded binary did not verify ({other}; expected SHA-256 {sha}). The upload was discarded; retry, and check disk space on the host. stderr: {}",
                    out.stderr.trim()
                ),
            ))
        }
        None => {
            return Err(BootstrapError::remote(
                Stage::Verify,
                &host,
                format!("verification script failed: {}", out.stderr.trim()),
            ))
        }
    }
    let _ = conn.run_script_at(Stage::Upload, &prune).await;
    tracing::info!(host = %host, path = final_path, bytes = sent, original = size, "installed reasonix-remote");
    Ok(RemoteInstall {
        path: final_path.to_string(),
        build_id: build_id.to_string(),
        sha256: sha.to_string(),
        uploaded: true,
        bytes_sent: sent,
        probe: probe.clone(),
    })
}

/// The refresh loop never ends; this keeps the `select!` arms the same type.
fn unreachable_refresh() -> Result<u64, reasonix_sftpfs::FsError> {
    Err(reasonix_sftpfs::FsError::Other {
        op: "upload",
        path: String::new(),
        message: "lock refresher ended".into(),
    })
}

/// A `reasonix-remote` process on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteProcess {
    /// Process id.
    pub pid: u32,
    /// Command line.
    pub command: String,
}

/// What `reasonix remote status` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteStatus {
    /// Installed versions.
    pub installed: Vec<InstalledVersion>,
    /// Running `reasonix-remote` processes of this user.
    pub processes: Vec<RemoteProcess>,
    /// Disk used by `~/.reasonix`, in bytes.
    pub disk_used: u64,
    /// Number of session journal directories under `~/.reasonix/sessions`.
    pub session_dirs: u32,
    /// `bwrap` present on the host.
    pub bwrap: bool,
}

/// Lists the processes of the remote user that run `reasonix-remote` (`proc=<pid> <cmdline>`).
pub(crate) const PROCS_SNIPPET: &str = r#"me=$(id -u)
for d in /proc/[0-9]*; do
  [ "$(stat -c %u "$d" 2>/dev/null)" = "$me" ] || continue
  cmd=$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null)
  case "$cmd" in
    *"/.reasonix/remote/bin/reasonix-remote-"*|"reasonix-remote"*|*"/reasonix-remote "*) echo "proc=${d#/proc/} $cmd";;
  esac
done"#;

pub(crate) fn parse_procs(out: &str) -> Vec<RemoteProcess> {
    out.lines()
        .filter_map(|l| l.strip_prefix("proc="))
        .filter_map(|r| {
            let (pid, cmd) = r.split_once(' ')?;
            Some(RemoteProcess {
                pid: pid.parse().ok()?,
                command: cmd.trim().to_string(),
            })
        })
        .collect()
}

/// Installed versions, running processes, disk use.
pub async fn status(conn: &SshConnection) -> Result<RemoteStatus, BootstrapError> {
    let script = format!(
        r#"for f in "$HOME/.reasonix/remote/bin/reasonix-remote-"*; do
  [ -f "$f" ] && echo "installed=${{f##*/reasonix-remote-}} $(wc -c < "$f" | tr -d ' ')"
done
{PROCS_SNIPPET}
[ -d "$HOME/.reasonix" ] && echo "du_kb=$(du -sk "$HOME/.reasonix" 2>/dev/null | awk '{{print $1}}')"
[ -d "$HOME/.reasonix/sessions" ] && echo "sessions=$(ls -1 "$HOME/.reasonix/sessions" | wc -l | tr -d ' ')"
command -v bwrap >/dev/null 2>&1 && echo bwrap=1
exit 0"#
    );
    let out = conn.run_script_at(Stage::Probe, &script).await?;
    let installed = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("installed="))
        .filter_map(|v| {
            let (id, size) = v.rsplit_once(' ')?;
            Some(InstalledVersion {
                build_id: id.to_string(),
                size: size.parse().ok()?,
            })
        })
        .collect();
    Ok(RemoteStatus {
        installed,
        processes: parse_procs(&out.stdout),
        disk_used: parse_kv(&out.stdout, "du_kb")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|k| k * 1024)
            .unwrap_or(0),
        session_dirs: parse_kv(&out.stdout, "sessions")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0),
        bwrap: parse_kv(&out.stdout, "bwrap").is_some(),
    })
}

/// Stop every `reasonix-remote` process of this user on the host (TERM, then KILL after
/// 5 s). Returns the processes that were running.
pub async fn stop(conn: &SshConnection) -> Result<Vec<RemoteProcess>, BootstrapError> {
    let script = format!(
        r#"{PROCS_SNIPPET}
"#
    );
    let out = conn.run_script_at(Stage::Launch, &script).await?;
    let procs = parse_procs(&out.stdout);
    if procs.is_empty() {
        return Ok(procs);
    }
    let pids: Vec<String> = procs.iter().map(|p| p.pid.to_string()).collect();
    let pids = pids.join(" ");
    let kill = format!(
        r#"kill -TERM {pids} 2>/dev/null
n=0
while [ $n -lt 50 ]; do
  alive=0
  for p in {pids}; do kill -0 "$p" 2>/dev/null && alive=1; done
  [ $alive = 0 ] && break
  sleep 0.1 2>/dev/null || sleep 1
  n=$((n+1))
done
kill -KILL {pids} 2>/dev/null
exit 0"#
    );
    conn.run_script_at(Stage::Launch, &kill).await?;
    Ok(procs)
}

/// What [`uninstall`] removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UninstallScope {
    /// Binaries, run dirs, logs, locks; keeps `~/.reasonix/sessions` (session journals and
    /// checkpoints the user may want to resume or inspect).
    KeepSessions,
    /// Everything under `~/.reasonix` too.
    Everything,
}

/// Stop the daemons and remove what Reasonix put on the host. Returns the paths removed.
pub async fn uninstall(
    conn: &SshConnection,
    scope: UninstallScope,
) -> Result<Vec<String>, BootstrapError> {
    stop(conn).await?;
    let purge = match scope {
        UninstallScope::KeepSessions => "",
        UninstallScope::Everything => "\"$HOME/.reasonix\"",
    };
    let script = format!(
        r#"for p in "$HOME/.reasonix/remote" "$HOME/.reasonix/run" "$HOME/.reasonix/logs" \
  "${{XDG_RUNTIME_DIR:-/nonexistent-reasonix}}/reasonix" "/tmp/reasonix-$(id -u)" {purge}; do
  if [ -e "$p" ] || [ -L "$p" ]; then rm -rf "$p" && echo "removed=$p"; fi
done
# Drop ~/.reasonix itself when nothing of value is left in it.
rmdir "$HOME/.reasonix" 2>/dev/null && echo "removed=$HOME/.reasonix"
exit 0"#
    );
    let out = conn.run_script_at(Stage::Launch, &script).await?;
    Ok(out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("removed="))
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_and_quoting() {
        assert_eq!(
            Target::from_uname("Linux", "x86_64"),
            Some(Target::X86_64Linux)
        );
        assert_eq!(
            Target::from_uname("Linux", "aarch64"),
            Some(Target::Aarch64Linux)
        );
        assert_eq!(Target::from_uname("Darwin", "arm64"), None);
        assert_eq!(Target::from_uname("Linux", "riscv64"), None);
        assert_eq!(sh_quote("a'b c"), "'a'\\''b c'");
        assert!(valid_build_id("0.1.0-abc123"));
        assert!(!valid_build_id("../x"));
        assert!(!valid_build_id("a b"));
    }

    #[test]
    fn shipped_binaries_search_order() {
        let d = tempfile::tempdir().unwrap();
        let bins = ShippedBinaries::new().with_dir(d.path());
        let err = bins.locate(Target::Aarch64Linux).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("aarch64-unknown-linux-musl"), "{msg}");
        assert!(
            msg.contains("REASONIX_REMOTE_BIN_AARCH64_UNKNOWN_LINUX_MUSL"),
            "{msg}"
        );
        let f = d.path().join("reasonix-remote-aarch64-unknown-linux-musl");
        std::fs::write(&f, b"bin").unwrap();
        assert_eq!(bins.locate(Target::Aarch64Linux).unwrap(), f);
        let explicit = d.path().join("other");
        std::fs::write(&explicit, b"bin").unwrap();
        let bins = bins.with_file(Target::Aarch64Linux, &explicit);
        assert_eq!(bins.locate(Target::Aarch64Linux).unwrap(), explicit);
    }

    #[test]
    fn process_lines() {
        let p = parse_procs(
            "x\nproc=12 /home/u/.reasonix/remote/bin/reasonix-remote-1 daemon \nproc=bad\n",
        );
        assert_eq!(
            p,
            vec![RemoteProcess {
                pid: 12,
                command: "/home/u/.reasonix/remote/bin/reasonix-remote-1 daemon".into()
            }]
        );
    }
}
