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

use reasonix_forward::sync::LockExt;
use sha2::{Digest, Sha256};

use crate::attach::{AttachOutcome, AttachSpec};
use crate::cache::HostBinaryCache;
use crate::codec::{Codec, HostCodecs};
use crate::error::BootstrapError;
use crate::payload;
use crate::prompter::Stage;
use crate::transport::ssh_exec::{ScriptOutput, SessionChannel};
use crate::transport::Remote;
use reasonix_forward::delta::DELTA_CAPABILITY;
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
    cache: Option<HostBinaryCache>,
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

    /// Keep installed binaries and their compressed payloads in `dir` on the laptop, so
    /// later installs reuse the compression and upgrades can send deltas (see
    /// [`HostBinaryCache`]). Without a cache every upload is a full one.
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache = Some(HostBinaryCache::new(dir));
        self
    }

    /// The laptop-side cache, if one is set.
    pub fn cache(&self) -> Option<&HostBinaryCache> {
        self.cache.as_ref()
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
    /// `xz` is available (the best upload codec).
    pub xz: bool,
    /// `zstd` is available.
    pub zstd: bool,
    /// What the install lock script printed, when the probe came with it (the attach
    /// script takes the lock in the same exec when the build is missing): the lock state,
    /// the SHA-256 of a file already at the final path, and the other builds.
    pub(crate) locked: Option<Locked>,
}

/// The output of [`lock_script`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Locked {
    /// `held`, `busy` (another install kept it for 2 minutes) or `nodir` (the install
    /// folder cannot be made); anything else is a script failure.
    state: String,
    /// SHA-256 of a file at the final path.
    final_sha: Option<String>,
    /// Other builds (possible delta bases).
    bases: Vec<DeltaBase>,
}

impl Locked {
    /// The script took the install lock for this install.
    fn held(&self) -> bool {
        self.state == "held"
    }

    fn parse(out: &str) -> Option<Locked> {
        Some(Locked {
            state: parse_kv(out, "lock")?.trim().to_string(),
            final_sha: parse_kv(out, "sha").map(str::to_string),
            bases: parse_bases(out),
        })
    }
}

impl Probe {
    /// The decompressors the host has.
    pub fn codecs(&self) -> HostCodecs {
        HostCodecs {
            xz: self.xz,
            zstd: self.zstd,
            gzip: self.gzip,
        }
    }
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
# Upload codecs (see codec.rs).
command -v xz >/dev/null 2>&1 && echo "xz=1"
command -v zstd >/dev/null 2>&1 && echo "zstd=1"
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
pub async fn probe(conn: &dyn Remote) -> Result<Probe, BootstrapError> {
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
    let mut xz = false;
    let mut zstd = false;
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
            "xz" => xz = true,
            "zstd" => zstd = true,
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
        xz,
        zstd,
        locked: Locked::parse(&out.stdout),
    })
}

/// Takes the install lock (a directory, stale after a minute without refresh; waits up to
/// 2 minutes for another install), clears what an interrupted install left, prints the
/// SHA-256 of a file already at the final path and lists the other builds (possible delta
/// bases, with their SHA-256 and whether they can apply deltas). Only ELF files are run: a
/// shell would run anything else as a script. `rx` is a shell word naming `~/.reasonix`.
pub(crate) fn lock_script(rx: &str, build_id: &str) -> String {
    format!(
        r#"umask 077
rx={rx}
root="$rx/remote"; bin="$root/bin"; lock="$root/install.lock"; final="$bin/{prefix}{build_id}"
if command -v sha256sum >/dev/null 2>&1; then tool=sha256sum
elif command -v shasum >/dev/null 2>&1; then tool="shasum -a 256"
else tool=; fi
mkdir -p "$bin" && chmod 700 "$rx" "$root" "$bin" || {{ echo lock=nodir; exit 20; }}
n=0
while ! mkdir "$lock" 2>/dev/null; do
  if [ -n "$(find "$lock" -maxdepth 0 -mmin +1 2>/dev/null)" ]; then
    rmdir "$lock" 2>/dev/null || rm -rf "$lock"
    continue
  fi
  n=$((n+1))
  [ $n -ge 120 ] && {{ echo lock=busy; exit 0; }}
  sleep 1
done
echo lock=held
# Anything temporary left here is from an interrupted install: we hold the lock.
rm -f "$bin"/.{prefix}*.tmp-* 2>/dev/null
[ -n "$tool" ] && [ -f "$final" ] && $tool "$final" 2>/dev/null | awk '{{print "sha=" $1}}'
for f in "$bin"/{prefix}*; do
  [ -f "$f" ] && [ -x "$f" ] && [ "$f" != "$final" ] && [ -n "$tool" ] || continue
  [ "$(head -c 4 "$f" | od -An -c | tr -d ' \n')" = '177ELF' ] || continue
  s=$($tool "$f" 2>/dev/null | awk '{{print $1}}')
  c=$("$f" capabilities </dev/null 2>/dev/null | tr '\n' ' ')
  echo "base=${{f##*/{prefix}}} $s $c"
done
exit 0"#,
        prefix = REMOTE_BIN_PREFIX,
    )
}

