//! The laptop's console as a byte stream (`reasonix term` forwards the bytes it reads to the
//! host's PTY). A Unix terminal in raw mode already delivers keys as VT sequences; the
//! Windows console does so only with `ENABLE_VIRTUAL_TERMINAL_INPUT` switched on (and line
//! editing, echo and Ctrl-C processing off, so Ctrl-C reaches the host's shell as `0x03`).
//! [`VtInput::enable`] does that for as long as it lives and restores the console after.
//!
//! The keys are then read with [`Keys`], not through std's stdin: on a Windows console
//! std's stdin follows the DOS convention that Ctrl-Z ends the input (`ReadConsoleW` told to
//! wake on it, a trailing Ctrl-Z dropped, a lone one read as end of file), so Ctrl-Z typed
//! in `reasonix term` would end the terminal instead of reaching the host's shell as `0x1a`
//! (job control's suspend). [`Keys`] reads the console with no wake-up character and
//! converts its UTF-16 to UTF-8 itself ([`utf16_keys`]).

/// `ENABLE_PROCESSED_INPUT`: Ctrl-C handled by the console.
pub const ENABLE_PROCESSED_INPUT: u32 = 0x0001;
/// `ENABLE_LINE_INPUT`: input delivered a line at a time.
pub const ENABLE_LINE_INPUT: u32 = 0x0002;
/// `ENABLE_ECHO_INPUT`: the console echoes typed characters.
pub const ENABLE_ECHO_INPUT: u32 = 0x0004;
/// `ENABLE_VIRTUAL_TERMINAL_INPUT`: keys arrive as VT sequences (arrows as `ESC [ A`, …).
pub const ENABLE_VIRTUAL_TERMINAL_INPUT: u32 = 0x0200;

/// The Windows console input mode for a byte-stream terminal, from the mode it had.
pub fn vt_input_mode(old: u32) -> u32 {
    (old | ENABLE_VIRTUAL_TERMINAL_INPUT)
        & !(ENABLE_LINE_INPUT | ENABLE_ECHO_INPUT | ENABLE_PROCESSED_INPUT)
}

