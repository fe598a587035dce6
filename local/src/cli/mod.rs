//! The `reasonix` command line: arguments (clap), one function per command, and
//! [`CliError`] carrying the exit code (`reasonix_local::exit::Exit`). A command prints its
//! own output; its error is printed once, by `main`.

mod acp;
mod ask;
mod cp;
mod error;
mod exec;
mod headless;
mod hooks;
mod keep;
mod mcp_auth;
mod memory;
mod ports;
mod remote;
mod sessions;
mod skills;
mod subagent;
mod term;
mod tui;

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use reasonix_local::config::{Config, LoadOptions, Overrides, ReasoningEffort};
use reasonix_local::connect::{locate_host_binary, Connector, LocalConnector, UpgradePolicy};
use reasonix_local::exit::Exit;

pub use error::CliError;

#[derive(Parser)]
#[command(name = "reasonix", version = reasonix_forward::build_id(), about = "Cache-first coding agent with a remote workbench over SSH")]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
    /// Write a debug trace (connect stages, the host's stderr of the link) to
    /// `<reasonix home>/logs/reasonix.log`; `RUST_LOG` sets the filter (and alone enables it).
    #[arg(long, global = true)]
    verbose: bool,
    #[command(flatten)]
    tui: TuiArgs,
}

/// Options of the interactive workbench.
#[derive(Args, Clone, Default)]
struct TuiArgs {
    /// Model: provider/model, a provider name or a model name.
    #[arg(long)]
    model: Option<String>,
    /// Reasoning effort: low, medium, high or max (the model must take it; `/effort`
    /// changes it in the session).
    #[arg(long, value_parser = parse_effort)]
    effort: Option<ReasoningEffort>,
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

// Parsed once per process: the size of the biggest argument set does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Cmd {
    /// Run one turn headless in the current folder (or over SSH with --ssh).
    #[command(after_help = Exit::HELP)]
    Run(RunArgs),
    /// Open the workbench on a remote workspace: `[user@]host[:/path]`.
    Ssh {
        /// `[user@]host[:/path]` or `ssh://[user@]host[:port]/path`.
        dest: String,
        #[command(flatten)]
        ssh: SshArgs,
        #[command(flatten)]
        tui: TuiArgs,
        #[command(flatten)]
        open: OpenArgs,
    },
    /// Open the workbench on a workspace reached by a command: `reasonix exec 'docker exec
    /// -i CTR' :/work/repo` (the command's stdin/stdout must reach a shell once `sh -s` is
    /// appended).
    Exec {
        /// The command, e.g. 'docker exec -i CTR' or 'kubectl exec -i POD --'.
        command: String,
        /// `:/path` (or `/path`): the workspace on the host.
        workspace: String,
        #[command(flatten)]
        tui: TuiArgs,
        #[command(flatten)]
        open: OpenArgs,
    },
    /// Open the workbench in a Docker container: `reasonix docker CTR:/path`.
    Docker {
        /// `CONTAINER:/path`.
        spec: String,
        #[command(flatten)]
        tui: TuiArgs,
        #[command(flatten)]
        open: OpenArgs,
    },
    /// Open the workbench in a Podman container: `reasonix podman CTR:/path`.
    Podman {
        /// `CONTAINER:/path`.
        spec: String,
        #[command(flatten)]
        tui: TuiArgs,
        #[command(flatten)]
        open: OpenArgs,
    },
    /// Open the workbench in a Kubernetes pod: `reasonix kube [-n NS] [-c CONTAINER]
    /// POD:/path` (runs `kubectl exec -i`).
    Kube {
        /// `POD:/path`.
        spec: String,
        /// Namespace.
        #[arg(short = 'n', long)]
        namespace: Option<String>,
        /// Container of the pod.
        #[arg(short = 'c', long)]
        container: Option<String>,
        #[command(flatten)]
        tui: TuiArgs,
        #[command(flatten)]
        open: OpenArgs,
        /// Print the command that would be run for each connection and exit.
        #[arg(long)]
        print_command: bool,
    },
    /// Rewind a session to just before turn N (files, conversation or both).
    Rewind(RewindArgs),
    /// Manage what Reasonix installed on a host.
    Remote {
        #[command(subcommand)]
        action: RemoteCmd,
    },
    /// Serve the Agent Client Protocol on stdio for an editor (Zed `agent_servers`), on the
    /// editor's folder or, with --ssh, on a host workspace.
    Acp(acp::AcpArgs),
    /// Hooks: every hook with its source and trust; trust or untrust the workspace's
    /// project hook files (`.reasonix/hooks.toml`, `.claude/settings.json`).
    Hooks {
        #[command(subcommand)]
        action: hooks::HooksCmd,
    },
    /// Skills: what `/<name>` runs (built-in, `~/.reasonix/skills/`, `.reasonix/skills/`).
    Skills {
        #[command(subcommand)]
        action: skills::SkillsCmd,
    },
    /// Subagents headless: `run PROFILE "task"` runs one child of a profile (`general`,
    /// `explore` or a skill) and prints its answer; `try` runs it read-only.
    #[command(after_help = Exit::HELP)]
    Subagent {
        #[command(subcommand)]
        action: subagent::SubagentCmd,
    },
    /// MCP servers: where each runs, its state and its tools.
    Mcp {
        #[command(subcommand)]
        action: McpCmd,
    },
    /// A host shell that survives network drops: `reasonix term [DEST[:/path]]` (without
    /// DEST, the local workspace). `~.` at the start of a line detaches; the shell keeps
    /// running on the host and `reasonix term` shows it again.
    Term(term::TermArgs),
    /// Forward the host workspace's ports to this laptop's loopback (what its processes
    /// listen on, and `--add` ones) until interrupted; `--list` prints them.
    Ports(ports::PortsArgs),
    /// Copy files between this laptop and the host: `reasonix cp [-r] [--ssh DEST] SRC...
    /// DEST`, host paths with a leading `:` (`reasonix cp --ssh me@devbox:/repo shot.png
    /// :shots/`). SHA-256 checked, resumable, progress on stderr.
    Cp(cp::CpArgs),
    /// The workspace's sessions: id, title, turns, last activity, state, driver; `rename`,
    /// `delete` (to a trash kept 7 days), `restore`, `purge`.
    /// Remembered facts: the workspace's project facts, or with --global the user's own
    /// (`list`, `search`, `show`, `add`, `forget`, `restore`, `export`).
    Memory {
        #[command(subcommand)]
        action: memory::MemoryCmd,
    },
    #[command(args_conflicts_with_subcommands = true)]
    Sessions {
        #[command(subcommand)]
        action: Option<sessions::SessionsCmd>,
        #[command(flatten)]
        list: sessions::SessionsListArgs,
    },
    /// The goal keeper of one session (started by the client that started the goal).
    #[command(hide = true)]
    Keep(keep::KeepArgs),
}

