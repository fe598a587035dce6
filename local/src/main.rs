//! `reasonix`: the laptop binary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use reasonix_local::config::{Config, LoadOptions, Overrides, PermissionMode};
use reasonix_local::connect::{locate_host_binary, Connector, LocalConnector, UpgradePolicy};

#[derive(Parser)]
#[command(name = "reasonix", version = reasonix_forward::build_id(), about = "Cache-first coding agent with a remote workbench over SSH")]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
    #[command(flatten)]
    tui: TuiArgs,
}

/// Options of the interactive workbench.
#[derive(Args, Clone, Default)]
struct TuiArgs {
    /// Model: provider/model, a provider name or a model name.
    #[arg(long)]
    model: Option<String>,
    /// Resume this session.
    #[arg(long)]
    session: Option<String>,
    /// Resume the most recent session instead of starting a new one.
    #[arg(long = "continue")]
    continue_last: bool,
    /// Take over a session another client drives (it becomes read-only).
    #[arg(long)]
    takeover: bool,
    /// Replace a workspace daemon of another build even if it runs a turn (interrupting it)
    /// instead of asking.
    #[arg(long)]
    upgrade: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one turn headless in the current folder (or over SSH with --ssh).
    Run(RunArgs),
    /// Open the workbench on a remote workspace: `[user@]host[:/path]`.
    Ssh {
        /// `[user@]host[:/path]` or `ssh://[user@]host[:port]/path`.
        dest: String,
        #[command(flatten)]
        ssh: SshArgs,
        #[command(flatten)]
        tui: TuiArgs,
        /// Start a new session instead of reattaching to the most recent one.
        #[arg(long = "new")]
        new_session: bool,
    },
    /// Rewind a session to just before turn N (files, conversation or both).
    Rewind(RewindArgs),
    /// Manage what Reasonix installed on a host.
    Remote {
        #[command(subcommand)]
        action: RemoteCmd,
    },
    /// MCP servers: where each runs, its state and its tools.
    Mcp {
        #[command(subcommand)]
        action: McpCmd,
    },
    /// A host shell that survives network drops: `reasonix term [DEST[:/path]]` (without
    /// DEST, the local workspace). `~.` at the start of a line detaches; the shell keeps
    /// running on the host and `reasonix term` shows it again.
    Term(TermArgs),
}

