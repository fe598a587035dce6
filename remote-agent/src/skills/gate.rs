//! What a running skill allows: its `allowed-tools` and `read-only` narrow the session's
//! tools for the turn it runs in. The gate only refuses, before the policy is asked; what
//! it lets through still goes to the session's policy (mode, rules, sandbox, write paths),
//! so a skill can never allow what the session would refuse. The tool schemas sent to the
//! model stay the same (the cached prefix is untouched); a refused call is a tool error
//! that names the skill.

use reasonix_forward::proto::ReasoningEffort;
use serde_json::Value;

use crate::policy::Decision;

/// The skill the current turn runs, as the session keeps it until the next user turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillTurn {
    /// Skill name (without `/`).
    pub name: String,
    /// Tools it narrows to (`None`: every tool of the session).
    pub allowed_tools: Option<Vec<String>>,
    /// Only read-only tools, bash in a read-only sandbox (as plan mode).
    pub read_only: bool,
    /// The model for this turn (already checked against the user's configured models).
    pub model: Option<String>,
    /// The reasoning effort for this turn.
    pub effort: Option<ReasoningEffort>,
}

/// Tools that change nothing and any skill may use.
const ALWAYS: &[&str] = &["todo_write"];

/// The names other agents' skill files use for our tools.
fn alias(name: &str) -> &str {
    match name {
        "Read" => "read_file",
        "Write" => "write_file",
        "Edit" => "edit_file",
        "MultiEdit" => "multi_edit",
        "Grep" => "grep",
        "Glob" => "glob",
        "LS" => "ls",
        "Bash" => "bash",
        "WebFetch" => "web_fetch",
        "TodoWrite" => "todo_write",
        "NotebookEdit" => "notebook_edit",
        other => other,
    }
}

/// True when `tool` is among `allowed` (names, Claude-style names such as `Read` or
/// `Bash(git diff:*)` — the part in parentheses is ignored, the policy decides commands —
/// and globs with `*`). Allowing `bash` allows its background helpers too.
pub fn allows(allowed: &[String], tool: &str) -> bool {
    if ALWAYS.contains(&tool) {
        return true;
    }
    let tool_base = match tool {
        "bash_output" | "kill_shell" | "wait" => "bash",
        t => t,
    };
    allowed.iter().any(|entry| {
        let entry = entry.split('(').next().unwrap_or("").trim();
        let entry = alias(entry);
        glob(entry, tool) || glob(entry, tool_base)
    })
}

/// `pattern` with at most one `*` (any run of characters) against `name`.
fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((pre, post)) => {
            name.len() >= pre.len() + post.len() && name.starts_with(pre) && name.ends_with(post)
        }
    }
}

/// The skill's verdict on `tool` with `args`: `Some(Deny)` refuses it before the policy is
/// asked; `None` leaves it to the policy (and plan mode). `read_only`: the tool says it
/// only reads; `sandboxed`: bash runs confined (read-only under a read-only skill).
pub fn decide(
    turn: &SkillTurn,
    tool: &str,
    args: &Value,
    read_only: bool,
    sandboxed: bool,
) -> Option<Decision> {
    if let Some(allowed) = &turn.allowed_tools {
        if !allows(allowed, tool) {
            let list = if allowed.is_empty() {
                "no tools".to_string()
            } else {
                allowed.join(", ")
            };
            return Some(Decision::Deny {
                reason: format!(
                    "the skill /{} allows only {list} (its `allowed-tools`); `{tool}` is not among them. \
                     Do the task with those tools",
                    turn.name
                ),
            });
        }
    }
    if turn.read_only {
        return crate::plan::gate::decide(tool, args, read_only, sandboxed).map(|d| match d {
            Decision::Deny { reason } => Decision::Deny {
                reason: format!(
                    "the skill /{} is read-only: {}",
                    turn.name,
                    reason
                        .trim_start_matches("plan mode: ")
                        .replace(", and nothing changes before the user approves a plan", "")
                        .replace(", and nothing writes before the user approves a plan", "")
                ),
            },
            other => other,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn turn(allowed: Option<&[&str]>, read_only: bool) -> SkillTurn {
        SkillTurn {
            name: "s".into(),
            allowed_tools: allowed.map(|a| a.iter().map(|s| s.to_string()).collect()),
            read_only,
            model: None,
            effort: None,
        }
    }

    fn denied(t: &SkillTurn, tool: &str, args: Value, ro: bool) -> bool {
        matches!(
            decide(t, tool, &args, ro, true),
            Some(Decision::Deny { .. })
        )
    }

    #[test]
    fn allowed_tools_only_narrow() {
        let t = turn(
            Some(&["Read", "grep", "mcp__gh__*", "Bash(git diff:*)"]),
            false,
        );
        assert!(!denied(&t, "read_file", json!({}), true));
        assert!(!denied(&t, "grep", json!({}), true));
        assert!(!denied(&t, "mcp__gh__list", json!({}), true));
        assert!(!denied(&t, "bash", json!({"command": "git diff"}), false));
        assert!(!denied(&t, "bash_output", json!({}), true));
        assert!(!denied(&t, "todo_write", json!({}), false));
        assert!(denied(&t, "write_file", json!({}), false));
        assert!(denied(&t, "mcp__other__x", json!({}), false));
        assert!(denied(&t, "web_fetch", json!({}), true));
        // An empty list allows nothing but the harmless tools.
        let none = turn(Some(&[]), false);
        assert!(denied(&none, "read_file", json!({}), true));
        assert!(!denied(&none, "todo_write", json!({}), false));
        // No list: the session's tools, left to the policy.
        assert!(decide(&turn(None, false), "write_file", &json!({}), false, true).is_none());
        // `*` lets through what the session has: still only the policy's yes.
        assert!(decide(
            &turn(Some(&["*"]), false),
            "bash",
            &json!({"command":"rm -rf /"}),
            false,
            true
        )
        .is_none());
    }

    #[test]
    fn read_only_skill_refuses_writers_like_plan_mode() {
        let t = turn(None, true);
        assert!(denied(&t, "write_file", json!({"path": "a"}), false));
        assert!(denied(&t, "bash", json!({"command": "rm -rf src"}), false));
        assert!(denied(&t, "bash", json!({"command": "echo x > f"}), false));
        assert!(!denied(&t, "read_file", json!({}), true));
        assert!(!denied(&t, "bash", json!({"command": "git diff"}), false));
        let Some(Decision::Deny { reason }) = decide(&t, "edit_file", &json!({}), false, true)
        else {
            panic!("edit_file allowed in a read-only skill");
        };
        assert!(reason.starts_with("the skill /s is read-only"), "{reason}");
    }
}
