//! `reasonix term`: list, close, or show a host terminal (see `reasonix_local::term`).

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use reasonix_local::connect::{Connector, UpgradePolicy};
use reasonix_local::exit::Exit;
use reasonix_local::term::{self, TermEnd, TermError, Which};

use super::{connector_for, load_config, workspace_or_cwd, CliError, SshArgs};

/// Arguments of `reasonix term`.
#[derive(Args)]
pub(super) struct TermArgs {
    /// `[user@]host[:/path]` or `ssh://[user@]host[:port]/path`; without it, the local
    /// workspace (`--workspace` or the current folder).
    dest: Option<String>,
    /// List the workspace's terminals and exit.
    #[arg(long, conflicts_with_all = ["close", "attach", "new_term"])]
    list: bool,
    /// Close terminal N (its shell gets SIGHUP) and exit.
    #[arg(long, value_name = "N", conflicts_with_all = ["attach", "new_term"])]
    close: Option<u64>,
    /// Show terminal N (default: the newest one no client shows, else a new one).
    #[arg(long, value_name = "N", conflicts_with = "new_term")]
    attach: Option<u64>,
    /// Always start a new shell.
    #[arg(long = "new")]
    new_term: bool,
    /// Local workspace folder (without DEST; default: the current folder).
    #[arg(long)]
    workspace: Option<PathBuf>,
    #[command(flatten)]
    ssh: SshArgs,
}

fn term_error(e: TermError) -> CliError {
    // Printed after the raw-mode screen, so start on a fresh line.
    let exit = match e {
        TermError::Connect(_) => Exit::Connection,
        TermError::Host(_) | TermError::Local(_) => Exit::Failed,
    };
    CliError::new(exit, format!("\r{e}"))
}

/// `reasonix term`.
pub(super) async fn term(args: TermArgs) -> Result<(), CliError> {
    let workspace = workspace_or_cwd(args.workspace.clone())?;
    // The terminal never calls a model, but the client serves the link's provider requests
    // with a gateway, so it gets one from the user's config as the other commands do.
    let config = load_config(
        &workspace,
        None,
        None,
        args.dest.is_some() || args.ssh.exec.is_set(),
    )?;
    let place = match &args.dest {
        Some(d) => d.clone(),
        None => format!("local:{}", workspace.display()),
    };
    // Progress lines are not printed: after the first connect they would land in the middle
    // of the shell's screen on every reconnect (the status line says what happens).
    let connector: Arc<dyn Connector> = match &args.dest {
        Some(dest) => {
            let d = reasonix_bootstrap::Destination::parse(dest).map_err(CliError::usage)?;
            let opts = args.ssh.to_options().map_err(CliError::usage)?;
            let container = args.ssh.host_container(&d)?;
            let prompter = Arc::new(reasonix_bootstrap::TerminalPrompter::new(false));
            Arc::new(
                reasonix_local::ssh::SshConnector::new(d, opts, prompter)
                    .with_container(container)
                    .with_upgrade(UpgradePolicy::Refuse),
            )
        }
        None => connector_for(None, &args.ssh, workspace, false, false)?,
    };
    let (options, _) = reasonix_local::client::options_for(&config);
    let (client, mut events) = reasonix_local::client::Client::start(
        connector,
        Arc::new(reasonix_local::gateway::Gateway::new(&config)),
        options,
    );
    term::connected(&mut events).await.map_err(term_error)?;
    let which = match (args.attach, args.new_term) {
        (Some(n), _) => Which::Id(n),
        (None, true) => Which::New,
        (None, false) => Which::Reuse,
    };
    if args.list {
        let ptys = term::list(&client).await.map_err(term_error)?;
        print!("{}", term::table(&ptys));
        return Ok(());
    }
    if let Some(n) = args.close {
        return term::close(&client, n).await.map_err(term_error);
    }
    match term::run(&client, &mut events, which, &place)
        .await
        .map_err(term_error)?
    {
        TermEnd::Detached(n) => eprintln!("\r\nreasonix: detached; terminal {n} keeps running on {place} (`reasonix term --attach {n}` shows it again)"),
        TermEnd::Exited(status) => eprintln!("\r\nreasonix: the shell exited ({status})"),
    }
    Ok(())
}
