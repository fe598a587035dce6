//! Snapshot tests of every TUI screen and modal, rendered with ratatui's TestBackend at a
//! narrow (60×20) and a wide (120×40) size. Review changes with `cargo insta review` or by
//! reading the `.snap` files under `tests/snapshots/`.

mod tui_common;

use std::path::PathBuf;
use std::time::Duration;

use crossterm::event::KeyCode;
use reasonix_bootstrap::{
    HostKeyQuestion, HostKeyStatus, KbdRound, SecretPrompt, SecretPurpose, Stage,
};
use reasonix_forward::proto::{
    ClientRole, DaemonStatus, DirEntry, EventKind, McpServerInfo, SessionInfo, TurnOutcome,
    TurnState,
};
use reasonix_local::client::{ClientEvent, ConnState};
use reasonix_local::tui::{App, AppEvent, PromptRequest};
use tui_common::*;

const SIZES: [(u16, u16); 2] = [(60, 20), (120, 40)];

fn snap(name: &str, app: &App) {
    for (w, h) in SIZES {
        insta::assert_snapshot!(format!("{name}_{w}x{h}"), draw(app, w, h));
    }
}

#[test]
fn welcome_screen() {
    let mut app = App::new(settings());
    connected(&mut app, ClientRole::Driver);
    // The "new session" notice makes the transcript non-empty; clear it to see the welcome.
    type_str(&mut app, "/clear");
    app.handle_key(key(KeyCode::Enter));
    snap("welcome", &app);
}

#[test]
fn transcript_with_markdown_reasoning_tools_and_diff() {
    let app = busy_app();
    snap("transcript", &app);
}

#[test]
fn transcript_with_reasoning_expanded_and_scrolled_up() {
    let mut app = busy_app();
    app.handle_key(ctrl('o'));
    draw(&app, 120, 40);
    app.handle_key(key(KeyCode::PageUp));
    snap("transcript_reasoning_scrolled", &app);
}

#[test]
fn composer_multiline_with_slash_completion() {
    let mut app = busy_app();
    type_str(&mut app, "/s");
    snap("composer_slash_completion", &app);
    let mut app = busy_app();
    type_str(&mut app, "first line");
    app.handle_key(crossterm::event::KeyEvent::new(
        KeyCode::Enter,
        crossterm::event::KeyModifiers::ALT,
    ));
    type_str(
        &mut app,
        "second line, a bit longer so that it wraps on the narrow terminal width",
    );
    snap("composer_multiline", &app);
}

#[test]
fn composer_with_a_collapsed_paste() {
    let mut app = busy_app();
    type_str(&mut app, "summarize: ");
    let big: String = (1..=10_000)
        .map(|i| format!("pasted line {i:05}\n"))
        .collect();
    app.handle_paste(&big);
    type_str(&mut app, " briefly");
    snap("composer_collapsed_paste", &app);
    // 45,000 tokens is over a quarter of the 128k window: Enter asks first.
    let mut app = connected_app_for_send();
    type_str(&mut app, "summarize: ");
    app.handle_paste(&big);
    assert!(
        app.handle_key(key(KeyCode::Enter)).is_empty(),
        "nothing sent yet"
    );
    snap("confirm_big_prompt", &app);
    // Esc goes back to the composer with the text kept; Enter, then Enter again, sends.
    app.handle_key(key(KeyCode::Esc));
    assert!(app.composer_text().starts_with("summarize: "));
    assert!(app.handle_key(key(KeyCode::Enter)).is_empty());
    let actions = app.handle_key(key(KeyCode::Enter));
    let sent = actions
        .iter()
        .any(|a| format!("{a:?}").contains("pasted line 10000"));
    assert!(sent, "the full text is sent: {:?}", actions.len());
    assert!(app.composer_text().is_empty());
}

/// A connected app with an idle session, where Enter sends a turn.
fn connected_app_for_send() -> App {
    let mut app = App::new(settings());
    connected(&mut app, ClientRole::Driver);
    app
}

