//! [`run_tui`]: terminal setup and the event loop. Input is read on a thread, every request
//! to the host runs on its own task, and the screen is redrawn on a tick and after every
//! event, so the UI never waits for the network.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
    Event as TermEvent, KeyCode, KeyEventKind, KeyModifiers, KeyboardEnhancementFlags,
    PopKeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use reasonix_forward::proto::{OpenSession, Request, Response, SessionSettings};
use reasonix_forward::rpc::CallError;
use tokio::sync::mpsc;

use super::app::{Action, App, AppEvent, AppSettings, OpenParams};
use super::prompter::TuiPrompts;
use super::{osc52, render};
use crate::always_scope::AlwaysScope;
use crate::client::Client;
use crate::config::Config;
use crate::connect::Connector;
use crate::gateway::Gateway;

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

/// UI settings derived from the configuration: model list, prices, permission mode.
pub fn app_settings(config: &Config, workspace: String, model: Option<String>) -> AppSettings {
    let mut models = Vec::new();
    let mut prices = HashMap::new();
    let mut context_windows = HashMap::new();
    for p in &config.providers {
        for m in &p.models {
            let label = format!("{}/{m}", p.name);
            if let Ok(r) = config.resolve_model(Some(&label)) {
                context_windows.insert(label.clone(), r.context_window);
                context_windows.entry(m.clone()).or_insert(r.context_window);
                if let Some(pr) = r.prices {
                    prices.insert(label.clone(), pr);
                    // Usage events carry the bare model name the provider reported.
                    prices.entry(m.clone()).or_insert(pr);
                }
            }
            models.push(label);
        }
    }
    AppSettings {
        workspace,
        models,
        model: model.or_else(|| config.default_model.clone()),
        prices,
        mode: config.permissions.mode.as_str().to_string(),
        build: reasonix_forward::build_id().to_string(),
        config_file: config
            .home
            .join(crate::config::USER_FILE)
            .display()
            .to_string(),
        workspace_key: config.workspace_key.clone(),
        context_windows,
        prompt_confirm_ratio: config.agent.prompt_confirm_ratio,
    }
}

fn session_settings(config: &Config, model: Option<String>) -> SessionSettings {
    SessionSettings {
        context: config.context_settings(model.as_deref()),
        model: model.or_else(|| config.default_model.clone()),
        headless: false,
        max_steps: Some(config.agent.max_steps),
        policy: config.session_policy(),
        laptop_mcp: crate::client::options_for(config).1,
    }
}

/// Puts the terminal back however the TUI ends (return, error or panic).
struct TermGuard {
    enhanced: bool,
}

