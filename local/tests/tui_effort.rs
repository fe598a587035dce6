//! `/effort` in the TUI state machine, with the levels the real configuration gives each model:
//! refused levels name the supported ones, a change re-opens the session with the new effort
//! (a request parameter; nothing is added to the conversation), a model switch keeps the
//! level only where the new model takes it, and the status bar shows it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tui_common;

use reasonix_forward::proto::{ClientRole, ReasoningEffort};
use reasonix_local::config::{Config, LoadOptions};
use reasonix_local::tui::{app_settings, Action, App, OpenParams};
use tui_common::{connected, draw, key, type_str, BASE_WALL_MS};

fn app(effort_flag: Option<ReasoningEffort>) -> (tempfile::TempDir, App) {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        r#"
[[providers]]
name = "claude"
kind = "anthropic"
base_url = "https://api.anthropic.com"
models = ["claude-big", "claude-small"]
api_key_env = "ANTHROPIC_API_KEY"
[providers.model_overrides."claude-small"]
efforts = ["low", "medium"]
effort = "low"
"#,
    )
    .unwrap();
    let config = Config::load(&LoadOptions {
        home: Some(home.path().to_path_buf()),
        ignore_project: true,
        overrides: reasonix_local::config::Overrides {
            effort: effort_flag,
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    let mut app = App::new(app_settings(&config, "local:/ws".into(), None));
    app.tick(0, BASE_WALL_MS);
    connected(&mut app, ClientRole::Driver);
    (home, app)
}

fn run(app: &mut App, line: &str) -> Vec<Action> {
    type_str(app, line);
    app.handle_key(key(crossterm::event::KeyCode::Enter))
}

fn reopen(effort: Option<ReasoningEffort>, model: Option<&str>) -> Vec<Action> {
    vec![Action::OpenSession(OpenParams {
        session: Some("20260501-100000-7f3a".into()),
        new: false,
        since: 0,
        takeover: false,
        model: model.map(str::to_string),
        effort,
    })]
}

#[test]
fn effort_is_checked_against_the_model_and_reopens_the_session() {
    // The built-in default model (deepseek-v4-flash) takes low, high and max.
    let (_home, mut app) = app(None);
    assert_eq!(app.effort(), None);
    assert!(!draw(&app, 120, 30).contains("effort"));

    assert!(run(&mut app, "/effort medium").is_empty());
    let screen = draw(&app, 120, 30);
    assert!(
        screen.contains("the default model does not take that level; it supports: low, high, max"),
        "{screen}"
    );
    assert_eq!(app.effort(), None);

    assert_eq!(
        run(&mut app, "/effort max"),
        reopen(Some(ReasoningEffort::Max), None)
    );
    assert_eq!(app.effort(), Some(ReasoningEffort::Max));
    let screen = draw(&app, 120, 30);
    assert!(screen.contains("effort max"), "{screen}");
    assert!(
        screen.contains("from the next request; the conversation is unchanged"),
        "{screen}"
    );

    // A model that does not take `max` falls back to its own default and says so.
    let a = run(&mut app, "/model claude/claude-small");
    assert_eq!(
        a,
        reopen(Some(ReasoningEffort::Low), Some("claude/claude-small"))
    );
    let screen = draw(&app, 120, 30);
    assert!(
        screen.contains("effort max is not a level of claude/claude-small (it supports: low, medium); using low"),
        "{screen}"
    );
    assert!(screen.contains("effort low"), "{screen}");

    // `/effort` alone reports; a bad word is refused with the levels.
    assert!(run(&mut app, "/effort").is_empty());
    assert!(draw(&app, 120, 30).contains("claude/claude-small takes low, medium (default: low)"));
    assert!(run(&mut app, "/effort extreme").is_empty());
    assert!(draw(&app, 120, 30).contains("`extreme` is not a level"));

    assert_eq!(
        run(&mut app, "/effort medium"),
        reopen(Some(ReasoningEffort::Medium), Some("claude/claude-small"))
    );
    // `default` goes back to the model's own level.
    assert_eq!(
        run(&mut app, "/effort default"),
        reopen(Some(ReasoningEffort::Low), Some("claude/claude-small"))
    );
    // A chosen level the next model takes is kept.
    run(&mut app, "/effort medium");
    let a = run(&mut app, "/model claude/claude-big");
    assert_eq!(
        a,
        reopen(Some(ReasoningEffort::Medium), Some("claude/claude-big"))
    );
}

#[test]
fn the_flag_sets_the_starting_level() {
    let (_home, app) = app(Some(ReasoningEffort::High));
    assert_eq!(app.effort(), Some(ReasoningEffort::High));
    assert!(draw(&app, 120, 30).contains("effort high"));
    // A flag the default model does not take is a load error naming the levels.
    let home = tempfile::tempdir().unwrap();
    let e = Config::load(&LoadOptions {
        home: Some(home.path().to_path_buf()),
        ignore_project: true,
        overrides: reasonix_local::config::Overrides {
            effort: Some(ReasoningEffort::Medium),
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("deepseek/deepseek-v4-flash") && e.contains("it supports: low, high, max"),
        "{e}"
    );
}
