//! `reasonix skills list [--ssh DEST]` (#33 §3): the skills a `/<name>` runs in a workspace —
//! the built-in ones, the user's (`~/.reasonix/skills/`, read here and sent along) and the
//! workspace's (`.reasonix/skills/`, read by the host) — as the host merges them, with every
//! skipped skill and why.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use reasonix_forward::proto::{Request, Response};
use reasonix_forward::skills::SkillInfo;

use super::{connector_for, load_config, CliError, SshArgs};

#[derive(Subcommand)]
pub(super) enum SkillsCmd {
    /// Every skill: name, description, source, how it runs, what it narrows to.
    List(SkillsArgs),
}

#[derive(Args)]
pub(super) struct SkillsArgs {
    /// Print the list as one JSON object (`{"skills": [...], "notices": [...]}`).
    #[arg(long)]
    json: bool,
    /// Workspace folder (default: the current folder).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// A host workspace over SSH: `[user@]host[:/path]`.
    #[arg(long, value_name = "DEST")]
    ssh: Option<String>,
    #[command(flatten)]
    ssh_opts: SshArgs,
}

/// Run a `reasonix skills` command.
pub(super) async fn skills(cmd: SkillsCmd) -> Result<(), CliError> {
    let SkillsCmd::List(args) = cmd;
    let (skills, notices) = fetch(&args).await?;
    if args.json {
        let line = serde_json::to_string(&serde_json::json!({
            "skills": skills,
            "notices": notices,
        }))
        .map_err(|e| CliError::failed(format!("cannot encode the answer: {e}")))?;
        println!("{line}");
    } else {
        print!("{}", reasonix_local::skills::table(&skills, &notices));
    }
    Ok(())
}

async fn fetch(args: &SkillsArgs) -> Result<(Vec<SkillInfo>, Vec<String>), CliError> {
    let workspace = super::workspace_or_cwd(args.workspace.clone())?;
    let mut config = load_config(&workspace, None, None, args.ssh.is_some())?;
    for w in config.warnings() {
        eprintln!("reasonix: warning: {w}");
    }
    let connector = connector_for(args.ssh.as_deref(), &args.ssh_opts, workspace, false, false)?;
    config.apply_workspace(&connector.describe());
    let (options, _) = reasonix_local::client::options_for(&config);
    let (client, mut events) = super::ask::start(&config, connector, options);
    let limit = std::time::Duration::from_secs(120);
    let request = Request::ListSkills {
        skills: reasonix_local::skills::settings(
            &config.home,
            reasonix_local::skills::model_labels(&config),
        ),
    };
    match super::ask::ask(&client, &mut events, request, limit).await? {
        Response::Skills { skills, notices } => Ok((skills, notices)),
        other => Err(super::ask::unexpected(other)),
    }
}
