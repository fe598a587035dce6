//! The terminal tabs' side of the link: [`PtyAction`]s go to the host one after the other
//! (keystrokes must arrive in the order they were typed), and each tab's terminal channel
//! brings its traffic back as [`AppEvent::Pty`]. The answer to an `Open` or `Attach` reaches
//! the state machine before that channel's first output: the channel's relay starts after.

use std::collections::HashMap;

use reasonix_forward::channel::{
    Channel, ChannelAccepted, ChannelData, ChannelHandle, ChannelOpen, ChannelSender,
};
use reasonix_forward::proto::{
    PtyBytes, PtyData, PtyNotification, PtyOpen, PtyRequest, PtyResponse, Request, Response,
};
use reasonix_forward::rpc::CallError;
use tokio::sync::mpsc;

use super::app::{AppEvent, PtyAction, PtyEvent};
use crate::client::Client;

/// `TERM` of the shells: what the tab's screen model (`vt100`) understands, whatever the
/// laptop terminal is.
const TAB_TERM: &str = "xterm-256color";

/// Bytes of output a tab takes before it grants the host credit (see `term::OUTPUT_WINDOW`).
const OUTPUT_WINDOW: u32 = 4 * 1024 * 1024;

/// The sending half of each tab's channel, by terminal, and a handle to end it.
type Tabs = HashMap<u64, (ChannelSender, ChannelHandle)>;

/// Start the task; terminal actions go into the returned sender.
pub(super) fn spawn(
    client: Client,
    tx: mpsc::UnboundedSender<AppEvent>,
) -> mpsc::UnboundedSender<PtyAction> {
    let (actions_tx, mut actions) = mpsc::unbounded_channel::<PtyAction>();
    tokio::spawn(async move {
        let mut tabs = Tabs::new();
        while let Some(a) = actions.recv().await {
            if let Some(ev) = run(&client, &mut tabs, &tx, a).await {
                if tx.send(AppEvent::Pty(ev)).is_err() {
                    return;
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

/// Open a terminal channel; the terminal's info and the channel.
async fn open(
    client: &Client,
    open: PtyOpen,
) -> Result<(reasonix_forward::proto::PtyInfo, Channel), CallError> {
    match client
        .open_channel(ChannelOpen::Pty(open), OUTPUT_WINDOW)
        .await?
    {
        (ChannelAccepted::Pty(info), channel) => Ok((info, channel)),
        (other, _) => Err(CallError::Remote(reasonix_forward::proto::RpcError::new(
            reasonix_forward::proto::ErrorCode::BadResponse,
            format!("unexpected answer {other:?}"),
        ))),
    }
}

/// Keep `channel` as terminal `pty`'s (ending one it had) and relay its traffic to the
/// state machine. Called after the `Attached` event went out.
fn follow(tabs: &mut Tabs, tx: &mpsc::UnboundedSender<AppEvent>, pty: u64, channel: Channel) {
    let Channel { tx: sender, mut rx } = channel;
    if let Some((_, old)) = tabs.insert(pty, (sender, rx.handle())) {
        old.cancel("the tab attached again");
    }
    let tx = tx.clone();
    tokio::spawn(async move {
        while let Some(data) = rx.recv().await {
            let ChannelData::Pty(data) = data else {
                tracing::debug!(pty, "ignored on a terminal channel: {data:?}");
                continue;
            };
            let n = PtyNotification::from_data(pty, data);
            if tx.send(AppEvent::Pty(PtyEvent::Notify(n))).is_err() {
                return;
            }
        }
        // A link that was replaced ends its channels; the tab attaches again once the new
        // one is up (`Reattached`).
        tracing::debug!(pty, "terminal channel ended: {:?}", rx.end());
    });
}

async fn run(
    client: &Client,
    tabs: &mut Tabs,
    tx: &mpsc::UnboundedSender<AppEvent>,
    action: PtyAction,
) -> Option<PtyEvent> {
    match action {
        PtyAction::List => match client.request(Request::Pty(PtyRequest::List)).await {
            Ok(Response::Pty(PtyResponse::List { ptys })) => Some(PtyEvent::Listed(ptys)),
            Ok(other) => Some(PtyEvent::ListFailed(format!("unexpected answer {other:?}"))),
            Err(e) => Some(PtyEvent::ListFailed(message(e))),
        },
        PtyAction::Open { size } => {
            let req = PtyOpen::Open {
                size,
                term: TAB_TERM.into(),
            };
            match open(client, req).await {
                Ok((info, channel)) => {
                    let pty = info.id;
                    let attached = PtyEvent::Attached { info, opened: true };
                    if tx.send(AppEvent::Pty(attached)).is_ok() {
                        follow(tabs, tx, pty, channel);
                    }
                    None
                }
                Err(e) => Some(PtyEvent::OpenFailed(message(e))),
            }
        }
        PtyAction::Attach { pty, have, size } => {
            match open(client, PtyOpen::Attach { pty, have, size }).await {
                Ok((info, channel)) => {
                    let attached = PtyEvent::Attached {
                        info,
                        opened: false,
                    };
                    if tx.send(AppEvent::Pty(attached)).is_ok() {
                        follow(tabs, tx, pty, channel);
                    }
                    None
                }
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
            // Detached first, as a tab that closes its shell does not wait for the exit.
            if let Some((_, handle)) = tabs.remove(&pty) {
                handle.cancel("the tab closed its shell");
            }
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
            send(
                tabs,
                pty,
                PtyData::Input {
                    data: PtyBytes(data),
                },
            )
            .await;
            None
        }
        PtyAction::Resize { pty, size } => {
            send(tabs, pty, PtyData::Resize { size }).await;
            None
        }
    }
}

/// Send `data` on terminal `pty`'s channel. Without a live one (its link is being replaced)
/// it is dropped: the tab attaches again and shows the host's screen.
async fn send(tabs: &Tabs, pty: u64, data: PtyData) {
    match tabs.get(&pty) {
        Some((sender, _)) => {
            if let Err(e) = sender.send(ChannelData::Pty(data)).await {
                tracing::debug!(pty, "terminal traffic not sent: {e}");
            }
        }
        None => tracing::debug!(pty, "terminal traffic for a tab without a channel"),
    }
}
