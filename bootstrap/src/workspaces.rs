//! Many workspaces per host: list every workspace daemon of the remote user with its sessions
//! and their states, and stop one workspace's daemon (or all of them).
//!
//! The work is done on the host by `reasonix-remote status --json` / `stop` (see
//! `remote-agent/src/workspaces.rs`), which asks each daemon over its socket. The laptop
//! picks the installed binary to run: its own build when installed, else the newest one that
//! knows these commands (older builds don't).

use reasonix_forward::workspaces::{StatusLine, StopLine};

use crate::error::BootstrapError;
use crate::install::{
    parse_installed, parse_procs, sh_quote, InstalledVersion, RemoteProcess, PROCS_SNIPPET,
    REMOTE_BIN_DIR, REMOTE_BIN_PREFIX,
};
use crate::prompter::Stage;
use crate::transport::Remote;

/// What `reasonix remote status` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostWorkspaces {
    /// Every daemon socket of the user, answered or not. Empty when no installed binary
    /// could list them (see `lister`).
    pub daemons: Vec<StatusLine>,
    /// Build of the binary that listed them; `None` when none installed can.
    pub lister: Option<String>,
    /// Installed versions.
    pub installed: Vec<InstalledVersion>,
    /// Every `reasonix-remote` process of the user (daemons and attach bridges).
    pub processes: Vec<RemoteProcess>,
}

/// Shell that runs `"$b" ARGS` with the first installed binary that accepts them, our build
/// first, printing `lister=<build>` and then its output lines prefixed with `out=`.
fn with_lister(build_id: &str, args: &str) -> String {
    format!(
        r#"d="$HOME/{REMOTE_BIN_DIR}"
for b in "$d/{REMOTE_BIN_PREFIX}{build}" "$d"/{REMOTE_BIN_PREFIX}*; do
  [ -x "$b" ] || continue
  if out=$("$b" {args} 2>/dev/null); then
    echo "lister=${{b##*/{REMOTE_BIN_PREFIX}}}"
    [ -n "$out" ] && printf '%s\n' "$out" | sed 's/^/out=/'
    break
  fi
done"#,
        build = build_id,
    )
}

fn lister(stdout: &str) -> Option<String> {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("lister="))
        .map(str::to_string)
}

fn out_lines(stdout: &str) -> impl Iterator<Item = &str> {
    stdout.lines().filter_map(|l| l.strip_prefix("out="))
}

/// Every workspace daemon of the remote user, with its sessions and their states.
pub async fn list(conn: &dyn Remote, build_id: &str) -> Result<HostWorkspaces, BootstrapError> {
    let script = format!(
        r#"{lister}
for f in "$HOME/{REMOTE_BIN_DIR}/{REMOTE_BIN_PREFIX}"*; do
  [ -f "$f" ] && echo "installed=${{f##*/{REMOTE_BIN_PREFIX}}} $(wc -c < "$f" | tr -d ' ')"
done
{PROCS_SNIPPET}
exit 0"#,
        lister = with_lister(build_id, "status --json"),
    );
    let out = conn.run_script_at(Stage::Probe, &script).await?;
    let mut daemons = Vec::new();
    for line in out_lines(&out.stdout) {
        match serde_json::from_str::<StatusLine>(line) {
            Ok(l) => daemons.push(l),
            Err(e) => tracing::warn!("unreadable status line from the host ({e}): {line}"),
        }
    }
    let installed = parse_installed(&out.stdout);
    Ok(HostWorkspaces {
        daemons,
        lister: lister(&out.stdout),
        installed,
        processes: parse_procs(&out.stdout),
    })
}

/// Stop the daemon of workspace `path` (relative paths are relative to the remote home).
/// Returns what was stopped (empty when no daemon serves it). Fails when no installed build
/// can do it (then only `--all` works).
pub async fn stop_workspace(
    conn: &dyn Remote,
    build_id: &str,
    path: &str,
) -> Result<Vec<StopLine>, BootstrapError> {
    let script = format!(
        "{}\nexit 0",
        with_lister(build_id, &format!("stop --workspace {}", sh_quote(path)))
    );
    let out = conn.run_script_at(Stage::Launch, &script).await?;
    if lister(&out.stdout).is_none() {
        return Err(BootstrapError::remote(
            Stage::Launch,
            conn.host(),
            format!(
                "no reasonix-remote on the host can stop workspace {path}: either the workspace does not exist there, or only older builds are installed. Check the path, run `reasonix remote ping` once to install this build, or stop every workspace with `reasonix remote stop --all`"
            ),
        ));
    }
    Ok(parse_stop_lines(&out.stdout))
}

fn parse_stop_lines(stdout: &str) -> Vec<StopLine> {
    out_lines(stdout)
        .filter_map(|l| serde_json::from_str::<StopLine>(l).ok())
        .collect()
}

/// Stop every workspace daemon (gracefully, through an installed binary that can), then
/// every other `reasonix-remote` process of the user. Returns the daemons stopped and the
/// other processes signalled.
pub async fn stop_all(
    conn: &dyn Remote,
    build_id: &str,
) -> Result<(Vec<StopLine>, Vec<RemoteProcess>), BootstrapError> {
    let script = format!("{}\nexit 0", with_lister(build_id, "stop --all"));
    let out = conn.run_script_at(Stage::Launch, &script).await?;
    let stopped = parse_stop_lines(&out.stdout);
    let rest = crate::install::stop(conn).await?;
    Ok((stopped, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lister_output_is_parsed() {
        let out = "noise\nlister=0.1.0-x\nout={\"workspace\":\"/w\",\"pid\":3,\"build_id\":\"b\",\"interrupted\":[\"s\"],\"killed\":false}\n";
        assert_eq!(lister(out).as_deref(), Some("0.1.0-x"));
        let lines = parse_stop_lines(out);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].interrupted, vec!["s".to_string()]);
    }
}
