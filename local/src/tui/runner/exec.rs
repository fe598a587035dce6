//! [`Exec`]: runs the app's [`Action`]s, each request to the host on its own task, and
//! sends the answers back to the app as [`AppEvent`]s.

use std::io::Write;
use std::sync::Arc;

use reasonix_forward::proto::{ErrorCode, OpenSession, Request, Response};
use reasonix_forward::rpc::CallError;
use reasonix_forward::sync::LockExt;
use tokio::sync::mpsc;

use super::settings::session_settings;
use crate::always_scope::AlwaysScope;
use crate::client::Client;
use crate::config::Config;
use crate::tui::app::{Action, AppEvent, OpenParams};
use crate::tui::osc52;

/// Executes actions: each request on its own task, answers back as [`AppEvent`]s.
pub(super) struct Exec {
    /// Terminal tab traffic, sent in order by [`crate::tui::term_link`].
    pub(super) pty: mpsc::UnboundedSender<crate::tui::app::PtyAction>,
    pub(super) client: Client,
    /// `/permissions remove` drops rules from it, so later sessions do not carry them.
    pub(super) config: Arc<std::sync::Mutex<Config>>,
    pub(super) tx: mpsc::UnboundedSender<AppEvent>,
    pub(super) in_tmux: bool,
    /// The laptop's forwards of the host's ports (`/ports`).
    pub(super) ports: Arc<crate::ports::Forwards>,
}

fn call_error(e: CallError) -> String {
    match e {
        CallError::Remote(r) => r.message,
        CallError::Link(l) => format!("the link dropped before the host answered ({l}); check the transcript and retry if needed"),
    }
}

