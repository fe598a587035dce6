//! The laptop's console as a byte stream for `reasonix term`, which forwards keys to the
//! host's PTY and writes the PTY's output back. A Unix terminal in raw mode already is one.
//! A Windows console is not: [`TermConsole::enable`] switches its output to VT processing
//! (`ENABLE_VIRTUAL_TERMINAL_PROCESSING`, else the classic console prints escape sequences
//! as text) for as long as it lives, and [`Keys`] reads its input as key events
//! (`ReadConsoleInputW`, through crossterm) encoded as the bytes an xterm sends
//! (`tui::keybytes`, the encoder the workbench's terminal tabs use).
//!
//! Why not the console's own VT input (`ENABLE_VIRTUAL_TERMINAL_INPUT`) read through std's
//! stdin: std's stdin follows the DOS convention that Ctrl-Z ends the input (`ReadConsoleW`
//! told to wake on it, a trailing Ctrl-Z dropped, a lone one read as end of file), so Ctrl-Z
//! ended the terminal instead of reaching the host's shell; and consoles without VT input
//! (wine's, older Windows) drop arrows and other keys that have no character. Key events
//! carry every key on every console.

/// `ENABLE_PROCESSED_OUTPUT`: control characters (CR, LF, BS, BEL) act.
pub const ENABLE_PROCESSED_OUTPUT: u32 = 0x0001;
/// `ENABLE_VIRTUAL_TERMINAL_PROCESSING`: escape sequences are interpreted, not printed.
pub const ENABLE_VIRTUAL_TERMINAL_PROCESSING: u32 = 0x0004;
/// `DISABLE_NEWLINE_AUTO_RETURN`: LF moves down only, as on a terminal in raw mode (the
/// host's PTY sends CR LF itself).
pub const DISABLE_NEWLINE_AUTO_RETURN: u32 = 0x0008;

/// The Windows console output modes to try for a byte-stream terminal, best first (a console
/// that does not know `DISABLE_NEWLINE_AUTO_RETURN` refuses the first).
pub fn vt_output_modes(old: u32) -> [u32; 2] {
    let vt = old | ENABLE_PROCESSED_OUTPUT | ENABLE_VIRTUAL_TERMINAL_PROCESSING;
    [vt | DISABLE_NEWLINE_AUTO_RETURN, vt]
}

/// Keeps the console interpreting VT output while it lives (nothing to do on Unix).
pub struct TermConsole(#[allow(dead_code)] imp::Guard);

impl TermConsole {
    /// Switch VT output on where the console needs it; best effort (a console that refuses
    /// keeps its mode).
    pub fn enable() -> TermConsole {
        TermConsole(imp::Guard::enable())
    }
}

/// The keyboard as a byte stream, for `reasonix term` (see the module's notes).
pub struct Keys(imp::Keys);

impl Keys {
    /// Reads the process's console input (standard input on Unix). `app_cursor` is the host
    /// program's DECCKM state (arrows as `ESC O x`), kept by the caller from the output; a
    /// Unix terminal tracks it itself.
    pub fn new(app_cursor: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Keys {
        Keys(imp::Keys::new(app_cursor))
    }

    /// The next keys typed, as UTF-8 and VT sequences; empty at the end of the input.
    pub fn read(&mut self) -> std::io::Result<Vec<u8>> {
        self.0.read()
    }
}

#[cfg(not(windows))]
mod imp {
    use std::io::Read;

    pub struct Guard;

    pub struct Keys;

    impl Keys {
        pub fn new(_app_cursor: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Keys {
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
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use crossterm::event::{Event, KeyEventKind};
    use windows_sys::Win32::Foundation::{HANDLE, INVALID_HANDLE_VALUE};
    use windows_sys::Win32::System::Console::{
        GetConsoleMode, GetStdHandle, SetConsoleMode, STD_INPUT_HANDLE, STD_OUTPUT_HANDLE,
    };

    /// The process's standard handle `which` when it is a console, with its mode.
    fn console(which: u32) -> Option<(HANDLE, u32)> {
        // SAFETY: plain Win32 calls on the process's standard handle; `mode` is a valid
        // out-pointer.
        unsafe {
            let h = GetStdHandle(which);
            let mut mode = 0u32;
            (!h.is_null() && h != INVALID_HANDLE_VALUE && GetConsoleMode(h, &mut mode) != 0)
                .then_some((h, mode))
        }
    }

    /// Key events from the console (crossterm), or std's stdin when it is not a console.
    pub struct Keys {
        console: bool,
        app_cursor: Arc<AtomicBool>,
    }

    impl Keys {
        pub fn new(app_cursor: Arc<AtomicBool>) -> Keys {
            Keys {
                console: console(STD_INPUT_HANDLE).is_some(),
                app_cursor,
            }
        }

        pub fn read(&mut self) -> std::io::Result<Vec<u8>> {
            if !self.console {
                let mut buf = [0u8; 4096];
                let n = std::io::stdin().lock().read(&mut buf)?;
                return Ok(buf[..n].to_vec());
            }
            loop {
                match crossterm::event::read()? {
                    Event::Key(k) if k.kind != KeyEventKind::Release => {
                        let app = self.app_cursor.load(Ordering::Relaxed);
                        if let Some(bytes) = crate::tui::keybytes::key_bytes(&k, app) {
                            return Ok(bytes);
                        }
                    }
                    Event::Paste(text) => return Ok(text.into_bytes()),
                    // Sizes are polled (`signals::Resizes`); focus and mouse are not sent.
                    _ => {}
                }
            }
        }
    }

    pub struct Guard(Option<(HANDLE, u32)>);

    // The handle is the process's own console output handle; it is only used to restore the
    // mode on drop.
    unsafe impl Send for Guard {}

    impl Guard {
        pub fn enable() -> Guard {
            let Some((h, mode)) = console(STD_OUTPUT_HANDLE) else {
                return Guard(None);
            };
            for m in super::vt_output_modes(mode) {
                // SAFETY: sets the mode of the process's own console output handle.
                if unsafe { SetConsoleMode(h, m) } != 0 {
                    return Guard(Some((h, mode)));
                }
            }
            Guard(None)
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
    fn the_windows_console_output_mode_for_a_byte_stream() {
        // The classic console's default output mode: processed output, wrap at EOL.
        let [first, second] = vt_output_modes(0x0003);
        assert_eq!(first, 0x000f);
        assert_eq!(second, 0x0007);
        // Kept: whatever else was on (here a grid flag); idempotent.
        assert_eq!(vt_output_modes(0x0013)[0], 0x001f);
        assert_eq!(vt_output_modes(first)[0], first);
    }
}
