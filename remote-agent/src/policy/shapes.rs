//! What a command could be when part of it is only known when it runs.
//!
//! Each word of a command that runs becomes a [`Shape`]: a word known as written, one unknown
//! word (`"$x"`), any run of words (`$x`, `$(cmd)`, `{a,b}` split into words by the shell),
//! or file names a glob matches (`r*`). A deny or ask rule that *could* name such a command
//! (some value of the unknown parts makes it the rule's command) applies to it: the policy
//! never bets that a variable holds something harmless.

use globset::{GlobBuilder, GlobMatcher};

use super::shell::Word;
use super::wrappers::basename;

/// One word of a command, as far as it is known before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// A word known as written (quotes removed).
    Word(String),
    /// Exactly one word, unknown: an expansion inside double quotes.
    One,
    /// Any number of words, none included: an expansion outside double quotes, a brace list,
    /// or whatever a command that cannot be read runs.
    Many,
    /// One or more file names matching this glob (or the pattern itself when none does).
    Glob(String),
}

impl Shape {
    /// The shapes one parsed word becomes: a brace list written without quotes is expanded
    /// here as bash expands it (`build/{a,b}.o` is two known words); anything else whose
    /// words cannot be told is [`Shape::Many`].
    pub(super) fn of(w: &Word) -> Vec<Shape> {
        if !w.literal {
            // Brace lists are expanded and globs matched after the values are in: either can
            // turn even a quoted expansion (`{a,b}"$x"`, `*"$x"`) into several words.
            let several = w.splits || w.braces || w.glob;
            return vec![if several { Shape::Many } else { Shape::One }];
        }
        if w.braces {
            // With quotes in it, the braces' text is not the word's value: give up on it.
            let expanded = (!w.quoted).then(|| expand_braces(&w.value)).flatten();
            return match expanded {
                Some(words) => words.into_iter().map(|v| Self::literal(&v)).collect(),
                None => vec![Shape::Many],
            };
        }
        if w.glob {
            return vec![Shape::Glob(w.value.clone())];
        }
        vec![Shape::Word(w.value.clone())]
    }

    fn literal(v: &str) -> Shape {
        if v.contains(['*', '?', '[']) {
            Shape::Glob(v.to_string())
        } else {
            Shape::Word(v.to_string())
        }
    }
}

/// At most this many words from one brace expansion; more is treated as unknown.
const MAX_BRACE_WORDS: usize = 256;

/// Bash's brace expansion of an unquoted word (`a{b,c}d`, `{1..3}`, `{a..e..2}`, nested),
/// empty results dropped; `None` when it would give more than [`MAX_BRACE_WORDS`] words.
pub(super) fn expand_braces(word: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    expand_into(word, &mut out)?;
    out.retain(|w| !w.is_empty());
    Some(out)
}

fn expand_into(word: &str, out: &mut Vec<String>) -> Option<()> {
    let b = word.as_bytes();
    let mut from = 0;
    while let Some(off) = word[from..].find('{') {
        let open = from + off;
        // The matching `}` and the top-level commas.
        let mut depth = 0usize;
        let mut commas = Vec::new();
        let mut close = None;
        for (k, &c) in b.iter().enumerate().skip(open + 1) {
            match c {
                b'{' => depth += 1,
                b'}' if depth == 0 => {
                    close = Some(k);
                    break;
                }
                b'}' => depth -= 1,
                b',' if depth == 0 => commas.push(k),
                _ => {}
            }
        }
        let Some(close) = close else {
            // This `{` is never closed: it is a plain character; a later one may still open
            // a list (`{{a,b}` is `{a {b`).
            from = open + 1;
            continue;
        };
        let inner = &word[open + 1..close];
        let alternatives: Vec<String> = if !commas.is_empty() {
            let mut parts = Vec::new();
            let mut start = open + 1;
            for &c in &commas {
                parts.push(word[start..c].to_string());
                start = c + 1;
            }
            parts.push(word[start..close].to_string());
            parts
        } else if let Some(seq) = sequence(inner) {
            seq
        } else {
            // `{x}` or `{}`: not an expansion; look further on.
            from = open + 1;
            continue;
        };
        let (pre, post) = (&word[..open], &word[close + 1..]);
        for alt in alternatives {
            expand_into(&format!("{pre}{alt}{post}"), out)?;
            if out.len() > MAX_BRACE_WORDS {
                return None;
            }
        }
        return Some(());
    }
    out.push(word.to_string());
    (out.len() <= MAX_BRACE_WORDS).then_some(())
}

