//! `reasonix remote status / stop / uninstall` on the host.

use super::*;

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
