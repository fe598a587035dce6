//! `reasonix keep` (hidden): the goal keeper of one session ([`reasonix_local::keeper`]),
//! started detached by the client that started or resumed the goal. It reconnects with the
//! arguments it was given (`--ssh DEST` and the SSH options, or `--workspace`); the model
//! key comes from this laptop's config and environment as for every client.

use std::path::PathBuf;

use clap::Args;
use reasonix_local::config::{Config, LoadOptions};

use super::{connector_for, CliError, SshArgs};

#[derive(Args)]
pub(super) struct KeepArgs {
    /// The session whose goal to keep.
    #[arg(long)]
    session: String,
    /// The workspace on a host over SSH: `[user@]host[:/path]`.
    #[arg(long, value_name = "DEST")]
    ssh: Option<String>,
    #[command(flatten)]
    ssh_opts: SshArgs,
    /// Local workspace folder.
    #[arg(long)]
    workspace: Option<PathBuf>,
}

/// The arguments of `reasonix keep` after `--session ID` that reach the same workspace as
/// `ssh`/`ssh_opts`/`workspace` (nothing secret: destinations, ports, file paths, options).
/// `None` for the transports a keeper does not serve (containers, exec commands).
pub(super) fn origin(
    ssh: Option<&str>,
    ssh_opts: &SshArgs,
    workspace: &std::path::Path,
) -> Option<Vec<String>> {
    if ssh_opts.exec.is_set() || ssh_opts.container.is_some() {
        return None;
    }
    let Some(dest) = ssh else {
        let abs = std::path::absolute(workspace).ok()?;
        return Some(vec![
            "--workspace".into(),
            abs.to_string_lossy().into_owned(),
        ]);
    };
    let mut a = vec!["--ssh".to_string(), dest.to_string()];
    if let Some(p) = ssh_opts.port {
        a.extend(["-p".into(), p.to_string()]);
    }
    for i in &ssh_opts.identity {
        let i = std::path::absolute(i).unwrap_or_else(|_| i.clone());
        a.extend(["-i".into(), i.to_string_lossy().into_owned()]);
    }
    if let Some(j) = &ssh_opts.jump {
        a.extend(["-J".into(), j.clone()]);
    }
    if let Some(f) = &ssh_opts.config_file {
        let f = if f.as_os_str() == "none" {
            f.clone()
        } else {
            std::path::absolute(f).unwrap_or_else(|_| f.clone())
        };
        a.extend(["-F".into(), f.to_string_lossy().into_owned()]);
    }
    for o in &ssh_opts.option {
        a.extend(["-o".into(), o.clone()]);
    }
    if ssh_opts.forward_agent {
        a.push("-A".into());
    }
    Some(a)
}

/// Record how this process reached its workspace, for a keeper it may start.
pub(super) fn set_origin(ssh: Option<&str>, ssh_opts: &SshArgs, workspace: &std::path::Path) {
    if let Some(args) = origin(ssh, ssh_opts, workspace) {
        reasonix_local::keeper::set_origin(args);
    }
}

/// `reasonix keep --session ID ...`.
pub(super) async fn keep(args: KeepArgs) -> Result<(), CliError> {
    let workspace = super::workspace_or_cwd(args.workspace.clone())?;
    let config = Config::load(&LoadOptions {
        project_dir: Some(workspace.clone()),
        ignore_project: args.ssh.is_some() || !workspace.is_dir(),
        ..LoadOptions::default()
    })
    .map_err(CliError::usage)?;
    let connector = connector_for(args.ssh.as_deref(), &args.ssh_opts, workspace, false, false)?;
    eprintln!(
        "reasonix keep: pid {} keeps session {} ({})",
        std::process::id(),
        args.session,
        connector.describe()
    );
    match reasonix_local::keeper::run(&config, connector, &args.session).await {
        Ok(why) => {
            eprintln!("reasonix keep: done: {why}");
            Ok(())
        }
        Err(e) => {
            eprintln!("reasonix keep: stopped: {e}");
            Err(CliError::failed(e))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    #[test]
    fn the_keeper_reconnects_with_the_same_destination_and_options_only() {
        let ssh = SshArgs {
            port: Some(2222),
            identity: vec![PathBuf::from("/k/id_ed25519")],
            config_file: Some(PathBuf::from("none")),
            option: vec!["IdentityAgent=none".into()],
            forward_agent: true,
            ..SshArgs::default()
        };
        let a = origin(Some("me@box:/repo"), &ssh, std::path::Path::new("/w")).unwrap();
        assert_eq!(
            a,
            [
                "--ssh",
                "me@box:/repo",
                "-p",
                "2222",
                "-i",
                "/k/id_ed25519",
                "-F",
                "none",
                "-o",
                "IdentityAgent=none",
                "-A"
            ]
        );
        // Local mode: the workspace, made absolute (the keeper may start elsewhere).
        let a = origin(None, &SshArgs::default(), std::path::Path::new("/w/repo")).unwrap();
        assert_eq!(a, ["--workspace", "/w/repo"]);
        // A container on the SSH host: no keeper.
        let c = SshArgs {
            container: Some("ctr:/work".into()),
            ..SshArgs::default()
        };
        assert_eq!(origin(Some("me@box"), &c, std::path::Path::new(".")), None);
    }
}
