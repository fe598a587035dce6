//! Slash commands: the table `/help` and completion show, and their handlers.

use super::*;

/// Slash commands: name, argument hint, description. `/help` lists these.
pub(crate) const COMMANDS: &[(&str, &str, &str)] = &[
    ("help", "", "list every key and command"),
    ("new", "", "start a new session"),
    (
        "sessions",
        "",
        "pick a session of this workspace and resume it",
    ),
    ("model", "[name]", "choose the model"),
    (
        "status",
        "",
        "host, build, sandbox, uptime, session, tokens, cache",
    ),
    ("clear", "", "clear the screen (the session is kept)"),
    ("continue", "", "continue a turn paused at its step limit"),
    (
        "takeover",
        "",
        "drive this session (the other client becomes read-only)",
    ),
    (
        "copy",
        "[code]",
        "copy the last answer (or its last code block)",
    ),
    (
        "output",
        "[N]",
        "save the last (or N-th last) tool output to a file",
    ),
    ("reconnect", "", "retry the connection now"),
    (
        "rewind",
        "N [code|conversation|both] [dry]",
        "restore to just before turn N",
    ),
    (
        "compact",
        "",
        "summarise the conversation (not available yet)",
    ),
    (
        "mcp",
        "",
        "MCP servers: where each runs, its state and its tools",
    ),
    ("quit", "", "leave Reasonix (the host keeps the session)"),
];

impl App {
    pub(super) fn switch_session(&mut self, session: Option<String>, new: bool) -> Vec<Action> {
        self.transcript.clear();
        self.scroll = Scroll::Follow;
        self.session = None;
        self.last_seq = 0;
        self.totals = Totals::default();
        self.approvals.clear();
        self.turn_state = TurnState::Idle;
        self.turn_started = None;
        let p = OpenParams {
            session,
            new,
            since: 0,
            takeover: false,
            model: self.model.clone(),
        };
        self.open_pending = Some(p.clone());
        vec![Action::OpenSession(p)]
    }

    pub(super) fn rewind_command(&mut self, arg: &str) -> Vec<Action> {
        let mut to_turn = None;
        let mut scope = RewindScope::Both;
        let mut dry_run = false;
        let mut bad = None;
        for word in arg.split_whitespace() {
            match word {
                "code" | "files" => scope = RewindScope::Code,
                "conversation" | "conv" | "chat" => scope = RewindScope::Conversation,
                "both" | "all" => scope = RewindScope::Both,
                "dry" | "dry-run" | "--dry-run" => dry_run = true,
                n => match n.parse::<u64>() {
                    Ok(n) if n > 0 => to_turn = Some(n),
                    _ => bad = Some(n.to_string()),
                },
            }
        }
        if self.role == Some(ClientRole::Spectator) {
            self.set_hint("read-only spectator: /takeover to drive this session");
            return Vec::new();
        }
        match (to_turn, bad) {
            (Some(to_turn), None) => vec![Action::Rewind {
                request_id: rid("rewind"),
                to_turn,
                scope,
                dry_run,
            }],
            (_, bad) => {
                let turns = self.transcript.user_turns();
                let mut text = String::new();
                if let Some(b) = bad {
                    text.push_str(&format!("/rewind: `{b}` is not a turn number or scope\n"));
                }
                text.push_str(
                    "usage: /rewind N [code|conversation|both] [dry] — restore to just before turn N",
                );
                let start = turns.len().saturating_sub(10);
                for (n, first) in &turns[start..] {
                    text.push_str(&format!("\n  turn {n}: {first}"));
                }
                self.transcript.notice(text, Level::Info);
                Vec::new()
            }
        }
    }

    pub(super) fn set_model(&mut self, model: String) -> Vec<Action> {
        self.model = Some(model.clone());
        self.transcript.notice(
            format!("model: {model} (from the next request)"),
            Level::Info,
        );
        // Re-opening the same session hands the daemon the new settings.
        match &self.session {
            Some(s) => vec![Action::OpenSession(OpenParams {
                session: Some(s.clone()),
                new: false,
                since: self.last_seq,
                takeover: false,
                model: Some(model),
            })],
            None => Vec::new(),
        }
    }

