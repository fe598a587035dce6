//! `reasonix acp`: the Agent Client Protocol on stdio (see docs/ACP.md).

use clap::Args;
use reasonix_local::exit::Exit;

use super::{CliError, SshArgs};

/// Options of `reasonix acp`.
#[derive(Args)]
pub(super) struct AcpArgs {
    /// Run the agent on a host over SSH: `[user@]host[:/path]` or
    /// `ssh://[user@]host[:port]/path`. The host key must be known and authentication must
    /// need no typing (agent or key file): the editor cannot answer prompts.
    #[arg(long, value_name = "DEST")]
    ssh: Option<String>,
    #[command(flatten)]
    ssh_opts: SshArgs,
    /// Model: provider/model, a provider name or a model name.
    #[arg(long)]
    model: Option<String>,
    /// If the workspace daemon is of another build and runs a turn, replace it anyway
    /// (the turn is interrupted; its journal keeps it). Without this, opening refuses.
    #[arg(long)]
    upgrade: bool,
}

/// Serve until the editor closes stdin.
pub(super) async fn acp(args: AcpArgs) -> Result<(), CliError> {
    use reasonix_local::acp::launch::{factory, Launch};
    // A goal started from the editor is kept on this laptop (local ACP sessions each have
    // their own folder: no keeper for them yet).
    if let Some(dest) = &args.ssh {
        super::keep::set_origin(Some(dest), &args.ssh_opts, std::path::Path::new("."));
    }
    let ssh = match &args.ssh {
        Some(dest) => Some((
            dest.clone(),
            args.ssh_opts.to_options().map_err(CliError::usage)?,
        )),
        None => None,
    };
    let exec = args.ssh_opts.exec.target(std::path::Path::new("."))?;
    let factory = factory(Launch {
        exec,
        ssh,
        model: args.model,
        upgrade: args.upgrade,
    })
    .map_err(CliError::usage)?;
    match reasonix_local::acp::serve(tokio::io::stdin(), tokio::io::stdout(), factory).await {
        0 => Ok(()),
        // serve reports its own failures to the editor and on stderr.
        _ => Err(CliError::reported(Exit::Failed)),
    }
}
