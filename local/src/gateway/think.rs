//! Splits `<think>…</think>` out of streamed content, even when a tag is cut across deltas.

/// A piece of content after splitting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Visible text.
    Text(String),
    /// Text that was inside `<think>…</think>`.
    Reasoning(String),
}

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

/// Streaming splitter. Feed deltas with [`ThinkSplitter::push`], then call
/// [`ThinkSplitter::finish`] once at the end of the stream.
#[derive(Debug, Default)]
pub struct ThinkSplitter {
    in_think: bool,
    /// Tail of the last delta that may be the start of a tag; held back until decided.
    pending: String,
    /// Just left a think block: drop the newlines models put between it and the answer.
    trim_next_text: bool,
}

impl ThinkSplitter {
    /// A splitter outside any think block.
    pub fn new() -> Self {
        Self::default()
    }

    /// Split one content delta.
    pub fn push(&mut self, delta: &str) -> Vec<Piece> {
        let mut buf = std::mem::take(&mut self.pending);
        buf.push_str(delta);
        let mut out = Vec::new();
        loop {
            let tag = if self.in_think { CLOSE } else { OPEN };
            if let Some(i) = buf.find(tag) {
                self.emit(&buf[..i], &mut out);
                self.in_think = !self.in_think;
                if !self.in_think {
                    self.trim_next_text = true;
                }
                buf.drain(..i + tag.len());
                continue;
            }
            // Hold back the longest suffix that is a proper prefix of the tag. Tags are
            // ASCII starting with '<', so the cut is on a char boundary.
            let hold = (1..tag.len())
                .rev()
                .find(|&k| buf.ends_with(&tag[..k]))
                .unwrap_or(0);
            let cut = buf.len() - hold;
            self.emit(&buf[..cut], &mut out);
            self.pending = buf[cut..].to_string();
            return out;
        }
    }

    /// Flush whatever is held back (an unfinished tag is just text).
    pub fn finish(&mut self) -> Vec<Piece> {
        let rest = std::mem::take(&mut self.pending);
        let mut out = Vec::new();
        self.emit(&rest, &mut out);
        out
    }

    fn emit(&mut self, s: &str, out: &mut Vec<Piece>) {
        if self.in_think {
            if !s.is_empty() {
                out.push(Piece::Reasoning(s.to_string()));
            }
            return;
        }
        let s = if self.trim_next_text {
            s.trim_start_matches(['\n', '\r'])
        } else {
            s
        };
        if !s.is_empty() {
            self.trim_next_text = false;
            out.push(Piece::Text(s.to_string()));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn run(deltas: &[&str]) -> (String, String) {
        let mut s = ThinkSplitter::new();
        let mut pieces = Vec::new();
        for d in deltas {
            pieces.extend(s.push(d));
        }
        pieces.extend(s.finish());
        let mut text = String::new();
        let mut reasoning = String::new();
        for p in pieces {
            match p {
                Piece::Text(t) => text.push_str(&t),
                Piece::Reasoning(r) => reasoning.push_str(&r),
            }
        }
        (text, reasoning)
    }

    #[test]
    fn whole_tags() {
        assert_eq!(
            run(&["<think>plan</think>\n\nanswer"]),
            ("answer".into(), "plan".into())
        );
    }

    #[test]
    fn tags_split_every_byte() {
        let src = "pre<think>deep thought</think>\npost <b>";
        let chars: Vec<String> = src.chars().map(|c| c.to_string()).collect();
        let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(run(&refs), ("prepost <b>".into(), "deep thought".into()));
    }

    #[test]
    fn unfinished_tag_is_text() {
        assert_eq!(run(&["a <thi"]), ("a <thi".into(), String::new()));
        assert_eq!(run(&["x < y"]), ("x < y".into(), String::new()));
    }

    #[test]
    fn multibyte_text_around_tags() {
        assert_eq!(
            run(&["é<th", "ink>ü</th", "ink>ß"]),
            ("éß".into(), "ü".into())
        );
    }
}
