//! The shared set-up of the ACP tests (`acp_*`): `reasonix acp` started against the scripted
//! mock provider and driven by the client side of the `agent-client-protocol` crate
//! (`initialize`, `session/new`, the permission answers and the session updates recorded),
//! and the runs of the official TypeScript SDK's `tests/acp_node/drive.mjs` against a
//! [`LocalRig`] ([`node`] has what the netns tests share too).
//!
//! Needs `mod common;` in the test file that includes it.

#![allow(dead_code)] // each test file uses a part

pub mod node;

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, InitializeResponse, NewSessionRequest, NewSessionResponse,
    PermissionOptionKind, PromptRequest, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, SessionId, SessionNotification,
    SessionUpdate, StopReason, TextContent,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Agent, ByteStreams, Client};
use reasonix_testkit::mock_provider::{MockProvider, MockReply};
use serde_json::Value;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use crate::common::{self, host_bin, LocalRig};

/// The session updates received so far (the body of [`session`] may watch them).
pub type Updates = Arc<Mutex<Vec<SessionUpdate>>>;

/// Which option the client picks for the `n`th permission request (0-based).
pub type Answer = fn(usize) -> PermissionOptionKind;

/// [`Answer`]: "Allow once", every time.
pub fn allow_once(_: usize) -> PermissionOptionKind {
    PermissionOptionKind::AllowOnce
}

/// What [`session`] hands its body: the agent's answers to `initialize` and `session/new`.
pub struct Opened {
    /// The answer to `initialize`.
    pub init: InitializeResponse,
    /// The answer to `session/new` in the rig's workspace.
    pub session: NewSessionResponse,
    /// The updates so far.
    pub updates: Updates,
}

/// What a [`session`] ended with.
pub struct Done<R> {
    /// What the body returned.
    pub out: R,
    /// Every session update, in order.
    pub updates: Vec<SessionUpdate>,
    /// Every permission request, in order.
    pub asked: Vec<RequestPermissionRequest>,
    /// The `reasonix acp` process (killed when dropped).
    pub child: tokio::process::Child,
}

/// Start `reasonix acp` for `rig`, connect the crate's client to it, `initialize`, open a
/// session in the workspace and run `body`; permission requests are answered by `answer`.
/// The whole exchange must end within 120 s.
pub async fn session<R>(
    rig: &LocalRig,
    answer: Answer,
    body: impl AsyncFnOnce(ConnectionTo<Agent>, Opened) -> Result<R, agent_client_protocol::Error>,
) -> Done<R> {
    let mut child = common::spawn_acp(rig);
    let stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
    let updates: Updates = Arc::default();
    let asked: Arc<Mutex<Vec<RequestPermissionRequest>>> = Arc::default();
    let (u, a, seen) = (
        Arc::clone(&updates),
        Arc::clone(&asked),
        Arc::clone(&updates),
    );
    let ws = rig.ws.clone();
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        Client
            .v1()
            .on_receive_notification(
                async move |n: SessionNotification, _cx| {
                    u.lock().expect("updates").push(n.update);
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_request(
                async move |req: RequestPermissionRequest, responder, _cx| {
                    let want = answer(a.lock().expect("asked").len());
                    let pick = req
                        .options
                        .iter()
                        .find(|o| o.kind == want)
                        .map(|o| o.option_id.clone())
                        .unwrap_or_else(|| panic!("no {want:?} option in {req:?}"));
                    a.lock().expect("asked").push(req);
                    responder.respond(RequestPermissionResponse::new(
                        RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(pick)),
                    ))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
                let init = cx
                    .send_request(InitializeRequest::new(
                        agent_client_protocol::schema::ProtocolVersion::V1,
                    ))
                    .block_task()
                    .await?;
                let session = cx
                    .send_request(NewSessionRequest::new(ws))
                    .block_task()
                    .await?;
                body(
                    cx,
                    Opened {
                        init,
                        session,
                        updates: seen,
                    },
                )
                .await
            }),
    )
    .await
    .expect("the prompt ends within 120 s")
    .expect("ACP exchange");
    let updates = std::mem::take(&mut *updates.lock().expect("updates"));
    let asked = std::mem::take(&mut *asked.lock().expect("asked"));
    Done {
        out,
        updates,
        asked,
        child,
    }
}

/// Send `text` as a prompt of `session` and wait for its stop reason.
pub async fn prompt(
    cx: &ConnectionTo<Agent>,
    session: &SessionId,
    text: &str,
) -> Result<StopReason, agent_client_protocol::Error> {
    let r = cx
        .send_request(PromptRequest::new(
            session.clone(),
            vec![ContentBlock::Text(TextContent::new(text))],
        ))
        .block_task()
        .await?;
    Ok(r.stop_reason)
}

/// Append `toml` to the rig's user config.
pub fn add_config(rig: &LocalRig, toml: &str) {
    let path = rig.home.join("config.toml");
    let mut text = std::fs::read_to_string(&path).expect("config");
    text.push_str(toml);
    std::fs::write(&path, text).expect("config");
}

/// A scenario of the TypeScript client: the mock provider with `replies` (on its own
/// runtime, which lives as long as this) and a [`LocalRig`] using it.
pub struct NodeScenario {
    /// The runtime the mock provider runs on.
    pub rt: tokio::runtime::Runtime,
    /// The scripted provider.
    pub mock: MockProvider,
    /// The laptop's home and workspace.
    pub rig: LocalRig,
}

impl NodeScenario {
    /// The mock with `replies`, and a rig whose provider key is `key` in `key_env`.
    pub fn new(replies: Vec<MockReply>, key_env: &str, key: &str) -> Self {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let mock = rt.block_on(MockProvider::start(replies));
        let rig = LocalRig::new(&mock.base_url(), key_env, key);
        Self { rt, mock, rig }
    }
}

/// Run one scenario of `drive.mjs` against `reasonix` with `args` (its `AGENT_ARGV`) and
/// extra environment `env`, in `rig`; its JSON report.
pub fn drive_with(
    rig: &LocalRig,
    args: &[String],
    env: &[(&str, &str)],
    scenario: &str,
    arg: Option<&str>,
) -> Value {
    let mut cmd = Command::new("node");
    cmd.arg(node::drive_script()).arg(scenario);
    if let Some(a) = arg {
        cmd.arg(a);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .env("AGENT_ARGV", serde_json::to_string(args).expect("argv"))
        .env("REASONIX_BIN", env!("CARGO_BIN_EXE_reasonix"))
        .env("WS", &rig.ws)
        .env("REASONIX_HOME", &rig.home)
        .env("REASONIX_REMOTE_BIN", host_bin())
        .env("REASONIX_IDLE_TIMEOUT_SECS", "60")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("node runs (Node 20 is part of the machine)");
    node::report(
        out.status,
        &String::from_utf8_lossy(&out.stdout),
        &String::from_utf8_lossy(&out.stderr),
    )
}
