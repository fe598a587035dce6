//! A POSIX/bash command-line reader for the policy: it finds every simple command that can
//! run, wherever it sits (lists, pipelines, `( )`, `{ }`, `if`/`while`/`until`/`for`/`case`
//! bodies, after `!`, inside `$( )`, backticks, `<( )`, `>( )`, `${ }`, `$(( ))` and
//! unquoted here-documents), and removes quotes the way the shell does.
//!
//! It does not execute or expand anything: a word whose value depends on an expansion is
//! marked non-literal, and a word the shell could turn into other words (unquoted glob or
//! brace characters) is marked `expands`. The caller decides what it can see through.

mod word;

/// How deep substitutions and `( )` may nest before the reader gives up.
const MAX_DEPTH: usize = 24;

/// One word after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Word {
    /// The value with quotes removed; expansions are kept as their source text.
    pub value: String,
    /// No parameter, command, arithmetic or process substitution anywhere in the word.
    pub literal: bool,
    /// Some part was quoted or escaped (so `"if"` is not a reserved word).
    pub quoted: bool,
    /// Unquoted glob (`* ? [`, extglob) or brace characters: the shell may replace the word.
    pub expands: bool,
    /// Unquoted glob characters (`* ? […]`, extglob): the word may become file names.
    pub glob: bool,
    /// An unquoted brace list or sequence (`{a,b}`, `{1..3}`): the word becomes several.
    pub braces: bool,
    /// An expansion outside double quotes (or `"$@"`): its value is split into any number of
    /// words, none included.
    pub splits: bool,
    /// Contains a command or process substitution.
    pub subst: bool,
}

/// One simple command as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RawCommand {
    /// Its source text, trimmed.
    pub text: String,
    /// Its words, assignments included, redirections removed.
    pub words: Vec<Word>,
    /// A redirection that writes somewhere other than `/dev/null` or another descriptor.
    pub writes: bool,
    /// A command or process substitution in a word, redirection or here-document.
    pub substitutions: bool,
    /// Standard input comes from a file, a here-document or a here-string.
    pub stdin_redirected: bool,
    /// Standard input comes from a here-document or here-string: text carried in the call.
    pub stdin_inline: bool,
    /// That text, when it holds no expansion (what a shell reading stdin would run).
    pub stdin_text: Option<String>,
    /// The files its redirections name (`< f`, `> f`, `2>> f`; not descriptor duplications).
    pub targets: Vec<String>,
    /// Inside a substitution, group or other nested text (not a command of the line itself).
    pub nested: bool,
}

/// The commands of one command line, or why it could not be read.
#[derive(Debug, Clone, Default)]
pub(super) struct Parsed {
    /// Every simple command; those substituted into a command come before it.
    pub commands: Vec<RawCommand>,
    /// Set when the text is not valid shell (unclosed quote, too deep, ...).
    pub error: Option<String>,
}

/// Reads `src` as a bash command line.
pub(super) fn parse(src: &str) -> Parsed {
    parse_at_depth(src, 0)
}

fn parse_at_depth(src: &str, depth: usize) -> Parsed {
    let chars: Vec<char> = src.chars().collect();
    let mut p = Parser {
        c: &chars,
        i: 0,
        depth,
        out: Vec::new(),
        heredocs: Vec::new(),
        error: None,
        sq_newline: false,
        targets: Vec::new(),
    };
    if depth > MAX_DEPTH {
        p.fail("commands nest too deeply");
    } else {
        p.parse_list(Term::Eof);
    }
    Parsed {
        commands: p.out,
        error: p.error,
    }
}

