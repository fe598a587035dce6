//! The exec transport on the command line: `reasonix exec 'COMMAND' :/path`, `reasonix
//! docker|podman CTR:/path`, `reasonix kube [-n NS] [-c C] POD:/path`, and the `--docker`,
//! `--podman`, `--kube`, `--exec` options of every command that takes `--ssh`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use reasonix_local::connect::{Connector, UpgradePolicy};
use reasonix_local::exec_target::ExecTarget;

use super::{load_config, CliError, TuiArgs};

/// Reach a workspace in a container or pod instead of over SSH.
#[derive(Args, Default, Clone)]
pub(super) struct ExecArgs {
    /// Workspace in a Docker container: `CONTAINER:/path` (runs `docker exec -i`).
    #[arg(long, value_name = "CTR:/path")]
    pub docker: Option<String>,
    /// Workspace in a Podman container: `CONTAINER:/path` (runs `podman exec -i`).
    #[arg(long, value_name = "CTR:/path")]
    pub podman: Option<String>,
    /// Workspace in a Kubernetes pod: `POD:/path` (runs `kubectl exec -i`).
    #[arg(long, value_name = "POD:/path")]
    pub kube: Option<String>,
    /// With --kube: the namespace.
    #[arg(long, value_name = "NS", requires = "kube")]
    pub kube_namespace: Option<String>,
    /// With --kube: the container of the pod.
    #[arg(long, value_name = "CONTAINER", requires = "kube")]
    pub kube_container: Option<String>,
    /// Any command whose stdin/stdout reach a shell on the host once `sh -s` is appended,
    /// e.g. 'docker exec -i CTR'; the workspace is --workspace.
    #[arg(long, value_name = "COMMAND")]
    pub exec: Option<String>,
}

impl ExecArgs {
    /// Whether any exec transport option is given.
    pub fn is_set(&self) -> bool {
        self.docker.is_some() || self.podman.is_some() || self.kube.is_some() || self.exec.is_some()
    }

    /// The target, when an option is given; `workspace` is the path for `--exec`.
    pub fn target(&self, workspace: &Path) -> Result<Option<ExecTarget>, CliError> {
        let given = [&self.docker, &self.podman, &self.kube, &self.exec]
            .iter()
            .filter(|o| o.is_some())
            .count();
        if given > 1 {
            return Err(CliError::usage(
                "give only one of --docker, --podman, --kube and --exec",
            ));
        }
        let t = if let Some(s) = &self.docker {
            ExecTarget::container("docker", s)
        } else if let Some(s) = &self.podman {
            ExecTarget::container("podman", s)
        } else if let Some(s) = &self.kube {
            ExecTarget::kube(
                self.kube_namespace.as_deref(),
                self.kube_container.as_deref(),
                s,
            )
        } else if let Some(c) = &self.exec {
            ExecTarget::from_command(c, &workspace.to_string_lossy())
        } else {
            return Ok(None);
        };
        t.map(Some).map_err(CliError::usage)
    }
}

/// A connector for `target` (headless: never asks).
pub(super) fn exec_connector(
    target: ExecTarget,
    upgrade: UpgradePolicy,
    mkdir: bool,
    interactive: bool,
) -> reasonix_local::ssh::SshConnector {
    let prompter: Arc<dyn reasonix_bootstrap::Prompter> =
        if interactive && std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            Arc::new(reasonix_bootstrap::TerminalPrompter::new(true))
        } else {
            Arc::new(reasonix_bootstrap::NonInteractivePrompter)
        };
    reasonix_local::ssh::SshConnector::exec(target, prompter)
        .with_upgrade(upgrade)
        .with_mkdir(mkdir)
}

/// Which exec subcommand ran.
pub(super) enum ExecCmd {
    /// `reasonix exec 'COMMAND' :/path`.
    Command { command: String, workspace: String },
    /// `reasonix docker|podman CTR:/path`.
    Container { engine: &'static str, spec: String },
    /// `reasonix kube [-n NS] [-c C] POD:/path`.
    Kube {
        namespace: Option<String>,
        container: Option<String>,
        spec: String,
    },
}

impl ExecCmd {
    pub(super) fn target(&self) -> Result<ExecTarget, CliError> {
        match self {
            ExecCmd::Command { command, workspace } => ExecTarget::from_command(command, workspace),
            ExecCmd::Container { engine, spec } => ExecTarget::container(engine, spec),
            ExecCmd::Kube {
                namespace,
                container,
                spec,
            } => ExecTarget::kube(namespace.as_deref(), container.as_deref(), spec),
        }
        .map_err(CliError::usage)
    }
}

/// `reasonix exec|docker|podman|kube …`: the workbench on a container or pod workspace.
pub(super) async fn tui_exec(
    cmd: ExecCmd,
    args: TuiArgs,
    open: super::OpenArgs,
) -> Result<(), CliError> {
    let super::OpenArgs { new_session, mkdir } = open;
    let target = cmd.target()?;
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let config = load_config(&cwd, args.model.clone(), args.effort, true)?;
    let (prompter, prompts) = reasonix_local::tui::prompter_channel();
    let label = format!("{}:{}", target.label(), target.workspace);
    let connector: Arc<dyn Connector> = Arc::new(
        reasonix_local::ssh::SshConnector::exec(target, Arc::new(prompter))
            .with_upgrade(super::tui::upgrade_policy(&args))
            .with_mkdir(mkdir),
    );
    super::tui::tui_result(
        reasonix_local::tui::run_tui(
            config,
            connector,
            reasonix_local::tui::TuiOptions {
                workspace: label,
                session: args.session,
                continue_last: !new_session || args.continue_last,
                takeover: args.takeover,
                model: args.model,
                prompts: Some(prompts),
            },
        )
        .await,
    )
}
