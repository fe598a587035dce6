//! The workbench's screen output cut into pieces that each fit on one row of a console that
//! lays VT output out as text ([`ConsoleRows`]).
//!
//! Wine's console (wine 8, `conhost --unix` on a Unix terminal) does not interpret VT escape
//! sequences: it stores them as characters in its own screen model and passes them on to the
//! terminal, then follows its model. Every time the characters written fill a row of that
//! model (the console's width, escape bytes counted) it moves the terminal's cursor to the
//! start of the next row (`\r\r\n`), in the middle of the workbench's output, and it turns
//! four or more blanks at the end of a row into "erase to the end of the line" (`ESC [ K`).
//! Text after such a point landed on the wrong row, and blanks meant to clear a box cleared
//! the rest of the line instead, so cells of earlier screens (the connect box) stayed on the
//! screen and new ones (the tab bar's `1 bash`) went to the wrong place.
//!
//! So on Windows every flush is written as pieces of at most the console's width less one
//! character, each starting with `\r` (a console that lays text out goes back to its row's
//! start, one that interprets VT moves the cursor to the row's start) and then an absolute
//! cursor position (the position the previous piece left the cursor at), and never ending
//! in a blank. A VT console draws exactly the same screen; wine's console never fills a row.
//! On other systems the output goes through unchanged.

use std::io::{self, Write};

/// A writer that cuts each flush into row-sized pieces (see the module documentation), or
/// passes everything through unchanged.
pub struct ConsoleRows<W: Write> {
    inner: W,
    /// Pieces of at most this many UTF-16 units; `None` passes everything through.
    limit: Option<fn() -> usize>,
    buf: Vec<u8>,
    /// Where the cursor is after what was written so far (0-based column, row), once known.
    pos: Option<(u32, u32)>,
}

/// The console's width less one, from the console itself (80 when it cannot be read).
fn console_row() -> usize {
    crossterm::terminal::size()
        .map(|(w, _)| usize::from(w))
        .unwrap_or(80)
        .saturating_sub(1)
        .max(MIN_PIECE)
}

/// The smallest piece: an absolute cursor position and a few characters always fit.
const MIN_PIECE: usize = 24;

/// Room kept in each piece for the position written after a trailing blank.
const RESERVE: usize = 12;

impl<W: Write> ConsoleRows<W> {
    /// Row-sized pieces on Windows, unchanged output elsewhere.
    pub fn for_this_console(inner: W) -> Self {
        Self::with_limit(inner, cfg!(windows).then_some(console_row as fn() -> usize))
    }

    fn with_limit(inner: W, limit: Option<fn() -> usize>) -> Self {
        ConsoleRows {
            inner,
            limit,
            buf: Vec::new(),
            pos: None,
        }
    }

    /// Write what is buffered as pieces of at most `limit` UTF-16 units.
    fn write_pieces(&mut self, limit: usize) -> io::Result<()> {
        let data = std::mem::take(&mut self.buf);
        let text = String::from_utf8_lossy(&data);
        let mut piece = String::new();
        let mut units = 0usize;
        let mut last_blank = false;
        for token in Tokens(&text) {
            let len = token.encode_utf16().count();
            if units > 0 && units + len > limit.saturating_sub(RESERVE) {
                self.put(&mut piece, last_blank)?;
                units = 0;
            }
            if units == 0 {
                if let (false, Some((col, row))) = (is_cup(token), self.pos) {
                    let cup = cup(col, row);
                    units += cup.len();
                    piece.push_str(&cup);
                }
            }
            piece.push_str(token);
            units += len;
            last_blank = token == " ";
            self.advance(token);
        }
        if units > 0 {
            self.put(&mut piece, last_blank)?;
        }
        Ok(())
    }

    /// Write one piece: `\r`, the piece, and an absolute position after it when it would end
    /// in a blank (wine's console makes trailing blanks an erase to the end of the line).
    fn put(&mut self, piece: &mut String, last_blank: bool) -> io::Result<()> {
        if last_blank {
            if let Some((col, row)) = self.pos {
                piece.push_str(&cup(col, row));
            }
        }
        self.inner.write_all(b"\r")?;
        self.inner.write_all(piece.as_bytes())?;
        self.inner.flush()?;
        piece.clear();
        Ok(())
    }

