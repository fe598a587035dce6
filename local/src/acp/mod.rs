//! `reasonix acp`: the Agent Client Protocol front end, for editors (Zed and others).
//!
//! An editor is one more front end of the daemon protocol, like the TUI and `run`: each ACP
//! session is a [`crate::client::Client`] attached to one daemon session (locally through a
//! child `reasonix-remote attach`, or on a host over the SSH link), model calls go through
//! the laptop gateway, and the editor never sees a key. See `docs/ACP.md` for every method
//! and capability, implemented or declined.

mod children;
pub mod commands;
pub mod launch;
pub mod rpc;
pub mod session;
pub mod translate;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema as acp;
use reasonix_forward::sync::LockExt;
use serde::de::DeserializeOwned;
use serde_json::Value;

use rpc::{Inbound, Peer};
use session::{Opening, SessionHandle, SessionSpec};

/// Makes the [`SessionSpec`] of a session whose editor working directory is `cwd`: local
/// mode attaches to the daemon of `cwd`, SSH mode to the host workspace of its destination.
pub type SessionFactory = Arc<dyn Fn(&Path) -> Result<SessionSpec, String> + Send + Sync>;

type Sessions = Arc<Mutex<HashMap<String, Arc<SessionHandle>>>>;

/// Serve ACP on `input`/`output` (the process's stdin/stdout) until the editor closes its
/// end. Returns the process exit code.
pub async fn serve<R, W>(input: R, output: W, factory: SessionFactory) -> i32
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (peer, mut inbound) = rpc::start(input, output);
    let sessions: Sessions = Arc::default();
    let mut notices = false;
    while let Some(msg) = inbound.recv().await {
        match msg {
            Inbound::Request { id, method, params } => {
                let peer = peer.clone();
                match method.as_str() {
                    "initialize" => {
                        let r = parse::<acp::InitializeRequest>(params).map(|req| {
                            notices = req
                                .client_capabilities
                                .session
                                .as_ref()
                                .and_then(|s| s.notices.as_ref())
                                .is_some();
                            initialize_response()
                        });
                        peer.respond_with(id, r);
                    }
                    "authenticate" => peer.respond(
                        id,
                        Err(acp::Error::invalid_params().data(
                            "reasonix needs no editor authentication: provider keys stay in the laptop's reasonix config",
                        )),
                    ),
                    "session/new" => match parse::<acp::NewSessionRequest>(params) {
                        Ok(req) => {
                            let mut spec = match factory(&req.cwd) {
                                Ok(s) => s,
                                Err(e) => {
                                    peer.respond(id, Err(acp::Error::invalid_params().data(e)));
                                    continue;
                                }
                            };
                            let sessions = Arc::clone(&sessions);
                            let unused = editor_mcp(&mut spec, &req.mcp_servers);
                            tokio::spawn(async move {
                                match session::open(spec, Opening::New, peer.clone(), notices).await
                                {
                                    Ok((sid, handle)) => {
                                        let commands = handle.load_commands().await;
                                        sessions.lock_or_recover().insert(sid.clone(), Arc::new(handle));
                                        peer.respond_with(
                                            id,
                                            Ok(acp::NewSessionResponse::new(sid.clone())
                                                .modes(session::modes(false))),
                                        );
                                        announce(&peer, &sid, &commands, unused);
                                    }
                                    Err(e) => peer.respond(id, Err(e)),
                                }
                            });
                        }
                        Err(e) => peer.respond(id, Err(e)),
                    },
                    "session/load" => match parse::<acp::LoadSessionRequest>(params) {
                        Ok(req) => {
                            let mut spec = match factory(&req.cwd) {
                                Ok(s) => s,
                                Err(e) => {
                                    peer.respond(id, Err(acp::Error::invalid_params().data(e)));
                                    continue;
                                }
                            };
                            let sessions = Arc::clone(&sessions);
                            let unused = editor_mcp(&mut spec, &req.mcp_servers);
                            let wanted = req.session_id.0.to_string();
                            tokio::spawn(async move {
                                let opened = session::open(
                                    spec,
                                    Opening::Load(wanted),
                                    peer.clone(),
                                    notices,
                                )
                                .await;
                                match opened {
                                    Ok((sid, handle)) => {
                                        let commands = handle.load_commands().await;
                                        let plan_on = handle.plan_mode();
                                        sessions.lock_or_recover().insert(sid.clone(), Arc::new(handle));
                                        // The plan mode of the loaded journal came as a
                                        // `current_mode_update` during the history.
                                        peer.respond_with(
                                            id,
                                            Ok(acp::LoadSessionResponse::new()
                                                .modes(session::modes(plan_on))),
                                        );
                                        announce(&peer, &sid, &commands, unused);
                                    }
                                    Err(e) => peer.respond(id, Err(e)),
                                }
                            });
                        }
                        Err(e) => peer.respond(id, Err(e)),
                    },
                    "session/set_mode" => {
                        let r = parse::<acp::SetSessionModeRequest>(params).and_then(|req| {
                            let sid = req.session_id.0.to_string();
                            sessions
                                .lock_or_recover()
                                .get(&sid)
                                .cloned()
                                .ok_or_else(|| acp::Error::session_not_found(sid))
                                .map(|h| (h, req.mode_id.0.to_string()))
                        });
                        match r {
                            Ok((handle, mode)) => {
                                if let Err(e) = handle.set_mode(id.clone(), mode) {
                                    peer.respond(id, Err(e));
                                }
                            }
                            Err(e) => peer.respond(id, Err(e)),
                        }
                    }
                    "session/prompt" => {
                        let r = parse::<acp::PromptRequest>(params).and_then(|req| {
                            let sid = req.session_id.0.to_string();
                            let handle = sessions.lock_or_recover()
                                .get(&sid)
                                .cloned()
                                .ok_or_else(|| acp::Error::session_not_found(sid.clone()))?;
                            let text = prompt_text(&req.prompt)?;
                            Ok((handle, text))
                        });
                        match r {
                            Ok((handle, text)) => {
                                if let Err(e) = handle.prompt(id.clone(), text) {
                                    peer.respond(id, Err(e));
                                }
                            }
                            Err(e) => peer.respond(id, Err(e)),
                        }
                    }
                    // Our extension (ACP's `_` prefix): cancel one child, named by the tool
                    // call it is shown as (`session/cancel` cancels the whole turn).
                    "_reasonix/cancel_subagent" => {
                        let r = parse::<CancelSubagentParams>(params).and_then(|p| {
                            sessions
                                .lock_or_recover()
                                .get(&p.session_id)
                                .cloned()
                                .ok_or_else(|| acp::Error::session_not_found(p.session_id.clone()))
                                .map(|h| (h, p.tool_call_id))
                        });
                        match r {
                            Ok((handle, call)) => {
                                tokio::spawn(async move {
                                    let r = handle
                                        .cancel_subagent(&call)
                                        .await
                                        .map(|()| serde_json::json!({}));
                                    peer.respond(id, r);
                                });
                            }
                            Err(e) => peer.respond(id, Err(e)),
                        }
                    }
                    _ => peer.respond(
                        id,
                        Err(acp::Error::method_not_found()
                            .data(format!("reasonix does not implement {method} (see docs/ACP.md)"))),
                    ),
                }
            }
            Inbound::Notification { method, params } => match method.as_str() {
                "session/cancel" => match parse::<acp::CancelNotification>(params) {
                    Ok(n) => {
                        if let Some(h) = sessions.lock_or_recover().get(n.session_id.0.as_ref()) {
                            h.cancel();
                        }
                    }
                    Err(e) => tracing::warn!("bad session/cancel: {e:?}"),
                },
                // Unknown notifications (including `$/cancel_request` and extensions) are
                // ignored, as JSON-RPC asks: a notification gets no answer.
                other => tracing::debug!("ignored notification {other}"),
            },
        }
    }
    0
}

