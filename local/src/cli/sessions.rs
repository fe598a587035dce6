//! `reasonix sessions`: list the workspace's sessions (or its trash), rename, delete (to
//! the trash), restore and purge them, locally or on a host with `--ssh`.

use clap::{Args, Subcommand};
use reasonix_forward::proto::{Request, Response, SessionInfo, TrashedSession};

use super::{connector_for, load_config, CliError, SshArgs};

/// Where the sessions live: the local folder or a host workspace.
#[derive(Args, Clone, Default)]
pub(super) struct SessionsTarget {
    /// Workspace folder (default: the current folder).
    #[arg(long)]
    workspace: Option<std::path::PathBuf>,
    /// The sessions of a host workspace over SSH: `[user@]host[:/path]`.
    #[arg(long, value_name = "DEST")]
    ssh: Option<String>,
    #[command(flatten)]
    ssh_opts: SshArgs,
}

/// `reasonix sessions [list]` options.
#[derive(Args, Clone, Default)]
pub(super) struct SessionsListArgs {
    /// Print one JSON object per session instead of a table.
    #[arg(long)]
    json: bool,
    /// List the trash (deleted sessions, restorable for 7 days) instead.
    #[arg(long)]
    trash: bool,
    #[command(flatten)]
    target: SessionsTarget,
}

/// `reasonix sessions` subcommands.
#[derive(Subcommand)]
pub(super) enum SessionsCmd {
    /// List the sessions (the default).
    List(SessionsListArgs),
    /// Give a session a title (an empty title restores the one from its first prompt).
    Rename {
        /// Session id.
        id: String,
        /// The new title.
        title: String,
        #[command(flatten)]
        target: SessionsTarget,
    },
    /// Move a session to the trash (restorable for 7 days). A session running a turn or
    /// open in a client is refused: cancel or close it first.
    Delete {
        /// Session id.
        id: String,
        #[command(flatten)]
        target: SessionsTarget,
    },
    /// Bring a session back from the trash.
    Restore {
        /// Session id.
        id: String,
        #[command(flatten)]
        target: SessionsTarget,
    },
    /// Remove a trashed session (or, with --all, the whole trash) for good.
    Purge {
        /// Session id (in the trash).
        #[arg(required_unless_present = "all")]
        id: Option<String>,
        /// Purge every trashed session.
        #[arg(long, conflicts_with = "id")]
        all: bool,
        #[command(flatten)]
        target: SessionsTarget,
    },
}

/// Run `reasonix sessions`.
pub(super) async fn sessions(
    action: Option<SessionsCmd>,
    list: SessionsListArgs,
) -> Result<(), CliError> {
    match action.unwrap_or(SessionsCmd::List(list)) {
        SessionsCmd::List(args) => {
            if args.trash {
                let Response::Trash { sessions } = ask(&args.target, Request::ListTrash).await?
                else {
                    return Err(unexpected());
                };
                print_trash(&sessions, args.json)
            } else {
                let Response::Sessions { sessions } =
                    ask(&args.target, Request::ListSessions).await?
                else {
                    return Err(unexpected());
                };
                print_sessions(&sessions, args.json)
            }
        }
        SessionsCmd::Rename { id, title, target } => {
            ask(
                &target,
                Request::RenameSession {
                    session: id.clone(),
                    title: title.clone(),
                },
            )
            .await?;
            println!("session {id} renamed to {:?}", title.trim());
            Ok(())
        }
        SessionsCmd::Delete { id, target } => {
            ask(
                &target,
                Request::DeleteSession {
                    session: id.clone(),
                },
            )
            .await?;
            println!(
                "session {id} moved to the trash; `reasonix sessions restore {id}` brings it back within {} days",
                reasonix_forward::proto::TRASH_KEEP_DAYS
            );
            Ok(())
        }
        SessionsCmd::Restore { id, target } => {
            ask(
                &target,
                Request::RestoreSession {
                    session: id.clone(),
                },
            )
            .await?;
            println!("session {id} restored");
            Ok(())
        }
        SessionsCmd::Purge { id, all, target } => {
            let session = if all { None } else { id };
            let Response::Purged { sessions } =
                ask(&target, Request::PurgeSessions { session }).await?
            else {
                return Err(unexpected());
            };
            if sessions.is_empty() {
                println!("the trash is empty");
            }
            for id in sessions {
                println!("session {id} purged");
            }
            Ok(())
        }
    }
}

