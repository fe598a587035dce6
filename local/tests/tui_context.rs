//! `/context`, `/compact [focus]` and the status bar's context and cache figures: the App fed
//! with the events a long session produces, rendered with ratatui's TestBackend (insta
//! snapshots under `tests/snapshots/`), and the actions the commands produce.

mod tui_common;

use crossterm::event::KeyCode;
use reasonix_forward::proto::{
    ClientRole, CompactionKind, CompactionTrigger, ContextReport, ContextSettings, EventKind,
    RecallReport, TurnOutcome, TurnState, Usage,
};
use reasonix_local::client::ClientEvent;
use reasonix_local::tui::{Action, App, AppEvent};
use tui_common::*;

const SIZES: [(u16, u16); 2] = [(60, 24), (120, 40)];

fn snap(name: &str, app: &App) {
    for (w, h) in SIZES {
        insta::assert_snapshot!(format!("{name}_{w}x{h}"), draw(app, w, h));
    }
}

fn usage(prompt: u64, hit: u64) -> EventKind {
    EventKind::Usage {
        usage: Usage {
            prompt_tokens: prompt,
            completion_tokens: 400,
            cache_hit_tokens: hit,
            cache_miss_tokens: prompt - hit,
            reasoning_tokens: 0,
        },
        model: "deepseek-chat".into(),
        system_hash: "s".into(),
        tools_hash: "t".into(),
        cache_note: None,
    }
}

/// An idle session two turns long whose last request used 96k of a 128k window.
fn long_session() -> App {
    let mut app = App::new(settings());
    app.tick(0, BASE_WALL_MS);
    connected(&mut app, ClientRole::Driver);
    let mut f = Feed::new();
    for (n, (prompt, hit)) in [(40_000, 30_000), (96_000, 92_160)].into_iter().enumerate() {
        f.ev(
            &mut app,
            n as f64 * 10.0,
            EventKind::UserTurn {
                attachments: Vec::new(),
                request_id: format!("r{n}"),
                text: format!("turn {n}: read the logs"),
            },
        );
        f.ev(&mut app, n as f64 * 10.0 + 5.0, usage(prompt, hit));
        f.ev(
            &mut app,
            n as f64 * 10.0 + 6.0,
            EventKind::TurnFinished {
                outcome: TurnOutcome::Completed,
                detail: None,
            },
        );
    }
    app.handle_event(ClientEvent::State {
        state: TurnState::Idle,
        detail: None,
    });
    app
}

fn report() -> ContextReport {
    ContextReport {
        settings: ContextSettings {
            window: 128_000,
            ..ContextSettings::default()
        },
        system_tokens: 310,
        instructions_tokens: 1_450,
        tools_tokens: 5_200,
        conversation_tokens: 12_800,
        tool_result_tokens: 76_240,
        messages: 48,
        compactions: (1, 0),
        tokens_per_byte: 0.262,
        ..ContextReport::default()
    }
}

#[test]
fn status_bar_shows_context_used_and_cache_hit() {
    let app = long_session();
    let bar = draw(&app, 120, 40);
    let last = bar
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    // 96,000 of 128,000 tokens; (30,000 + 92,160) hit of 136,000 prompt tokens.
    assert!(last.contains("ctx 75%"), "{last}");
    assert!(last.contains("cache 90%"), "{last}");
    snap("status_context", &app);
}

#[test]
fn a_compaction_updates_the_context_figure() {
    let mut app = long_session();
    let mut f = Feed { seq: 6, turn: 2 };
    f.ev(
        &mut app,
        30.0,
        EventKind::Compacted {
            kind: CompactionKind::Summary,
            trigger: CompactionTrigger::User,
            tokens_before: 96_000,
            tokens_after: 19_200,
            snipped: Vec::new(),
            replaced: Some((0, 40)),
            summary: Some("<compaction-summary>…</compaction-summary>".into()),
            archived: Vec::new(),
            archive: "archive/x.jsonl".into(),
            kept_user_bytes: None,
        },
    );
    let bar = draw(&app, 120, 40);
    let last = bar
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    assert!(last.contains("ctx 15%"), "{last}");
}

