//! Terminal tabs rendered with ratatui's TestBackend: the tab bar, a PTY screen with colours
//! and the cursor, the conversation with the tab bar, `@term:N` completion, and the
//! actions the state machine asks for (open, keystrokes, re-attach by screen).

mod tui_common;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::{Backend, TestBackend};
use ratatui::layout::Position;
use ratatui::style::{Color, Modifier};
use ratatui::Terminal;
use reasonix_forward::proto::{ClientRole, PtyBytes, PtyInfo, PtyNotification, PtySize};
use reasonix_local::tui::{render, Action, App, AppEvent, PtyAction, PtyEvent};
use tui_common::*;

fn info(id: u64) -> PtyInfo {
    PtyInfo {
        id,
        pid: 4242,
        shell: "/bin/bash".into(),
        size: PtySize { cols: 60, rows: 18 },
        started: "2026-05-01T10:00:00Z".into(),
        clients: 1,
        output_end: 0,
        exited: None,
    }
}

fn output(app: &mut App, pty: u64, offset: u64, bytes: &[u8]) -> Vec<Action> {
    app.handle(AppEvent::Pty(PtyEvent::Notify(PtyNotification::Output {
        pty,
        offset,
        data: PtyBytes(bytes.to_vec()),
    })))
}

const SHELL_OUTPUT: &[u8] =
    b"\x1b[1;31merror\x1b[0m: build failed\r\n\x1b[32mok\x1b[0m \x1b[7mreverse\x1b[0m\r\n$ ls";

/// An app at 60x20 with terminal 1 open and shown.
fn app_with_terminal() -> App {
    let mut app = App::new(settings());
    connected(&mut app, ClientRole::Driver);
    assert!(
        app.set_screen_size(60, 20).is_empty(),
        "no tab to resize yet"
    );
    let open = app.handle_key(ctrl('t'));
    assert_eq!(
        open,
        vec![Action::Pty(PtyAction::Open {
            size: PtySize { cols: 60, rows: 18 }
        })],
        "Ctrl-T with no terminal opens one sized to the screen minus the tab bar and status"
    );
    app.handle(AppEvent::Pty(PtyEvent::Attached {
        info: info(1),
        opened: true,
    }));
    output(&mut app, 1, 0, SHELL_OUTPUT);
    app
}

#[test]
fn terminal_tab_draws_the_screen_with_colours_and_cursor() {
    let app = app_with_terminal();
    insta::assert_snapshot!("terminal_tab_60x20", draw(&app, 60, 20));
    let mut t = Terminal::new(TestBackend::new(60, 20)).expect("backend");
    t.draw(|f| render(&app, f)).expect("draw");
    let buf = t.backend().buffer().clone();
    // Row 0 is the tab bar; the PTY's first row is row 1.
    let e = &buf[(0, 1)];
    assert_eq!(e.symbol(), "e");
    assert_eq!(e.fg, Color::Indexed(1));
    assert!(e.modifier.contains(Modifier::BOLD));
    assert_eq!(buf[(0, 2)].fg, Color::Indexed(2));
    assert!(buf[(3, 2)].modifier.contains(Modifier::REVERSED));
    // The cursor is where the shell left it: after "$ ls" on the third row.
    assert_eq!(
        t.backend_mut().get_cursor_position().expect("cursor"),
        Position::new(4, 3)
    );
}

#[test]
fn keys_go_to_the_pty_except_ctrl_t() {
    let mut app = app_with_terminal();
    let input = |data: &[u8]| {
        vec![Action::Pty(PtyAction::Input {
            pty: 1,
            data: data.to_vec(),
        })]
    };
    assert_eq!(
        app.handle_key(ctrl('c')),
        input(b"\x03"),
        "Ctrl-C is the shell's"
    );
    assert_eq!(app.handle_key(key(KeyCode::Up)), input(b"\x1b[A"));
    assert_eq!(app.handle_key(key(KeyCode::Char('q'))), input(b"q"));
    // A program that asked for application cursor keys gets them.
    output(
        &mut app,
        1,
        SHELL_OUTPUT.len() as u64,
        b"\x1b[?1h\x1b[?2004h",
    );
    assert_eq!(app.handle_key(key(KeyCode::Up)), input(b"\x1bOA"));
    assert_eq!(
        app.handle_paste("a\nb"),
        input(b"\x1b[200~a\rb\x1b[201~"),
        "bracketed paste when the program asked for it"
    );
    // Ctrl-T goes back to the conversation; keys are the composer's again.
    assert!(app.handle_key(ctrl('t')).is_empty());
    assert!(app.handle_key(key(KeyCode::Char('q'))).is_empty());
    // Resizing the screen resizes the PTY.
    assert_eq!(
        app.set_screen_size(80, 30),
        vec![Action::Pty(PtyAction::Resize {
            pty: 1,
            size: PtySize { cols: 80, rows: 28 }
        })]
    );
}

