//! Oracle: `shell_words` (how the policy removes quotes) against the real shells. Random
//! words over quoting characters are handed to `dash` and `bash` as `eval "set -- <input>"`;
//! the words each shell produces must equal ours. Inputs a shell rejects (unclosed quotes) or
//! that run something after a newline are skipped, and the test insists most are compared.
//!
//! A third table holds the policy's word *shapes* (what a word may become when it runs:
//! itself, one unknown word, any run of words, names matching a glob) to what bash really
//! makes of words with expansions, brace lists and globs, with variables holding several
//! words and files named like options in the directory.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::process::Command;

use rand::{Rng, SeedableRng};
use reasonix_remote::policy::{command_shapes, shell_words, Shape};

/// What one shell made of each input: Some(words), or None when it refused.
fn oracle(shell: &str, inputs: &[String]) -> Vec<Option<Vec<String>>> {
    // One process for all inputs; each is evaluated in a subshell so a syntax error only
    // loses that input. \x1e starts a record, \x1f ends a word, \x1d precedes the status.
    let script = r#"set -f
for s do
  printf '\036'
  ( eval "set -- $s" || exit 99; for w do printf '%s\037' "$w"; done ) 2>/dev/null
  printf '\035%s' "$?"
done"#;
    // Run where a stray command could do no harm.
    let scratch = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(shell);
    cmd.current_dir(scratch.path());
    if shell == "bash" {
        cmd.arg("+B");
    }
    let out = cmd
        .arg("-c")
        .arg(script)
        .arg("oracle")
        .args(inputs)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let records: Vec<&str> = text.split('\x1e').skip(1).collect();
    assert_eq!(
        records.len(),
        inputs.len(),
        "{shell} printed one record per input"
    );
    records
        .iter()
        .map(|r| {
            let (words, status) = r.rsplit_once('\x1d').unwrap();
            if status != "0" {
                return None;
            }
            // Every word ends with \x1f, so the last piece is empty.
            let mut v: Vec<String> = words.split('\x1f').map(String::from).collect();
            v.pop();
            Some(v)
        })
        .collect()
}

fn generate(rng: &mut rand::rngs::StdRng, alphabet: &[&str], n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let len = rng.gen_range(1..14);
            (0..len)
                .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                .collect::<String>()
        })
        .collect()
}

fn compare(shell: &str, inputs: &[String]) -> (usize, Vec<String>) {
    let mut compared = 0;
    let mut failures = Vec::new();
    for (input, want) in inputs.iter().zip(oracle(shell, inputs)) {
        let Some(want) = want else { continue };
        // A lone backslash ending the text after a single-quoted string spanning lines: bash
        // drops it, dash keeps it; we follow bash.
        let trailing = input.chars().rev().take_while(|c| *c == '\\').count();
        if shell == "dash" && trailing % 2 == 1 && input.contains('\n') && input.contains('\'') {
            continue;
        }
        compared += 1;
        let got = shell_words(input);
        if got != want {
            failures.push(format!("{shell}: {input:?}: shell {want:?}, ours {got:?}"));
        }
    }
    (compared, failures)
}

/// POSIX quoting: backslashes, single and double quotes, blanks, comments, newlines.
/// No `$` or backquote: expansions are not quote removal, and a stray one could run things.
const POSIX: [&str; 16] = [
    "a", "z", "a", " ", "\t", "\\", "\\", "'", "'", "\"", "\"", "#", "\n", "=", "\\\"", "\\n",
];

#[test]
fn shell_words_match_dash_and_bash() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_0012);
    let inputs = generate(&mut rng, &POSIX, 3000);
    let mut total = 0;
    let mut failures = Vec::new();
    for shell in ["dash", "bash"] {
        let (n, f) = compare(shell, &inputs);
        total += n;
        failures.extend(f);
    }
    eprintln!("shell oracle (POSIX alphabet): {total} comparisons over 2 shells");
    assert!(
        total >= 2000,
        "too few inputs were accepted by the shells: {total}"
    );
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

/// bash's `$'…'` (ANSI-C) and `$"…"` quoting on top of POSIX.
const BASH: [&str; 14] = [
    "a", " ", "\\", "'", "\"", "$'", "$\"", "\\n", "\\x41", "\\101", "\\t", "\\'", "z", "\\\\",
];

#[test]
fn ansi_c_quoting_matches_bash() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_0013);
    let inputs = generate(&mut rng, &BASH, 2000);
    let (n, failures) = compare("bash", &inputs);
    eprintln!("shell oracle (bash $'…' alphabet): {n} comparisons");
    assert!(n >= 600, "too few inputs were accepted by bash: {n}");
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

