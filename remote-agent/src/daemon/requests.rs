//! The link's requests: the dispatch of every [`Request`] to its handler, and the small
//! handlers that belong to no other part (status, content by reference, MCP status, directory
//! listings).

use std::path::Path;
use std::sync::Arc;

use reasonix_forward::proto::{
    DaemonStatus, DirEntry, ErrorCode, McpServerInfo, PtyRequest, PtyResponse, Request, Response,
    RpcError,
};
use reasonix_forward::sync::LockExt;

use super::conn::{Conn, ConnLink};
use super::roles::no_session;
use super::sessions::catalog_error;
use super::workbench::WorkbenchRequest;
use super::Daemon;
use crate::content::ContentStore;
use crate::session::DriverLink;

impl Daemon {
    pub(super) async fn handle_request(
        self: &Arc<Self>,
        conn: &Arc<Conn>,
        body: Request,
    ) -> Result<Response, RpcError> {
        self.touch();
        match body {
            Request::Status => Ok(Response::Status(self.status(conn))),
            Request::ListSessions => Ok(Response::Sessions {
                sessions: self.list_sessions().await,
            }),
            Request::OpenSession(open) => self.open_session(conn, open).await,
            Request::SubmitTurn { request_id, text } => {
                let session = self.driven_session(conn)?;
                // Only a text that may name an MCP prompt or resource waits for the servers.
                let managers = if crate::mcp::prompt::may_use_mcp(&text) {
                    session.mcp_managers().await
                } else {
                    Vec::new()
                };
                // Terminal screens and MCP resources are attached only when the user typed
                // the mention: a server's prompt text cannot make the host attach them.
                let mut screens = crate::pty::mention::resolve(&self.terminals, &text);
                let (resources, mut notices) =
                    crate::mcp::prompt::resolve_resources(&managers, &text).await;
                // `/mcp__<server>__<prompt> args`: the prompt's text is the turn.
                let text = match crate::mcp::prompt::expand_command(&managers, &text).await {
                    None => text,
                    Some(Ok(expanded)) => expanded,
                    Some(Err(e)) => return Err(RpcError::new(ErrorCode::McpPrompt, e)),
                };
                screens.extend(resources);
                // `/<skill> args` of a `run-as: subagent` skill: one child of that profile
                // runs the arguments as its task, the turn's answer its answer (as
                // `reasonix subagent run`).
                if let Some((profile, task)) = session.subagent_skill(&text) {
                    session
                        .check_subagent_profile(&profile)
                        .map_err(|e| RpcError::new(ErrorCode::Invalid, e))?;
                    return match session.submit_subagent(&request_id, &profile, &task, false) {
                        Ok(true) => Ok(Response::Ok),
                        Ok(false) => Ok(Response::Duplicate),
                        Err(e) => Err(e.into()),
                    };
                }
                // `/<skill> args`: the skill's instructions are the turn, and it narrows
                // what the turn may do (`crate::skills`).
                let (text, skill) = match session.expand_skill(&text) {
                    None => (text, None),
                    Some(Ok(e)) => (e.text, Some(e.turn)),
                    Some(Err(e)) => return Err(RpcError::new(ErrorCode::Invalid, e)),
                };
                // Hooks see the prompt as it will be sent; one may refuse it (#34).
                match session.prompt_hooks(&request_id, &text).await {
                    Ok((context, told)) => {
                        screens.extend(context);
                        notices.extend(told);
                    }
                    Err(why) => return Err(RpcError::new(ErrorCode::Denied, why)),
                }
                let submitted = match skill {
                    Some(skill) => {
                        session.submit_skill(&request_id, &text, screens, notices, skill)
                    }
                    None => session.submit_with(&request_id, &text, screens, notices),
                };
                match submitted {
                    Ok(true) => Ok(Response::Ok),
                    Ok(false) => Ok(Response::Duplicate),
                    Err(e) => Err(e.into()),
                }
            }
            Request::RunSubagent {
                request_id,
                profile,
                task,
                read_only,
            } => {
                let session = self.driven_session(conn)?;
                if task.trim().is_empty() {
                    return Err(RpcError::new(
                        ErrorCode::Invalid,
                        "the task is empty; say what the subagent should do",
                    ));
                }
                session
                    .check_subagent_profile(&profile)
                    .map_err(|e| RpcError::new(ErrorCode::Invalid, e))?;
                match session.submit_subagent(&request_id, &profile, &task, read_only) {
                    Ok(true) => Ok(Response::Ok),
                    Ok(false) => Ok(Response::Duplicate),
                    Err(e) => Err(e.into()),
                }
            }
            Request::CancelSubagent { request_id, child } => {
                let session = self.driven_session(conn)?;
                match session.cancel_subagent(&request_id, &child) {
                    Ok(true) => Ok(Response::Ok),
                    Ok(false) => Ok(Response::Duplicate),
                    Err(e) => Err(RpcError::new(ErrorCode::NotFound, e)),
                }
            }
            Request::ContinueTurn { request_id } => {
                let session = self.driven_session(conn)?;
                match session.continue_turn(&request_id) {
                    Ok(true) => Ok(Response::Ok),
                    Ok(false) => Ok(Response::Duplicate),
                    Err(e) => Err(e.into()),
                }
            }
            Request::Cancel { request_id } => {
                let session = self.driven_session(conn)?;
                Ok(if session.cancel(&request_id) {
                    Response::Ok
                } else {
                    Response::Duplicate
                })
            }
            Request::Approve {
                request_id,
                approval_id,
                decision,
            } => {
                let session = self.driven_session(conn)?;
                match session.approve(&request_id, &approval_id, decision).await {
                    Ok(true) => Ok(Response::Ok),
                    Ok(false) => Ok(Response::Duplicate),
                    Err(e) => Err(e.into()),
                }
            }
            Request::AnswerElicitation {
                request_id,
                elicitation_id,
                action,
                content,
            } => {
                let session = self.driven_session(conn)?;
                match session.answer_elicitation(&request_id, &elicitation_id, action, content) {
                    Ok(true) => Ok(Response::Ok),
                    Ok(false) => Ok(Response::Duplicate),
                    Err(e) => Err(e.into()),
                }
            }
            Request::Plan { request_id, action } => {
                // Only the driver: a spectator can neither plan nor approve.
                let session = self.driven_session(conn)?;
                match session.plan_request(&request_id, action).await {
                    Ok(true) => Ok(Response::Ok),
                    Ok(false) => Ok(Response::Duplicate),
                    Err(e) => Err(e.into()),
                }
            }
            Request::Goal { request_id, action } => {
                // Only the driver starts, pauses, resumes or clears a goal.
                let session = self.driven_session(conn)?;
                match session.goal_request(&request_id, action).await {
                    Ok(true) => Ok(Response::Ok),
                    Ok(false) => Ok(Response::Duplicate),
                    Err(e) => Err(e.into()),
                }
            }
            Request::Leave => {
                if let Some((session, _)) = conn.session.lock_or_recover().take() {
                    session.release_driver(conn.id);
                }
                Ok(Response::Ok)
            }
            Request::Takeover => {
                let session = conn
                    .session
                    .lock_or_recover()
                    .as_ref()
                    .map(|(s, _)| Arc::clone(s))
                    .ok_or_else(no_session)?;
                // The laptop's goal keeper stands in for a driver; it never becomes one.
                if session.is_standby(conn.id) {
                    return Err(RpcError::new(
                        ErrorCode::ReadOnly,
                        "a goal keeper never drives a session; open it from the workbench or `reasonix run` to take it over",
                    ));
                }
                // The taker's own settings replace the previous driver's (a TUI taking over
                // from a headless run gets its approvals asked, in its own mode and rules).
                let settings = conn.settings.lock_or_recover().clone().unwrap_or_default();
                let enforced = self.enforce(&settings)?;
                session.set_hook_settings(conn.hooks.lock_or_recover().clone());
                self.make_driver(conn, &session, Some((settings, enforced)));
                Ok(Response::Ok)
            }
            Request::Rewind {
                request_id,
                to_turn,
                scope,
                dry_run,
            } => {
                let session = self.driven_session(conn)?;
                session
                    .rewind(&request_id, to_turn, scope, dry_run)
                    .await
                    .map(|(summary, paths)| Response::Rewound { summary, paths })
                    .map_err(|e| RpcError::new(ErrorCode::Rewind, e.to_string()))
            }
            Request::Steer { request_id, text } => {
                self.handle_workbench(conn, WorkbenchRequest::Steer { request_id, text })
                    .await
            }
            Request::Shell {
                request_id,
                command,
                add_to_context,
            } => {
                self.handle_workbench(
                    conn,
                    WorkbenchRequest::Shell {
                        request_id,
                        command,
                        add_to_context,
                    },
                )
                .await
            }
            Request::HistoryList => {
                self.handle_workbench(conn, WorkbenchRequest::HistoryList)
                    .await
            }
            Request::HistoryAppend { text } => {
                self.handle_workbench(conn, WorkbenchRequest::HistoryAppend { text })
                    .await
            }
            // #14: `/compact` runs on the request's own task (requests are spawned), so the
            // link keeps carrying the summary's provider stream meanwhile.
            Request::Compact { request_id, focus } => {
                let session = self.driven_session(conn)?;
                let focus = focus.filter(|f| !f.trim().is_empty());
                match session.compact_now(&request_id, focus.as_deref()).await {
                    Ok(Some(summary)) => Ok(Response::CompactDone {
                        summary,
                        last_seq: session.last_seq(),
                    }),
                    Ok(None) => Ok(Response::Duplicate),
                    Err(e) => Err(RpcError::new(ErrorCode::Busy, e)),
                }
            }
            Request::ContextReport => {
                let session = conn
                    .session
                    .lock_or_recover()
                    .as_ref()
                    .map(|(s, _)| Arc::clone(s))
                    .ok_or_else(no_session)?;
                Ok(Response::Context(session.context_report()))
            }
            Request::ListDir { path } => self.list_dir(&path),
            Request::RenameSession { session, title } => {
                crate::catalog::Catalog::new(&self.paths.sessions_dir)
                    .set_title(&session, &title)
                    .map(|()| Response::Ok)
                    .map_err(catalog_error)
            }
            Request::DeleteSession { session } => self.delete_session(session).await,
            Request::RestoreSession { session } => {
                crate::catalog::Catalog::new(&self.paths.sessions_dir)
                    .restore(&session)
                    .map(|()| Response::Ok)
                    .map_err(catalog_error)
            }
            Request::PurgeSessions { session } => {
                crate::catalog::Catalog::new(&self.paths.sessions_dir)
                    .purge(session.as_deref())
                    .map(|sessions| Response::Purged { sessions })
                    .map_err(catalog_error)
            }
            Request::ListTrash => self.list_trash().await,
            Request::ListCommandFiles => {
                let workspace = self.paths.workspace.clone();
                tokio::task::spawn_blocking(move || crate::commands::read_command_files(&workspace))
                    .await
                    .map(|(files, skipped)| Response::CommandFiles { files, skipped })
                    .map_err(|e| {
                        RpcError::new(ErrorCode::Internal, format!("command listing failed: {e}"))
                    })
            }
            Request::ListSkills { skills } => {
                // The open session's driver settings when this link drives one; the request's
                // own otherwise (`reasonix skills list` opens no session).
                let workspace = self.paths.workspace.clone();
                tokio::task::spawn_blocking(move || {
                    let set = crate::skills::Skills::load(&workspace, &skills);
                    Response::Skills {
                        skills: set.info(),
                        notices: set.notices,
                    }
                })
                .await
                .map_err(|e| {
                    RpcError::new(ErrorCode::Internal, format!("skill listing failed: {e}"))
                })
            }
            Request::McpStatus { laptop } => Ok(self.mcp_status(conn, &laptop).await),
            Request::McpReconnect { server } => self.mcp_reconnect(conn, &server).await,
            Request::Hooks { hooks } => Ok(Response::Hooks(self.hooks_report(conn, hooks))),
            Request::Memory { op } => {
                let store = reasonix_forward::memory::Store::new(
                    reasonix_forward::memory::project_dir(&self.paths.home, &self.paths.key),
                    reasonix_forward::memory::Scope::Project,
                );
                tokio::task::spawn_blocking(move || {
                    reasonix_forward::memory::ops::apply(&store, &op)
                })
                .await
                .map_err(|e| {
                    RpcError::new(ErrorCode::Internal, format!("memory request failed: {e}"))
                })?
                .map(Response::Memory)
                .map_err(|e| RpcError::new(ErrorCode::Invalid, e))
            }
            Request::McpPrompts => {
                let managers = self.mcp_managers(conn).await;
                let (prompts, problems) = crate::mcp::prompt::list_prompts(&managers).await;
                Ok(Response::McpPrompts { prompts, problems })
            }
            Request::McpResources { server } => {
                let managers = self.mcp_managers(conn).await;
                crate::mcp::prompt::list_resources(&managers, &server)
                    .await
                    .map(|resources| Response::McpResources { resources })
                    .map_err(|e| RpcError::new(ErrorCode::NotFound, e))
            }
            Request::FetchContent {
                sha256,
                offset,
                len,
            } => self.fetch_content(conn, sha256, offset, len).await,
            Request::Pty(PtyRequest::List) => Ok(Response::Pty(PtyResponse::List {
                ptys: self.terminals.list(),
            })),
            Request::Pty(PtyRequest::Close { pty }) => self
                .terminals
                .close(pty)
                .map(|()| Response::Pty(PtyResponse::Done))
                .map_err(RpcError::from),
            Request::WatchPorts => Ok(self.watch_ports(conn).await),
            Request::ForwardAgent(offer) => self.forward_agent(conn, offer),
            Request::ProviderBase { .. } | Request::WebFetch(_) | Request::McpToken { .. } => {
                Err(RpcError::new(
                    ErrorCode::BadRequest,
                    "the host has no gateway; provider and web requests go from host to laptop",
                ))
            }
        }
    }

