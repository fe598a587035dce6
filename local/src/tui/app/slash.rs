//! Slash commands: the table `/help` and completion show, and their handlers.

use super::*;

/// A slash command. Adding one means a variant here, its line in [`SlashCommand::spec`] and
/// its arm in [`App::command`]; `/help` and completion read [`SlashCommand::ALL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlashCommand {
    Help,
    New,
    Sessions,
    Model,
    Effort,
    Status,
    Clear,
    Continue,
    Takeover,
    Copy,
    Output,
    Reconnect,
    Rewind,
    Compact,
    Context,
    Mcp,
    Hooks,
    Permissions,
    Shell,
    Rename,
    Plan,
    Goal,
    Ports,
    Memory,
    Upload,
    Download,
    Skills,
    Quit,
}

/// What `/help` and completion show of a command.
pub(crate) struct SlashSpec {
    /// The name typed after `/`.
    pub(crate) name: &'static str,
    /// Other names that run the same command (not listed).
    pub(crate) aliases: &'static [&'static str],
    /// Argument synopsis, empty when it takes none.
    pub(crate) args: &'static str,
    /// One line on what it does.
    pub(crate) description: &'static str,
}

impl SlashCommand {
    /// Every command, in the order `/help` lists them.
    pub(crate) const ALL: &'static [SlashCommand] = &[
        Self::Help,
        Self::New,
        Self::Sessions,
        Self::Model,
        Self::Effort,
        Self::Status,
        Self::Clear,
        Self::Continue,
        Self::Takeover,
        Self::Copy,
        Self::Output,
        Self::Reconnect,
        Self::Rewind,
        Self::Compact,
        Self::Context,
        Self::Mcp,
        Self::Hooks,
        Self::Permissions,
        Self::Shell,
        Self::Rename,
        Self::Plan,
        Self::Goal,
        Self::Ports,
        Self::Memory,
        Self::Upload,
        Self::Download,
        Self::Skills,
        Self::Quit,
    ];

    /// Name, aliases, argument synopsis and description.
    pub(crate) fn spec(self) -> SlashSpec {
        let (name, aliases, args, description): (_, &'static [&'static str], _, _) = match self {
            Self::Help => ("help", &["?"], "", "list every key and command"),
            Self::Plan => (
                "plan",
                &[],
                "[task]",
                "plan mode: research read-only, propose a plan, change nothing until you approve it",
            ),
            Self::Goal => (
                "goal",
                &[],
                "[objective|status|pause|resume|clear]",
                "keep working toward an objective, turn after turn, even with no client attached",
            ),
            Self::New => ("new", &[], "", "start a new session"),
            Self::Sessions => (
                "sessions",
                &["resume"],
                "[trash]",
                "sessions of this workspace: resume, delete (to the trash), rename; trash: restore, purge",
            ),
            Self::Model => ("model", &[], "[name]", "choose the model"),
            Self::Effort => (
                "effort",
                &[],
                "[level]",
                "how hard the model reasons: low, medium, high, max, default",
            ),
            Self::Status => (
                "status",
                &[],
                "",
                "host, build, sandbox, uptime, session, tokens, cache",
            ),
            Self::Clear => ("clear", &[], "", "clear the screen (the session is kept)"),
            Self::Continue => (
                "continue",
                &[],
                "",
                "continue a turn paused at its step limit",
            ),
            Self::Takeover => (
                "takeover",
                &[],
                "",
                "drive this session (the other client becomes read-only)",
            ),
            Self::Copy => (
                "copy",
                &[],
                "[code]",
                "copy the last answer (or its last code block)",
            ),
            Self::Output => (
                "output",
                &[],
                "[N]",
                "save the last (or N-th last) tool output to a file",
            ),
            Self::Reconnect => ("reconnect", &[], "", "retry the connection now"),
            Self::Rewind => (
                "rewind",
                &[],
                "N [code|conversation|both] [dry]",
                "restore to just before turn N",
            ),
            Self::Compact => (
                "compact",
                &[],
                "[focus]",
                "summarise the older conversation now (focus: what to keep)",
            ),
            Self::Context => (
                "context",
                &[],
                "",
                "context window split, cache-hit ratio and cost so far",
            ),
            Self::Mcp => (
                "mcp",
                &[],
                "[login NAME|logout NAME]",
                "MCP servers: where each runs, its state and its tools; login/logout: sign in to an HTTP server (browser on this laptop) and reconnect it",
            ),
            Self::Hooks => (
                "hooks",
                &[],
                "[trust [PATH]]",
                "every hook, where it came from, trusted or not, its last run; trust trusts the project hook files exactly as they are now",
            ),
            Self::Permissions => (
                "permissions",
                &[],
                "[remove N]",
                "the rules in force and where each came from; remove N deletes rule N from your config",
            ),
            Self::Shell => (
                "shell",
                &["term"],
                "[N|close N]",
                "open a host terminal tab (N shows terminal N; Ctrl-T switches tabs)",
            ),
            Self::Rename => (
                "rename",
                &[],
                "TITLE",
                "rename the open session (every client lists the new title)",
            ),
            Self::Ports => (
                "ports",
                &[],
                "[open|stop N|add SPEC]",
                "host ports forwarded here: list, open (browser), stop, add [HOST:]PORT",
            ),
            Self::Memory => (
                "memory",
                &[],
                "[search W|show ID|pin ID|unpin ID|forget ID|restore ID|archived]",
                "remembered facts (project on the host, global on this laptop); `# text` remembers a note",
            ),
            Self::Upload => (
                "upload",
                &[],
                "PATH [HOST_PATH]",
                "copy a laptop file or folder into the workspace (or to HOST_PATH); SHA-256 checked, resumable",
            ),
            Self::Download => (
                "download",
                &[],
                "PATH [LAPTOP_PATH]",
                "copy a host file or folder to this laptop (the folder Reasonix started in by default)",
            ),
            Self::Skills => (
                "skills",
                &[],
                "",
                "the skills /<name> runs: built-in, yours (~/.reasonix/skills) and the workspace's (.reasonix/skills)",
            ),
            Self::Quit => (
                "quit",
                &["exit", "q"],
                "",
                "leave Reasonix (the host keeps the session)",
            ),
        };
        SlashSpec {
            name,
            aliases,
            args,
            description,
        }
    }

    /// Every built-in name and alias (custom command files cannot take these).
    pub(crate) fn reserved_names() -> Vec<&'static str> {
        Self::ALL
            .iter()
            .flat_map(|c| {
                let spec = c.spec();
                std::iter::once(spec.name).chain(spec.aliases.iter().copied())
            })
            .collect()
    }

    /// The command a typed name (or alias) runs.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| {
            let spec = c.spec();
            spec.name == name || spec.aliases.contains(&name)
        })
    }
}

