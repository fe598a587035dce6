//! The multi-line input box: editing, cursor movement and prompt history.

use unicode_width::UnicodeWidthChar;

/// A paste of more than this many lines is shown collapsed (#15 item 6).
pub(crate) const PASTE_COLLAPSE_LINES: usize = 50;
/// A paste of more than this many bytes is shown collapsed.
pub(crate) const PASTE_COLLAPSE_BYTES: usize = 8 * 1024;

/// First char of the private-use plane that stands, in the text, for collapsed paste N.
const PASTE_MARK: u32 = 0xF0000;

/// Editable text with a cursor (a byte index on a char boundary) and submitted history.
///
/// A big paste is one char of the text (a private-use char naming it, drawn as
/// `[pasted 10,000 lines, 512 KB]`): the cursor steps over it, Backspace removes it whole,
/// [`Composer::expand_pastes`] puts the text in place, and [`Composer::expanded`] /
/// [`Composer::take`] give the full text.
#[derive(Debug, Default, Clone)]
pub(crate) struct Composer {
    text: String,
    cursor: usize,
    history: Vec<String>,
    /// Position while browsing history (`None` = editing the draft).
    browsing: Option<usize>,
    draft: String,
    /// Collapsed pastes, by the index their mark char names.
    pastes: Vec<String>,
}

/// `1234567` as `1,234,567`.
fn thousands(n: usize) -> String {
    let d = n.to_string();
    let mut groups: Vec<&str> = Vec::new();
    let mut end = d.len();
    while end > 3 {
        groups.push(&d[end - 3..end]);
        end -= 3;
    }
    groups.push(&d[..end]);
    groups.reverse();
    groups.join(",")
}

/// How a collapsed paste is drawn: `[pasted 10,000 lines, 512 KB]`.
pub(crate) fn paste_label(text: &str) -> String {
    let lines = text.lines().count().max(1);
    let size = if text.len() < 1024 * 1024 {
        format!("{} KB", text.len().div_ceil(1024))
    } else {
        format!("{:.1} MB", text.len() as f64 / (1024.0 * 1024.0))
    };
    format!(
        "[pasted {} line{}, {size}]",
        thousands(lines),
        if lines == 1 { "" } else { "s" }
    )
}

impl Composer {
    /// The text as edited (a collapsed paste is one mark char; see [`Composer::expanded`]).
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// The index of the collapsed paste `c` stands for.
    fn paste_of(&self, c: char) -> Option<usize> {
        let i = (c as u32).checked_sub(PASTE_MARK)? as usize;
        (i < self.pastes.len()).then_some(i)
    }

    /// The text with every collapsed paste in place: what is sent.
    pub(crate) fn expanded(&self) -> String {
        if self.pastes.is_empty() {
            return self.text.clone();
        }
        let mut out = String::with_capacity(self.text.len());
        for c in self.text.chars() {
            match self.paste_of(c) {
                Some(i) => out.push_str(&self.pastes[i]),
                None => out.push(c),
            }
        }
        out
    }

    /// True when the text holds a collapsed paste.
    pub(crate) fn has_collapsed(&self) -> bool {
        self.text.chars().any(|c| self.paste_of(c).is_some())
    }

    /// Put every collapsed paste's text in place (Ctrl-X), the cursor at the end.
    pub(crate) fn expand_pastes(&mut self) {
        let full = self.expanded();
        self.set(&full);
    }

    /// A paste: collapsed when over [`PASTE_COLLAPSE_LINES`] lines or
    /// [`PASTE_COLLAPSE_BYTES`] bytes, else inserted like typing.
    pub(crate) fn paste(&mut self, s: &str) {
        let s = s.replace("\r\n", "\n").replace('\r', "\n");
        if s.lines().count() <= PASTE_COLLAPSE_LINES && s.len() <= PASTE_COLLAPSE_BYTES {
            self.insert(&s);
            return;
        }
        let mark = char::from_u32(PASTE_MARK + self.pastes.len() as u32);
        match mark {
            Some(m) => {
                self.pastes.push(s);
                self.insert(&m.to_string());
            }
            None => self.insert(&s),
        }
    }

    /// Cursor byte offset.
    pub(crate) fn cursor(&self) -> usize {
        self.cursor
    }

    /// True when empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Replace the whole text, cursor at the end.
    pub(crate) fn set(&mut self, text: &str) {
        self.text = text.to_string();
        self.cursor = self.text.len();
        self.browsing = None;
    }

