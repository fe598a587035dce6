//! Server declarations: `[[mcp]]` in a workspace `reasonix.toml`, `mcpServers` in `.mcp.json`
//! (Claude Code's schema), and `${VAR}` / `${VAR:-default}` expansion.

use std::collections::BTreeMap;
use std::path::Path;

use reasonix_forward::policy::{McpRunOn, McpServerSpec};
use serde::Deserialize;
use serde_json::Value;

use super::McpError;

/// The servers a workspace declares, with notes about entries that were adjusted or skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpConfig {
    /// Servers, `reasonix.toml` entries first, then `.mcp.json` ones not shadowed.
    pub servers: Vec<McpServerSpec>,
    /// One line per ignored or adjusted entry, for the log and `/mcp`.
    pub warnings: Vec<String>,
}

/// Reads `<workspace>/reasonix.toml` (`[[mcp]]`) and `<workspace>/.mcp.json`; either may be
/// missing. On a name clash the `reasonix.toml` entry wins. Workspace servers always run on
/// the host: a `run_on = "laptop"` here is turned into `host` with a warning (a project must
/// not start programs on the user's laptop).
pub fn load_workspace_servers(workspace: &Path) -> Result<McpConfig, McpError> {
    let mut warnings = Vec::new();
    let toml_path = workspace.join("reasonix.toml");
    let from_toml = match std::fs::read_to_string(&toml_path) {
        Ok(text) => parse_reasonix_toml(&text).map_err(|e| in_file(&toml_path, e))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(McpError::Config(format!("{}: {e}", toml_path.display()))),
    };
    let json_path = workspace.join(".mcp.json");
    let from_json = match std::fs::read_to_string(&json_path) {
        Ok(text) => {
            let (servers, w) = parse_mcp_json(&text).map_err(|e| in_file(&json_path, e))?;
            warnings.extend(w.into_iter().map(|w| format!(".mcp.json: {w}")));
            servers
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(McpError::Config(format!("{}: {e}", json_path.display()))),
    };
    let mut servers = merge_servers(from_toml, from_json);
    for s in &mut servers {
        if s.run_on == Some(McpRunOn::Laptop) {
            warnings.push(format!(
                "server `{}`: run_on = \"laptop\" is ignored in a workspace file; it runs on the host",
                s.name
            ));
        }
        s.run_on = Some(McpRunOn::Host);
    }
    Ok(McpConfig { servers, warnings })
}

/// A config error of the file at `path`, naming it (`<path>: <what>`).
fn in_file(path: &Path, e: McpError) -> McpError {
    match e {
        McpError::Config(m) => McpError::Config(format!("{}: {m}", path.display())),
        other => McpError::Config(format!("{}: {other}", path.display())),
    }
}

/// `[[mcp]]` entries of a `reasonix.toml` (other tables are read elsewhere and ignored here).
/// An entry's keys are those of [`McpServerSpec`]; an unknown one is an error naming the key
/// and its line, as the laptop's config loader refuses it. `run_on` is left as written (unset
/// means the host; [`load_workspace_servers`] sets it).
pub fn parse_reasonix_toml(text: &str) -> Result<Vec<McpServerSpec>, McpError> {
    #[derive(Deserialize)]
    struct File {
        #[serde(default)]
        mcp: Vec<McpServerSpec>,
    }
    let f: File = toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
            .unwrap_or(1);
        McpError::Config(format!("line {line}: {}", e.message().trim()))
    })?;
    for s in &f.mcp {
        check_spec(s)?;
    }
    Ok(f.mcp)
}

/// Servers of a `.mcp.json`: `{"mcpServers": {"name": {"command","args","env"}}}` for stdio,
/// `{"type": "http", "url", "headers"}` for Streamable HTTP, `{"type": "sse", …}` for the
/// older HTTP+SSE transport. Entries of other types are skipped with a warning.
pub fn parse_mcp_json(text: &str) -> Result<(Vec<McpServerSpec>, Vec<String>), McpError> {
    let v: Value = serde_json::from_str(text).map_err(|e| McpError::Config(e.to_string()))?;
    let Some(map) = v.get("mcpServers") else {
        return Ok((Vec::new(), Vec::new()));
    };
    let map = map
        .as_object()
        .ok_or_else(|| McpError::Config("`mcpServers` must be an object".into()))?;
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for (name, entry) in map {
        let kind =
            entry
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or(if entry.get("url").is_some() {
                    "http"
                } else {
                    "stdio"
                });
        let strings = |key: &str| -> Result<BTreeMap<String, String>, McpError> {
            match entry.get(key) {
                None | Some(Value::Null) => Ok(BTreeMap::new()),
                Some(Value::Object(m)) => m
                    .iter()
                    .map(|(k, v)| match v {
                        Value::String(s) => Ok((k.clone(), s.clone())),
                        other => Ok((k.clone(), other.to_string())),
                    })
                    .collect(),
                Some(_) => Err(McpError::Config(format!(
                    "server `{name}`: `{key}` must be an object"
                ))),
            }
        };
        let mut spec = McpServerSpec::named(name.clone());
        match kind {
            "stdio" => {
                spec.command = Some(
                    entry
                        .get("command")
                        .and_then(Value::as_str)
                        .ok_or_else(|| {
                            McpError::Config(format!("server `{name}`: missing `command`"))
                        })?
                        .to_string(),
                );
                spec.args = match entry.get("args") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(a)) => a
                        .iter()
                        .map(|x| {
                            x.as_str()
                                .map(str::to_string)
                                .unwrap_or_else(|| x.to_string())
                        })
                        .collect(),
                    Some(_) => {
                        return Err(McpError::Config(format!(
                            "server `{name}`: `args` must be a list"
                        )))
                    }
                };
                spec.env = strings("env")?;
            }
            "http" | "streamable-http" | "streamableHttp" | "sse" => {
                if kind == "sse" {
                    spec.transport = Some(reasonix_forward::policy::McpTransportKind::Sse);
                }
                spec.url = Some(
                    entry
                        .get("url")
                        .and_then(Value::as_str)
                        .ok_or_else(|| McpError::Config(format!("server `{name}`: missing `url`")))?
                        .to_string(),
                );
                spec.headers = strings("headers")?;
            }
            other => {
                warnings.push(format!(
                    "server `{name}`: transport type `{other}` is not supported; skipped"
                ));
                continue;
            }
        }
        out.push(spec);
    }
    Ok((out, warnings))
}