#[test]
fn composer_with_path_completion() {
    let mut app = busy_app();
    let actions = type_str(&mut app, "look at @s");
    assert!(actions
        .iter()
        .any(|a| matches!(a, reasonix_local::tui::Action::ListDir { path } if path.is_empty())));
    app.handle(AppEvent::DirEntries {
        path: String::new(),
        entries: vec![
            DirEntry {
                name: "Cargo.toml".into(),
                is_dir: false,
            },
            DirEntry {
                name: "scripts".into(),
                is_dir: true,
            },
            DirEntry {
                name: "src".into(),
                is_dir: true,
            },
            DirEntry {
                name: "setup.sh".into(),
                is_dir: false,
            },
            DirEntry {
                name: ".secret".into(),
                is_dir: false,
            },
        ],
    });
    snap("composer_path_completion", &app);
}

fn approval_app(tool: &str, args: serde_json::Value) -> App {
    let mut app = busy_app();
    let mut f = Feed { seq: 100, turn: 1 };
    let c = call("c9", tool, args);
    f.ev(
        &mut app,
        3.0,
        EventKind::AssistantMessage {
            content: String::new(),
            reasoning: None,
            tool_calls: vec![c.clone()],
            provider_replay: None,
        },
    );
    f.ev(
        &mut app,
        3.1,
        EventKind::ApprovalRequested {
            approval_id: "ap-c9".into(),
            call_id: Some(c.id.clone()),
            tool: c.name.clone(),
            arguments: c.arguments.clone(),
            reason: format!("{tool} writes files; permission mode is ask"),
            preview: None,
            // What the host computes: writers store `Edit`; a compound bash line stores
            // nothing (always = this session only).
            always_rule: (tool != "bash").then(|| "Edit".to_string()),
        },
    );
    app.handle_event(ClientEvent::State {
        state: TurnState::WaitingForApproval,
        detail: Some("waiting for approval".into()),
    });
    app
}

#[test]
fn approval_modal_for_an_edit() {
    let app = approval_app(
        "multi_edit",
        serde_json::json!({
            "path": "src/config.rs",
            "edits": [
                {"old_string": "const RETRIES: u32 = 3;\n", "new_string": "const RETRIES: u32 = 10;\n"},
                {"old_string": "fn backoff(n: u32) -> u64 {\n    500 * n as u64\n}\n", "new_string": "fn backoff(n: u32) -> u64 {\n    (500u64 << n.min(5)).min(15_000)\n}\n", "replace_all": false},
            ]
        }),
    );
    snap("approval_edit", &app);
}

#[test]
fn approval_modal_for_bash() {
    let app = approval_app(
        "bash",
        serde_json::json!({"command": "rm -rf target/debug/incremental && cargo build", "run_in_background": false}),
    );
    snap("approval_bash", &app);
}

fn host_key(status: HostKeyStatus) -> HostKeyQuestion {
    HostKeyQuestion {
        host: "build-box".into(),
        port: 2222,
        key_type: "ssh-ed25519".into(),
        fingerprint_sha256: "SHA256:Vj1Hc0aV9bSxq3Zl8r0M2dZ0eUq1n8k3sV6m6c8pQ2E".into(),
        status,
    }
}

#[test]
fn host_key_unknown_modal() {
    let mut app = App::new(settings());
    let (reply, _rx) = tokio::sync::oneshot::channel();
    app.handle(AppEvent::Prompt(PromptRequest::HostKey {
        question: host_key(HostKeyStatus::Unknown),
        reply,
    }));
    snap("hostkey_unknown", &app);
}

