//! docs/TOOL_CONTRACT.md must list every registered tool with its exact canonical schema and
//! read-only flag. Regenerate the generated part with:
//!
//! `REASONIX_BLESS=1 cargo test -p reasonix-remote --test tools_contract`

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::sync::Arc;

use reasonix_remote::tools::{schema_of, Tool, ToolContext, ToolOutput, ToolRegistry};
use serde_json::Value;

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/TOOL_CONTRACT.md");
const BEGIN: &str = "<!-- BEGIN GENERATED TOOL SCHEMAS (tests/tools_contract.rs) -->";
const END: &str = "<!-- END GENERATED TOOL SCHEMAS -->";

fn generated(reg: &ToolRegistry) -> String {
    let mut out = String::new();
    out.push('\n');
    for name in reg.names() {
        let tool = reg.get(name).unwrap();
        let schema = schema_of(tool.as_ref());
        out.push_str(&format!(
            "### `{name}`\n\nread-only: {}\n\n```json\n{}\n```\n\n",
            if tool.read_only() { "yes" } else { "no" },
            serde_json::to_string_pretty(&schema).unwrap()
        ));
    }
    out
}

#[test]
fn doc_matches_registered_schemas() {
    let reg = ToolRegistry::builtin();
    let want = generated(&reg);
    let doc = std::fs::read_to_string(DOC).unwrap_or_default();
    let (Some(b), Some(e)) = (doc.find(BEGIN), doc.find(END)) else {
        panic!("{DOC} lacks the generated-section markers; add\n{BEGIN}\n{END}\nand run REASONIX_BLESS=1 cargo test -p reasonix-remote --test tools_contract");
    };
    let have = &doc[b + BEGIN.len()..e];
    if have != want {
        if std::env::var_os("REASONIX_BLESS").is_some() {
            let new = format!("{}{BEGIN}{want}{}", &doc[..b], &doc[e..]);
            std::fs::write(DOC, new).unwrap();
            return;
        }
        panic!(
            "docs/TOOL_CONTRACT.md has drifted from the registered tool schemas.\n\
             Regenerate it with: REASONIX_BLESS=1 cargo test -p reasonix-remote --test tools_contract\n\
             (then review the diff: a schema change alters the cached prompt prefix)"
        );
    }
    // Belt and braces: every json block parses to exactly the canonical schema of its tool.
    let blocks: Vec<Value> = have
        .split("```json\n")
        .skip(1)
        .map(|s| serde_json::from_str(&s[..s.find("\n```").unwrap()]).unwrap())
        .collect();
    assert_eq!(blocks, reg.schemas());
    for name in [
        "read_file",
        "write_file",
        "edit_file",
        "multi_edit",
        "move_file",
        "ls",
        "glob",
        "grep",
        "bash",
        "bash_output",
        "kill_shell",
        "wait",
        "todo_write",
        "notebook_edit",
        "web_fetch",
        "exit_plan_mode",
        "update_goal",
        "remember",
        "forget",
        "memory",
        "task",
        "read_only_task",
        "parallel_tasks",
        "fleet",
        "read_subagent_result",
        "list_subagents",
    ] {
        assert!(
            doc.contains(&format!("### `{name}`")),
            "{name} missing from the doc"
        );
    }
}

struct Fake(&'static str);

#[async_trait::async_trait]
impl Tool for Fake {
    fn name(&self) -> &'static str {
        self.0
    }
    fn description(&self) -> &'static str {
        "fake"
    }
    fn parameters(&self) -> Value {
        serde_json::json!({"type": "object", "required": ["z"], "properties": {"z": {"type": "string"}, "a": {"type": "integer"}}})
    }
    fn read_only(&self) -> bool {
        true
    }
    async fn run(&self, _args: Value, _ctx: &ToolContext) -> ToolOutput {
        ToolOutput::ok("")
    }
}

#[test]
fn schemas_are_sorted_canonical_and_independent_of_registration_order() {
    let mut a = ToolRegistry::new();
    let mut b = ToolRegistry::new();
    for n in ["zeta", "alpha", "mcp__s__m"] {
        a.register(Arc::new(Fake(n)));
    }
    for n in ["mcp__s__m", "zeta", "alpha"] {
        b.register(Arc::new(Fake(n)));
    }
    let sa = serde_json::to_string(&a.schemas()).unwrap();
    let sb = serde_json::to_string(&b.schemas()).unwrap();
    assert_eq!(sa, sb);
    let names: Vec<&str> = a.names();
    assert_eq!(names, ["alpha", "mcp__s__m", "zeta"]);
    // Keys sorted at every depth.
    assert!(sa.starts_with(r#"[{"function":{"description":"fake","name":"alpha","parameters":{"properties":{"a":{"type":"integer"},"z":{"type":"string"}},"required":["z"],"type":"object"}},"type":"function"}"#), "{sa}");
    let builtin = ToolRegistry::builtin();
    assert_eq!(builtin.schemas().len(), 27);
    assert_eq!(
        serde_json::to_string(&builtin.schemas()).unwrap(),
        serde_json::to_string(&ToolRegistry::builtin().schemas()).unwrap()
    );
}