    pub(super) fn copy(&mut self, code: bool) -> Vec<Action> {
        let text = if code {
            self.transcript.last_code_block()
        } else {
            self.transcript.last_answer()
        };
        match text {
            Some(t) => {
                self.set_hint(format!(
                    "copied {} {} to the clipboard (OSC 52)",
                    t.chars().count(),
                    if code { "chars of code" } else { "chars" }
                ));
                vec![Action::Copy(t)]
            }
            None => {
                self.set_hint(if code {
                    "no code block to copy"
                } else {
                    "no answer to copy yet"
                });
                Vec::new()
            }
        }
    }

    /// Run a slash command (without the leading `/`).
    pub(super) fn command(&mut self, line: &str) -> Vec<Action> {
        let (name, arg) = match line.split_once(char::is_whitespace) {
            Some((n, a)) => (n, a.trim()),
            None => (line, ""),
        };
        match name {
            "help" | "?" => {
                self.overlay_max_scroll.set(usize::MAX);
                self.overlay = Some(Overlay::Help { scroll: 0 });
                Vec::new()
            }
            "new" => self.switch_session(None, true),
            "sessions" | "resume" => {
                self.overlay = Some(Overlay::Sessions { list: None, sel: 0 });
                vec![Action::ListSessions]
            }
            "model" => {
                if !arg.is_empty() {
                    return self.set_model(arg.to_string());
                }
                let sel = self
                    .model
                    .as_ref()
                    .and_then(|m| self.settings.models.iter().position(|x| x == m))
                    .unwrap_or(0);
                self.overlay = Some(Overlay::Models { sel });
                Vec::new()
            }
            "status" => {
                self.overlay = Some(Overlay::Status);
                vec![Action::Status]
            }
            "clear" => {
                self.transcript.clear();
                self.scroll = Scroll::Follow;
                Vec::new()
            }
            "continue" => {
                if self.turn_state != TurnState::Paused {
                    self.set_hint("nothing to continue: no turn is paused");
                    return Vec::new();
                }
                vec![Action::ContinueTurn {
                    request_id: rid("continue"),
                }]
            }
            "takeover" => {
                if self.role == Some(ClientRole::Driver) {
                    self.set_hint("you already drive this session");
                    return Vec::new();
                }
                vec![Action::Takeover]
            }
            "copy" => self.copy(arg == "code"),
            "output" => {
                let n = match crate::tui::fullout::parse_nth(arg) {
                    Ok(n) => n,
                    Err(e) => {
                        self.set_hint(e);
                        return Vec::new();
                    }
                };
                match self.transcript.nth_tool_output(n) {
                    Some((tool, inline, full)) => {
                        self.set_hint(format!("saving the output of {tool}…"));
                        vec![Action::SaveOutput(crate::tui::fullout::OutputRequest {
                            tool,
                            inline,
                            full,
                        })]
                    }
                    None => {
                        self.set_hint("no finished tool call to save the output of");
                        Vec::new()
                    }
                }
            }
            "reconnect" => {
                self.set_hint("reconnecting now");
                vec![Action::RetryNow]
            }
            "quit" | "exit" | "q" => {
                self.quit = true;
                vec![Action::Quit]
            }
            "rewind" => self.rewind_command(arg),
            "mcp" => {
                self.overlay_max_scroll.set(usize::MAX);
                self.overlay = Some(Overlay::Mcp {
                    list: None,
                    error: None,
                    scroll: 0,
                });
                vec![Action::McpStatus]
            }
            "compact" => {
                self.transcript.notice(
                    format!("/{name} is not available yet in this build"),
                    Level::Warn,
                );
                Vec::new()
            }
            other => {
                self.set_hint(format!("unknown command /{other}; /help lists them"));
                Vec::new()
            }
        }
    }
}
