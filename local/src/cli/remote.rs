//! `reasonix remote …`: manage what Reasonix installed on a host.

use std::sync::Arc;

use reasonix_bootstrap::Remote;

use super::{CliError, RemoteArgs, RemoteCmd};

/// `reasonix remote ACTION`.
pub(super) async fn remote(action: RemoteCmd) -> Result<(), CliError> {
    if let RemoteCmd::Ping(args) = &action {
        return remote_ping(args).await;
    }
    let (args, what) = match &action {
        RemoteCmd::Ping(a) => (a, "ping"),
        RemoteCmd::Status { remote, .. } => (remote, "status"),
        RemoteCmd::Stop { remote, .. } => (remote, "stop"),
        RemoteCmd::Uninstall { remote, .. } => (remote, "uninstall"),
    };
    let prompter: Arc<dyn reasonix_bootstrap::Prompter> =
        if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            Arc::new(reasonix_bootstrap::TerminalPrompter::new(false))
        } else {
            Arc::new(reasonix_bootstrap::NonInteractivePrompter)
        };
    let (conn, place, path, dest_text): (Box<dyn Remote>, String, Option<String>, String) =
        match args.ssh.exec.target(std::path::Path::new("."))? {
            Some(t) => {
                let place = t.label();
                let text = format!("{place}:{}", t.workspace);
                let path = (t.workspace != ".").then(|| t.workspace.clone());
                let conn = reasonix_bootstrap::ExecConnection::new(t.argv, place.clone(), prompter);
                (Box::new(conn), place, path, text)
            }
            None => {
                let dest_text = args.dest.clone().ok_or_else(|| {
                    CliError::usage("give DEST, or --docker/--podman/--kube/--exec")
                })?;
                let dest =
                    reasonix_bootstrap::Destination::parse(&dest_text).map_err(CliError::usage)?;
                let opts = args.ssh.to_options().map_err(CliError::usage)?;
                let container = args.ssh.host_container(&dest)?;
                let conn = reasonix_bootstrap::connect(&dest, &opts, prompter)
                    .await
                    .map_err(CliError::connection)?;
                let place = format!("{}@{}:{}", conn.user(), conn.host(), conn.port());
                match container {
                    Some(c) => {
                        let path = (c.workspace != ".").then(|| c.workspace.clone());
                        let conn =
                            reasonix_bootstrap::ContainerOnHost::new(conn, c.engine, &c.name);
                        (
                            Box::new(conn),
                            format!("{place}/{}", c.name),
                            path,
                            dest_text,
                        )
                    }
                    None => (Box::new(conn), place, dest.path.clone(), dest_text),
                }
            }
        };
    let conn: &dyn Remote = conn.as_ref();
    let result = match &action {
        RemoteCmd::Ping(_) => Ok(()),
        RemoteCmd::Status { json, .. } => remote_status(conn, &place, *json)
            .await
            .map_err(|e| e.to_string()),
        RemoteCmd::Stop { all, .. } => remote_stop(conn, path.as_deref(), *all).await,
        RemoteCmd::Uninstall { purge, .. } => {
            let scope = if *purge {
                reasonix_bootstrap::install::UninstallScope::Everything
            } else {
                reasonix_bootstrap::install::UninstallScope::KeepSessions
            };
            reasonix_bootstrap::install::uninstall(conn, scope)
                .await
                .map(|done| {
                    for r in &done.removed {
                        println!("removed {r}");
                    }
                    if done.removed.is_empty() {
                        println!(
                            "nothing to remove: Reasonix has nothing installed on {}",
                            conn.host()
                        );
                    }
                    for k in &done.kept {
                        println!(
                            "kept {k} (session journals and checkpoints; `reasonix remote uninstall --purge {}` removes them too)",
                            dest_text
                        );
                    }
                })
                .map_err(|e| e.to_string())
        }
    };
    if let Some(ssh) = conn.as_ssh() {
        ssh.disconnect().await;
    }
    result.map_err(|e| CliError::failed(format!("remote {what} failed: {e}")))
}

/// `reasonix remote status`: every workspace daemon with its sessions (table or JSON).
async fn remote_status(
    conn: &dyn Remote,
    place: &str,
    json: bool,
) -> Result<(), reasonix_bootstrap::BootstrapError> {
    let build = reasonix_forward::build_id();
    let ws = reasonix_bootstrap::workspaces::list(conn, build).await?;
    let host = reasonix_bootstrap::install::status(conn).await?;
    if json {
        let value = serde_json::json!({
            "host": place,
            "installed": ws.installed.iter().map(|v| serde_json::json!({"build_id": v.build_id, "size": v.size})).collect::<Vec<_>>(),
            "lister": ws.lister,
            "workspaces": ws.daemons,
            "processes": ws.processes.iter().map(|p| serde_json::json!({"pid": p.pid, "command": p.command})).collect::<Vec<_>>(),
            "disk_used": host.disk_used,
            "bwrap": host.bwrap,
        });
        println!("{value}");
        return Ok(());
    }
    print!(
        "{}",
        reasonix_local::remote_status::render(place, build, &ws, host.disk_used, host.bwrap)
    );
    Ok(())
}

/// How long `remote stop` watches for an attached client restarting a daemon it stopped.
const RESTART_WATCH: std::time::Duration = std::time::Duration::from_secs(8);