#[test]
fn host_key_changed_modal() {
    let mut app = App::new(settings());
    app.handle(AppEvent::HostKeyRefused(host_key(HostKeyStatus::Changed {
        old_fingerprint: "SHA256:0ldF1ngerPr1ntxxxxxxxxxxxxxxxxxxxxxxxxxxxx".into(),
        old_key_type: "ssh-ed25519".into(),
        known_hosts_file: PathBuf::from("/home/dev/.ssh/known_hosts"),
        line: 12,
    })));
    snap("hostkey_changed", &app);
}

#[test]
fn secret_and_keyboard_interactive_modals() {
    let mut app = App::new(settings());
    let (reply, _rx) = tokio::sync::oneshot::channel();
    app.handle(AppEvent::Prompt(PromptRequest::Secret {
        prompt: SecretPrompt {
            prompt: "Enter passphrase for key '/home/dev/.ssh/id_ed25519': ".into(),
            echo: false,
            purpose: SecretPurpose::Passphrase {
                path: PathBuf::from("/home/dev/.ssh/id_ed25519"),
            },
        },
        reply,
    }));
    type_str(&mut app, "hunter2");
    let screen = draw(&app, 60, 20);
    assert!(
        !screen.contains("hunter2"),
        "a hidden secret must not be drawn"
    );
    snap("secret_prompt", &app);

    let mut app = App::new(settings());
    let (reply, _rx) = tokio::sync::oneshot::channel();
    app.handle(AppEvent::Prompt(PromptRequest::Keyboard {
        round: KbdRound {
            user: "dev".into(),
            host: "build-box".into(),
            name: "Two-factor login".into(),
            instructions: "Use your password, then the 6-digit code from your authenticator app."
                .into(),
            prompts: vec![
                ("Password:".into(), false),
                ("Verification code:".into(), true),
            ],
        },
        reply,
    }));
    type_str(&mut app, "pw");
    app.handle_key(key(KeyCode::Enter));
    type_str(&mut app, "123");
    snap("keyboard_interactive", &app);
}

#[test]
fn bootstrap_progress_modal() {
    let mut app = App::new(settings());
    app.handle(AppEvent::Progress {
        stage: Stage::Auth,
        detail: "publickey".into(),
        amount: None,
    });
    app.handle(AppEvent::Banner(
        "Authorized use only. Activity is logged.".into(),
    ));
    app.handle(AppEvent::Progress {
        stage: Stage::Upload,
        detail: "reasonix-remote".into(),
        amount: Some((3 * 1024 * 1024 + 300_000, 7 * 1024 * 1024)),
    });
    snap("bootstrap_progress", &app);
}

#[test]
fn status_bar_states() {
    // Reconnecting: attempt, countdown and last contact.
    let mut app = busy_app();
    app.handle_event(ClientEvent::Connection(ConnState::Reconnecting {
        attempt: 3,
        next_in: Duration::from_millis(1400),
        last_contact_secs: 17,
        reason: "connection reset by peer".into(),
    }));
    snap("status_reconnecting", &app);

    // Waiting for laptop (the turn needs the gateway).
    let mut app = busy_app();
    app.handle_event(ClientEvent::State {
        state: TurnState::WaitingForLaptop,
        detail: Some("waiting for laptop to serve the model request".into()),
    });
    snap("status_waiting_for_laptop", &app);

    // Read-only spectator.
    let mut app = App::new(settings());
    app.tick(0, BASE_WALL_MS);
    connected(&mut app, ClientRole::Spectator);
    let mut f = Feed::new();
    f.ev(
        &mut app,
        0.0,
        EventKind::UserTurn {
            attachments: Vec::new(),
            request_id: "other".into(),
            text: "summarise the README".into(),
        },
    );
    f.ev(
        &mut app,
        0.4,
        EventKind::TextDelta {
            text: "The README explains how to build".into(),
        },
    );
    app.handle_event(ClientEvent::State {
        state: TurnState::Running,
        detail: None,
    });
    snap("status_spectator", &app);

    // Failed for good.
    let mut app = App::new(settings());
    app.handle_event(ClientEvent::Connection(ConnState::Failed {
        reason: "build mismatch: reasonix is build aaa but the host's reasonix-remote is build bbb"
            .into(),
        can_create: false,
    }));
    snap("status_failed", &app);
}

