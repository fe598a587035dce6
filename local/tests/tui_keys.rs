//! Key handling of the TUI state machine: history, multi-line input, Ctrl-C, completion,
//! approvals, prompts and the actions they produce.

mod tui_common;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use reasonix_bootstrap::{
    HostKeyAnswer, HostKeyQuestion, HostKeyStatus, Prompter, SecretPrompt, SecretPurpose,
};
use reasonix_forward::proto::{
    ApprovalDecision, ClientRole, DirEntry, EventKind, McpServerInfo, RewindScope, TurnOutcome,
    TurnState,
};
use reasonix_local::client::ClientEvent;
use reasonix_local::tui::{prompter_channel, Action, App, AppEvent, OpenParams, PromptRequest};
use tui_common::*;

fn enter() -> KeyEvent {
    key(KeyCode::Enter)
}

fn submitted(actions: &[Action]) -> Option<(String, String)> {
    actions.iter().find_map(|a| match a {
        Action::Submit { request_id, text } => Some((request_id.clone(), text.clone())),
        _ => None,
    })
}

fn ready_app() -> (App, Feed) {
    let mut app = App::new(settings());
    connected(&mut app, ClientRole::Driver);
    (app, Feed::new())
}

/// Let the host echo and finish a submitted turn.
fn finish_turn(app: &mut App, f: &mut Feed, rid: &str, text: &str) {
    f.ev(
        app,
        0.0,
        EventKind::UserTurn {
            attachments: Vec::new(),
            request_id: rid.into(),
            text: text.into(),
        },
    );
    f.ev(
        app,
        0.1,
        EventKind::TurnFinished {
            outcome: TurnOutcome::Completed,
            detail: None,
        },
    );
}

#[test]
fn enter_sends_and_history_recalls() {
    let (mut app, mut f) = ready_app();
    type_str(&mut app, "first prompt");
    let a = app.handle_key(enter());
    let (rid, text) = submitted(&a).unwrap_or_default();
    assert_eq!(text, "first prompt");
    assert!(rid.starts_with("tui-"));
    finish_turn(&mut app, &mut f, &rid, &text);
    type_str(&mut app, "second");
    let (rid2, _) = submitted(&app.handle_key(enter())).unwrap_or_default();
    assert_ne!(rid, rid2, "request ids are unique");
    finish_turn(&mut app, &mut f, &rid2, "second");
    // Up twice reaches the first prompt; Down once the second; Enter resends it.
    app.handle_key(key(KeyCode::Up));
    app.handle_key(key(KeyCode::Up));
    app.handle_key(key(KeyCode::Down));
    assert_eq!(
        submitted(&app.handle_key(enter())).map(|s| s.1).as_deref(),
        Some("second")
    );
    // An empty composer sends nothing.
    assert!(app.handle_key(enter()).is_empty());
}

#[test]
fn shift_alt_enter_and_ctrl_j_insert_newlines_and_paste_keeps_them() {
    let (mut app, mut f) = ready_app();
    type_str(&mut app, "a");
    app.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::SHIFT));
    type_str(&mut app, "b");
    app.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT));
    type_str(&mut app, "c");
    app.handle_key(ctrl('j'));
    type_str(&mut app, "d");
    let (rid, text) = submitted(&app.handle_key(enter())).unwrap_or_default();
    assert_eq!(text, "a\nb\nc\nd");
    finish_turn(&mut app, &mut f, &rid, &text);

    app.handle_paste("pasted one\r\npasted two\n");
    let (_, text) = submitted(&app.handle_key(enter())).unwrap_or_default();
    assert_eq!(text, "pasted one\npasted two");
}

#[test]
fn up_down_move_between_lines_before_history() {
    let (mut app, mut f) = ready_app();
    type_str(&mut app, "old");
    let (rid, _) = submitted(&app.handle_key(enter())).unwrap_or_default();
    finish_turn(&mut app, &mut f, &rid, "old");
    type_str(&mut app, "line1");
    app.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT));
    type_str(&mut app, "line2");
    // Up moves to line1 (no history yet), typing lands there.
    app.handle_key(key(KeyCode::Up));
    type_str(&mut app, "X");
    let (_, text) = submitted(&app.handle_key(enter())).unwrap_or_default();
    assert_eq!(text, "line1X\nline2");
}

#[test]
fn ctrl_c_cancels_a_running_turn_then_quits() {
    let mut app = busy_app();
    let a = app.handle_key(ctrl('c'));
    assert!(matches!(a.as_slice(), [Action::Cancel { .. }]), "{a:?}");
    assert!(!app.should_quit());
    // A second Ctrl-C within 2 s quits.
    app.tick(7_000, BASE_WALL_MS + 7_000);
    assert_eq!(app.handle_key(ctrl('c')), vec![Action::Quit]);
    assert!(app.should_quit());

    // Slow presses each cancel instead of quitting.
    let mut app = busy_app();
    app.handle_key(ctrl('c'));
    app.tick(9_000, BASE_WALL_MS + 9_000);
    let a = app.handle_key(ctrl('c'));
    assert!(matches!(a.as_slice(), [Action::Cancel { .. }]));
    assert!(!app.should_quit());
}

#[test]
fn ctrl_c_when_idle_clears_input_then_quits() {
    let (mut app, _) = ready_app();
    type_str(&mut app, "draft");
    assert!(app.handle_key(ctrl('c')).is_empty());
    app.tick(5_000, 0);
    // The draft is gone: Enter sends nothing.
    assert!(app.handle_key(enter()).is_empty());
    assert!(app.handle_key(ctrl('c')).is_empty());
    assert_eq!(app.handle_key(ctrl('c')), vec![Action::Quit]);

    // Ctrl-D on an empty input quits too.
    let (mut app, _) = ready_app();
    assert_eq!(app.handle_key(ctrl('d')), vec![Action::Quit]);
}