#[derive(Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per run
enum McpCmd {
    /// Start every MCP server of the workspace (host) and of the laptop config, and list each
    /// with where it runs, its state (ready, or failed with the reason) and its tools.
    List(McpListArgs),
    /// Sign in to an HTTP MCP server with OAuth (browser, loopback redirect); the token stays
    /// on this laptop.
    Login(mcp_auth::McpLoginArgs),
    /// Forget the sign-in to an MCP server.
    Logout(mcp_auth::McpLogoutArgs),
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
    /// Also forget (archive) the memory facts the rewound turns remembered; without it they
    /// are kept and listed.
    #[arg(long)]
    forget_memory: bool,
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
    /// `[user@]host[:/path]` or `ssh://[user@]host[:port]/path` (or none with `--docker`,
    /// `--podman`, `--kube`, `--exec`).
    dest: Option<String>,
    #[command(flatten)]
    ssh: SshArgs,
}

/// How the workbench opens a workspace: the same two options on `ssh`, `exec`, `docker`,
/// `podman` and `kube`.
#[derive(Args, Default, Clone, Copy)]
struct OpenArgs {
    /// Start a new session instead of reattaching to the most recent one.
    #[arg(long = "new")]
    new_session: bool,
    /// Create the workspace folder when it does not exist.
    #[arg(long)]
    mkdir: bool,
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
    /// Forward this laptop's ssh-agent to the host's workspace (as `ForwardAgent yes`; it
    /// goes through the link, so the host's `AllowAgentForwarding` does not matter).
    #[arg(short = 'A')]
    forward_agent: bool,
    /// Containers and pods instead of SSH (`--docker`, `--podman`, `--kube`, `--exec`).
    #[command(flatten)]
    exec: exec::ExecArgs,
    /// On the SSH host, work inside this container: `CONTAINER:/path` (runs `docker exec -i`
    /// or `podman exec -i` on the host; see --engine).
    #[arg(long, value_name = "CTR:/path")]
    container: Option<String>,
    /// With --container: the host's engine, `docker`, `podman` or `auto` (docker when it is
    /// on the host's PATH, else podman).
    #[arg(
        long,
        value_name = "ENGINE",
        requires = "container",
        default_value = "auto"
    )]
    engine: String,
}