    /// Empty the box.
    pub(crate) fn clear(&mut self) {
        self.set("");
        self.pastes.clear();
    }

    /// Take the text for sending, recording it in the history.
    pub(crate) fn take(&mut self) -> String {
        let t = self.expanded();
        self.text.clear();
        self.pastes.clear();
        self.cursor = 0;
        self.browsing = None;
        self.draft.clear();
        if !t.trim().is_empty() && self.history.last() != Some(&t) {
            self.history.push(t.clone());
        }
        t
    }

    /// Replace the history with the workspace's (from the host, oldest first), keeping
    /// what was sent here meanwhile at the end.
    pub(crate) fn set_history(&mut self, entries: Vec<String>) {
        let local = std::mem::take(&mut self.history);
        self.history = entries;
        for l in local {
            if !self.history.contains(&l) {
                self.history.push(l);
            }
        }
        self.browsing = None;
    }

    /// The newest history entry older than `before` (all when `None`) containing `query`
    /// (case-insensitive): its index and text.
    pub(crate) fn search_back(&self, query: &str, before: Option<usize>) -> Option<(usize, &str)> {
        let q = query.to_lowercase();
        let end = before.unwrap_or(self.history.len()).min(self.history.len());
        self.history[..end]
            .iter()
            .enumerate()
            .rev()
            .find(|(_, h)| h.to_lowercase().contains(&q))
            .map(|(i, h)| (i, h.as_str()))
    }

    /// Insert text at the cursor (typing and paste).
    pub(crate) fn insert(&mut self, s: &str) {
        let s = s.replace("\r\n", "\n").replace('\r', "\n");
        self.text.insert_str(self.cursor, &s);
        self.cursor += s.len();
    }

    fn prev_boundary(&self, i: usize) -> usize {
        self.text[..i]
            .char_indices()
            .last()
            .map(|(p, _)| p)
            .unwrap_or(0)
    }

    fn next_boundary(&self, i: usize) -> usize {
        self.text[i..]
            .chars()
            .next()
            .map(|c| i + c.len_utf8())
            .unwrap_or(i)
    }

    /// Delete the char before the cursor.
    pub(crate) fn backspace(&mut self) {
        if self.cursor > 0 {
            let p = self.prev_boundary(self.cursor);
            self.text.replace_range(p..self.cursor, "");
            self.cursor = p;
        }
    }

    /// Delete the char under the cursor.
    pub(crate) fn delete(&mut self) {
        if self.cursor < self.text.len() {
            let n = self.next_boundary(self.cursor);
            self.text.replace_range(self.cursor..n, "");
        }
    }

    /// Move one char left.
    pub(crate) fn left(&mut self) {
        self.cursor = self.prev_boundary(self.cursor);
    }

    /// Move one char right.
    pub(crate) fn right(&mut self) {
        self.cursor = self.next_boundary(self.cursor);
    }

    fn line_start(&self) -> usize {
        self.text[..self.cursor]
            .rfind('\n')
            .map(|i| i + 1)
            .unwrap_or(0)
    }

    fn line_end(&self) -> usize {
        self.text[self.cursor..]
            .find('\n')
            .map(|i| self.cursor + i)
            .unwrap_or(self.text.len())
    }

    /// Start of the current line.
    pub(crate) fn home(&mut self) {
        self.cursor = self.line_start();
    }

    /// End of the current line.
    pub(crate) fn end(&mut self) {
        self.cursor = self.line_end();
    }

    /// Delete from the line start to the cursor.
    pub(crate) fn kill_to_start(&mut self) {
        let s = self.line_start();
        self.text.replace_range(s..self.cursor, "");
        self.cursor = s;
    }

    /// Delete from the cursor to the line end.
    pub(crate) fn kill_to_end(&mut self) {
        let e = self.line_end();
        if e == self.cursor && e < self.text.len() {
            // At the end of a line: join with the next one.
            self.delete();
        } else {
            self.text.replace_range(self.cursor..e, "");
        }
    }

    /// Delete the word before the cursor.
    pub(crate) fn delete_word(&mut self) {
        let before = &self.text[..self.cursor];
        let trimmed = before.trim_end_matches([' ', '\t']);
        let start = trimmed
            .rfind([' ', '\t', '\n', '/'])
            .map(|i| i + 1)
            .unwrap_or(0);
        let start = if start == self.cursor {
            self.prev_boundary(self.cursor)
        } else {
            start
        };
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
    }