#[test]
fn spectators_cannot_cancel_or_send() {
    let mut app = App::new(settings());
    connected(&mut app, ClientRole::Spectator);
    app.handle_event(ClientEvent::State {
        state: TurnState::Running,
        detail: None,
    });
    assert!(app.handle_key(ctrl('c')).is_empty());
    app.tick(5_000, 0);
    type_str(&mut app, "hello");
    assert!(app.handle_key(enter()).is_empty());
    // The text stays; clear it and take over instead.
    app.handle_key(ctrl('u'));
    type_str(&mut app, "/takeover");
    // Completion is open on "/takeover": Enter runs the highlighted command.
    assert_eq!(app.handle_key(enter()), vec![Action::Takeover]);
}

#[test]
fn messages_queued_with_tab_during_a_turn_are_sent_once_when_it_ends() {
    let mut app = busy_app();
    type_str(&mut app, "next");
    assert!(
        submitted(&app.handle_key(key(KeyCode::Tab))).is_none(),
        "nothing is sent while the turn runs"
    );
    type_str(&mut app, "and more");
    assert!(submitted(&app.handle_key(key(KeyCode::Tab))).is_none());
    assert!(app.composer_text().is_empty());
    let ev = reasonix_forward::proto::Event {
        seq: app.last_seq() + 1,
        ts: ts(9.0),
        turn: 1,
        kind: EventKind::TurnFinished {
            outcome: TurnOutcome::Completed,
            detail: None,
        },
    };
    let a = app.handle_event(ClientEvent::Event(ev));
    assert_eq!(
        submitted(&a).map(|s| s.1).as_deref(),
        Some("next\n\nand more")
    );
    // The Idle state that follows does not send it again.
    let later = app.handle_event(ClientEvent::State {
        state: TurnState::Idle,
        detail: None,
    });
    assert!(
        submitted(&later).is_none(),
        "queue flushed twice: {later:?}"
    );
}

#[test]
fn slash_completion_and_commands() {
    let (mut app, _) = ready_app();
    type_str(&mut app, "/st");
    // Only /status matches; Enter runs it.
    assert_eq!(app.handle_key(enter()), vec![Action::Status]);
    app.handle_key(key(KeyCode::Esc));

    // Tab completes the name without running it.
    type_str(&mut app, "/ses");
    assert!(app.handle_key(key(KeyCode::Tab)).is_empty());
    assert_eq!(app.handle_key(enter()), vec![Action::ListSessions]);
    assert!(draw(&app, 80, 24).contains("Sessions"));
    app.handle_key(key(KeyCode::Esc));

    // Esc closes the popup; Enter then sends the text as typed (an unknown command).
    type_str(&mut app, "/he");
    assert!(draw(&app, 80, 24).contains("/help"));
    app.handle_key(key(KeyCode::Esc));
    assert!(!draw(&app, 80, 24).contains("list every key"));
    // Unknown: the command files are read again first (one may have been added since).
    let a = app.handle_key(enter());
    assert_eq!(
        a,
        vec![Action::ReloadCommands {
            then: Some("he".into())
        }]
    );
    assert!(app
        .handle(AppEvent::CommandsRetry {
            set: Default::default(),
            line: "he".into(),
        })
        .is_empty());
    assert!(draw(&app, 80, 24).contains("unknown command /he"));

    // `//` escapes a leading slash; a path is not a command.
    type_str(&mut app, "//help is a comment marker");
    app.handle_key(key(KeyCode::Esc));
    let (rid, text) = submitted(&app.handle_key(enter())).unwrap_or_default();
    assert_eq!(text, "/help is a comment marker");
    let mut f = Feed::new();
    f.seq = app.last_seq();
    finish_turn(&mut app, &mut f, &rid, &text);
    type_str(&mut app, "/usr/bin/env fails here");
    assert_eq!(
        submitted(&app.handle_key(enter())).map(|s| s.1).as_deref(),
        Some("/usr/bin/env fails here")
    );

    // /compact asks the host to compact (tui_context covers focus, refusals and answers).
    type_str(&mut app, "/compact");
    app.handle_key(key(KeyCode::Esc));
    let actions = app.handle_key(enter());
    assert!(
        matches!(
            actions.as_slice(),
            [reasonix_local::tui::Action::Compact { focus: None, .. }]
        ),
        "{actions:?}"
    );
}

fn mcp_server(name: &str, run_on: &str, state: &str, reason: Option<&str>) -> McpServerInfo {
    McpServerInfo {
        name: name.into(),
        run_on: run_on.into(),
        transport: String::new(),
        state: state.into(),
        reason: reason.map(str::to_string),
        tools: if state == "ready" {
            (0..30)
                .map(|i| format!("mcp__{name}__tool_{i:02}"))
                .collect()
        } else {
            Vec::new()
        },
    }
}