impl SshArgs {
    /// `--container CTR:/path` for an SSH destination `dest` (whose own path must then be
    /// absent: the workspace is the container's).
    fn host_container(
        &self,
        dest: &reasonix_bootstrap::Destination,
    ) -> Result<Option<reasonix_local::ssh::HostContainer>, CliError> {
        let Some(spec) = &self.container else {
            return Ok(None);
        };
        if dest.path.is_some() {
            return Err(CliError::usage(format!(
                "with --container the workspace is the container's (`--container {spec}`); drop the path from `{}`",
                dest.host
            )));
        }
        let engine = reasonix_bootstrap::Engine::parse(&self.engine).map_err(CliError::usage)?;
        let t = reasonix_local::exec_target::ExecTarget::container("docker", spec)
            .map_err(CliError::usage)?;
        let name = t.argv.last().cloned().unwrap_or_default();
        Ok(Some(reasonix_local::ssh::HostContainer {
            engine,
            name,
            workspace: t.workspace,
        }))
    }

    fn to_options(&self) -> Result<reasonix_bootstrap::SshOptions, String> {
        let mut o = reasonix_bootstrap::SshOptions {
            port: self.port,
            identity_files: self.identity.clone(),
            jump: self.jump.clone(),
            config_file: self.config_file.clone(),
            ..Default::default()
        };
        // As in OpenSSH: `-A` is given before every `-o` and file, so it wins.
        if self.forward_agent {
            o.push_option("ForwardAgent=yes")
                .map_err(|e| e.to_string())?;
        }
        for kv in &self.option {
            o.push_option(kv).map_err(|e| e.to_string())?;
        }
        Ok(o)
    }
}

fn ssh_connector(dest: &str, ssh: &SshArgs) -> Result<reasonix_local::ssh::SshConnector, CliError> {
    let dest = reasonix_bootstrap::Destination::parse(dest).map_err(CliError::usage)?;
    let opts = ssh.to_options().map_err(CliError::usage)?;
    let container = ssh.host_container(&dest)?;
    let prompter: Arc<dyn reasonix_bootstrap::Prompter> =
        if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            Arc::new(reasonix_bootstrap::TerminalPrompter::new(true))
        } else {
            Arc::new(reasonix_bootstrap::NonInteractivePrompter)
        };
    Ok(reasonix_local::ssh::SshConnector::new(dest, opts, prompter).with_container(container))
}

#[derive(Args)]
struct RunArgs {
    /// The prompt; `-` reads it from standard input. With --approve-plan or --goal: none.
    #[arg(required_unless_present_any = ["approve_plan", "goal"])]
    prompt: Option<String>,
    /// Work toward an objective turn after turn (the host goes on with no client attached)
    /// and return when the goal ends: complete (exit 0), blocked, stopped, or paused at a
    /// `[agent] goal_*_budget`. `--goal resume|pause|clear` with --continue acts on the
    /// session's goal (resume also waits for a goal that is still running).
    #[arg(long, value_name = "OBJECTIVE", conflicts_with_all = ["prompt", "plan", "approve_plan"])]
    goal: Option<String>,
    /// Plan first: turn plan mode on and send the prompt as the task to plan. Nothing is
    /// changed; the plan is printed (a `plan` line with --json) and saved in the session.
    /// Then `run --continue --approve-plan` executes it, `run --continue "comment"` revises it.
    #[arg(long, conflicts_with = "approve_plan")]
    plan: bool,
    /// Execute the plan waiting in the session (with --continue or --session).
    #[arg(long, conflicts_with = "prompt")]
    approve_plan: bool,
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
    /// Reasoning effort: low, medium, high or max (the model must take it).
    #[arg(long, value_parser = parse_effort)]
    effort: Option<ReasoningEffort>,
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
    /// Create the workspace folder (on the host with --ssh) when it does not exist.
    #[arg(long)]
    mkdir: bool,
    /// Send a prompt even when it exceeds `[agent] prompt_confirm_ratio` of the context
    /// window (without this, `run` refuses it).
    #[arg(long)]
    yes: bool,
    /// Let the model write memory that would need the user's approval (global, user and
    /// feedback facts, subject updates, forget); without it such writes are refused.
    #[arg(long)]
    allow_memory_writes: bool,
}