    /// Move left by a word.
    pub(crate) fn word_left(&mut self) {
        let before = &self.text[..self.cursor];
        let trimmed = before.trim_end();
        self.cursor = trimmed
            .rfind(char::is_whitespace)
            .map(|i| i + 1)
            .unwrap_or(0);
    }

    /// Move right by a word.
    pub(crate) fn word_right(&mut self) {
        let after = &self.text[self.cursor..];
        let skip_ws = after.len() - after.trim_start().len();
        let rest = &after[skip_ws..];
        let word = rest.find(char::is_whitespace).unwrap_or(rest.len());
        self.cursor += skip_ws + word;
    }

    /// (line index, column in chars) of the cursor.
    pub(crate) fn cursor_line_col(&self) -> (usize, usize) {
        let before = &self.text[..self.cursor];
        let line = before.matches('\n').count();
        let col = before[self.line_start()..].chars().count();
        (line, col)
    }

    fn move_vertical(&mut self, down: bool) -> bool {
        let (line, col) = self.cursor_line_col();
        let lines: Vec<&str> = self.text.split('\n').collect();
        let target = if down {
            if line + 1 >= lines.len() {
                return false;
            }
            line + 1
        } else {
            if line == 0 {
                return false;
            }
            line - 1
        };
        let start: usize = lines[..target].iter().map(|l| l.len() + 1).sum();
        let off: usize = lines[target].chars().take(col).map(char::len_utf8).sum();
        self.cursor = start + off;
        true
    }

    /// Up: move to the previous line, or recall older history on the first line.
    pub(crate) fn up(&mut self) {
        if self.move_vertical(false) {
            return;
        }
        if self.history.is_empty() {
            return;
        }
        let next = match self.browsing {
            None => {
                self.draft = self.text.clone();
                self.history.len() - 1
            }
            Some(0) => 0,
            Some(i) => i - 1,
        };
        self.browsing = Some(next);
        self.text = self.history[next].clone();
        self.cursor = self.text.len();
    }

    /// Down: move to the next line, or recall newer history (then the draft) on the last line.
    pub(crate) fn down(&mut self) {
        if self.move_vertical(true) {
            return;
        }
        match self.browsing {
            None => {}
            Some(i) if i + 1 < self.history.len() => {
                self.browsing = Some(i + 1);
                self.text = self.history[i + 1].clone();
                self.cursor = self.text.len();
            }
            Some(_) => {
                self.browsing = None;
                self.text = std::mem::take(&mut self.draft);
                self.cursor = self.text.len();
            }
        }
    }

    /// Wrap the text for a box `width` columns wide; returns rows and the cursor (row, col).
    pub(crate) fn layout(&self, width: usize) -> (Vec<String>, (usize, usize)) {
        let width = width.max(2);
        let mut rows: Vec<String> = vec![String::new()];
        let mut col = 0usize;
        let mut cur = (0usize, 0usize);
        for (i, c) in self.text.char_indices() {
            if i == self.cursor {
                cur = (rows.len() - 1, col);
            }
            if c == '\n' {
                rows.push(String::new());
                col = 0;
                continue;
            }
            if let Some(p) = self.paste_of(c) {
                for lc in paste_label(&self.pastes[p]).chars() {
                    if col + 1 > width {
                        rows.push(String::new());
                        col = 0;
                    }
                    if let Some(r) = rows.last_mut() {
                        r.push(lc);
                    }
                    col += 1;
                }
                continue;
            }
            let cw = c.width().unwrap_or(0);
            if col + cw > width {
                rows.push(String::new());
                col = 0;
            }
            if let Some(r) = rows.last_mut() {
                if c == '\t' {
                    r.push(' ');
                } else {
                    r.push(c);
                }
            }
            col += cw;
        }
        if self.cursor >= self.text.len() {
            if col >= width {
                rows.push(String::new());
                col = 0;
            }
            cur = (rows.len() - 1, col);
        }
        (rows, cur)
    }

