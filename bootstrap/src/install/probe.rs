//! What the host is and has: the targets we ship, the probe script and its answer.

use super::*;

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
    pub(super) state: String,
    /// SHA-256 of a file at the final path.
    pub(super) final_sha: Option<String>,
    /// Other builds (possible delta bases).
    pub(super) bases: Vec<DeltaBase>,
}

impl Locked {
    /// The script took the install lock for this install.
    pub(super) fn held(&self) -> bool {
        self.state == "held"
    }

    pub(super) fn parse(out: &str) -> Option<Locked> {
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

pub(super) fn valid_build_id(id: &str) -> bool {
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