#[test]
fn fatal_modal_missing_workspace_and_file() {
    // A missing workspace: the modal names stage, place, problem and fix, and offers to
    // create the folder; y asks the runner to create it and connects again.
    let mut app = App::new(settings());
    app.handle_event(ClientEvent::Connection(ConnState::Failed {
        reason: "[attach] devbox: /home/me/proj: the workspace folder does not exist (No such file or directory (os error 2)). Check the path (a relative path is relative to the home folder), create the folder, or rerun with --mkdir to create it".into(),
        can_create: true,
    }));
    snap("fatal_missing_workspace", &app);
    let screen = draw(&app, 100, 30);
    assert!(screen.contains("Cannot connect"), "{screen}");
    assert!(screen.contains("attach"), "{screen}");
    assert!(screen.contains("/home/me/proj"), "{screen}");
    // Typing does not reach the composer while the modal is up.
    assert!(type_str(&mut app, "x").is_empty());
    assert_eq!(
        app.handle_key(key(KeyCode::Char('y'))),
        vec![reasonix_local::tui::Action::CreateWorkspace]
    );
    assert!(!draw(&app, 100, 30).contains("Cannot connect"));

    // A path that is a file: nothing to create; Enter dismisses and quits.
    let mut app = App::new(settings());
    app.handle_event(ClientEvent::Connection(ConnState::Failed {
        reason: "[attach] devbox: /home/me/notes.txt: the workspace path is not a folder (Not a directory (os error 20)). Give the folder that contains it, or another path".into(),
        can_create: false,
    }));
    snap("fatal_not_a_folder", &app);
    assert!(app.handle_key(key(KeyCode::Char('y'))).is_empty());
    assert_eq!(
        app.handle_key(key(KeyCode::Enter)),
        vec![reasonix_local::tui::Action::Quit]
    );
}