    /// Follow the cursor through one token.
    fn advance(&mut self, token: &str) {
        if let Some(p) = parse_cup(token) {
            self.pos = Some(p);
            return;
        }
        let Some((col, row)) = self.pos.as_mut() else {
            return;
        };
        let mut chars = token.chars();
        match chars.next() {
            Some('\x1b') => {
                if let Some(rest) = token.strip_prefix("\x1b[") {
                    let n = rest[..rest.len().saturating_sub(1)]
                        .parse::<u32>()
                        .unwrap_or(1)
                        .max(1);
                    match rest.chars().last() {
                        Some('A') => *row = row.saturating_sub(n),
                        Some('B') => *row += n,
                        Some('C') => *col += n,
                        Some('D') => *col = col.saturating_sub(n),
                        Some('G') => *col = n - 1,
                        _ => {}
                    }
                }
            }
            Some('\r') => *col = 0,
            Some('\n') => *row += 1,
            Some('\x08') => *col = col.saturating_sub(1),
            Some(c) if c.is_control() => {}
            Some(c) => *col += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0) as u32,
            None => {}
        }
    }
}

/// `ESC [ row ; col H` for a 0-based position.
fn cup(col: u32, row: u32) -> String {
    format!("\x1b[{};{}H", row + 1, col + 1)
}

fn is_cup(token: &str) -> bool {
    parse_cup(token).is_some()
}

/// The 0-based (column, row) of an absolute cursor position `ESC [ r ; c H` (or `f`).
fn parse_cup(token: &str) -> Option<(u32, u32)> {
    let body = token
        .strip_prefix("\x1b[")?
        .strip_suffix('H')
        .or_else(|| token.strip_prefix("\x1b[")?.strip_suffix('f'))?;
    let (r, c) = body.split_once(';').unwrap_or((body, ""));
    let num = |s: &str| -> Option<u32> {
        if s.is_empty() {
            Some(1)
        } else {
            s.parse::<u32>().ok()
        }
    };
    Some((num(c)?.max(1) - 1, num(r)?.max(1) - 1))
}

/// The output as tokens that are never cut: one escape sequence (CSI, or a string such as
/// OSC up to its terminator, or `ESC` and one character), or one character.
struct Tokens<'a>(&'a str);

impl<'a> Iterator for Tokens<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let s = self.0;
        let mut it = s.char_indices();
        let (_, first) = it.next()?;
        let end = if first != '\x1b' {
            first.len_utf8()
        } else {
            match s[1..].chars().next() {
                Some('[') => s[2..]
                    .char_indices()
                    .find(|(_, c)| ('\x40'..='\x7e').contains(c))
                    .map(|(i, c)| 2 + i + c.len_utf8())
                    .unwrap_or(s.len()),
                // OSC, DCS, APC, PM, SOS: up to BEL or ST (`ESC \`).
                Some(']' | 'P' | '_' | '^' | 'X') => {
                    let body = &s[2..];
                    let bel = body.find('\x07').map(|i| 2 + i + 1);
                    let st = body.find("\x1b\\").map(|i| 2 + i + 2);
                    match (bel, st) {
                        (Some(a), Some(b)) => a.min(b),
                        (a, b) => a.or(b).unwrap_or(s.len()),
                    }
                }
                Some(c) => 1 + c.len_utf8(),
                None => 1,
            }
        };
        let (token, rest) = s.split_at(end);
        self.0 = rest;
        Some(token)
    }
}