/// Parse the arguments and run the command.
pub fn run() -> Result<(), CliError> {
    let cli = Cli::parse();
    init_log(cli.verbose)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::failed(format!("cannot start the async runtime: {e}")))?;
    let result = rt.block_on(dispatch(cli));
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    result
}

/// `--verbose` or `RUST_LOG`: the trace goes to `<reasonix home>/logs/reasonix.log`
/// (appended), never to the terminal, which the TUI and `--json` own.
fn init_log(verbose: bool) -> Result<(), CliError> {
    let env = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty());
    if !verbose && env.is_none() {
        return Ok(());
    }
    let dir = reasonix_local::config::reasonix_home()
        .map_err(CliError::usage)?
        .join("logs");
    let path = dir.join("reasonix.log");
    let file = std::fs::create_dir_all(&dir)
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
        })
        .map_err(|e| CliError::usage(format!("cannot open the log {}: {e}", path.display())))?;
    let filter = tracing_subscriber::EnvFilter::new(env.as_deref().unwrap_or("debug"));
    // A second subscriber (none is set elsewhere) would be an error only in tests.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init();
    if verbose {
        eprintln!("reasonix: debug log in {}", path.display());
    }
    Ok(())
}

async fn dispatch(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Some(Cmd::Run(args)) => headless::run(args).await,
        Some(Cmd::Remote { action }) => remote::remote(action).await,
        Some(Cmd::Rewind(args)) => headless::rewind(args).await,
        Some(Cmd::Acp(args)) => acp::acp(args).await,
        Some(Cmd::Term(args)) => term::term(args).await,
        Some(Cmd::Ports(args)) => ports::ports(args).await,
        Some(Cmd::Cp(args)) => cp::cp(args).await,
        Some(Cmd::Sessions { action, list }) => sessions::sessions(action, list).await,
        Some(Cmd::Keep(args)) => keep::keep(args).await,
        Some(Cmd::Memory { action }) => memory::memory(action).await,
        Some(Cmd::Mcp {
            action: McpCmd::List(args),
        }) => headless::mcp_list(args).await,
        Some(Cmd::Mcp {
            action: McpCmd::Login(args),
        }) => mcp_auth::login(args).await,
        Some(Cmd::Mcp {
            action: McpCmd::Logout(args),
        }) => mcp_auth::logout(args).await,
        Some(Cmd::Hooks { action }) => hooks::hooks(action).await,
        Some(Cmd::Skills { action }) => skills::skills(action).await,
        Some(Cmd::Subagent { action }) => subagent::subagent(action).await,
        Some(Cmd::Ssh {
            dest,
            ssh,
            tui,
            open,
        }) => tui::tui_ssh(dest, ssh, tui, open).await,
        Some(Cmd::Exec {
            command,
            workspace,
            tui,
            open,
        }) => exec::tui_exec(exec::ExecCmd::Command { command, workspace }, tui, open).await,
        Some(Cmd::Docker { spec, tui, open }) => {
            exec::tui_exec(
                exec::ExecCmd::Container {
                    engine: "docker",
                    spec,
                },
                tui,
                open,
            )
            .await
        }
        Some(Cmd::Podman { spec, tui, open }) => {
            exec::tui_exec(
                exec::ExecCmd::Container {
                    engine: "podman",
                    spec,
                },
                tui,
                open,
            )
            .await
        }
        Some(Cmd::Kube {
            spec,
            namespace,
            container,
            tui,
            open,
            print_command,
        }) => {
            let cmd = exec::ExecCmd::Kube {
                namespace,
                container,
                spec,
            };
            if print_command {
                let t = cmd.target()?;
                println!("{} sh -s", t.argv.join(" "));
                println!("workspace {}", t.workspace);
                return Ok(());
            }
            exec::tui_exec(cmd, tui, open).await
        }
        None => tui::tui_local(cli.tui).await,
    }
}