    /// The daemon's status as `asking` sees it: its own link counts as connected (it just
    /// sent the request, even if its transport is still being set up).
    fn status(&self, asking: &Conn) -> DaemonStatus {
        let (clients, links) = {
            let links = self.links.lock_or_recover();
            let connected = links
                .values()
                .filter(|c| c.id == asking.id || c.link.is_connected())
                .count();
            (connected as u32, links.len() as u32)
        };
        DaemonStatus {
            build_id: reasonix_forward::build_id().to_string(),
            pid: std::process::id(),
            uptime_secs: self.started.elapsed().as_secs(),
            workspace: self.paths.workspace.display().to_string(),
            sandbox: self.sandbox_status.clone(),
            clients,
            links,
            sessions: self.list_session_ids().len() as u32,
            unclean_previous_shutdown: self.unclean.clone(),
        }
    }

    /// A chunk of content by reference: provider messages this link holds, else the
    /// workspace's content store (read off the async threads).
    async fn fetch_content(
        &self,
        conn: &Arc<Conn>,
        sha256: String,
        offset: u64,
        len: u32,
    ) -> Result<Response, RpcError> {
        if let Some(chunk) = conn.transient.read_chunk(&sha256, offset, len) {
            return Ok(Response::Content(chunk));
        }
        let store = ContentStore::for_sessions(&self.paths.sessions_dir);
        let read = tokio::task::spawn_blocking(move || store.read_chunk(&sha256, offset, len))
            .await
            .map_err(|e| {
                RpcError::new(
                    ErrorCode::Internal,
                    format!("content read task failed: {e}"),
                )
            })?;
        match read {
            Ok(chunk) => Ok(Response::Content(chunk)),
            Err(e @ crate::content::ContentStoreError::BadName(_)) => {
                Err(RpcError::new(ErrorCode::BadRequest, e.to_string()))
            }
            Err(e @ crate::content::ContentStoreError::NotFound(_)) => {
                Err(RpcError::new(ErrorCode::NotFound, e.to_string()))
            }
            Err(e @ crate::content::ContentStoreError::Io { .. }) => {
                tracing::error!("{e}");
                Err(RpcError::new(ErrorCode::Io, e.to_string()))
            }
        }
    }