/// How [`install`] got the binary onto the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transfer {
    /// An identical binary was already installed; nothing was sent.
    Reused,
    /// The whole binary was sent, compressed with `codec`.
    Full {
        /// Codec of the upload.
        codec: Codec,
    },
    /// A delta against an installed build was sent and applied by that build.
    Delta {
        /// Codec of the upload.
        codec: Codec,
        /// Build id of the base it was applied to.
        base: String,
        /// Size the full upload would have had (same codec), for reports.
        full_size: u64,
    },
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
    /// Bytes sent over SFTP (the compressed payload or delta that was installed; a failed
    /// delta attempt before a full upload is not counted).
    pub bytes_sent: u64,
    /// What was sent.
    pub transfer: Transfer,
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

fn parse_kv<'a>(out: &'a str, key: &str) -> Option<&'a str> {
    out.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

/// An installed build other than the one being installed: a possible delta base.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DeltaBase {
    build_id: String,
    sha256: String,
    /// It printed [`DELTA_CAPABILITY`] (older builds cannot apply deltas).
    can_apply: bool,
}

/// `base=<build id> <sha256> <capabilities...>` lines of the lock script.
fn parse_bases(out: &str) -> Vec<DeltaBase> {
    out.lines()
        .filter_map(|l| l.strip_prefix("base="))
        .filter_map(|rest| {
            let mut words = rest.split_whitespace();
            let build_id = words.next()?.to_string();
            let sha256 = words.next()?.to_string();
            if !valid_build_id(&build_id)
                || sha256.len() != 64
                || !sha256.bytes().all(|b| b.is_ascii_hexdigit())
            {
                return None;
            }
            let can_apply = words.any(|w| w == DELTA_CAPABILITY);
            Some(DeltaBase {
                build_id,
                sha256,
                can_apply,
            })
        })
        .collect()
}

/// Install (or reuse) `reasonix-remote-<build_id>` on the host behind `conn`.
///
/// Serialised per host user by a lock directory (stale after 60 s without refresh); a second
/// concurrent caller waits and then reuses the first one's install. Progress goes to the
/// connection's prompter ([`Stage::Probe`], [`Stage::Upload`] with byte counts,
/// [`Stage::Verify`]).
pub async fn install(
    conn: &dyn Remote,
    build_id: &str,
    binaries: &ShippedBinaries,
) -> Result<RemoteInstall, BootstrapError> {
    install_or_release(conn, build_id, binaries, None, None, None)
        .await
        .map(|(r, _)| r)
}

/// [`install`] for a host whose attach script found the build missing (it printed `probe`
/// and took the install lock, see [`crate::attach`]), then the attach itself: the script
/// that verifies and moves the upload into place runs at the head of the next attach
/// script, so one exec both finishes the install and links. `sftp` is a session opened
/// beside that attach script, if the caller opened one.
pub async fn install_and_attach(
    conn: &dyn Remote,
    build_id: &str,
    binaries: &ShippedBinaries,
    probe: Probe,
    spec: &AttachSpec,
    sftp: Option<Result<reasonix_sftpfs::SftpFs, BootstrapError>>,
) -> Result<(RemoteInstall, AttachOutcome), BootstrapError> {
    let (install, outcome) =
        install_or_release(conn, build_id, binaries, Some(probe), sftp, Some(spec)).await?;
    let outcome = outcome.ok_or_else(|| {
        BootstrapError::remote(
            Stage::Attach,
            conn.host(),
            "the install finished without the attach that should follow it",
        )
    })?;
    Ok((install, outcome))
}

