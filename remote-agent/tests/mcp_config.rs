//! Loading MCP servers from a workspace (`reasonix.toml` `[[mcp]]`, `.mcp.json`) and `${VAR}`
//! expansion.
#![allow(clippy::unwrap_used)] // tests may unwrap

use std::collections::BTreeMap;

use reasonix_forward::policy::{McpRunOn, McpServerSpec};
use reasonix_remote::mcp::{
    expand_spec, expand_vars, load_workspace_servers, parse_mcp_json, parse_reasonix_toml,
    transport_for_spec, McpError,
};

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let m: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| m.get(k).cloned()
}

#[test]
fn expansion_forms() {
    let e = env(&[("HOME", "/home/u"), ("EMPTY", ""), ("TOKEN", "t0k")]);
    assert_eq!(
        expand_vars("${HOME}/bin", "command", &e).unwrap(),
        "/home/u/bin"
    );
    assert_eq!(expand_vars("${NOPE:-dflt}", "args[0]", &e).unwrap(), "dflt");
    assert_eq!(
        expand_vars("${EMPTY:-dflt}", "args[0]", &e).unwrap(),
        "dflt",
        "empty counts as unset for :-"
    );
    assert_eq!(expand_vars("${EMPTY}", "args[0]", &e).unwrap(), "");
    assert_eq!(expand_vars("${NOPE:-}", "args[0]", &e).unwrap(), "");
    assert_eq!(
        expand_vars("Bearer ${TOKEN} ${HOME:-x}", "headers.A", &e).unwrap(),
        "Bearer t0k /home/u"
    );
    assert_eq!(
        expand_vars("$HOME and $ and {x}", "url", &e).unwrap(),
        "$HOME and $ and {x}"
    );
    assert_eq!(
        expand_vars("${A:-http://h:1/p}", "url", &e).unwrap(),
        "http://h:1/p"
    );
    match expand_vars("x${NOPE}y", "env.KEY", &e) {
        Err(McpError::UnsetVar { var, field }) => {
            assert_eq!((var.as_str(), field.as_str()), ("NOPE", "env.KEY"))
        }
        other => panic!("{other:?}"),
    }
    assert!(expand_vars("${HOME", "command", &e).is_err());
    assert!(expand_vars("${1X}", "command", &e).is_err());
    assert!(expand_vars("${}", "command", &e).is_err());
}

#[test]
fn expand_spec_touches_every_field() {
    let mut s = McpServerSpec::stdio(
        "s",
        "${BIN:-node}",
        &["${DIR}/server.js", "--port=${PORT:-9}"],
    );
    s.env.insert("KEY".into(), "${TOKEN}".into());
    s.url = Some("http://${HOST:-localhost}/mcp".into());
    s.headers
        .insert("Authorization".into(), "Bearer ${TOKEN}".into());
    let out = expand_spec(&s, &env(&[("DIR", "/srv"), ("TOKEN", "abc")])).unwrap();
    assert_eq!(out.command.as_deref(), Some("node"));
    assert_eq!(out.args, ["/srv/server.js", "--port=9"]);
    assert_eq!(out.env["KEY"], "abc");
    assert_eq!(out.url.as_deref(), Some("http://localhost/mcp"));
    assert_eq!(out.headers["Authorization"], "Bearer abc");
    let e = expand_spec(&s, &env(&[])).unwrap_err().to_string();
    assert!(e.contains("`DIR`") && e.contains("args[0]"), "{e}");
}

#[test]
fn workspace_files_merge_with_toml_winning() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("reasonix.toml"),
        r#"
default_model = "x"            # other keys of the file are not ours

[[mcp]]
name = "time"
command = "mcp-server-time"
timeout_seconds = 20
tool_timeouts = { get_current_time = 5 }

