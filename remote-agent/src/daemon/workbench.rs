//! Requests of the workbench features: steering a running turn, `!` shell commands and
//! the workspace's prompt history (issue 16).

use std::sync::Arc;

use reasonix_forward::proto::{ErrorCode, Response, RpcError};

use super::conn::Conn;
use super::Daemon;

impl Daemon {
    /// Steer, Shell, HistoryList, HistoryAppend.
    pub(super) async fn handle_workbench(
        &self,
        conn: &Arc<Conn>,
        body: WorkbenchRequest,
    ) -> Result<Response, RpcError> {
        match body {
            WorkbenchRequest::Steer { request_id, text } => {
                let session = self.driven_session(conn)?;
                match session.steer(&request_id, &text).await {
                    Ok(true) => Ok(Response::Ok),
                    Ok(false) => Ok(Response::Duplicate),
                    Err(e) => Err(e.into()),
                }
            }
            WorkbenchRequest::Shell {
                request_id,
                command,
                add_to_context,
            } => {
                let session = self.driven_session(conn)?;
                match session.shell(&request_id, &command, add_to_context).await {
                    Ok(true) => Ok(Response::Ok),
                    Ok(false) => Ok(Response::Duplicate),
                    Err(e) => Err(e.into()),
                }
            }
            WorkbenchRequest::HistoryList => {
                let history = Arc::clone(&self.history);
                tokio::task::spawn_blocking(move || history.list())
                    .await
                    .map_err(|e| RpcError::new(ErrorCode::Internal, e.to_string()))?
                    .map(|entries| Response::History { entries })
                    .map_err(|e| RpcError::new(ErrorCode::History, e.to_string()))
            }
            WorkbenchRequest::HistoryAppend { text } => {
                let history = Arc::clone(&self.history);
                tokio::task::spawn_blocking(move || history.append(&text))
                    .await
                    .map_err(|e| RpcError::new(ErrorCode::Internal, e.to_string()))?
                    .map(|()| Response::Ok)
                    .map_err(|e| RpcError::new(ErrorCode::History, e.to_string()))
            }
        }
    }
}

/// The workbench requests, taken out of [`Request`](reasonix_forward::proto::Request) so
/// their handler is one match.
pub(super) enum WorkbenchRequest {
    Steer {
        request_id: String,
        text: String,
    },
    Shell {
        request_id: String,
        command: String,
        add_to_context: bool,
    },
    HistoryList,
    HistoryAppend {
        text: String,
    },
}