#[test]
fn context_overlay_loading_then_split() {
    let mut app = long_session();
    type_str(&mut app, "/context");
    app.handle_key(key(KeyCode::Esc));
    let actions = app.handle_key(key(KeyCode::Enter));
    assert_eq!(actions, vec![Action::ContextReport]);
    snap("overlay_context_loading", &app);
    app.handle(AppEvent::Context(report()));
    let wide = draw(&app, 120, 40);
    for part in [
        "System prompt",
        "Standing instructions",
        "Tool schemas",
        "Conversation",
        "Tool results",
        "89.8 % of prompt tokens from cache",
        "Cost so far",
    ] {
        assert!(wide.contains(part), "{part} missing:\n{wide}");
    }
    assert!(
        wide.contains("nothing recalled into the last message"),
        "{wide}"
    );
    snap("overlay_context", &app);
    // What memory recall added to the last message (#32).
    app.handle(AppEvent::Context(ContextReport {
        recall: Some(RecallReport {
            facts: vec!["p-tabs".into(), "g-editor".into()],
            tokens: 212,
        }),
        ..report()
    }));
    let wide = draw(&app, 120, 40);
    assert!(
        wide.contains("last message: 2 fact(s), about 212 tokens · p-tabs, g-editor"),
        "{wide}"
    );
    // `r` asks again; Esc closes.
    assert_eq!(
        app.handle_key(key(KeyCode::Char('r'))),
        vec![Action::ContextReport]
    );
    app.handle_key(key(KeyCode::Esc));
    assert!(!draw(&app, 120, 40).contains("Standing instructions"));
}

#[test]
fn context_overlay_shows_a_failed_request() {
    let mut app = long_session();
    app.handle_key(key(KeyCode::Char('/')));
    type_str(&mut app, "context");
    app.handle_key(key(KeyCode::Esc));
    app.handle_key(key(KeyCode::Enter));
    app.handle(AppEvent::RequestFailed {
        what: "context".into(),
        message: "no session is open on this link".into(),
    });
    assert!(draw(&app, 120, 40).contains("context report failed: no session is open"));
}

fn run_line(app: &mut App, line: &str) -> Vec<Action> {
    type_str(app, line);
    app.handle_key(key(KeyCode::Esc));
    app.handle_key(key(KeyCode::Enter))
}

#[test]
fn compact_with_a_focus_asks_the_host_and_reports_the_answer() {
    let mut app = long_session();
    let actions = run_line(&mut app, "/compact the retry design and open bugs");
    match actions.as_slice() {
        [Action::Compact { request_id, focus }] => {
            assert!(request_id.starts_with("compact-"));
            assert_eq!(focus.as_deref(), Some("the retry design and open bugs"));
        }
        other => panic!("expected one Compact action, got {other:?}"),
    }
    // Without a focus.
    match run_line(&mut app, "/compact").as_slice() {
        [Action::Compact { focus: None, .. }] => {}
        other => panic!("expected a Compact action without focus, got {other:?}"),
    }
    app.handle(AppEvent::CompactDone(
        "compacted: about 96000 → 19200 tokens; the next request misses the cache once".into(),
    ));
    assert!(draw(&app, 120, 40).contains("compacted: about 96000 → 19200 tokens"));
}

#[test]
fn compact_is_refused_while_a_turn_runs_and_for_a_spectator() {
    let mut app = long_session();
    app.handle_event(ClientEvent::State {
        state: TurnState::Running,
        detail: None,
    });
    assert!(run_line(&mut app, "/compact").is_empty());
    assert!(draw(&app, 120, 40).contains("a turn is running: /compact after it ends"));
    let mut spectator = App::new(settings());
    connected(&mut spectator, ClientRole::Spectator);
    assert!(run_line(&mut spectator, "/compact").is_empty());
}