#[test]
fn mcp_panel_asks_the_host_refreshes_scrolls_and_closes() {
    let (mut app, _) = ready_app();
    type_str(&mut app, "/mcp");
    app.handle_key(key(KeyCode::Esc));
    assert_eq!(app.handle_key(enter()), vec![Action::McpStatus]);
    assert!(draw(&app, 80, 24).contains("starting and listing the servers"));
    // Keys go to the panel, not the composer.
    assert!(app.handle_key(key(KeyCode::Char('x'))).is_empty());

    // A failed request shows in the panel; `r` asks again.
    app.handle(AppEvent::RequestFailed {
        what: "mcp".into(),
        message: "the link was closed".into(),
    });
    assert!(draw(&app, 80, 24).contains("could not ask the host: the link was closed"));
    assert_eq!(
        app.handle_key(key(KeyCode::Char('r'))),
        vec![Action::McpStatus]
    );

    // Many servers: the list scrolls; the last one comes into view.
    let mut list: Vec<McpServerInfo> = (0..8)
        .map(|i| mcp_server(&format!("srv{i}"), "host", "ready", None))
        .collect();
    list.push(mcp_server(
        "zz-broken",
        "laptop",
        "failed",
        Some("could not start `nope`"),
    ));
    app.handle(AppEvent::McpServers(list));
    let first = draw(&app, 80, 24);
    assert!(first.contains("srv0"), "{first}");
    assert!(!first.contains("zz-broken"), "{first}");
    for _ in 0..60 {
        app.handle_key(key(KeyCode::Down));
    }
    let last = draw(&app, 80, 24);
    assert!(last.contains("zz-broken"), "{last}");
    assert!(last.contains("could not start `nope`"), "{last}");
    assert!(!last.contains("srv0 "), "{last}");
    // Scrolling is clamped at the end: four pages back up reach the top again.
    for _ in 0..4 {
        app.handle_key(key(KeyCode::PageUp));
    }
    let top = draw(&app, 80, 24);
    assert!(top.contains("srv0"), "{top}");

    // Esc closes it; the composer works again.
    app.handle_key(key(KeyCode::Esc));
    assert!(!draw(&app, 80, 24).contains("MCP servers"));
    type_str(&mut app, "hi");
    assert!(submitted(&app.handle_key(enter())).is_some());
}

#[test]
fn model_picker_reopens_the_session_with_the_new_model() {
    let mut app = busy_app();
    let since = app.last_seq();
    type_str(&mut app, "/model");
    assert!(app.handle_key(enter()).is_empty());
    app.handle_key(key(KeyCode::Down));
    let a = app.handle_key(enter());
    assert_eq!(
        a,
        vec![Action::OpenSession(OpenParams {
            session: Some("20260501-100000-7f3a".into()),
            new: false,
            since,
            takeover: false,
            model: Some("deepseek/deepseek-reasoner".into()),
            effort: None,
        })]
    );
    assert_eq!(app.model(), Some("deepseek/deepseek-reasoner"));
}

#[test]
fn new_and_sessions_open_the_right_session() {
    let mut app = busy_app();
    type_str(&mut app, "/new");
    let a = app.handle_key(enter());
    assert!(
        matches!(
            a.as_slice(),
            [Action::OpenSession(OpenParams {
                session: None,
                new: true,
                since: 0,
                ..
            })]
        ),
        "{a:?}"
    );
    assert_eq!(app.last_seq(), 0);

    let mut app = busy_app();
    type_str(&mut app, "/sessions");
    app.handle_key(enter());
    app.handle(AppEvent::Sessions(vec![
        reasonix_forward::proto::SessionInfo {
            id: "a".into(),
            created: "2026-05-01T10:00:00Z".into(),
            turns: 1,
            last_seq: 3,
            title: "one".into(),
            state: TurnState::Idle,
            last_activity: "2026-05-01T10:05:00Z".into(),
            driver_attached: false,
            clients: 0,
            goal: None,
            keeper_attached: false,
        },
        reasonix_forward::proto::SessionInfo {
            id: "b".into(),
            created: "2026-04-01T10:00:00Z".into(),
            turns: 2,
            last_seq: 9,
            title: "two".into(),
            state: TurnState::Idle,
            last_activity: "2026-05-01T10:05:00Z".into(),
            driver_attached: false,
            clients: 0,
            goal: None,
            keeper_attached: false,
        },
    ]));
    app.handle_key(key(KeyCode::Down));
    let a = app.handle_key(enter());
    assert!(
        matches!(a.as_slice(), [Action::OpenSession(OpenParams { session: Some(s), new: false, since: 0, .. })] if s == "b"),
        "{a:?}"
    );
}

fn with_approval(app: &mut App, id: &str) {
    let mut f = Feed {
        seq: app.last_seq(),
        turn: 1,
    };
    let c = call(
        id,
        "write_file",
        serde_json::json!({"path": "notes.txt", "content": "hello\n"}),
    );
    f.ev(
        app,
        3.0,
        EventKind::AssistantMessage {
            content: String::new(),
            reasoning: None,
            tool_calls: vec![c.clone()],
            provider_replay: None,
        },
    );
    f.ev(
        app,
        3.1,
        EventKind::ApprovalRequested {
            approval_id: format!("ap-{id}"),
            call_id: Some(c.id.clone()),
            tool: c.name.clone(),
            arguments: c.arguments.clone(),
            reason: "ask".into(),
            preview: None,
            always_rule: None,
        },
    );
}

