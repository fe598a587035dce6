//! `reasonix memory`: the remembered facts, for people and scripts, on the same files the
//! agent uses (`docs/MEMORY.md`). Without `--global` it works on the current workspace's
//! project store (local mode: the store the local daemon uses); with `--global` on the user's
//! own store on this laptop. Not built yet: `--ssh DEST` (a host workspace's project store)
//! and `edit`.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use reasonix_forward::memory::fact::{new_id, now_rfc3339, truncate};
use reasonix_forward::memory::recall::Index;
use reasonix_forward::memory::secret::find_secret;
use reasonix_forward::memory::{
    project_dir, workspace_key, Fact, FactType, Scope, Store, EXPORT_DIR,
};
use reasonix_local::config::reasonix_home;

use super::CliError;

/// Which store a command works on.
#[derive(Args, Clone, Default)]
pub(super) struct Target {
    /// The user's global store on this laptop instead of the workspace's project store.
    #[arg(long)]
    global: bool,
    /// Workspace folder (default: the current folder).
    #[arg(long)]
    workspace: Option<PathBuf>,
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

fn store(t: &Target) -> Result<(Store, PathBuf), CliError> {
    let home = reasonix_home().map_err(CliError::usage)?;
    let ws = super::workspace_or_cwd(t.workspace.clone())?;
    let ws = ws.canonicalize().unwrap_or(ws);
    if t.global {
        return Ok((reasonix_local::memory::global_store(&home), ws));
    }
    Ok((
        Store::new(project_dir(&home, &workspace_key(&ws)), Scope::Project),
        ws,
    ))
}

fn line(f: &Fact) -> String {
    format!(
        "{}  {:<7} {:<9} {}{}{}",
        f.id,
        f.scope.as_str(),
        f.kind.as_str(),
        if f.pinned { "[pinned] " } else { "" },
        f.subject
            .as_ref()
            .map(|s| format!("({s}) "))
            .unwrap_or_default(),
        truncate(&f.body.replace('\n', " "), 100)
    )
}

/// Runs one `reasonix memory` command.
pub(super) fn memory(cmd: MemoryCmd) -> Result<(), CliError> {
    match cmd {
        MemoryCmd::List { target, archived } => {
            let (s, _) = store(&target)?;
            let loaded = if archived { s.archived() } else { s.load() };
            for n in &loaded.notices {
                eprintln!("reasonix: {n}");
            }
            for f in &loaded.facts {
                println!("{}", line(f));
            }
            Ok(())
        }
        MemoryCmd::Search { query, target } => {
            let (s, _) = store(&target)?;
            let loaded = s.load();
            let index = Index::build(&loaded.facts);
            for (i, _) in index.search(&query) {
                println!("{}", line(&loaded.facts[i]));
            }
            Ok(())
        }
        MemoryCmd::Show { id, target } => {
            let (s, _) = store(&target)?;
            let loaded = s.load();
            let f = loaded.facts.iter().find(|f| f.id == id).ok_or_else(|| {
                CliError::failed(format!("no fact with id {id:?} in {}", s.dir().display()))
            })?;
            print!("{}", f.to_markdown());
            for r in s.revisions(&id) {
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
            let (s, _) = store(&target)?;
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
            let now = now_rfc3339();
            let old = subject.as_ref().and_then(|sub| {
                s.load()
                    .facts
                    .into_iter()
                    .find(|f| f.subject.as_deref() == Some(sub.as_str()))
            });
            let fact = Fact {
                id: old
                    .as_ref()
                    .map(|f| f.id.clone())
                    .unwrap_or_else(|| new_id(&content)),
                revision: old.as_ref().map(|f| f.revision + 1).unwrap_or(1),
                kind,
                scope,
                keywords: keywords
                    .unwrap_or_default()
                    .split(',')
                    .map(|k| k.trim().to_string())
                    .filter(|k| !k.is_empty())
                    .collect(),
                subject,
                created: old
                    .as_ref()
                    .map(|f| f.created.clone())
                    .unwrap_or_else(|| now.clone()),
                updated: now,
                session: None,
                pinned,
                expires: None,
                body: content,
            };
            let r = if old.is_some() {
                s.supersede(&fact)
            } else {
                s.create(&fact)
            };
            r.map_err(CliError::failed)?;
            println!("{}", fact.id);
            Ok(())
        }
        MemoryCmd::Forget { id, target } => {
            let (s, _) = store(&target)?;
            let p = s.forget(&id).map_err(CliError::failed)?;
            println!(
                "archived {id} at {} (restore with `reasonix memory restore {id}`)",
                p.display()
            );
            Ok(())
        }
        MemoryCmd::Restore { id, target } => {
            let (s, _) = store(&target)?;
            s.restore(&id).map_err(CliError::failed)?;
            println!("restored {id}");
            Ok(())
        }
        MemoryCmd::Export { target } => {
            if target.global {
                return Err(CliError::usage(
                    "global facts are the user's own and are never exported into a repository",
                ));
            }
            let (s, ws) = store(&target)?;
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
