//! Shared fixtures of the TUI tests: an App fed with realistic events, and rendering to text.

#![allow(dead_code)]

use std::collections::HashMap;
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use reasonix_forward::proto::{
    ClientRole, Event, EventKind, SessionOpened, ToolCall, TurnState, Usage,
};
use reasonix_local::client::{ClientEvent, ConnState};
use reasonix_local::config::Prices;
use reasonix_local::tui::{render, App, AppEvent, AppSettings};

/// Timestamp `secs` seconds after a fixed instant.
pub fn ts(secs: f64) -> String {
    let ms = (secs * 1000.0).round() as i64;
    format!(
        "2026-05-01T10:{:02}:{:02}.{:03}Z",
        ms / 60_000,
        (ms / 1000) % 60,
        ms % 1000
    )
}

/// Wall clock (ms since the epoch) of `ts(secs)`.
pub const BASE_WALL_MS: i64 = 1_777_629_600_000; // 2026-05-01T10:00:00Z

pub fn settings() -> AppSettings {
    let mut prices = HashMap::new();
    let p = Prices {
        input: 0.27,
        cached: 0.07,
        output: 1.10,
    };
    prices.insert("deepseek-chat".to_string(), p);
    prices.insert("deepseek/deepseek-chat".to_string(), p);
    AppSettings {
        workspace: "dev@build-box:/home/dev/project".into(),
        models: vec![
            "deepseek/deepseek-chat".into(),
            "deepseek/deepseek-reasoner".into(),
        ],
        model: Some("deepseek/deepseek-chat".into()),
        prices,
        mode: "ask".into(),
        build: "0.1.0-3f9c2e1a0b7d".into(),
        config_file: "/home/me/.reasonix/config.toml".into(),
        workspace_key: Some("dev@build-box:/home/dev/project".into()),
        context_windows: [
            ("deepseek/deepseek-chat".to_string(), 128_000),
            ("deepseek-chat".to_string(), 128_000),
        ]
        .into_iter()
        .collect(),
        prompt_confirm_ratio: 0.25,
        efforts: HashMap::new(),
        effort: None,
    }
}

pub fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

pub fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

pub fn type_str(app: &mut App, s: &str) -> Vec<reasonix_local::tui::Action> {
    let mut out = Vec::new();
    for c in s.chars() {
        out.extend(app.handle_key(key(KeyCode::Char(c))));
    }
    out
}

pub struct Feed {
    pub seq: u64,
    pub turn: u64,
}

impl Feed {
    pub fn new() -> Self {
        Feed { seq: 0, turn: 0 }
    }

    pub fn ev(&mut self, app: &mut App, at: f64, kind: EventKind) {
        self.seq += 1;
        if matches!(kind, EventKind::UserTurn { .. }) {
            self.turn += 1;
        }
        app.handle_event(ClientEvent::Event(Event {
            seq: self.seq,
            ts: ts(at),
            turn: self.turn,
            kind,
        }));
    }
}

pub fn connected(app: &mut App, role: ClientRole) {
    app.handle_event(ClientEvent::Connection(ConnState::Connected {
        resumed: false,
    }));
    app.handle(AppEvent::SessionOpened(SessionOpened {
        session: "20260501-100000-7f3a".into(),
        created: true,
        role,
        last_seq: 0,
        state: TurnState::Idle,
        notice: None,
        sandbox: "bwrap".into(),
        policy: Default::default(),
        ignored: Vec::new(),
    }));
}

pub fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.to_string(),
    }
}

pub const ANSWER: &str = "## Plan\n\nThe loop reads one element past the end. I will:\n\n1. read `src/range.rs`\n2. fix the bound in **last()**\n3. run the tests\n\n```rust\nfn last(v: &[u8]) -> u8 {\n    v[v.len() - 1] // was v[v.len()]\n}\n```\n";

