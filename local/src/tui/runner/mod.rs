//! [`run_tui`]: terminal setup and the event loop. Input is read on a thread, every request
//! to the host runs on its own task, and the screen is redrawn on a tick and after every
//! event, so the UI never waits for the network.
//!
//! The parts: `terminal` (restoring the terminal, the input thread), `exec` (running the
//! app's actions against the host) and `settings` (what the configuration gives the app and
//! a session).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossterm::event::{
    EnableBracketedPaste, EnableMouseCapture, Event as TermEvent, KeyCode, KeyEventKind,
    KeyModifiers, KeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use crossterm::terminal::{enable_raw_mode, EnterAlternateScreen};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use tokio::sync::mpsc;

use super::app::{Action, App, AppEvent};
use super::prompter::TuiPrompts;
use super::render;
use crate::client::Client;
use crate::config::Config;
use crate::connect::Connector;
use crate::gateway::Gateway;

mod editor;
mod exec;
mod mcp_sign_in;
mod settings;
mod terminal;

use exec::Exec;
pub use settings::app_settings;
use terminal::{restore_terminal, spawn_input, Input, PanicHook, TermGuard};

/// How the TUI starts.
#[derive(Debug, Default)]
pub struct TuiOptions {
    /// Workspace label for the status bar: `host:/path` or a local path.
    pub workspace: String,
    /// Resume this session.
    pub session: Option<String>,
    /// Resume the most recent session (else a new one is started).
    pub continue_last: bool,
    /// Take the driver role from another client.
    pub takeover: bool,
    /// Model label (`provider/model`, provider or model name).
    pub model: Option<String>,
    /// Questions and progress from a [`super::TuiPrompter`] (remote mode).
    pub prompts: Option<TuiPrompts>,
}

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Run the full-screen TUI against the host behind `connector` until the user quits.
/// Returns the process exit code.
pub async fn run_tui(config: Config, connector: Arc<dyn Connector>, opts: TuiOptions) -> i32 {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        eprintln!("reasonix: the TUI needs a terminal; use `reasonix run \"PROMPT\"` for scripts");
        return 2;
    }
    // The user's rules for this workspace apply, and "always allow" is stored under it.
    let mut config = config;
    config.apply_workspace(&connector.describe());
    let workspace = if opts.workspace.is_empty() {
        connector.describe()
    } else {
        opts.workspace.clone()
    };
    let mut app = App::new(app_settings(&config, workspace, opts.model.clone()));
    let gateway = Arc::new(Gateway::new(&config));
    let mut client_options = crate::client::options_for(&config).0;
    // A missing workspace folder: the fatal-error modal offers to create it.
    client_options.offer_mkdir = true;
    // The host's ports are forwarded as its processes open them ([ports] auto) and by /ports.
    let ports = crate::ports::Forwards::new(config.ports.clone());
    client_options.ports = Some(Arc::clone(&ports));
    let (client, mut client_rx) = Client::start(connector, gateway, client_options);
    let (app_tx, mut app_rx) = mpsc::unbounded_channel::<AppEvent>();
    if let Some(mut prompts) = opts.prompts {
        let tx = app_tx.clone();
        tokio::spawn(async move {
            while let Some(ev) = prompts.rx.recv().await {
                if tx.send(ev).is_err() {
                    return;
                }
            }
        });
    }

    // Terminal setup; the guard and the panic hook both restore it.
    if let Err(e) = enable_raw_mode() {
        eprintln!("reasonix: cannot switch the terminal to raw mode: {e}");
        return 2;
    }
    let enhanced = matches!(
        crossterm::terminal::supports_keyboard_enhancement(),
        Ok(true)
    );
    let guard = TermGuard { enhanced };
    let mut out = std::io::stdout();
    if let Err(e) = crossterm::execute!(
        out,
        EnterAlternateScreen,
        EnableBracketedPaste,
        EnableMouseCapture
    ) {
        drop(guard);
        eprintln!("reasonix: cannot set up the terminal: {e}");
        return 2;
    }
    if enhanced {
        // Lets Shift+Enter arrive as itself instead of a plain Enter.
        let _ = crossterm::execute!(
            out,
            PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES)
        );
    }
    // Restore the terminal before the panic message is printed; the previous hook is put
    // back when the TUI ends.
    let prev_hook: Arc<PanicHook> = Arc::from(std::panic::take_hook());
    let chained = Arc::clone(&prev_hook);
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal(enhanced);
        chained(info);
    }));
    // On Windows, each frame in pieces that fit a console row (wine's console lays VT output
    // out as text; see `platform::console_rows`).
    let screen = crate::platform::console_rows::ConsoleRows::for_this_console(std::io::stdout());
    let mut terminal = match Terminal::new(CrosstermBackend::new(screen)) {
        Ok(t) => t,
        Err(e) => {
            drop(guard);
            eprintln!("reasonix: cannot start the terminal UI: {e}");
            return 2;
        }
    };

    // Ctrl-C (and Ctrl-Break) that the Windows console sends as an event instead of a key:
    // handled as the key, not ending the process (never fires on Unix).
    let mut interrupts = crate::platform::signals::ConsoleInterrupts::new();
    let stop = Arc::new(AtomicBool::new(false));
    let (input_tx, mut input_rx) = mpsc::unbounded_channel();
    let input_paused = Arc::new(AtomicBool::new(false));
    spawn_input(input_tx, Arc::clone(&stop), Arc::clone(&input_paused));

    let ctx = Exec {
        pty: super::term_link::spawn(client.clone(), app_tx.clone()),
        client: client.clone(),
        config: Arc::new(std::sync::Mutex::new(config)),
        tx: app_tx.clone(),
        in_tmux: std::env::var_os("TMUX").is_some(),
        ports,
    };
    if let Ok((cols, rows)) = crossterm::terminal::size() {
        let _ = app.set_screen_size(cols, rows);
    }
    {
        // Custom commands: the user's files and the workspace's (asked from the host).
        let (client, home, tx) = (client.clone(), ctx.config().home.clone(), app_tx.clone());
        tokio::spawn(async move {
            let set =
                crate::commands::load(&client, &home, &crate::tui::builtin_command_names()).await;
            let _ = tx.send(AppEvent::Commands(set));
        });
    }
    let start = Instant::now();
    let new = opts.session.is_none() && !opts.continue_last;
    let first = app.open(opts.session.clone(), new, opts.takeover);
    let mut quit = ctx.run_all(first);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut client_open = true;
    let mut code = 0;
    while !quit {
        app.tick(start.elapsed().as_millis() as i64, wall_ms());
        if let Err(e) = terminal.draw(|f| render::render(&app, f)) {
            tracing::error!("draw failed: {e}");
            code = 1;
            break;
        }
        let mut actions = Vec::new();
        let mut clear = false;
        tokio::select! {
            ev = client_rx.recv(), if client_open => match ev {
                Some(ev) => actions.extend(app.handle_event(ev)),
                None => client_open = false,
            },
            Some(ev) = app_rx.recv() => actions.extend(app.handle(ev)),
            input = input_rx.recv() => match input {
                Some(Input::Term(ev)) => {
                    if let TermEvent::Key(k) = &ev {
                        clear = k.kind != KeyEventKind::Release
                            && k.code == KeyCode::Char('l')
                            && k.modifiers.contains(KeyModifiers::CONTROL);
                    }
                    actions.extend(handle_term(&mut app, ev));
                }
                Some(Input::Failed(e)) => {
                    tracing::error!("terminal input failed: {e}");
                    code = 1;
                    break;
                }
                None => break,
            },
            _ = interrupts.next() => actions.extend(app.console_interrupt()),
            _ = tick.tick() => {}
        }
        // Drain whatever else is ready so a fast stream is drawn once per batch.
        for _ in 0..512 {
            let mut any = false;
            if client_open {
                if let Ok(ev) = client_rx.try_recv() {
                    actions.extend(app.handle_event(ev));
                    any = true;
                }
            }
            if let Ok(ev) = app_rx.try_recv() {
                actions.extend(app.handle(ev));
                any = true;
            }
            if let Ok(Input::Term(ev)) = input_rx.try_recv() {
                actions.extend(handle_term(&mut app, ev));
                any = true;
            }
            if !any {
                break;
            }
        }
        if clear {
            let _ = terminal.clear();
        }
        // `/memory edit ID` hands the terminal to the editor; everything else goes to `ctx`.
        let (edits, actions): (Vec<Action>, Vec<Action>) = actions
            .into_iter()
            .partition(|a| matches!(a, Action::MemoryEdit { .. }));
        for a in edits {
            if let Action::MemoryEdit { id } = a {
                let suspend = editor::Suspend {
                    enhanced,
                    input_paused: &input_paused,
                };
                editor::edit_memory(&ctx, &mut terminal, &suspend, &id).await;
            }
        }
        quit = ctx.run_all(actions) || app.should_quit();
    }
    // A client started right after (a TUI with --continue, a `run`) drives the session.
    client.leave().await;
    stop.store(true, Ordering::Relaxed);
    drop(terminal);
    drop(guard);
    let _ours = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| prev_hook(info)));
    // A connection that failed for good: say why once more on the normal screen (the
    // transcript is gone with the alternate screen) and exit 5, like `reasonix run`.
    if let super::app::ConnView::Failed { reason, .. } = &app.conn {
        eprintln!("reasonix: {reason}");
        return i32::from(crate::exit::Exit::Connection.code());
    }
    code
}

fn handle_term(app: &mut App, ev: TermEvent) -> Vec<Action> {
    match ev {
        TermEvent::Key(k) => app.handle_key(k),
        TermEvent::Paste(s) => app.handle_paste(&s),
        TermEvent::Mouse(m) => app.handle_mouse(m),
        // The next draw picks up the new size; terminal tabs resize their PTYs.
        TermEvent::Resize(cols, rows) => app.set_screen_size(cols, rows),
        TermEvent::FocusGained | TermEvent::FocusLost => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `run_tui` can be spawned on a multi-threaded runtime, not only `block_on`'d.
    #[allow(dead_code)]
    fn run_tui_future_is_send(config: Config, connector: Arc<dyn Connector>) {
        fn is_send<T: Send>(_: &T) {}
        let fut = run_tui(config, connector, TuiOptions::default());
        is_send(&fut);
    }
}