/// `--workspace`, else the current folder.
fn workspace_or_cwd(workspace: Option<PathBuf>) -> Result<PathBuf, CliError> {
    match workspace {
        Some(w) => Ok(w),
        None => std::env::current_dir()
            .map_err(|e| CliError::usage(format!("cannot determine the workspace: {e}"))),
    }
}

/// The configuration of a session on `workspace`; `remote` (SSH) skips the laptop folder's
/// project file, since the host applies its own workspace's file.
fn load_config(
    workspace: &std::path::Path,
    model: Option<String>,
    effort: Option<ReasoningEffort>,
    remote: bool,
) -> Result<Config, CliError> {
    Config::load(&LoadOptions {
        project_dir: Some(workspace.to_path_buf()),
        ignore_project: remote,
        overrides: Overrides {
            model,
            effort,
            ..Overrides::default()
        },
        ..LoadOptions::default()
    })
    .map_err(CliError::usage)
}

/// `--effort LEVEL`.
fn parse_effort(s: &str) -> Result<ReasoningEffort, String> {
    ReasoningEffort::parse(s)
        .ok_or_else(|| format!("`{s}` is not an effort level; use low, medium, high or max"))
}

/// The transport for a command: SSH when `--ssh DEST` is given, else local mode.
/// Headless commands never ask: a busy daemon of another build is replaced only with
/// `upgrade` (`--upgrade`), otherwise they refuse with a message.
fn connector_for(
    ssh: Option<&str>,
    ssh_opts: &SshArgs,
    workspace: PathBuf,
    upgrade: bool,
    mkdir: bool,
) -> Result<Arc<dyn Connector>, CliError> {
    let policy = if upgrade {
        UpgradePolicy::Force
    } else {
        UpgradePolicy::Refuse
    };
    if ssh.is_none() && ssh_opts.container.is_some() {
        return Err(CliError::usage(
            "--container names a container on an SSH host and needs --ssh DEST; for a container on this machine use --docker CTR:/path or --podman CTR:/path",
        ));
    }
    if let Some(target) = ssh_opts.exec.target(&workspace)? {
        if ssh.is_some() {
            return Err(CliError::usage(
                "--ssh and --docker/--podman/--kube/--exec are alternatives; give one",
            ));
        }
        return Ok(Arc::new(exec::exec_connector(target, policy, mkdir, false)));
    }
    Ok(match ssh {
        Some(dest) => Arc::new(
            ssh_connector(dest, ssh_opts)?
                .with_upgrade(policy)
                .with_mkdir(mkdir),
        ),
        None => Arc::new(LocalConnector {
            upgrade: policy,
            mkdir,
            ..LocalConnector::new(locate_host_binary().map_err(CliError::usage)?, workspace)
        }),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod agent_flag_tests {
    use super::*;
    use clap::CommandFactory;

    /// `-A` is `ForwardAgent yes` given before every `-o` and file, as in OpenSSH (and no
    /// subcommand's flags clash with it).
    #[test]
    fn dash_a_forwards_the_agent() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from(["reasonix", "ssh", "-A", "-F", "none", "me@h:/ws"]).unwrap();
        let Some(Cmd::Ssh { dest, ssh, .. }) = cli.command else {
            panic!("not ssh")
        };
        let opts = ssh.to_options().unwrap();
        let dest = reasonix_bootstrap::Destination::parse(&dest).unwrap();
        assert!(opts.resolve(&dest).unwrap().forward_agent);
        let cli = Cli::try_parse_from(["reasonix", "ssh", "-F", "none", "me@h:/ws"]).unwrap();
        let Some(Cmd::Ssh { dest, ssh, .. }) = cli.command else {
            panic!("not ssh")
        };
        let dest = reasonix_bootstrap::Destination::parse(&dest).unwrap();
        assert!(
            !ssh.to_options()
                .unwrap()
                .resolve(&dest)
                .unwrap()
                .forward_agent
        );
    }
}