    /// Replace the byte range `range` of the text and put the cursor after the replacement.
    pub(crate) fn replace_range(&mut self, range: std::ops::Range<usize>, with: &str) {
        self.text.replace_range(range.clone(), with);
        self.cursor = range.start + with.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editing_and_vertical_moves() {
        let mut c = Composer::default();
        c.insert("hello");
        c.insert("\nwor");
        c.insert("ld");
        assert_eq!(c.text(), "hello\nworld");
        assert_eq!(c.cursor_line_col(), (1, 5));
        c.up();
        assert_eq!(c.cursor_line_col(), (0, 5));
        c.left();
        c.backspace();
        assert_eq!(c.text(), "helo\nworld");
        c.down();
        assert_eq!(c.cursor_line_col(), (1, 3));
        c.kill_to_start();
        assert_eq!(c.text(), "helo\nld");
        // At a line start, Ctrl-W joins the lines.
        c.delete_word();
        assert_eq!(c.text(), "helold");
        c.end();
        c.delete_word();
        assert_eq!(c.text(), "");
    }

    #[test]
    fn history_keeps_the_draft() {
        let mut c = Composer::default();
        c.insert("first");
        c.take();
        c.insert("second");
        c.take();
        c.insert("draft");
        c.up();
        assert_eq!(c.text(), "second");
        c.up();
        assert_eq!(c.text(), "first");
        c.up();
        assert_eq!(c.text(), "first");
        c.down();
        assert_eq!(c.text(), "second");
        c.down();
        assert_eq!(c.text(), "draft");
    }

    #[test]
    fn a_big_paste_is_one_collapsed_item_and_is_sent_whole() {
        let mut c = Composer::default();
        c.insert("see ");
        let big: String = (1..=10_000)
            .map(|i| format!("line {i:05} {}\n", "x".repeat(40)))
            .collect();
        c.paste(&big);
        c.insert(" thanks");
        assert!(c.has_collapsed());
        let (rows, cur) = c.layout(200);
        assert_eq!(rows, vec!["see [pasted 10,000 lines, 508 KB] thanks"]);
        assert_eq!(cur, (0, rows[0].chars().count()));
        assert_eq!(c.expanded(), format!("see {big} thanks"));
        // The cursor steps over the paste as one char; Backspace removes it whole.
        for _ in 0..7 {
            c.left();
        }
        c.backspace();
        assert_eq!(c.text(), "see  thanks");
        assert!(!c.has_collapsed());
        // A small paste is plain text; at the threshold it is still plain.
        c.clear();
        let fifty: String = (0..PASTE_COLLAPSE_LINES)
            .map(|i| format!("{i}\n"))
            .collect();
        c.paste(&fifty);
        assert!(!c.has_collapsed());
        assert_eq!(c.text(), fifty);
        c.clear();
        c.paste(&"y".repeat(PASTE_COLLAPSE_BYTES + 1));
        let (rows, _) = c.layout(80);
        assert_eq!(rows, vec!["[pasted 1 line, 9 KB]"]);
        // Expanding puts the text in place; take() sends (and remembers) the full text.
        c.clear();
        c.paste(&big);
        c.expand_pastes();
        assert!(!c.has_collapsed());
        assert_eq!(c.text(), big);
        c.clear();
        c.paste("a\r\nb\r\n");
        c.paste(&big);
        assert_eq!(c.take(), format!("a\nb\n{big}"));
        assert!(c.text().is_empty());
        c.up();
        assert_eq!(
            c.text(),
            format!("a\nb\n{big}"),
            "history holds the full text"
        );
    }

    #[test]
    fn a_collapsed_paste_survives_leaving_the_draft_and_coming_back() {
        let mut c = Composer::default();
        c.insert("old prompt");
        c.take();
        let big = "q\n".repeat(100);
        c.paste(&big);
        let draft = c.text().to_string();
        // A history search shows another entry, then Esc restores the draft.
        c.set("old prompt");
        c.set(&draft);
        assert_eq!(c.expanded(), big);
        // Up / Down through the history come back to it too.
        c.up();
        assert_eq!(c.text(), "old prompt");
        c.down();
        assert_eq!(c.take(), big);
    }

    #[test]
    fn paste_labels() {
        assert_eq!(paste_label("a\nb\n"), "[pasted 2 lines, 1 KB]");
        assert_eq!(
            paste_label(&"z\n".repeat(1_500_000)),
            "[pasted 1,500,000 lines, 2.9 MB]"
        );
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
    }

    #[test]
    fn layout_wraps_and_places_the_cursor() {
        let mut c = Composer::default();
        c.insert("abcdefgh\nxy");
        let (rows, cur) = c.layout(5);
        assert_eq!(rows, vec!["abcde", "fgh", "xy"]);
        assert_eq!(cur, (2, 2));
        c.set("abcde");
        let (rows, cur) = c.layout(5);
        assert_eq!(rows, vec!["abcde", ""]);
        assert_eq!(cur, (1, 0));
    }
}
