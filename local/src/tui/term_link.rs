//! The terminal tabs' side of the link: [`PtyAction`]s go to the host one after the other
//! (keystrokes must arrive in the order they were typed), and the host's terminal traffic
//! comes back as [`AppEvent::Pty`]. One task does both, so the answer to an `Open` or
//! `Attach` always reaches the state machine before that terminal's first output.

use reasonix_forward::proto::{
    Notification, PtyBytes, PtyNotification, PtyRequest, PtyResponse, Request, Response,
};
use reasonix_forward::rpc::CallError;
use tokio::sync::mpsc;

use super::app::{AppEvent, PtyAction, PtyEvent};
use crate::client::Client;

/// `TERM` of the shells: what the tab's screen model (`vt100`) understands, whatever the
/// laptop terminal is.
const TAB_TERM: &str = "xterm-256color";

/// Start the task; terminal actions go into the returned sender.
pub(super) fn spawn(
    client: Client,
    tx: mpsc::UnboundedSender<AppEvent>,
) -> mpsc::UnboundedSender<PtyAction> {
    let (actions_tx, mut actions) = mpsc::unbounded_channel::<PtyAction>();
    let mut notes = client.terminal_events();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                Some(n) = notes.recv() => {
                    if tx.send(AppEvent::Pty(PtyEvent::Notify(n))).is_err() {
                        return;
                    }
                }
                a = actions.recv() => {
                    let Some(a) = a else { return };
                    if let Some(ev) = run(&client, a).await {
                        if tx.send(AppEvent::Pty(ev)).is_err() {
                            return;
                        }
                    }
                }
            }
        }
    });
    actions_tx
}

fn message(e: CallError) -> String {
    match e {
        CallError::Remote(r) => r.message,
        CallError::Link(l) => format!("the link dropped before the host answered ({l})"),
    }
}

async fn run(client: &Client, action: PtyAction) -> Option<PtyEvent> {
    match action {
        PtyAction::List => match client.request(Request::Pty(PtyRequest::List)).await {
            Ok(Response::Pty(PtyResponse::List { ptys })) => Some(PtyEvent::Listed(ptys)),
            Ok(other) => Some(PtyEvent::ListFailed(format!("unexpected answer {other:?}"))),
            Err(e) => Some(PtyEvent::ListFailed(message(e))),
        },
        PtyAction::Open { size } => {
            let req = PtyRequest::Open {
                size,
                term: TAB_TERM.into(),
            };
            match client.request(Request::Pty(req)).await {
                Ok(Response::Pty(PtyResponse::Attached(info))) => {
                    Some(PtyEvent::Attached { info, opened: true })
                }
                Ok(other) => Some(PtyEvent::OpenFailed(format!("unexpected answer {other:?}"))),
                Err(e) => Some(PtyEvent::OpenFailed(message(e))),
            }
        }
        PtyAction::Attach { pty, have, size } => {
            let req = PtyRequest::Attach { pty, have, size };
            match client.request(Request::Pty(req)).await {
                Ok(Response::Pty(PtyResponse::Attached(info))) => Some(PtyEvent::Attached {
                    info,
                    opened: false,
                }),
                Ok(other) => Some(PtyEvent::Failed {
                    pty,
                    message: format!("unexpected answer {other:?}"),
                }),
                // The tab re-attaches by itself once a new link is up.
                Err(CallError::Link(l)) => {
                    tracing::debug!(pty, "attach lost with the link: {l}");
                    None
                }
                Err(e) => Some(PtyEvent::Failed {
                    pty,
                    message: message(e),
                }),
            }
        }
        PtyAction::Close { pty } => {
            match client
                .request(Request::Pty(PtyRequest::Close { pty }))
                .await
            {
                Ok(_) => None,
                Err(e) => Some(PtyEvent::Failed {
                    pty,
                    message: message(e),
                }),
            }
        }
        PtyAction::Input { pty, data } => {
            let n = PtyNotification::Input {
                pty,
                data: PtyBytes(data),
            };
            if let Err(e) = client.notify(Notification::Pty(n)).await {
                tracing::debug!(pty, "keystrokes not sent: {e}");
            }
            None
        }
        PtyAction::Resize { pty, size } => {
            let n = PtyNotification::Resize { pty, size };
            if let Err(e) = client.notify(Notification::Pty(n)).await {
                tracing::debug!(pty, "resize not sent: {e}");
            }
            None
        }
    }
}
