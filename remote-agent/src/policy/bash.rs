//! A bash command line as the policy sees it: every simple command that can run, each with
//! what it really runs (through wrappers and nested shells) and whether that is knowable.

use super::shapes::{self, Shape};
pub use super::shell::shell_words;
use super::shell::{self, RawCommand};
use super::wrappers::{self, is_assignment};

/// How deep `sh -c '… sh -c …'` text is followed before the command is opaque.
const MAX_SCRIPT_DEPTH: usize = 8;
/// More simple commands than this in one call make it opaque.
const MAX_PIECES: usize = 512;

/// One simple command of a command line: a top-level command, one inside a substitution,
/// group or compound command, or one inside shell text handed to `sh -c`/`eval`/...
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// The text, trimmed.
    pub text: String,
    /// Its words with quotes removed (expansions kept as written).
    pub words: Vec<String>,
    /// True when it has command substitution, process substitution or a redirection that
    /// writes somewhere other than /dev/null or another descriptor.
    pub has_ops: bool,
    /// True when a redirection writes somewhere other than /dev/null or another descriptor
    /// (plan mode refuses such a command early).
    pub writes: bool,
    /// Why what this command runs cannot be known before it runs (a computed command name,
    /// a shell reading stdin, text that does not parse); such a piece is never allowed
    /// without asking.
    pub opaque: Option<String>,
    /// The word lists of what runs: the command, then what its wrappers start.
    pub(super) runs: Vec<Vec<String>>,
    /// Part of something else (a substitution, group, or text run by `sh -c`/`eval`/...).
    pub(super) nested: bool,
    /// The files its redirections name.
    pub(super) targets: Vec<String>,
    /// What could run where parts are only known when it runs (see [`shapes`]).
    pub(super) could: Vec<Vec<Shape>>,
    /// Standard input is text carried in the call (a here-document or here-string).
    pub(super) stdin_inline: bool,
    /// A command in it runs with `NAME=value` words before it.
    pub(super) sets_env: bool,
}

impl Piece {
    fn from_raw(raw: &RawCommand, in_script: bool) -> (Piece, Vec<String>) {
        let analysis = wrappers::analyze(&raw.words, raw.stdin_text.as_deref());
        (
            Piece {
                text: raw.text.clone(),
                words: raw.words.iter().map(|w| w.value.clone()).collect(),
                has_ops: raw.writes || raw.substitutions,
                writes: raw.writes,
                opaque: analysis.opaque,
                runs: analysis.runs,
                nested: in_script || raw.nested,
                targets: raw.targets.clone(),
                could: analysis.could,
                stdin_inline: raw.stdin_inline,
                sets_env: analysis.sets_env,
            },
            analysis.scripts,
        )
    }

    pub(crate) fn opaque(text: &str, why: String) -> Piece {
        Piece {
            text: text.trim().to_string(),
            words: shell_words(text),
            has_ops: true,
            writes: false,
            opaque: Some(why),
            runs: Vec::new(),
            nested: false,
            targets: Vec::new(),
            could: vec![shapes::anything()],
            stdin_inline: false,
            sets_env: false,
        }
    }

    /// The whole command line as one piece (for exact approvals).
    pub(super) fn whole(command: &str) -> Piece {
        let text = command.trim();
        let pieces = split_command(text);
        Piece {
            words: shell_words(text),
            has_ops: pieces.len() > 1 || pieces.iter().any(|p| p.has_ops),
            writes: pieces.iter().any(|p| p.writes),
            opaque: pieces.iter().find_map(|p| p.opaque.clone()),
            runs: Vec::new(),
            nested: false,
            targets: Vec::new(),
            could: Vec::new(),
            stdin_inline: false,
            sets_env: false,
            text: text.to_string(),
        }
    }

    /// A command of the line itself, not one inside a substitution, group or shell text it
    /// hands to a shell (those are decided too, as pieces of their own).
    pub fn is_top_level(&self) -> bool {
        !self.nested
    }

    /// The word lists of what runs: the command, then what its wrappers start.
    pub fn runs(&self) -> &[Vec<String>] {
        &self.runs
    }

    /// The words from the command name on (leading `VAR=value` dropped).
    pub(super) fn command_words(&self) -> &[String] {
        strip_assignments(&self.words)
    }
}

/// Every simple command of `cmd` that can run (those substituted into a command come before
/// it, text it hands to a shell after it). A line that cannot be read entirely yields what
/// was read plus one opaque piece.
pub fn split_command(cmd: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    decompose(cmd, 0, &mut out);
    if out.len() > MAX_PIECES {
        out.truncate(MAX_PIECES);
        out.push(Piece::opaque(
            cmd,
            format!("more than {MAX_PIECES} commands in one call"),
        ));
    }
    out
}

fn decompose(cmd: &str, depth: usize, out: &mut Vec<Piece>) {
    if depth > MAX_SCRIPT_DEPTH {
        out.push(Piece::opaque(
            cmd,
            "shell text nests too deeply".to_string(),
        ));
        return;
    }
    let parsed = shell::parse(cmd);
    for raw in &parsed.commands {
        if out.len() > MAX_PIECES {
            return;
        }
        let (piece, scripts) = Piece::from_raw(raw, depth > 0);
        out.push(piece);
        for s in scripts {
            decompose(&s, depth + 1, out);
        }
    }
    if let Some(e) = parsed.error {
        out.push(Piece::opaque(
            cmd,
            format!("the command line cannot be read ({e})"),
        ));
    }
}

/// Drops leading `VAR=value` words.
pub(super) fn strip_assignments(words: &[String]) -> &[String] {
    let n = words.iter().take_while(|w| is_assignment(w)).count();
    &words[n..]
}
