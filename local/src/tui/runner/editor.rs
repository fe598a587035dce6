//! `/memory edit ID` in the workbench (#32): the TUI gives the terminal to `$VISUAL` /
//! `$EDITOR` (input thread paused, alternate screen and raw mode left), the editor runs on a
//! private copy of the fact, the terminal is taken back and redrawn, and the result goes
//! through the same store op as `reasonix memory edit` (`crate::memory::edit`): validated,
//! the old text kept as a revision, a malformed edit refused naming the problem.

use std::io::Stdout;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossterm::event::{
    EnableBracketedPaste, EnableMouseCapture, KeyboardEnhancementFlags,
    PushKeyboardEnhancementFlags,
};
use crossterm::terminal::{enable_raw_mode, EnterAlternateScreen};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

use super::exec::Exec;
use super::terminal::restore_terminal;
use crate::memory::access::Access;
use crate::platform::console_rows::ConsoleRows;
use crate::tui::app::AppEvent;

/// What giving the terminal away needs.
pub(super) struct Suspend<'a> {
    pub(super) enhanced: bool,
    pub(super) input_paused: &'a AtomicBool,
}

impl Suspend<'_> {
    fn leave(&self) {
        self.input_paused.store(true, Ordering::Relaxed);
        // The input thread polls in 50 ms steps: let a poll in progress end first.
        std::thread::sleep(Duration::from_millis(80));
        restore_terminal(self.enhanced);
    }

    fn back(&self, terminal: &mut Terminal<CrosstermBackend<ConsoleRows<Stdout>>>) {
        let _ = enable_raw_mode();
        let mut out = std::io::stdout();
        let _ = crossterm::execute!(
            out,
            EnterAlternateScreen,
            EnableBracketedPaste,
            EnableMouseCapture
        );
        if self.enhanced {
            let _ = crossterm::execute!(
                out,
                PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES)
            );
        }
        let _ = terminal.clear();
        self.input_paused.store(false, Ordering::Relaxed);
    }
}

pub(super) async fn edit_memory(
    ctx: &Exec,
    terminal: &mut Terminal<CrosstermBackend<ConsoleRows<Stdout>>>,
    suspend: &Suspend<'_>,
    id: &str,
) {
    let home = ctx.config().home.clone();
    let stores = crate::memory::command::Stores {
        project: Access::Remote(ctx.client.clone()),
        global: Access::Local(crate::memory::global_store(&home)),
    };
    let say = |text: String, error: bool| {
        let _ = ctx.tx.send(AppEvent::Permissions { text, error });
    };
    let draft = match crate::memory::edit::draft(&stores, id).await {
        Ok(d) => d,
        Err(e) => return say(format!("/memory edit {id}: {e}"), true),
    };
    suspend.leave();
    let path = draft.path.clone();
    let ran = tokio::task::spawn_blocking(move || crate::memory::edit::run_editor(&path))
        .await
        .unwrap_or_else(|e| Err(format!("the editor task failed: {e}")));
    suspend.back(terminal);
    if let Err(e) = ran {
        draft.discard();
        return say(format!("/memory edit {id}: {e}; {id} is unchanged"), true);
    }
    match draft.save().await {
        Ok(m) => say(m, false),
        Err(e) => say(format!("/memory edit {id}: {e}"), true),
    }
}
