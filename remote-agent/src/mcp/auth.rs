//! Bearer tokens of host-side HTTP MCP servers that need sign-in. The sign-in and the tokens
//! live on the laptop (`reasonix mcp login NAME`); each time the host opens a connection to
//! such a server it asks the attached laptop for a current access token for the server's URL
//! (`Request::McpToken`) and keeps it in memory for that connection only: never in a file,
//! the environment or a log.

use std::sync::Mutex;
use std::time::Duration;

use reasonix_forward::proto::{Request, Response};
use reasonix_forward::rpc::{CallError, Rpc};
use reasonix_forward::sync::LockExt;

/// How long the laptop may take (a refresh is an HTTP round trip to the authorization
/// server).
const TOKEN_TIMEOUT: Duration = Duration::from_secs(60);

/// The laptops attached to the daemon, newest last; tokens are asked of the newest.
#[derive(Default)]
pub struct LaptopTokens {
    links: Mutex<Vec<(u64, Rpc)>>,
}

impl LaptopTokens {
    /// A laptop connection `id` attached.
    pub fn attach(&self, id: u64, rpc: Rpc) {
        let mut links = self.links.lock_or_recover();
        links.retain(|(i, _)| *i != id);
        links.push((id, rpc));
    }

    /// Connection `id` is gone.
    pub fn detach(&self, id: u64) {
        self.links.lock_or_recover().retain(|(i, _)| *i != id);
    }

    /// The laptop's access token for `url` (server `server`): `Ok(None)` when no laptop is
    /// attached or nobody signed in to it there.
    pub async fn token(&self, server: &str, url: &str) -> Result<Option<String>, String> {
        let Some(rpc) = self.links.lock_or_recover().last().map(|(_, r)| r.clone()) else {
            return Ok(None);
        };
        let asked = rpc.request(Request::McpToken {
            server: server.to_string(),
            url: url.to_string(),
        });
        match tokio::time::timeout(TOKEN_TIMEOUT, asked).await {
            Err(_) => Err("the laptop did not answer for the sign-in token within 60 s".into()),
            Ok(Ok(Response::McpToken { access_token })) => Ok(access_token.map(|t| t.0)),
            Ok(Ok(other)) => Err(format!("the laptop answered {other:?}")),
            Ok(Err(CallError::Remote(e))) => Err(e.message),
            Ok(Err(e)) => Err(format!("the link to the laptop failed: {e}")),
        }
    }
}

impl std::fmt::Debug for LaptopTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "LaptopTokens({} links)",
            self.links.lock_or_recover().len()
        )
    }
}
