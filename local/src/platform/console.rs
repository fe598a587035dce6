//! The laptop's console as a byte stream (`reasonix term` forwards the bytes it reads to the
//! host's PTY). A Unix terminal in raw mode already delivers keys as VT sequences; the
//! Windows console does so only with `ENABLE_VIRTUAL_TERMINAL_INPUT` switched on (and line
//! editing, echo and Ctrl-C processing off, so Ctrl-C reaches the host's shell as `0x03`).
//! [`VtInput::enable`] does that for as long as it lives and restores the console after.

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

#[cfg(not(windows))]
mod imp {
    pub struct Guard;

    impl Guard {
        pub fn enable() -> Guard {
            Guard
        }
    }
}

#[cfg(windows)]
mod imp {
    use windows_sys::Win32::Foundation::{HANDLE, INVALID_HANDLE_VALUE};
    use windows_sys::Win32::System::Console::{
        GetConsoleMode, GetStdHandle, SetConsoleMode, STD_INPUT_HANDLE,
    };

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