/// [`install_locked`], then: the last script of a successful install releases the lock;
/// release it on every other path too, when this install holds it (a lost release goes
/// stale after 60 s). A successful install keeps this build in the laptop's cache: the next
/// upgrade of this host can be a delta.
async fn install_or_release(
    conn: &dyn Remote,
    build_id: &str,
    binaries: &ShippedBinaries,
    probed: Option<Probe>,
    sftp: Option<Result<reasonix_sftpfs::SftpFs, BootstrapError>>,
    attach: Option<&AttachSpec>,
) -> Result<(RemoteInstall, Option<AttachOutcome>), BootstrapError> {
    // An attach script that found the build missing took the lock already.
    let hold = LockHold::new(
        probed
            .as_ref()
            .and_then(|p| p.locked.as_ref())
            .is_some_and(Locked::held),
    );
    let r = install_locked(conn, build_id, binaries, probed, sftp, attach, &hold).await;
    let cache = binaries.cache();
    let (install, outcome, local) = match r {
        Ok(r) => r,
        Err(e) => {
            if hold.held() {
                let release = "rmdir \"$HOME\"/.reasonix/remote/install.lock 2>/dev/null; exit 0";
                let _ = conn.run_script_at(Stage::Upload, release).await;
            }
            return Err(e);
        }
    };
    if let Some(cache) = cache.cloned() {
        let sha = install.sha256.clone();
        let _ = tokio::task::spawn_blocking(move || {
            if let Ok(data) = std::fs::read(&local) {
                cache.store_binary(&sha, &data);
            }
        })
        .await;
    }
    Ok((install, outcome))
}

/// Whether this install holds the host's install lock: what a failed install needs to know
/// to release it. One flag for the whole install, set where the lock is taken and cleared
/// where a retry loses it; atomic because the install's future must be `Send`.
struct LockHold(std::sync::atomic::AtomicBool);

impl LockHold {
    fn new(held: bool) -> LockHold {
        LockHold(std::sync::atomic::AtomicBool::new(held))
    }