#[test]
fn approval_keys_produce_the_right_decision() {
    for (k, want) in [
        (KeyCode::Char('1'), ApprovalDecision::AllowOnce),
        (KeyCode::Char('y'), ApprovalDecision::AllowOnce),
        (KeyCode::Char('2'), ApprovalDecision::AllowSession),
        (KeyCode::Char('s'), ApprovalDecision::AllowSession),
        (KeyCode::Char('3'), ApprovalDecision::AllowAlways),
        (KeyCode::Char('a'), ApprovalDecision::AllowAlways),
        (KeyCode::Char('4'), ApprovalDecision::Deny),
        (KeyCode::Char('n'), ApprovalDecision::Deny),
        (KeyCode::Char('5'), ApprovalDecision::AllowAlways),
        (KeyCode::Char('g'), ApprovalDecision::AllowAlways),
    ] {
        let mut app = busy_app();
        with_approval(&mut app, "w1");
        assert!(draw(&app, 80, 30).contains("Approval needed"));
        let a = app.handle_key(key(k));
        // Only 5/g store the rule for every workspace; 3/a keep it to this one (#15).
        let global = matches!(k, KeyCode::Char('5') | KeyCode::Char('g'));
        assert!(
            matches!(a.as_slice(), [Action::Approve { approval_id, decision, everywhere, .. }] if approval_id == "ap-w1" && *decision == want && *everywhere == global),
            "{k:?}: {a:?}"
        );
        // Answered: the modal is gone and the composer is back.
        assert!(!draw(&app, 80, 30).contains("Approval needed"));
    }
    // Arrow keys + Enter.
    let mut app = busy_app();
    with_approval(&mut app, "w2");
    app.handle_key(key(KeyCode::Down));
    app.handle_key(key(KeyCode::Down));
    let a = app.handle_key(enter());
    assert!(
        matches!(
            a.as_slice(),
            [Action::Approve {
                decision: ApprovalDecision::AllowAlways,
                ..
            }]
        ),
        "{a:?}"
    );
    // Other keys do nothing while the modal is up (typing does not reach the composer).
    let mut app = busy_app();
    with_approval(&mut app, "w3");
    assert!(type_str(&mut app, "hello")
        .iter()
        .all(|a| !matches!(a, Action::Approve { .. })));
    assert!(draw(&app, 80, 30).contains("Approval needed"));
}

#[test]
fn approvals_answered_elsewhere_or_replayed_do_not_reappear() {
    let mut app = busy_app();
    with_approval(&mut app, "w4");
    let mut f = Feed {
        seq: app.last_seq(),
        turn: 1,
    };
    f.ev(
        &mut app,
        3.5,
        EventKind::ApprovalAnswered {
            approval_id: "ap-w4".into(),
            decision: ApprovalDecision::Deny,
            rule: None,
        },
    );
    assert!(!draw(&app, 80, 30).contains("Approval needed"));
    // A replay of old events (seq not above last_seq) is ignored.
    let ev = reasonix_forward::proto::Event {
        seq: 2,
        ts: ts(0.0),
        turn: 1,
        kind: EventKind::ApprovalRequested {
            approval_id: "ap-old".into(),
            call_id: None,
            tool: "bash".into(),
            arguments: "{}".into(),
            reason: "ask".into(),
            preview: None,
            always_rule: None,
        },
    };
    app.handle_event(ClientEvent::Event(ev));
    assert!(!draw(&app, 80, 30).contains("Approval needed"));
}

#[test]
fn path_completion_lists_one_level_per_step() {
    let (mut app, _) = ready_app();
    let a = type_str(&mut app, "see @sr");
    assert_eq!(
        a,
        vec![Action::ListDir {
            path: String::new()
        }]
    );
    // Typing more in the same folder does not ask again.
    app.handle(AppEvent::DirEntries {
        path: String::new(),
        entries: vec![
            DirEntry {
                name: "src".into(),
                is_dir: true,
            },
            DirEntry {
                name: "README.md".into(),
                is_dir: false,
            },
        ],
    });
    let a = app.handle_key(key(KeyCode::Tab));
    assert_eq!(a, vec![Action::ListDir { path: "src".into() }]);
    app.handle(AppEvent::DirEntries {
        path: "src".into(),
        entries: vec![
            DirEntry {
                name: "main.rs".into(),
                is_dir: false,
            },
            DirEntry {
                name: "lib.rs".into(),
                is_dir: false,
            },
        ],
    });
    type_str(&mut app, "m");
    assert!(
        app.handle_key(enter()).is_empty(),
        "Enter picks the completion"
    );
    type_str(&mut app, "please");
    let (_, text) = submitted(&app.handle_key(enter())).unwrap_or_default();
    assert_eq!(text, "see @src/main.rs please");
}

#[test]
fn reattach_reopens_from_the_last_seen_event() {
    let mut app = busy_app();
    let since = app.last_seq();
    assert!(since > 0);
    let a = app.handle_event(ClientEvent::Reattached {
        reason: "link expired".into(),
    });
    assert_eq!(
        a,
        vec![Action::OpenSession(OpenParams {
            session: Some("20260501-100000-7f3a".into()),
            new: false,
            since,
            takeover: false,
            model: Some("deepseek/deepseek-chat".into()),
            effort: None,
        })]
    );
    assert!(draw(&app, 100, 30).contains("re-attaching"));
}

#[test]
fn copy_and_reasoning_toggle() {
    let mut app = busy_app();
    assert_eq!(
        app.handle_key(ctrl('y')),
        vec![Action::Copy(ANSWER.to_string())]
    );
    type_str(&mut app, "/copy code");
    app.handle_key(key(KeyCode::Esc));
    assert_eq!(
        app.handle_key(enter()),
        vec![Action::Copy(
            "fn last(v: &[u8]) -> u8 {\n    v[v.len() - 1] // was v[v.len()]\n}\n".into()
        )]
    );
    app.handle_key(key(KeyCode::Home));
    assert!(draw(&app, 120, 40).contains("thought · 3 lines (Ctrl-O to show)"));
    app.handle_key(ctrl('o'));
    let s = draw(&app, 120, 40);
    assert!(s.contains("┊ I should read the file first,"), "{s}");
}

