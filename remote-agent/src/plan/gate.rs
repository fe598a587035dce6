//! What plan mode refuses before the policy is asked: every writer (file tools, MCP tools not
//! marked read-only, anything else that is not read-only), and bash commands that obviously
//! write (a redirection into a file, `rm`, `mv`, `sed -i`, a writing `git`, ...). Other bash
//! commands go on to the policy and run in a read-only sandbox ([`crate::sandbox`]), so an
//! interpreter cannot write either; without a sandbox only read-only commands run.

use serde_json::Value;

use crate::policy::{is_read_only_command, split_command, Decision};

/// Commands that exist to change files.
const WRITERS: &[&str] = &[
    "rm", "rmdir", "mv", "cp", "touch", "mkdir", "tee", "dd", "chmod", "chown", "chgrp", "ln",
    "truncate", "install", "shred", "unlink", "patch", "rsync", "mkfifo", "mknod",
];

/// Tools that are not read-only but change nothing in the workspace: the session's todo list
/// and its own background jobs (started read-only in plan mode).
const HARMLESS: &[&str] = &["todo_write", "kill_shell"];

/// Plan mode's verdict on `tool` with `args`: `Some(Deny)` refuses it before the policy is
/// asked; `None` leaves it to the policy. `sandboxed`: bash runs confined (read-only).
pub fn decide(tool: &str, args: &Value, read_only: bool, sandboxed: bool) -> Option<Decision> {
    if tool == "bash" {
        let command = args.get("command").and_then(Value::as_str).unwrap_or("");
        return bash(command, sandboxed).map(|reason| Decision::Deny { reason });
    }
    if read_only || HARMLESS.contains(&tool) {
        return None;
    }
    Some(Decision::Deny {
        reason: format!(
            "plan mode: `{tool}` can change things, and nothing changes before the user approves a plan. \
             Research with read-only tools, then propose the plan with exit_plan_mode"
        ),
    })
}

/// Why plan mode refuses `command` early, if it does.
fn bash(command: &str, sandboxed: bool) -> Option<String> {
    let pieces = split_command(command);
    for p in &pieces {
        if p.writes {
            return Some(format!(
                "plan mode: `{}` writes a file through a redirection, and nothing writes before the user approves a plan \
                 (bash runs in a read-only sandbox). Read instead, or put the change in the plan",
                p.text
            ));
        }
        for run in p
            .runs()
            .iter()
            .map(Vec::as_slice)
            .chain([p.words.as_slice()])
        {
            if let Some(why) = writer(run) {
                return Some(format!(
                    "plan mode: `{}` {why}, and nothing changes before the user approves a plan. \
                     Put the change in the plan (exit_plan_mode)",
                    p.text
                ));
            }
        }
    }
    if !sandboxed && !pieces.iter().all(is_read_only_command) {
        return Some(
            "plan mode: bash has no sandbox here ([sandbox] bash = \"off\", or none available), so only \
             read-only commands (ls, cat, grep, git log, ...) may run before the plan is approved"
                .to_string(),
        );
    }
    None
}

/// Why the command `words` obviously writes.
fn writer(words: &[String]) -> Option<&'static str> {
    let words: Vec<&str> = words
        .iter()
        .map(String::as_str)
        .skip_while(|w| w.contains('=') && !w.starts_with('-'))
        .collect();
    let first = words.first()?;
    let name = first.rsplit('/').next().unwrap_or(first);
    if WRITERS.contains(&name) {
        return Some("changes files");
    }
    let args = &words[1..];
    match name {
        "sed" | "perl" | "ruby"
            if args
                .iter()
                .any(|a| a.starts_with("-i") || *a == "--in-place") =>
        {
            Some("edits files in place")
        }
        "git" => {
            const GIT_WRITES: &[&str] = &[
                "add",
                "commit",
                "push",
                "checkout",
                "switch",
                "reset",
                "restore",
                "rm",
                "mv",
                "merge",
                "rebase",
                "stash",
                "apply",
                "am",
                "clean",
                "cherry-pick",
                "revert",
                "tag",
                "init",
                "clone",
                "pull",
                "fetch",
                "worktree",
                "gc",
            ];
            let sub = args.iter().find(|a| !a.starts_with('-'))?;
            GIT_WRITES.contains(sub).then_some("changes the repository")
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bash_denied(cmd: &str, sandboxed: bool) -> bool {
        matches!(
            decide("bash", &json!({"command": cmd}), false, sandboxed),
            Some(Decision::Deny { .. })
        )
    }

    #[test]
    fn writers_are_refused_and_readers_pass() {
        for t in [
            "write_file",
            "edit_file",
            "multi_edit",
            "move_file",
            "mcp__fs__write",
        ] {
            assert!(
                matches!(
                    decide(t, &json!({}), false, true),
                    Some(Decision::Deny { .. })
                ),
                "{t}"
            );
        }
        for t in ["read_file", "grep", "history", "mcp__fs__read"] {
            assert_eq!(decide(t, &json!({}), true, true), None, "{t}");
        }
        assert_eq!(decide("todo_write", &json!({}), true, true), None);
    }

    #[test]
    fn obvious_bash_writers_are_refused_early() {
        for cmd in [
            "echo x > f",
            "cd sub && echo x > f",
            "cat a >> b",
            "rm -rf build",
            "sed -i s/a/b/ f",
            "sh -c 'echo x > f'",
            "env FOO=1 touch f",
            "git commit -m x",
            "/bin/mv a b",
            "ls | tee out",
        ] {
            assert!(bash_denied(cmd, true), "{cmd}");
        }
        for cmd in [
            "ls -la",
            "grep -rn foo src",
            "git log --oneline | head",
            "echo hi 2>/dev/null",
            "python3 -c 'print(1)'",
            "cargo metadata --format-version 1",
        ] {
            assert!(!bash_denied(cmd, true), "{cmd}");
        }
    }

    #[test]
    fn without_a_sandbox_only_read_only_commands_run() {
        assert!(!bash_denied("ls -la && cat README.md", false));
        assert!(bash_denied("python3 -c 'print(1)'", false));
    }
}