/// The params of `_reasonix/cancel_subagent`.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct CancelSubagentParams {
    session_id: String,
    /// The child's tool call id as the session's updates showed it (`<parent call>/sa-N`).
    tool_call_id: String,
}

fn parse<T: DeserializeOwned>(params: Value) -> Result<T, acp::Error> {
    serde_json::from_value(params).map_err(|e| acp::Error::invalid_params().data(e.to_string()))
}

/// What this agent advertises: history loading, prompts with embedded context (inlined as
/// text), no images or audio, editor MCP servers over stdio only, no authentication.
pub fn initialize_response() -> acp::InitializeResponse {
    acp::InitializeResponse::new(agent_client_protocol::schema::ProtocolVersion::V1)
        .agent_capabilities(
            acp::AgentCapabilities::new()
                .load_session(true)
                .prompt_capabilities(acp::PromptCapabilities::new().embedded_context(true)),
        )
        .agent_info(
            acp::Implementation::new("reasonix", reasonix_forward::build_id()).title("Reasonix"),
        )
}

/// After `session/new` / `session/load`: the slash commands (ours, then the custom ones),
/// the command files that were skipped, and a word on MCP servers the editor offered that
/// this agent does not use.
fn announce(
    peer: &Peer,
    session: &str,
    custom: &crate::commands::CommandSet,
    unused_mcp: Option<String>,
) {
    peer.notify(
        "session/update",
        &acp::SessionNotification::new(
            session.to_string(),
            acp::SessionUpdate::AvailableCommandsUpdate(acp::AvailableCommandsUpdate::new(
                commands::available_with(custom),
            )),
        ),
    );
    let skipped = custom
        .notices
        .iter()
        .map(|n| format!("[reasonix] {n}\n"))
        .collect::<String>();
    for text in (!skipped.is_empty())
        .then_some(skipped)
        .into_iter()
        .chain(unused_mcp)
    {
        peer.notify(
            "session/update",
            &acp::SessionNotification::new(
                session.to_string(),
                acp::SessionUpdate::AgentThoughtChunk(translate::chunk(&text)),
            ),
        );
    }
}