#[test]
fn scrolling_keys_and_follow() {
    let mut app = busy_app();
    draw(&app, 60, 20);
    app.handle_key(key(KeyCode::PageUp));
    assert!(draw(&app, 60, 20).contains("scrolled up"));
    app.handle_key(key(KeyCode::End));
    assert!(!draw(&app, 60, 20).contains("scrolled up"));
    app.handle_key(key(KeyCode::Home));
    let top = draw(&app, 60, 20);
    assert!(top.contains("new session 20260501-100000-7f3a"), "{top}");
    app.handle_mouse(crossterm::event::MouseEvent {
        kind: crossterm::event::MouseEventKind::ScrollDown,
        column: 0,
        row: 0,
        modifiers: KeyModifiers::NONE,
    });
    assert!(!draw(&app, 60, 20).contains("new session 20260501"));
}

#[tokio::test]
async fn prompter_questions_become_modals_and_answers_flow_back() {
    let (prompter, mut prompts) = prompter_channel();
    let mut app = App::new(settings());
    let q = HostKeyQuestion {
        host: "h".into(),
        port: 22,
        key_type: "ssh-ed25519".into(),
        fingerprint_sha256: "SHA256:abc".into(),
        status: HostKeyStatus::Unknown,
    };
    let p = prompter.clone();
    let q2 = q.clone();
    let task = tokio::spawn(async move { p.host_key(&q2).await });
    let ev = tokio::time::timeout(std::time::Duration::from_secs(10), prompts.recv()).await;
    let Ok(Some(ev)) = ev else {
        panic!("no prompt event")
    };
    app.handle(ev);
    assert!(draw(&app, 80, 24).contains("SHA256:abc"));
    app.handle_key(key(KeyCode::Char('o')));
    assert_eq!(task.await.ok(), Some(HostKeyAnswer::AcceptOnce));

    // Secret: typed, hidden, sent on Enter.
    let p = prompter.clone();
    let task = tokio::spawn(async move {
        p.secret(&SecretPrompt {
            prompt: "Password: ".into(),
            echo: false,
            purpose: SecretPurpose::Password {
                user: "u".into(),
                host: "h".into(),
            },
        })
        .await
        .map(|s| s.to_string())
    });
    let Ok(Some(ev)) =
        tokio::time::timeout(std::time::Duration::from_secs(10), prompts.recv()).await
    else {
        panic!("no prompt event")
    };
    app.handle(ev);
    type_str(&mut app, "s3cret");
    app.handle_key(key(KeyCode::Backspace));
    assert!(!draw(&app, 80, 24).contains("s3cre"));
    app.handle_key(enter());
    assert_eq!(task.await.ok().flatten().as_deref(), Some("s3cre"));

    // Esc cancels; a changed key cannot be accepted.
    let (reply, rx) = tokio::sync::oneshot::channel();
    let mut changed = q.clone();
    changed.status = HostKeyStatus::Changed {
        old_fingerprint: "SHA256:old".into(),
        old_key_type: "ssh-ed25519".into(),
        known_hosts_file: "/k".into(),
        line: 3,
    };
    app.handle(AppEvent::Prompt(PromptRequest::HostKey {
        question: changed,
        reply,
    }));
    assert!(draw(&app, 80, 30).contains("/k:3"));
    app.handle_key(key(KeyCode::Char('y')));
    assert!(
        draw(&app, 80, 30).contains("HOST KEY HAS CHANGED"),
        "y must not accept a changed key"
    );
    app.handle_key(key(KeyCode::Esc));
    assert_eq!(rx.await.ok(), Some(HostKeyAnswer::Reject));
    assert!(!draw(&app, 80, 30).contains("HOST KEY"));

    // A dropped UI refuses.
    drop(prompts);
    assert_eq!(prompter.host_key(&q).await, HostKeyAnswer::Reject);
}

#[test]
fn rewind_command_and_its_answer() {
    let mut app = busy_app();
    // Without a turn number: usage and the turns to choose from.
    type_str(&mut app, "/rewind");
    app.handle_key(key(KeyCode::Esc));
    assert!(app.handle_key(enter()).is_empty());
    let screen = draw(&app, 100, 30);
    assert!(screen.contains("usage: /rewind N"), "{screen}");
    assert!(screen.contains("turn 1: Fix the off-by-one"), "{screen}");

    type_str(&mut app, "/rewind 1 code dry");
    let a = app.handle_key(enter());
    assert!(
        matches!(
            a.as_slice(),
            [Action::Rewind {
                to_turn: 1,
                scope: RewindScope::Code,
                dry_run: true,
                ..
            }]
        ),
        "{a:?}"
    );
    // A code-only rewind keeps the transcript and reports the files.
    let a = app.handle(AppEvent::Rewound {
        summary: "restored 1 file".into(),
        paths: vec!["src/range.rs".into()],
        scope: RewindScope::Code,
        dry_run: false,
    });
    assert!(a.is_empty());
    assert!(draw(&app, 100, 30).contains("files: src/range.rs"));
    // A conversation rewind reloads the session from the start.
    let a = app.handle(AppEvent::Rewound {
        summary: "conversation rewound to before turn 1".into(),
        paths: vec![],
        scope: RewindScope::Both,
        dry_run: false,
    });
    assert_eq!(
        a,
        vec![Action::OpenSession(OpenParams {
            session: Some("20260501-100000-7f3a".into()),
            new: false,
            since: 0,
            takeover: false,
            model: Some("deepseek/deepseek-chat".into()),
            effort: None,
        })]
    );
    assert_eq!(app.last_seq(), 0);
    assert!(!draw(&app, 100, 30).contains("Fix the off-by-one"));
}

