//! `/mcp login NAME` and `/mcp logout NAME` in the workbench (#35 §3): the same OAuth flow
//! and token file as `reasonix mcp login|logout` (`crate::gateway::oauth`), on this laptop;
//! the browser is opened here (or the address printed when none opens), and the host then
//! reconnects the server (`Request::McpReconnect`), which asks this laptop for the new token.
//! The token never goes to the host except per connection, as for every sign-in.

use reasonix_forward::proto::{McpServerInfo, Request, Response};

use super::exec::Exec;
use crate::gateway::oauth;
use crate::tui::app::AppEvent;

/// The server's URL from its listed transport (`http: URL`, `sse: URL`).
fn server_url(info: &McpServerInfo) -> Option<String> {
    let t = info.transport.as_str();
    t.strip_prefix("http: ")
        .or_else(|| t.strip_prefix("sse: "))
        .map(|u| u.trim().to_string())
}

impl Exec {
    pub(super) fn mcp_sign_in(&self, server: String, logout: bool) {
        let (home, laptop_urls) = {
            let c = self.config();
            let urls: Vec<(String, String)> = c
                .mcp
                .iter()
                .filter(|m| m.runs_on() == crate::config::McpRunOn::Laptop)
                .filter_map(|m| m.url.clone().map(|u| (m.name.clone(), u)))
                .collect();
            (c.home.clone(), urls)
        };
        let client = self.client.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let say = |text: String, error: bool| {
                let _ = tx.send(AppEvent::Permissions { text, error });
            };
            let store = oauth::TokenStore::in_home(&home);
            if logout {
                match store.remove(&server) {
                    Ok(0) => say(format!("not signed in to `{server}`"), false),
                    Ok(n) => say(
                        format!(
                            "signed out of `{server}` ({n} token{} removed)",
                            if n == 1 { "" } else { "s" }
                        ),
                        false,
                    ),
                    Err(e) => return say(format!("/mcp logout {server}: {e}"), true),
                }
            } else {
                let servers = match client
                    .request(Request::McpStatus { laptop: Vec::new() })
                    .await
                {
                    Ok(Response::McpServers { servers }) => servers,
                    Ok(other) => {
                        return say(format!("/mcp login: unexpected answer {other:?}"), true)
                    }
                    Err(e) => return say(format!("/mcp login: listing the servers: {e}"), true),
                };
                let Some(info) = servers.iter().find(|s| s.name == server) else {
                    return say(
                        format!("/mcp login: no MCP server named `{server}` (see /mcp)"),
                        true,
                    );
                };
                // A laptop HTTP server is listed as a channel: its URL is in this config.
                let laptop_url = laptop_urls
                    .iter()
                    .find(|(n, _)| *n == server)
                    .map(|(_, u)| u.clone());
                let Some(url) = laptop_url.or_else(|| server_url(info)) else {
                    return say(
                        format!(
                            "/mcp login: `{server}` is reached by {}, not over HTTP; only HTTP MCP servers sign in",
                            info.transport
                        ),
                        true,
                    );
                };
                let shown = tx.clone();
                let name = server.clone();
                let signed = oauth::login(&store, &server, &url, move |auth_url| {
                    let opened = crate::ports::open_browser(auth_url);
                    let how = match opened {
                        Ok(()) => "a browser was opened; if none shows, open".to_string(),
                        Err(e) => format!("no browser could be opened ({e}); open"),
                    };
                    let _ = shown.send(AppEvent::Permissions {
                        text: format!("sign in to `{name}`: {how} this address:\n{auth_url}"),
                        error: false,
                    });
                })
                .await;
                match signed {
                    Ok(_) => say(
                        format!(
                            "signed in to `{server}` ({url}); token stored on this laptop in {}",
                            store.path().display()
                        ),
                        false,
                    ),
                    Err(e) => return say(format!("signing in to `{server}` failed: {e}"), true),
                }
            }
            match client
                .request(Request::McpReconnect {
                    server: server.clone(),
                })
                .await
            {
                Ok(Response::McpServers { servers }) => {
                    let state = servers
                        .iter()
                        .find(|s| s.name == server)
                        .map(|s| match &s.reason {
                            Some(r) => format!("{}: {r}", s.state),
                            None => format!("{}, {} tool(s)", s.state, s.tools.len()),
                        })
                        .unwrap_or_else(|| "not listed".into());
                    say(format!("MCP server `{server}` reconnected: {state}"), false)
                }
                Ok(other) => say(
                    format!("reconnecting `{server}`: unexpected answer {other:?}"),
                    true,
                ),
                Err(e) => say(format!("reconnecting `{server}`: {e}"), true),
            }
        });
    }
}
