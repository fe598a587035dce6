//! How MCP servers are shown: the plain table of `reasonix mcp list` and the short tool names
//! the `/mcp` panel uses.

use reasonix_forward::proto::McpServerInfo;

/// The tool name as the server knows it: `mcp__time__get_current_time` → `get_current_time`.
/// Names that do not follow the exposed form are returned whole.
pub(crate) fn short_tool(server: &str, exposed: &str) -> String {
    if let Some(rest) = exposed.strip_prefix(&format!("mcp__{server}__")) {
        return rest.to_string();
    }
    // The server part of an exposed name may have been sanitised; cut at its separator.
    match exposed
        .strip_prefix("mcp__")
        .and_then(|r| r.split_once("__"))
    {
        Some((_, tool)) if !tool.is_empty() => tool.to_string(),
        _ => exposed.to_string(),
    }
}

/// The `reasonix mcp list` table: one row per server (name, where it runs, state, tools),
/// a failed server's reason on an indented row below it. Ends with a newline.
pub fn mcp_table(servers: &[McpServerInfo]) -> String {
    if servers.is_empty() {
        return "no MCP servers configured: add [[mcp]] to the workspace's reasonix.toml (or a .mcp.json) for host servers, or [[mcp]] with run_on = \"laptop\" to ~/.reasonix/config.toml for laptop servers\n".to_string();
    }
    let name_w = servers
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0)
        .max("SERVER".len());
    let where_w = "laptop".len().max("WHERE".len());
    let state_w = servers
        .iter()
        .map(|s| s.state.len())
        .max()
        .unwrap_or(0)
        .max("STATE".len());
    let mut out = format!(
        "{:<name_w$}  {:<where_w$}  {:<state_w$}  TOOLS\n",
        "SERVER", "WHERE", "STATE"
    );
    for s in servers {
        let tools = if s.tools.is_empty() {
            "-".to_string()
        } else {
            let names: Vec<String> = s.tools.iter().map(|t| short_tool(&s.name, t)).collect();
            format!("{} ({})", s.tools.len(), names.join(", "))
        };
        out.push_str(&format!(
            "{:<name_w$}  {:<where_w$}  {:<state_w$}  {tools}\n",
            s.name, s.run_on, s.state
        ));
        if let Some(r) = &s.reason {
            out.push_str(&format!("{:name_w$}  reason: {r}\n", ""));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(
        name: &str,
        run_on: &str,
        state: &str,
        reason: Option<&str>,
        tools: &[&str],
    ) -> McpServerInfo {
        McpServerInfo {
            name: name.into(),
            run_on: run_on.into(),
            transport: String::new(),
            state: state.into(),
            reason: reason.map(str::to_string),
            tools: tools.iter().map(|t| t.to_string()).collect(),
        }
    }

    #[test]
    fn short_names_strip_the_exposed_prefix() {
        assert_eq!(
            short_tool("time", "mcp__time__get_current_time"),
            "get_current_time"
        );
        assert_eq!(short_tool("my.srv", "mcp__my_srv__echo"), "echo");
        assert_eq!(short_tool("x", "plain"), "plain");
    }

    #[test]
    fn table_lists_state_reason_and_tools() {
        let t = mcp_table(&[
            info(
                "broken",
                "host",
                "failed",
                Some("could not start `nope`"),
                &[],
            ),
            info(
                "time",
                "host",
                "ready",
                None,
                &["mcp__time__convert_time", "mcp__time__get_current_time"],
            ),
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert!(lines[0].starts_with("SERVER"));
        assert!(lines[1].starts_with("broken  host    failed  -"), "{t}");
        assert!(
            lines[2]
                .trim_start()
                .starts_with("reason: could not start `nope`"),
            "{t}"
        );
        assert!(
            lines[3].contains("2 (convert_time, get_current_time)"),
            "{t}"
        );
        assert!(mcp_table(&[]).starts_with("no MCP servers configured"));
    }
}
