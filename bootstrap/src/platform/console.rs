//! The user's terminal for prompts that must not go through stdin/stdout (those may be piped):
//! `/dev/tty` on Unix, the console's `CONIN$`/`CONOUT$` on Windows (Windows Terminal and the
//! classic console alike), with echo switched off for secrets.

use std::fs::File;

/// The terminal, opened for one prompt.
pub struct Terminal {
    /// Where keys are read from.
    pub input: File,
    /// Where the prompt is written.
    pub output: File,
}

/// Opens the controlling terminal (fails when there is none: a service, a pipe-only CI job).
pub fn open_terminal() -> std::io::Result<Terminal> {
    imp::open_terminal()
}

/// Echo stays off while this lives (and comes back when it is dropped, also on a panic).
pub struct EchoOff(#[allow(dead_code)] imp::Saved);

impl Terminal {
    /// Switches echo off for the input (line editing stays on); `None` when the terminal
    /// refuses, in which case the caller goes on with echo.
    pub fn echo_off(&self) -> Option<EchoOff> {
        imp::echo_off(&self.input).map(EchoOff)
    }
}

#[cfg(unix)]
mod imp {
    use std::fs::{File, OpenOptions};
    use std::os::fd::AsRawFd;

    use super::Terminal;

    pub(super) fn open_terminal() -> std::io::Result<Terminal> {
        let input = OpenOptions::new().read(true).write(true).open("/dev/tty")?;
        let output = input.try_clone()?;
        Ok(Terminal { input, output })
    }

    pub(crate) struct Saved {
        fd: i32,
        saved: libc::termios,
    }

    impl Drop for Saved {
        fn drop(&mut self) {
            // SAFETY: fd is the open /dev/tty owned by the caller for the guard's lifetime and
            // `saved` came from tcgetattr on it.
            unsafe {
                libc::tcsetattr(self.fd, libc::TCSANOW, &self.saved);
            }
        }
    }

    pub(super) fn echo_off(file: &File) -> Option<Saved> {
        let fd = file.as_raw_fd();
        // SAFETY: termios is plain old data; tcgetattr fills it or fails.
        let mut term: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: fd is a valid open descriptor for the duration of this call.
        if unsafe { libc::tcgetattr(fd, &mut term) } != 0 {
            return None;
        }
        let saved = term;
        term.c_lflag &= !(libc::ECHO | libc::ECHONL);
        term.c_lflag |= libc::ICANON;
        // SAFETY: as above; `term` is a valid termios derived from the current one.
        if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &term) } != 0 {
            return None;
        }
        Some(Saved { fd, saved })
    }
}

#[cfg(windows)]
mod imp {
    use std::fs::{File, OpenOptions};
    use std::os::windows::io::AsRawHandle;

    use windows_sys::Win32::System::Console::{
        GetConsoleMode, SetConsoleMode, CONSOLE_MODE, ENABLE_ECHO_INPUT, ENABLE_LINE_INPUT,
    };

    use super::Terminal;

    pub(super) fn open_terminal() -> std::io::Result<Terminal> {
        // The console's own input and output, whatever stdin and stdout are redirected to.
        // CONIN$ needs write access too for SetConsoleMode.
        let input = OpenOptions::new().read(true).write(true).open("CONIN$")?;
        let output = OpenOptions::new().write(true).open("CONOUT$")?;
        Ok(Terminal { input, output })
    }

    pub(crate) struct Saved {
        handle: std::os::windows::io::RawHandle,
        mode: CONSOLE_MODE,
    }

    impl Drop for Saved {
        fn drop(&mut self) {
            // SAFETY: the handle is the open CONIN$ the caller holds for the guard's lifetime;
            // `mode` came from GetConsoleMode on it.
            unsafe {
                SetConsoleMode(self.handle as _, self.mode);
            }
        }
    }

    pub(super) fn echo_off(file: &File) -> Option<Saved> {
        let handle = file.as_raw_handle();
        let mut mode: CONSOLE_MODE = 0;
        // SAFETY: handle is a valid console input handle for the duration of this call and
        // `mode` a valid out pointer.
        if unsafe { GetConsoleMode(handle as _, &mut mode) } == 0 {
            return None;
        }
        let quiet = (mode & !ENABLE_ECHO_INPUT) | ENABLE_LINE_INPUT;
        // SAFETY: as above.
        if unsafe { SetConsoleMode(handle as _, quiet) } == 0 {
            return None;
        }
        Some(Saved { handle, mode })
    }
}
