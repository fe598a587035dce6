//! MCP prompts as slash commands (`/mcp__<server>__<prompt> args`) and MCP resources as
//! `@<server>:<uri>` attachments, expanded on the host so every client behaves the same.
//!
//! Arguments map by `key=value` (a declared argument's name) and by position, in the
//! prompt's declared order, for the arguments no `key=value` gave; `"a b"` is one argument.
//! The prompt's messages become the user turn's text: text content verbatim, embedded text
//! resources with their URI, images and audio as one line saying they are not shown (the
//! turn is text only). Resources are read with `resources/read` and bounded like `@path`
//! file attachments.

use std::sync::Arc;
use std::time::Duration;

use reasonix_forward::proto::{
    Attachment, McpPromptArgument, McpPromptEntry, McpResourceEntry, MCP_RESOURCES_MAX,
};
use serde_json::{Map, Value};

use super::client::{content_text, McpPromptInfo};
use super::manager::McpManager;
use super::tool::sanitize_name;

/// How long listing, getting a prompt or reading a resource may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest resource text attached (the bound of `@path` files).
pub const MAX_RESOURCE_BYTES: usize = 64 * 1024;
/// Most resources attached to one prompt.
const MAX_RESOURCES: usize = 4;
/// Prefix of an attachment path that marks an MCP resource (`mcp:<server>:<uri>`).
pub const RESOURCE_PREFIX: &str = "mcp:";

/// The slash command name of a server's prompt: `mcp__<server>__<prompt>`, sanitised.
pub fn command_name(server: &str, prompt: &str) -> String {
    format!("mcp__{}__{}", sanitize_name(server), sanitize_name(prompt))
}

/// True when `text` is an MCP prompt command or may hold an `@server:uri` mention (cheap;
/// lets plain prompts skip the MCP servers).
pub fn may_use_mcp(text: &str) -> bool {
    text.trim_start().starts_with("/mcp__")
        || text
            .split_whitespace()
            .any(|w| w.starts_with('@') && w.contains(':') && !w.starts_with("@term:"))
}

/// Every prompt of every server of `managers` (started when needed; servers without the
/// `prompts` capability list none), sorted by command, with the servers that failed.
pub async fn list_prompts(managers: &[Arc<McpManager>]) -> (Vec<McpPromptEntry>, Vec<String>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for (server, found) in all_prompts(managers).await {
        match found {
            Ok(prompts) => out.extend(prompts.into_iter().map(|p| entry(&server, p))),
            Err(e) => problems.push(format!("MCP server `{server}`: {e}")),
        }
    }
    reasonix_forward::sort::sort_by(&mut out, |a, b| a.command.cmp(&b.command));
    out.dedup_by(|a, b| a.command == b.command);
    (out, problems)
}

fn entry(server: &str, p: McpPromptInfo) -> McpPromptEntry {
    McpPromptEntry {
        command: command_name(server, &p.name),
        server: server.to_string(),
        name: p.name,
        description: p.description,
        arguments: p
            .arguments
            .into_iter()
            .map(|a| McpPromptArgument {
                name: a.name,
                description: a.description,
                required: a.required,
            })
            .collect(),
    }
}

type Listed = Vec<(String, Result<Vec<McpPromptInfo>, String>)>;

async fn all_prompts(managers: &[Arc<McpManager>]) -> Listed {
    let mut out = Vec::new();
    for m in managers {
        for server in m.server_names() {
            let listed = match m.client_of(&server).await {
                Some(Ok(client)) => client
                    .list_prompts(REQUEST_TIMEOUT)
                    .await
                    .map_err(|e| e.to_string()),
                Some(Err(e)) => Err(e.to_string()),
                None => continue,
            };
            out.push((server, listed));
        }
    }
    out
}

/// `/mcp__<server>__<prompt> args` expanded to the prompt's text; `None` when `text` is not
/// such a command of a known server prompt (`/mcp__` with an unknown name is an error that
/// lists the prompts). The error names a missing required argument and the prompt's
/// arguments.
pub async fn expand_command(
    managers: &[Arc<McpManager>],
    text: &str,
) -> Option<Result<String, String>> {
    let rest = text.trim_start().strip_prefix("/mcp__")?;
    let (name, args) = match rest.split_once(char::is_whitespace) {
        Some((n, a)) => (n, a.trim()),
        None => (rest, ""),
    };
    let command = format!("mcp__{name}");
    let mut known = Vec::new();
    for m in managers {
        for server in m.server_names() {
            let Some(Ok(client)) = m.client_of(&server).await else {
                continue;
            };
            let Ok(prompts) = client.list_prompts(REQUEST_TIMEOUT).await else {
                continue;
            };
            for p in prompts {
                let cmd = command_name(&server, &p.name);
                if cmd != command {
                    known.push(format!("/{cmd}"));
                    continue;
                }
                let arguments = match map_arguments(&p, args) {
                    Ok(a) => a,
                    Err(e) => return Some(Err(format!("/{cmd}: {e}"))),
                };
                return Some(
                    match client.get_prompt(&p.name, arguments, REQUEST_TIMEOUT).await {
                        Ok(messages) => Ok(messages_text(&messages)),
                        Err(e) => Err(format!(
                            "/{cmd}: MCP server `{server}` refused the prompt: {e}"
                        )),
                    },
                );
            }
        }
    }
    reasonix_forward::sort::sort(&mut known);
    Some(Err(if known.is_empty() {
        format!("unknown MCP prompt /{command}; no MCP server offers prompts")
    } else {
        format!(
            "unknown MCP prompt /{command}; MCP prompts: {}",
            known.join(" ")
        )
    }))
}

