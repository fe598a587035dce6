//! `reasonix ports`: the host's forwarded ports, headless (issue #36 §1). Lists what the
//! workspace's processes listen on (`--list`), or forwards them (and the `--add` ones) to
//! this laptop's loopback until interrupted, printing one line per change.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use reasonix_forward::proto::{EventKind, Request, Response};
use reasonix_local::client::{Client, ClientEvent, ConnState};
use reasonix_local::exit::Exit;
use reasonix_local::ports::{Forwards, PortSettings};

use super::{connector_for, load_config, workspace_or_cwd, CliError, SshArgs};

/// Arguments of `reasonix ports`.
#[derive(Args)]
pub(super) struct PortsArgs {
    /// The host: `[user@]host[:/path]` or `ssh://[user@]host[:port]/path` (default: the
    /// local workspace).
    #[arg(long, value_name = "DEST")]
    ssh: Option<String>,
    #[command(flatten)]
    ssh_opts: SshArgs,
    /// Local workspace folder (without --ssh; default: the current folder).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Print the ports the workspace's processes listen on and exit.
    #[arg(long)]
    list: bool,
    /// Also forward `[HOST:]PORT[=LOCAL]` (any host address: this is the explicit action
    /// forwarding beyond the host's loopback needs). Repeatable.
    #[arg(long, value_name = "SPEC")]
    add: Vec<String>,
    /// Forward only the --add ones, not what the host announces.
    #[arg(long)]
    no_auto: bool,
}

/// `reasonix ports`.
pub(super) async fn ports(args: PortsArgs) -> Result<(), CliError> {
    let workspace = workspace_or_cwd(args.workspace.clone())?;
    let config = load_config(&workspace, None, None, args.ssh.is_some())?;
    let connector = connector_for(args.ssh.as_deref(), &args.ssh_opts, workspace, false, false)?;
    let mut settings: PortSettings = config.ports.clone();
    if args.no_auto || args.list {
        settings.auto = false;
    }
    let forwards = Forwards::new(settings);
    let (mut options, _) = reasonix_local::client::options_for(&config);
    if !args.list {
        options.ports = Some(Arc::clone(&forwards));
    }
    let (client, mut events) = Client::start(
        connector,
        Arc::new(reasonix_local::gateway::Gateway::new(&config)),
        options,
    );
    if args.list {
        return list(&client).await;
    }
    for spec in &args.add {
        let text = forwards.add(spec).await.map_err(CliError::usage)?;
        println!("{text}");
    }
    loop {
        let ev = tokio::select! {
            ev = events.recv() => ev,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        match ev {
            None => return Ok(()),
            Some(ClientEvent::Event(e)) => {
                if let EventKind::Notice { text } = e.kind {
                    println!("{text}");
                }
            }
            Some(ClientEvent::Connection(ConnState::Failed { reason, .. })) => {
                return Err(CliError::new(Exit::Connection, reason));
            }
            Some(ClientEvent::Connection(ConnState::Reconnecting { reason, .. })) => {
                eprintln!("reasonix: the link dropped ({reason}); forwards stay, reconnecting");
            }
            Some(_) => {}
        }
    }
}

async fn list(client: &Client) -> Result<(), CliError> {
    match client.request(Request::WatchPorts).await {
        Ok(Response::Ports { ports }) => {
            if ports.is_empty() {
                println!("no workspace process listens on a TCP port");
            }
            for p in ports {
                let how = match &p.note {
                    None => "forwarded by `reasonix ports`".to_string(),
                    Some(n) => format!("not forwarded: {n}"),
                };
                println!(
                    "{:>5}  {:<15} pid {:<7} {:<15} {how}",
                    p.port, p.addr, p.pid, p.command
                );
            }
            Ok(())
        }
        Ok(other) => Err(CliError::new(
            Exit::Failed,
            format!("the host answered the port list with {other:?}"),
        )),
        Err(e) => Err(CliError::new(
            Exit::Connection,
            format!("the host did not list its ports: {e}"),
        )),
    }
}