impl Exec {
    pub(super) fn config(&self) -> std::sync::MutexGuard<'_, Config> {
        self.config.lock_or_recover()
    }

    /// `/permissions [remove N]`: the listing (after the removal, if any).
    fn permissions(&self, remove: Option<usize>) {
        let mut config = self.config();
        let rows = crate::permissions::rows(&config);
        let mut text = String::new();
        let mut error = false;
        if let Some(n) = remove {
            match rows.get(n - 1) {
                None => {
                    error = true;
                    text = format!(
                        "/permissions: there is no rule {n} (the list has {})",
                        rows.len()
                    );
                }
                Some(row) => match crate::permissions::remove(&config.home, row) {
                    Ok(done) => {
                        crate::permissions::forget(&mut config, row);
                        text = done;
                    }
                    Err(e) => {
                        error = true;
                        text = e;
                    }
                },
            }
            text.push('\n');
        }
        let rows = crate::permissions::rows(&config);
        text.push_str(&crate::permissions::render(&config, &rows));
        let _ = self.tx.send(AppEvent::Permissions { text, error });
    }

    /// `/memory …`, a confirmed `# note` or forget (#32): the project store on the host
    /// through the link, the global store on this laptop; the outcome goes into the
    /// transcript.
    fn memory(&self, action: crate::tui::app::MemoryAction) {
        use crate::memory::access::{new_fact, Access};
        use crate::tui::app::MemoryAction;
        let home = self.config().home.clone();
        let stores = crate::memory::command::Stores {
            project: Access::Remote(self.client.clone()),
            global: Access::Local(crate::memory::global_store(&home)),
        };
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let (text, error) = match action {
                MemoryAction::Command(arg) => stores.command(&arg).await,
                MemoryAction::Forget(ids) => stores.forget(&ids).await,
                MemoryAction::Note { text, scope, kind } => {
                    match stores.save(&new_fact(&text, kind, scope)).await {
                        Ok(t) => (t, false),
                        Err(e) => (format!("not remembered: {e}"), true),
                    }
                }
            };
            let _ = tx.send(AppEvent::Permissions { text, error });
        });
    }

    /// `/hooks [trust [PATH]]`: the host's report; with `trust`, the project hook files as
    /// the host read them are trusted (records on this laptop) and the session adopts them.
    /// Shown in the transcript (as `/permissions` is).
    fn hooks(&self, trust: bool, path: Option<String>) {
        let (home, key) = {
            let c = self.config();
            (c.home.clone(), c.workspace_key.clone())
        };
        let client = self.client.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let ask = |client: crate::client::Client| async move {
                let req = Request::Hooks {
                    hooks: client.hook_settings(),
                };
                match client.request(req).await {
                    Ok(Response::Hooks(r)) => Ok(r),
                    Ok(other) => Err(format!("unexpected answer {other:?}")),
                    Err(e) => Err(call_error(e)),
                }
            };
            let mut text = String::new();
            let mut report = ask(client.clone()).await;
            if trust {
                match (&report, &key) {
                    (Ok(r), Some(key)) => {
                        let chosen: Vec<_> = r
                            .files
                            .iter()
                            .filter(|f| path.as_deref().is_none_or(|p| p == f.path))
                            .collect();
                        if chosen.is_empty() {
                            text.push_str(
                                "/hooks trust: no such project hook file in this workspace\n",
                            );
                        }
                        for f in chosen {
                            match crate::hooks_trust::trust(&home, key, &f.path, &f.sha256) {
                                Ok(()) => text.push_str(&format!(
                                    "trusted {} (sha256 {}); any change makes it untrusted again\n",
                                    f.path, f.sha256
                                )),
                                Err(e) => text.push_str(&format!("/hooks trust: {e}\n")),
                            }
                        }
                        report = ask(client).await;
                    }
                    (Ok(_), None) => text.push_str(
                        "/hooks trust: this workspace has no name to store trust under\n",
                    ),
                    (Err(_), _) => {}
                }
            }
            let error = report.is_err();
            match report {
                Ok(r) => text.push_str(&crate::tui::hooks_table(&r)),
                Err(e) => text.push_str(&format!("/hooks: {e}")),
            }
            let _ = tx.send(AppEvent::Permissions {
                text: text.trim_end().to_string(),
                error,
            });
        });
    }

    /// Run actions; true when one of them is Quit.
    pub(super) fn run_all(&self, actions: Vec<Action>) -> bool {
        let mut quit = false;
        for a in actions {
            quit |= self.run(a);
        }
        quit
    }

    fn request<F>(&self, what: &str, req: Request, on_ok: F)
    where
        F: FnOnce(Response) -> Option<AppEvent> + Send + 'static,
    {
        let client = self.client.clone();
        let tx = self.tx.clone();
        let what = what.to_string();
        tokio::spawn(async move {
            let ev = match client.request(req).await {
                Ok(r) => on_ok(r),
                // A replaced link re-opens the session itself (Reattached); an open that
                // died with the old link needs no message.
                Err(CallError::Link(_)) if what == "open session" => None,
                Err(e) => Some(AppEvent::RequestFailed {
                    what,
                    message: call_error(e),
                }),
            };
            if let Some(ev) = ev {
                let _ = tx.send(ev);
            }
        });
    }

    /// A steer; when the host has no running turn any more, the app sends it as a message.
    fn steer(&self, request_id: String, text: String) {
        let client = self.client.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let req = Request::Steer {
                request_id,
                text: text.clone(),
            };
            let ev = match client.request(req).await {
                Ok(_) => None,
                Err(CallError::Remote(e)) if e.code == ErrorCode::NotRunning => {
                    Some(AppEvent::SteerRefused { text })
                }
                Err(e) => Some(AppEvent::RequestFailed {
                    what: "steer".into(),
                    message: call_error(e),
                }),
            };
            if let Some(ev) = ev {
                let _ = tx.send(ev);
            }
        });
    }

    /// Prompt history: a failure costs only the shared history, so it is logged, not shown.
    fn history(&self, req: Request) {
        let client = self.client.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            match client.request(req).await {
                Ok(Response::History { entries }) => {
                    let _ = tx.send(AppEvent::History(entries));
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("prompt history: {e}"),
            }
        });
    }

    fn run(&self, action: Action) -> bool {
        match action {
            Action::OpenSession(OpenParams {
                session,
                new,
                since,
                takeover,
                model,
                effort,
            }) => {
                let open = OpenSession {
                    // Filled in by the client (user hooks and trust records).
                    hooks: Default::default(),
                    session,
                    new,
                    since,
                    read_only: false,
                    takeover,
                    settings: session_settings(&self.config(), model, effort),
                    keeper: false,
                };
                self.request("open session", Request::OpenSession(open), |r| match r {
                    Response::SessionOpened(o) => Some(AppEvent::SessionOpened(o)),
                    other => Some(AppEvent::RequestFailed {
                        what: "open session".into(),
                        message: format!("unexpected answer {other:?}"),
                    }),
                });
            }
            Action::Submit { request_id, text } => {
                self.request("submit", Request::SubmitTurn { request_id, text }, |_| None);
            }
            Action::ContinueTurn { request_id } => {
                self.request("continue", Request::ContinueTurn { request_id }, |_| None);
            }
            Action::Cancel { request_id } => {
                self.request("cancel", Request::Cancel { request_id }, |_| None);
            }
            Action::AnswerElicitation {
                request_id,
                elicitation_id,
                action,
                content,
            } => {
                self.request(
                    "elicitation answer",
                    Request::AnswerElicitation {
                        request_id,
                        elicitation_id,
                        action,
                        content,
                    },
                    |_| None,
                );
            }
            Action::Approve {
                request_id,
                approval_id,
                decision,
                everywhere,
            } => {
                if everywhere {
                    self.client
                        .remember_always_scope(&approval_id, AlwaysScope::Global);
                }
                self.request(
                    "approval",
                    Request::Approve {
                        request_id,
                        approval_id,
                        decision,
                    },
                    |_| None,
                );
            }
            Action::Rewind {
                request_id,
                to_turn,
                scope,
                dry_run,
            } => {
                self.request(
                    "rewind",
                    Request::Rewind {
                        request_id,
                        to_turn,
                        scope,
                        dry_run,
                    },
                    move |r| match r {
                        Response::Rewound { summary, paths } => Some(AppEvent::Rewound {
                            summary,
                            paths,
                            scope,
                            dry_run,
                        }),
                        _ => None,
                    },
                );
            }
            Action::Takeover => {
                self.request("takeover", Request::Takeover, |_| Some(AppEvent::TookOver));
            }
            Action::Goal {
                request_id,
                mut action,
                model,
                session,
            } => {
                if let reasonix_forward::proto::GoalAction::Start { budgets, .. } = &mut action {
                    let config = self.config();
                    *budgets = config.goal_budgets(model.as_deref());
                }
                let keeps = matches!(
                    action,
                    reasonix_forward::proto::GoalAction::Start { .. }
                        | reasonix_forward::proto::GoalAction::Resume
                );
                // Once the host took a start or resume, the goal's keeper starts: closing
                // the workbench then does not stop the goal at its next model step.
                let keeper = session
                    .filter(|_| keeps)
                    .map(|s| (self.config().clone(), s));
                self.request("goal", Request::Goal { request_id, action }, move |_| {
                    let (config, session) = keeper?;
                    Some(AppEvent::GoalKeeper(
                        crate::keeper::start(&config, &session).line(),
                    ))
                });
            }
            Action::Plan { request_id, action } => {
                self.request("plan", Request::Plan { request_id, action }, |_| None);
            }
            Action::SetMode(mode) => {
                use reasonix_forward::policy::PermissionMode;
                let m = match mode.as_str() {
                    "auto" => PermissionMode::Auto,
                    "yolo" => PermissionMode::Yolo,
                    _ => PermissionMode::Ask,
                };
                self.config().permissions.mode = m;
            }
            Action::ListSessions => {
                self.request("list sessions", Request::ListSessions, |r| match r {
                    Response::Sessions { sessions } => Some(AppEvent::Sessions(sessions)),
                    _ => None,
                });
            }
            Action::RenameSession { session, title } => {
                let (s, t) = (session.clone(), title.clone());
                self.request(
                    "rename session",
                    Request::RenameSession {
                        session: session.clone(),
                        title: title.clone(),
                    },
                    move |r| match r {
                        Response::Ok => Some(AppEvent::SessionRenamed {
                            session: s.clone(),
                            title: t.clone(),
                        }),
                        _ => None,
                    },
                );
            }
            Action::DeleteSession { session } => {
                let s = session.clone();
                self.request(
                    "delete session",
                    Request::DeleteSession {
                        session: session.clone(),
                    },
                    move |r| match r {
                        Response::Ok => Some(AppEvent::SessionDeleted(s.clone())),
                        _ => None,
                    },
                );
            }
            Action::ListTrash => {
                self.request("list the trash", Request::ListTrash, |r| match r {
                    Response::Trash { sessions } => Some(AppEvent::Trash(sessions)),
                    _ => None,
                });
            }
            Action::RestoreSession { session } => {
                let s = session.clone();
                self.request(
                    "restore session",
                    Request::RestoreSession { session },
                    move |r| match r {
                        Response::Ok => Some(AppEvent::SessionRestored(s.clone())),
                        _ => None,
                    },
                );
            }
            Action::PurgeSession { session } => {
                self.request(
                    "purge session",
                    Request::PurgeSessions {
                        session: Some(session),
                    },
                    |r| match r {
                        Response::Purged { sessions } => Some(AppEvent::SessionsPurged(sessions)),
                        _ => None,
                    },
                );
            }
            Action::ListDir { path } => {
                let p = path.clone();
                self.request(
                    &format!("list_dir:{path}"),
                    Request::ListDir { path },
                    move |r| match r {
                        Response::DirEntries { entries } => {
                            Some(AppEvent::DirEntries { path: p, entries })
                        }
                        _ => None,
                    },
                );
            }
            Action::McpResources { server } => {
                let s = server.clone();
                self.request(
                    &format!("mcp_resources:{server}"),
                    Request::McpResources { server },
                    move |r| match r {
                        Response::McpResources { resources } => Some(AppEvent::McpResources {
                            server: s,
                            resources,
                        }),
                        _ => None,
                    },
                );
            }
            Action::Status => {
                self.request("status", Request::Status, |r| match r {
                    Response::Status(s) => Some(AppEvent::Status(s)),
                    _ => None,
                });
            }
            Action::McpStatus => {
                // The laptop list only matters before a session is open (the host then
                // starts those servers through this link for the answer).
                let laptop = crate::client::options_for(&self.config()).1;
                self.request("mcp", Request::McpStatus { laptop }, |r| match r {
                    Response::McpServers { servers } => Some(AppEvent::McpServers(servers)),
                    other => Some(AppEvent::RequestFailed {
                        what: "mcp".into(),
                        message: format!("unexpected answer {other:?}"),
                    }),
                });
            }
            Action::CancelSubagent { request_id, child } => {
                self.request(
                    "cancel subagent",
                    Request::CancelSubagent { request_id, child },
                    |_| None,
                );
            }
            Action::Compact { request_id, focus } => {
                self.request(
                    "compact",
                    Request::Compact { request_id, focus },
                    |r| match r {
                        Response::CompactDone { summary, .. } => {
                            Some(AppEvent::CompactDone(summary))
                        }
                        _ => None,
                    },
                );
            }
            Action::ContextReport => {
                self.request("context", Request::ContextReport, |r| match r {
                    Response::Context(report) => Some(AppEvent::Context(report)),
                    other => Some(AppEvent::RequestFailed {
                        what: "context".into(),
                        message: format!("unexpected answer {other:?}"),
                    }),
                });
            }
            Action::Copy(text) => {
                let seq = osc52::sequence(&text, self.in_tmux);
                let mut out = std::io::stdout();
                let _ = out.write_all(seq.as_bytes());
                let _ = out.flush();
            }
            Action::SaveOutput(req) => {
                let client = self.client.clone();
                let tx = self.tx.clone();
                let home = self.config().home.clone();
                tokio::spawn(async move {
                    let ev = match crate::tui::fullout::save(&client, &home, &req).await {
                        Ok((path, bytes)) => AppEvent::OutputSaved {
                            tool: req.tool.clone(),
                            path,
                            bytes,
                            fetched: req.full.is_some(),
                        },
                        Err(message) => AppEvent::RequestFailed {
                            what: "output".into(),
                            message,
                        },
                    };
                    let _ = tx.send(ev);
                });
            }
            Action::Steer { request_id, text } => self.steer(request_id, text),
            Action::Shell {
                request_id,
                command,
                add_to_context,
            } => self.request(
                "!",
                Request::Shell {
                    request_id,
                    command,
                    add_to_context,
                },
                |_| None,
            ),
            Action::ReloadCommands { then } => {
                let (client, home, tx) = (
                    self.client.clone(),
                    self.config().home.clone(),
                    self.tx.clone(),
                );
                tokio::spawn(async move {
                    let set =
                        crate::commands::load(&client, &home, &crate::tui::builtin_command_names())
                            .await;
                    let _ = tx.send(match then {
                        Some(line) => AppEvent::CommandsRetry { set, line },
                        None => AppEvent::Commands(set),
                    });
                });
            }
            Action::HistoryList => self.history(Request::HistoryList),
            Action::HistoryAppend { text } => self.history(Request::HistoryAppend { text }),
            Action::RetryNow => self.client.retry_now(),
            Action::Pty(a) => {
                let _ = self.pty.send(a);
            }
            Action::CreateWorkspace => self.client.create_workspace(),
            Action::Permissions { remove } => self.permissions(remove),
            Action::Hooks { trust, path } => self.hooks(trust, path),
            Action::Memory(a) => self.memory(a),
            // Run by the event loop, which owns the terminal (`editor::edit_memory`).
            Action::MemoryEdit { .. } => {}
            Action::McpSignIn { server, logout } => self.mcp_sign_in(server, logout),
            Action::Ports(arg) => {
                let (ports, tx, arg) = (Arc::clone(&self.ports), self.tx.clone(), arg.clone());
                tokio::spawn(async move {
                    let text = crate::ports::command(&ports, &arg).await;
                    let _ = tx.send(AppEvent::Client(crate::ports::notice(text)));
                });
            }
            Action::Transfer { upload, arg } => {
                let (client, tx) = (self.client.clone(), self.tx.clone());
                let policy = self.config().session_policy();
                tokio::spawn(async move {
                    let notice = |text| {
                        let _ = tx.send(AppEvent::Client(crate::ports::notice(text)));
                    };
                    crate::copy::workbench(&client, &policy, upload, &arg, &notice).await;
                });
            }
            Action::Quit => return true,
        }
        false
    }
}