#[test]
fn output_command_asks_for_the_full_output_by_reference() {
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
            text: "print a lot".into(),
        },
    );
    let big = reasonix_forward::content::ContentRef {
        sha256: "ab".repeat(32),
        bytes: 12 * 1024 * 1024,
    };
    for (id, output, output_ref) in [
        ("c1", "small\n", None),
        ("c2", "\"\"\"\"\n[… cut …]", Some(big.clone())),
    ] {
        f.ev(
            &mut app,
            0.1,
            EventKind::ToolStarted {
                call_id: id.into(),
                name: "bash".into(),
                arguments: "{}".into(),
            },
        );
        f.ev(
            &mut app,
            0.2,
            EventKind::ToolFinished {
                call_id: id.into(),
                name: "bash".into(),
                is_error: false,
                output: output.into(),
                output_ref,
                denied: None,
                context_bytes: None,
            },
        );
    }
    // The card says the full output is on the host and how to get it.
    let s = draw(&app, 100, 30);
    assert!(
        s.contains("12 MiB in full on the host; /output saves it to a file"),
        "{s}"
    );
    type_str(&mut app, "/output");
    app.handle_key(key(KeyCode::Esc));
    let actions = app.handle_key(enter());
    assert_eq!(
        actions,
        vec![Action::SaveOutput(reasonix_local::tui::OutputRequest {
            tool: "bash".into(),
            inline: "\"\"\"\"\n[… cut …]".into(),
            full: Some(big),
        })]
    );
    type_str(&mut app, "/output 2");
    app.handle_key(key(KeyCode::Esc));
    let actions = app.handle_key(enter());
    assert!(
        matches!(&actions[..], [Action::SaveOutput(r)] if r.full.is_none() && r.inline == "small\n"),
        "{actions:?}"
    );
}

#[tokio::test]
async fn upgrade_question_offers_upgrade_read_only_and_wait() {
    use reasonix_bootstrap::{UpgradeAnswer, UpgradeQuestion};
    let (prompter, mut prompts) = prompter_channel();
    let mut app = App::new(settings());
    let q = UpgradeQuestion {
        place: "me@box:/repo".into(),
        running_build: "0.1.0-oldbuild".into(),
        our_build: "0.1.0-newbuild".into(),
        sessions: vec![("18f-abc".into(), "running".into(), "fix the tests".into())],
    };
    for (keycode, want) in [
        (KeyCode::Char('2'), UpgradeAnswer::AttachReadOnly),
        (KeyCode::Char('w'), UpgradeAnswer::Wait),
        (KeyCode::Char('u'), UpgradeAnswer::UpgradeNow),
        (KeyCode::Esc, UpgradeAnswer::Refuse),
    ] {
        let p = prompter.clone();
        let q2 = q.clone();
        let task = tokio::spawn(async move { p.upgrade(&q2).await });
        let Ok(Some(ev)) =
            tokio::time::timeout(std::time::Duration::from_secs(10), prompts.recv()).await
        else {
            panic!("no prompt event")
        };
        app.handle(ev);
        let screen = draw(&app, 100, 30);
        assert!(screen.contains("0.1.0-oldbuild"), "{screen}");
        assert!(screen.contains("fix the tests"), "{screen}");
        assert!(screen.contains("read-only"), "{screen}");
        // Keys of other modals do nothing here.
        app.handle_key(key(KeyCode::Char('y')));
        app.handle_key(key(keycode));
        assert_eq!(task.await.ok(), Some(want));
        assert!(!draw(&app, 100, 30).contains("0.1.0-oldbuild"));
    }
    // A dropped UI never upgrades.
    drop(prompts);
    assert_eq!(prompter.upgrade(&q).await, UpgradeAnswer::Refuse);
}

