//! Permission rules and bash decomposition (`reasonix_remote::policy`).

use reasonix_remote::policy::{
    is_read_only_command, shell_words, split_command, Decision, Mode, Policy,
};
use serde_json::json;

use crate::text;

/// Tools the rules are decided against (built-in names, a writer, an MCP tool).
const TOOLS: &[&str] = &[
    "bash",
    "read_file",
    "write_file",
    "edit_file",
    "glob",
    "mcp__srv__tool",
];

/// Rules: each line of `data` is a rule, put in allow, ask or deny by its position; a bad
/// rule must be refused with an error, never a panic. The compiled policy then decides every
/// rule's own text used as a path and as a bash command, for every tool and mode, and the
/// session "always" paths run on them.
pub fn policy_rules(data: &[u8]) {
    let input = text(data);
    let lines: Vec<String> = input.lines().take(32).map(str::to_string).collect();
    let (mut allow, mut ask, mut deny) = (Vec::new(), Vec::new(), Vec::new());
    for (i, l) in lines.iter().enumerate() {
        match i % 3 {
            0 => allow.push(l.clone()),
            1 => ask.push(l.clone()),
            _ => deny.push(l.clone()),
        }
    }
    // Each rule alone too, so one bad rule does not hide the others from the decisions.
    let mut policies: Vec<Policy> = lines
        .iter()
        .filter_map(|r| Policy::new(Mode::Ask, std::slice::from_ref(r), &[], &[]).ok())
        .collect();
    if let Ok(p) = Policy::new(Mode::Ask, &allow, &ask, &deny) {
        policies.push(p);
    }
    for mut p in policies.into_iter().rev().take(4) {
        for mode in [Mode::Ask, Mode::Auto, Mode::Yolo] {
            p.set_mode(mode);
            for l in lines.iter().take(4) {
                for tool in TOOLS {
                    let args = json!({"path": l, "command": l, "pattern": l});
                    let _ = p.decide(tool, &args, false);
                    let _ = p.decide(tool, &args, true);
                }
            }
        }
        if let Some(l) = lines.first() {
            let args = json!({"command": l, "path": l});
            let _ = Policy::always_rule("bash", &args);
            p.allow_for_session("bash", &args);
            let _ = p.decide("bash", &args, false);
        }
    }
}

/// Bash decomposition: `data` is one command line. Splitting must not panic, each piece is
/// re-split and re-tokenised (the policy does that too), and the default policy decides it.
pub fn bash_split(data: &[u8]) {
    let cmd = text(data);
    let pieces = split_command(&cmd);
    for p in &pieces {
        let _ = is_read_only_command(p);
        let again = split_command(&p.text);
        // Out of its context a piece can read as nothing (a bare `then`); the policy must
        // then not allow it unasked.
        if again.is_empty() && !p.text.trim().is_empty() {
            if let Ok(empty) = Policy::new(Mode::Ask, &[], &[], &[]) {
                let d = empty.decide("bash", &json!({ "command": p.text }), false);
                assert!(
                    !matches!(d, Decision::Allow),
                    "a piece {:?} that reads as no command is allowed unasked",
                    p.text
                );
            }
        }
        let _ = shell_words(&p.text);
    }
    let _ = shell_words(&cmd);
    if let Ok(p) = Policy::new(
        Mode::Ask,
        &["Bash(git status:*)".into(), "Bash(ls *)".into()],
        &[],
        &["Bash(rm -rf:*)".into()],
    ) {
        let args = json!({ "command": cmd });
        let _ = p.decide("bash", &args, false);
        let _ = Policy::always_rule("bash", &args);
    }
}
