//! Splitting a bash command line into simple commands and words, and seeing through wrappers.

use super::rules::basename;

/// One simple command of a compound command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// The text, trimmed.
    pub text: String,
    /// Its words with quotes removed.
    pub words: Vec<String>,
    /// True when it has command substitution, process substitution or a redirection that
    /// writes somewhere other than /dev/null or another descriptor.
    pub has_ops: bool,
}

impl Piece {
    pub(super) fn new(text: &str, has_ops: bool) -> Piece {
        let text = text.trim().to_string();
        Piece {
            words: shell_words(&text),
            text,
            has_ops,
        }
    }

    pub(super) fn whole(command: &str) -> Piece {
        let text = command.trim();
        Piece::new(
            text,
            split_command(text).len() > 1 || split_command(text).iter().any(|p| p.has_ops),
        )
    }
}

/// Splits a command line on `;`, `&`, `&&`, `|`, `||`, `|&`, newlines and subshell
/// parentheses, outside quotes and substitutions. Empty pieces are dropped.
pub fn split_command(cmd: &str) -> Vec<Piece> {
    let chars: Vec<char> = cmd.chars().collect();
    let mut pieces = Vec::new();
    let mut cur = String::new();
    let mut has_ops = false;
    let (mut single, mut double, mut backtick) = (false, false, false);
    let mut depth = 0usize; // inside $( ... )
    let mut i = 0;
    let flush = |cur: &mut String, has_ops: &mut bool, pieces: &mut Vec<Piece>| {
        if !cur.trim().is_empty() {
            pieces.push(Piece::new(cur, *has_ops));
        }
        cur.clear();
        *has_ops = false;
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let in_subst = depth > 0;
        if single {
            cur.push(c);
            if c == '\'' {
                single = false;
            }
            i += 1;
            continue;
        }
        if c == '\\' {
            cur.push(c);
            if let Some(n) = next {
                cur.push(n);
            }
            i += 2;
            continue;
        }
        match c {
            '\'' if !double => single = true,
            '"' => double = !double,
            '`' => {
                backtick = !backtick;
                has_ops = true;
            }
            '$' if next == Some('(') => {
                depth += 1;
                has_ops = true;
                cur.push_str("$(");
                i += 2;
                continue;
            }
            '(' if depth > 0 => depth += 1,
            ')' if depth > 0 => depth -= 1,
            _ => {}
        }
        let top =
            !(double || backtick || in_subst || depth != 0 || c == '\'' || c == '"' || c == '`');
        if !top {
            cur.push(c);
            i += 1;
            continue;
        }
        match c {
            ';' | '\n' | '(' | ')' => {
                flush(&mut cur, &mut has_ops, &mut pieces);
                i += 1;
            }
            '|' => {
                flush(&mut cur, &mut has_ops, &mut pieces);
                i += if matches!(next, Some('|') | Some('&')) {
                    2
                } else {
                    1
                };
            }
            '&' if next == Some('&') => {
                flush(&mut cur, &mut has_ops, &mut pieces);
                i += 2;
            }
            '&' if next == Some('>') => {
                // `&>file`: redirect both streams.
                let (consumed, harmless) = redirect_target(&chars, i + 2);
                has_ops |= !harmless;
                cur.extend(&chars[i..i + 2 + consumed]);
                i += 2 + consumed;
            }
            '&' => {
                flush(&mut cur, &mut has_ops, &mut pieces);
                i += 1;
            }
            '>' => {
                let mut j = i + 1;
                if matches!(chars.get(j), Some('>') | Some('|')) {
                    j += 1;
                }
                if chars.get(j) == Some(&'(') {
                    has_ops = true; // process substitution
                    cur.push(c);
                    i += 1;
                    continue;
                }
                let (consumed, harmless) = if chars.get(j) == Some(&'&') {
                    let (n, _) = redirect_target(&chars, j + 1);
                    let target: String = chars[j + 1..j + 1 + n].iter().collect();
                    (
                        n + 1,
                        target
                            .trim()
                            .chars()
                            .all(|d| d.is_ascii_digit() || d == '-'),
                    )
                } else {
                    redirect_target(&chars, j)
                };
                has_ops |= !harmless;
                cur.extend(&chars[i..j + consumed]);
                i = j + consumed;
            }
            '<' if next == Some('(') => {
                has_ops = true;
                cur.push(c);
                i += 1;
            }
            _ => {
                cur.push(c);
                i += 1;
            }
        }
    }
    flush(&mut cur, &mut has_ops, &mut pieces);
    pieces
}

/// Reads a redirection target starting at `start` (skipping blanks). Returns the characters
/// consumed and whether the target is harmless (`/dev/null`).
fn redirect_target(chars: &[char], start: usize) -> (usize, bool) {
    let mut j = start;
    while j < chars.len() && (chars[j] == ' ' || chars[j] == '\t') {
        j += 1;
    }
    let word_start = j;
    while j < chars.len()
        && !chars[j].is_whitespace()
        && !matches!(chars[j], ';' | '&' | '|' | '(' | ')' | '<' | '>')
    {
        j += 1;
    }
    let word: String = chars[word_start..j].iter().collect();
    let word = word.trim_matches(['"', '\'']);
    (j - start, word == "/dev/null")
}

/// Splits a simple command into words, removing quotes and backslashes.
pub fn shell_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let (mut single, mut double) = (false, false);
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' if !double => {
                single = !single;
                in_word = true;
            }
            '"' if !single => {
                double = !double;
                in_word = true;
            }
            '\\' if !single => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
                in_word = true;
            }
            c if c.is_whitespace() && !single && !double => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

/// Drops leading `VAR=value` words.
pub(super) fn strip_assignments(words: &[String]) -> &[String] {
    let n = words
        .iter()
        .take_while(|w| {
            w.split_once('=').is_some_and(|(k, _)| {
                !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        })
        .count();
    &words[n..]
}

/// Drops wrapper commands (`sudo -u x`, `env A=b`, `nice -n 5`, `timeout 10`, `xargs -0`,
/// `command`, `exec`, `nohup`, `time`) to find the command that really runs.
pub(super) fn strip_wrappers(words: &[String]) -> &[String] {
    let mut w = strip_assignments(words);
    while let Some(next) = strip_one_wrapper(w) {
        w = next;
    }
    w
}

/// The command under the first wrapper, or None when `words` does not start with one.
pub(super) fn strip_one_wrapper(words: &[String]) -> Option<&[String]> {
    let w = strip_assignments(words);
    let first = w.first()?;
    let name = basename(first);
    let rest = &w[1..];
    let skip_flags =
        |r: &[String]| -> usize { r.iter().take_while(|x| x.starts_with('-')).count() };
    let next = match name {
        "sudo" | "doas" | "nohup" | "command" | "exec" | "time" | "xargs" | "stdbuf" | "nice"
        | "ionice" => {
            let mut n = skip_flags(rest);
            // `sudo -u user cmd`, `nice -n 5 cmd`: a short flag's value looks like a word.
            if matches!(name, "sudo" | "nice" | "ionice")
                && n > 0
                && rest.get(n - 1).is_some_and(|f| f.len() == 2)
                && rest.get(n + 1).is_some()
            {
                n += 1;
            }
            &rest[n.min(rest.len())..]
        }
        "env" => strip_assignments(&rest[skip_flags(rest)..]),
        "timeout" => {
            let n = skip_flags(rest);
            &rest[(n + 1).min(rest.len())..]
        }
        _ => return None,
    };
    Some(strip_assignments(next))
}
