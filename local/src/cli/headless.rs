//! The headless commands: `reasonix run`, `reasonix rewind`, `reasonix mcp list`.

use std::io::Read;

use reasonix_local::config::{Config, LoadOptions, Overrides, PermissionMode};

use super::{connector_for, load_config, CliError, McpListArgs, RewindArgs, RunArgs};

/// The prompt of `reasonix run`: the argument, or standard input for `-`.
fn prompt_text(arg: String) -> Result<String, CliError> {
    if arg != "-" {
        return Ok(arg);
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| CliError::usage(format!("cannot read the prompt from standard input: {e}")))?;
    if text.trim().is_empty() {
        return Err(CliError::usage(
            "the prompt read from standard input is empty; pipe the prompt in (`echo PROMPT | reasonix run -`) or give it as the argument",
        ));
    }
    Ok(text)
}

/// `reasonix run PROMPT`: one turn, headless.
pub(super) async fn run(args: RunArgs) -> Result<(), CliError> {
    run_with(args, None).await
}

/// [`run`], or with `subagent` the turn of `reasonix subagent run|try` (the prompt is the
/// child's task).
pub(super) async fn run_with(
    args: RunArgs,
    subagent: Option<reasonix_local::run::SubagentRun>,
) -> Result<(), CliError> {
    let workspace = super::workspace_or_cwd(args.workspace.clone())?;
    super::keep::set_origin(args.ssh.as_deref(), &args.ssh_opts, &workspace);
    let mode = if args.yolo {
        Some(PermissionMode::Yolo)
    } else if args.auto {
        Some(PermissionMode::Auto)
    } else {
        None
    };
    let config = Config::load(&LoadOptions {
        project_dir: Some(workspace.clone()),
        // Over SSH the project file is the host workspace's: the host applies it and reports
        // what it ignored; a file in this laptop folder has nothing to do with that session.
        // A workspace that is not a folder has no project file; the bridge then says what
        // is wrong with the path (instead of a config error about `reasonix.toml`).
        ignore_project: args.ssh.is_some() || args.ssh_opts.exec.is_set() || !workspace.is_dir(),
        overrides: Overrides {
            model: args.run_model.clone(),
            mode,
            effort: args.effort,
            ..Overrides::default()
        },
        ..LoadOptions::default()
    })
    .map_err(CliError::usage)?;
    for w in config.warnings() {
        eprintln!("reasonix: warning: {w}");
    }
    if args.approve_plan && !args.continue_last && args.session.is_none() {
        return Err(CliError::usage(
            "--approve-plan executes the plan of an existing session: add --continue (the most recent session) or --session ID",
        ));
    }
    let goal = match args.goal.as_deref().map(reasonix_local::goal::parse) {
        None => None,
        Some(reasonix_local::goal::GoalCommand::Status) => {
            return Err(CliError::usage(
                "--goal takes an objective, or resume, pause or clear; `reasonix sessions` shows each session's goal and progress",
            ))
        }
        Some(reasonix_local::goal::GoalCommand::Act(mut action)) => {
            if let reasonix_forward::proto::GoalAction::Start { budgets, .. } = &mut action {
                *budgets = config.goal_budgets(args.run_model.as_deref());
            } else if !args.continue_last && args.session.is_none() {
                return Err(CliError::usage(
                    "--goal resume|pause|clear acts on an existing session: add --continue (the most recent session) or --session ID",
                ));
            }
            Some(action)
        }
    };
    let prompt = match args.prompt {
        Some(p) => prompt_text(p)?,
        None => String::new(),
    };
    // No daemon, no session, no login when the first model request could not be made.
    reasonix_local::gateway::preflight(&config, args.run_model.as_deref())
        .map_err(|e| CliError::usage(format!("{e} (nothing was started)")))?;
    reasonix_local::gateway::preflight_planner(&config)
        .map_err(|e| CliError::usage(format!("{e} (nothing was started)")))?;
    if !args.yes {
        if let Some(big) = config.big_prompt(args.run_model.as_deref(), &prompt) {
            return Err(CliError::usage(format!(
                "{big}; pass --yes to send it anyway, or set [agent] prompt_confirm_ratio (0 never asks)"
            )));
        }
    }
    let connector = connector_for(
        args.ssh.as_deref(),
        &args.ssh_opts,
        workspace,
        args.upgrade,
        args.mkdir,
    )?;
    let outcome = reasonix_local::run::run(
        &config,
        connector,
        reasonix_local::run::RunOptions {
            prompt,
            json: args.json,
            full_output: args.full_output,
            session: args.session,
            continue_last: args.continue_last,
            model: args.run_model,
            plan: args.plan,
            approve_plan: args.approve_plan,
            allow_memory_writes: args.allow_memory_writes,
            goal,
            subagent,
        },
    )
    .await;
    match (outcome.exit, outcome.reason) {
        (reasonix_local::exit::Exit::Completed, _) => Ok(()),
        // With --json the reason already went out as an `error`/`turn_finished` line.
        (exit, Some(r)) if !args.json => Err(CliError::new(exit, r)),
        (exit, _) => Err(CliError::reported(exit)),
    }
}