    /// `/mcp` and `reasonix mcp list`: the host servers and the laptop servers of the open
    /// session (the set it was opened with), or, with no session open, the host servers a
    /// session opened now would get and the laptop servers `laptop` started through this
    /// link for this answer only.
    async fn mcp_status(&self, conn: &Arc<Conn>, laptop: &[String]) -> Response {
        let session = conn
            .session
            .lock_or_recover()
            .as_ref()
            .map(|(s, _)| Arc::clone(s));
        let host_status = match &session {
            Some(session) => session.workspace_mcp_status().await,
            None => {
                // No session: the servers a session opened now would get.
                self.runtime.mcp.refresh().await.manager.status()
            }
        };
        let mut servers: Vec<McpServerInfo> = host_status.iter().map(|s| s.to_info()).collect();
        let laptop_status = match session {
            Some(session) => session.laptop_mcp_status().await,
            None => probe_laptop_mcp(conn, laptop).await,
        };
        servers.extend(laptop_status.iter().map(|s| s.to_info()));
        Response::McpServers { servers }
    }

    /// `Request::McpReconnect`: in the session this link drives, or (none) the workspace's.
    async fn mcp_reconnect(&self, conn: &Arc<Conn>, server: &str) -> Result<Response, RpcError> {
        let open = conn.session.lock_or_recover().is_some();
        let status = if open {
            self.driven_session(conn)?
                .mcp_reconnect(server)
                .await
                .map_err(|e| RpcError::new(ErrorCode::NotFound, e))?
        } else {
            let manager = self.runtime.mcp.refresh().await.manager;
            if !manager.reconnect(server).await {
                return Err(RpcError::new(
                    ErrorCode::NotFound,
                    format!("the workspace declares no MCP server named `{server}`"),
                ));
            }
            manager.status()
        };
        Ok(Response::McpServers {
            servers: status.iter().map(|s| s.to_info()).collect(),
        })
    }

