//! `reasonix subagent run|try` (#33 §3): the run's turn is one child of a profile, run by
//! the host ([`Request::RunSubagent`]); everything else is `reasonix run`'s.

use std::time::Duration;

use reasonix_forward::proto::{ErrorCode, Request, Response};
use reasonix_forward::rpc::CallError;

use super::SubagentRun;
use crate::client::Client;

/// Ask the host to run `task` as a child of `sub.profile`; like `Client::submit_turn`,
/// waits while the host says busy (a turn of a continued session still ending) and retries
/// with the same id.
pub(super) async fn submit(
    client: &Client,
    request_id: &str,
    sub: &SubagentRun,
    task: &str,
) -> Result<Response, CallError> {
    loop {
        let req = Request::RunSubagent {
            request_id: request_id.to_string(),
            profile: sub.profile.clone(),
            task: task.to_string(),
            read_only: sub.read_only,
        };
        match client.request(req).await {
            Err(CallError::Remote(e)) if e.code == ErrorCode::Busy => {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            other => return other,
        }
    }
}
