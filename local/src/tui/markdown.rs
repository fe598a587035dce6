//! A small Markdown renderer for streamed assistant text: headings, lists, quotes, rules,
//! fenced code blocks with simple syntax colouring, and inline code / bold / italic / links.
//!
//! It works line by line so a half-streamed answer renders sensibly (an unclosed fence is a
//! code block up to the end; an unclosed `**` styles to the end of its line only).

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::theme;
use super::wrap::{sanitize, width, wrap_line};

/// Render `text` to rows of at most `width` columns.
pub(crate) fn render(text: &str, width: usize) -> Vec<Line<'static>> {
    let mut out: Vec<Line<'static>> = Vec::new();
    let mut code: Option<String> = None;
    let mut last_blank = true;
    for raw in text.split('\n') {
        let line = sanitize(raw);
        let trimmed = line.trim_start();
        if let Some(fence) = trimmed
            .strip_prefix("```")
            .or_else(|| trimmed.strip_prefix("~~~"))
        {
            match code.take() {
                Some(_) => {
                    out.push(Line::from(Span::styled("  └─", theme::gutter())));
                }
                None => {
                    let lang = fence.trim().to_ascii_lowercase();
                    let label = if lang.is_empty() {
                        String::new()
                    } else {
                        format!(" {lang}")
                    };
                    out.push(Line::from(Span::styled(
                        format!("  ┌─{label}"),
                        theme::gutter(),
                    )));
                    code = Some(lang);
                }
            }
            last_blank = false;
            continue;
        }
        if let Some(lang) = &code {
            let spans = highlight(&line, lang);
            let gutter = [Span::styled("  │ ", theme::gutter())];
            out.extend(wrap_line(&spans, width, &gutter, &gutter));
            continue;
        }
        if trimmed.is_empty() {
            if !last_blank {
                out.push(Line::default());
            }
            last_blank = true;
            continue;
        }
        last_blank = false;
        if let Some((level, rest)) = heading(trimmed) {
            let mut style = theme::heading();
            if level == 1 {
                style = style.add_modifier(Modifier::UNDERLINED);
            }
            let spans = inline(rest, style);
            out.extend(wrap_line(&spans, width, &[], &[]));
            continue;
        }
        if is_rule(trimmed) {
            let n = width.min(40);
            out.push(Line::from(Span::styled("─".repeat(n), theme::gutter())));
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix('>') {
            let rest = rest.strip_prefix(' ').unwrap_or(rest);
            let style = theme::dim().add_modifier(Modifier::ITALIC);
            let spans = inline(rest, style);
            let g = [Span::styled("│ ", theme::gutter())];
            out.extend(wrap_line(&spans, width, &g, &g));
            continue;
        }
        let indent = line.len() - trimmed.len();
        if let Some((marker, rest)) = list_item(trimmed) {
            let pad = " ".repeat((indent / 2) * 2);
            let first = vec![
                Span::raw(pad.clone()),
                Span::styled(marker.clone(), theme::dim()),
            ];
            let cont = vec![Span::raw(format!("{pad}{}", " ".repeat(width_of(&marker))))];
            let spans = inline(rest, theme::text());
            out.extend(wrap_line(&spans, width, &first, &cont));
            continue;
        }
        let spans = inline(trimmed, theme::text());
        out.extend(wrap_line(&spans, width, &[], &[]));
    }
    // Drop a trailing blank row: entries are separated by the transcript itself.
    while out.last().map(|l| l.spans.is_empty()).unwrap_or(false) {
        out.pop();
    }
    out
}

fn width_of(s: &str) -> usize {
    width(s)
}

fn heading(line: &str) -> Option<(usize, &str)> {
    let hashes = line.chars().take_while(|c| *c == '#').count();
    if (1..=6).contains(&hashes) {
        let rest = &line[hashes..];
        if let Some(r) = rest.strip_prefix(' ') {
            return Some((hashes, r.trim_end_matches(['#', ' '])));
        }
    }
    None
}

fn is_rule(line: &str) -> bool {
    let t = line.trim_end();
    t.len() >= 3
        && (t.chars().all(|c| c == '-')
            || t.chars().all(|c| c == '*')
            || t.chars().all(|c| c == '_'))
}

/// `- x`, `* x`, `+ x` become a bullet; `1. x` / `1) x` keep their number.
fn list_item(line: &str) -> Option<(String, &str)> {
    for b in ["- ", "* ", "+ "] {
        if let Some(rest) = line.strip_prefix(b) {
            // "- [ ] task" / "- [x] task" task lists.
            if let Some(r) = rest.strip_prefix("[ ] ") {
                return Some(("[ ] ".into(), r));
            }
            if let Some(r) = rest
                .strip_prefix("[x] ")
                .or_else(|| rest.strip_prefix("[X] "))
            {
                return Some(("[x] ".into(), r));
            }
            return Some(("• ".into(), rest));
        }
    }
    let digits = line.chars().take_while(|c| c.is_ascii_digit()).count();
    if digits > 0 && digits <= 3 {
        let rest = &line[digits..];
        for sep in [". ", ") "] {
            if let Some(r) = rest.strip_prefix(sep) {
                return Some((format!("{}{}", &line[..digits], sep), r));
            }
        }
    }
    None
}

