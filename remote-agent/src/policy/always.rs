//! What an approval remembers: the "always allow" rule and session approvals.
//!
//! A remembered rule is never wider than what the user approved. A prefix rule
//! (`Bash(cargo test:*)`) is stored only for an ordinary command; for wrappers (`timeout`,
//! `nice`, `command`, ...), interpreters running a script file (`python3 x.py`), `find`, and
//! anything whose subcommand cannot be told, the exact command is stored instead. Nothing is
//! stored (the approval holds for the session only) for dangerous commands (`rm -rf`,
//! `sudo`, `git push --force`, ...) and for commands whose effect is not fixed by their
//! words ([`indirect`](super::indirect): `eval`, `sh -c`, `python3 -c`, `node -e`,
//! `find -exec`, `FOO=1 cmd`, `env`, `xargs`, here-document programs, ...).

use serde_json::Value;

use super::bash::{split_command, strip_assignments, Piece};
use super::indirect::not_fixed_by_words;
use super::rules::{escape_glob, Rule, Spec, ToolPat};
use super::wrappers::{basename, SHELLS};
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

    /// The rule an "always allow" answer persists: `Bash(<prefix>:*)` for an ordinary simple
    /// command, `Bash(<exact command>)` for wrappers, interpreters and `find`, `Edit` for
    /// writers, the tool name otherwise. None for dangerous commands (`rm -rf`,
    /// `git push --force`, `sudo`, ...), for compound or redirecting commands, for commands
    /// whose effect cannot be seen and for those whose effect is not fixed by their words
    /// (`eval`, `sh -c`, `python3 -c`, `find -exec`, `FOO=1 cmd`, `env`, ...): those stay
    /// session approvals.
    pub fn always_rule(tool: &str, args: &Value) -> Option<String> {
        if WRITER_TOOLS.contains(&tool) {
            return Some("Edit".to_string());
        }
        if tool == reasonix_forward::web::WEB_FETCH_TOOL {
            // One host, never every fetch.
            let url = args.get("url").and_then(Value::as_str)?;
            let host = reasonix_forward::web::url_host(url)?;
            return Some(format!("WebFetch(domain:{host})"));
        }
        if !tool.eq_ignore_ascii_case("bash") {
            return Some(tool.to_string());
        }
        let cmd = args.get("command").and_then(Value::as_str)?;
        let pieces = split_command(cmd);
        if not_fixed_by_words(&pieces).is_some() {
            return None;
        }
        // One command of the line itself; what it runs inside (`sh -c` text) is covered by
        // storing it exactly.
        let top: Vec<&Piece> = pieces.iter().filter(|p| !p.nested).collect();
        let [piece] = top.as_slice() else {
            return None;
        };
        if pieces.iter().any(|p| p.opaque.is_some()) {
            return None;
        }
        let piece = *piece;
        if piece.has_ops || piece.opaque.is_some() {
            return None;
        }
        if pieces
            .iter()
            .any(|p| p.runs.iter().any(|r| is_dangerous(r)) || is_dangerous(&p.words))
        {
            return None;
        }
        let words = piece.command_words();
        if words.is_empty() {
            return None;
        }
        let first = words[0].as_str();
        let exact = || Some(format!("Bash({})", escape_glob(&piece.text)));
        // A command that runs other commands (or code) is approved only as written.
        if piece.runs.len() > 1 || never_prefix(first) || first.contains('/') {
            return exact();
        }
        let mut prefix = vec![words[0].clone()];
        if SUBCOMMAND_TOOLS.contains(&first) {
            match words.get(1) {
                Some(sub) if !sub.starts_with('-') && !sub.starts_with('+') => {
                    prefix.push(sub.clone())
                }
                // `git -c x=y …`, `cargo +nightly …`: the subcommand is not where a prefix
                // would put it.
                Some(_) => return exact(),
                None => {}
            }
        }
        // The prefix must survive the rule's own word splitting unchanged.
        let text = prefix.join(" ");
        if super::shell_words(&text) != prefix {
            return exact();
        }
        Some(format!("Bash({text}:*)"))
    }
}

/// Tools whose first argument is a subcommand worth keeping in an "always" prefix.
const SUBCOMMAND_TOOLS: [&str; 14] = [
    "git", "cargo", "npm", "pnpm", "yarn", "go", "docker", "kubectl", "pip", "uv", "make", "bun",
    "npx", "rustup",
];

/// First words that must never become a prefix rule: they run whatever follows them.
fn never_prefix(first: &str) -> bool {
    const WRAPPERS: [&str; 37] = [
        "env", "xargs", "timeout", "nice", "ionice", "nohup", "command", "builtin", "exec", "eval",
        "source", ".", "time", "stdbuf", "sudo", "doas", "su", "runuser", "chroot", "setsid",
        "taskset", "chrt", "nsenter", "unshare", "strace", "ltrace", "watch", "flock", "script",
        "find", "trap", "parallel", "unbuffer", "fakeroot", "pkexec", "busybox", "sg",
    ];
    const INTERPRETERS: [&str; 22] = [
        "python",
        "python2",
        "python3",
        "node",
        "nodejs",
        "deno",
        "perl",
        "ruby",
        "php",
        "lua",
        "luajit",
        "tclsh",
        "wish",
        "Rscript",
        "osascript",
        "pwsh",
        "awk",
        "gawk",
        "mawk",
        "nawk",
        "sed",
        "jq",
    ];
    WRAPPERS.contains(&first)
        || INTERPRETERS.contains(&first)
        || SHELLS.contains(&first)
        || first.starts_with("python")
}

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
        _ => false,
    }
}
