//! `Request::McpReconnect` (#35 §3): after `/mcp login` or `/mcp logout` on the laptop, the
//! session's connection to the server is dropped and made again, so an HTTP server that
//! needs sign-in gets the new token (asked of the laptop per connection) without a new
//! session. A server whose start failed for want of a sign-in never listed its tools; when
//! it lists them now they join the session (a declared change of the tool schemas: the next
//! request starts a new prompt cache, and a notice says so).

use super::*;

impl Session {
    /// Reconnects MCP server `server` (a workspace server first, else a laptop one) and
    /// returns every server's state after it; `Err` names an unknown server.
    pub async fn mcp_reconnect(
        &self,
        server: &str,
    ) -> Result<Vec<crate::mcp::McpServerStatus>, String> {
        let managers = self.mcp_managers().await;
        let mut found = false;
        for m in &managers {
            if m.reconnect(server).await {
                found = true;
                break;
            }
        }
        if !found {
            return Err(format!("this session has no MCP server named `{server}`"));
        }
        self.adopt_late_mcp_tools(server);
        let mut status = self.workspace_mcp.status();
        status.extend(self.laptop_mcp_status().await);
        Ok(status)
    }

    /// Adds the workspace MCP tools the session does not have yet (a server that listed
    /// them only now) and rebuilds the tool part of the prefix; the system prompt is kept.
    fn adopt_late_mcp_tools(&self, server: &str) {
        let known: std::collections::HashSet<String> = self.tool_names().into_iter().collect();
        let fresh: Vec<_> = self
            .workspace_mcp
            .tools()
            .into_iter()
            .filter(|t| !known.contains(crate::tools::Tool::name(t.as_ref())))
            .collect();
        if fresh.is_empty() {
            return;
        }
        let n = fresh.len();
        let mut late = self
            .late_tools
            .lock_or_recover()
            .as_deref()
            .cloned()
            .unwrap_or_default();
        for t in fresh {
            late.register(t);
        }
        let mut schemas = self.tools.schemas();
        if let Some(laptop) = self.laptop_tools.lock_or_recover().clone() {
            schemas.extend(laptop.schemas());
        }
        schemas.extend(late.schemas());
        reasonix_forward::sort::sort_by(&mut schemas, |a, b| {
            a["function"]["name"]
                .as_str()
                .unwrap_or("")
                .cmp(b["function"]["name"].as_str().unwrap_or(""))
        });
        *self.late_tools.lock_or_recover() = Some(Arc::new(late));
        {
            let mut conv = self.main.lock_or_recover();
            let mut prefix = (*conv.prefix).clone();
            prefix.tools_hash =
                crate::agent::short_hash(&serde_json::to_vec(&schemas).unwrap_or_default());
            prefix.tools = schemas;
            conv.prefix = Arc::new(prefix);
        }
        self.record(EventKind::Notice {
            text: format!(
                "MCP server `{server}` is connected now: its {n} tool(s) join this session (the tool list changed, so the next request starts a new prompt cache)"
            ),
        });
    }
}
