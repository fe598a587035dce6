//! `reasonix hooks list|trust|untrust [--ssh DEST]` (#34): the workspace's hooks as the host
//! sees them, and the user's trust records for its project hook files (kept on the laptop,
//! see [`reasonix_local::hooks_trust`]).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use reasonix_forward::hooks::HooksReport;
use reasonix_forward::proto::{Request, Response};
use reasonix_local::hooks_trust;

use super::{connector_for, load_config, CliError, SshArgs};

#[derive(Subcommand)]
pub(super) enum HooksCmd {
    /// Every hook (user config, `.reasonix/hooks.toml`, `.claude/settings.json`), where it
    /// came from, whether it may run, and the project files' SHA-256.
    List(HooksArgs),
    /// Trust the exact current content of the workspace's project hook files (all of them,
    /// or only PATH). Shows what is trusted; any later change makes a file untrusted again.
    Trust {
        /// Only this file (`.reasonix/hooks.toml` or `.claude/settings.json`).
        path: Option<String>,
        #[command(flatten)]
        args: HooksArgs,
    },
    /// Forget the trust records of this workspace (all, or only PATH's).
    Untrust {
        /// Only this file.
        path: Option<String>,
        #[command(flatten)]
        args: HooksArgs,
    },
}

#[derive(Args)]
pub(super) struct HooksArgs {
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    /// Workspace folder (default: the current folder).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// A host workspace over SSH: `[user@]host[:/path]`.
    #[arg(long, value_name = "DEST")]
    ssh: Option<String>,
    #[command(flatten)]
    ssh_opts: SshArgs,
}

/// Run a `reasonix hooks` command.
pub(super) async fn hooks(cmd: HooksCmd) -> Result<(), CliError> {
    match cmd {
        HooksCmd::List(args) => {
            let (report, _, _) = fetch(&args).await?;
            print(&report, args.json)
        }
        HooksCmd::Trust { path, args } => {
            let (report, home, key) = fetch(&args).await?;
            let chosen: Vec<_> = report
                .files
                .iter()
                .filter(|f| path.as_deref().is_none_or(|p| p == f.path))
                .collect();
            if chosen.is_empty() {
                return Err(CliError::usage(match path {
                    Some(p) => format!("{p}: no such project hook file in this workspace (they are .reasonix/hooks.toml and .claude/settings.json)"),
                    None => "this workspace has no project hook files (.reasonix/hooks.toml, .claude/settings.json); nothing to trust".into(),
                }));
            }
            for f in chosen {
                hooks_trust::trust(&home, &key, &f.path, &f.sha256)
                    .map_err(|e| CliError::failed(e.to_string()))?;
                println!("trusted {} (sha256 {}) for {key}:", f.path, f.sha256);
                for h in report.hooks.iter().filter(|h| h.source == f.path) {
                    println!(
                        "  {} {} → {}",
                        h.event,
                        h.matcher.as_deref().unwrap_or("*"),
                        h.command
                    );
                }
            }
            Ok(())
        }
        HooksCmd::Untrust { path, args } => {
            let workspace = super::workspace_or_cwd(args.workspace.clone())?;
            let mut config = load_config(&workspace, None, None, args.ssh.is_some())?;
            let connector =
                connector_for(args.ssh.as_deref(), &args.ssh_opts, workspace, false, false)?;
            config.apply_workspace(&connector.describe());
            let key = config.workspace_key.clone().unwrap_or_default();
            let gone = hooks_trust::untrust(&config.home, &key, path.as_deref())
                .map_err(|e| CliError::failed(e.to_string()))?;
            println!("removed {gone} trust record(s) of {key}");
            Ok(())
        }
    }
}

/// Ask the workspace's daemon for the report; with the Reasonix home and workspace key the
/// trust records are stored under.
async fn fetch(args: &HooksArgs) -> Result<(HooksReport, PathBuf, String), CliError> {
    let workspace = super::workspace_or_cwd(args.workspace.clone())?;
    let mut config = load_config(&workspace, None, None, args.ssh.is_some())?;
    for w in config.warnings() {
        eprintln!("reasonix: warning: {w}");
    }
    let connector = connector_for(args.ssh.as_deref(), &args.ssh_opts, workspace, false, false)?;
    config.apply_workspace(&connector.describe());
    let key = config
        .workspace_key
        .clone()
        .ok_or_else(|| CliError::failed("cannot name this workspace"))?;
    let (options, _) = reasonix_local::client::options_for(&config);
    let (client, mut events) = super::ask::start(&config, connector, options);
    let limit = std::time::Duration::from_secs(120);
    let request = Request::Hooks {
        hooks: client.hook_settings(),
    };
    match super::ask::ask(&client, &mut events, request, limit).await? {
        Response::Hooks(report) => Ok((report, config.home.clone(), key)),
        other => Err(super::ask::unexpected(other)),
    }
}

fn print(report: &HooksReport, json: bool) -> Result<(), CliError> {
    if json {
        let line = serde_json::to_string(report)
            .map_err(|e| CliError::failed(format!("cannot encode the answer: {e}")))?;
        println!("{line}");
    } else {
        print!("{}", reasonix_local::tui::hooks_table(report));
    }
    Ok(())
}
