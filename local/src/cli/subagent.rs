//! `reasonix subagent run|try PROFILE "task"` (#33 §3): one subagent of a profile (the
//! built-in `general` and `explore`, or a skill) run headless as a turn of a session, its
//! answer printed like `reasonix run`'s (`--json`: the same lines, the child's events as
//! `subagent` lines under the call `sub-<request id>`). `try` runs it read-only.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{headless, parse_effort, CliError, RunArgs, SshArgs};
use reasonix_local::config::ReasoningEffort;

#[derive(Subcommand)]
pub(super) enum SubagentCmd {
    /// Run a subagent of PROFILE on TASK and print its answer (writers follow the
    /// permission mode: headless, they need --auto or --yolo).
    Run(SubagentArgs),
    /// Run a subagent of PROFILE on TASK read-only (it cannot change files or run
    /// commands), and print its answer.
    Try(SubagentArgs),
}

#[derive(Args)]
pub(super) struct SubagentArgs {
    /// A built-in profile (`general`, `explore`) or a skill's name; an unknown one is
    /// refused with the list of known ones.
    profile: String,
    /// The task; `-` reads it from standard input.
    task: String,
    /// Print one JSON event per line (as `reasonix run --json`).
    #[arg(long)]
    json: bool,
    /// Allow writers without asking (explicit ask/deny rules still hold).
    #[arg(long, conflicts_with = "yolo")]
    auto: bool,
    /// Never ask (deny rules still hold).
    #[arg(long)]
    yolo: bool,
    /// Model: provider/model, a provider name or a model name.
    #[arg(long = "model")]
    run_model: Option<String>,
    /// Reasoning effort: low, medium, high or max.
    #[arg(long, value_parser = parse_effort)]
    effort: Option<ReasoningEffort>,
    /// Run it in this session (its conversation gets the task and the answer).
    #[arg(long = "session", conflicts_with = "continue_last")]
    session: Option<String>,
    /// Run it in the most recent session of this workspace.
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
}

/// Run a `reasonix subagent` command.
pub(super) async fn subagent(cmd: SubagentCmd) -> Result<(), CliError> {
    let (args, read_only) = match cmd {
        SubagentCmd::Run(a) => (a, false),
        SubagentCmd::Try(a) => (a, true),
    };
    let sub = reasonix_local::run::SubagentRun {
        profile: args.profile,
        read_only,
    };
    let run = RunArgs {
        prompt: Some(args.task),
        goal: None,
        plan: false,
        approve_plan: false,
        json: args.json,
        full_output: false,
        auto: args.auto,
        yolo: args.yolo,
        run_model: args.run_model,
        effort: args.effort,
        session: args.session,
        continue_last: args.continue_last,
        workspace: args.workspace,
        ssh: args.ssh,
        ssh_opts: args.ssh_opts,
        upgrade: false,
        mkdir: false,
        yes: true,
        allow_memory_writes: false,
    };
    headless::run_with(run, Some(sub)).await
}
