//! ssh-agent forwarding, laptop side (issue #36 §2).
//!
//! With `ForwardAgent` on for the host (ssh_config, `-o`, `-A`), every new link offers this
//! laptop's agent to the daemon ([`offer`]); the daemon then opens one agent channel per
//! connection a host process makes to the workspace's `SSH_AUTH_SOCK`, and [`serve`] carries
//! it to the agent here, one request at a time. Only listing keys, signing and extensions
//! reach the agent ([`reasonix_forward::agent::allowed`]); adding, removing or locking keys
//! from the host is answered `SSH_AGENT_FAILURE` here. The agent's private keys never leave
//! it: what crosses the link is public keys and signatures. Nothing of the traffic is
//! logged, only which host process asked for which kind of operation.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use reasonix_forward::agent::{
    allowed, failure, kind_name, message_kind, read_message, AgentOffer, AgentOpen, Frames,
    AGENT_WINDOW, SSH_AGENTC_SIGN_REQUEST,
};
use reasonix_forward::channel::{Channel, ChannelAccepted, ChannelData, Offer};
use reasonix_forward::proto::{ErrorCode, Event, EventKind, PtyBytes, Request, Response, RpcError};
use reasonix_forward::rpc::Rpc;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use crate::agent_confirm::{allow_sign, AgentConfirm};
use crate::client::ClientEvent;

/// Offer the agent at `agent` on a new link and tell the user where the host's processes
/// find it.
pub(crate) async fn offer(
    rpc: Rpc,
    agent: Arc<PathBuf>,
    events: mpsc::UnboundedSender<ClientEvent>,
) {
    let req = Request::ForwardAgent(AgentOffer {
        laptop_agent: agent.display().to_string(),
    });
    let text = match rpc.request(req).await {
        Ok(Response::AgentForwarding(f)) => format!(
            "ssh-agent forwarded: the workspace's terminals use SSH_AUTH_SOCK={} on the host; its requests go to this laptop's agent while this laptop drives",
            f.socket
        ),
        Ok(other) => format!("ssh-agent not forwarded: the host answered {other:?}"),
        Err(e) => format!("ssh-agent not forwarded: {e}"),
    };
    tracing::info!("{text}");
    let _ = events.send(ClientEvent::Event(Event {
        seq: 0,
        ts: String::new(),
        turn: 0,
        kind: EventKind::Notice { text },
    }));
}

/// An agent channel the host opened: connect it to the laptop's agent, or refuse saying why
/// (this laptop does not forward its agent, or the agent does not answer).
pub(crate) fn serve(
    agent: Option<Arc<PathBuf>>,
    confirm: Arc<AgentConfirm>,
    events: mpsc::UnboundedSender<ClientEvent>,
    open: AgentOpen,
    offer: Offer,
) {
    tokio::spawn(async move {
        let Some(agent) = agent else {
            let e = RpcError::new(
                ErrorCode::BadRequest,
                "this laptop does not forward its ssh-agent (ForwardAgent is off for this host)",
            );
            offer.refuse(e).await;
            return;
        };
        let stream = match crate::platform::agent::connect(&agent).await {
            Ok(s) => s,
            Err(e) => {
                let e = RpcError::new(
                    ErrorCode::Io,
                    format!(
                        "the laptop's ssh-agent at {} does not answer: {e}",
                        agent.display()
                    ),
                );
                offer.refuse(e).await;
                return;
            }
        };
        let channel = match offer.accept(ChannelAccepted::Agent, AGENT_WINDOW).await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!("agent channel not accepted: {e}");
                return;
            }
        };
        let ctx = Relay {
            open: &open,
            addr: &agent,
            confirm: &confirm,
            events: &events,
        };
        if let Err(e) = relay(stream, channel, ctx).await {
            tracing::info!(pid = open.pid, command = %open.command, "agent channel ended: {e}");
        }
    });
}

/// What a relay needs besides its two ends.
struct Relay<'a> {
    open: &'a AgentOpen,
    addr: &'a Path,
    confirm: &'a AgentConfirm,
    events: &'a mpsc::UnboundedSender<ClientEvent>,
}