/// Words of `args`, `"a b"` (or `'a b'`) being one word (the same split as custom commands).
pub use reasonix_forward::command_files::split_args;

fn synopsis(p: &McpPromptInfo) -> String {
    if p.arguments.is_empty() {
        return "it takes no arguments".into();
    }
    let names: Vec<String> = p
        .arguments
        .iter()
        .map(|a| {
            if a.required {
                format!("{} (required)", a.name)
            } else {
                a.name.clone()
            }
        })
        .collect();
    format!("its arguments: {}", names.join(", "))
}

/// The `prompts/get` arguments of `args`: `key=value` for a declared name, the other words
/// by position in declared order.
pub fn map_arguments(p: &McpPromptInfo, args: &str) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    let mut positional = Vec::new();
    for word in split_args(args) {
        match word.split_once('=') {
            Some((k, v)) if p.arguments.iter().any(|a| a.name == k) => {
                out.insert(k.to_string(), Value::String(v.to_string()));
            }
            _ => positional.push(word),
        }
    }
    let mut free = p
        .arguments
        .iter()
        .filter(|a| !out.contains_key(&a.name))
        .map(|a| a.name.clone())
        .collect::<Vec<_>>()
        .into_iter();
    for word in positional {
        let Some(name) = free.next() else {
            return Err(format!(
                "too many arguments (`{word}` is left over); {}",
                synopsis(p)
            ));
        };
        out.insert(name, Value::String(word));
    }
    let missing: Vec<&str> = p
        .arguments
        .iter()
        .filter(|a| a.required && !out.contains_key(&a.name))
        .map(|a| a.name.as_str())
        .collect();
    if !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(|m| format!("`{m}`")).collect();
        return Err(format!(
            "missing required argument {}; {}",
            list.join(", "),
            synopsis(p)
        ));
    }
    Ok(out)
}

/// The prompt's messages as one user text: each message's content as text, an assistant
/// message marked as such, messages apart by a blank line.
pub fn messages_text(messages: &[Value]) -> String {
    let mut parts = Vec::new();
    for m in messages {
        let items: Vec<Value> = match m.get("content") {
            Some(Value::Array(a)) => a.clone(),
            Some(v @ Value::Object(_)) => vec![v.clone()],
            _ => continue,
        };
        let text = content_text(&items);
        if m.get("role").and_then(Value::as_str) == Some("assistant") {
            parts.push(format!("[assistant]\n{text}"));
        } else {
            parts.push(text);
        }
    }
    parts.join("\n\n")
}

/// The first resources of server `name` (for completion); `Err` names an unknown server.
pub async fn list_resources(
    managers: &[Arc<McpManager>],
    name: &str,
) -> Result<Vec<McpResourceEntry>, String> {
    for m in managers {
        let Some(client) = m.client_of(name).await else {
            continue;
        };
        let client = client.map_err(|e| format!("MCP server `{name}`: {e}"))?;
        return client
            .list_resources(MCP_RESOURCES_MAX, REQUEST_TIMEOUT)
            .await
            .map(|list| {
                list.into_iter()
                    .map(|r| McpResourceEntry {
                        uri: r.uri,
                        name: r.name,
                        description: r.description,
                    })
                    .collect()
            })
            .map_err(|e| format!("MCP server `{name}`: {e}"));
    }
    Err(format!("no MCP server `{name}`"))
}

