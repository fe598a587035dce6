//! Key presses as the bytes an xterm-compatible terminal sends for them, for the terminal
//! tabs: the program on the host PTY (a shell, vim, less, htop) must see exactly what it
//! would see in a real terminal. The sequences follow xterm (`ctlseqs`, "PC-Style Function
//! Keys"), which is also what tmux sends; `tests/tui_term_keys.rs` compares with tmux.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// The xterm modifier parameter (`1 + shift + 2·alt + 4·ctrl`), or `None` without modifiers.
fn modifier_param(m: KeyModifiers) -> Option<u8> {
    let mut p = 0u8;
    if m.contains(KeyModifiers::SHIFT) {
        p += 1;
    }
    if m.contains(KeyModifiers::ALT) {
        p += 2;
    }
    if m.contains(KeyModifiers::CONTROL) {
        p += 4;
    }
    (p > 0).then_some(p + 1)
}

/// `CSI 1 ; m X` with modifiers, else `ESC [ X` (or `ESC O X` when `ss3`).
fn letter_key(letter: u8, m: KeyModifiers, ss3: bool) -> Vec<u8> {
    match modifier_param(m) {
        Some(p) => format!("\x1b[1;{p}{}", letter as char).into_bytes(),
        None if ss3 => vec![0x1b, b'O', letter],
        None => vec![0x1b, b'[', letter],
    }
}

/// `CSI n ~` or `CSI n ; m ~`.
fn tilde_key(n: u8, m: KeyModifiers) -> Vec<u8> {
    match modifier_param(m) {
        Some(p) => format!("\x1b[{n};{p}~").into_bytes(),
        None => format!("\x1b[{n}~").into_bytes(),
    }
}

/// The control character of `c` with Ctrl held, as xterm maps it.
fn ctrl_char(c: char) -> Option<u8> {
    match c {
        'a'..='z' => Some(c as u8 - b'a' + 1),
        'A'..='Z' => Some(c.to_ascii_lowercase() as u8 - b'a' + 1),
        ' ' | '@' | '2' => Some(0),
        '[' | '3' => Some(0x1b),
        '\\' | '4' => Some(0x1c),
        ']' | '5' => Some(0x1d),
        '^' | '6' => Some(0x1e),
        '_' | '-' | '7' => Some(0x1f),
        '8' | '?' => Some(0x7f),
        _ => None,
    }
}

/// The bytes for one key press; `app_cursor` is the program's DECCKM state (arrows and
/// Home/End as `ESC O x`). `None` for keys a terminal sends nothing for.
pub fn key_bytes(key: &KeyEvent, app_cursor: bool) -> Option<Vec<u8>> {
    let m = key.modifiers;
    let alt = m.contains(KeyModifiers::ALT);
    let ctrl = m.contains(KeyModifiers::CONTROL);
    // Alt as a prefix: ESC, then the key as without Alt (xterm's metaSendsEscape).
    let esc_prefix = |mut b: Vec<u8>| {
        if alt {
            b.insert(0, 0x1b);
        }
        b
    };
    let bytes = match key.code {
        KeyCode::Char(c) => {
            if ctrl {
                esc_prefix(vec![ctrl_char(c)?])
            } else {
                let mut buf = [0u8; 4];
                esc_prefix(c.encode_utf8(&mut buf).as_bytes().to_vec())
            }
        }
        KeyCode::Enter => esc_prefix(vec![b'\r']),
        KeyCode::Tab => esc_prefix(vec![b'\t']),
        KeyCode::BackTab => b"\x1b[Z".to_vec(),
        KeyCode::Backspace => esc_prefix(vec![if ctrl { 0x08 } else { 0x7f }]),
        KeyCode::Esc => esc_prefix(vec![0x1b]),
        KeyCode::Up => letter_key(b'A', m, app_cursor),
        KeyCode::Down => letter_key(b'B', m, app_cursor),
        KeyCode::Right => letter_key(b'C', m, app_cursor),
        KeyCode::Left => letter_key(b'D', m, app_cursor),
        KeyCode::Home => letter_key(b'H', m, app_cursor),
        KeyCode::End => letter_key(b'F', m, app_cursor),
        KeyCode::Insert => tilde_key(2, m),
        KeyCode::Delete => tilde_key(3, m),
        KeyCode::PageUp => tilde_key(5, m),
        KeyCode::PageDown => tilde_key(6, m),
        KeyCode::F(n @ 1..=4) => letter_key(b"PQRS"[usize::from(n - 1)], m, true),
        KeyCode::F(n @ 5..=12) => {
            tilde_key([15, 17, 18, 19, 20, 21, 23, 24][usize::from(n - 5)], m)
        }
        KeyCode::F(_)
        | KeyCode::Null
        | KeyCode::CapsLock
        | KeyCode::ScrollLock
        | KeyCode::NumLock
        | KeyCode::PrintScreen
        | KeyCode::Pause
        | KeyCode::Menu
        | KeyCode::KeypadBegin
        | KeyCode::Media(_)
        | KeyCode::Modifier(_) => return None,
    };
    Some(bytes)
}

/// Pasted text as a terminal sends it: wrapped in `ESC [200~ … ESC [201~` when the program
/// asked for bracketed paste, newlines as carriage returns (what Enter sends).
pub fn paste_bytes(text: &str, bracketed: bool) -> Vec<u8> {
    let body = text.replace("\r\n", "\r").replace('\n', "\r");
    let mut out = Vec::with_capacity(body.len() + 12);
    if bracketed {
        out.extend_from_slice(b"\x1b[200~");
    }
    out.extend_from_slice(body.as_bytes());
    if bracketed {
        out.extend_from_slice(b"\x1b[201~");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(code: KeyCode, m: KeyModifiers) -> Vec<u8> {
        key_bytes(&KeyEvent::new(code, m), false).unwrap_or_default()
    }

    #[test]
    fn plain_and_control_characters() {
        assert_eq!(k(KeyCode::Char('a'), KeyModifiers::NONE), b"a");
        assert_eq!(k(KeyCode::Char('é'), KeyModifiers::NONE), "é".as_bytes());
        assert_eq!(k(KeyCode::Char('c'), KeyModifiers::CONTROL), b"\x03");
        assert_eq!(k(KeyCode::Char('x'), KeyModifiers::ALT), b"\x1bx");
        assert_eq!(k(KeyCode::Char(' '), KeyModifiers::CONTROL), b"\x00");
    }

    #[test]
    fn paste_is_bracketed_only_when_asked() {
        assert_eq!(paste_bytes("a\nb", false), b"a\rb");
        assert_eq!(paste_bytes("a\r\nb", true), b"\x1b[200~a\rb\x1b[201~");
    }
}