/// The words of one simple command, quotes removed (POSIX: inside double quotes a backslash
/// only escapes `$`, `` ` ``, `"`, `\` and newline). Reading stops at an unquoted newline or
/// control operator; a `#` starting a word begins a comment.
pub fn shell_words(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let mut p = Parser {
        c: &chars,
        i: 0,
        depth: 0,
        out: Vec::new(),
        heredocs: Vec::new(),
        error: None,
        sq_newline: false,
        targets: Vec::new(),
    };
    let mut words = Vec::new();
    loop {
        p.skip_blanks();
        match p.peek() {
            None | Some('\n' | ';' | '&' | '|' | '(' | ')' | '<' | '>') => break,
            Some('#') => break,
            Some(_) => match p.read_word() {
                Some(w) => words.push(w.value),
                None => break,
            },
        }
    }
    words
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Term {
    /// The end of the text.
    Eof,
    /// A `)` closing `(`, `$(`, `<(` or `>(`.
    Paren,
    /// `;;`, `;&`, `;;&` or `esac` ending one `case` branch.
    CaseItem,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Eof,
    Paren,
    CaseBreak,
    Esac,
}

struct Heredoc {
    delim: String,
    strip_tabs: bool,
    expand: bool,
    owner: Option<usize>,
    /// It feeds standard input (no descriptor number, or 0).
    stdin: bool,
}

/// Where a redirection points standard input.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stdin {
    /// It does not touch standard input.
    Unchanged,
    /// A file or a descriptor.
    File,
    /// A here-string with its value when that is literal.
    HereString(Option<String>),
    /// A here-document (its body is read after the line).
    HereDoc,
}

/// What one redirection does.
struct Redirect {
    writes: bool,
    substitutions: bool,
    stdin: Stdin,
}

/// What the redirections of one simple command did so far.
#[derive(Default)]
struct Redirects {
    writes: bool,
    substitutions: bool,
    stdin_redirected: bool,
    stdin_inline: bool,
    stdin_text: Option<String>,
}

impl Redirects {
    fn add(&mut self, r: Redirect) {
        self.writes |= r.writes;
        self.substitutions |= r.substitutions;
        match r.stdin {
            Stdin::Unchanged => {}
            // The last redirection of stdin is the one that counts.
            Stdin::File => {
                self.stdin_redirected = true;
                self.stdin_inline = false;
                self.stdin_text = None;
            }
            Stdin::HereString(text) => {
                self.stdin_redirected = true;
                self.stdin_inline = true;
                self.stdin_text = text;
            }
            Stdin::HereDoc => {
                self.stdin_redirected = true;
                self.stdin_inline = true;
                self.stdin_text = None;
            }
        }
    }
}

struct Parser<'a> {
    c: &'a [char],
    i: usize,
    depth: usize,
    out: Vec<RawCommand>,
    heredocs: Vec<Heredoc>,
    error: Option<String>,
    /// A single-quoted string held a newline (see the trailing backslash in `read_word`).
    sq_newline: bool,
    /// Redirection targets read since the last recorded command.
    targets: Vec<String>,
}

/// Words that open, continue or close compound commands; at the start of a command they are
/// syntax, and the command follows them.
const RESERVED: [&str; 12] = [
    "!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until",
];

