//! The terminal around the TUI: putting it back however the TUI ends (return, error or
//! panic), and reading its input on a thread of its own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, Event as TermEvent, PopKeyboardEnhancementFlags,
};
use crossterm::terminal::{disable_raw_mode, LeaveAlternateScreen};
use tokio::sync::mpsc;

/// Puts the terminal back however the TUI ends (return, error or panic).
pub(super) struct TermGuard {
    pub(super) enhanced: bool,
}

pub(super) fn restore_terminal(enhanced: bool) {
    let mut out = std::io::stdout();
    if enhanced {
        let _ = crossterm::execute!(out, PopKeyboardEnhancementFlags);
    }
    let _ = crossterm::execute!(
        out,
        DisableMouseCapture,
        DisableBracketedPaste,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    let _ = disable_raw_mode();
}

impl Drop for TermGuard {
    fn drop(&mut self) {
        restore_terminal(self.enhanced);
    }
}

pub(super) enum Input {
    Term(TermEvent),
    Failed(String),
}

/// Read terminal input on a thread (crossterm's reader blocks); stops when `stop` is set,
/// reads nothing while `paused` is (an editor has the terminal).
pub(super) fn spawn_input(
    tx: mpsc::UnboundedSender<Input>,
    stop: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
) {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            if paused.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            match crossterm::event::poll(Duration::from_millis(50)) {
                Ok(true) => match crossterm::event::read() {
                    Ok(ev) => {
                        if tx.send(Input::Term(ev)).is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Input::Failed(e.to_string()));
                        return;
                    }
                },
                Ok(false) => {}
                Err(e) => {
                    let _ = tx.send(Input::Failed(e.to_string()));
                    return;
                }
            }
        }
    });
}

pub(super) type PanicHook = dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync + 'static;