#[test]
fn help_status_sessions_and_model_overlays() {
    let mut app = busy_app();
    type_str(&mut app, "/help");
    app.handle_key(key(KeyCode::Enter));
    snap("overlay_help", &app);

    let mut app = busy_app();
    type_str(&mut app, "/status");
    let actions = app.handle_key(key(KeyCode::Enter));
    assert_eq!(actions, vec![reasonix_local::tui::Action::Status]);
    app.handle(AppEvent::Status(DaemonStatus {
        build_id: "0.1.0-3f9c2e1".into(),
        pid: 41_235,
        uptime_secs: 7_384,
        workspace: "/home/dev/project".into(),
        sandbox: "bwrap".into(),
        clients: 2,
        links: 2,
        sessions: 5,
        unclean_previous_shutdown: None,
    }));
    snap("overlay_status", &app);

    let mut app = busy_app();
    type_str(&mut app, "/sessions");
    app.handle_key(key(KeyCode::Enter));
    app.handle(AppEvent::Sessions(vec![
        SessionInfo {
            id: "20260501-100000-7f3a".into(),
            created: "2026-05-01T10:00:00Z".into(),
            turns: 1,
            last_seq: 14,
            title: "Fix the off-by-one in src/range.rs and run the tests".into(),
            state: TurnState::Running,
            last_activity: "2026-05-01T10:05:00Z".into(),
            driver_attached: true,
            clients: 0,
            goal: None,
            keeper_attached: false,
        },
        SessionInfo {
            id: "20260430-162210-1b2c".into(),
            created: "2026-04-30T16:22:10Z".into(),
            turns: 7,
            last_seq: 210,
            title: "Add retries with backoff to the HTTP client".into(),
            state: TurnState::Idle,
            last_activity: "2026-04-30T18:40:00Z".into(),
            driver_attached: false,
            clients: 0,
            goal: None,
            keeper_attached: false,
        },
        SessionInfo {
            id: "20260429-091500-99aa".into(),
            created: "2026-04-29T09:15:00Z".into(),
            turns: 2,
            last_seq: 31,
            title: "Explain the build".into(),
            state: TurnState::Idle,
            last_activity: "2026-04-29T09:31:00Z".into(),
            driver_attached: false,
            clients: 0,
            goal: None,
            keeper_attached: false,
        },
    ]));
    app.handle_key(key(KeyCode::Down));
    snap("overlay_sessions", &app);

    // `t` opens the trash: Enter restores, `p` purges after a confirmation.
    assert_eq!(
        app.handle_key(key(KeyCode::Char('t'))),
        vec![reasonix_local::tui::Action::ListTrash]
    );
    let trashed = |id: &str, title: &str, turns: u64, deleted: &str, purge: &str| {
        reasonix_forward::proto::TrashedSession {
            info: SessionInfo {
                id: id.into(),
                created: "2026-04-20T10:00:00Z".into(),
                turns,
                last_seq: 9,
                title: title.into(),
                state: TurnState::Idle,
                last_activity: "2026-04-20T11:00:00Z".into(),
                driver_attached: false,
                clients: 0,
                goal: None,
                keeper_attached: false,
            },
            deleted: deleted.into(),
            purge_after: purge.into(),
        }
    };
    app.handle(AppEvent::Trash(vec![
        trashed(
            "20260428-120000-aa01",
            "Try the new parser",
            3,
            "2026-05-01T09:00:00Z",
            "2026-05-08T09:00:00Z",
        ),
        trashed(
            "20260420-100000-bb02",
            "Old spike on caching",
            12,
            "2026-04-27T15:30:00Z",
            "2026-05-04T15:30:00Z",
        ),
    ]));
    app.handle_key(key(KeyCode::Down));
    snap("overlay_trash", &app);
    assert!(app.handle_key(key(KeyCode::Char('p'))).is_empty());
    snap("overlay_trash_confirm_purge", &app);
    assert_eq!(
        app.handle_key(key(KeyCode::Char('y'))),
        vec![reasonix_local::tui::Action::PurgeSession {
            session: "20260420-100000-bb02".into()
        }]
    );
    assert_eq!(
        app.handle_key(key(KeyCode::Enter)),
        vec![reasonix_local::tui::Action::RestoreSession {
            session: "20260420-100000-bb02".into()
        }]
    );
    // Any key but `y` keeps it.
    app.handle_key(key(KeyCode::Char('p')));
    assert!(app.handle_key(key(KeyCode::Char('n'))).is_empty());

    let mut app = busy_app();
    type_str(&mut app, "/model");
    app.handle_key(key(KeyCode::Enter));
    snap("overlay_model", &app);
}

#[test]
fn mcp_overlay_loading_and_listed() {
    let mut app = busy_app();
    type_str(&mut app, "/mcp");
    app.handle_key(key(KeyCode::Esc));
    let actions = app.handle_key(key(KeyCode::Enter));
    assert_eq!(actions, vec![reasonix_local::tui::Action::McpStatus]);
    snap("overlay_mcp_loading", &app);
    app.handle(AppEvent::McpServers(vec![
        McpServerInfo {
            name: "broken".into(),
            run_on: "host".into(),
            transport: "stdio: no-such-server".into(),
            state: "failed".into(),
            reason: Some(
                "could not start `no-such-server`: No such file or directory (os error 2)".into(),
            ),
            tools: vec![],
        },
        McpServerInfo {
            name: "time".into(),
            run_on: "host".into(),
            transport: "stdio: mcp-server-time".into(),
            state: "ready".into(),
            reason: None,
            tools: vec![
                "mcp__time__convert_time".into(),
                "mcp__time__get_current_time".into(),
            ],
        },
        McpServerInfo {
            name: "lap".into(),
            run_on: "laptop".into(),
            transport: "channel: laptop".into(),
            state: "ready".into(),
            reason: None,
            tools: [
                "add",
                "echo",
                "get-env",
                "get-resource-links",
                "get-sum",
                "long-running-operation",
                "print-env",
                "sample-llm",
                "structured-content",
            ]
            .iter()
            .map(|t| format!("mcp__lap__{t}"))
            .collect(),
        },
    ]));
    snap("overlay_mcp", &app);
}