#[derive(Args)]
struct TermArgs {
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

#[derive(Subcommand)]
enum McpCmd {
    /// Start every MCP server of the workspace (host) and of the laptop config, and list each
    /// with where it runs, its state (ready, or failed with the reason) and its tools.
    List(McpListArgs),
}

#[derive(Args)]
struct McpListArgs {
    /// Print one JSON object per server instead of a table.
    #[arg(long)]
    json: bool,
    /// Workspace folder (default: the current folder).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// List the servers of a host workspace over SSH: `[user@]host[:/path]`.
    #[arg(long, value_name = "DEST")]
    ssh: Option<String>,
    #[command(flatten)]
    ssh_opts: SshArgs,
}

#[derive(Args)]
struct RewindArgs {
    /// Turn number; the state just before this turn began is restored.
    #[arg(long = "to")]
    to: u64,
    /// What to restore.
    #[arg(long, value_parser = ["code", "conversation", "both"], default_value = "both")]
    scope: String,
    /// Only show what would change.
    #[arg(long)]
    dry_run: bool,
    /// Session id (default: the most recent session of the workspace).
    #[arg(long)]
    session: Option<String>,
    /// Workspace folder (default: the current folder).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Rewind on a host over SSH.
    #[arg(long, value_name = "DEST")]
    ssh: Option<String>,
    #[command(flatten)]
    ssh_opts: SshArgs,
}

#[derive(Subcommand)]
enum RemoteCmd {
    /// Every workspace daemon on the host with its sessions and their states; installed
    /// versions, disk used, bwrap.
    Status {
        #[command(flatten)]
        remote: RemoteArgs,
        /// One JSON object instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Connect, install if needed, attach to the workspace daemon and print its status.
    Ping(RemoteArgs),
    /// Stop one workspace's daemon (`DEST:/path`); `DEST` alone stops every workspace
    /// after asking (headless: needs --all).
    Stop {
        #[command(flatten)]
        remote: RemoteArgs,
        /// Stop every workspace daemon (and every other reasonix-remote process) of the user.
        #[arg(long)]
        all: bool,
    },
    /// Remove every file Reasonix put on the host (keeps session journals unless --purge).
    Uninstall {
        #[command(flatten)]
        remote: RemoteArgs,
        /// Also remove session journals and checkpoints.
        #[arg(long)]
        purge: bool,
    },
}

#[derive(Args)]
struct RemoteArgs {
    /// `[user@]host[:/path]` or `ssh://[user@]host[:port]/path`.
    dest: String,
    #[command(flatten)]
    ssh: SshArgs,
}

/// OpenSSH-compatible options.
#[derive(Args, Default, Clone)]
struct SshArgs {
    /// Port to connect to.
    #[arg(short = 'p', value_name = "PORT")]
    port: Option<u16>,
    /// Identity file (repeatable).
    #[arg(short = 'i', value_name = "IDENTITY")]
    identity: Vec<PathBuf>,
    /// Jump hosts, comma separated.
    #[arg(short = 'J', value_name = "JUMP")]
    jump: Option<String>,
    /// ssh_config file (`none` reads none).
    #[arg(short = 'F', value_name = "CONFIG")]
    config_file: Option<PathBuf>,
    /// `Key=Value` option (repeatable).
    #[arg(short = 'o', value_name = "KEY=VALUE")]
    option: Vec<String>,
}

impl SshArgs {
    fn to_options(&self) -> Result<reasonix_bootstrap::SshOptions, String> {
        let mut o = reasonix_bootstrap::SshOptions {
            port: self.port,
            identity_files: self.identity.clone(),
            jump: self.jump.clone(),
            config_file: self.config_file.clone(),
            ..Default::default()
        };
        for kv in &self.option {
            o.push_option(kv).map_err(|e| e.to_string())?;
        }
        Ok(o)
    }
}

fn ssh_connector(dest: &str, ssh: &SshArgs) -> Result<reasonix_local::ssh::SshConnector, String> {
    let dest = reasonix_bootstrap::Destination::parse(dest).map_err(|e| e.to_string())?;
    let opts = ssh.to_options()?;
    let prompter: Arc<dyn reasonix_bootstrap::Prompter> =
        if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            Arc::new(reasonix_bootstrap::TerminalPrompter::new(true))
        } else {
            Arc::new(reasonix_bootstrap::NonInteractivePrompter)
        };
    Ok(reasonix_local::ssh::SshConnector::new(dest, opts, prompter))
}

#[derive(Args)]
struct RunArgs {
    /// The prompt.
    prompt: String,
    /// Print one JSON event per line.
    #[arg(long)]
    json: bool,
    /// With --json: put each tool's complete output in its `tool_finished` line (outputs
    /// over 64 KiB are fetched from the host by reference and checked against their SHA-256).
    #[arg(long, requires = "json")]
    full_output: bool,
    /// Allow writers without asking (explicit ask/deny rules still hold).
    #[arg(long, conflicts_with = "yolo")]
    auto: bool,
    /// Never ask (deny rules still hold).
    #[arg(long)]
    yolo: bool,
    /// Model: provider/model, a provider name or a model name.
    #[arg(long = "model")]
    run_model: Option<String>,
    /// Resume this session.
    #[arg(long = "session", conflicts_with = "continue_last")]
    session: Option<String>,
    /// Resume the most recent session of this workspace.
    #[arg(long = "continue")]
    continue_last: bool,
    /// Workspace folder (default: the current folder).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Run on a host over SSH: `[user@]host[:/path]` or `ssh://[user@]host[:port]/path`.
    #[arg(long, value_name = "DEST")]
    ssh: Option<String>,
    #[command(flatten)]
    ssh_opts: SshArgs,
    /// If the workspace daemon is of another build and runs a turn, replace it anyway
    /// (the turn is interrupted; its journal keeps it). Without this, `run` refuses.
    #[arg(long)]
    upgrade: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("reasonix: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = match cli.command {
        Some(Cmd::Run(args)) => rt.block_on(run(args)),
        Some(Cmd::Remote { action }) => rt.block_on(remote(action)),
        Some(Cmd::Rewind(args)) => rt.block_on(rewind(args)),
        Some(Cmd::Mcp {
            action: McpCmd::List(args),
        }) => rt.block_on(mcp_list(args)),
        Some(Cmd::Term(args)) => rt.block_on(term(args)),
        Some(Cmd::Ssh {
            dest,
            ssh,
            tui,
            new_session,
        }) => rt.block_on(tui_ssh(dest, ssh, tui, new_session)),
        None => rt.block_on(tui_local(cli.tui)),
    };
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    ExitCode::from(code.clamp(0, 255) as u8)
}

async fn run(args: RunArgs) -> i32 {
    let workspace = match args
        .workspace
        .clone()
        .map(Ok)
        .unwrap_or_else(std::env::current_dir)
    {
        Ok(w) => w,
        Err(e) => {
            eprintln!("reasonix: cannot determine the workspace: {e}");
            return 2;
        }
    };
    let mode = if args.yolo {
        Some(PermissionMode::Yolo)
    } else if args.auto {
        Some(PermissionMode::Auto)
    } else {
        None
    };
    let config = match Config::load(&LoadOptions {
        project_dir: Some(workspace.clone()),
        // Over SSH the project file is the host workspace's: the host applies it and reports
        // what it ignored; a file in this laptop folder has nothing to do with that session.
        ignore_project: args.ssh.is_some(),
        overrides: Overrides {
            model: args.run_model.clone(),
            mode,
            ..Overrides::default()
        },
        ..LoadOptions::default()
    }) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("reasonix: {e}");
            return 2;
        }
    };
    for w in config.warnings() {
        eprintln!("reasonix: warning: {w}");
    }
    let connector =
        match connector_for(args.ssh.as_deref(), &args.ssh_opts, workspace, args.upgrade) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("reasonix: {e}");
                return 2;
            }
        };
    let outcome = reasonix_local::run::run(
        &config,
        connector,
        reasonix_local::run::RunOptions {
            prompt: args.prompt,
            json: args.json,
            full_output: args.full_output,
            session: args.session,
            continue_last: args.continue_last,
            model: args.run_model,
        },
    )
    .await;
    if let Some(r) = outcome.reason {
        if !args.json {
            eprintln!("reasonix: {r}");
        }
    }
    outcome.code
}