impl App {
    pub(super) fn switch_session(&mut self, session: Option<String>, new: bool) -> Vec<Action> {
        self.transcript.clear();
        self.scroll = Scroll::Follow;
        self.session = None;
        self.last_seq = 0;
        self.totals = Totals::default();
        self.approvals.clear();
        self.plan = plan::PlanView::default();
        self.turn_state = TurnState::Idle;
        self.turn_started = None;
        let p = OpenParams {
            session,
            new,
            since: 0,
            takeover: false,
            model: self.model.clone(),
            effort: self.effort,
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
            (Some(to_turn), None) => {
                self.rewind_remembered = if dry_run {
                    Vec::new()
                } else {
                    self.transcript.remembered_since(to_turn)
                };
                vec![Action::Rewind {
                    request_id: rid("rewind"),
                    to_turn,
                    scope,
                    dry_run,
                }]
            }
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
        self.effort_after_model_switch();
        // Re-opening the same session hands the daemon the new settings.
        self.reopen_with_settings()
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

    /// A new set of custom commands; its notices are shown when they are new (a re-read
    /// repeats the old ones).
    pub(super) fn set_commands(&mut self, set: crate::commands::CommandSet) {
        for n in &set.notices {
            if !self.custom_commands.notices.contains(n) {
                self.transcript.notice(n.clone(), Level::Warn);
            }
        }
        self.custom_commands = set;
    }

    /// `/skills`: the skills of the command set, one per line, and its skill notices.
    fn show_skills(&mut self) {
        let mut text = String::from("skills (/<name> [args] runs one):");
        let mut any = false;
        for c in &self.custom_commands.commands {
            if c.source == crate::commands::Source::Skill {
                any = true;
                text.push_str(&format!(
                    "\n  /{:<12} {}  [{}]",
                    c.name, c.description, c.path
                ));
            }
        }
        if !any {
            text.push_str("\n  none (the host did not list any)");
        }
        for n in &self.custom_commands.notices {
            if n.contains("skill") {
                text.push_str(&format!("\n  warning: {n}"));
            }
        }
        self.transcript.notice(text, Level::Info);
    }

    /// The trash overlay (`/sessions trash`, or `t` in `/sessions`).
    pub(super) fn open_trash(&mut self) -> Vec<Action> {
        self.overlay = Some(Overlay::Trash {
            list: None,
            sel: 0,
            confirm: false,
        });
        vec![Action::ListTrash]
    }

    /// Run a slash command (without the leading `/`).
    pub(super) fn command(&mut self, line: &str) -> Vec<Action> {
        let (name, arg) = match line.split_once(char::is_whitespace) {
            Some((n, a)) => (n, a.trim()),
            None => (line, ""),
        };
        let Some(cmd) = SlashCommand::parse(name) else {
            if let Some(custom) = self.custom_commands.get(name) {
                // An MCP prompt is expanded by the host: the line goes as typed.
                // MCP prompts and skills are expanded by the host: the line goes as typed.
                let text = if matches!(
                    custom.source,
                    crate::commands::Source::Mcp | crate::commands::Source::Skill
                ) {
                    format!("/{line}")
                } else {
                    crate::commands::expand(&custom.body, arg)
                };
                return self.submit(text);
            }
            // Maybe a command file added since the last read: read them again, then retry.
            return vec![Action::ReloadCommands {
                then: Some(line.to_string()),
            }];
        };
        match cmd {
            SlashCommand::Help => {
                self.overlay_max_scroll.set(usize::MAX);
                self.overlay = Some(Overlay::Help { scroll: 0 });
                vec![Action::ReloadCommands { then: None }]
            }
            SlashCommand::New => self.switch_session(None, true),
            SlashCommand::Rename => match &self.session {
                Some(s) if !arg.is_empty() => vec![Action::RenameSession {
                    session: s.clone(),
                    title: arg.to_string(),
                }],
                Some(_) => {
                    self.set_hint("usage: /rename TITLE");
                    Vec::new()
                }
                None => {
                    self.set_hint("no session open yet");
                    Vec::new()
                }
            },
            SlashCommand::Sessions if arg == "trash" => self.open_trash(),
            SlashCommand::Sessions => {
                self.overlay = Some(Overlay::Sessions { list: None, sel: 0 });
                vec![Action::ListSessions]
            }
            SlashCommand::Model => {
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
            SlashCommand::Effort => self.effort_command(arg),
            SlashCommand::Status => {
                self.overlay = Some(Overlay::Status);
                vec![Action::Status]
            }
            SlashCommand::Clear => {
                self.transcript.clear();
                self.scroll = Scroll::Follow;
                Vec::new()
            }
            SlashCommand::Continue => {
                if self.turn_state != TurnState::Paused {
                    self.set_hint("nothing to continue: no turn is paused");
                    return Vec::new();
                }
                vec![Action::ContinueTurn {
                    request_id: rid("continue"),
                }]
            }
            SlashCommand::Takeover => {
                if self.role == Some(ClientRole::Driver) {
                    self.set_hint("you already drive this session");
                    return Vec::new();
                }
                vec![Action::Takeover]
            }
            SlashCommand::Copy => self.copy(arg == "code"),
            SlashCommand::Output => {
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
            SlashCommand::Reconnect => {
                self.set_hint("reconnecting now");
                vec![Action::RetryNow]
            }
            SlashCommand::Quit => {
                self.quit = true;
                vec![Action::Quit]
            }
            SlashCommand::Rewind => self.rewind_command(arg),
            SlashCommand::Ports => vec![Action::Ports(arg.to_string())],
            SlashCommand::Memory => self.memory_command(arg),
            SlashCommand::Upload | SlashCommand::Download => vec![Action::Transfer {
                upload: cmd == SlashCommand::Upload,
                arg: arg.to_string(),
            }],
            // Re-read first (a skill may have been added), then list.
            SlashCommand::Skills if arg != "show" => vec![Action::ReloadCommands {
                then: Some("skills show".into()),
            }],
            SlashCommand::Skills => {
                self.show_skills();
                Vec::new()
            }
            SlashCommand::Mcp if !arg.trim().is_empty() => {
                let words: Vec<&str> = arg.split_whitespace().collect();
                match words.as_slice() {
                    [verb @ ("login" | "logout"), server] => {
                        let logout = *verb == "logout";
                        self.set_hint(if logout {
                            "signing out…"
                        } else {
                            "signing in…"
                        });
                        vec![Action::McpSignIn {
                            server: server.to_string(),
                            logout,
                        }]
                    }
                    _ => {
                        self.set_hint("usage: /mcp [login NAME | logout NAME]");
                        Vec::new()
                    }
                }
            }
            SlashCommand::Mcp => {
                self.overlay_max_scroll.set(usize::MAX);
                self.overlay = Some(Overlay::Mcp {
                    list: None,
                    error: None,
                    scroll: 0,
                });
                vec![Action::McpStatus]
            }
            SlashCommand::Permissions => {
                let words: Vec<&str> = arg.split_whitespace().collect();
                match words.as_slice() {
                    [] => vec![Action::Permissions { remove: None }],
                    ["remove" | "rm", n] => match n.parse::<usize>() {
                        Ok(n) if n > 0 => vec![Action::Permissions { remove: Some(n) }],
                        _ => {
                            self.set_hint("usage: /permissions remove N (N from /permissions)");
                            Vec::new()
                        }
                    },
                    _ => {
                        self.set_hint("usage: /permissions [remove N]");
                        Vec::new()
                    }
                }
            }
            SlashCommand::Hooks => {
                let words: Vec<&str> = arg.split_whitespace().collect();
                match words.as_slice() {
                    [] | ["list"] => vec![Action::Hooks {
                        trust: false,
                        path: None,
                    }],
                    ["trust"] => vec![Action::Hooks {
                        trust: true,
                        path: None,
                    }],
                    ["trust", p] => vec![Action::Hooks {
                        trust: true,
                        path: Some(p.to_string()),
                    }],
                    _ => {
                        self.set_hint("usage: /hooks [trust [PATH]]");
                        Vec::new()
                    }
                }
            }
            SlashCommand::Shell => self.shell_command(arg),
            SlashCommand::Compact => self.compact_command(arg),
            SlashCommand::Context => self.context_command(),
            SlashCommand::Plan => self.plan_command(arg),
            SlashCommand::Goal => self.goal_command(arg),
        }
    }
}
