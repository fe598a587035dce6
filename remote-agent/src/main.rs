//! `reasonix-remote`: the host binary (daemon and attach bridge).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "reasonix-remote",
    about = "Reasonix host process",
    disable_version_flag = true
)]
struct Cli {
    /// Print the build id and exit.
    #[arg(long = "version", short = 'V')]
    version: bool,
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the workspace daemon in the foreground.
    Daemon(DaemonArgs),
    /// Start the daemon if needed and bridge stdin/stdout to it.
    Attach(DaemonArgs),
}

#[derive(Args, Clone)]
struct DaemonArgs {
    /// Workspace directory.
    #[arg(long, default_value = ".")]
    workspace: PathBuf,
    /// Exit after this many seconds with no client and no running work.
    #[arg(long, env = "REASONIX_IDLE_TIMEOUT_SECS", default_value_t = 1800)]
    idle_timeout: u64,
    /// Keep a disconnected client's link this many seconds for a resume.
    #[arg(long, env = "REASONIX_LINK_GRACE_SECS", default_value_t = 1800)]
    link_grace: u64,
    /// Heartbeat interval in milliseconds.
    #[arg(long, env = "REASONIX_HEARTBEAT_MS", default_value_t = 5000)]
    heartbeat_ms: u64,
    /// Declare a silent transport dead after this many milliseconds.
    #[arg(long, env = "REASONIX_DEAD_AFTER_MS", default_value_t = 15000)]
    dead_after_ms: u64,
}

impl DaemonArgs {
    fn passthrough(&self) -> Vec<String> {
        vec![
            format!("--idle-timeout={}", self.idle_timeout),
            format!("--link-grace={}", self.link_grace),
            format!("--heartbeat-ms={}", self.heartbeat_ms),
            format!("--dead-after-ms={}", self.dead_after_ms),
        ]
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.version {
        println!("reasonix-remote {}", reasonix_forward::build_id());
        return ExitCode::SUCCESS;
    }
    let Some(cmd) = cli.command else {
        eprintln!("reasonix-remote: missing command (daemon or attach); see --help");
        return ExitCode::from(2);
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("reasonix-remote: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match cmd {
        Cmd::Daemon(args) => rt.block_on(run_daemon(args)),
        Cmd::Attach(args) => rt.block_on(async move {
            let (stream, preamble) =
                reasonix_remote::attach::connect_own_build(&args.workspace, &args.passthrough())
                    .await
                    .map_err(|e| e.to_string())?;
            reasonix_remote::attach::bridge(stream, preamble)
                .await
                .map_err(|e| e.to_string())
        }),
    };
    // Don't wait for blocking stdin readers.
    rt.shutdown_timeout(Duration::from_millis(100));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("reasonix-remote: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run_daemon(args: DaemonArgs) -> Result<(), String> {
    use reasonix_remote::daemon::{Daemon, DaemonConfig};
    let paths = reasonix_remote::paths::HostPaths::for_workspace(&args.workspace)
        .map_err(|e| e.to_string())?;
    init_logging(&paths.log_file);
    let runtime = reasonix_remote::runtime::build(&paths).await;
    let sandbox_status = runtime.tool_ctx.sandbox.status();
    let mut config = DaemonConfig {
        idle_timeout: Duration::from_secs(args.idle_timeout),
        link_grace: Duration::from_secs(args.link_grace),
        ..DaemonConfig::default()
    };
    config.link.heartbeat_interval = Duration::from_millis(args.heartbeat_ms);
    config.link.dead_after = Duration::from_millis(args.dead_after_ms);
    let daemon = Daemon::new(paths, config, Arc::new(runtime), sandbox_status);
    daemon.serve().await.map_err(|e| e.to_string())
}

fn init_logging(file: &std::path::Path) {
    let Ok(f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
    else {
        return;
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("REASONIX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(std::sync::Mutex::new(f))
        .try_init();
}
