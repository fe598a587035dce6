//! Clipboard over OSC 52: the terminal (also at the far end of SSH) sets its clipboard from an
//! escape sequence, so copying works without any laptop-side helper.

use base64::Engine;

/// Largest text copied; many terminals drop longer OSC 52 payloads.
pub const MAX_COPY_BYTES: usize = 75_000;

/// The escape sequence(s) that put `text` on the clipboard. Inside tmux the sequence is sent
/// twice: plain (honoured with `set-clipboard on`) and wrapped in a DCS passthrough (honoured
/// with `allow-passthrough on`), so one of them reaches the outer terminal.
pub fn sequence(text: &str, in_tmux: bool) -> String {
    let mut end = text.len().min(MAX_COPY_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let b64 = base64::engine::general_purpose::STANDARD.encode(&text.as_bytes()[..end]);
    let plain = format!("\x1b]52;c;{b64}\x07");
    if in_tmux {
        format!("{plain}\x1bPtmux;\x1b\x1b]52;c;{b64}\x07\x1b\\")
    } else {
        plain
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_tmux_sequences() {
        assert_eq!(sequence("hi", false), "\x1b]52;c;aGk=\x07");
        let t = sequence("hi", true);
        assert!(t.starts_with("\x1b]52;c;aGk=\x07\x1bPtmux;\x1b\x1b]52;c;aGk=\x07"));
        assert!(t.ends_with("\x1b\\"));
        let long = "é".repeat(MAX_COPY_BYTES);
        let s = sequence(&long, false);
        let b64 = &s[7..s.len() - 1];
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap_or_default();
        assert!(decoded.len() <= MAX_COPY_BYTES && std::str::from_utf8(&decoded).is_ok());
    }
}
