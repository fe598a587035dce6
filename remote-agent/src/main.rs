//! `reasonix-remote`: the host binary (daemon and attach bridge).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

mod cli;

use cli::{Cmd, DaemonArgs, Exit};

fn main() -> ExitCode {
    let Some(args) = std::env::args_os()
        .skip(1)
        .map(|a| a.into_string().ok())
        .collect::<Option<Vec<String>>>()
    else {
        eprintln!("error: invalid UTF-8 was detected in one or more arguments");
        return ExitCode::from(2);
    };
    let cli = match cli::parse(args) {
        Ok(cli) => cli,
        Err(Exit::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(Exit::Usage(text)) => {
            eprint!("{text}");
            return ExitCode::from(2);
        }
    };
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
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    // `REASONIX_LOG`: `debug`, or `target=level` directives (`reasonix_remote=debug,info`); an
    // unset or unreadable value logs at `info`. (Plain targets, not EnvFilter's span/field
    // syntax: that one would link a regex DFA builder into the host.)
    let filter = std::env::var("REASONIX_LOG")
        .ok()
        .and_then(|v| v.parse::<tracing_subscriber::filter::Targets>().ok())
        .unwrap_or_else(|| {
            tracing_subscriber::filter::Targets::new().with_default(tracing::Level::INFO)
        });
    let _ = tracing_subscriber::fmt()
        .json()
        .with_writer(std::sync::Mutex::new(f))
        .finish()
        .with(filter)
        .try_init();
}
