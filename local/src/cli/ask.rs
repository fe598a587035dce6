//! One request to the host without a session: the shape every listing command shares
//! (`sessions`, `skills list`, `hooks`, `mcp list`, `remote status`).

use std::sync::Arc;
use std::time::Duration;

use reasonix_forward::proto::{Request, Response};
use reasonix_forward::rpc::CallError;
use reasonix_local::client::{Client, ClientEvent, ClientOptions, ConnState};
use reasonix_local::config::Config;
use reasonix_local::connect::Connector;
use tokio::sync::mpsc::UnboundedReceiver;

use super::error::CliError;

/// A client of `connector` with `config`'s gateway and `options`.
pub(super) fn start(
    config: &Config,
    connector: Arc<dyn Connector>,
    options: ClientOptions,
) -> (Client, UnboundedReceiver<ClientEvent>) {
    let gateway = Arc::new(reasonix_local::gateway::Gateway::new(config));
    Client::start(connector, gateway, options)
}

/// Send `request` and wait at most `limit` for its answer. A connection that fails first
/// fails the command with the connection's reason (exit 5); an error answer fails it with
/// the host's message; no answer within `limit` says so.
pub(super) async fn ask(
    client: &Client,
    events: &mut UnboundedReceiver<ClientEvent>,
    request: Request,
    limit: Duration,
) -> Result<Response, CliError> {
    let answer = {
        let failed = async {
            while let Some(ev) = events.recv().await {
                if let ClientEvent::Connection(ConnState::Failed { reason, .. }) = ev {
                    return reason;
                }
            }
            "the client stopped".to_string()
        };
        tokio::select! {
            r = tokio::time::timeout(limit, client.request(request)) => r,
            reason = failed => return Err(CliError::connection(reason)),
        }
    };
    match answer {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(CallError::Remote(e))) => Err(CliError::failed(e.message)),
        Ok(Err(e)) => {
            // The request can end first when the supervisor gives up; its reason says why.
            let mut reason = e.to_string();
            while let Ok(ev) = events.try_recv() {
                if let ClientEvent::Connection(ConnState::Failed { reason: r, .. }) = ev {
                    reason = r;
                }
            }
            Err(CliError::connection(reason))
        }
        Err(_) => Err(CliError::connection(format!(
            "no answer from the host within {} s",
            limit.as_secs()
        ))),
    }
}

/// The answer was not the kind the command asked for.
pub(super) fn unexpected(answer: Response) -> CliError {
    CliError::failed(format!("unexpected answer {answer:?}"))
}
