//! Render cost of a long transcript. Run with
//! `cargo test -p reasonix --test tui_perf -- --ignored --nocapture`; it prints the time per
//! frame for a 5,000-message transcript. Only the visible window is laid out, so the cost
//! per frame stays flat however long the session is.

mod tui_common;

use std::time::Instant;

use crossterm::event::KeyCode;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use reasonix_forward::proto::{ClientRole, EventKind, TurnOutcome};
use reasonix_local::tui::{render, App};
use tui_common::*;

fn long_app(messages: usize) -> App {
    let mut app = App::new(settings());
    connected(&mut app, ClientRole::Driver);
    let mut f = Feed::new();
    let mut n = 0;
    while n < messages {
        f.ev(
            &mut app,
            0.0,
            EventKind::UserTurn {
                attachments: Vec::new(),
                request_id: format!("r{n}"),
                text: format!("question number {n}: explain the change"),
            },
        );
        let c = call(
            &format!("c{n}"),
            "read_file",
            serde_json::json!({"path": format!("src/file{n}.rs")}),
        );
        f.ev(
            &mut app,
            0.1,
            EventKind::AssistantMessage {
                content: format!("Answer {n}.\n\n{ANSWER}"),
                reasoning: Some("thinking about it".into()),
                tool_calls: vec![c.clone()],
                provider_replay: None,
            },
        );
        f.ev(
            &mut app,
            0.2,
            EventKind::ToolStarted {
                call_id: c.id.clone(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            },
        );
        f.ev(
            &mut app,
            0.3,
            EventKind::ToolFinished {
                call_id: c.id.clone(),
                name: c.name.clone(),
                is_error: false,
                output: "1→a\n2→b\n3→c\n4→d\n5→e\n6→f\n7→g".into(),
                output_ref: None,
                denied: None,
                context_bytes: None,
            },
        );
        f.ev(
            &mut app,
            0.4,
            EventKind::TurnFinished {
                outcome: TurnOutcome::Completed,
                detail: None,
            },
        );
        n += 4; // user turn, reasoning, answer, tool card
    }
    app
}

fn time_frames(
    app: &mut App,
    term: &mut Terminal<TestBackend>,
    frames: u32,
    mut between: impl FnMut(&mut App, u32),
) -> f64 {
    let t = Instant::now();
    for i in 0..frames {
        between(app, i);
        if let Err(e) = term.draw(|f| render(app, f)) {
            panic!("draw: {e}");
        }
    }
    t.elapsed().as_secs_f64() * 1000.0 / frames as f64
}

#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn render_time_per_frame_with_5000_messages() {
    let t = Instant::now();
    let mut app = long_app(5000);
    let build_ms = t.elapsed().as_secs_f64() * 1000.0;
    let mut term = match Terminal::new(TestBackend::new(120, 40)) {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    let first = time_frames(&mut app, &mut term, 1, |_, _| {});
    let follow = time_frames(&mut app, &mut term, 200, |_, _| {});
    let mut seq = app.last_seq();
    let streaming = time_frames(&mut app, &mut term, 200, |app, i| {
        seq += 1;
        app.handle_event(reasonix_local::client::ClientEvent::Event(
            reasonix_forward::proto::Event {
                seq,
                ts: ts(1.0),
                turn: 9999,
                kind: EventKind::TextDelta {
                    text: format!("word{i} "),
                },
            },
        ));
    });
    app.handle_key(key(KeyCode::Home));
    let top_cold = time_frames(&mut app, &mut term, 1, |_, _| {});
    let top = time_frames(&mut app, &mut term, 100, |app, i| {
        app.handle_key(key(if i % 2 == 0 {
            KeyCode::PageDown
        } else {
            KeyCode::PageUp
        }));
    });
    let mut term2 = match Terminal::new(TestBackend::new(100, 30)) {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    app.handle_key(key(KeyCode::End));
    let resized = time_frames(&mut app, &mut term2, 1, |_, _| {});
    println!("5,000-message transcript at 120x40 (built from events in {build_ms:.0} ms):");
    println!("  first frame (cold layout of the visible window): {first:.3} ms");
    println!("  following the bottom, idle:                      {follow:.3} ms/frame");
    println!("  following while streaming one delta per frame:  {streaming:.3} ms/frame");
    println!("  jump to the top (Home), first frame:             {top_cold:.3} ms");
    println!("  paging near the top:                             {top:.3} ms/frame");
    println!("  first frame after a resize to 100x30:            {resized:.3} ms");
    assert!(draw(&app, 60, 20).contains("word199"));
}
