//! `reasonix cp`: files between this laptop and the host (issue #36 §3). Host paths start
//! with `:` (`:shots/`, `:/tmp/build.log`); the host is `--ssh DEST` as for `reasonix ports`
//! and `reasonix term` (without it, the local workspace). Progress on stderr; a link drop in
//! the middle is resumed by the link, and a copy that stopped resumes from its partial file
//! when run again.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use reasonix_local::client::{Client, ClientEvent, ConnState};
use reasonix_local::copy::{copy_one, describe, direction, Bar, Spot};
use reasonix_local::exit::Exit;

use super::{connector_for, load_config, workspace_or_cwd, CliError, SshArgs};

/// Arguments of `reasonix cp`.
#[derive(Args)]
pub(super) struct CpArgs {
    /// Copy directories, with everything in them.
    #[arg(short = 'r', long)]
    recursive: bool,
    /// The host: `[user@]host[:/path]` or `ssh://[user@]host[:port]/path` (default: the
    /// local workspace).
    #[arg(long, value_name = "DEST")]
    ssh: Option<String>,
    #[command(flatten)]
    ssh_opts: SshArgs,
    /// Local workspace folder (without --ssh; default: the current folder).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Sources, then the destination; host paths start with `:` (`:` alone is the
    /// workspace root). All sources on one side, the destination on the other.
    #[arg(value_name = "PATH", num_args = 2.., required = true)]
    paths: Vec<String>,
}

/// `reasonix cp`.
pub(super) async fn cp(args: CpArgs) -> Result<(), CliError> {
    let mut spots: Vec<Spot> = args.paths.iter().map(|p| Spot::parse(p)).collect();
    let dest = spots
        .pop()
        .ok_or_else(|| CliError::usage("name a destination"))?;
    direction(&spots, &dest).map_err(CliError::usage)?;
    if spots.len() > 1 {
        if let Spot::Laptop(d) = &dest {
            if !d.is_dir() {
                return Err(CliError::usage(format!(
                    "copying several sources needs a directory as destination; {} is not one",
                    d.display()
                )));
            }
        }
    }
    let workspace = workspace_or_cwd(args.workspace.clone())?;
    let config = load_config(&workspace, None, None, args.ssh.is_some())?;
    let policy = config.session_policy();
    let connector = connector_for(args.ssh.as_deref(), &args.ssh_opts, workspace, false, false)?;
    let (options, _) = reasonix_local::client::options_for(&config);
    let (client, mut events) = Client::start(
        connector,
        Arc::new(reasonix_local::gateway::Gateway::new(&config)),
        options,
    );
    let work = async {
        for src in &spots {
            let bar = Bar::new(format!("{src}"));
            let show = |p| bar.show(p);
            let r = copy_one(&client, &policy, src, &dest, args.recursive, &show).await;
            bar.end();
            let s = r.map_err(|e| CliError::new(Exit::Failed, e))?;
            eprintln!("reasonix: {}", describe(&s));
        }
        Ok::<(), CliError>(())
    };
    tokio::pin!(work);
    let r = loop {
        tokio::select! {
            r = &mut work => break r,
            ev = events.recv() => match ev {
                Some(ClientEvent::Connection(ConnState::Failed { reason, .. })) => {
                    break Err(CliError::new(Exit::Connection, reason));
                }
                Some(ClientEvent::Connection(ConnState::Reconnecting { reason, .. })) => {
                    eprintln!("\nreasonix: the link dropped ({reason}); reconnecting, the copy goes on where it was");
                }
                None => break Err(CliError::new(Exit::Connection, "the connection to the host ended")),
                Some(_) => {}
            },
            _ = tokio::signal::ctrl_c() => {
                break Err(CliError::new(Exit::Failed, "interrupted; run the same command again to resume from the partial file"));
            }
        }
    };
    client.leave().await;
    r
}