/// Inline Markdown: `code`, **bold**, *italic* / _italic_, [text](url).
pub(crate) fn inline(text: &str, base: Style) -> Vec<Span<'static>> {
    let chars: Vec<char> = text.chars().collect();
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut cur = String::new();
    let mut bold = false;
    let mut italic = false;
    let style_of = |bold: bool, italic: bool| {
        let mut s = base;
        if bold {
            s = s.add_modifier(Modifier::BOLD);
        }
        if italic {
            s = s.add_modifier(Modifier::ITALIC);
        }
        s
    };
    let flush = |cur: &mut String, spans: &mut Vec<Span<'static>>, style: Style| {
        if !cur.is_empty() {
            spans.push(Span::styled(std::mem::take(cur), style));
        }
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let prev = if i > 0 { chars[i - 1] } else { ' ' };
        let next = chars.get(i + 1).copied().unwrap_or(' ');
        match c {
            '`' => {
                if let Some(end) = chars[i + 1..].iter().position(|&x| x == '`') {
                    flush(&mut cur, &mut spans, style_of(bold, italic));
                    let code: String = chars[i + 1..i + 1 + end].iter().collect();
                    spans.push(Span::styled(code, theme::inline_code()));
                    i += end + 2;
                    continue;
                }
                cur.push(c);
            }
            '*' if next == '*' => {
                let after = chars.get(i + 2).copied().unwrap_or(' ');
                let opens = !bold && after != ' ';
                let closes = bold && prev != ' ';
                if opens || closes {
                    flush(&mut cur, &mut spans, style_of(bold, italic));
                    bold = !bold;
                    i += 2;
                    continue;
                }
                cur.push_str("**");
                i += 2;
                continue;
            }
            '*' | '_' => {
                let word_char = |x: char| x.is_alphanumeric();
                let opens = !italic && next != ' ' && !word_char(prev);
                let closes = italic && prev != ' ' && !word_char(next);
                if opens || closes {
                    flush(&mut cur, &mut spans, style_of(bold, italic));
                    italic = !italic;
                    i += 1;
                    continue;
                }
                cur.push(c);
            }
            '[' => {
                if let Some((label, url, used)) = link(&chars[i..]) {
                    flush(&mut cur, &mut spans, style_of(bold, italic));
                    spans.push(Span::styled(
                        label,
                        style_of(bold, italic).add_modifier(Modifier::UNDERLINED),
                    ));
                    spans.push(Span::styled(format!(" ({url})"), theme::dim()));
                    i += used;
                    continue;
                }
                cur.push(c);
            }
            _ => cur.push(c),
        }
        i += 1;
    }
    flush(&mut cur, &mut spans, style_of(bold, italic));
    spans
}

fn link(chars: &[char]) -> Option<(String, String, usize)> {
    let close = chars.iter().position(|&c| c == ']')?;
    if chars.get(close + 1) != Some(&'(') {
        return None;
    }
    let end = chars[close + 2..].iter().position(|&c| c == ')')?;
    let label: String = chars[1..close].iter().collect();
    let url: String = chars[close + 2..close + 2 + end].iter().collect();
    if label.is_empty() || url.contains(' ') {
        return None;
    }
    Some((label, url, close + 3 + end))
}

const KEYWORDS: &[&str] = &[
    "as",
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "def",
    "default",
    "defer",
    "do",
    "elif",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "fi",
    "finally",
    "fn",
    "for",
    "from",
    "func",
    "function",
    "go",
    "if",
    "impl",
    "import",
    "in",
    "interface",
    "let",
    "loop",
    "match",
    "mod",
    "mut",
    "new",
    "nil",
    "None",
    "null",
    "package",
    "pass",
    "pub",
    "raise",
    "return",
    "self",
    "Self",
    "static",
    "struct",
    "switch",
    "then",
    "this",
    "throw",
    "trait",
    "true",
    "True",
    "False",
    "try",
    "type",
    "typeof",
    "use",
    "var",
    "void",
    "where",
    "while",
    "with",
    "yield",
    "done",
    "esac",
    "echo",
    "local",
    "unsafe",
    "dyn",
    "ref",
    "crate",
    "super",
    "lambda",
    "not",
    "and",
    "or",
    "is",
    "del",
    "global",
    "private",
    "public",
    "protected",
    "int",
    "bool",
    "char",
    "float",
    "double",
    "string",
    "String",
    "usize",
    "u8",
    "u32",
    "u64",
    "i32",
    "i64",
];