/// Fragments of words whose number of resulting words is not always one.
const EXPANDING: [&str; 35] = [
    "$x",
    "\"$x\"",
    "${x}",
    "\"${x}\"",
    "$e",
    "\"$e\"",
    "$(echo p q)",
    "\"$(echo p q)\"",
    "`echo p q`",
    "$@",
    "\"$@\"",
    "\"${arr[@]}\"",
    "{a,b}",
    "{1..3}",
    "{}",
    "{x}",
    "*",
    "*.o",
    "?",
    "[ab]",
    "\"*\"",
    "'$x'",
    "a",
    "-",
    ",",
    "..",
    "{",
    "}",
    "\\{",
    "$'q'",
    "'{a,b}'",
    "\\*",
    "\"{\"",
    "[",
    "$((1+1))",
];

/// What bash makes of each input word (None when it refuses the text), with `x='p q'`,
/// `e=''`, `"$@"` = `1 2`, `arr=(u 'v w')`, in a directory holding `a`, `b`, `-rf`, `x.o`.
fn bash_expansions(inputs: &[String]) -> Vec<Option<Vec<String>>> {
    let script = r#"x='p q'; e=''; arr=(u 'v w'); set -- 1 2
for s in "${inputs[@]}"; do
  printf '\036'
  ( eval "set -- $s" || exit 99; for w do printf '%s\037' "$w"; done ) 2>/dev/null
  printf '\035%s' "$?"
done"#;
    let dir = tempfile::tempdir().unwrap();
    for f in ["a", "b", "-rf", "x.o"] {
        std::fs::write(dir.path().join(f), "").unwrap();
    }
    let out = Command::new("bash")
        .current_dir(dir.path())
        .arg("-c")
        .arg(format!("inputs=(\"$@\"); shift $#; {script}"))
        .arg("oracle")
        .args(inputs)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let records: Vec<&str> = text.split('\x1e').skip(1).collect();
    assert_eq!(records.len(), inputs.len(), "one record per input");
    records
        .iter()
        .map(|r| {
            let (words, status) = r.rsplit_once('\x1d').unwrap();
            if status != "0" {
                return None;
            }
            let mut v: Vec<String> = words.split('\x1f').map(String::from).collect();
            v.pop();
            Some(v)
        })
        .collect()
}

/// Can the shapes give exactly these words?
fn shapes_give(shapes: &[Shape], words: &[String]) -> bool {
    let glob_match = |g: &str, w: &str| {
        w == g
            || globset::GlobBuilder::new(g)
                .literal_separator(true)
                .build()
                .is_ok_and(|m| m.compile_matcher().is_match(w))
    };
    // can[i][j]: shapes[i..] give exactly words[j..].
    let (n, m) = (shapes.len(), words.len());
    let mut can = vec![vec![false; m + 1]; n + 1];
    can[n][m] = true;
    for i in (0..n).rev() {
        for j in (0..=m).rev() {
            can[i][j] = match &shapes[i] {
                Shape::Word(v) => j < m && words[j] == *v && can[i + 1][j + 1],
                Shape::One => j < m && can[i + 1][j + 1],
                Shape::Many => can[i + 1][j] || (j < m && can[i][j + 1]),
                Shape::Glob(g) => {
                    j < m && glob_match(g, &words[j]) && (can[i + 1][j + 1] || can[i][j + 1])
                }
            };
        }
    }
    can[0][0]
}

#[test]
fn word_shapes_cover_what_bash_makes_of_the_words() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_0031);
    let inputs: Vec<String> = (0..3000)
        .map(|_| {
            let len = rng.gen_range(1..4);
            (0..len)
                .map(|_| EXPANDING[rng.gen_range(0..EXPANDING.len())])
                .collect::<String>()
        })
        .collect();
    let mut compared = 0;
    let mut several = 0;
    let mut failures = Vec::new();
    for (input, want) in inputs.iter().zip(bash_expansions(&inputs)) {
        let Some(words) = want else { continue };
        let shapes: Vec<Shape> = command_shapes(&format!(": {input}"))
            .into_iter()
            .skip(1)
            .collect();
        compared += 1;
        several += usize::from(words.len() != 1);
        if !shapes_give(&shapes, &words) {
            failures.push(format!("{input:?}: bash {words:?}, shapes {shapes:?}"));
        }
    }
    eprintln!(
        "word-shape oracle: {compared} words compared with bash ({several} became 0 or several words)"
    );
    assert!(
        compared >= 2000,
        "too few inputs were accepted by bash: {compared}"
    );
    assert!(
        several >= 400,
        "too few inputs exercised splitting: {several}"
    );
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}