/// `1..5`, `5..1`, `a..e`, `1..10..3`: the words of a sequence expression.
fn sequence(inner: &str) -> Option<Vec<String>> {
    let parts: Vec<&str> = inner.split("..").collect();
    let (a, z, step) = match parts.as_slice() {
        [a, z] => (*a, *z, 1i64),
        [a, z, s] => (*a, *z, s.parse::<i64>().ok()?.abs().max(1)),
        _ => return None,
    };
    let count = |span: i64| usize::try_from(span / step + 1).unwrap_or(usize::MAX);
    if let (Ok(x), Ok(y)) = (a.parse::<i64>(), z.parse::<i64>()) {
        if count((y - x).abs()) > MAX_BRACE_WORDS {
            return Some(vec![String::new(); MAX_BRACE_WORDS + 1]);
        }
        let dir = if y >= x { step } else { -step };
        let mut v = Vec::new();
        let mut n = x;
        while (dir > 0 && n <= y) || (dir < 0 && n >= y) {
            v.push(n.to_string());
            n += dir;
        }
        return Some(v);
    }
    let (mut ca, mut cz) = (a.chars(), z.chars());
    match (ca.next(), ca.next(), cz.next(), cz.next()) {
        (Some(x), None, Some(y), None) if x.is_ascii_alphabetic() && y.is_ascii_alphabetic() => {
            let (x, y) = (x as i64, y as i64);
            let dir = if y >= x { step } else { -step };
            let mut v = Vec::new();
            let mut n = x;
            while (dir > 0 && n <= y) || (dir < 0 && n >= y) {
                v.push(char::from_u32(u32::try_from(n).ok()?)?.to_string());
                n += dir;
            }
            Some(v)
        }
        _ => None,
    }
}

/// The shapes of a command's words; `None` when every word is the word as written (then the
/// words themselves say what runs).
pub(super) fn unknown_shapes(words: &[Word]) -> Option<Vec<Shape>> {
    words
        .iter()
        .any(|w| !w.literal || w.braces || w.glob)
        .then(|| words.iter().flat_map(Shape::of).collect())
}

/// The shapes of the words of the first simple command of `command`, as the policy sees
/// them before it runs (the `bash` oracle test holds them to what bash makes of the words).
pub fn command_shapes(command: &str) -> Vec<Shape> {
    // Substituted commands are recorded before the command they are part of.
    super::shell::parse(command)
        .commands
        .iter()
        .find(|c| !c.nested)
        .map(|c| c.words.iter().flat_map(Shape::of).collect())
        .unwrap_or_default()
}

/// A command that could be anything (shell text that cannot be read).
pub(super) fn anything() -> Vec<Shape> {
    vec![Shape::Many]
}

/// Whether some value of the unknown parts makes `shapes` start with the words `prefix`
/// (the first word also matching by its last path component, as rules match `/bin/rm`).
pub(super) fn could_start_with(shapes: &[Shape], prefix: &[String]) -> bool {
    let globs: Vec<Option<GlobMatcher>> = shapes
        .iter()
        .map(|s| match s {
            Shape::Glob(g) => GlobBuilder::new(g)
                .literal_separator(true)
                .build()
                .ok()
                .map(|g| g.compile_matcher()),
            Shape::Word(_) | Shape::One | Shape::Many => None,
        })
        .collect();
    let mut memo = vec![None; (shapes.len() + 1) * (prefix.len() + 1)];
    Matcher {
        shapes,
        prefix,
        globs: &globs,
        memo: &mut memo,
    }
    .can(0, 0)
}

struct Matcher<'a> {
    shapes: &'a [Shape],
    prefix: &'a [String],
    globs: &'a [Option<GlobMatcher>],
    memo: &'a mut [Option<bool>],
}

impl Matcher<'_> {
    /// Can `shapes[i..]` produce words that start with `prefix[j..]`?
    fn can(&mut self, i: usize, j: usize) -> bool {
        if j == self.prefix.len() {
            return true;
        }
        if i == self.shapes.len() {
            return false;
        }
        let key = i * (self.prefix.len() + 1) + j;
        if let Some(known) = self.memo[key] {
            return known;
        }
        let want = self.prefix[j].as_str();
        let result = match &self.shapes[i] {
            Shape::Word(w) => {
                (w == want || (j == 0 && basename(w) == want)) && self.can(i + 1, j + 1)
            }
            Shape::One => self.can(i + 1, j + 1),
            Shape::Many => self.can(i + 1, j) || self.can(i, j + 1),
            Shape::Glob(pattern) => {
                let hit = match &self.globs[i] {
                    Some(g) => {
                        g.is_match(want)
                            || (j == 0
                                && pattern.contains('/')
                                && GlobBuilder::new(basename(pattern))
                                    .build()
                                    .is_ok_and(|b| b.compile_matcher().is_match(want)))
                    }
                    None => pattern == want,
                };
                // A glob gives one or more names, each matching it.
                hit && (self.can(i + 1, j + 1) || self.can(i, j + 1))
            }
        };
        self.memo[key] = Some(result);
        result
    }
}

