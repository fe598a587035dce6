//! Server-sent events, the framing every wire format streams in: [`SseLines`] cuts the byte
//! stream into lines (UTF-8 safe across network chunks) and [`classify_line`] tells `data:`
//! payloads from the rest. What a payload means is the wire format's business
//! ([`super::wire::StreamParser`]).

/// Splits a byte stream into lines; `\r\n` and `\n` both end a line.
#[derive(Debug, Default)]
pub struct SseLines {
    buf: Vec<u8>,
}

impl SseLines {
    /// An empty splitter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add bytes; returns the lines completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut lines = Vec::new();
        while let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buf.drain(..=i).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            lines.push(String::from_utf8_lossy(&line).into_owned());
        }
        lines
    }

    /// The unterminated last line, if any (a stream may end without a final newline).
    pub fn finish(&mut self) -> Option<String> {
        if self.buf.is_empty() {
            return None;
        }
        let line = String::from_utf8_lossy(&self.buf).trim_end().to_string();
        self.buf.clear();
        Some(line)
    }
}

/// What one SSE line is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseLine<'a> {
    /// `data: <payload>`.
    Data(&'a str),
    /// Empty line, comment (`: ping`), `event:`, `id:` or `retry:`.
    Ignorable,
    /// Anything else (e.g. a JSON error body sent without SSE framing).
    Other(&'a str),
}

/// Classify one line.
pub fn classify_line(line: &str) -> SseLine<'_> {
    if let Some(rest) = line.strip_prefix("data:") {
        return SseLine::Data(rest.strip_prefix(' ').unwrap_or(rest).trim_end());
    }
    let t = line.trim();
    if t.is_empty()
        || t.starts_with(':')
        || t.starts_with("event:")
        || t.starts_with("id:")
        || t.starts_with("retry:")
    {
        SseLine::Ignorable
    } else {
        SseLine::Other(line)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_chunks_and_utf8() {
        let mut l = SseLines::new();
        let bytes = "data: é\r\n\ndata: x".as_bytes();
        let mut got = Vec::new();
        for b in bytes {
            got.extend(l.push(&[*b]));
        }
        assert_eq!(got, vec!["data: é".to_string(), String::new()]);
        assert_eq!(l.finish().as_deref(), Some("data: x"));
    }

    #[test]
    fn classify() {
        assert_eq!(classify_line("data: {}"), SseLine::Data("{}"));
        assert_eq!(classify_line("data:[DONE]"), SseLine::Data("[DONE]"));
        assert_eq!(classify_line(": keep-alive"), SseLine::Ignorable);
        assert_eq!(
            classify_line("{\"error\":1}"),
            SseLine::Other("{\"error\":1}")
        );
    }
}
