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
    Attach(AttachArgs),
    /// List every workspace daemon of this user with its sessions and their states.
    Status {
        /// One JSON object per line (what `reasonix remote status` reads).
        #[arg(long)]
        json: bool,
    },
    /// Stop the daemon of one workspace (or of all of them with --all).
    Stop {
        /// Workspace whose daemon to stop.
        #[arg(long, required_unless_present = "all", conflicts_with = "all")]
        workspace: Option<PathBuf>,
        /// Stop every workspace daemon of this user.
        #[arg(long)]
        all: bool,
    },
    /// Print what this build can do for the installer (one `key=value` per line).
    #[command(hide = true)]
    Capabilities,
    /// Build the next host binary from this one plus a delta read on stdin (used by the
    /// installer; see docs/REMOTE.md "Delta upgrades").
    #[command(hide = true)]
    ApplyDelta(ApplyDeltaArgs),
}

#[derive(Args, Clone)]
struct AttachArgs {
    #[command(flatten)]
    daemon: DaemonArgs,
    /// Read the client's pipelined Hello frame (hex text) from this descriptor.
    #[arg(long, value_name = "FD")]
    hello_fd: Option<i32>,
    /// Token of the client's report lines (`REASONIX-ATTACH/1 <tag> ...` on stdout).
    #[arg(long)]
    tag: Option<String>,
    /// What to do about a running daemon of another build.
    #[arg(long, value_enum, default_value = "ask")]
    other_build: reasonix_remote::attach::OtherBuild,
    /// Create the workspace folder (and its parents) when it does not exist.
    #[arg(long)]
    mkdir: bool,
}

#[derive(Args)]
struct ApplyDeltaArgs {
    /// The binary the delta was made against.
    #[arg(long)]
    base: PathBuf,
    /// Where to write the result (must not exist; written 0600).
    #[arg(long)]
    out: PathBuf,
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
    // The installer's commands run without the async runtime.
    let cmd = match cmd {
        Cmd::Capabilities => {
            println!("{}", reasonix_forward::delta::DELTA_CAPABILITY);
            return ExitCode::SUCCESS;
        }
        Cmd::ApplyDelta(a) => {
            return match reasonix_remote::delta::apply(&a.base, std::io::stdin().lock(), &a.out) {
                Ok(n) => {
                    println!("applied={n}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("reasonix-remote apply-delta: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        other => other,
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
        // Handled above, before the runtime started.
        Cmd::Capabilities | Cmd::ApplyDelta(_) => Ok(()),
        Cmd::Daemon(args) => rt.block_on(run_daemon(args)),
        Cmd::Attach(args) => rt.block_on(async move {
            let hello = match args.hello_fd {
                Some(fd) => {
                    Some(reasonix_remote::attach::read_hello_fd(fd).map_err(|e| e.to_string())?)
                }
                None => None,
            };
            reasonix_remote::attach::run(reasonix_remote::attach::AttachOptions {
                workspace: args.daemon.workspace.clone(),
                daemon_args: args.daemon.passthrough(),
                hello,
                tag: args.tag,
                other_build: args.other_build,
                mkdir: args.mkdir,
            })
            .await
            .map_err(|e| e.to_string())
        }),
        Cmd::Status { json } => rt.block_on(status(json)),
        Cmd::Stop { workspace, all } => rt.block_on(stop(workspace, all)),
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

/// `status`: one line per daemon (JSON with `--json`).
async fn status(json: bool) -> Result<(), String> {
    use reasonix_remote::workspaces::StatusLine;
    for line in reasonix_remote::workspaces::list().await {
        if json {
            println!(
                "{}",
                serde_json::to_string(&line).map_err(|e| e.to_string())?
            );
            continue;
        }
        match line {
            StatusLine::Daemon(d) => {
                println!(
                    "{}  build {}  pid {}  clients {}",
                    d.workspace, d.build_id, d.pid, d.clients
                );
                for s in d.sessions {
                    println!("  {}  {:?}  {} turns  {}", s.id, s.state, s.turns, s.title);
                }
            }
            StatusLine::Unreachable { socket, reason } => {
                println!("{socket}: not answering ({reason})")
            }
        }
    }
    Ok(())
}

/// `stop`: JSON line per stopped daemon.
async fn stop(workspace: Option<PathBuf>, all: bool) -> Result<(), String> {
    use reasonix_remote::workspaces::{self, StatusLine};
    let mut stopped = Vec::new();
    if all {
        for line in workspaces::list().await {
            if let StatusLine::Daemon(d) = line {
                stopped.push(workspaces::stop_daemon(&d).await);
            }
        }
    } else if let Some(ws) = workspace {
        if let Some(line) = workspaces::stop_workspace(&ws)
            .await
            .map_err(|e| e.to_string())?
        {
            stopped.push(line);
        }
    }
    for line in stopped {
        println!(
            "{}",
            serde_json::to_string(&line).map_err(|e| e.to_string())?
        );
    }
    Ok(())
}

/// Tests set this to make `daemon` fail at startup (a "new build that does not start").
const TEST_DAEMON_FAIL_ENV: &str = "REASONIX_TEST_DAEMON_FAIL";

async fn run_daemon(args: DaemonArgs) -> Result<(), String> {
    use reasonix_remote::daemon::{Daemon, DaemonConfig};
    if std::env::var_os(TEST_DAEMON_FAIL_ENV).is_some_and(|v| v == "1") {
        return Err(format!(
            "{TEST_DAEMON_FAIL_ENV}=1: refusing to start (test knob)"
        ));
    }
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