fn unexpected() -> CliError {
    CliError::failed("unexpected answer from the host")
}

/// Connect (locally or over SSH), send one request without opening a session, and return
/// the answer; an error answer becomes a failure naming the host's reason.
async fn ask(target: &SessionsTarget, request: Request) -> Result<Response, CliError> {
    let workspace = super::workspace_or_cwd(target.workspace.clone())?;
    let config = load_config(
        &workspace,
        None,
        None,
        target.ssh.is_some() || target.ssh_opts.exec.is_set(),
    )?;
    for w in config.warnings() {
        eprintln!("reasonix: warning: {w}");
    }
    let connector = connector_for(
        target.ssh.as_deref(),
        &target.ssh_opts,
        workspace,
        false,
        false,
    )?;
    let (options, _) = reasonix_local::client::options_for(&config);
    let (client, mut events) = super::ask::start(&config, connector, options);
    let limit = std::time::Duration::from_secs(120);
    super::ask::ask(&client, &mut events, request, limit).await
}

fn json_lines<T: serde::Serialize>(items: &[T]) -> Result<(), CliError> {
    for item in items {
        let line = serde_json::to_string(item)
            .map_err(|e| CliError::failed(format!("cannot encode the answer: {e}")))?;
        println!("{line}");
    }
    Ok(())
}

/// `running`, `waiting for laptop`, … as the table shows a state.
pub fn state_label(state: reasonix_forward::proto::TurnState) -> &'static str {
    use reasonix_forward::proto::TurnState;
    match state {
        TurnState::Idle => "idle",
        TurnState::Running => "running",
        TurnState::WaitingForLaptop => "waiting for laptop",
        TurnState::WaitingForApproval => "waiting for approval",
        TurnState::Paused => "paused",
    }
}

/// `2026-05-01T10:00:00.123Z` as `2026-05-01 10:00`.
fn short_time(ts: &str) -> String {
    let t: String = ts.chars().take(16).collect();
    t.replacen('T', " ", 1)
}

/// Who keeps a session's goal: this laptop's keeper (with its pid) or another laptop's.
fn keeper_line(session: &str) -> String {
    let here = reasonix_local::config::reasonix_home()
        .ok()
        .and_then(|home| reasonix_local::keeper::running(&home, session));
    match here {
        Some(pid) => format!("goal kept by this laptop (pid {pid})"),
        None => "goal kept by another laptop's keeper".into(),
    }
}

fn print_sessions(sessions: &[SessionInfo], json: bool) -> Result<(), CliError> {
    if json {
        return json_lines(sessions);
    }
    if sessions.is_empty() {
        println!("no sessions in this workspace");
        return Ok(());
    }
    println!(
        "{:<20} {:>5}  {:<16}  {:<20} {:<8} TITLE",
        "ID", "TURNS", "LAST ACTIVITY", "STATE", "DRIVER"
    );
    for s in sessions {
        println!(
            "{:<20} {:>5}  {:<16}  {:<20} {:<8} {}",
            s.id,
            s.turns,
            short_time(&s.last_activity),
            state_label(s.state),
            if s.driver_attached { "attached" } else { "-" },
            s.title
        );
        if let Some(g) = &s.goal {
            println!("{:<20} {}", "", reasonix_local::goal::summary_line(g));
            if g.status == reasonix_forward::proto::GoalStatus::Running
                && s.state == reasonix_forward::proto::TurnState::WaitingForLaptop
            {
                println!("{:<20} {}", "", reasonix_forward::goal::WAITING_FOR_LAPTOP);
            }
        }
        if s.keeper_attached {
            println!("{:<20} {}", "", keeper_line(&s.id));
        }
    }
    Ok(())
}

fn print_trash(sessions: &[TrashedSession], json: bool) -> Result<(), CliError> {
    if json {
        return json_lines(sessions);
    }
    if sessions.is_empty() {
        println!("the trash is empty");
        return Ok(());
    }
    println!(
        "{:<20} {:>5}  {:<16}  {:<16}  TITLE",
        "ID", "TURNS", "DELETED", "PURGED AFTER"
    );
    for t in sessions {
        println!(
            "{:<20} {:>5}  {:<16}  {:<16}  {}",
            t.info.id,
            t.info.turns,
            short_time(&t.deleted),
            short_time(&t.purge_after),
            t.info.title
        );
    }
    Ok(())
}