/// The words a command glob rule (`Bash(rm -rf *)`) fixes before its first pattern
/// character: any command it matches starts with them.
pub(super) fn glob_prefix(pattern: &str) -> Vec<String> {
    pattern
        .split_whitespace()
        .take_while(|w| !w.contains(['*', '?', '[', '{', '\\']))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    fn w(s: &str) -> Shape {
        Shape::Word(s.into())
    }

    fn p(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn unknown_words_could_be_anything_they_may_expand_to() {
        use Shape::{Many, One};
        // `$r -rf build`: `$r` may be `rm`, or `rm -rf` itself.
        assert!(could_start_with(
            &[Many, w("-rf"), w("build")],
            &p("rm -rf")
        ));
        assert!(could_start_with(&[Many, w("x")], &p("rm -rf")));
        // `"$r" -rf build`: one word, so `-rf` must follow it.
        assert!(could_start_with(&[One, w("-rf"), w("b")], &p("rm -rf")));
        assert!(!could_start_with(&[One, w("b")], &p("rm -rf")));
        assert!(!could_start_with(&[One, w("-rf")], &p("git push")));
        // `rm $f build`, `rm "$f"`: the flag may be in the variable.
        assert!(could_start_with(&[w("rm"), Many, w("build")], &p("rm -rf")));
        assert!(could_start_with(&[w("rm"), One], &p("rm -rf")));
        assert!(!could_start_with(&[w("ls"), Many], &p("rm -rf")));
        // Known words must match; a path matches by its last component first.
        assert!(could_start_with(&[w("/bin/rm"), One], &p("rm -r")));
        assert!(!could_start_with(
            &[w("git"), w("log"), Many],
            &p("git push")
        ));
        assert!(could_start_with(&[w("git"), Many], &p("git push --force")));
        // Nothing left to be the rest of the prefix.
        assert!(!could_start_with(&[w("rm")], &p("rm -rf")));
        assert!(could_start_with(&[w("rm"), Many], &p("rm")));
    }

    #[test]
    fn globs_give_names_that_match_them() {
        let g = |s: &str| Shape::Glob(s.into());
        assert!(could_start_with(&[g("/bin/r?"), w("x")], &p("rm")));
        assert!(could_start_with(&[g("r*")], &p("rm")));
        assert!(!could_start_with(&[g("ls*")], &p("rm")));
        // `rm *` where a file is named `-rf` (the classic): `*` can be `-rf`.
        assert!(could_start_with(&[w("rm"), g("*")], &p("rm -rf")));
        assert!(!could_start_with(&[w("rm"), g("*.o")], &p("rm -rf")));
        // Several names from one glob.
        assert!(could_start_with(&[w("rm"), g("-*")], &p("rm -r -f")));
    }

    #[test]
    fn many_unknown_words_stay_fast() {
        let shapes = vec![Shape::Many; 400];
        let long: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
        let t = std::time::Instant::now();
        assert!(could_start_with(&shapes, &long));
        let mut no = shapes.clone();
        no.push(w("end"));
        no.insert(0, w("git"));
        assert!(!could_start_with(&no, &p("rm")));
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn brace_lists_expand_as_bash_expands_them() {
        let e = |s: &str| expand_braces(s).unwrap();
        assert_eq!(e("build/{a,b}.o"), ["build/a.o", "build/b.o"]);
        assert_eq!(e("{rm,-rf,x}"), ["rm", "-rf", "x"]);
        assert_eq!(e("x{,y}"), ["x", "xy"]);
        assert_eq!(e("{a,b{1,2}}c"), ["ac", "b1c", "b2c"]);
        assert_eq!(e("{1..3}"), ["1", "2", "3"]);
        assert_eq!(e("{3..1}"), ["3", "2", "1"]);
        assert_eq!(e("{a..e..2}"), ["a", "c", "e"]);
        assert_eq!(e("{}x{y}"), ["{}x{y}"]);
        assert_eq!(e("{a,b}{1,2}"), ["a1", "a2", "b1", "b2"]);
        assert_eq!(e("{{a,b}"), ["{a", "{b"]);
        assert!(expand_braces("{1..100000}").is_none());
        assert!(expand_braces("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}").is_none());
    }

    #[test]
    fn glob_rules_fix_their_leading_words() {
        assert_eq!(glob_prefix("rm -rf *"), p("rm -rf"));
        assert_eq!(glob_prefix("git push * --force"), p("git push"));
        assert!(glob_prefix("*rm*").is_empty());
        assert_eq!(glob_prefix("rm -r*"), p("rm"));
    }
}