impl<W: Write> Write for ConsoleRows<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.limit.is_none() {
            return self.inner.write(data);
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.limit {
            None => self.inner.flush(),
            Some(limit) => {
                if !self.buf.is_empty() {
                    self.write_pieces(limit())?;
                }
                self.inner.flush()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(limit: fn() -> usize, writes: &[&str]) -> Vec<u8> {
        let mut w = ConsoleRows::with_limit(Vec::new(), Some(limit));
        for s in writes {
            w.write_all(s.as_bytes()).expect("write");
            w.flush().expect("flush");
        }
        w.inner
    }

    /// The pieces written (each starts with `\r`).
    fn pieces(out: &[u8]) -> Vec<String> {
        String::from_utf8(out.to_vec())
            .expect("utf-8")
            .split('\r')
            .skip(1)
            .map(str::to_string)
            .collect()
    }

    /// A screen drawn from VT output, as a VT terminal shows it (`vt100`).
    fn screen(out: &[u8]) -> String {
        let nz = |n| std::num::NonZeroU16::new(n).expect("non-zero");
        let mut p = vt100::Parser::new(nz(10), nz(60), 0);
        p.process(out);
        p.screen().contents()
    }

    fn thirty() -> usize {
        30
    }

    #[test]
    fn pieces_fit_a_row_start_at_a_position_and_draw_the_same_screen() {
        let frame = concat!(
            "\x1b[?25l\x1b[2;5H\x1b[38;5;2;49mconnected to the host at last\x1b[39;49m",
            " and more text on the same row\x1b[5;1H\u{2500}\u{2500}\u{2500} box \u{2502}",
            "\x1b[7;10H          \x1b[7;40Hright\x1b[0m\x1b[?25h"
        );
        let out = cut(thirty, &[frame]);
        assert_eq!(screen(&out), screen(frame.as_bytes()), "same screen");
        let pieces = pieces(&out);
        assert!(pieces.len() > 3, "{pieces:?}");
        for p in &pieces {
            assert!(p.encode_utf16().count() <= 30, "too long: {p:?}");
            assert!(!p.ends_with(' '), "ends in a blank: {p:?}");
        }
        // A piece cut inside the text goes on from where the text was: `\r`, then the
        // position, then the text.
        assert!(
            pieces.iter().any(|p| p.starts_with("\x1b[2;")
                && p.contains("host")
                && !p.starts_with("\x1b[2;5H")),
            "{pieces:?}"
        );
    }

    #[test]
    fn blanks_that_clear_cells_are_followed_by_a_position() {
        let clear = format!("\x1b[7;10H{}", " ".repeat(40));
        let out = cut(thirty, &[&clear]);
        let pieces = pieces(&out);
        assert!(pieces.len() >= 3, "{pieces:?}");
        assert!(pieces[0].starts_with("\x1b[7;10H "), "{pieces:?}");
        assert!(
            pieces.last().is_some_and(|p| p.ends_with("\x1b[7;50H")),
            "{pieces:?}"
        );
        assert!(pieces.iter().all(|p| p.ends_with('H')), "{pieces:?}");
        assert_eq!(screen(&out), screen(clear.as_bytes()));
    }

    #[test]
    fn the_position_carries_over_flushes_and_escape_strings_are_never_cut() {
        let osc = format!("\x1b]52;c;{}\x07", "QUJD".repeat(20));
        let out = cut(
            thirty,
            &["\x1b[3;3Habc", &osc, "defghijklmnopqrstuvwxyz0123456789"],
        );
        let pieces = pieces(&out);
        assert!(
            pieces.iter().any(|p| p.ends_with(&osc)),
            "the OSC string whole: {pieces:?}"
        );
        assert!(
            pieces.iter().any(|p| p.starts_with("\x1b[3;6Hdef")),
            "the next flush starts where the last one left the cursor: {pieces:?}"
        );
        assert_eq!(
            screen(&out),
            screen(format!("\x1b[3;3Habc{osc}defghijklmnopqrstuvwxyz0123456789").as_bytes())
        );
    }

    #[test]
    fn wide_characters_move_the_cursor_two_columns() {
        let out = cut(
            thirty,
            &["\x1b[1;1H\u{4e2d}\u{6587}abcdefghijklmnopqrstuvwxyz"],
        );
        assert_eq!(
            screen(&out),
            screen("\x1b[1;1H\u{4e2d}\u{6587}abcdefghijklmnopqrstuvwxyz".as_bytes())
        );
    }

    #[test]
    fn without_a_limit_the_output_is_unchanged() {
        let mut w = ConsoleRows::with_limit(Vec::new(), None);
        w.write_all(b"\x1b[2;5H   ").expect("write");
        w.flush().expect("flush");
        assert_eq!(w.inner, b"\x1b[2;5H   ");
    }
}