#[test]
fn streaming_reasoning_and_paused_turn() {
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
            text: "Why does the build take so long?\nIt used to be fast.".into(),
        },
    );
    app.handle_event(ClientEvent::State {
        state: TurnState::Running,
        detail: None,
    });
    for chunk in [
        "Builds got slower after the workspace split. ",
        "Each crate now compiles its own copy of the heavy dependencies ",
        "because features differ.\nCheck `cargo tree -d` for duplicates.\n",
        "Then look at the profile settings: opt-level for dependencies ",
        "was raised to 1, which costs time on a cold build.",
    ] {
        f.ev(
            &mut app,
            0.5,
            EventKind::ReasoningDelta { text: chunk.into() },
        );
    }
    app.tick(2_300, BASE_WALL_MS + 2_300);
    snap("streaming_reasoning", &app);

    f.ev(
        &mut app,
        3.0,
        EventKind::TextDelta {
            text: "Two causes:\n\n- duplicated dependencies\n- dependency opt-level".into(),
        },
    );
    f.ev(
        &mut app,
        3.5,
        EventKind::TurnFinished {
            outcome: TurnOutcome::Paused,
            detail: Some("the turn reached its limit of 50 model steps".into()),
        },
    );
    app.handle_event(ClientEvent::State {
        state: TurnState::Paused,
        detail: None,
    });
    snap("paused_turn", &app);
}

fn with_custom_commands(app: &mut App) {
    use reasonix_forward::proto::{CommandFile, CommandFileProblem};
    let file = |name: &str, path: &str, text: &str| CommandFile {
        name: name.into(),
        path: path.into(),
        text: text.into(),
    };
    let set = reasonix_local::commands::CommandSet::merge(
        vec![file(
            "standup",
            "~/.reasonix/commands/standup.md",
            "---\ndescription: Summarise yesterday's commits\n---\nSummarise the commits since $1",
        )],
        Vec::new(),
        vec![
            file(
                "review",
                ".reasonix/commands/review.md",
                "---\ndescription: Review a file\nargument-hint: FILE [FOCUS]\n---\nReview $1, focus $2",
            ),
            file("broken", ".reasonix/commands/broken.md", "---\nno end"),
        ],
        vec![CommandFileProblem {
            path: ".reasonix/commands/huge.md".into(),
            problem: "70000 bytes, more than the 65536 a command file may have".into(),
        }],
        &["help", "sessions", "status"],
    );
    app.handle(AppEvent::Commands(set));
}

#[test]
fn custom_commands_in_completion_help_and_notices() {
    let mut app = busy_app();
    with_custom_commands(&mut app);
    type_str(&mut app, "/re");
    snap("composer_custom_command_completion", &app);
    let mut app = busy_app();
    with_custom_commands(&mut app);
    type_str(&mut app, "/help");
    app.handle_key(key(KeyCode::Enter));
    snap("overlay_help_custom_commands", &app);
}