async fn remote(action: RemoteCmd) -> i32 {
    if let RemoteCmd::Ping(args) = &action {
        return remote_ping(args).await;
    }
    let (args, what) = match &action {
        RemoteCmd::Ping(a) => (a, "ping"),
        RemoteCmd::Status { remote, .. } => (remote, "status"),
        RemoteCmd::Stop { remote, .. } => (remote, "stop"),
        RemoteCmd::Uninstall { remote, .. } => (remote, "uninstall"),
    };
    let dest = match reasonix_bootstrap::Destination::parse(&args.dest) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("reasonix: {e}");
            return 2;
        }
    };
    let opts = match args.ssh.to_options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("reasonix: {e}");
            return 2;
        }
    };
    let prompter: Arc<dyn reasonix_bootstrap::Prompter> =
        if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            Arc::new(reasonix_bootstrap::TerminalPrompter::new(false))
        } else {
            Arc::new(reasonix_bootstrap::NonInteractivePrompter)
        };
    let conn = match reasonix_bootstrap::connect(&dest, &opts, prompter).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("reasonix: {e}");
            return 1;
        }
    };
    let result = match action {
        RemoteCmd::Ping(_) => Ok(()),
        RemoteCmd::Status { json, .. } => {
            remote_status(&conn, json).await.map_err(|e| e.to_string())
        }
        RemoteCmd::Stop { all, .. } => remote_stop(&conn, dest.path.as_deref(), all).await,
        RemoteCmd::Uninstall { purge, .. } => {
            let scope = if purge {
                reasonix_bootstrap::install::UninstallScope::Everything
            } else {
                reasonix_bootstrap::install::UninstallScope::KeepSessions
            };
            reasonix_bootstrap::install::uninstall(&conn, scope)
                .await
                .map(|removed| {
                    for r in removed {
                        println!("removed {r}");
                    }
                })
                .map_err(|e| e.to_string())
        }
    };
    conn.disconnect().await;
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("reasonix: remote {what} failed: {e}");
            1
        }
    }
}

/// `reasonix remote status`: every workspace daemon with its sessions (table or JSON).
async fn remote_status(
    conn: &reasonix_bootstrap::SshConnection,
    json: bool,
) -> Result<(), reasonix_bootstrap::BootstrapError> {
    let build = reasonix_forward::build_id();
    let ws = reasonix_bootstrap::workspaces::list(conn, build).await?;
    let host = reasonix_bootstrap::install::status(conn).await?;
    let place = format!("{}@{}:{}", conn.user(), conn.host(), conn.port());
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
        reasonix_local::remote_status::render(&place, build, &ws, host.disk_used, host.bwrap)
    );
    Ok(())
}