/// `reasonix rewind --to N`.
pub(super) async fn rewind(args: RewindArgs) -> Result<(), CliError> {
    use reasonix_forward::proto::RewindScope;
    let workspace = super::workspace_or_cwd(args.workspace.clone())?;
    let config = Config::load(&LoadOptions {
        project_dir: Some(workspace.clone()),
        ignore_project: args.ssh.is_some() || args.ssh_opts.exec.is_set(),
        ..LoadOptions::default()
    })
    .map_err(CliError::usage)?;
    let connector = connector_for(args.ssh.as_deref(), &args.ssh_opts, workspace, false, false)?;
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
        args.forget_memory,
    )
    .await;
    match (out.exit, out.reason) {
        (reasonix_local::exit::Exit::Completed, _) => Ok(()),
        (exit, Some(r)) => Err(CliError::new(exit, r)),
        (exit, None) => Err(CliError::reported(exit)),
    }
}

/// `reasonix mcp list`: connect like `run` does (so the host can open the laptop servers on
/// this link), ask for the MCP status and print it. A server that failed is a listed state;
/// only a connection failure makes the command fail.
pub(super) async fn mcp_list(args: McpListArgs) -> Result<(), CliError> {
    use reasonix_forward::proto::{Request, Response};
    let workspace = super::workspace_or_cwd(args.workspace.clone())?;
    let config = load_config(
        &workspace,
        None,
        None,
        args.ssh.is_some() || args.ssh_opts.exec.is_set(),
    )?;
    for w in config.warnings() {
        eprintln!("reasonix: warning: {w}");
    }
    let connector = connector_for(args.ssh.as_deref(), &args.ssh_opts, workspace, false, false)?;
    let (options, laptop) = reasonix_local::client::options_for(&config);
    let laptop_host = options.laptop_mcp.clone();
    let (client, mut events) = super::ask::start(&config, connector, options);
    // Servers start concurrently within their own startup timeouts (30 s by default); the
    // limit here only guards against a host that never answers.
    let limit = std::time::Duration::from_secs(300);
    let answer = super::ask::ask(&client, &mut events, Request::McpStatus { laptop }, limit).await;
    if let Some(h) = laptop_host {
        h.close_all();
    }
    let servers = match answer? {
        Response::McpServers { servers } => servers,
        other => return Err(super::ask::unexpected(other)),
    };
    if args.json {
        for s in &servers {
            match serde_json::to_string(s) {
                Ok(line) => println!("{line}"),
                Err(e) => return Err(CliError::failed(format!("cannot encode the answer: {e}"))),
            }
        }
    } else {
        print!("{}", reasonix_local::tui::mcp_table(&servers));
    }
    Ok(())
}