// Issue 16 item 3: MCP prompts join the slash completion with their description and
// arguments; `@server:` asks the host for that server's resources and lists them.
#[test]
fn mcp_prompts_and_resources_in_completion() {
    use reasonix_forward::proto::{McpPromptArgument, McpPromptEntry, McpResourceEntry};
    let mut app = busy_app();
    let mut set = reasonix_local::commands::CommandSet::default();
    let arg = |n: &str, required| McpPromptArgument {
        name: n.into(),
        description: String::new(),
        required,
    };
    set.add_mcp_prompts(vec![
        McpPromptEntry {
            command: "mcp__everything__args-prompt".into(),
            server: "everything".into(),
            name: "args-prompt".into(),
            description: "A prompt with two arguments, one required and one optional".into(),
            arguments: vec![arg("city", true), arg("state", false)],
        },
        McpPromptEntry {
            command: "mcp__everything__simple-prompt".into(),
            server: "everything".into(),
            name: "simple-prompt".into(),
            description: "A prompt with no arguments".into(),
            arguments: Vec::new(),
        },
    ]);
    app.handle(AppEvent::Commands(set.clone()));
    type_str(&mut app, "/mcp");
    snap("composer_mcp_prompt_completion", &app);
    let mut help = busy_app();
    help.handle(AppEvent::Commands(set));
    type_str(&mut help, "/help");
    help.handle_key(key(KeyCode::Enter));
    // The help overlay lists them after the built-ins (a tall screen shows it whole).
    let text = draw(&help, 120, 160);
    assert!(
        text.contains("/mcp__everything__args-prompt <city> [state]")
            && text.contains("A prompt with two arguments, one required and one optional (MCP)"),
        "{text}"
    );

    let mut app = busy_app();
    let actions = type_str(&mut app, "read @everything:");
    assert!(
        actions.iter().any(|a| matches!(a, reasonix_local::tui::Action::McpResources { server } if server == "everything")),
        "{actions:?}"
    );
    let doc = |n: &str| McpResourceEntry {
        uri: format!("demo://resource/static/document/{n}"),
        name: n.into(),
        description: format!("Static document file exposed from /docs: {n}"),
    };
    app.handle(AppEvent::McpResources {
        server: "everything".into(),
        resources: vec![doc("architecture.md"), doc("features.md")],
    });
    snap("composer_mcp_resource_completion", &app);
}

// #15: a model-request retry takes the connection's place in the status line with its
// countdown, and clears once the model answers.
#[test]
fn status_provider_retry() {
    use reasonix_forward::proto::{ProviderRetry, RetryPhase};
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
            text: "explain the build".into(),
        },
    );
    app.handle_event(ClientEvent::State {
        state: TurnState::Running,
        detail: None,
    });
    f.ev(
        &mut app,
        0.2,
        EventKind::ProviderRetry(ProviderRetry {
            phase: RetryPhase::Connect,
            attempt: 3,
            max_attempts: 9,
            delay_ms: 4_000,
            reason: "HTTP 503 from provider `deepseek`: overloaded".into(),
        }),
    );
    // 1.2 s into the 4 s wait: "in 3 s".
    app.tick(1_200, BASE_WALL_MS + 1_200);
    let wide = draw(&app, 120, 40);
    let status = wide.lines().last().unwrap_or_default().to_string();
    assert!(
        status.contains("retrying the model request in 3 s (attempt 3/9, HTTP 503"),
        "{status}"
    );
    snap("status_provider_retry", &app);
    f.ev(
        &mut app,
        4.5,
        EventKind::TextDelta {
            text: "The build uses cargo.".into(),
        },
    );
    let wide = draw(&app, 120, 40);
    let status = wide.lines().last().unwrap_or_default().to_string();
    assert!(
        status.contains("connected") && !status.contains("retrying"),
        "{status}"
    );
}