/// `reasonix remote stop`: one workspace (`DEST:/path`), or all of them (`--all`, or
/// `DEST` alone after asking on a terminal).
async fn remote_stop(
    conn: &reasonix_bootstrap::SshConnection,
    path: Option<&str>,
    all: bool,
) -> Result<(), String> {
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
            conn.user(),
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
    Ok(())
}

async fn rewind(args: RewindArgs) -> i32 {
    use reasonix_forward::proto::RewindScope;
    let workspace = match args
        .workspace
        .clone()
        .map(Ok)
        .unwrap_or_else(std::env::current_dir)
    {
        Ok(w) => w,
        Err(e) => {
            eprintln!("reasonix: cannot determine the workspace: {e}");
            return 2;
        }
    };
    let config = match Config::load(&LoadOptions {
        project_dir: Some(workspace.clone()),
        ignore_project: args.ssh.is_some(),
        ..LoadOptions::default()
    }) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("reasonix: {e}");
            return 2;
        }
    };
    let connector = match connector_for(args.ssh.as_deref(), &args.ssh_opts, workspace, false) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("reasonix: {e}");
            return 2;
        }
    };
    let scope = match args.scope.as_str() {
        "code" => RewindScope::Code,
        "conversation" => RewindScope::Conversation,
        _ => RewindScope::Both,
    };
    let out = reasonix_local::run::rewind(
        &config,
        connector,
        args.session,
        args.to,
        scope,
        args.dry_run,
    )
    .await;
    if let Some(r) = out.reason {
        eprintln!("reasonix: {r}");
    }
    out.code
}

/// The configuration of a session on `workspace`; `remote` (SSH) skips the laptop folder's
/// project file, since the host applies its own workspace's file.
fn load_config(
    workspace: &std::path::Path,
    model: Option<String>,
    remote: bool,
) -> Result<Config, String> {
    Config::load(&LoadOptions {
        project_dir: Some(workspace.to_path_buf()),
        ignore_project: remote,
        overrides: Overrides {
            model,
            ..Overrides::default()
        },
        ..LoadOptions::default()
    })
    .map_err(|e| e.to_string())
}

async fn tui_local(args: TuiArgs) -> i32 {
    let workspace = match std::env::current_dir() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("reasonix: cannot determine the workspace: {e}");
            return 2;
        }
    };
    let config = match load_config(&workspace, args.model.clone(), false) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("reasonix: {e}");
            return 2;
        }
    };
    let binary = match locate_host_binary() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("reasonix: {e}");
            return 2;
        }
    };
    let label = workspace.display().to_string();
    // The TUI asks before replacing a busy daemon of another build.
    let (prompter, prompts) = reasonix_local::tui::prompter_channel();
    let connector: Arc<dyn Connector> = Arc::new(LocalConnector {
        upgrade: if args.upgrade {
            UpgradePolicy::Force
        } else {
            UpgradePolicy::Ask
        },
        prompter: Some(Arc::new(prompter)),
        ..LocalConnector::new(binary, workspace)
    });
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
    .await
}

async fn tui_ssh(dest: String, ssh: SshArgs, args: TuiArgs, new_session: bool) -> i32 {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let config = match load_config(&cwd, args.model.clone(), true) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("reasonix: {e}");
            return 2;
        }
    };
    let parsed = match reasonix_bootstrap::Destination::parse(&dest) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("reasonix: {e}");
            return 2;
        }
    };
    let opts = match ssh.to_options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("reasonix: {e}");
            return 2;
        }
    };
    let (prompter, prompts) = reasonix_local::tui::prompter_channel();
    let label = format!(
        "{}:{}",
        parsed.host,
        parsed.path.clone().unwrap_or_else(|| "~".into())
    );
    let connector: Arc<dyn Connector> = Arc::new(
        reasonix_local::ssh::SshConnector::new(parsed, opts, Arc::new(prompter)).with_upgrade(
            if args.upgrade {
                UpgradePolicy::Force
            } else {
                UpgradePolicy::Ask
            },
        ),
    );
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
    .await
}