fn is_name(s: &str) -> bool {
    let mut ch = s.chars();
    ch.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && ch.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.c.get(self.i).copied()
    }

    fn at(&self, k: usize) -> Option<char> {
        self.c.get(self.i + k).copied()
    }

    fn fail(&mut self, why: &str) {
        if self.error.is_none() {
            self.error = Some(why.to_string());
        }
        self.i = self.c.len();
    }

    fn text(&self, from: usize, to: usize) -> String {
        self.c[from..to.min(self.c.len())]
            .iter()
            .collect::<String>()
            .trim()
            .to_string()
    }

    /// Skips spaces, tabs and backslash-newline continuations.
    fn skip_blanks(&mut self) {
        loop {
            match self.peek() {
                Some(' ' | '\t' | '\r') => self.i += 1,
                Some('\\') if self.at(1) == Some('\n') => self.i += 2,
                _ => return,
            }
        }
    }

    /// Consumes `( )` (a function definition's parentheses) when they come next.
    fn skip_empty_parens(&mut self) -> bool {
        if self.peek() != Some('(') {
            return false;
        }
        let save = self.i;
        self.i += 1;
        self.skip_blanks();
        if self.peek() == Some(')') {
            self.i += 1;
            true
        } else {
            self.i = save;
            false
        }
    }

    fn skip_comment(&mut self) {
        while self.peek().is_some_and(|c| c != '\n') {
            self.i += 1;
        }
    }

    fn parse_list(&mut self, term: Term) -> End {
        loop {
            if self.error.is_some() {
                return End::Eof;
            }
            self.skip_blanks();
            let Some(c) = self.peek() else {
                if term == Term::Paren {
                    self.fail("unclosed `(`");
                }
                if term == Term::CaseItem {
                    self.fail("unclosed `case`");
                }
                return End::Eof;
            };
            match c {
                '\n' => {
                    self.i += 1;
                    self.read_heredocs();
                }
                ';' => {
                    if term == Term::CaseItem && matches!(self.at(1), Some(';' | '&')) {
                        self.i += 2;
                        if self.peek() == Some('&') {
                            self.i += 1;
                        }
                        return End::CaseBreak;
                    }
                    self.i += 1;
                }
                // `&>file cmd`: a redirection starting a command, not `&` then `>file`.
                '&' if self.at(1) == Some('>') => {
                    if let Some(end) = self.parse_simple(term, false) {
                        return end;
                    }
                }
                '&' | '|' => {
                    self.i += 1;
                    if matches!(self.peek(), Some('&' | '|')) {
                        self.i += 1;
                    }
                }
                ')' => {
                    self.i += 1;
                    if term == Term::Paren {
                        return End::Paren;
                    }
                    // A stray `)` is a syntax error in bash; nothing runs past it.
                    self.fail("unexpected `)`");
                }
                '(' => {
                    self.i += 1;
                    self.nested(Term::Paren);
                    // Redirections after `( ... )` apply to the whole group.
                    self.parse_simple(term, true);
                }
                '#' => self.skip_comment(),
                _ => {
                    let before = self.i;
                    if let Some(end) = self.parse_simple(term, false) {
                        return end;
                    }
                    if self.i == before {
                        // Nothing could be read here; step over it rather than spin.
                        self.i += 1;
                    }
                }
            }
        }
    }

    /// Parses a nested list (substitution or subshell) one level deeper.
    fn nested(&mut self, term: Term) -> End {
        self.depth += 1;
        let end = if self.depth > MAX_DEPTH {
            self.fail("commands nest too deeply");
            End::Eof
        } else {
            self.parse_list(term)
        };
        self.depth -= 1;
        end
    }

    /// Parses one simple command (words and redirections) and records it. `after_group`:
    /// only redirections may follow (a `)`, `}`, `fi`, `done` or `esac` was just closed).
    /// Returns `Some` when it met the end of a `case` branch.
    fn parse_simple(&mut self, term: Term, after_group: bool) -> Option<End> {
        let start = self.i;
        let mut words: Vec<Word> = Vec::new();
        let mut redirects = Redirects::default();
        let mut substitutions = false;
        let mut last_word_end = usize::MAX;
        let mut command_started = after_group;
        loop {
            if self.error.is_some() {
                return None;
            }
            self.skip_blanks();
            let Some(c) = self.peek() else { break };
            match c {
                '\n' | ';' | '&' | '|' | ')' => {
                    if c == '&' && self.at(1) == Some('>') {
                        // `&>file`, `&>>file`
                        self.i += 2;
                        if self.peek() == Some('>') {
                            self.i += 1;
                        }
                        let (w, s) = self.redirect_target(false);
                        redirects.add(Redirect {
                            writes: w,
                            substitutions: s,
                            stdin: Stdin::Unchanged,
                        });
                        continue;
                    }
                    break;
                }
                '(' => {
                    if words.len() == 1 && !after_group && self.skip_empty_parens() {
                        // `name() body`: a definition, the body is parsed as what follows.
                        return None;
                    }
                    break;
                }
                '#' if last_word_end != self.i => {
                    self.skip_comment();
                }
                '<' | '>' if self.at(1) != Some('(') => {
                    // An fd number (`2>`) or `{var}` written right before the operator.
                    let mut fd = None;
                    if last_word_end == self.i {
                        if let Some(last) = words.last() {
                            let v = &last.value;
                            let is_fd = !last.quoted
                                && last.literal
                                && (v.chars().all(|d| d.is_ascii_digit())
                                    || (v.starts_with('{')
                                        && v.ends_with('}')
                                        && is_name(&v[1..v.len() - 1])));
                            if is_fd {
                                fd = words.pop().map(|w| w.value);
                            }
                        }
                    }
                    let r = self.redirect(fd.as_deref());
                    redirects.add(r);
                }
                _ => {
                    let Some(w) = self.read_word() else { break };
                    last_word_end = self.i;
                    substitutions |= w.subst;
                    if !command_started && !w.quoted && w.literal {
                        if term == Term::CaseItem && w.value == "esac" {
                            self.record(start, words, substitutions, redirects);
                            return Some(End::Esac);
                        }
                        if RESERVED.contains(&w.value.as_str()) {
                            // Syntax, not a command: the command starts after it.
                            let closes = matches!(w.value.as_str(), "}" | "fi" | "done");
                            if closes {
                                command_started = true;
                            }
                            continue;
                        }
                        match w.value.as_str() {
                            "case" => {
                                self.parse_case();
                                command_started = true;
                                continue;
                            }
                            "for" | "select" => {
                                self.parse_for();
                                return None;
                            }
                            "function" => {
                                self.skip_blanks();
                                let _name = self.read_word();
                                self.skip_blanks();
                                self.skip_empty_parens();
                                return None;
                            }
                            _ => {}
                        }
                    }
                    command_started = true;
                    words.push(w);
                }
            }
        }
        self.record(start, words, substitutions, redirects);
        None
    }

    fn record(&mut self, start: usize, words: Vec<Word>, substitutions: bool, r: Redirects) {
        if words.is_empty() && !r.writes {
            return;
        }
        let idx = self.out.len();
        self.out.push(RawCommand {
            text: self.text(start, self.i),
            words,
            writes: r.writes,
            substitutions: substitutions || r.substitutions,
            stdin_redirected: r.stdin_redirected,
            stdin_inline: r.stdin_inline,
            stdin_text: r.stdin_text,
            targets: std::mem::take(&mut self.targets),
            nested: self.depth > 0,
        });
        for h in self.heredocs.iter_mut().filter(|h| h.owner.is_none()) {
            h.owner = Some(idx);
        }
    }

    /// `case WORD in [(]pat[|pat]...) list ;; ... esac`.
    fn parse_case(&mut self) {
        self.skip_blanks();
        let _subject = self.read_word();
        loop {
            self.skip_blanks();
            match self.peek() {
                Some('\n') => {
                    self.i += 1;
                    self.read_heredocs();
                }
                Some('#') => self.skip_comment(),
                _ => break,
            }
        }
        match self.read_word() {
            Some(w) if w.value == "in" => {}
            _ => {
                self.fail("`case` without `in`");
                return;
            }
        }
        loop {
            // Blank lines and separators before a pattern.
            loop {
                self.skip_blanks();
                match self.peek() {
                    Some('\n') => {
                        self.i += 1;
                        self.read_heredocs();
                    }
                    Some(';') => self.i += 1,
                    Some('#') => self.skip_comment(),
                    _ => break,
                }
            }
            if self.peek().is_none() {
                self.fail("unclosed `case`");
                return;
            }
            if self.peek() == Some('(') {
                self.i += 1;
            }
            // Patterns up to the unquoted `)`.
            loop {
                self.skip_blanks();
                match self.peek() {
                    None => {
                        self.fail("unclosed `case` pattern");
                        return;
                    }
                    Some(')') => {
                        self.i += 1;
                        break;
                    }
                    Some('|') => self.i += 1,
                    Some(_) => {
                        let Some(w) = self.read_word() else {
                            self.fail("bad `case` pattern");
                            return;
                        };
                        if !w.quoted && w.value == "esac" {
                            return;
                        }
                    }
                }
            }
            match self.nested(Term::CaseItem) {
                End::CaseBreak => continue,
                End::Esac | End::Eof | End::Paren => return,
            }
        }
    }

    /// `for NAME [in WORDS]` up to the separator; the body follows as ordinary commands.
    fn parse_for(&mut self) {
        loop {
            self.skip_blanks();
            match self.peek() {
                None | Some('\n' | ';' | '&' | '|' | ')') => return,
                Some('(') => {
                    // `for (( ... ))`: arithmetic; look inside for substitutions only.
                    self.i += 1;
                    if self.peek() == Some('(') {
                        self.i += 1;
                    }
                    self.arith_body();
                }
                Some('#') => {
                    self.skip_comment();
                    return;
                }
                Some(_) => {
                    if self.read_word().is_none() {
                        return;
                    }
                }
            }
        }
    }

    /// A redirection starting at `<` or `>`; `fd` is the descriptor number written before it.
    fn redirect(&mut self, fd: Option<&str>) -> Redirect {
        let op: String = {
            let mut op = String::new();
            let first = self.c[self.i];
            op.push(first);
            self.i += 1;
            match (first, self.peek()) {
                ('<', Some('<')) => {
                    op.push('<');
                    self.i += 1;
                    match self.peek() {
                        Some('<') | Some('-') => {
                            op.push(self.c[self.i]);
                            self.i += 1;
                        }
                        _ => {}
                    }
                }
                ('<', Some('>' | '&')) | ('>', Some('>' | '|' | '&')) => {
                    op.push(self.c[self.i]);
                    self.i += 1;
                }
                _ => {}
            }
            op
        };
        let on_stdin = fd.is_none_or(|f| f == "0");
        let input = |kind: Stdin| if on_stdin { kind } else { Stdin::Unchanged };
        match op.as_str() {
            "<<" | "<<-" => {
                self.skip_blanks();
                let Some(w) = self.read_word() else {
                    self.fail("here-document without a delimiter");
                    return Redirect {
                        writes: false,
                        substitutions: false,
                        stdin: input(Stdin::HereDoc),
                    };
                };
                self.heredocs.push(Heredoc {
                    delim: w.value,
                    strip_tabs: op == "<<-",
                    expand: !w.quoted,
                    owner: None,
                    stdin: on_stdin,
                });
                Redirect {
                    writes: false,
                    substitutions: false,
                    stdin: input(Stdin::HereDoc),
                }
            }
            "<<<" => {
                self.skip_blanks();
                let Some(w) = self.read_word() else {
                    self.fail("redirection without a target");
                    return Redirect {
                        writes: false,
                        substitutions: false,
                        stdin: input(Stdin::HereString(None)),
                    };
                };
                let text = (w.literal && !w.expands).then(|| w.value.clone());
                Redirect {
                    writes: false,
                    substitutions: w.subst,
                    stdin: input(Stdin::HereString(text)),
                }
            }
            "<" => {
                let (_, s) = self.redirect_target(false);
                Redirect {
                    writes: false,
                    substitutions: s,
                    stdin: input(Stdin::File),
                }
            }
            "<&" | ">&" => {
                let (w, s) = self.redirect_target(true);
                Redirect {
                    writes: w,
                    substitutions: s,
                    stdin: if op == "<&" {
                        input(Stdin::File)
                    } else {
                        Stdin::Unchanged
                    },
                }
            }
            // `<>` opens for writing too; `>`, `>>`, `>|` write.
            _ => {
                let (w, s) = self.redirect_target(false);
                Redirect {
                    writes: w,
                    substitutions: s,
                    stdin: if op == "<>" {
                        input(Stdin::File)
                    } else {
                        Stdin::Unchanged
                    },
                }
            }
        }
    }

    /// Reads a redirection target. Returns (writes, substitutions). `dup`: after `>&`/`<&`,
    /// where a number or `-` only duplicates or closes a descriptor.
    fn redirect_target(&mut self, dup: bool) -> (bool, bool) {
        self.skip_blanks();
        let Some(w) = self.read_word() else {
            self.fail("redirection without a target");
            return (true, false);
        };
        let harmless = w.literal
            && !w.expands
            && (matches!(
                w.value.as_str(),
                "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/fd/1" | "/dev/fd/2"
            ) || (dup
                && !w.value.is_empty()
                && w.value.chars().all(|d| d.is_ascii_digit() || d == '-')));
        if !(dup && !w.value.is_empty() && w.value.chars().all(|d| d.is_ascii_digit() || d == '-'))
        {
            self.targets.push(w.value.clone());
        }
        (!harmless, w.subst)
    }

    /// Reads here-document bodies after a newline; unquoted ones are scanned for
    /// substitutions, which run.
    fn read_heredocs(&mut self) {
        let docs = std::mem::take(&mut self.heredocs);
        for doc in docs {
            let body_start = self.i;
            let mut body_end = self.c.len();
            let mut after = self.c.len();
            let mut line_start = self.i;
            while line_start < self.c.len() {
                let mut j = line_start;
                while j < self.c.len() && self.c[j] != '\n' {
                    j += 1;
                }
                let mut k = line_start;
                if doc.strip_tabs {
                    while k < j && self.c[k] == '\t' {
                        k += 1;
                    }
                }
                let line: String = self.c[k..j].iter().collect();
                if line == doc.delim {
                    body_end = line_start;
                    after = (j + 1).min(self.c.len());
                    break;
                }
                line_start = j + 1;
            }
            let body: String = self.c[body_start..body_end.max(body_start)]
                .iter()
                .collect();
            if let Some(o) = doc.owner.and_then(|o| self.out.get_mut(o)) {
                // The body is part of the command: an exact approval of `python3 <<EOF` must
                // not cover another program under the same first line.
                let whole: String = self.c[body_start..after.max(body_start)].iter().collect();
                o.text.push('\n');
                o.text.push_str(whole.trim_end_matches('\n'));
                // What a shell reading this stdin would run, when no expansion changes it
                // (tabs stripped for `<<-`, as the shell strips them).
                let fixed = !doc.expand || !body.contains(['$', '`', '\\']);
                if doc.stdin && o.stdin_inline && fixed {
                    o.stdin_text = Some(if doc.strip_tabs {
                        body.lines()
                            .map(|l| l.trim_start_matches('\t'))
                            .collect::<Vec<_>>()
                            .join("\n")
                    } else {
                        body.clone()
                    });
                }
            }
            if doc.expand {
                let before = self.out.len();
                self.scan_expansions_in(&body);
                if self.out.len() > before || body.contains("$(") || body.contains('`') {
                    if let Some(o) = doc.owner.and_then(|o| self.out.get_mut(o)) {
                        o.substitutions = true;
                    }
                }
            }
            self.i = after;
        }
    }

    /// Scans text that undergoes expansion like a double-quoted string (here-document body)
    /// and records the commands its substitutions run.
    fn scan_expansions_in(&mut self, text: &str) {
        let chars: Vec<char> = text.chars().collect();
        let mut child = Parser {
            c: &chars,
            i: 0,
            depth: self.depth + 1,
            out: Vec::new(),
            heredocs: Vec::new(),
            error: None,
            sq_newline: false,
            targets: Vec::new(),
        };
        let mut sink = Word::empty();
        while child.i < chars.len() && child.error.is_none() {
            match chars[child.i] {
                '\\' => child.i += 2,
                '$' | '`' => child.dollar_or_backtick(&mut sink, true),
                _ => child.i += 1,
            }
        }
        if let Some(e) = child.error {
            self.fail(&e);
        }
        self.out.extend(child.out);
    }
}