/// Requests from the host, one at a time, to the agent; its answers back. In `confirm` mode
/// a signing request first asks the user ([`crate::agent_confirm`]).
async fn relay(
    mut agent: Box<dyn crate::platform::agent::AgentStream>,
    channel: Channel,
    ctx: Relay<'_>,
) -> Result<(), String> {
    let Relay {
        open,
        addr,
        confirm,
        events,
    } = ctx;
    let Channel { tx, mut rx } = channel;
    let mut frames = Frames::new();
    loop {
        let msg = loop {
            if let Some(m) = frames.next_message()? {
                break m;
            }
            match rx.recv().await {
                Some(ChannelData::Bytes { data }) => frames.push(&data.0),
                Some(_) => return Err("the host sent something other than bytes".into()),
                None => {
                    tx.close(None).await;
                    return Ok(());
                }
            }
        };
        let kind = message_kind(&msg);
        tracing::info!(
            pid = open.pid,
            command = %open.command,
            "host agent request: {}",
            kind_name(kind)
        );
        let asked = kind == SSH_AGENTC_SIGN_REQUEST && confirm.confirm;
        let ok =
            allowed(kind) && (!asked || allow_sign(confirm, &msg, open, &mut agent, events).await);
        let reply = if ok {
            agent
                .write_all(&msg)
                .await
                .map_err(|e| format!("writing to the agent at {}: {e}", addr.display()))?;
            read_message(&mut agent)
                .await
                .map_err(|e| format!("reading from the agent at {}: {e}", addr.display()))?
                .ok_or_else(|| format!("the agent at {} closed the connection", addr.display()))?
        } else {
            failure()
        };
        tx.send(ChannelData::Bytes {
            data: PtyBytes(reply),
        })
        .await
        .map_err(|e| e.to_string())?;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use crate::config::{Config, LoadOptions};

    fn policy_with(user: &str, project: Option<&str>) -> reasonix_forward::policy::SessionPolicy {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), user).unwrap();
        if let Some(p) = project {
            std::fs::write(ws.path().join("reasonix.toml"), p).unwrap();
        }
        Config::load(&LoadOptions {
            home: Some(home.path().to_path_buf()),
            project_dir: Some(ws.path().to_path_buf()),
            ..LoadOptions::default()
        })
        .unwrap()
        .session_policy()
    }

    fn config_with(user: &str, project: Option<&str>) -> Result<Config, String> {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), user).unwrap();
        if let Some(p) = project {
            std::fs::write(ws.path().join("reasonix.toml"), p).unwrap();
        }
        Config::load(&LoadOptions {
            home: Some(home.path().to_path_buf()),
            project_dir: Some(ws.path().to_path_buf()),
            ..LoadOptions::default()
        })
        .map_err(|e| e.to_string())
    }

    /// `ssh_agent = "confirm"`: the agent for the bash tool, and the question for every
    /// signature; a project may add the question, never the agent or a pre-approval.
    #[test]
    fn confirm_is_on_with_a_question_and_only_the_user_pre_approves() {
        let c = config_with(
            "[sandbox]\nssh_agent = \"confirm\"\nssh_agent_approved = [\"SHA256:x\"]\n",
            None,
        )
        .unwrap();
        assert!(c.sandbox.ssh_agent && c.sandbox.ssh_agent_confirm);
        assert_eq!(c.sandbox.ssh_agent_approved, vec!["SHA256:x".to_string()]);
        assert!(c.session_policy().sandbox.ssh_agent);
        let c = config_with("[sandbox]\nssh_agent = true\n", None).unwrap();
        assert!(c.sandbox.ssh_agent && !c.sandbox.ssh_agent_confirm);
        let c = config_with(
            "[sandbox]\nssh_agent = true\n",
            Some("[sandbox]\nssh_agent = \"confirm\"\n"),
        )
        .unwrap();
        assert!(c.sandbox.ssh_agent_confirm, "a project adds the question");
        let c = config_with("", Some("[sandbox]\nssh_agent = \"confirm\"\n")).unwrap();
        assert!(!c.sandbox.ssh_agent && !c.sandbox.ssh_agent_confirm);
        let c = config_with("", Some("[sandbox]\nssh_agent_approved = [\"SHA256:x\"]\n")).unwrap();
        assert!(c.sandbox.ssh_agent_approved.is_empty());
        let bad = config_with("[sandbox]\nssh_agent = \"ask\"\n", None).unwrap_err();
        assert!(bad.contains("confirm"), "{bad}");
    }

    /// `[sandbox] ssh_agent` is the user's to turn on; off by default; a project file may
    /// turn it off, never on.
    #[test]
    fn the_bash_tool_gets_the_agent_only_when_the_user_says_so() {
        assert!(!policy_with("", None).sandbox.ssh_agent);
        assert!(
            policy_with("[sandbox]\nssh_agent = true\n", None)
                .sandbox
                .ssh_agent
        );
        let project_on = "[sandbox]\nssh_agent = true\n";
        assert!(!policy_with("", Some(project_on)).sandbox.ssh_agent);
        let project_off = "[sandbox]\nssh_agent = false\n";
        assert!(
            !policy_with("[sandbox]\nssh_agent = true\n", Some(project_off))
                .sandbox
                .ssh_agent
        );
    }
}
