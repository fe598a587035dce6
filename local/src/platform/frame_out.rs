//! The workbench's screen output, written whole. Ratatui writes a frame as many small pieces
//! and std's stdout passes them on in its own pieces (its line buffer, and on Windows at most
//! a few KiB per `WriteConsoleW`), so an escape sequence could be cut in two between two
//! console writes. A terminal keeps its parser's state across writes; wine's console (what
//! the Windows build is tested in) does not, and printed the halves as text (`?25l`,
//! `;77H`) and text at the wrong places. [`FrameOut`] holds a frame until it is flushed, then
//! writes it in pieces that each begin at an escape sequence (or, inside a long run of text,
//! at a character boundary), each small enough to be one console write.

use std::io::{self, Write};

/// At most this many bytes per write: under std's per-call limit for the Windows console
/// (4 KiB of UTF-8), so each piece is one console write.
const PIECE: usize = 2048;

/// A writer that keeps everything until `flush` and then writes it as [`pieces`].
pub struct FrameOut<W: Write> {
    inner: W,
    buf: Vec<u8>,
}

impl<W: Write> FrameOut<W> {
    pub fn new(inner: W) -> FrameOut<W> {
        FrameOut {
            inner,
            buf: Vec::with_capacity(16 * 1024),
        }
    }
}

impl<W: Write> Write for FrameOut<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let buf = std::mem::take(&mut self.buf);
        for piece in pieces(&buf, PIECE) {
            self.inner.write_all(piece)?;
            self.inner.flush()?;
        }
        // Keep the allocation for the next frame.
        self.buf = buf;
        self.buf.clear();
        self.inner.flush()
    }
}

const ESC: u8 = 0x1b;

/// `data` cut into pieces of at most `max` bytes: each cut is just before an escape byte
/// when the piece has one past its start, else at the last UTF-8 character boundary.
pub fn pieces(data: &[u8], max: usize) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while rest.len() > max {
        let window = &rest[..max];
        let cut = match window.iter().rposition(|&b| b == ESC) {
            Some(p) if p > 0 => p,
            _ => {
                // No sequence starts in the window after its first byte: cut in the text at
                // a character boundary (a continuation byte is 0b10xx_xxxx).
                let mut c = max;
                while c > 1 && rest[c] & 0xC0 == 0x80 {
                    c -= 1;
                }
                c
            }
        };
        out.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte ranges of the CSI sequences (`ESC [ params final`) in `data`.
    fn sequences(data: &[u8]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < data.len() {
            if data[i] == ESC && data.get(i + 1) == Some(&b'[') {
                let mut j = i + 2;
                while j < data.len() && !(0x40..=0x7e).contains(&data[j]) {
                    j += 1;
                }
                out.push((i, j + 1));
                i = j + 1;
            } else {
                i += 1;
            }
        }
        out
    }

    /// A frame as ratatui draws one: cursor moves, colours and text, box drawing included.
    fn frame(cells: usize) -> Vec<u8> {
        let mut f = Vec::new();
        for i in 0..cells {
            f.extend_from_slice(format!("\x1b[{};{}H", i % 50 + 1, i % 200 + 1).as_bytes());
            f.extend_from_slice(format!("\x1b[38;5;{}m", i % 256).as_bytes());
            f.extend_from_slice("─│┌ connected · é".as_bytes());
        }
        f
    }

    #[test]
    fn no_piece_cuts_an_escape_sequence_and_none_is_too_big() {
        for cells in [0, 1, 7, 300, 5000] {
            let data = frame(cells);
            for max in [64, 100, PIECE] {
                let ps = pieces(&data, max);
                assert_eq!(ps.concat(), data, "the pieces are the frame");
                assert!(ps.iter().all(|p| p.len() <= max && !p.is_empty()));
                let seqs = sequences(&data);
                let mut at = 0;
                for p in &ps[..ps.len().saturating_sub(1)] {
                    at += p.len();
                    assert!(
                        !seqs.iter().any(|&(s, e)| s < at && at < e),
                        "a cut at {at} falls inside a sequence (max {max}, {cells} cells)"
                    );
                    assert_eq!(data[at], ESC, "pieces begin at a sequence");
                }
            }
        }
    }

    #[test]
    fn a_long_run_of_text_is_cut_at_character_boundaries() {
        let text = "é─a".repeat(2000);
        let data = [b"\x1b[1;1H".as_slice(), text.as_bytes()].concat();
        let ps = pieces(&data, 100);
        assert_eq!(ps.concat(), data);
        for p in &ps[1..] {
            assert!(
                std::str::from_utf8(p).is_ok(),
                "a piece starts or ends mid-character"
            );
        }
        assert!(ps.iter().all(|p| p.len() <= 100));
    }

    /// Counts the writes reaching the inner writer.
    struct Writes(Vec<Vec<u8>>);
    impl Write for Writes {
        fn write(&mut self, d: &[u8]) -> io::Result<usize> {
            self.0.push(d.to_vec());
            Ok(d.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn nothing_reaches_the_console_before_the_flush_and_all_of_it_after() {
        let mut out = FrameOut::new(Writes(Vec::new()));
        let data = frame(400);
        for chunk in data.chunks(7) {
            out.write_all(chunk).expect("write");
        }
        assert!(
            out.inner.0.is_empty(),
            "written before the frame was flushed"
        );
        out.flush().expect("flush");
        assert_eq!(out.inner.0.concat(), data);
        assert!(out.inner.0.iter().all(|w| w.len() <= PIECE && w[0] == ESC));
        out.flush().expect("flush");
        assert_eq!(
            out.inner.0.concat(),
            data,
            "a second flush writes nothing again"
        );
    }
}