[[mcp]]
name = "remote"
url = "http://127.0.0.1:9/mcp"
headers = { Authorization = "Bearer ${TOKEN:-none}" }
run_on = "laptop"
"#,
    )
    .unwrap();
    std::fs::write(
        d.path().join(".mcp.json"),
        r#"{"mcpServers": {
            "time": {"command": "python3", "args": ["-m", "mcp_server_time"]},
            "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "env": {"A": "1", "N": 2}},
            "web": {"type": "http", "url": "http://localhost:3001/mcp", "headers": {"X-Key": "${KEY}"}},
            "old": {"type": "sse", "url": "http://localhost:1/sse"},
            "ws": {"type": "websocket", "url": "ws://localhost:1/"}
        }}"#,
    )
    .unwrap();
    let cfg = load_workspace_servers(d.path()).unwrap();
    let names: Vec<&str> = cfg.servers.iter().map(|s| s.name.as_str()).collect();
    // The TOML's servers first, in its order; then the JSON file's, whose order is the map's
    // (sorted, or as written when a workspace build enables serde_json's `preserve_order`).
    assert_eq!(names[..2], ["time", "remote"]);
    let mut rest = names[2..].to_vec();
    rest.sort_unstable();
    assert_eq!(rest, ["everything", "old", "web"]);
    let old = cfg.servers.iter().find(|s| s.name == "old").unwrap();
    assert_eq!(
        old.transport,
        Some(reasonix_forward::policy::McpTransportKind::Sse)
    );
    let time = &cfg.servers[0];
    assert_eq!(
        time.command.as_deref(),
        Some("mcp-server-time"),
        "reasonix.toml wins"
    );
    assert_eq!(time.timeout_seconds, Some(20));
    assert_eq!(time.tool_timeouts["get_current_time"], 5);
    // A workspace cannot place a server on the laptop.
    assert_eq!(cfg.servers[1].run_on, Some(McpRunOn::Host));
    assert!(
        cfg.warnings
            .iter()
            .any(|w| w.contains("remote") && w.contains("runs on the host")),
        "{:?}",
        cfg.warnings
    );
    assert!(
        cfg.warnings
            .iter()
            .any(|w| w.contains("ws") && w.contains("websocket")),
        "{:?}",
        cfg.warnings
    );
    let by_name = |n: &str| cfg.servers.iter().find(|s| s.name == n).unwrap();
    let every = by_name("everything");
    assert_eq!(
        every.args,
        ["-y", "@modelcontextprotocol/server-everything"]
    );
    assert_eq!(every.env["N"], "2");
    let web = by_name("web");
    assert_eq!(web.url.as_deref(), Some("http://localhost:3001/mcp"));
    assert_eq!(
        web.headers["X-Key"], "${KEY}",
        "expanded at start, not at load"
    );

    // Nothing there: no servers, no error.
    let empty = tempfile::tempdir().unwrap();
    assert_eq!(
        load_workspace_servers(empty.path()).unwrap().servers.len(),
        0
    );
}

#[test]
fn unknown_key_in_a_workspace_entry_is_refused_naming_file_line_and_key() {
    // The same rule as the laptop's loader: an `[[mcp]]` entry has exactly the keys of
    // `McpServerSpec`, so a typo is an error, not a silently dropped setting.
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("reasonix.toml"),
        "[[mcp]]\nname = \"time\"\ncommand = \"mcp-server-time\"\ntimeout_secs = 5\n",
    )
    .unwrap();
    let e = load_workspace_servers(d.path()).unwrap_err().to_string();
    let file = d.path().join("reasonix.toml").display().to_string();
    assert!(e.contains(&file), "names the file: {e}");
    assert!(e.contains("line 4"), "names the line: {e}");
    assert!(
        e.contains("unknown field `timeout_secs`"),
        "names the key: {e}"
    );
    assert!(e.contains("`timeout_seconds`"), "lists the known keys: {e}");
    assert!(!e.contains('\n'), "one line: {e}");
    assert_eq!(e.matches("MCP config").count(), 1, "{e}");

    // Other tables of the file are not the MCP loader's business.
    std::fs::write(
        d.path().join("reasonix.toml"),
        "default_model = \"x\"\n[agent]\nmax_steps = 3\n[[mcp]]\nname = \"t\"\ncommand = \"c\"\n",
    )
    .unwrap();
    assert_eq!(load_workspace_servers(d.path()).unwrap().servers.len(), 1);

    // `.mcp.json` is Claude Code's schema, converted by hand: its extra keys are tolerated.
    std::fs::remove_file(d.path().join("reasonix.toml")).unwrap();
    std::fs::write(
        d.path().join(".mcp.json"),
        r#"{"mcpServers": {"t": {"type": "stdio", "command": "c", "disabled": false, "alwaysAllow": []}}, "other": 1}"#,
    )
    .unwrap();
    let cfg = load_workspace_servers(d.path()).unwrap();
    assert_eq!(cfg.servers.len(), 1);
    assert_eq!(cfg.servers[0].run_on, Some(McpRunOn::Host));
}

#[test]
fn invalid_entries_are_errors() {
    let e = parse_reasonix_toml("[[mcp]]\nname = \"x\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs `command`"), "{e}");
    let e = parse_reasonix_toml("[[mcp]]\nname = \"x\"\ncommand = \"a\"\nurl = \"http://h/\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("both"), "{e}");
    assert!(parse_mcp_json(r#"{"mcpServers": {"x": {"args": []}}}"#).is_err());
    assert!(parse_mcp_json(r#"{"mcpServers": []}"#).is_err());
    assert_eq!(parse_mcp_json(r#"{"other": 1}"#).unwrap().0.len(), 0);
    // An https server cannot be reached from the host build; the error says what to do.
    let spec = McpServerSpec::http("s", "https://example.org/mcp");
    let e = transport_for_spec(&spec, std::path::Path::new("/"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("https is not supported") && e.contains("laptop"),
        "{e}"
    );
}