/// Adds the editor's stdio MCP servers to the session as laptop servers (they run next to the
/// editor, like user-config `[[mcp]]` entries, tunnelled to the host); returns a notice for
/// those that are not used: HTTP and SSE servers (not advertised in `initialize`) and names
/// the user config already declares (the user's entry wins).
fn editor_mcp(spec: &mut session::SessionSpec, servers: &[acp::McpServer]) -> Option<String> {
    let mut unused = Vec::new();
    for server in servers {
        match server {
            acp::McpServer::Stdio(s) => {
                if spec.config.mcp.iter().any(|m| m.name == s.name) {
                    unused.push(format!(
                        "`{}` (your reasonix config declares a server of that name)",
                        s.name
                    ));
                    continue;
                }
                spec.config.mcp.push(crate::config::McpServerSpec {
                    name: s.name.clone(),
                    command: Some(s.command.display().to_string()),
                    args: s.args.clone(),
                    env: s
                        .env
                        .iter()
                        .map(|e| (e.name.clone(), e.value.clone()))
                        .collect(),
                    url: None,
                    headers: Default::default(),
                    transport: None,
                    run_on: Some(crate::config::McpRunOn::Laptop),
                    timeout_seconds: None,
                    startup_timeout_seconds: None,
                    tool_timeouts: Default::default(),
                });
            }
            acp::McpServer::Http(h) => unused.push(format!("`{}` (HTTP)", h.name)),
            acp::McpServer::Sse(h) => unused.push(format!("`{}` (SSE)", h.name)),
            _ => unused.push("a server of a transport reasonix does not support".into()),
        }
    }
    (!unused.is_empty()).then(|| {
        format!(
            "[reasonix] editor MCP servers not used: {}; stdio servers run on the laptop, other transports are not supported (declare them in the reasonix config `[[mcp]]`)\n",
            unused.join(", ")
        )
    })
}

/// The prompt as the text of one user turn. Resource links to files become `@path`
/// mentions (the host attaches the file); embedded resources are inlined with their URI.
pub fn prompt_text(blocks: &[acp::ContentBlock]) -> Result<String, acp::Error> {
    let mut text = String::new();
    for b in blocks {
        match b {
            acp::ContentBlock::Text(t) => text.push_str(&t.text),
            acp::ContentBlock::ResourceLink(l) => {
                let path = l.uri.strip_prefix("file://").map(PathBuf::from);
                match path {
                    Some(p) => text.push_str(&format!(" @{} ", p.display())),
                    None => text.push_str(&format!(" [{}]({}) ", l.name, l.uri)),
                }
            }
            acp::ContentBlock::Resource(r) => match &r.resource {
                acp::EmbeddedResourceResource::TextResourceContents(t) => {
                    text.push_str(&format!(
                        "\n\n<context uri=\"{}\">\n{}\n</context>\n",
                        t.uri, t.text
                    ));
                }
                acp::EmbeddedResourceResource::BlobResourceContents(b) => {
                    return Err(acp::Error::invalid_params().data(format!(
                        "binary resource {} is not supported; reasonix takes text only",
                        b.uri
                    )))
                }
                #[allow(unreachable_patterns)]
                _ => {
                    return Err(acp::Error::invalid_params()
                        .data("a resource kind this build does not know"))
                }
            },
            acp::ContentBlock::Image(_) | acp::ContentBlock::Audio(_) => {
                return Err(acp::Error::invalid_params()
                    .data("images and audio are not supported (the agent did not advertise them)"))
            }
            #[allow(unreachable_patterns)]
            _ => {
                return Err(acp::Error::invalid_params()
                    .data("a content block kind this build does not know"))
            }
        }
    }
    if text.trim().is_empty() {
        return Err(acp::Error::invalid_params().data("the prompt is empty"));
    }
    Ok(text)
}