#[test]
fn a_custom_command_submits_its_expansion() {
    use reasonix_forward::proto::CommandFile;
    let mut app = busy_app();
    let set = reasonix_local::commands::CommandSet::merge(
        Vec::new(),
        Vec::new(),
        vec![CommandFile {
            name: "git:review".into(),
            path: ".reasonix/commands/git/review.md".into(),
            text: "Review $1 (all: $ARGUMENTS) for $$2".into(),
        }],
        Vec::new(),
        &[],
    );
    // A file added after the start: unknown at first, so the files are read again and
    // the line runs with the new set.
    type_str(&mut app, "/git:review src/a.rs \"edge cases\"");
    let a = app.handle_key(enter());
    let line = match a.as_slice() {
        [Action::ReloadCommands { then: Some(line) }] => line.clone(),
        other => panic!("{other:?}"),
    };
    let actions = app.handle(AppEvent::CommandsRetry {
        set: set.clone(),
        line,
    });
    let shown = format!("{actions:?}");
    assert!(
        shown.contains(r#"Review src/a.rs (all: src/a.rs \"edge cases\") for $2"#),
        "{shown}"
    );
    app.handle(AppEvent::Commands(set));
    type_str(&mut app, "/git:review src/a.rs \"edge cases\"");
    let actions = app.handle_key(enter());
    let shown = format!("{actions:?}");
    assert!(
        shown.contains(r#"Review src/a.rs (all: src/a.rs \"edge cases\") for $2"#),
        "{shown}"
    );
    // Opening the slash completion, and /help, read the files again.
    app.handle_key(key(KeyCode::Esc));
    let a = app.handle_key(key(KeyCode::Char('/')));
    assert_eq!(a, vec![Action::ReloadCommands { then: None }]);
    assert!(
        app.handle_key(key(KeyCode::Char('g'))).is_empty(),
        "once per opening"
    );
}

#[test]
fn an_mcp_prompt_goes_to_the_host_as_typed() {
    use reasonix_forward::proto::McpPromptEntry;
    let (mut app, _f) = ready_app();
    let mut set = reasonix_local::commands::CommandSet::default();
    set.add_mcp_prompts(vec![McpPromptEntry {
        command: "mcp__everything__args-prompt".into(),
        server: "everything".into(),
        name: "args-prompt".into(),
        description: String::new(),
        arguments: Vec::new(),
    }]);
    app.handle(AppEvent::Commands(set));
    type_str(&mut app, "/mcp__everything__args-prompt Paris state=TX");
    let actions = app.handle_key(enter());
    let (_, text) = submitted(&actions).expect("submitted");
    // The host expands it (prompts/get), the same for every client.
    assert_eq!(text, "/mcp__everything__args-prompt Paris state=TX");
}

#[test]
fn sessions_overlay_deletes_the_highlighted_session_and_renames_the_open_one() {
    let info = |id: &str| reasonix_forward::proto::SessionInfo {
        id: id.into(),
        created: "2026-05-01T10:00:00Z".into(),
        turns: 1,
        last_seq: 3,
        title: id.into(),
        state: TurnState::Idle,
        last_activity: "2026-05-01T10:05:00Z".into(),
        driver_attached: false,
        clients: 0,
        goal: None,
        keeper_attached: false,
    };
    let mut app = busy_app();
    let open = app
        .session_id()
        .expect("busy app has a session")
        .to_string();
    type_str(&mut app, "/sessions");
    app.handle_key(enter());
    app.handle(AppEvent::Sessions(vec![info(&open), info("other")]));
    // The open session is not deleted (the host would refuse it too).
    assert!(app.handle_key(key(KeyCode::Char('d'))).is_empty());
    app.handle_key(key(KeyCode::Down));
    let a = app.handle_key(key(KeyCode::Char('d')));
    assert!(
        matches!(a.as_slice(), [Action::DeleteSession { session }] if session == "other"),
        "{a:?}"
    );
    // Deleted: a notice, and the open overlay lists again.
    let a = app.handle(AppEvent::SessionDeleted("other".into()));
    assert!(matches!(a.as_slice(), [Action::ListSessions]), "{a:?}");
    app.handle_key(key(KeyCode::Esc));
    type_str(&mut app, "/rename Release prep");
    let a = app.handle_key(enter());
    assert!(
        matches!(a.as_slice(), [Action::RenameSession { session, title }] if *session == open && title == "Release prep"),
        "{a:?}"
    );
}

fn steered(actions: &[Action]) -> Option<String> {
    actions.iter().find_map(|a| match a {
        Action::Steer { text, .. } => Some(text.clone()),
        _ => None,
    })
}

fn history_appended(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::HistoryAppend { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn enter_during_a_turn_steers_and_esc_cancels_it() {
    let mut app = busy_app();
    assert!(draw(&app, 100, 30).contains("Enter steer · Tab queue · Esc cancel"));
    type_str(&mut app, "use tabs");
    let a = app.handle_key(enter());
    assert_eq!(steered(&a).as_deref(), Some("use tabs"));
    assert!(submitted(&a).is_none());
    assert_eq!(history_appended(&a), vec!["use tabs".to_string()]);
    // The host journals it; the transcript shows it as a steer, then as delivered.
    let mut f = Feed::new();
    f.seq = app.last_seq();
    f.ev(
        &mut app,
        5.0,
        EventKind::Steer {
            request_id: "steer-1".into(),
            text: "use tabs".into(),
        },
    );
    assert!(draw(&app, 100, 30).contains("steer · waiting for the next model step"));
    f.ev(
        &mut app,
        5.5,
        EventKind::SteerInjected {
            request_ids: vec!["steer-1".into()],
            est_tokens: 2,
        },
    );
    let s = draw(&app, 100, 30);
    assert!(s.contains("» use tabs"), "{s}");
    assert!(
        s.contains("steer · given to the model before its next step"),
        "{s}"
    );
    // A steer that found the turn over is sent as a message.
    let back = app.handle(AppEvent::SteerRefused {
        text: "late".into(),
    });
    assert!(submitted(&back).is_none(), "still busy here: queued");
    // Esc cancels the running turn.
    let a = app.handle_key(key(KeyCode::Esc));
    assert!(matches!(a.as_slice(), [Action::Cancel { .. }]), "{a:?}");
}

#[test]
fn bang_lines_run_on_the_host_and_double_bang_keeps_the_output_private() {
    let (mut app, _) = ready_app();
    type_str(&mut app, "!ls -la");
    let a = app.handle_key(enter());
    assert!(
        a.iter().any(|x| matches!(x,
        Action::Shell { command, add_to_context: true, .. } if command == "ls -la")),
        "{a:?}"
    );
    let ls_id = a
        .iter()
        .find_map(|x| match x {
            Action::Shell { request_id, .. } => Some(request_id.clone()),
            _ => None,
        })
        .expect("request id");
    type_str(&mut app, "!!env");
    let a = app.handle_key(enter());
    assert!(
        a.iter().any(|x| matches!(x,
        Action::Shell { command, add_to_context: false, .. } if command == "env")),
        "{a:?}"
    );
    // The output streams into a running entry before the result arrives.
    app.handle_event(ClientEvent::ToolProgress {
        call_id: ls_id.clone(),
        message: "total 0\n".into(),
    });
    let s = draw(&app, 100, 30);
    assert!(s.contains("! ls -la"), "{s}");
    assert!(s.contains("│ total 0"), "{s}");
    assert!(s.contains("shell · running…"), "{s}");
    let mut f = Feed::new();
    f.ev(
        &mut app,
        1.0,
        EventKind::ShellRan {
            request_id: ls_id,
            command: "ls -la".into(),
            is_error: false,
            output: "total 0\nfile.txt\n".into(),
            added_to_context: true,
        },
    );
    let s = draw(&app, 100, 30);
    assert!(s.contains("! ls -la"), "{s}");
    assert!(s.contains("│ file.txt"), "{s}");
    assert!(
        s.contains("output goes to the model with your next message"),
        "{s}"
    );
    assert!(!s.contains("running…"), "{s}");
    assert_eq!(
        s.matches("! ls -la").count(),
        1,
        "one entry, completed: {s}"
    );
}

#[test]
fn ctrl_r_searches_the_hosts_history_and_esc_restores_the_draft() {
    let (mut app, _) = ready_app();
    let opened = app.handle(AppEvent::History(vec![
        "fix the build".into(),
        "write tests for parser".into(),
        "fix the parser".into(),
    ]));
    assert!(opened.is_empty());
    type_str(&mut app, "draft");
    app.handle_key(ctrl('r'));
    type_str(&mut app, "fix");
    assert_eq!(app.composer_text(), "fix the parser");
    assert!(draw(&app, 100, 30).contains("search: fix"));
    app.handle_key(ctrl('r'));
    assert_eq!(app.composer_text(), "fix the build");
    type_str(&mut app, "zzz");
    assert!(draw(&app, 100, 30).contains("(no match)"));
    app.handle_key(key(KeyCode::Esc));
    assert_eq!(app.composer_text(), "draft");
    // Enter takes the match for editing; a second Enter sends it.
    app.handle_key(ctrl('u'));
    app.handle_key(ctrl('r'));
    type_str(&mut app, "tests");
    assert!(submitted(&app.handle_key(enter())).is_none());
    assert_eq!(app.composer_text(), "write tests for parser");
    let a = app.handle_key(enter());
    assert_eq!(
        submitted(&a).map(|s| s.1).as_deref(),
        Some("write tests for parser")
    );
    // Up walks the host's history too.
    app.handle_key(key(KeyCode::Up));
    assert_eq!(app.composer_text(), "write tests for parser");
}

#[tokio::test]
async fn secrets_typed_into_prompts_never_reach_the_history() {
    let (mut app, _) = ready_app();
    let (prompter, mut prompts) = prompter_channel();
    let task = tokio::spawn(async move {
        prompter
            .secret(&SecretPrompt {
                prompt: "Password: ".into(),
                echo: false,
                purpose: SecretPurpose::Password {
                    user: "u".into(),
                    host: "h".into(),
                },
            })
            .await
            .map(|s| s.to_string())
    });
    let Ok(Some(ev)) =
        tokio::time::timeout(std::time::Duration::from_secs(10), prompts.recv()).await
    else {
        panic!("no prompt event")
    };
    app.handle(ev);
    let mut actions = type_str(&mut app, "hunter2-secret");
    actions.extend(app.handle_key(enter()));
    assert_eq!(task.await.ok().flatten().as_deref(), Some("hunter2-secret"));
    assert!(history_appended(&actions).is_empty(), "{actions:?}");
    assert!(
        !actions.iter().any(|a| format!("{a:?}").contains("hunter2")),
        "{actions:?}"
    );
    // The composer's own history has nothing of it either.
    app.handle_key(key(KeyCode::Up));
    assert!(!app.composer_text().contains("hunter2"));
}

#[test]
fn goal_command_starts_pauses_and_shows_the_goal() {
    use reasonix_forward::proto::{GoalAction, GoalEvent, GoalStatus};
    let (mut app, mut f) = ready_app();
    type_str(&mut app, "/goal make the tests pass");
    let a = app.handle_key(enter());
    let rid = match a.as_slice() {
        [Action::Goal {
            request_id,
            action: GoalAction::Start { objective, .. },
            ..
        }] if objective == "make the tests pass" => request_id.clone(),
        other => panic!("{other:?}"),
    };
    f.ev(
        &mut app,
        0.0,
        EventKind::Goal(GoalEvent::Started {
            goal_id: rid.clone(),
            objective: "make the tests pass".into(),
            budgets: Default::default(),
        }),
    );
    finish_turn(&mut app, &mut f, &rid, "[goal] make the tests pass");
    type_str(&mut app, "/goal pause");
    assert!(matches!(
        app.handle_key(enter()).as_slice(),
        [Action::Goal {
            action: GoalAction::Pause,
            ..
        }]
    ));
    f.ev(
        &mut app,
        0.2,
        EventKind::Goal(GoalEvent::Status {
            status: GoalStatus::BudgetPaused,
            detail: Some("token budget reached: 120 of 100 tokens".into()),
        }),
    );
    type_str(&mut app, "/goal status");
    assert!(app.handle_key(enter()).is_empty());
    let screen = draw(&app, 120, 30);
    assert!(
        screen.contains("goal budget-paused: make the tests pass — token budget reached"),
        "{screen}"
    );
    // A spectator cannot change the goal.
    connected(&mut app, ClientRole::Spectator);
    type_str(&mut app, "/goal resume");
    assert!(app.handle_key(enter()).is_empty());
}
