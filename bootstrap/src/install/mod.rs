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

mod manage;
mod probe;
mod upload;

pub use manage::*;
pub use probe::*;
use upload::sftp_of;

/// Directory of installed binaries, relative to the remote home.
pub const REMOTE_BIN_DIR: &str = ".reasonix/remote/bin";
/// Binary name prefix on the host.
pub const REMOTE_BIN_PREFIX: &str = "reasonix-remote-";
/// How often the install lock is refreshed while an upload runs (the lock goes stale after
/// 60 s without refresh).
const LOCK_REFRESH: Duration = Duration::from_secs(15);

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
