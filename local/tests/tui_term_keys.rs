//! The bytes a terminal tab sends for a key, checked against two oracles: tmux (a real
//! terminal emulator: what it sends to a program for the same key, in normal and in
//! application cursor mode) and the `xterm-256color` terminfo entry (the `TERM` the tab's
//! shells get), read with `infocmp`.

mod term_common;

use std::process::Command;
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use reasonix_local::tui::key_bytes;
use term_common::*;

const NONE: KeyModifiers = KeyModifiers::NONE;
const CTRL: KeyModifiers = KeyModifiers::CONTROL;
const ALT: KeyModifiers = KeyModifiers::ALT;
const SHIFT: KeyModifiers = KeyModifiers::SHIFT;

/// (tmux key name, the same key as crossterm reports it).
fn cases() -> Vec<(&'static str, KeyEvent)> {
    let k = |c, m| KeyEvent::new(c, m);
    let mut v = vec![
        ("Up", k(KeyCode::Up, NONE)),
        ("Down", k(KeyCode::Down, NONE)),
        ("Left", k(KeyCode::Left, NONE)),
        ("Right", k(KeyCode::Right, NONE)),
        ("C-Up", k(KeyCode::Up, CTRL)),
        ("M-Left", k(KeyCode::Left, ALT)),
        ("S-Right", k(KeyCode::Right, SHIFT)),
        ("C-S-Down", k(KeyCode::Down, CTRL | SHIFT)),
        ("PPage", k(KeyCode::PageUp, NONE)),
        ("NPage", k(KeyCode::PageDown, NONE)),
        ("IC", k(KeyCode::Insert, NONE)),
        ("DC", k(KeyCode::Delete, NONE)),
        ("C-DC", k(KeyCode::Delete, CTRL)),
        ("BSpace", k(KeyCode::Backspace, NONE)),
        ("Tab", k(KeyCode::Tab, NONE)),
        ("BTab", k(KeyCode::BackTab, SHIFT)),
        ("Enter", k(KeyCode::Enter, NONE)),
        ("Escape", k(KeyCode::Esc, NONE)),
        ("C-a", k(KeyCode::Char('a'), CTRL)),
        ("C-c", k(KeyCode::Char('c'), CTRL)),
        ("C-z", k(KeyCode::Char('z'), CTRL)),
        ("C-Space", k(KeyCode::Char(' '), CTRL)),
        ("C-\\", k(KeyCode::Char('\\'), CTRL)),
        ("C-]", k(KeyCode::Char(']'), CTRL)),
        ("M-x", k(KeyCode::Char('x'), ALT)),
        ("M-Enter", k(KeyCode::Enter, ALT)),
        ("F2", k(KeyCode::F(2), NONE)),
        ("S-F3", k(KeyCode::F(3), SHIFT)),
    ];
    for (i, name) in [
        "F1", "F4", "F5", "F6", "F7", "F8", "F9", "F10", "F11", "F12",
    ]
    .iter()
    .enumerate()
    {
        let n = [1, 4, 5, 6, 7, 8, 9, 10, 11, 12][i];
        v.push((name, k(KeyCode::F(n), NONE)));
    }
    v
}

/// What tmux sends a program for each key: a pane running `cat` on a raw tty, keys
/// separated by a `|` the keys never contain.
fn tmux_bytes(app_cursor: bool) -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("keys.bin");
    let mode = if app_cursor {
        "printf '\\033[?1h'; "
    } else {
        ""
    };
    let cmd = format!(
        "stty raw -echo; {mode}exec cat > {}",
        sh_quote(&out.display().to_string())
    );
    let t = Tmux::start(dir.path(), &cmd, 80, 24, 100);
    t.wait_screen(Duration::from_secs(20), "cat to start", |_| out.is_file());
    // The mode change must reach tmux before the first key does.
    std::thread::sleep(Duration::from_millis(200));
    for (name, _) in cases() {
        t.send_keys(&[name]);
        t.type_text("|");
    }
    t.type_text("#END");
    t.wait_screen(Duration::from_secs(20), "every key", |_| {
        std::fs::read(&out)
            .map(|b| b.ends_with(b"#END"))
            .unwrap_or(false)
    });
    let bytes = std::fs::read(&out).expect("keys");
    let body = &bytes[..bytes.len() - 4];
    let mut parts: Vec<Vec<u8>> = body.split(|b| *b == b'|').map(<[u8]>::to_vec).collect();
    assert_eq!(
        parts.pop().as_deref(),
        Some(&b""[..]),
        "ends with a separator"
    );
    parts
}

fn show(b: &[u8]) -> String {
    b.iter()
        .map(|c| format!("{c:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn key_bytes_match_what_tmux_sends_in_both_cursor_modes() {
    for app_cursor in [false, true] {
        let want = tmux_bytes(app_cursor);
        let cases = cases();
        assert_eq!(want.len(), cases.len(), "{want:?}");
        let mut wrong = Vec::new();
        for ((name, key), want) in cases.iter().zip(want) {
            let got = key_bytes(key, app_cursor).unwrap_or_default();
            if got != want {
                wrong.push(format!(
                    "{name} (app cursor {app_cursor}): tmux {} ours {}",
                    show(&want),
                    show(&got)
                ));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}

/// Unescape a terminfo string value (`\E`, `^X` and plain characters are all we meet).
fn terminfo_value(v: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut it = v.bytes().peekable();
    while let Some(b) = it.next() {
        match b {
            b'\\' => match it.next() {
                Some(b'E') | Some(b'e') => out.push(0x1b),
                Some(c) => out.push(c),
                None => {}
            },
            b'^' => {
                if let Some(c) = it.next() {
                    out.push(c & 0x1f);
                }
            }
            c => out.push(c),
        }
    }
    out
}

#[test]
fn application_mode_keys_match_the_xterm_terminfo_entry() {
    let out = Command::new("infocmp")
        .args(["-1", "xterm-256color"])
        .output()
        .expect("infocmp (ncurses-bin) installed");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let cap = |name: &str| -> Vec<u8> {
        let prefix = format!("{name}=");
        let v = text
            .lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("{name} in the terminfo entry"));
        terminfo_value(v.trim_end_matches(','))
    };
    let k = |c| KeyEvent::new(c, NONE);
    // terminfo describes the keypad-transmit (application) mode programs like vim enable.
    for (name, key) in [
        ("kcuu1", k(KeyCode::Up)),
        ("kcud1", k(KeyCode::Down)),
        ("kcub1", k(KeyCode::Left)),
        ("kcuf1", k(KeyCode::Right)),
        ("khome", k(KeyCode::Home)),
        ("kend", k(KeyCode::End)),
        ("kich1", k(KeyCode::Insert)),
        ("kdch1", k(KeyCode::Delete)),
        ("kpp", k(KeyCode::PageUp)),
        ("knp", k(KeyCode::PageDown)),
        ("kcbt", KeyEvent::new(KeyCode::BackTab, SHIFT)),
        ("kf1", k(KeyCode::F(1))),
        ("kf4", k(KeyCode::F(4))),
        ("kf5", k(KeyCode::F(5))),
        ("kf12", k(KeyCode::F(12))),
    ] {
        assert_eq!(
            show(&key_bytes(&key, true).unwrap_or_default()),
            show(&cap(name)),
            "{name}"
        );
    }
}