/// Keeps the console delivering VT input while it lives (nothing to do on Unix).
pub struct VtInput(#[allow(dead_code)] imp::Guard);

impl VtInput {
    /// Switch VT input on where the console needs it; best effort (a console that refuses
    /// keeps its mode, and plain keys still work).
    pub fn enable() -> VtInput {
        VtInput(imp::Guard::enable())
    }
}

/// The keyboard as a byte stream, for `reasonix term` (see the module's notes on Ctrl-Z).
pub struct Keys(imp::Keys);

impl Keys {
    /// Reads the process's console input (standard input on Unix).
    pub fn new() -> Keys {
        Keys(imp::Keys::new())
    }

    /// The next keys typed, as UTF-8 and VT sequences; empty at the end of the input.
    pub fn read(&mut self) -> std::io::Result<Vec<u8>> {
        self.0.read()
    }
}

impl Default for Keys {
    fn default() -> Self {
        Self::new()
    }
}

/// Converts UTF-16 code units read from a console to UTF-8: a high surrogate at the end is
/// kept in `carry` for the next read (a key outside the Basic Multilingual Plane can come in
/// two reads), an unpaired surrogate becomes U+FFFD, and control characters (Ctrl-Z `0x1a`
/// included) pass through as their bytes.
pub fn utf16_keys(carry: &mut Option<u16>, units: &[u16]) -> Vec<u8> {
    let mut all: Vec<u16> = carry.take().into_iter().chain(units.iter().copied()).collect();
    if let Some(&last) = all.last() {
        if (0xD800..=0xDBFF).contains(&last) {
            *carry = Some(last);
            all.pop();
        }
    }
    let mut out = Vec::with_capacity(all.len());
    for c in char::decode_utf16(all) {
        let c = c.unwrap_or(char::REPLACEMENT_CHARACTER);
        let mut b = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
    }
    out
}

#[cfg(not(windows))]
mod imp {
    use std::io::Read;

    pub struct Guard;

    pub struct Keys;

    impl Keys {
        pub fn new() -> Keys {
            Keys
        }

        pub fn read(&mut self) -> std::io::Result<Vec<u8>> {
            let mut buf = [0u8; 4096];
            let n = std::io::stdin().lock().read(&mut buf)?;
            Ok(buf[..n].to_vec())
        }
    }

    impl Guard {
        pub fn enable() -> Guard {
            Guard
        }
    }
}

#[cfg(windows)]
mod imp {
    use std::io::Read;

    use windows_sys::Win32::Foundation::{
        GetLastError, ERROR_OPERATION_ABORTED, HANDLE, INVALID_HANDLE_VALUE,
    };
    use windows_sys::Win32::System::Console::{
        GetConsoleMode, GetStdHandle, ReadConsoleW, SetConsoleMode, STD_INPUT_HANDLE,
    };

    /// The console input handle, or `None` when standard input is not a console (then std's
    /// stdin is read: a pipe has no Ctrl-Z convention to avoid).
    pub struct Keys {
        console: Option<HANDLE>,
        carry: Option<u16>,
    }

    // The handle is the process's own standard input handle, only read from.
    unsafe impl Send for Keys {}

    impl Keys {
        pub fn new() -> Keys {
            // SAFETY: plain Win32 calls on the process's standard input handle; `mode` is a
            // valid out-pointer.
            let console = unsafe {
                let h = GetStdHandle(STD_INPUT_HANDLE);
                let mut mode = 0u32;
                (!h.is_null() && h != INVALID_HANDLE_VALUE && GetConsoleMode(h, &mut mode) != 0)
                    .then_some(h)
            };
            Keys {
                console,
                carry: None,
            }
        }

        pub fn read(&mut self) -> std::io::Result<Vec<u8>> {
            let Some(h) = self.console else {
                let mut buf = [0u8; 4096];
                let n = std::io::stdin().lock().read(&mut buf)?;
                return Ok(buf[..n].to_vec());
            };
            let mut wide = [0u16; 1024];
            loop {
                let mut n = 0u32;
                // SAFETY: `wide` holds `wide.len()` u16s and `n` is a valid out-pointer; no
                // input control (no wake-up characters: Ctrl-Z is a key like any other).
                let ok = unsafe {
                    ReadConsoleW(
                        h,
                        wide.as_mut_ptr().cast(),
                        wide.len() as u32,
                        &mut n,
                        std::ptr::null(),
                    )
                };
                if ok == 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if n == 0 {
                    // SAFETY: reads the calling thread's last error.
                    if unsafe { GetLastError() } == ERROR_OPERATION_ABORTED {
                        continue;
                    }
                    return Ok(Vec::new());
                }
                let bytes = super::utf16_keys(&mut self.carry, &wide[..n as usize]);
                if !bytes.is_empty() {
                    return Ok(bytes);
                }
            }
        }
    }

    pub struct Guard(Option<(HANDLE, u32)>);

    // The handle is the process's own console input handle; it is only used to restore the
    // mode on drop.
    unsafe impl Send for Guard {}

    impl Guard {
        pub fn enable() -> Guard {
            // SAFETY: plain Win32 calls on the process's standard input handle; `mode` is a
            // valid out-pointer.
            unsafe {
                let h = GetStdHandle(STD_INPUT_HANDLE);
                if h.is_null() || h == INVALID_HANDLE_VALUE {
                    return Guard(None);
                }
                let mut mode = 0u32;
                if GetConsoleMode(h, &mut mode) == 0 {
                    return Guard(None);
                }
                if SetConsoleMode(h, super::vt_input_mode(mode)) == 0 {
                    return Guard(None);
                }
                Guard(Some((h, mode)))
            }
        }
    }

    impl Drop for Guard {
        fn drop(&mut self) {
            if let Some((h, mode)) = self.0.take() {
                // SAFETY: restores the mode read in `enable` on the same handle.
                unsafe {
                    SetConsoleMode(h, mode);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_utf16_to_key_bytes() {
        let mut carry = None;
        // Ctrl-Z, Ctrl-C and an arrow's VT sequence pass through as bytes.
        let units: Vec<u16> = "\u{1a}\u{3}\x1b[A".encode_utf16().collect();
        assert_eq!(utf16_keys(&mut carry, &units), b"\x1a\x03\x1b[A");
        assert_eq!(utf16_keys(&mut carry, &[0xe9]), "é".as_bytes());
        // A key outside the BMP split over two reads.
        let crab: Vec<u16> = "🦀".encode_utf16().collect();
        assert_eq!(utf16_keys(&mut carry, &crab[..1]), b"");
        assert_eq!(carry, Some(crab[0]));
        assert_eq!(utf16_keys(&mut carry, &crab[1..]), "🦀".as_bytes());
        assert_eq!(carry, None);
        // An unpaired low surrogate is replaced, not dropped.
        assert_eq!(utf16_keys(&mut carry, &[0xdc00, 0x61]), "\u{fffd}a".as_bytes());
    }

    #[test]
    fn the_windows_console_mode_for_a_byte_stream() {
        // The default console input mode (processed, line, echo, window, mouse, insert,
        // quick edit, extended flags: 0x1f7).
        let default = 0x01f7;
        let m = vt_input_mode(default);
        assert_eq!(
            m & ENABLE_VIRTUAL_TERMINAL_INPUT,
            ENABLE_VIRTUAL_TERMINAL_INPUT
        );
        assert_eq!(
            m & (ENABLE_LINE_INPUT | ENABLE_ECHO_INPUT | ENABLE_PROCESSED_INPUT),
            0
        );
        // Everything else is kept (window and mouse input, quick edit, extended flags).
        assert_eq!(m & 0x01f0, 0x01f0);
        // crossterm's raw mode already cleared line, echo and processed input: only VT
        // input is added.
        assert_eq!(vt_input_mode(0x01f0), 0x03f0);
        // Idempotent.
        assert_eq!(vt_input_mode(m), m);
    }
}
