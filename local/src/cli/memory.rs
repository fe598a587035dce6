//! `reasonix memory`: the remembered facts, for people and scripts, on the same files the
//! agent uses (`docs/MEMORY.md`). Without `--global` it works on the current workspace's
//! project store (local mode: the store the local daemon uses); with `--global` on the user's
//! own store on this laptop; with `--ssh DEST` on that host workspace's project store,
//! through the link ([`reasonix_forward::proto::Request::Memory`]; the global store stays
//! on the laptop). `edit ID` opens the fact in `$EDITOR` and saves it only when it is still
//! a sound fact.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand};
use reasonix_forward::memory::fact::{new_id, now_rfc3339};
use reasonix_forward::memory::ops::{MemoryOp, MemoryReply};
use reasonix_forward::memory::recall::Index;
use reasonix_forward::memory::secret::find_secret;
use reasonix_forward::memory::{
    project_dir, workspace_key, Fact, FactType, Scope, Store, EXPORT_DIR,
};
use reasonix_local::config::reasonix_home;
use reasonix_local::memory::access::Access;
use reasonix_local::memory::command::line;

use super::{connector_for, load_config, CliError, SshArgs};

/// Which store a command works on.
#[derive(Args, Clone, Default)]
pub(super) struct Target {
    /// The user's global store on this laptop instead of the workspace's project store.
    #[arg(long)]
    global: bool,
    /// Workspace folder (default: the current folder).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// The project store of a host workspace over SSH: `[user@]host[:/path]`.
    #[arg(long, value_name = "DEST", conflicts_with = "global")]
    ssh: Option<String>,
    #[command(flatten)]
    ssh_opts: SshArgs,
}