/// `primary` plus the entries of `secondary` whose names `primary` does not use.
pub fn merge_servers(
    primary: Vec<McpServerSpec>,
    secondary: Vec<McpServerSpec>,
) -> Vec<McpServerSpec> {
    let mut out = primary;
    for s in secondary {
        if !out.iter().any(|p| p.name == s.name) {
            out.push(s);
        }
    }
    out
}

fn check_spec(s: &McpServerSpec) -> Result<(), McpError> {
    if s.name.trim().is_empty() {
        return Err(McpError::Config(
            "an [[mcp]] entry has an empty `name`".into(),
        ));
    }
    use reasonix_forward::policy::McpTransportKind as K;
    match (&s.command, &s.url, s.transport) {
        (Some(_), None, Some(K::Http | K::Sse)) => Err(McpError::Config(format!(
            "server `{}`: `type = \"http\"` / `\"sse\"` needs a `url`, not a `command`",
            s.name
        ))),
        (None, Some(_), Some(K::Stdio)) => Err(McpError::Config(format!(
            "server `{}`: `type = \"stdio\"` needs a `command`, not a `url`",
            s.name
        ))),
        (Some(_), None, _) | (None, Some(_), _) => Ok(()),
        (Some(_), Some(_), _) => Err(McpError::Config(format!(
            "server `{}` sets both `command` and `url`; keep one",
            s.name
        ))),
        (None, None, _) => Err(McpError::Config(format!(
            "server `{}` needs `command` (stdio) or `url` (HTTP)",
            s.name
        ))),
    }
}

/// Expands `${VAR}` and `${VAR:-default}` in `input`. `lookup` answers a variable's value;
/// `:-default` applies when it is unset or empty (as in the shell). An unset variable without a
/// default is an error naming `field`. Text without `${` is returned unchanged; `$` alone is
/// literal.
pub fn expand_vars(
    input: &str,
    field: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, McpError> {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| McpError::Config(format!("{field}: unterminated `${{` in `{input}`")))?;
        let inner = &after[..end];
        let (var, default) = match inner.split_once(":-") {
            Some((v, d)) => (v, Some(d)),
            None => (inner, None),
        };
        let valid = !var.is_empty()
            && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !var.starts_with(|c: char| c.is_ascii_digit());
        if !valid {
            return Err(McpError::Config(format!(
                "{field}: `${{{inner}}}` is not a valid variable reference"
            )));
        }
        let value = match (lookup(var), default) {
            (Some(v), Some(d)) if v.is_empty() => d.to_string(),
            (Some(v), _) => v,
            (None, Some(d)) => d.to_string(),
            (None, None) => {
                return Err(McpError::UnsetVar {
                    var: var.to_string(),
                    field: field.to_string(),
                })
            }
        };
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `spec` with variables expanded in `command`, `args`, `env` values, `url` and `headers`
/// values.
pub fn expand_spec(
    spec: &McpServerSpec,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<McpServerSpec, McpError> {
    let mut s = spec.clone();
    if let Some(c) = &spec.command {
        s.command = Some(expand_vars(c, "command", lookup)?);
    }
    s.args = spec
        .args
        .iter()
        .enumerate()
        .map(|(i, a)| expand_vars(a, &format!("args[{i}]"), lookup))
        .collect::<Result<_, _>>()?;
    s.env = spec
        .env
        .iter()
        .map(|(k, v)| Ok((k.clone(), expand_vars(v, &format!("env.{k}"), lookup)?)))
        .collect::<Result<_, McpError>>()?;
    if let Some(u) = &spec.url {
        s.url = Some(expand_vars(u, "url", lookup)?);
    }
    s.headers = spec
        .headers
        .iter()
        .map(|(k, v)| Ok((k.clone(), expand_vars(v, &format!("headers.{k}"), lookup)?)))
        .collect::<Result<_, McpError>>()?;
    Ok(s)
}