fn comment_markers(lang: &str) -> &'static [&'static str] {
    match lang {
        "python" | "py" | "sh" | "bash" | "zsh" | "shell" | "console" | "toml" | "yaml" | "yml"
        | "ruby" | "rb" | "perl" | "make" | "makefile" | "dockerfile" | "r" | "ini" | "conf" => {
            &["#"]
        }
        "sql" | "lua" | "haskell" | "hs" => &["--"],
        "rust" | "rs" | "c" | "cpp" | "c++" | "h" | "hpp" | "go" | "js" | "javascript" | "ts"
        | "typescript" | "tsx" | "jsx" | "java" | "kotlin" | "kt" | "swift" | "zig" | "cs"
        | "csharp" | "scala" | "dart" | "json" | "jsonc" | "proto" => &["//"],
        _ => &["//", "#"],
    }
}

/// Colour one line of code. Deliberately simple: keywords, strings, numbers, line comments.
pub(crate) fn highlight(line: &str, lang: &str) -> Vec<Span<'static>> {
    if lang == "diff" || lang == "patch" {
        let style = if line.starts_with('+') {
            theme::diff_add()
        } else if line.starts_with('-') {
            theme::diff_del()
        } else if line.starts_with("@@") {
            theme::diff_hunk()
        } else {
            theme::text()
        };
        return vec![Span::styled(line.to_string(), style)];
    }
    let markers = comment_markers(lang);
    let chars: Vec<char> = line.chars().collect();
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, spans: &mut Vec<Span<'static>>| {
        if !cur.is_empty() {
            spans.push(Span::raw(std::mem::take(cur)));
        }
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        // Line comment: the rest of the line.
        let rest: String = chars[i..].iter().take(2).collect();
        let is_comment = markers.iter().any(|m| {
            rest.starts_with(m)
                && (*m != "#" || i == 0 || chars[i - 1] == ' ' || chars[i - 1] == '\t')
        });
        if is_comment {
            flush(&mut cur, &mut spans);
            spans.push(Span::styled(
                chars[i..].iter().collect::<String>(),
                theme::code_comment(),
            ));
            return spans;
        }
        if c == '"' || (c == '\'' && !matches!(lang, "rust" | "rs")) || c == '`' {
            flush(&mut cur, &mut spans);
            let mut s = String::from(c);
            let mut j = i + 1;
            while j < chars.len() {
                s.push(chars[j]);
                if chars[j] == '\\' && j + 1 < chars.len() {
                    s.push(chars[j + 1]);
                    j += 2;
                    continue;
                }
                if chars[j] == c {
                    break;
                }
                j += 1;
            }
            spans.push(Span::styled(s, theme::code_string()));
            i = j + 1;
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            if word
                .chars()
                .next()
                .map(|c| c.is_ascii_digit())
                .unwrap_or(false)
            {
                flush(&mut cur, &mut spans);
                spans.push(Span::styled(word, theme::code_number()));
            } else if KEYWORDS.contains(&word.as_str()) {
                flush(&mut cur, &mut spans);
                spans.push(Span::styled(word, theme::code_keyword()));
            } else {
                cur.push_str(&word);
            }
            continue;
        }
        cur.push(c);
        i += 1;
    }
    flush(&mut cur, &mut spans);
    spans
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::Color;

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn renders_blocks() {
        let md = "# Title\n\nSome `code` and **bold**.\n\n- one\n- two\n  1. nested\n\n```rust\nfn main() { let x = \"s\"; } // hi\n```\n> quote\n---";
        let lines = render(md, 40);
        let text = plain(&lines);
        assert_eq!(
            text,
            vec![
                "Title",
                "",
                "Some code and bold.",
                "",
                "• one",
                "• two",
                "  1. nested",
                "",
                "  ┌─ rust",
                "  │ fn main() { let x = \"s\"; } // hi",
                "  └─",
                "│ quote",
                "────────────────────────────────────────",
            ]
        );
        // Inline code is coloured, bold is bold.
        let some = &lines[2];
        let find = |t: &str| some.spans.iter().find(|s| s.content == t).map(|s| s.style);
        assert_eq!(find("code").and_then(|s| s.fg), Some(Color::Yellow));
        assert!(find("bold")
            .map(|s| s.add_modifier.contains(Modifier::BOLD))
            .unwrap_or(false));
        assert!(!find("Some")
            .map(|s| s.add_modifier.contains(Modifier::BOLD))
            .unwrap_or(true));
    }

    #[test]
    fn highlights_code() {
        let spans = highlight("let n = 42; // answer", "rust");
        let kw = spans
            .iter()
            .find(|s| s.content == "let")
            .map(|s| s.style.fg);
        assert_eq!(kw, Some(Some(Color::Magenta)));
        let num = spans.iter().find(|s| s.content == "42").map(|s| s.style.fg);
        assert_eq!(num, Some(Some(Color::Cyan)));
        assert_eq!(spans.last().map(|s| s.content.as_ref()), Some("// answer"));
    }

    #[test]
    fn snake_case_is_not_italic_and_unclosed_fence_is_code() {
        let lines = render("call my_func_name now\n```\nstill code", 40);
        assert_eq!(
            plain(&lines),
            vec!["call my_func_name now", "  ┌─", "  │ still code"]
        );
        assert!(lines[0]
            .spans
            .iter()
            .all(|s| !s.style.add_modifier.contains(Modifier::ITALIC)));
    }
}