/// `reasonix remote stop`: one workspace (`DEST:/path`), or all of them (`--all`, or
/// `DEST` alone after asking on a terminal).
async fn remote_stop(conn: &dyn Remote, path: Option<&str>, all: bool) -> Result<(), String> {
    let build = reasonix_forward::build_id();
    let print = |lines: &[reasonix_forward::workspaces::StopLine]| {
        for l in lines {
            let interrupted = if l.interrupted.is_empty() {
                String::new()
            } else {
                format!(
                    "; interrupted the turn in session(s) {}",
                    l.interrupted.join(", ")
                )
            };
            println!(
                "stopped {} (build {}, pid {}{}){interrupted}",
                l.workspace,
                l.build_id,
                l.pid,
                if l.killed { ", killed after 5 s" } else { "" }
            );
            if l.clients > 0 {
                println!(
                    "warning: {} client{} {} attached to {}; {} lost {} link and, if still running, starts the daemon again when {} reconnects (quit {} first to keep it stopped)",
                    l.clients,
                    if l.clients == 1 { "" } else { "s" },
                    if l.clients == 1 { "was" } else { "were" },
                    l.workspace,
                    if l.clients == 1 { "it" } else { "they" },
                    if l.clients == 1 { "its" } else { "their" },
                    if l.clients == 1 { "it" } else { "one" },
                    if l.clients == 1 { "it" } else { "them" },
                );
            }
        }
    };
    // A client that was attached reconnects and starts the daemon again: say so.
    let restarted = |lines: Vec<reasonix_forward::workspaces::StopLine>| async move {
        let watched: Vec<_> = lines.into_iter().filter(|l| l.clients > 0).collect();
        if watched.is_empty() {
            return;
        }
        let deadline = std::time::Instant::now() + RESTART_WATCH;
        let mut seen: Vec<String> = Vec::new();
        loop {
            if let Ok(ws) = reasonix_bootstrap::workspaces::list(conn, build).await {
                for d in &ws.daemons {
                    if let reasonix_forward::workspaces::StatusLine::Daemon(d) = d {
                        let was = watched.iter().find(|l| l.workspace == d.workspace);
                        if let Some(l) = was.filter(|l| l.pid != d.pid) {
                            if !seen.contains(&l.workspace) {
                                println!(
                                    "a client restarted the daemon of {} (pid {}); `reasonix remote status` shows it",
                                    l.workspace, d.pid
                                );
                                seen.push(l.workspace.clone());
                            }
                        }
                    }
                }
            }
            if seen.len() == watched.len() || std::time::Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
    };
    if let (Some(p), false) = (path, all) {
        let lines = reasonix_bootstrap::workspaces::stop_workspace(conn, build, p)
            .await
            .map_err(|e| e.to_string())?;
        if lines.is_empty() {
            println!("no daemon runs for workspace {p}");
        }
        print(&lines);
        restarted(lines).await;
        return Ok(());
    }
    if !all {
        let ws = reasonix_bootstrap::workspaces::list(conn, build)
            .await
            .map_err(|e| e.to_string())?;
        let names: Vec<String> = ws
            .daemons
            .iter()
            .filter_map(|d| match d {
                reasonix_forward::workspaces::StatusLine::Daemon(d) => Some(format!(
                    "  {}{}",
                    d.workspace,
                    if d.busy() { " (a turn is running)" } else { "" }
                )),
                reasonix_forward::workspaces::StatusLine::Unreachable { .. } => None,
            })
            .collect();
        if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            return Err(format!(
                "name the workspace to stop (`reasonix remote stop {}:/path`) or pass --all to stop all {} workspace daemon(s)",
                conn.host(),
                names.len()
            ));
        }
        println!(
            "This stops every workspace daemon of {} on {}:\n{}",
            conn.as_ssh().map(|c| c.user()).unwrap_or("the user"),
            conn.host(),
            if names.is_empty() {
                "  (none running)".to_string()
            } else {
                names.join("\n")
            }
        );
        eprint!("Stop them all? [y/N] ");
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            println!("nothing stopped");
            return Ok(());
        }
    }
    let (lines, rest) = reasonix_bootstrap::workspaces::stop_all(conn, build)
        .await
        .map_err(|e| e.to_string())?;
    print(&lines);
    if !rest.is_empty() {
        println!("stopped {} other reasonix-remote process(es)", rest.len());
    }
    restarted(lines).await;
    Ok(())
}

/// `reasonix remote ping`: connect, install if needed, attach and print the daemon status.
async fn remote_ping(args: &RemoteArgs) -> Result<(), CliError> {
    let connector = match args.ssh.exec.target(std::path::Path::new("."))? {
        Some(t) => Arc::new(super::exec::exec_connector(
            t,
            reasonix_local::connect::UpgradePolicy::Refuse,
            false,
            true,
        )),
        None => {
            let dest = args
                .dest
                .as_deref()
                .ok_or_else(|| CliError::usage("give DEST, or --docker/--podman/--kube/--exec"))?;
            Arc::new(super::ssh_connector(dest, &args.ssh)?)
        }
    };
    let started = std::time::Instant::now();
    let config = reasonix_local::config::Config::defaults(std::env::temp_dir());
    let (client, mut events) = super::ask::start(
        &config,
        connector,
        reasonix_local::client::ClientOptions::default(),
    );
    let status = super::ask::ask(
        &client,
        &mut events,
        reasonix_forward::proto::Request::Status,
        std::time::Duration::from_secs(120),
    )
    .await?;
    match status {
        reasonix_forward::proto::Response::Status(s) => {
            println!("attached in {:.3}s", started.elapsed().as_secs_f64());
            println!("build: {}", s.build_id);
            println!("daemon pid: {} (up {}s)", s.pid, s.uptime_secs);
            println!("workspace: {}", s.workspace);
            println!("sandbox: {}", s.sandbox);
            println!("clients: {}  sessions: {}", s.clients, s.sessions);
            if let Some(u) = s.unclean_previous_shutdown {
                println!("note: {u}");
            }
            Ok(())
        }
        other => Err(super::ask::unexpected(other)),
    }
}