/// `reasonix memory` subcommands.
#[derive(Subcommand)]
pub(super) enum MemoryCmd {
    /// List the facts (`--archived`: the forgotten ones).
    List {
        #[command(flatten)]
        target: Target,
        /// List the archive instead.
        #[arg(long)]
        archived: bool,
    },
    /// Search the facts (BM25, as recall does).
    Search {
        /// Words to search for.
        query: String,
        #[command(flatten)]
        target: Target,
    },
    /// Print one fact file.
    Show {
        /// Fact id.
        id: String,
        #[command(flatten)]
        target: Target,
    },
    /// Remember a fact (refused when it looks like a secret).
    Add {
        /// The fact.
        content: String,
        /// user, feedback, project or reference.
        #[arg(long = "type", default_value = "project")]
        kind: String,
        /// Subject key (a new value supersedes the old one).
        #[arg(long)]
        subject: Option<String>,
        /// Extra search words, comma-separated.
        #[arg(long)]
        keywords: Option<String>,
        /// Join the standing instructions of new sessions.
        #[arg(long)]
        pinned: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Edit a fact in `$VISUAL`/`$EDITOR`; a result that is not a sound fact is refused
    /// (naming the problem and the line) and the fact stays as it was.
    Edit {
        /// Fact id.
        id: String,
        #[command(flatten)]
        target: Target,
    },
    /// Archive a fact (recoverable with `restore`).
    Forget {
        /// Fact id.
        id: String,
        #[command(flatten)]
        target: Target,
    },
    /// Bring an archived fact back.
    Restore {
        /// Fact id.
        id: String,
        #[command(flatten)]
        target: Target,
    },
    /// Copy the project facts into the repository (`.reasonix/memory/`) to share them; they
    /// are read back as project facts only, never global, never pinned.
    Export {
        #[command(flatten)]
        target: Target,
    },
}

/// The store `t` names: the laptop's global store, a local workspace's project store, or a
/// host workspace's project store through the link.
async fn access(t: &Target) -> Result<Access, CliError> {
    if t.ssh.is_some() || t.ssh_opts.exec.is_set() {
        return remote(t).await;
    }
    let home = reasonix_home().map_err(CliError::usage)?;
    if t.global {
        return Ok(Access::Local(reasonix_local::memory::global_store(&home)));
    }
    let ws = super::workspace_or_cwd(t.workspace.clone())?;
    let ws = ws.canonicalize().unwrap_or(ws);
    Ok(Access::Local(Store::new(
        project_dir(&home, &workspace_key(&ws)),
        Scope::Project,
    )))
}

/// Connects to the host workspace of `t` (installing or starting its daemon as any session
/// would) and waits until the link is up.
async fn remote(t: &Target) -> Result<Access, CliError> {
    let workspace = super::workspace_or_cwd(t.workspace.clone())?;
    let mut config = load_config(&workspace, None, None, true)?;
    let connector = connector_for(t.ssh.as_deref(), &t.ssh_opts, workspace, false, false)?;
    config.apply_workspace(&connector.describe());
    let (options, _) = reasonix_local::client::options_for(&config);
    let gateway = Arc::new(reasonix_local::gateway::Gateway::new(&config));
    let (client, mut events) = reasonix_local::client::Client::start(connector, gateway, options);
    use reasonix_local::client::{ClientEvent, ConnState};
    let limit = std::time::Duration::from_secs(120);
    let up = async {
        loop {
            match events.recv().await {
                Some(ClientEvent::Connection(ConnState::Connected { .. })) => return Ok(()),
                Some(ClientEvent::Connection(ConnState::Failed { reason, .. })) => {
                    return Err(CliError::connection(reason))
                }
                Some(_) => {}
                None => return Err(CliError::connection("the client stopped")),
            }
        }
    };
    match tokio::time::timeout(limit, up).await {
        Ok(r) => r?,
        Err(_) => {
            return Err(CliError::connection(format!(
                "no connection to the host within {} s",
                limit.as_secs()
            )))
        }
    }
    // Keep draining the client's events so it never blocks on them.
    tokio::spawn(async move { while events.recv().await.is_some() {} });
    Ok(Access::Remote(client))
}

async fn run(a: &Access, op: MemoryOp) -> Result<MemoryReply, CliError> {
    a.run(op).await.map_err(CliError::failed)
}

/// Runs one `reasonix memory` command.
pub(super) async fn memory(cmd: MemoryCmd) -> Result<(), CliError> {
    match cmd {
        MemoryCmd::List { target, archived } => {
            let r = run(&access(&target).await?, MemoryOp::List { archived }).await?;
            for n in &r.notices {
                eprintln!("reasonix: {n}");
            }
            for f in r.parsed() {
                println!("{}", line(&f));
            }
            Ok(())
        }
        MemoryCmd::Search { query, target } => {
            let r = run(&access(&target).await?, MemoryOp::List { archived: false }).await?;
            let facts = r.parsed();
            let index = Index::build(&facts);
            for (i, _) in index.search(&query) {
                println!("{}", line(&facts[i]));
            }
            Ok(())
        }
        MemoryCmd::Show { id, target } => {
            let r = run(&access(&target).await?, MemoryOp::Show { id }).await?;
            let facts = r.parsed();
            if let Some(f) = facts.first() {
                print!("{}", f.to_markdown());
            }
            for r in facts.iter().skip(1) {
                println!(
                    "\n[earlier revision {} · {}]\n{}",
                    r.revision, r.updated, r.body
                );
            }
            Ok(())
        }
        MemoryCmd::Add {
            content,
            kind,
            subject,
            keywords,
            pinned,
            target,
        } => {
            let content = content.trim().to_string();
            if content.is_empty() {
                return Err(CliError::usage("the fact is empty"));
            }
            if let Some(found) = find_secret(&content) {
                return Err(CliError::usage(format!(
                    "refused: the fact contains what looks like {found}; secrets are never stored in memory"
                )));
            }
            let kind = FactType::parse(&kind).ok_or_else(|| {
                CliError::usage(format!(
                    "--type {kind:?} is not one of user, feedback, project, reference"
                ))
            })?;
            let scope = if target.global {
                Scope::Global
            } else {
                Scope::Project
            };
            let a = access(&target).await?;
            let old = match &subject {
                Some(sub) => run(&a, MemoryOp::List { archived: false })
                    .await?
                    .parsed()
                    .into_iter()
                    .find(|f| f.subject.as_deref() == Some(sub.as_str())),
                None => None,
            };
            let now = now_rfc3339();
            let fact = Fact {
                id: old
                    .as_ref()
                    .map(|f| f.id.clone())
                    .unwrap_or_else(|| new_id(&content)),
                revision: 1,
                kind,
                scope,
                keywords: keywords
                    .unwrap_or_default()
                    .split(',')
                    .map(|k| k.trim().to_string())
                    .filter(|k| !k.is_empty())
                    .collect(),
                subject,
                created: now.clone(),
                updated: now,
                session: None,
                pinned,
                expires: None,
                body: content,
            };
            let file = reasonix_local::memory::access::file_of(&fact);
            let op = if old.is_some() {
                MemoryOp::Replace { file }
            } else {
                MemoryOp::Create { file }
            };
            run(&a, op).await?;
            println!("{}", fact.id);
            Ok(())
        }
        MemoryCmd::Edit { id, target } => edit(&access(&target).await?, &id).await,
        MemoryCmd::Forget { id, target } => {
            let r = run(&access(&target).await?, MemoryOp::Forget { id }).await?;
            println!("{}", r.message);
            Ok(())
        }
        MemoryCmd::Restore { id, target } => {
            let r = run(&access(&target).await?, MemoryOp::Restore { id }).await?;
            println!("{}", r.message);
            Ok(())
        }
        MemoryCmd::Export { target } => {
            if target.global {
                return Err(CliError::usage(
                    "global facts are the user's own and are never exported into a repository",
                ));
            }
            if target.ssh.is_some() {
                return Err(CliError::usage(
                    "export writes into the workspace's repository on the host: run `reasonix memory export` there (or `list`/`show` the facts from here)",
                ));
            }
            let Access::Local(s) = access(&target).await? else {
                return Err(CliError::usage("export needs a local workspace"));
            };
            let ws = super::workspace_or_cwd(target.workspace.clone())?;
            let ws = ws.canonicalize().unwrap_or(ws);
            let dest = Store::new(ws.join(EXPORT_DIR), Scope::Project);
            let mut n = 0;
            for mut f in s.load().facts {
                f.pinned = false;
                f.session = None;
                match dest.create(&f) {
                    Ok(_) => n += 1,
                    Err(reasonix_forward::memory::StoreError::Exists(_)) => {
                        dest.supersede(&f).map_err(CliError::failed)?;
                        n += 1;
                    }
                    Err(e) => return Err(CliError::failed(e)),
                }
            }
            println!("exported {n} fact(s) to {}", dest.dir().display());
            Ok(())
        }
    }
}

/// `reasonix memory edit ID`: the fact file in `$VISUAL`/`$EDITOR` (default `vi`); saved as
/// its next revision when it is still a sound fact of the same id and scope, refused
/// otherwise (the old fact stays; the edited text is kept in a file named in the error).
async fn edit(a: &Access, id: &str) -> Result<(), CliError> {
    use reasonix_local::memory::edit;
    let draft = edit::draft_in(a, id).await.map_err(CliError::failed)?;
    if let Err(e) = edit::run_editor(&draft.path) {
        draft.discard();
        return Err(CliError::failed(format!("{e}; {id} is unchanged")));
    }
    let message = draft.save().await.map_err(CliError::failed)?;
    println!("{message}");
    Ok(())
}