    fn held(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn set(&self, held: bool) {
        self.0.store(held, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Everything of an install after the probe; keeps `hold` up to date while it runs.
#[allow(clippy::too_many_arguments)]
async fn install_locked(
    conn: &dyn Remote,
    build_id: &str,
    binaries: &ShippedBinaries,
    probed: Option<Probe>,
    sftp: Option<Result<reasonix_sftpfs::SftpFs, BootstrapError>>,
    attach: Option<&AttachSpec>,
    hold: &LockHold,
) -> Result<(RemoteInstall, Option<AttachOutcome>, PathBuf), BootstrapError> {
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

    // 1. The install lock, the final path's SHA-256 and the other builds: the attach
    //    script took the lock already when it found the build missing; otherwise one exec.
    //    The SFTP session opens meanwhile (its channel and subsystem cost round trips of
    //    their own); the upload needs it unless the right build turns out to be there.
    let (locked, sftp) = match (probe.locked.clone(), sftp) {
        (Some(l), Some(sftp)) => (l, sftp),
        (Some(l), None) => (l, sftp_of(conn).await),
        (None, sftp) => {
            conn.prompter()
                .progress(Stage::Upload, "waiting for the install lock", None);
            let script = lock_script(&q(&format!("{home}/.reasonix")), build_id);
            let sftp = async {
                match sftp {
                    Some(s) => s,
                    None => sftp_of(conn).await,
                }
            };
            let (out, sftp) = tokio::join!(conn.run_script_at(Stage::Upload, &script), sftp);
            let out = out?;
            let locked = Locked::parse(&out.stdout).unwrap_or(Locked {
                state: format!("exit {}: {}", out.exit_code, out.stderr.trim()),
                final_sha: None,
                bases: Vec::new(),
            });
            (locked, sftp)
        }
    };
    if !locked.held() {
        return Err(match locked.state.as_str() {
            "busy" => BootstrapError::remote(
                Stage::Upload,
                &host,
                format!("another install on this host holds {lock} and did not finish within 2 minutes; retry, or remove the directory if no install is running"),
            ),
            other => BootstrapError::remote(
                Stage::Upload,
                &host,
                format!("cannot create {bin_dir} or take the install lock ({other})"),
            ),
        });
    }
    hold.set(true);
    let job = Job {
        conn,
        probe: &probe,
        tool: &tool,
        local: &local,
        sha: &sha,
        size,
        build_id,
        bin_dir: &bin_dir,
        final_path: &final_path,
        lock: &lock,
        cache: binaries.cache(),
        sftp: std::sync::Mutex::new(Some(sftp)),
        attach,
        outcome: std::sync::Mutex::new(None),
        hold,
    };
    let result = job.run(locked.final_sha, locked.bases).await?;
    // The finishing script released the lock.
    hold.set(false);
    let outcome = job.outcome.lock_or_recover().take();
    Ok((result, outcome, local))
}

/// Everything one locked install needs.
struct Job<'a> {
    conn: &'a dyn Remote,
    probe: &'a Probe,
    tool: &'a str,
    local: &'a Path,
    sha: &'a str,
    size: u64,
    build_id: &'a str,
    bin_dir: &'a str,
    final_path: &'a str,
    lock: &'a str,
    cache: Option<&'a HostBinaryCache>,
    /// The SFTP session opened beside the lock script, for the first upload (a retry opens
    /// another one: each upload closes its session once its finishing script has run).
    sftp: std::sync::Mutex<Option<Result<reasonix_sftpfs::SftpFs, BootstrapError>>>,
    /// When set, the finishing script runs at the head of this attach (one exec for both).
    attach: Option<&'a AttachSpec>,
    /// What that attach gave, once the install finished.
    outcome: std::sync::Mutex<Option<AttachOutcome>>,
    /// Whether this install holds the lock; a failed finish in that attach releases it and
    /// may not take it again.
    hold: &'a LockHold,
}

/// One upload: the whole binary or a delta against a base on the host.
enum Attempt {
    Full(Codec),
    Delta { codec: Codec, base: DeltaBase },
}

/// How an upload ended.
enum Finish {
    /// Installed; bytes sent.
    Ok(u64),
    /// The payload could not be turned into the binary (decompressor or delta failed, or
    /// the result had another SHA-256); a different payload may still work.
    Failed(String),
}

impl Job<'_> {
    fn host(&self) -> String {
        self.conn.host().to_string()
    }

    fn local_err(&self, e: impl std::fmt::Display) -> BootstrapError {
        BootstrapError::Local {
            stage: Stage::Upload,
            path: self.local.to_path_buf(),
            reason: e.to_string(),
        }
    }

    fn done(&self, bytes_sent: u64, transfer: Transfer) -> RemoteInstall {
        RemoteInstall {
            path: self.final_path.to_string(),
            build_id: self.build_id.to_string(),
            sha256: self.sha.to_string(),
            uploaded: !matches!(transfer, Transfer::Reused),
            bytes_sent,
            transfer,
            probe: self.probe.clone(),
        }
    }

    /// Keep the installed version and the newest other one.
    fn prune_script(&self) -> String {
        format!(
            "(cd {bin} && ls -t {prefix}* 2>/dev/null | grep -v -x -F {keep} | tail -n +2 | while IFS= read -r f; do rm -f \"./$f\"; done)",
            bin = sh_quote(self.bin_dir),
            prefix = REMOTE_BIN_PREFIX,
            keep = sh_quote(&format!("{REMOTE_BIN_PREFIX}{}", self.build_id)),
        )
    }

    async fn run(
        &self,
        existing_sha: Option<String>,
        bases: Vec<DeltaBase>,
    ) -> Result<RemoteInstall, BootstrapError> {
        let host = self.host();
        if existing_sha.as_deref() == Some(self.sha) {
            self.conn.prompter().progress(
                Stage::Verify,
                &format!("reusing installed reasonix-remote {}", self.build_id),
                None,
            );
            let script = format!(
                "{}\nrmdir {} 2>/dev/null\necho \"${{report}}verify=ok\"\nexit 0",
                self.prune_script(),
                sh_quote(self.lock)
            );
            if let Finish::Failed(why) = self.finish(&script, 0, None).await? {
                return Err(BootstrapError::remote(
                    Stage::Verify,
                    &host,
                    format!("releasing the install lock failed: {why}"),
                ));
            }
            return Ok(self.done(0, Transfer::Reused));
        }
        if let Some(bad) = &existing_sha {
            tracing::warn!(host = %host, path = self.final_path, found = %bad, expected = self.sha, "installed binary is corrupt; replacing it");
        }
        let raw = {
            let local = self.local.to_path_buf();
            tokio::task::spawn_blocking(move || std::fs::read(local))
                .await
                .map_err(|e| self.local_err(e))?
                .map_err(|e| self.local_err(e))?
        };
        let codecs = self.probe.codecs();
        let mut codec = codecs.best(raw.len());
        let full = self.full_payload(&raw, codec).await?;

        // 2. A delta first, when the host has a build that can apply one and the laptop
        //    still has that build; any failure falls through to the whole binary.
        if let Some(base) = self.delta_base(&raw, &bases) {
            match self.delta_payload(&raw, &base, codec, full.len()).await {
                Ok(Some(delta)) => {
                    let label = format!("delta against {}, {codec}", base.build_id);
                    let attempt = Attempt::Delta {
                        codec,
                        base: base.clone(),
                    };
                    match self.send(&delta, &label, &attempt).await? {
                        Finish::Ok(sent) => {
                            let transfer = Transfer::Delta {
                                codec,
                                base: base.build_id.clone(),
                                full_size: full.len() as u64,
                            };
                            tracing::info!(host = %host, path = self.final_path, bytes = sent, full = full.len(), base = %base.build_id, "installed reasonix-remote from a delta");
                            return Ok(self.done(sent, transfer));
                        }
                        Finish::Failed(why) => {
                            tracing::warn!(host = %host, base = %base.build_id, reason = %why, "the delta did not apply; sending the whole binary");
                            if let Some(c) = self.cache {
                                c.forget_delta(&base.sha256, self.sha, codec);
                            }
                        }
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(host = %host, error = %e, "cannot make a delta; sending the whole binary")
                }
            }
        }

        // 3. The whole binary. A host whose decompressor does not work gets one more try
        //    with the next codec down (in the end, uncompressed).
        let mut payload = full;
        loop {
            let label = codec.name().to_string();
            match self.send(&payload, &label, &Attempt::Full(codec)).await? {
                Finish::Ok(sent) => {
                    tracing::info!(host = %host, path = self.final_path, bytes = sent, original = self.size, codec = %codec, "installed reasonix-remote");
                    return Ok(self.done(sent, Transfer::Full { codec }));
                }
                Finish::Failed(why) => {
                    let next = codecs.after(raw.len(), codec);
                    if codec == Codec::Raw || next == codec {
                        return Err(BootstrapError::remote(
                            Stage::Verify,
                            &host,
                            format!(
                                "the uploaded binary did not verify ({why}; expected SHA-256 {}). The upload was discarded; retry, and check disk space on the host.",
                                self.sha
                            ),
                        ));
                    }
                    tracing::warn!(host = %host, codec = %codec, reason = %why, "the upload did not verify; retrying with {next}");
                    codec = next;
                    payload = self.full_payload(&raw, codec).await?;
                }
            }
        }
    }

    /// An installed build that can apply deltas and that the laptop still has.
    fn delta_base(&self, raw: &[u8], bases: &[DeltaBase]) -> Option<DeltaBase> {
        let cache = self.cache?;
        if raw.len() > payload::MAX_DELTA_INPUT {
            return None;
        }
        bases
            .iter()
            .find(|b| b.can_apply && b.sha256 != self.sha && cache.has_binary(&b.sha256))
            .cloned()
    }

    async fn full_payload(&self, raw: &[u8], codec: Codec) -> Result<Vec<u8>, BootstrapError> {
        if codec != Codec::Raw {
            self.conn.prompter().progress(
                Stage::Upload,
                &format!("preparing the upload ({codec})"),
                None,
            );
        }
        let (local, raw, sha, cache) = (
            self.local.to_path_buf(),
            raw.to_vec(),
            self.sha.to_string(),
            self.cache.cloned(),
        );
        tokio::task::spawn_blocking(move || {
            payload::full(&local, &raw, &sha, codec, cache.as_ref())
        })
        .await
        .map_err(|e| self.local_err(e))?
        .map_err(|e| self.local_err(format!("{codec}: {e}")))
    }

    /// The compressed delta, or `None` when it would not save at least a fifth of the full
    /// upload (`full_size` bytes).
    async fn delta_payload(
        &self,
        raw: &[u8],
        base: &DeltaBase,
        codec: Codec,
        full_size: usize,
    ) -> Result<Option<Vec<u8>>, String> {
        let Some(cache) = self.cache.cloned() else {
            return Ok(None);
        };
        self.conn.prompter().progress(
            Stage::Upload,
            &format!("preparing a delta against {}", base.build_id),
            None,
        );
        let (raw, sha, base_sha) = (raw.to_vec(), self.sha.to_string(), base.sha256.clone());
        tokio::task::spawn_blocking(move || {
            let Some(old) = cache.binary(&base_sha) else {
                return Ok(None);
            };
            let d = payload::delta(&old, &base_sha, &raw, &sha, codec, Some(&cache))
                .map_err(|e| e.to_string())?;
            let worth_it = d.len().saturating_mul(5) < full_size.saturating_mul(4);
            Ok(worth_it.then_some(d))
        })
        .await
        .map_err(|e| e.to_string())?
    }

    /// Upload `payload` to a temporary name and run the finishing script for `attempt`.
    async fn send(
        &self,
        payload: &[u8],
        label: &str,
        attempt: &Attempt,
    ) -> Result<Finish, BootstrapError> {
        let host = self.host();
        let tmp = format!(
            "{}/.{REMOTE_BIN_PREFIX}{}.tmp-{:016x}",
            self.bin_dir,
            self.build_id,
            rand::random::<u64>()
        );
        let upload_path = match attempt {
            Attempt::Full(Codec::Raw) => format!("{tmp}.raw"),
            Attempt::Full(c) => format!("{tmp}{}", c.suffix()),
            Attempt::Delta { codec, .. } => format!("{tmp}.delta{}", codec.suffix()),
        };
        if self.conn.as_ssh().is_none() {
            return self
                .send_stream(payload, label, attempt, &tmp, &upload_path)
                .await;
        }
        let opened = self.sftp.lock_or_recover().take();
        let sftp = match opened {
            Some(s) => s?,
            None => sftp_of(self.conn).await?,
        };
        let total = payload.len() as u64;
        let prompter = self.conn.prompter().clone();
        let label = format!(
            "uploading reasonix-remote {} ({}, {label})",
            self.build_id,
            human_size(total)
        );
        prompter.progress(Stage::Upload, &label, Some((0, total)));
        let upload = async {
            let mut src: &[u8] = payload;
            sftp.upload_unclosed(&upload_path, &mut src, 0o600, &|done| {
                prompter.progress(Stage::Upload, &label, Some((done, total)))
            })
            .await
        };
        // Keep the lock fresh while the upload runs (slow links take longer than 60 s).
        let refresh = async {
            loop {
                tokio::time::sleep(LOCK_REFRESH).await;
                let _ = self
                    .conn
                    .run_script_at(
                        Stage::Upload,
                        &format!("touch {} 2>/dev/null; exit 0", sh_quote(self.lock)),
                    )
                    .await;
            }
        };
        // The finishing attach's channel opens while the upload runs, so its exec request
        // goes out as soon as the upload is done (one round trip less; a failed open is
        // tried again by the attach, which reports it).
        let open_next = async {
            if let (Some(_), Some(ssh)) = (self.attach, self.conn.as_ssh()) {
                ssh.open_session().await.ok()
            } else {
                None
            }
        };
        let (sent, next_channel) = tokio::join!(
            async {
                tokio::select! {
                    r = upload => r,
                    _ = refresh => unreachable_refresh(),
                }
            },
            open_next
        );
        let (sent, uploaded) = match sent {
            Ok(done) => done,
            Err(e) => {
                let _ = sftp.remove(&upload_path).await;
                return Err(BootstrapError::remote(
                    Stage::Upload,
                    &host,
                    format!("SFTP upload to {upload_path} failed: {e}. Is the sftp subsystem enabled on the host (Subsystem sftp in sshd_config)?"),
                ));
            }
        };

        // Decompress (or apply the delta), verify, chmod, move into place, prune and release
        // the lock — one round trip. Every write is acknowledged, so the upload's content is
        // on the host: the script starts while the SFTP close goes out beside it (the
        // script reads and removes the uploaded file; an open handle does not matter to
        // either).
        self.conn
            .prompter()
            .progress(Stage::Verify, "verifying SHA-256 on the host", None);
        let finish = self.finish_script(&tmp, &upload_path, attempt);
        let (closed, finished) = tokio::join!(
            sftp.close_upload(uploaded),
            self.finish(&finish, sent, next_channel)
        );
        if let Err(e) = closed {
            tracing::debug!(host = %host, error = %e, "closing the uploaded file");
        }
        drop(sftp);
        finished
    }

    /// [`Self::send`] over a transport without SFTP (`docker`/`podman`/`kubectl exec`): the
    /// payload goes through one exec stream (`cat > FILE`), then the same finishing script
    /// checks its SHA-256.
    async fn send_stream(
        &self,
        payload: &[u8],
        label: &str,
        attempt: &Attempt,
        tmp: &str,
        upload_path: &str,
    ) -> Result<Finish, BootstrapError> {
        let host = self.host();
        let total = payload.len() as u64;
        let prompter = self.conn.prompter().clone();
        let label = format!(
            "uploading reasonix-remote {} ({}, {label}, through the exec stream)",
            self.build_id,
            human_size(total)
        );
        prompter.progress(Stage::Upload, &label, Some((0, total)));
        let report = |done| prompter.progress(Stage::Upload, &label, Some((done, total)));
        let upload =
            crate::transport::exec::upload_through_stream(self.conn, upload_path, payload, &report);
        let refresh = async {
            loop {
                tokio::time::sleep(LOCK_REFRESH).await;
                let _ = self
                    .conn
                    .run_script_at(
                        Stage::Upload,
                        &format!("touch {} 2>/dev/null; exit 0", sh_quote(self.lock)),
                    )
                    .await;
            }
        };
        let sent = tokio::select! {
            r = upload => r,
            _ = refresh => unreachable_refresh().map_err(|e| e.to_string()),
        };
        let sent = match sent {
            Ok(n) => n,
            Err(e) => {
                let _ = self
                    .conn
                    .run_script_at(
                        Stage::Upload,
                        &format!("rm -f {}; exit 0", sh_quote(upload_path)),
                    )
                    .await;
                return Err(BootstrapError::remote(
                    Stage::Upload,
                    &host,
                    format!("upload through the exec stream failed: {e}"),
                ));
            }
        };
        prompter.progress(Stage::Verify, "verifying SHA-256 on the host", None);
        let finish = self.finish_script(tmp, upload_path, attempt);
        self.finish(&finish, sent, None).await
    }

    /// The script that turns the uploaded file into the installed binary (decompress or
    /// apply the delta, check the SHA-256, chmod, move into place, prune, release the lock).
    fn finish_script(&self, tmp: &str, upload_path: &str, attempt: &Attempt) -> String {
        let q = sh_quote;
        let produce = match attempt {
            Attempt::Full(Codec::Raw) => "mv -f \"$up\" \"$tmp\" || fail move".to_string(),
            Attempt::Full(c) => format!(
                "{dec} \"$up\" > \"$tmp\" || fail {name}",
                dec = c.host_decoder().unwrap_or("cat"),
                name = c.name()
            ),
            Attempt::Delta { codec, base } => {
                let base_path = format!("{}/{REMOTE_BIN_PREFIX}{}", self.bin_dir, base.build_id);
                let feed = match codec.host_decoder() {
                    Some(dec) => format!("{dec} \"$up\" |"),
                    None => "cat \"$up\" |".to_string(),
                };
                format!(
                    "{feed} {base} apply-delta --base {base} --out \"$tmp\" >/dev/null || fail apply-delta",
                    base = q(&base_path)
                )
            }
        };
        // When the finishing script runs at the head of the next attach, a failure releases
        // the lock (that attach's missing block takes it again for the next try).
        let release_on_fail = if self.attach.is_some() {
            format!("rmdir {} 2>/dev/null; ", q(self.lock))
        } else {
            String::new()
        };
        format!(
            r#"set -u
tmp={tmp}
up={up}
fail() {{ rm -f "$tmp" "$up"; {release_on_fail}echo "${{report}}verify=$1"; exit 0; }}
{produce}
rm -f "$up"
sha=$({tool} "$tmp" 2>/dev/null | awk '{{print $1}}')
[ "$sha" = {sha} ] || fail "mismatch $sha"
chmod 755 "$tmp" && mv -f "$tmp" {final} || fail mvfailed
echo "${{report}}verify=ok"
{prune}
rmdir {lock} 2>/dev/null
exit 0"#,
            tmp = q(tmp),
            up = q(upload_path),
            tool = self.tool,
            sha = q(self.sha),
            final = q(self.final_path),
            prune = self.prune_script(),
            lock = q(self.lock),
        )
    }

    /// Run a finishing script (it prints `${report}verify=<ok|reason>`): on its own, or at
    /// the head of the attach (whose outcome is kept for the caller).
    /// `channel`: a session channel opened for the attach while the upload ran.
    async fn finish(
        &self,
        script: &str,
        sent: u64,
        channel: Option<SessionChannel>,
    ) -> Result<Finish, BootstrapError> {
        let host = self.host();
        let Some(spec) = self.attach else {
            let out = self
                .conn
                .run_script_at(Stage::Verify, &format!("report=\n{script}"))
                .await?;
            return match parse_kv(&out.stdout, "verify") {
                Some("ok") => Ok(Finish::Ok(sent)),
                Some(other) => Ok(Finish::Failed(format!(
                    "{other}; stderr: {}",
                    out.stderr.trim()
                ))),
                None => Err(BootstrapError::remote(
                    Stage::Verify,
                    &host,
                    format!("verification script failed: {}", out.stderr.trim()),
                )),
            };
        };
        let (outcome, verify) =
            crate::attach::attach_after(self.conn, spec, script, channel).await?;
        match (outcome, verify.as_deref()) {
            // Not there after all: the missing block took the lock again (or could not).
            (AttachOutcome::Missing(probe), v) => {
                if !probe.locked.as_ref().is_some_and(Locked::held) {
                    self.hold.set(false);
                    return Err(BootstrapError::remote(
                        Stage::Verify,
                        &host,
                        format!(
                            "the upload did not install ({}) and the install lock could not be taken again; retry",
                            v.unwrap_or("no verification report")
                        ),
                    ));
                }
                Ok(Finish::Failed(
                    v.unwrap_or("the finishing script printed no verification report")
                        .to_string(),
                ))
            }
            // The build is there (ours, verified): the attach went on.
            (outcome, _) => {
                *self.outcome.lock_or_recover() = Some(outcome);
                Ok(Finish::Ok(sent))
            }
        }
    }
}

/// The SFTP session of an SSH transport; other transports upload through a stream.
async fn sftp_of(conn: &dyn Remote) -> Result<reasonix_sftpfs::SftpFs, BootstrapError> {
    match conn.as_ssh() {
        Some(ssh) => ssh.sftp().await,
        None => Err(BootstrapError::remote(
            Stage::Upload,
            conn.host(),
            "this transport has no SFTP (uploads go through the exec stream)",
        )),
    }
}

/// `1.6 MiB`, `240 KiB`.
fn human_size(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / f64::from(1u32 << 20))
    } else {
        format!("{} KiB", n.div_ceil(1024))
    }
}

/// The refresh loop never ends; this keeps the `select!` arms the same type.
fn unreachable_refresh<T>() -> Result<T, reasonix_sftpfs::FsError> {
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
pub async fn status(conn: &dyn Remote) -> Result<RemoteStatus, BootstrapError> {
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
    let installed = parse_installed(&out.stdout);
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
pub async fn stop(conn: &dyn Remote) -> Result<Vec<RemoteProcess>, BootstrapError> {
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

/// What [`uninstall`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Uninstalled {
    /// Paths removed (empty: there was nothing to remove).
    pub removed: Vec<String>,
    /// Paths left in place on purpose (the session journals without `--purge`).
    pub kept: Vec<String>,
}

/// Stop the daemons and remove what Reasonix put on the host.
pub async fn uninstall(
    conn: &dyn Remote,
    scope: UninstallScope,
) -> Result<Uninstalled, BootstrapError> {
    stop(conn).await?;
    let (purge, keep) = match scope {
        UninstallScope::KeepSessions => (
            "",
            "if [ -d \"$HOME/.reasonix/sessions\" ]; then echo \"kept=$HOME/.reasonix/sessions\"; fi",
        ),
        UninstallScope::Everything => ("\"$HOME/.reasonix\"", ""),
    };
    let script = format!(
        r#"for p in "$HOME/.reasonix/remote" "$HOME/.reasonix/run" "$HOME/.reasonix/logs" \
  "${{XDG_RUNTIME_DIR:-/nonexistent-reasonix}}/reasonix" "/tmp/reasonix-$(id -u)" {purge}; do
  if [ -e "$p" ] || [ -L "$p" ]; then rm -rf "$p" && echo "removed=$p"; fi
done
# Drop ~/.reasonix itself when nothing of value is left in it.
rmdir "$HOME/.reasonix" 2>/dev/null && echo "removed=$HOME/.reasonix"
{keep}
exit 0"#
    );
    let out = conn.run_script_at(Stage::Launch, &script).await?;
    let lines = |prefix: &str| -> Vec<String> {
        out.stdout
            .lines()
            .filter_map(|l| l.strip_prefix(prefix))
            .map(str::to_string)
            .collect()
    };
    Ok(Uninstalled {
        removed: lines("removed="),
        kept: lines("kept="),
    })
}

/// The `installed=<build-id> <size>` lines of a status script's output.
pub(crate) fn parse_installed(stdout: &str) -> Vec<InstalledVersion> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("installed="))
        .filter_map(|v| {
            let (id, size) = v.rsplit_once(' ')?;
            Some(InstalledVersion {
                build_id: id.to_string(),
                size: size.parse().ok()?,
            })
        })
        .collect()
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