/// Ctrl-C (or Ctrl-Break) that the Windows console delivered as a console event, not a key
/// (wine's console on a Unix terminal does; `platform::signals::ConsoleInterrupts`): in a
/// terminal tab it is the shell's `0x03`, as many times as it comes, never the workbench's
/// cancel or quit; in the conversation it is the workbench's Ctrl-C (cancel the turn, twice
/// quits), as the key is.
#[test]
fn a_console_interrupt_is_the_ctrl_c_key_in_a_tab_and_outside() {
    let mut app = busy_app();
    app.set_screen_size(60, 20);
    assert!(matches!(
        app.handle_key(ctrl('t')).as_slice(),
        [Action::Pty(PtyAction::Open { .. })]
    ));
    app.handle(AppEvent::Pty(PtyEvent::Attached {
        info: info(1),
        opened: true,
    }));
    let sigint = vec![Action::Pty(PtyAction::Input {
        pty: 1,
        data: b"\x03".to_vec(),
    })];
    assert_eq!(app.console_interrupt(), sigint, "the shell's Ctrl-C");
    assert_eq!(app.console_interrupt(), sigint, "again, not a quit");
    assert!(!app.should_quit());
    // Back in the conversation (with the turn still running) it cancels, then quits.
    assert!(app.handle_key(ctrl('t')).is_empty());
    let a = app.console_interrupt();
    assert!(matches!(a.as_slice(), [Action::Cancel { .. }]), "{a:?}");
    assert!(!app.should_quit());
    assert_eq!(app.console_interrupt(), vec![Action::Quit]);
    assert!(app.should_quit());
}

#[test]
fn conversation_with_tab_bar_and_term_completion() {
    let mut app = app_with_terminal();
    app.handle_key(ctrl('t'));
    type_str(&mut app, "what does @te");
    insta::assert_snapshot!("terminal_conversation_completion_60x20", draw(&app, 60, 20));
    app.handle_key(key(KeyCode::Tab));
    let sent = type_str(&mut app, "say?");
    assert!(sent.is_empty());
    let actions = app.handle_key(key(KeyCode::Enter));
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Submit { text, .. } if text == "what does @term:1 say?")),
        "{actions:?}"
    );
}

#[test]
fn a_new_tui_lists_running_terminals_and_shows_the_hosts_screen() {
    let mut app = App::new(settings());
    app.set_screen_size(60, 20);
    let first = app.handle_event(reasonix_local::client::ClientEvent::Connection(
        reasonix_local::client::ConnState::Connected { resumed: false },
    ));
    assert_eq!(first, vec![Action::Pty(PtyAction::List)]);
    let mut gone = info(2);
    gone.exited = Some("exit status 0".into());
    let attach = app.handle(AppEvent::Pty(PtyEvent::Listed(vec![info(1), gone])));
    assert_eq!(
        attach,
        vec![Action::Pty(PtyAction::Attach {
            pty: 1,
            have: None,
            size: PtySize { cols: 60, rows: 18 }
        })],
        "running terminals are attached without an offset (the host sends its screen)"
    );
    app.handle(AppEvent::Pty(PtyEvent::Attached {
        info: info(1),
        opened: false,
    }));
    app.handle(AppEvent::Pty(PtyEvent::Notify(PtyNotification::Screen {
        pty: 1,
        offset: 5000,
        size: PtySize { cols: 60, rows: 18 },
        data: PtyBytes(b"\x1b[?1049l\x1b[m\x1b[H\x1b[2JPID=4242\r\n$ ".to_vec()),
    })));
    // Output already in the screen is not drawn twice; what follows is.
    output(&mut app, 1, 4990, b"0123456789");
    output(&mut app, 1, 5000, b"echo hi");
    assert!(app
        .handle_key(KeyEvent::new(KeyCode::Char('t'), KeyModifiers::CONTROL))
        .is_empty());
    let screen = draw(&app, 60, 20);
    assert!(screen.contains("PID=4242"), "{screen}");
    assert!(screen.contains("$ echo hi"), "{screen}");
    assert!(!screen.contains("0123456789"), "{screen}");
    // The shell exits: its tab goes, the conversation is shown.
    app.handle(AppEvent::Pty(PtyEvent::Notify(PtyNotification::Exited {
        pty: 1,
        status: "exit status 0".into(),
    })));
    let screen = draw(&app, 60, 20);
    assert!(!screen.contains("1 bash"), "{screen}");
}
