//! Words: quote removal the way the shell does it (single, double, `$'…'`, `$"…"`,
//! backslashes), and the expansions inside a word (`$x`, `${…}`, `$(…)`, backticks, `$((…))`,
//! `<(…)`), whose commands are recorded as the parser's own.

use super::{is_name, parse_at_depth, Parser, Term, Word};

impl Parser<'_> {
    /// Reads one word at the current position (not a blank or an operator).
    pub(super) fn read_word(&mut self) -> Option<Word> {
        let mut w = Word::empty();
        let start = self.i;
        let mut brace_open = false;
        let mut brace_list = false;
        let mut bracket_open = false;
        while let Some(c) = self.peek() {
            if self.error.is_some() {
                return None;
            }
            match c {
                ' ' | '\t' | '\r' | '\n' | ';' | '&' | '|' | ')' => break,
                '<' | '>' => {
                    if self.at(1) == Some('(') {
                        // Process substitution.
                        self.i += 2;
                        self.nested(Term::Paren);
                        w.dynamic();
                        w.subst = true;
                        w.value.push_str("<(…)");
                    } else {
                        break;
                    }
                }
                '(' => {
                    let so_far = &w.value;
                    let array = w.literal
                        && (so_far
                            .strip_suffix("+=")
                            .or_else(|| so_far.strip_suffix('=')))
                        .is_some_and(is_name);
                    if array {
                        // `name=( words )`
                        self.i += 1;
                        loop {
                            self.skip_blanks();
                            match self.peek() {
                                None => {
                                    self.fail("unclosed array assignment");
                                    return None;
                                }
                                Some(')') => {
                                    self.i += 1;
                                    break;
                                }
                                Some('\n') => self.i += 1,
                                Some(_) => {
                                    let Some(el) = self.read_word() else {
                                        self.fail("bad array assignment");
                                        return None;
                                    };
                                    w.subst |= el.subst;
                                    if !el.literal {
                                        w.dynamic();
                                    }
                                }
                            }
                        }
                        w.value.push_str("(…)");
                        continue;
                    }
                    break;
                }
                '@' | '!' | '+' | '*' | '?' if self.at(1) == Some('(') => {
                    // extglob `@( ... )`: a pattern; its text is also read as commands so a
                    // shell without extglob (where it is a subshell) is covered too.
                    w.value.push(c);
                    w.expands = true;
                    w.glob = true;
                    self.i += 2;
                    self.nested(Term::Paren);
                    w.value.push_str("(…)");
                }
                '\\' => {
                    w.quoted = true;
                    match self.at(1) {
                        Some('\n') => self.i += 2,
                        Some(n) => {
                            w.value.push(n);
                            self.i += 2;
                        }
                        // A backslash ending the text is literal, except that bash drops
                        // it after a single-quoted string spanning lines (found by the
                        // oracle test; dash keeps it). Following bash keeps `rm\` there
                        // meaning `rm`.
                        None => {
                            if !self.sq_newline {
                                w.value.push('\\');
                            }
                            self.i += 1;
                        }
                    }
                }
                '\'' => {
                    w.quoted = true;
                    self.i += 1;
                    loop {
                        match self.peek() {
                            None => {
                                self.fail("unclosed single quote");
                                return None;
                            }
                            Some('\'') => {
                                self.i += 1;
                                break;
                            }
                            Some(ch) => {
                                self.sq_newline |= ch == '\n';
                                w.value.push(ch);
                                self.i += 1;
                            }
                        }
                    }
                }
                '"' => {
                    w.quoted = true;
                    self.i += 1;
                    self.read_double_quoted(&mut w);
                }
                '$' | '`' => self.dollar_or_backtick(&mut w, false),
                '*' | '?' => {
                    w.expands = true;
                    w.glob = true;
                    w.value.push(c);
                    self.i += 1;
                }
                // `[` alone is literal (the `[`/`[[` commands); `[…]` is a pattern.
                '[' => {
                    bracket_open = true;
                    w.value.push(c);
                    self.i += 1;
                }
                ']' => {
                    w.expands |= bracket_open;
                    w.glob |= bracket_open;
                    w.value.push(c);
                    self.i += 1;
                }
                '{' => {
                    brace_open = true;
                    w.value.push(c);
                    self.i += 1;
                }
                '}' => {
                    if brace_open {
                        w.expands = true;
                        w.braces |= brace_list;
                    }
                    w.value.push(c);
                    self.i += 1;
                }
                _ => {
                    // `{a,b}` and `{1..3}` expand into several words; `{}` and `{x}` do not.
                    brace_list |= brace_open && (c == ',' || (c == '.' && self.at(1) == Some('.')));
                    w.value.push(c);
                    self.i += 1;
                }
            }
        }
        if self.i == start {
            return None;
        }
        Some(w)
    }

    /// Inside `"…"` (the opening quote consumed): POSIX backslash rules, expansions.
    pub(super) fn read_double_quoted(&mut self, w: &mut Word) {
        loop {
            match self.peek() {
                None => {
                    self.fail("unclosed double quote");
                    return;
                }
                Some('"') => {
                    self.i += 1;
                    return;
                }
                Some('\\') => match self.at(1) {
                    Some('\n') => self.i += 2,
                    Some(n @ ('$' | '`' | '"' | '\\')) => {
                        w.value.push(n);
                        self.i += 2;
                    }
                    _ => {
                        w.value.push('\\');
                        self.i += 1;
                    }
                },
                Some('$' | '`') => self.dollar_or_backtick(w, true),
                Some(ch) => {
                    w.value.push(ch);
                    self.i += 1;
                }
            }
        }
    }

    /// At `$` or `` ` ``: an expansion, ANSI-C quoting or a plain `$`.
    pub(super) fn dollar_or_backtick(&mut self, w: &mut Word, in_dquote: bool) {
        let start = self.i;
        if self.peek() == Some('`') {
            self.backtick(w, in_dquote);
            return;
        }
        match self.at(1) {
            Some('\'') if !in_dquote => {
                w.quoted = true;
                self.i += 2;
                self.ansi_c(w);
            }
            Some('"') if !in_dquote => {
                // `$"…"`: locale translation, quoted like "…".
                w.quoted = true;
                self.i += 2;
                self.read_double_quoted(w);
            }
            Some('(') => {
                if self.at(2) == Some('(') {
                    self.i += 3;
                    self.arith_body();
                } else {
                    self.i += 2;
                    self.nested(Term::Paren);
                    w.subst = true;
                }
                w.value.push_str(&self.text(start, self.i));
                w.expansion(in_dquote);
            }
            Some('{') => {
                self.i += 2;
                self.param_body(w);
                w.value.push_str(&self.text(start, self.i));
                w.expansion(in_dquote);
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                self.i += 1;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.i += 1;
                }
                w.value.push_str(&self.text(start, self.i));
                w.expansion(in_dquote);
            }
            Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                self.i += 2;
                w.value.push_str(&self.text(start, self.i));
                w.expansion(in_dquote);
            }
            _ => {
                w.value.push('$');
                self.i += 1;
            }
        }
    }

    /// `` `…` ``: inner backslashes before `$`, `` ` ``, `\` (and `"` inside double quotes)
    /// are removed, then the text is read as commands.
    pub(super) fn backtick(&mut self, w: &mut Word, in_dquote: bool) {
        self.i += 1;
        let mut inner = String::new();
        loop {
            match self.peek() {
                None => {
                    self.fail("unclosed backquote");
                    return;
                }
                Some('`') => {
                    self.i += 1;
                    break;
                }
                Some('\\') => match self.at(1) {
                    Some(n @ ('$' | '`' | '\\')) => {
                        inner.push(n);
                        self.i += 2;
                    }
                    Some('"') if in_dquote => {
                        inner.push('"');
                        self.i += 2;
                    }
                    Some(n) => {
                        inner.push('\\');
                        inner.push(n);
                        self.i += 2;
                    }
                    None => {
                        inner.push('\\');
                        self.i += 1;
                    }
                },
                Some(ch) => {
                    inner.push(ch);
                    self.i += 1;
                }
            }
        }
        let parsed = parse_at_depth(&inner, self.depth + 1);
        if let Some(e) = parsed.error {
            self.fail(&e);
        }
        self.out.extend(parsed.commands);
        w.subst = true;
        w.expansion(in_dquote);
        w.value.push('`');
        w.value.push_str(&inner);
        w.value.push('`');
    }

    /// `$'…'` (the `$'` consumed).
    pub(super) fn ansi_c(&mut self, w: &mut Word) {
        loop {
            let Some(c) = self.peek() else {
                self.fail("unclosed $'…' quote");
                return;
            };
            self.i += 1;
            match c {
                '\'' => return,
                '\\' => {
                    let Some(e) = self.peek() else {
                        self.fail("unclosed $'…' quote");
                        return;
                    };
                    self.i += 1;
                    match e {
                        'a' => w.value.push('\x07'),
                        'b' => w.value.push('\x08'),
                        'e' | 'E' => w.value.push('\x1b'),
                        'f' => w.value.push('\x0c'),
                        'n' => w.value.push('\n'),
                        'r' => w.value.push('\r'),
                        't' => w.value.push('\t'),
                        'v' => w.value.push('\x0b'),
                        '\\' | '\'' | '"' | '?' => w.value.push(e),
                        '0'..='7' => {
                            let mut n = e.to_digit(8).unwrap_or(0);
                            for _ in 0..2 {
                                match self.peek().and_then(|d| d.to_digit(8)) {
                                    Some(d) => {
                                        n = n * 8 + d;
                                        self.i += 1;
                                    }
                                    None => break,
                                }
                            }
                            push_code(w, n & 0xff, true);
                        }
                        'x' | 'u' | 'U' => {
                            let max = match e {
                                'x' => 2,
                                'u' => 4,
                                _ => 8,
                            };
                            let mut n = 0u32;
                            let mut got = 0;
                            while got < max {
                                match self.peek().and_then(|d| d.to_digit(16)) {
                                    Some(d) => {
                                        n = n.wrapping_mul(16).wrapping_add(d);
                                        self.i += 1;
                                        got += 1;
                                    }
                                    None => break,
                                }
                            }
                            if got == 0 {
                                w.value.push('\\');
                                w.value.push(e);
                            } else {
                                push_code(w, n, e == 'x');
                            }
                        }
                        'c' => {
                            if let Some(x) = self.peek() {
                                self.i += 1;
                                push_code(w, (x as u32) & 0x1f, true);
                            }
                        }
                        other => {
                            w.value.push('\\');
                            w.value.push(other);
                        }
                    }
                }
                c => w.value.push(c),
            }
        }
    }

    /// `$(( … ))` or `(( … ))` body (opening consumed): finds the closing `))` and records
    /// the commands of substitutions inside.
    pub(super) fn arith_body(&mut self) {
        let mut depth = 0usize;
        let mut sink = Word::empty();
        loop {
            let Some(c) = self.peek() else {
                self.fail("unclosed arithmetic expansion");
                return;
            };
            match c {
                '(' => {
                    depth += 1;
                    self.i += 1;
                }
                ')' => {
                    self.i += 1;
                    if depth == 0 {
                        if self.peek() == Some(')') {
                            self.i += 1;
                        }
                        return;
                    }
                    depth -= 1;
                }
                '$' | '`' => self.dollar_or_backtick(&mut sink, true),
                '\'' | '"' | '\\' => {
                    let before = self.i;
                    let _ = self.read_word();
                    if self.i == before {
                        self.i += 1;
                    }
                }
                _ => self.i += 1,
            }
        }
    }

    /// `${ … }` body (opening consumed), with nested quotes and expansions.
    pub(super) fn param_body(&mut self, w: &mut Word) {
        let mut depth = 0usize;
        loop {
            let Some(c) = self.peek() else {
                self.fail("unclosed ${…}");
                return;
            };
            match c {
                '}' => {
                    self.i += 1;
                    if depth == 0 {
                        return;
                    }
                    depth -= 1;
                }
                '{' => {
                    depth += 1;
                    self.i += 1;
                }
                '\\' => self.i += 2,
                '\'' => {
                    self.i += 1;
                    while self.peek().is_some_and(|c| c != '\'') {
                        self.i += 1;
                    }
                    self.i += 1;
                }
                '"' => {
                    self.i += 1;
                    let mut inner = Word::empty();
                    self.read_double_quoted(&mut inner);
                    w.subst |= inner.subst;
                }
                '$' | '`' => {
                    let mut inner = Word::empty();
                    self.dollar_or_backtick(&mut inner, true);
                    w.subst |= inner.subst;
                }
                _ => self.i += 1,
            }
        }
    }
}

fn push_code(w: &mut Word, n: u32, byte: bool) {
    if n == 0 {
        // bash stops the string at a NUL; keep it visible rather than silently cut.
        w.value.push('\u{0}');
        return;
    }
    match char::from_u32(n) {
        Some(ch) if !byte || n < 0x80 => w.value.push(ch),
        // A raw high byte is not a char on its own; it cannot spell an ASCII command name.
        _ => w.value.push(char::REPLACEMENT_CHARACTER),
    }
}

impl Word {
    pub(super) fn empty() -> Word {
        Word {
            value: String::new(),
            literal: true,
            quoted: false,
            expands: false,
            glob: false,
            braces: false,
            splits: false,
            subst: false,
        }
    }

    pub(super) fn dynamic(&mut self) {
        self.literal = false;
    }

    /// An expansion: the value is only known when it runs, and outside double quotes it is
    /// split into words (`"$@"` and `"${a[@]}"` are several words even inside them).
    pub(super) fn expansion(&mut self, in_dquote: bool) {
        self.literal = false;
        let all_elements = self.value.ends_with("$@")
            || self.value.ends_with("${@}")
            || (self.value.ends_with('}') && self.value.contains("[@]"));
        self.splits |= !in_dquote || all_elements;
    }
}