fn restore_terminal(enhanced: bool) {
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

enum Input {
    Term(TermEvent),
    Failed(String),
}

/// Read terminal input on a thread (crossterm's reader blocks); stops when `stop` is set.
fn spawn_input(tx: mpsc::UnboundedSender<Input>, stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
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
    let mut terminal = match Terminal::new(CrosstermBackend::new(std::io::stdout())) {
        Ok(t) => t,
        Err(e) => {
            drop(guard);
            eprintln!("reasonix: cannot start the terminal UI: {e}");
            return 2;
        }
    };

    let stop = Arc::new(AtomicBool::new(false));
    let (input_tx, mut input_rx) = mpsc::unbounded_channel();
    spawn_input(input_tx, Arc::clone(&stop));

    let ctx = Exec {
        pty: super::term_link::spawn(client.clone(), app_tx.clone()),
        client: client.clone(),
        config: Arc::new(std::sync::Mutex::new(config)),
        tx: app_tx.clone(),
        in_tmux: std::env::var_os("TMUX").is_some(),
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
        quit = ctx.run_all(actions) || app.should_quit();
    }
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

type PanicHook = dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync + 'static;

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

/// Executes actions: each request on its own task, answers back as [`AppEvent`]s.
struct Exec {
    /// Terminal tab traffic, sent in order by [`super::term_link`].
    pty: mpsc::UnboundedSender<super::app::PtyAction>,
    client: Client,
    /// `/permissions remove` drops rules from it, so later sessions do not carry them.
    config: Arc<std::sync::Mutex<Config>>,
    tx: mpsc::UnboundedSender<AppEvent>,
    in_tmux: bool,
}

fn call_error(e: CallError) -> String {
    match e {
        CallError::Remote(r) => r.message,
        CallError::Link(l) => format!("the link dropped before the host answered ({l}); check the transcript and retry if needed"),
    }
}

impl Exec {
    fn config(&self) -> std::sync::MutexGuard<'_, Config> {
        self.config.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `/permissions [remove N]`: the listing (after the removal, if any).
    fn permissions(&self, remove: Option<usize>) {
        let mut config = self.config();
        let rows = crate::permissions::rows(&config);
        let mut text = String::new();
        let mut error = false;
        if let Some(n) = remove {
            match rows.get(n - 1) {
                None => {
                    error = true;
                    text = format!(
                        "/permissions: there is no rule {n} (the list has {})",
                        rows.len()
                    );
                }
                Some(row) => match crate::permissions::remove(&config.home, row) {
                    Ok(done) => {
                        crate::permissions::forget(&mut config, row);
                        text = done;
                    }
                    Err(e) => {
                        error = true;
                        text = e;
                    }
                },
            }
            text.push('\n');
        }
        let rows = crate::permissions::rows(&config);
        text.push_str(&crate::permissions::render(&config, &rows));
        let _ = self.tx.send(AppEvent::Permissions { text, error });
    }

    /// Run actions; true when one of them is Quit.
    fn run_all(&self, actions: Vec<Action>) -> bool {
        let mut quit = false;
        for a in actions {
            quit |= self.run(a);
        }
        quit
    }

    fn request<F>(&self, what: &str, req: Request, on_ok: F)
    where
        F: FnOnce(Response) -> Option<AppEvent> + Send + 'static,
    {
        let client = self.client.clone();
        let tx = self.tx.clone();
        let what = what.to_string();
        tokio::spawn(async move {
            let ev = match client.request(req).await {
                Ok(r) => on_ok(r),
                // A replaced link re-opens the session itself (Reattached); an open that
                // died with the old link needs no message.
                Err(CallError::Link(_)) if what == "open session" => None,
                Err(e) => Some(AppEvent::RequestFailed {
                    what,
                    message: call_error(e),
                }),
            };
            if let Some(ev) = ev {
                let _ = tx.send(ev);
            }
        });
    }

    /// A steer; when the host has no running turn any more, the app sends it as a message.
    fn steer(&self, request_id: String, text: String) {
        let client = self.client.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let req = Request::Steer {
                request_id,
                text: text.clone(),
            };
            let ev = match client.request(req).await {
                Ok(_) => None,
                Err(CallError::Remote(e)) if e.code == "not_running" => {
                    Some(AppEvent::SteerRefused { text })
                }
                Err(e) => Some(AppEvent::RequestFailed {
                    what: "steer".into(),
                    message: call_error(e),
                }),
            };
            if let Some(ev) = ev {
                let _ = tx.send(ev);
            }
        });
    }

    /// Prompt history: a failure costs only the shared history, so it is logged, not shown.
    fn history(&self, req: Request) {
        let client = self.client.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            match client.request(req).await {
                Ok(Response::History { entries }) => {
                    let _ = tx.send(AppEvent::History(entries));
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("prompt history: {e}"),
            }
        });
    }

    fn run(&self, action: Action) -> bool {
        match action {
            Action::OpenSession(OpenParams {
                session,
                new,
                since,
                takeover,
                model,
            }) => {
                let open = OpenSession {
                    session,
                    new,
                    since,
                    read_only: false,
                    takeover,
                    settings: session_settings(&self.config(), model),
                };
                self.request("open session", Request::OpenSession(open), |r| match r {
                    Response::SessionOpened(o) => Some(AppEvent::SessionOpened(o)),
                    other => Some(AppEvent::RequestFailed {
                        what: "open session".into(),
                        message: format!("unexpected answer {other:?}"),
                    }),
                });
            }
            Action::Submit { request_id, text } => {
                self.request("submit", Request::SubmitTurn { request_id, text }, |_| None);
            }
            Action::ContinueTurn { request_id } => {
                self.request("continue", Request::ContinueTurn { request_id }, |_| None);
            }
            Action::Cancel { request_id } => {
                self.request("cancel", Request::Cancel { request_id }, |_| None);
            }
            Action::Approve {
                request_id,
                approval_id,
                decision,
                everywhere,
            } => {
                if everywhere {
                    self.client
                        .remember_always_scope(&approval_id, AlwaysScope::Global);
                }
                self.request(
                    "approval",
                    Request::Approve {
                        request_id,
                        approval_id,
                        decision,
                    },
                    |_| None,
                );
            }
            Action::Rewind {
                request_id,
                to_turn,
                scope,
                dry_run,
            } => {
                self.request(
                    "rewind",
                    Request::Rewind {
                        request_id,
                        to_turn,
                        scope,
                        dry_run,
                    },
                    move |r| match r {
                        Response::Rewound { summary, paths } => Some(AppEvent::Rewound {
                            summary,
                            paths,
                            scope,
                            dry_run,
                        }),
                        _ => None,
                    },
                );
            }
            Action::Takeover => {
                self.request("takeover", Request::Takeover, |_| Some(AppEvent::TookOver));
            }
            Action::ListSessions => {
                self.request("list sessions", Request::ListSessions, |r| match r {
                    Response::Sessions { sessions } => Some(AppEvent::Sessions(sessions)),
                    _ => None,
                });
            }
            Action::RenameSession { session, title } => {
                let (s, t) = (session.clone(), title.clone());
                self.request(
                    "rename session",
                    Request::RenameSession {
                        session: session.clone(),
                        title: title.clone(),
                    },
                    move |r| match r {
                        Response::Ok => Some(AppEvent::SessionRenamed {
                            session: s.clone(),
                            title: t.clone(),
                        }),
                        _ => None,
                    },
                );
            }
            Action::DeleteSession { session } => {
                let s = session.clone();
                self.request(
                    "delete session",
                    Request::DeleteSession {
                        session: session.clone(),
                    },
                    move |r| match r {
                        Response::Ok => Some(AppEvent::SessionDeleted(s.clone())),
                        _ => None,
                    },
                );
            }
            Action::ListTrash => {
                self.request("list the trash", Request::ListTrash, |r| match r {
                    Response::Trash { sessions } => Some(AppEvent::Trash(sessions)),
                    _ => None,
                });
            }
            Action::RestoreSession { session } => {
                let s = session.clone();
                self.request(
                    "restore session",
                    Request::RestoreSession { session },
                    move |r| match r {
                        Response::Ok => Some(AppEvent::SessionRestored(s.clone())),
                        _ => None,
                    },
                );
            }
            Action::PurgeSession { session } => {
                self.request(
                    "purge session",
                    Request::PurgeSessions {
                        session: Some(session),
                    },
                    |r| match r {
                        Response::Purged { sessions } => Some(AppEvent::SessionsPurged(sessions)),
                        _ => None,
                    },
                );
            }
            Action::ListDir { path } => {
                let p = path.clone();
                self.request(
                    &format!("list_dir:{path}"),
                    Request::ListDir { path },
                    move |r| match r {
                        Response::DirEntries { entries } => {
                            Some(AppEvent::DirEntries { path: p, entries })
                        }
                        _ => None,
                    },
                );
            }
            Action::McpResources { server } => {
                let s = server.clone();
                self.request(
                    &format!("mcp_resources:{server}"),
                    Request::McpResources { server },
                    move |r| match r {
                        Response::McpResources { resources } => Some(AppEvent::McpResources {
                            server: s,
                            resources,
                        }),
                        _ => None,
                    },
                );
            }
            Action::Status => {
                self.request("status", Request::Status, |r| match r {
                    Response::Status(s) => Some(AppEvent::Status(s)),
                    _ => None,
                });
            }
            Action::McpStatus => {
                // The laptop list only matters before a session is open (the host then
                // starts those servers through this link for the answer).
                let laptop = crate::client::options_for(&self.config()).1;
                self.request("mcp", Request::McpStatus { laptop }, |r| match r {
                    Response::McpServers { servers } => Some(AppEvent::McpServers(servers)),
                    other => Some(AppEvent::RequestFailed {
                        what: "mcp".into(),
                        message: format!("unexpected answer {other:?}"),
                    }),
                });
            }
            Action::Compact { request_id, focus } => {
                self.request(
                    "compact",
                    Request::Compact { request_id, focus },
                    |r| match r {
                        Response::CompactDone { summary, .. } => {
                            Some(AppEvent::CompactDone(summary))
                        }
                        _ => None,
                    },
                );
            }
            Action::ContextReport => {
                self.request("context", Request::ContextReport, |r| match r {
                    Response::Context(report) => Some(AppEvent::Context(report)),
                    other => Some(AppEvent::RequestFailed {
                        what: "context".into(),
                        message: format!("unexpected answer {other:?}"),
                    }),
                });
            }
            Action::Copy(text) => {
                let seq = osc52::sequence(&text, self.in_tmux);
                let mut out = std::io::stdout();
                let _ = out.write_all(seq.as_bytes());
                let _ = out.flush();
            }
            Action::SaveOutput(req) => {
                let client = self.client.clone();
                let tx = self.tx.clone();
                let home = self.config().home.clone();
                tokio::spawn(async move {
                    let ev = match super::fullout::save(&client, &home, &req).await {
                        Ok((path, bytes)) => AppEvent::OutputSaved {
                            tool: req.tool.clone(),
                            path,
                            bytes,
                            fetched: req.full.is_some(),
                        },
                        Err(message) => AppEvent::RequestFailed {
                            what: "output".into(),
                            message,
                        },
                    };
                    let _ = tx.send(ev);
                });
            }
            Action::Steer { request_id, text } => self.steer(request_id, text),
            Action::Shell {
                request_id,
                command,
                add_to_context,
            } => self.request(
                "!",
                Request::Shell {
                    request_id,
                    command,
                    add_to_context,
                },
                |_| None,
            ),
            Action::ReloadCommands { then } => {
                let (client, home, tx) = (
                    self.client.clone(),
                    self.config().home.clone(),
                    self.tx.clone(),
                );
                tokio::spawn(async move {
                    let set =
                        crate::commands::load(&client, &home, &crate::tui::builtin_command_names())
                            .await;
                    let _ = tx.send(match then {
                        Some(line) => AppEvent::CommandsRetry { set, line },
                        None => AppEvent::Commands(set),
                    });
                });
            }
            Action::HistoryList => self.history(Request::HistoryList),
            Action::HistoryAppend { text } => self.history(Request::HistoryAppend { text }),
            Action::RetryNow => self.client.retry_now(),
            Action::Pty(a) => {
                let _ = self.pty.send(a);
            }
            Action::CreateWorkspace => self.client.create_workspace(),
            Action::Permissions { remove } => self.permissions(remove),
            Action::Quit => return true,
        }
        false
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