    /// The hooks of the session this link drives (adopting `hooks`, the laptop's user hooks
    /// and trust records now), or, otherwise, of the workspace as a session would see them.
    fn hooks_report(
        &self,
        conn: &Arc<Conn>,
        hooks: reasonix_forward::hooks::HookSettings,
    ) -> reasonix_forward::hooks::HooksReport {
        let driven = conn
            .session
            .lock_or_recover()
            .as_ref()
            .filter(|(_, role)| *role == reasonix_forward::proto::ClientRole::Driver)
            .map(|(s, _)| Arc::clone(s));
        match driven {
            Some(session) => session.hooks_report(hooks),
            None => crate::hooks::report(
                &crate::hooks::load(&self.paths.workspace, &hooks),
                &Default::default(),
            ),
        }
    }

    /// The MCP servers of the link's session, or (no session) the workspace's latest.
    async fn mcp_managers(&self, conn: &Arc<Conn>) -> Vec<Arc<crate::mcp::McpManager>> {
        let session = conn
            .session
            .lock_or_recover()
            .as_ref()
            .map(|(s, _)| Arc::clone(s));
        match session {
            Some(s) => s.mcp_managers().await,
            // No session: the servers a session opened now would get.
            None => vec![self.runtime.mcp.refresh().await.manager],
        }
    }