#[test]
fn steer_shell_and_history_search() {
    // A steer waiting for the next step and one delivered, during a running turn.
    let mut app = busy_app();
    let mut seq = app.last_seq();
    let mut ev = |app: &mut App, kind: EventKind| {
        seq += 1;
        app.handle_event(ClientEvent::Event(reasonix_forward::proto::Event {
            seq,
            ts: ts(20.0),
            turn: 1,
            kind,
        }));
    };
    ev(
        &mut app,
        EventKind::Steer {
            request_id: "s1".into(),
            text: "use tabs, not spaces".into(),
        },
    );
    ev(
        &mut app,
        EventKind::SteerInjected {
            request_ids: vec!["s1".into()],
            est_tokens: 6,
        },
    );
    ev(
        &mut app,
        EventKind::Steer {
            request_id: "s2".into(),
            text: "and keep the tests green".into(),
        },
    );
    snap("steer", &app);

    // A `!` command between turns, with its output.
    let mut app = App::new(settings());
    connected(&mut app, ClientRole::Driver);
    app.handle_event(ClientEvent::Event(reasonix_forward::proto::Event {
        seq: app.last_seq() + 1,
        ts: ts(3.0),
        turn: 0,
        kind: EventKind::ShellRan {
            request_id: "sh1".into(),
            command: "git status --short".into(),
            is_error: false,
            output: " M src/lib.rs\n?? notes.txt\n".into(),
            added_to_context: true,
        },
    }));
    // Ctrl-R over the host's history.
    app.handle(AppEvent::History(vec![
        "fix the build".into(),
        "fix the parser".into(),
    ]));
    app.handle_key(ctrl('r'));
    type_str(&mut app, "build");
    snap("shell_and_history_search", &app);
}

#[test]
fn permissions_list_with_sources() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::write(
        home.join("config.toml"),
        "[permissions]\nallow = [\"Bash(ls:*)\"]\n\n[workspaces.\"dev@build-box:/home/dev/project\".permissions]\nallow = [\"Edit\"]\nask = [\"Bash(git push:*)\"]\n",
    )
    .expect("config");
    std::fs::write(
        ws.join("reasonix.toml"),
        "[permissions]\ndeny = [\"Bash(rm:*)\"]\n",
    )
    .expect("project");
    let mut config = reasonix_local::config::Config::load(&reasonix_local::config::LoadOptions {
        home: Some(home.clone()),
        project_dir: Some(ws),
        ..Default::default()
    })
    .expect("load");
    config.apply_workspace("dev@build-box:/home/dev/project");
    let rows = reasonix_local::permissions::rows(&config);
    let text = reasonix_local::permissions::render(&config, &rows);
    let mut app = App::new(settings());
    connected(&mut app, ClientRole::Driver);
    app.handle(AppEvent::Permissions { text, error: false });
    snap("permissions_list", &app);
    assert_eq!(rows.len(), 4, "{rows:?}");
}

// Issue 33 §3: skills join the slash path after the command files; `/skills` lists them
// (with the notices about skipped skills) and `/<skill> args` goes to the host as typed.
#[test]
fn skills_listed_and_sent_as_typed() {
    use reasonix_forward::skills::SkillInfo;
    let skill = |name: &str, source: &str, path: &str| SkillInfo {
        name: name.into(),
        description: format!("the {name} skill"),
        source: source.into(),
        run_as: "inline".into(),
        path: path.into(),
        read_only: false,
        allowed_tools: Vec::new(),
        model: None,
    };
    let mut set = reasonix_local::commands::CommandSet::default();
    set.notices
        .push("skill .reasonix/skills/bad/SKILL.md skipped: line 3: no `key: value`".into());
    set.add_skills(vec![
        skill("review", "built-in", "built-in:review"),
        skill("audit", "project", ".reasonix/skills/audit/SKILL.md"),
    ]);
    let mut app = connected_app_for_send();
    app.handle(AppEvent::Commands(set));
    type_str(&mut app, "/skills show");
    app.handle_key(key(KeyCode::Enter));
    let text = draw(&app, 120, 40);
    assert!(
        text.contains("/audit")
            && text.contains("the review skill")
            && text.contains("built-in:review"),
        "{text}"
    );
    assert!(text.contains("bad/SKILL.md skipped: line 3"), "{text}");
    type_str(&mut app, "/review src/lib.rs");
    let actions = app.handle_key(key(KeyCode::Enter));
    assert!(
        actions.iter().any(|a| matches!(a, reasonix_local::tui::Action::Submit { text, .. } if text == "/review src/lib.rs")),
        "{actions:?}"
    );
}