/// A session with markdown, reasoning, finished/running/failed tool cards, an edit diff and
/// notices (cache miss, reconnect).
pub fn busy_app() -> App {
    let mut app = App::new(settings());
    app.tick(0, BASE_WALL_MS);
    connected(&mut app, ClientRole::Driver);
    let mut f = Feed::new();
    f.ev(
        &mut app,
        0.0,
        EventKind::UserTurn {
            attachments: Vec::new(),
            request_id: "r1".into(),
            text: "Fix the off-by-one in src/range.rs and run the tests".into(),
        },
    );
    app.handle_event(ClientEvent::State {
        state: TurnState::Running,
        detail: None,
    });
    f.ev(&mut app, 0.5, EventKind::ReasoningDelta { text: "The user reports an off-by-one.\nI should read the file first,\nthen patch the index.".into() });
    f.ev(
        &mut app,
        1.0,
        EventKind::TextDelta {
            text: ANSWER[..40].into(),
        },
    );
    f.ev(
        &mut app,
        1.2,
        EventKind::TextDelta {
            text: ANSWER[40..].into(),
        },
    );
    let read = call(
        "c1",
        "read_file",
        serde_json::json!({"path": "src/range.rs"}),
    );
    let edit = call(
        "c2",
        "edit_file",
        serde_json::json!({
            "path": "src/range.rs",
            "old_string": "fn last(v: &[u8]) -> u8 {\n    v[v.len()]\n}\n",
            "new_string": "fn last(v: &[u8]) -> u8 {\n    v[v.len() - 1]\n}\n",
        }),
    );
    let grep = call(
        "c3",
        "grep",
        serde_json::json!({"pattern": "fn last", "path": "lib"}),
    );
    let bash = call(
        "c4",
        "bash",
        serde_json::json!({"command": "cargo test -p range"}),
    );
    f.ev(&mut app, 1.5, EventKind::AssistantMessage {
        content: ANSWER.into(),
        reasoning: Some("The user reports an off-by-one.\nI should read the file first,\nthen patch the index.".into()),
        tool_calls: vec![read.clone(), edit.clone(), grep.clone(), bash.clone()],
        provider_replay: None,
    });
    f.ev(
        &mut app,
        1.6,
        EventKind::Usage {
            usage: Usage {
                prompt_tokens: 12_000,
                completion_tokens: 800,
                cache_hit_tokens: 9_000,
                cache_miss_tokens: 3_000,
                reasoning_tokens: 100,
            },
            model: "deepseek-chat".into(),
            system_hash: "a".into(),
            tools_hash: "b".into(),
            cache_note: Some(
                "the tool schemas changed since the last request (tools hash 1f2e → 9c0d)".into(),
            ),
        },
    );
    for (c, out, err, a, b) in [
        (
            &read,
            "1→fn last(v: &[u8]) -> u8 {\n2→    v[v.len()]\n3→}",
            false,
            1.7,
            1.9,
        ),
        (
            &edit,
            "edited src/range.rs (1 replacement)",
            false,
            2.0,
            2.1,
        ),
        (
            &grep,
            "cannot search lib: No such file or directory (os error 2)",
            true,
            2.2,
            2.3,
        ),
    ] {
        f.ev(
            &mut app,
            a,
            EventKind::ToolStarted {
                call_id: c.id.clone(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            },
        );
        f.ev(
            &mut app,
            b,
            EventKind::ToolFinished {
                call_id: c.id.clone(),
                name: c.name.clone(),
                is_error: err,
                output: out.into(),
                output_ref: None,
                denied: None,
                context_bytes: None,
            },
        );
    }
    f.ev(
        &mut app,
        2.5,
        EventKind::ToolStarted {
            call_id: bash.id.clone(),
            name: bash.name.clone(),
            arguments: bash.arguments.clone(),
        },
    );
    app.handle_event(ClientEvent::ToolProgress {
        call_id: "c4".into(),
        message: "   Compiling range v0.1.0".into(),
    });
    app.handle_event(ClientEvent::ToolProgress {
        call_id: "c4".into(),
        message: "running 12 tests".into(),
    });
    app.handle_event(ClientEvent::Connection(ConnState::Reconnecting {
        attempt: 1,
        next_in: Duration::from_millis(200),
        last_contact_secs: 3,
        reason: "transport closed".into(),
    }));
    app.handle_event(ClientEvent::Connection(ConnState::Connected {
        resumed: true,
    }));
    app.tick(6_000, BASE_WALL_MS + 6_000);
    app
}

/// Render to text at `w`×`h`.
pub fn draw(app: &App, w: u16, h: u16) -> String {
    let mut t = match Terminal::new(TestBackend::new(w, h)) {
        Ok(t) => t,
        Err(e) => panic!("test backend: {e}"),
    };
    if let Err(e) = t.draw(|f| render(app, f)) {
        panic!("draw: {e}");
    }
    format!("{}", t.backend())
}

/// The buffer, for style checks.
pub fn buffer(app: &App, w: u16, h: u16) -> ratatui::buffer::Buffer {
    let mut t = match Terminal::new(TestBackend::new(w, h)) {
        Ok(t) => t,
        Err(e) => panic!("test backend: {e}"),
    };
    if let Err(e) = t.draw(|f| render(app, f)) {
        panic!("draw: {e}");
    }
    t.backend().buffer().clone()
}
