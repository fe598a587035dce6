//! The laptop's console events that arrive as signals on Unix and as console events (or not
//! at all) on Windows: "stop" (Ctrl-C, SIGTERM; Windows: Ctrl-C, Ctrl-Break, the console
//! window closing) and "the window changed size" (SIGWINCH; Windows: polled, since the
//! console has no signal for it outside its own input queue).

/// Stop requests as one stream (never firing when the handlers cannot be installed).
pub struct StopSignals(imp::Stop);

impl StopSignals {
    /// Starts listening.
    pub fn new() -> Self {
        StopSignals(imp::Stop::new())
    }

    /// The next stop request.
    pub async fn next(&mut self) {
        self.0.next().await
    }
}

impl Default for StopSignals {
    fn default() -> Self {
        Self::new()
    }
}

/// Changes of the laptop's terminal size.
pub struct Resizes(imp::Resize);

impl Resizes {
    /// Starts watching; an error says the system refused the handler.
    pub fn new() -> std::io::Result<Self> {
        imp::Resize::new().map(Resizes)
    }

    /// The next change (the caller asks the terminal for the new size).
    pub async fn next(&mut self) {
        self.0.next().await
    }
}

/// Ctrl-C that the Windows console turned into a console event although the program switched
/// processed input off (raw mode): wine's console on a Unix terminal does (the terminal's own
/// line discipline sends SIGINT, which wine delivers as `CTRL_C_EVENT`), and a console host
/// that ignores the mode would. Ctrl-Break is always an event (`CTRL_BREAK_EVENT`; processed
/// input does not cover it). Both would end the process. `reasonix term` sends either to the
/// host's shell as the Ctrl-C key (`0x03`); the workbench handles either as its Ctrl-C key
/// (in a terminal tab: `0x03` for the host's shell; elsewhere: cancel the turn, twice
/// quits). Never fires on Unix (raw mode: Ctrl-C is a byte, Ctrl-Break does not exist).
pub struct ConsoleInterrupts(imp::Interrupts);

impl ConsoleInterrupts {
    /// Starts listening (and so stops Ctrl-C and Ctrl-Break from ending the process on
    /// Windows).
    pub fn new() -> Self {
        ConsoleInterrupts(imp::Interrupts::new())
    }

    /// The next Ctrl-C or Ctrl-Break event.
    pub async fn next(&mut self) {
        self.0.next().await
    }
}

impl Default for ConsoleInterrupts {
    fn default() -> Self {
        Self::new()
    }
}

/// Waits on an optional stream of events: pending forever when it is absent or ended.
async fn first_of<F: std::future::Future<Output = Option<()>>>(f: Option<F>) {
    match f {
        Some(f) => {
            if f.await.is_none() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

#[cfg(unix)]
mod imp {
    use tokio::signal::unix::{signal, Signal, SignalKind};

    use super::first_of;

    pub(super) struct Stop {
        int: Option<Signal>,
        term: Option<Signal>,
    }

    impl Stop {
        pub(super) fn new() -> Self {
            Self {
                int: signal(SignalKind::interrupt()).ok(),
                term: signal(SignalKind::terminate()).ok(),
            }
        }

        pub(super) async fn next(&mut self) {
            let int = first_of(self.int.as_mut().map(|s| s.recv()));
            let term = first_of(self.term.as_mut().map(|s| s.recv()));
            tokio::select! {
                _ = int => {}
                _ = term => {}
            }
        }
    }

    pub(super) struct Interrupts;

    impl Interrupts {
        pub(super) fn new() -> Self {
            Interrupts
        }

        pub(super) async fn next(&mut self) {
            std::future::pending().await
        }
    }

    pub(super) struct Resize(Signal);

    impl Resize {
        pub(super) fn new() -> std::io::Result<Self> {
            signal(SignalKind::window_change()).map(Resize)
        }

        pub(super) async fn next(&mut self) {
            first_of(Some(self.0.recv())).await
        }
    }
}

#[cfg(windows)]
mod imp {
    use std::time::Duration;

    use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close, CtrlBreak, CtrlC, CtrlClose};

    use super::first_of;

    pub(super) struct Stop {
        c: Option<CtrlC>,
        brk: Option<CtrlBreak>,
        close: Option<CtrlClose>,
    }

    impl Stop {
        pub(super) fn new() -> Self {
            Self {
                c: ctrl_c().ok(),
                brk: ctrl_break().ok(),
                close: ctrl_close().ok(),
            }
        }

        pub(super) async fn next(&mut self) {
            let c = first_of(self.c.as_mut().map(|s| s.recv()));
            let brk = first_of(self.brk.as_mut().map(|s| s.recv()));
            let close = first_of(self.close.as_mut().map(|s| s.recv()));
            tokio::select! {
                _ = c => {}
                _ = brk => {}
                _ = close => {}
            }
        }
    }

    pub(super) struct Interrupts {
        c: Option<CtrlC>,
        brk: Option<CtrlBreak>,
    }

    impl Interrupts {
        pub(super) fn new() -> Self {
            Interrupts {
                c: ctrl_c().ok(),
                brk: ctrl_break().ok(),
            }
        }

        pub(super) async fn next(&mut self) {
            let c = first_of(self.c.as_mut().map(|s| s.recv()));
            let brk = first_of(self.brk.as_mut().map(|s| s.recv()));
            tokio::select! {
                _ = c => {}
                _ = brk => {}
            }
        }
    }

    /// How often the console's size is compared with the last one seen.
    const POLL: Duration = Duration::from_millis(250);

    pub(super) struct Resize {
        last: Option<(u16, u16)>,
    }

    impl Resize {
        pub(super) fn new() -> std::io::Result<Self> {
            Ok(Resize {
                last: crossterm::terminal::size().ok(),
            })
        }

        pub(super) async fn next(&mut self) {
            loop {
                tokio::time::sleep(POLL).await;
                let now = crossterm::terminal::size().ok();
                if now != self.last {
                    self.last = now;
                    return;
                }
            }
        }
    }
}
