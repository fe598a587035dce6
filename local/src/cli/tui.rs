//! The interactive workbench: `reasonix` (local mode) and `reasonix ssh DEST`.

use std::path::PathBuf;
use std::sync::Arc;

use reasonix_local::connect::{locate_host_binary, Connector, LocalConnector, UpgradePolicy};
use reasonix_local::exit::Exit;

use super::{load_config, CliError, SshArgs, TuiArgs};

/// The TUI's own exit code as a result: it printed its messages itself.
pub(super) fn tui_result(code: i32) -> Result<(), CliError> {
    match code {
        0 => Ok(()),
        2 => Err(CliError::reported(Exit::Usage)),
        5 => Err(CliError::reported(Exit::Connection)),
        _ => Err(CliError::reported(Exit::Failed)),
    }
}

pub(super) fn upgrade_policy(args: &TuiArgs) -> UpgradePolicy {
    if args.upgrade {
        UpgradePolicy::Force
    } else {
        UpgradePolicy::Ask
    }
}

/// `reasonix`: the workbench on the current folder.
pub(super) async fn tui_local(args: TuiArgs) -> Result<(), CliError> {
    let workspace = super::workspace_or_cwd(None)?;
    let config = load_config(&workspace, args.model.clone(), args.effort, false)?;
    reasonix_local::gateway::preflight_planner(&config).map_err(CliError::usage)?;
    let binary = locate_host_binary().map_err(CliError::usage)?;
    super::keep::set_origin(None, &SshArgs::default(), &workspace);
    let label = workspace.display().to_string();
    // The TUI asks before replacing a busy daemon of another build.
    let (prompter, prompts) = reasonix_local::tui::prompter_channel();
    let connector: Arc<dyn Connector> = Arc::new(LocalConnector {
        upgrade: upgrade_policy(&args),
        prompter: Some(Arc::new(prompter)),
        ..LocalConnector::new(binary, workspace)
    });
    tui_result(
        reasonix_local::tui::run_tui(
            config,
            connector,
            reasonix_local::tui::TuiOptions {
                workspace: label,
                session: args.session,
                continue_last: args.continue_last,
                takeover: args.takeover,
                model: args.model,
                prompts: Some(prompts),
            },
        )
        .await,
    )
}

/// `reasonix ssh DEST`: the workbench on a host workspace.
pub(super) async fn tui_ssh(
    dest: String,
    ssh: SshArgs,
    args: TuiArgs,
    open: super::OpenArgs,
) -> Result<(), CliError> {
    let super::OpenArgs { new_session, mkdir } = open;
    if ssh.exec.is_set() {
        return Err(CliError::usage(
            "`reasonix ssh` does not take --docker/--podman/--kube/--exec (they reach containers on this machine); for a container on the SSH host use `reasonix ssh DEST --container CTR:/path`",
        ));
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    super::keep::set_origin(Some(&dest), &ssh, &cwd);
    let config = load_config(&cwd, args.model.clone(), args.effort, true)?;
    reasonix_local::gateway::preflight_planner(&config).map_err(CliError::usage)?;
    let parsed = reasonix_bootstrap::Destination::parse(&dest).map_err(CliError::usage)?;
    let opts = ssh.to_options().map_err(CliError::usage)?;
    let container = ssh.host_container(&parsed)?;
    let (prompter, prompts) = reasonix_local::tui::prompter_channel();
    let label = match &container {
        Some(c) => format!("{}/{}:{}", parsed.host, c.name, c.workspace),
        None => format!(
            "{}:{}",
            parsed.host,
            parsed.path.clone().unwrap_or_else(|| "~".into())
        ),
    };
    let connector: Arc<dyn Connector> = Arc::new(
        reasonix_local::ssh::SshConnector::new(parsed, opts, Arc::new(prompter))
            .with_container(container)
            .with_upgrade(upgrade_policy(&args))
            .with_mkdir(mkdir),
    );
    tui_result(
        reasonix_local::tui::run_tui(
            config,
            connector,
            reasonix_local::tui::TuiOptions {
                workspace: label,
                session: args.session,
                // Reattach to the workspace's most recent session unless --new.
                continue_last: !new_session || args.continue_last,
                takeover: args.takeover,
                model: args.model,
                prompts: Some(prompts),
            },
        )
        .await,
    )
}
