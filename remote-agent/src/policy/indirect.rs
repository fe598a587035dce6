//! Commands whose effect is not fixed by their words: what they do is decided by text or
//! values they carry or fetch when they run (shell text, inline programs, environment
//! assignments, commands found or read at run time). An "always allow" never stores a rule
//! for them, not even the exact command: they are approved once or for the session.

use super::bash::{strip_assignments, Piece};
use super::wrappers::{basename, SHELLS};

/// Why no rule may be stored for this command line, or `None` when its words fix what it
/// does. Every piece counts, nested ones included.
pub(super) fn not_fixed_by_words(pieces: &[Piece]) -> Option<String> {
    for p in pieces {
        if let Some(why) = &p.opaque {
            return Some(why.clone());
        }
        if p.nested {
            return Some(format!(
                "`{}` runs inside other shell text or a substitution",
                p.text
            ));
        }
        if p.sets_env || p.command_words().len() != p.words.len() {
            return Some(format!(
                "`{}` sets variables that can change what runs",
                p.text
            ));
        }
        for run in &p.runs {
            if let Some(why) = run_not_fixed(run, p.stdin_inline) {
                return Some(why);
            }
        }
    }
    None
}

/// Interpreters whose program can be given on the command line, with the options that do
/// it (`python3 -c`, `node -e`, ...). An option written together with others (`perl -ne`,
/// `ruby -pe`) counts too.
const INLINE_CODE: &[(&str, &[&str])] = &[
    ("python", &["-c"]),
    ("pypy", &["-c"]),
    ("node", &["-e", "--eval", "-p", "--print"]),
    ("nodejs", &["-e", "--eval", "-p", "--print"]),
    ("bun", &["-e", "--eval", "-p", "--print"]),
    ("deno", &["eval"]),
    ("perl", &["-e", "-E"]),
    ("ruby", &["-e"]),
    ("php", &["-r"]),
    ("lua", &["-e"]),
    ("luajit", &["-e"]),
    ("Rscript", &["-e"]),
    ("osascript", &["-e"]),
    ("pwsh", &["-c", "-command", "-e", "-encodedcommand"]),
    ("powershell", &["-c", "-command", "-e", "-encodedcommand"]),
    ("tclsh", &[]),
    ("wish", &[]),
];

/// Programs that are themselves a language able to start other programs or write files, so
/// their program text (`awk '{system(…)}'`, `sed 'e …'`) is code, unless it comes from a
/// file (`-f`).
const PROGRAM_IN_WORDS: [&str; 6] = ["awk", "gawk", "mawk", "nawk", "sed", "gsed"];

/// Wrappers whose command is decided when they run, not by their words.
const RUNS_WHAT_IT_READS: [&str; 8] = [
    "env", "xargs", "parallel", "eval", "source", ".", "trap", "watch",
];

fn interpreter(name: &str) -> Option<&'static [&'static str]> {
    // `python3.12`, `pypy3`, `node18`: the version suffix does not change the options.
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    INLINE_CODE
        .iter()
        .find(|(n, _)| *n == name || *n == stem)
        .map(|(_, flags)| *flags)
}

fn run_not_fixed(run: &[String], stdin_inline: bool) -> Option<String> {
    let words = strip_assignments(run);
    let first = words.first()?;
    let name = basename(first);
    let args = &words[1..];
    let shown = words.join(" ");
    if RUNS_WHAT_IT_READS.contains(&name) {
        return Some(format!(
            "`{name}` decides what runs when it runs (`{shown}`)"
        ));
    }
    if name == "find"
        && args
            .iter()
            .any(|a| matches!(a.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir"))
    {
        return Some(format!(
            "`find -exec` runs a command for whatever it finds (`{shown}`)"
        ));
    }
    let shell = SHELLS.contains(&name) && name != "busybox";
    if shell {
        let mut operands = args.iter().skip_while(|a| a.starts_with(['-', '+']));
        let opts = args.iter().take_while(|a| a.starts_with(['-', '+']));
        let inline = opts
            .clone()
            .any(|o| o == "--command" || (!o.starts_with("--") && o[1..].contains(['c', 's'])));
        if inline || operands.next().is_none() || stdin_inline {
            return Some(format!(
                "`{name}` runs shell text given with the call (`{shown}`)"
            ));
        }
        return None;
    }
    if let Some(flags) = interpreter(name) {
        let inline = args.iter().any(|a| {
            let lower = a.to_ascii_lowercase();
            flags.iter().any(|f| {
                lower == *f
                    || (f.starts_with("--") && lower.starts_with(&format!("{f}=")))
                    // `-e` among other short options (`perl -ne`, `ruby -pe`, `-ce`).
                    || (f.len() == 2
                        && !f.starts_with("--")
                        && lower.starts_with('-')
                        && !lower.starts_with("--")
                        && lower[1..].contains(&f[1..]))
            })
        });
        // No script operand: the program comes from standard input (`python3 <<EOF`,
        // `curl … | python3`, `python3 -`).
        let script = args.iter().find(|a| !a.starts_with('-') || *a == "-");
        if inline || stdin_inline || script.is_none_or(|s| s == "-") {
            return Some(format!(
                "`{name}` runs a program given with the call (`{shown}`)"
            ));
        }
        return None;
    }
    if PROGRAM_IN_WORDS.contains(&name) {
        let from_file = args
            .iter()
            .any(|a| a.starts_with("-f") || a.starts_with("--file"));
        if !from_file {
            return Some(format!(
                "`{name}` runs a program given with the call (`{shown}`)"
            ));
        }
    }
    None
}