/// `@<server>:<uri>` mentions in `text` read as attachments (path `mcp:<server>:<uri>`),
/// with a notice for each one that could not be read. A word is such a mention when the part
/// before the first `:` is shaped like a server name and the rest is not empty; `@term:N`
/// is a terminal screen, not a resource.
pub async fn resolve_resources(
    managers: &[Arc<McpManager>],
    text: &str,
) -> (Vec<Attachment>, Vec<String>) {
    let mut out: Vec<Attachment> = Vec::new();
    let mut notices = Vec::new();
    let servers: Vec<String> = managers.iter().flat_map(|m| m.server_names()).collect();
    for word in text.split_whitespace() {
        let Some((server, uri)) = word.strip_prefix('@').and_then(|w| w.split_once(':')) else {
            continue;
        };
        let uri = uri.trim_end_matches([',', ';', '!', '?', ')', '\'', '"']);
        let shaped = !server.is_empty()
            && server
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !shaped || uri.is_empty() || format!("{server}:") == crate::pty::mention::TERM_PREFIX {
            continue;
        }
        let path = format!("{RESOURCE_PREFIX}{server}:{uri}");
        if out.iter().any(|a| a.path == path) {
            continue;
        }
        if out.len() == MAX_RESOURCES {
            notices.push(format!(
                "@{server}:{uri} not attached: at most {MAX_RESOURCES} MCP resources per prompt"
            ));
            continue;
        }
        let mut client = None;
        for m in managers {
            if let Some(c) = m.client_of(server).await {
                client = Some(c);
                break;
            }
        }
        let client = match client {
            None => {
                notices.push(format!(
                    "@{server}:{uri} not attached: no MCP server `{server}`{}",
                    if servers.is_empty() {
                        " (no MCP servers are configured)".to_string()
                    } else {
                        format!(" (servers: {})", servers.join(", "))
                    }
                ));
                continue;
            }
            Some(Err(e)) => {
                notices.push(format!("@{server}:{uri} not attached: {e}"));
                continue;
            }
            Some(Ok(c)) => c,
        };
        match client.read_resource(uri, REQUEST_TIMEOUT).await {
            Ok(contents) => {
                let mut content = resource_text(&contents);
                let truncated = content.len() > MAX_RESOURCE_BYTES;
                if truncated {
                    let mut end = MAX_RESOURCE_BYTES;
                    while !content.is_char_boundary(end) {
                        end -= 1;
                    }
                    content.truncate(end);
                }
                out.push(Attachment {
                    path,
                    content,
                    truncated,
                });
            }
            Err(e) => notices.push(format!(
                "@{server}:{uri} not attached: MCP server `{server}` could not read it: {e}"
            )),
        }
    }
    (out, notices)
}

/// `resources/read` contents as text: text items verbatim, binary ones described.
fn resource_text(contents: &[Value]) -> String {
    let parts: Vec<String> = contents
        .iter()
        .map(|c| match c.get("text").and_then(Value::as_str) {
            Some(t) => t.to_string(),
            None => {
                let mime = c.get("mimeType").and_then(Value::as_str).unwrap_or("?");
                let len = c.get("blob").and_then(Value::as_str).map_or(0, str::len);
                format!("[binary {mime}, {len} bytes of base64 not shown]")
            }
        })
        .collect();
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::client::McpPromptArg;

    fn prompt() -> McpPromptInfo {
        let arg = |n: &str, required| McpPromptArg {
            name: n.into(),
            description: String::new(),
            required,
        };
        McpPromptInfo {
            name: "args-prompt".into(),
            description: String::new(),
            arguments: vec![arg("city", true), arg("state", false)],
        }
    }

    #[test]
    fn arguments_by_key_and_position() {
        let p = prompt();
        let got = map_arguments(&p, "state=TX \"San Antonio\"").expect("ok");
        assert_eq!(got["city"], "San Antonio");
        assert_eq!(got["state"], "TX");
        let got = map_arguments(&p, "Paris").expect("ok");
        assert_eq!(got.len(), 1);
        let e = map_arguments(&p, "state=TX").expect_err("missing");
        assert!(
            e.contains("`city`") && e.contains("city (required), state"),
            "{e}"
        );
        let e = map_arguments(&p, "a b c").expect_err("too many");
        assert!(e.contains("`c` is left over"), "{e}");
    }

    #[test]
    fn only_mcp_looking_text_waits_for_servers() {
        assert!(may_use_mcp("  /mcp__srv__p a"));
        assert!(may_use_mcp("read @srv:x://y please"));
        assert!(!may_use_mcp("see @term:1 and @src/lib.rs"));
        assert!(!may_use_mcp("/help mcp__x"));
    }

    #[test]
    fn messages_become_text() {
        let m = serde_json::json!([
            {"role": "user", "content": {"type": "text", "text": "hello"}},
            {"role": "user", "content": {"type": "resource", "resource": {"uri": "x://1", "text": "body"}}},
            {"role": "assistant", "content": {"type": "image", "mimeType": "image/png", "data": "AAAA"}}
        ]);
        let t = messages_text(m.as_array().expect("array"));
        assert_eq!(
            t,
            "hello\n\n[resource x://1]\nbody\n\n[assistant]\n[image image/png, 4 bytes of base64 not shown]"
        );
    }
}
