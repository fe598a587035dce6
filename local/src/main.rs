//! `reasonix`: the laptop binary.


use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use reasonix_local::config::{Config, LoadOptions, Overrides, PermissionMode};
use reasonix_local::connect::{locate_host_binary, Connector, LocalConnector};

#[derive(Parser)]
#[command(name = "reasonix", version = reasonix_forward::build_id(), about = "Cache-first coding agent with a remote workbench over SSH")]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one turn headless in the current folder (or over SSH with --ssh).
    Run(RunArgs),
}

#[derive(Args)]
struct RunArgs {
    /// The prompt.
    prompt: String,
    /// Print one JSON event per line.
    #[arg(long)]
    json: bool,
    /// Allow writers without asking (explicit ask/deny rules still hold).
    #[arg(long, conflicts_with = "yolo")]
    auto: bool,
    /// Never ask (deny rules still hold).
    #[arg(long)]
    yolo: bool,
    /// Model: provider/model, a provider name or a model name.
    #[arg(long)]
    model: Option<String>,
    /// Resume this session.
    #[arg(long, conflicts_with = "continue_last")]
    session: Option<String>,
    /// Resume the most recent session of this workspace.
    #[arg(long = "continue")]
    continue_last: bool,
    /// Workspace folder (default: the current folder).
    #[arg(long)]
    workspace: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("reasonix: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = match cli.command {
        Some(Cmd::Run(args)) => rt.block_on(run(args)),
        None => {
            eprintln!("reasonix: the interactive TUI is not built yet; use `reasonix run \"PROMPT\"`");
            2
        }
    };
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    ExitCode::from(code.clamp(0, 255) as u8)
}

async fn run(args: RunArgs) -> i32 {
    let workspace = match args.workspace.clone().map(Ok).unwrap_or_else(std::env::current_dir) {
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
        overrides: Overrides {
            model: args.model.clone(),
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
    let binary = match locate_host_binary() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("reasonix: {e}");
            return 2;
        }
    };
    let connector: Arc<dyn Connector> = Arc::new(LocalConnector { binary, workspace });
    let outcome = reasonix_local::run::run(
        &config,
        connector,
        reasonix_local::run::RunOptions {
            prompt: args.prompt,
            json: args.json,
            session: args.session,
            continue_last: args.continue_last,
            model: args.model,
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
