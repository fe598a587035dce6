//! Word wrapping of styled text into terminal lines of a fixed display width.
//!
//! The transcript needs to know exactly how many rows an entry takes (to scroll by rows and to
//! lay out only the visible window), so it wraps text itself instead of letting the paragraph
//! widget do it.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Display width of a string.
pub(crate) fn width(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

/// Display width of a line.
#[cfg(test)]
pub(crate) fn line_width(line: &Line<'_>) -> usize {
    line.spans.iter().map(|s| width(&s.content)).sum()
}

/// Cut `s` to at most `max` display columns, adding `…` when cut.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if width(s) <= max {
        return s.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut w = 0;
    for c in s.chars() {
        let cw = c.width().unwrap_or(0);
        if w + cw + 1 > max {
            break;
        }
        out.push(c);
        w += cw;
    }
    out.push('…');
    out
}

/// Cut `s` from the left to at most `max` columns, keeping the end (for paths).
pub(crate) fn truncate_left(s: &str, max: usize) -> String {
    if width(s) <= max {
        return s.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let mut kept: Vec<char> = Vec::new();
    let mut w = 0;
    for c in s.chars().rev() {
        let cw = c.width().unwrap_or(0);
        if w + cw + 1 > max {
            break;
        }
        kept.push(c);
        w += cw;
    }
    let mut out = String::from("…");
    out.extend(kept.into_iter().rev());
    out
}

/// Replace tabs and control characters so every char has a known width.
pub(crate) fn sanitize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\t' => out.push_str("    "),
            '\r' => {}
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

/// A piece of one logical line: a word or a run of spaces, with its style.
struct Piece {
    text: String,
    style: Style,
    space: bool,
}

fn pieces(spans: &[Span<'static>]) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::new();
    for span in spans {
        let mut cur = String::new();
        let mut cur_space = false;
        for c in span.content.chars() {
            let is_space = c == ' ';
            if !cur.is_empty() && is_space != cur_space {
                out.push(Piece {
                    text: std::mem::take(&mut cur),
                    style: span.style,
                    space: cur_space,
                });
            }
            cur_space = is_space;
            cur.push(c);
        }
        if !cur.is_empty() {
            out.push(Piece {
                text: cur,
                style: span.style,
                space: cur_space,
            });
        }
    }
    out
}

/// Wrap one logical line (no `\n` inside) to `width` columns. `first` is put before the first
/// row and `rest` before every continuation row (hanging indent). Always returns at least one
/// row.
pub(crate) fn wrap_line(
    spans: &[Span<'static>],
    width: usize,
    first: &[Span<'static>],
    rest: &[Span<'static>],
) -> Vec<Line<'static>> {
    let prefix_w = |p: &[Span<'static>]| p.iter().map(|s| self::width(&s.content)).sum::<usize>();
    let mut rows: Vec<Line<'static>> = Vec::new();
    let mut row: Vec<Span<'static>> = first.to_vec();
    let mut row_w = prefix_w(first);
    let mut row_has_content = false;
    // Never loop forever on absurdly narrow widths: each row holds at least one char.
    let width = width.max(prefix_w(first).max(prefix_w(rest)) + 1);
    let mut push_row = |row: &mut Vec<Span<'static>>, row_w: &mut usize, has: &mut bool| {
        // Trailing spaces at a wrap point are dropped.
        while let Some(last) = row.last() {
            if *has && last.content.chars().all(|c| c == ' ') && !last.content.is_empty() {
                row.pop();
            } else {
                break;
            }
        }
        rows.push(Line::from(std::mem::replace(row, rest.to_vec())));
        *row_w = prefix_w(rest);
        *has = false;
    };
    for piece in pieces(spans) {
        let pw = self::width(&piece.text);
        if piece.space {
            if row_w + pw <= width {
                row.push(Span::styled(piece.text, piece.style));
                row_w += pw;
            } else if row_has_content {
                push_row(&mut row, &mut row_w, &mut row_has_content);
            }
            continue;
        }
        if row_w + pw <= width {
            row.push(Span::styled(piece.text, piece.style));
            row_w += pw;
            row_has_content = true;
            continue;
        }
        if row_has_content && pw <= width - prefix_w(rest) {
            push_row(&mut row, &mut row_w, &mut row_has_content);
            row.push(Span::styled(piece.text, piece.style));
            row_w += pw;
            row_has_content = true;
            continue;
        }
        // A word longer than a row: break it by characters.
        let mut chunk = String::new();
        for c in piece.text.chars() {
            let cw = c.width().unwrap_or(0);
            if row_w + cw > width {
                if !chunk.is_empty() {
                    row.push(Span::styled(std::mem::take(&mut chunk), piece.style));
                    row_has_content = true;
                }
                push_row(&mut row, &mut row_w, &mut row_has_content);
            }
            chunk.push(c);
            row_w += cw;
        }
        if !chunk.is_empty() {
            row.push(Span::styled(chunk, piece.style));
            row_has_content = true;
        }
    }
    rows.push(Line::from(row));
    rows
}

/// Wrap plain text (may contain newlines) in one style, with the same prefix on every row.
pub(crate) fn wrap_text(
    text: &str,
    width: usize,
    style: Style,
    prefix: &[Span<'static>],
) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    for l in text.split('\n') {
        let l = sanitize(l);
        out.extend(wrap_line(&[Span::styled(l, style)], width, prefix, prefix));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn wraps_at_word_boundaries_with_hanging_indent() {
        let spans = vec![Span::raw("the quick brown fox jumps over the lazy dog")];
        let rows = wrap_line(&spans, 16, &[Span::raw("- ")], &[Span::raw("  ")]);
        assert_eq!(
            plain(&rows),
            vec![
                "- the quick",
                "  brown fox",
                "  jumps over the",
                "  lazy dog"
            ]
        );
        assert!(rows.iter().all(|r| line_width(r) <= 16));
    }

    #[test]
    fn breaks_long_words_and_keeps_styles() {
        let spans = vec![
            Span::raw("ab "),
            Span::styled(
                "cdefghijklmnop",
                Style::default().fg(ratatui::style::Color::Red),
            ),
        ];
        // A word longer than a row is broken where it stands, like a terminal would.
        let rows = wrap_line(&spans, 6, &[], &[]);
        assert_eq!(plain(&rows), vec!["ab cde", "fghijk", "lmnop"]);
        assert_eq!(rows[1].spans[0].style.fg, Some(ratatui::style::Color::Red));
        // A word that fits a row moves to the next row whole.
        let rows = wrap_line(&[Span::raw("ab cdef")], 6, &[], &[]);
        assert_eq!(plain(&rows), vec!["ab", "cdef"]);
    }

    #[test]
    fn wide_chars_count_two_columns() {
        let rows = wrap_line(&[Span::raw("日本語テキスト")], 6, &[], &[]);
        assert_eq!(plain(&rows), vec!["日本語", "テキス", "ト"]);
    }

    #[test]
    fn truncation_marks_the_cut() {
        assert_eq!(truncate("hello world", 8), "hello w…");
        assert_eq!(truncate("short", 8), "short");
        assert_eq!(truncate_left("/a/very/long/path", 8), "…ng/path");
    }
}