async fn remote_ping(args: &RemoteArgs) -> i32 {
    let connector = match ssh_connector(&args.dest, &args.ssh) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("reasonix: {e}");
            return 2;
        }
    };
    let started = std::time::Instant::now();
    let config = Config::defaults(std::env::temp_dir());
    let gateway = Arc::new(reasonix_local::gateway::Gateway::new(&config));
    let (client, mut events) = reasonix_local::client::Client::start(
        connector,
        gateway,
        reasonix_local::client::ClientOptions::default(),
    );
    let failed = async {
        while let Some(ev) = events.recv().await {
            if let reasonix_local::client::ClientEvent::Connection(
                reasonix_local::client::ConnState::Failed { reason },
            ) = ev
            {
                return reason;
            }
        }
        "the client stopped".to_string()
    };
    let status = tokio::select! {
        r = tokio::time::timeout(
            std::time::Duration::from_secs(120),
            client.request(reasonix_forward::proto::Request::Status),
        ) => r,
        reason = failed => {
            eprintln!("reasonix: {reason}");
            return 1;
        }
    };
    match status {
        Ok(Ok(reasonix_forward::proto::Response::Status(s))) => {
            println!("attached in {:.3}s", started.elapsed().as_secs_f64());
            println!("build: {}", s.build_id);
            println!("daemon pid: {} (up {}s)", s.pid, s.uptime_secs);
            println!("workspace: {}", s.workspace);
            println!("sandbox: {}", s.sandbox);
            println!("clients: {}  sessions: {}", s.clients, s.sessions);
            if let Some(u) = s.unclean_previous_shutdown {
                println!("note: {u}");
            }
            0
        }
        Ok(Ok(other)) => {
            eprintln!("reasonix: unexpected answer {other:?}");
            1
        }
        Ok(Err(e)) => {
            eprintln!("reasonix: {e}");
            1
        }
        Err(_) => {
            eprintln!("reasonix: no answer from the host within 120 s");
            1
        }
    }
}

/// `reasonix mcp list`: connect like `run` does (so the host can open the laptop servers on
/// this link), ask for the MCP status and print it. A server that failed is a listed state;
/// only a connection failure makes the command fail.
async fn mcp_list(args: McpListArgs) -> i32 {
    use reasonix_forward::proto::{Request, Response};
    let workspace = match args
        .workspace
        .clone()
        .map(Ok)
        .unwrap_or_else(std::env::current_dir)
    {
        Ok(w) => w,
        Err(e) => {
            eprintln!("reasonix: cannot determine the workspace: {e}");
            return 2;
        }
    };
    let config = match load_config(&workspace, None, args.ssh.is_some()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("reasonix: {e}");
            return 2;
        }
    };
    for w in config.warnings() {
        eprintln!("reasonix: warning: {w}");
    }
    let connector = match connector_for(args.ssh.as_deref(), &args.ssh_opts, workspace, false) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("reasonix: {e}");
            return 2;
        }
    };
    let (options, laptop) = reasonix_local::client::options_for(&config);
    let laptop_host = options.laptop_mcp.clone();
    let gateway = Arc::new(reasonix_local::gateway::Gateway::new(&config));
    let (client, mut events) = reasonix_local::client::Client::start(connector, gateway, options);
    let failed = async {
        while let Some(ev) = events.recv().await {
            if let reasonix_local::client::ClientEvent::Connection(
                reasonix_local::client::ConnState::Failed { reason },
            ) = ev
            {
                return reason;
            }
        }
        "the client stopped".to_string()
    };
    // Servers start concurrently within their own startup timeouts (30 s by default); the
    // limit here only guards against a host that never answers.
    let limit = std::time::Duration::from_secs(300);
    let answer = tokio::select! {
        r = tokio::time::timeout(limit, client.request(Request::McpStatus { laptop })) => r,
        reason = failed => {
            eprintln!("reasonix: {reason}");
            return 1;
        }
    };
    if let Some(h) = laptop_host {
        h.close_all();
    }
    let servers = match answer {
        Ok(Ok(Response::McpServers { servers })) => servers,
        Ok(Ok(other)) => {
            eprintln!("reasonix: unexpected answer {other:?}");
            return 1;
        }
        Ok(Err(e)) => {
            // The request can end first when the supervisor gives up; its reason says why.
            let mut reason = e.to_string();
            while let Ok(ev) = events.try_recv() {
                if let reasonix_local::client::ClientEvent::Connection(
                    reasonix_local::client::ConnState::Failed { reason: r },
                ) = ev
                {
                    reason = r;
                }
            }
            eprintln!("reasonix: {reason}");
            return 1;
        }
        Err(_) => {
            eprintln!(
                "reasonix: no answer from the host within {} s",
                limit.as_secs()
            );
            return 1;
        }
    };
    if args.json {
        for s in &servers {
            match serde_json::to_string(s) {
                Ok(line) => println!("{line}"),
                Err(e) => {
                    eprintln!("reasonix: cannot encode the answer: {e}");
                    return 1;
                }
            }
        }
    } else {
        print!("{}", reasonix_local::tui::mcp_table(&servers));
    }
    0
}