    fn list_dir(&self, rel: &str) -> Result<Response, RpcError> {
        let rel = Path::new(rel);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(RpcError::new(
                ErrorCode::OutsideWorkspace,
                "only paths inside the workspace can be listed",
            ));
        }
        let dir = self.paths.workspace.join(rel);
        let rd = std::fs::read_dir(&dir).map_err(|e| {
            RpcError::new(ErrorCode::Io, format!("cannot list {}: {e}", dir.display()))
        })?;
        let mut entries: Vec<DirEntry> = rd
            .flatten()
            .map(|e| DirEntry {
                name: e.file_name().to_string_lossy().into_owned(),
                is_dir: e.file_type().map(|t| t.is_dir()).unwrap_or(false),
            })
            .collect();
        reasonix_forward::sort::sort_by(&mut entries, |a, b| a.name.cmp(&b.name));
        Ok(Response::DirEntries { entries })
    }
}

/// Starts the laptop servers `names` through `conn` (as a session would), reports them and
/// stops them again.
async fn probe_laptop_mcp(conn: &Arc<Conn>, names: &[String]) -> Vec<crate::mcp::McpServerStatus> {
    if names.is_empty() {
        return Vec::new();
    }
    let manager = crate::mcp::McpManager::laptop(names, |name| {
        let conn = Arc::clone(conn);
        let server = name.to_string();
        Arc::new(move || ConnLink(Arc::clone(&conn)).open_mcp(&server))
    });
    manager.start_all().await;
    let status = manager.status();
    manager.shutdown().await;
    status
}
