//! What an approval remembers: the "always allow" rule and session approvals.

use serde_json::Value;

use super::bash::{split_command, strip_assignments, strip_one_wrapper, Piece};
use super::rules::{basename, Rule, Spec, ToolPat};
use super::Policy;
use crate::tools::WRITER_TOOLS;

impl Policy {
    /// Remembers an approval for the rest of the session: the "always" rule when there is
    /// one, else (dangerous or compound bash) exactly this command.
    pub fn allow_for_session(&mut self, tool: &str, args: &Value) {
        if let Some(rule) = Self::always_rule(tool, args).and_then(|r| Rule::parse(&r).ok()) {
            self.session.push(rule);
            return;
        }
        if tool.eq_ignore_ascii_case("bash") {
            if let Some(cmd) = args.get("command").and_then(Value::as_str) {
                let text = Piece::whole(cmd).text;
                self.session.push(Rule {
                    text: format!("Bash({text})"),
                    tool: ToolPat::Name("bash".into()),
                    spec: Some(Spec::Exact(text)),
                });
            }
        }
    }

    /// The rule an "always allow" answer persists: `Bash(<prefix>:*)` for a simple command,
    /// `Edit` for writers, the tool name otherwise. None for dangerous commands (`rm -rf`,
    /// `git push --force`, `sudo`, ...) and for compound or redirecting commands.
    pub fn always_rule(tool: &str, args: &Value) -> Option<String> {
        if WRITER_TOOLS.contains(&tool) {
            return Some("Edit".to_string());
        }
        if !tool.eq_ignore_ascii_case("bash") {
            return Some(tool.to_string());
        }
        let cmd = args.get("command").and_then(Value::as_str)?;
        let pieces = split_command(cmd);
        let [piece] = pieces.as_slice() else {
            return None;
        };
        if piece.has_ops || is_dangerous(&piece.words) {
            return None;
        }
        let words = &piece.words;
        if words.is_empty() || words[0].contains('=') {
            return None;
        }
        let mut prefix = vec![words[0].clone()];
        if SUBCOMMAND_TOOLS.contains(&words[0].as_str()) {
            if let Some(sub) = words.get(1).filter(|w| !w.starts_with('-')) {
                prefix.push(sub.clone());
            }
        }
        Some(format!("Bash({}:*)", prefix.join(" ")))
    }
}

/// Tools whose first argument is a subcommand worth keeping in an "always" prefix.
const SUBCOMMAND_TOOLS: [&str; 14] = [
    "git", "cargo", "npm", "pnpm", "yarn", "go", "docker", "kubectl", "pip", "uv", "make", "bun",
    "npx", "rustup",
];

/// Commands an "always allow" must never cover.
fn is_dangerous(words: &[String]) -> bool {
    let words = strip_assignments(words);
    let Some(first) = words.first().map(|w| basename(w)) else {
        return false;
    };
    match first {
        "sudo" | "su" | "doas" | "dd" | "shred" | "mkfs" => true,
        f if f.starts_with("mkfs.") => true,
        "rm" => words[1..].iter().any(|w| {
            w == "--recursive"
                || w == "--force"
                || (w.starts_with('-') && !w.starts_with("--") && w.contains(['r', 'R', 'f']))
        }),
        "git" => {
            words.get(1).is_some_and(|w| w == "push")
                && words[2..].iter().any(|w| {
                    w == "-f"
                        || w.starts_with("--force")
                        || w.starts_with('+')
                        || (w.starts_with('-') && !w.starts_with("--") && w.contains('f'))
                })
        }
        "chmod" | "chown" => words[1..].iter().any(|w| w == "-R" || w == "--recursive"),
        _ => strip_one_wrapper(words).is_some_and(is_dangerous),
    }
}