/// The transport for a command: SSH when `--ssh DEST` is given, else local mode.
/// Headless commands never ask: a busy daemon of another build is replaced only with
/// `upgrade` (`--upgrade`), otherwise they refuse with a message.
fn connector_for(
    ssh: Option<&str>,
    ssh_opts: &SshArgs,
    workspace: PathBuf,
    upgrade: bool,
) -> Result<Arc<dyn Connector>, String> {
    let policy = if upgrade {
        UpgradePolicy::Force
    } else {
        UpgradePolicy::Refuse
    };
    Ok(match ssh {
        Some(dest) => Arc::new(ssh_connector(dest, ssh_opts)?.with_upgrade(policy)),
        None => Arc::new(LocalConnector {
            upgrade: policy,
            ..LocalConnector::new(locate_host_binary()?, workspace)
        }),
    })
}

/// `reasonix term`: list, close, or show a host terminal (see `reasonix_local::term`).
async fn term(args: TermArgs) -> i32 {
    use reasonix_local::term::{self, TermEnd, Which};
    let workspace = match args
        .workspace
        .clone()
        .map(Ok)
        .unwrap_or_else(std::env::current_dir)
    {
        Ok(w) => w,
        Err(e) => {
            eprintln!("reasonix: cannot determine the workspace: {e}");
            return 2;
        }
    };
    // The terminal never calls a model, but the client serves the link's provider requests
    // with a gateway, so it gets one from the user's config as the other commands do.
    let config = match load_config(&workspace, None, args.dest.is_some()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("reasonix: {e}");
            return 2;
        }
    };
    let place = match &args.dest {
        Some(d) => d.clone(),
        None => format!("local:{}", workspace.display()),
    };
    // Progress lines are not printed: after the first connect they would land in the middle
    // of the shell's screen on every reconnect (the status line says what happens).
    let connector: Result<Arc<dyn Connector>, String> = match &args.dest {
        Some(dest) => reasonix_bootstrap::Destination::parse(dest)
            .map_err(|e| e.to_string())
            .and_then(|d| Ok((d, args.ssh.to_options()?)))
            .map(|(d, opts)| {
                let prompter = Arc::new(reasonix_bootstrap::TerminalPrompter::new(false));
                Arc::new(
                    reasonix_local::ssh::SshConnector::new(d, opts, prompter)
                        .with_upgrade(UpgradePolicy::Refuse),
                ) as Arc<dyn Connector>
            }),
        None => connector_for(None, &args.ssh, workspace, false),
    };
    let connector = match connector {
        Ok(c) => c,
        Err(e) => {
            eprintln!("reasonix: {e}");
            return 2;
        }
    };
    let (options, _) = reasonix_local::client::options_for(&config);
    let (client, mut events) = reasonix_local::client::Client::start(
        connector,
        Arc::new(reasonix_local::gateway::Gateway::new(&config)),
        options,
    );
    if let Err(e) = term::connected(&mut events).await {
        eprintln!("reasonix: {e}");
        return 1;
    }
    let which = match (args.attach, args.new_term) {
        (Some(n), _) => Which::Id(n),
        (None, true) => Which::New,
        (None, false) => Which::Reuse,
    };
    let result = if args.list {
        term::list(&client).await.map(|ptys| {
            print!("{}", term::table(&ptys));
            None
        })
    } else if let Some(n) = args.close {
        term::close(&client, n).await.map(|()| None)
    } else {
        term::run(&client, &mut events, which, &place)
            .await
            .map(Some)
    };
    match result {
        Ok(None) => 0,
        Ok(Some(TermEnd::Detached(n))) => {
            eprintln!("\r\nreasonix: detached; terminal {n} keeps running on {place} (`reasonix term --attach {n}` shows it again)");
            0
        }
        Ok(Some(TermEnd::Exited(status))) => {
            eprintln!("\r\nreasonix: the shell exited ({status})");
            0
        }
        Err(e) => {
            eprintln!("\r\nreasonix: {e}");
            1
        }
    }
}
