//! Steering a running turn, `!` shell lines and prompt-history search (Ctrl-R) in the
//! composer.
//!
//! - Enter while a turn runs sends a steer (the host gives it to the model before its next
//!   step); Tab queues the text for after the turn instead (the former Enter behaviour).
//! - `!command` runs the command on the host and adds its output to the next message's
//!   context; `!!command` runs it without sharing the output with the model.
//! - Ctrl-R searches the workspace's prompt history (shared by every client of the host).

use super::*;

/// Reverse search through the prompt history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HistorySearch {
    /// What the user typed.
    pub(crate) query: String,
    /// Index of the entry shown (`None`: no match).
    pub(crate) hit: Option<usize>,
    /// The composer text before the search (restored by Esc).
    pub(crate) draft: String,
}

impl App {
    /// The line above the composer: the keys that matter now.
    pub(crate) fn composer_hint(&self) -> String {
        if let Some(s) = &self.search {
            let state = if s.hit.is_some() || s.query.is_empty() {
                ""
            } else {
                " (no match)"
            };
            return format!(" search: {}{state} · Ctrl-R older · Esc cancel ", s.query);
        }
        if self.turn_busy() && self.role != Some(ClientRole::Spectator) {
            return " Enter steer · Tab queue · Esc cancel ".into();
        }
        " Enter send · Shift+Enter newline · /help ".into()
    }

    /// Enter while a turn runs: steer it.
    pub(super) fn steer(&mut self, text: String) -> Vec<Action> {
        self.scroll = Scroll::Follow;
        self.set_hint("steer sent: the model gets it before its next step");
        vec![Action::Steer {
            request_id: rid("steer"),
            text,
        }]
    }

    /// The host had no running turn for a steer (it ended meanwhile): send it as a message.
    pub(crate) fn steer_refused(&mut self, text: String) -> Vec<Action> {
        if self.turn_busy() || self.sending.is_some() {
            return self.queue(text);
        }
        self.set_hint("the turn had ended: the steer was sent as a new message");
        self.submit(text)
    }

    /// Queue `text` for when the current turn finishes.
    pub(super) fn queue(&mut self, text: String) -> Vec<Action> {
        let q = match self.queued.take() {
            Some(prev) => format!("{prev}\n\n{text}"),
            None => text,
        };
        self.queued = Some(q);
        self.set_hint("queued: sent when the current turn finishes");
        Vec::new()
    }

    /// Tab with text while a turn runs: queue it for after the turn.
    pub(super) fn queue_composer(&mut self) -> Vec<Action> {
        let text = self.composer.expanded().trim_end().to_string();
        if text.trim().is_empty() || text.starts_with('/') || text.starts_with('!') {
            return Vec::new();
        }
        self.composer.take();
        self.completion = None;
        let mut out = vec![Action::HistoryAppend { text: text.clone() }];
        out.extend(self.queue(text));
        out
    }

    /// A `!` line: `!cmd` shares the output with the model, `!!cmd` does not.
    pub(super) fn shell_line(&mut self, line: &str) -> Vec<Action> {
        let (command, add_to_context) = match line.strip_prefix("!!") {
            Some(rest) => (rest.trim(), false),
            None => (line.trim_start_matches('!').trim(), true),
        };
        if command.is_empty() {
            self.set_hint("type a command after ! (!! keeps its output from the model)");
            return Vec::new();
        }
        if self.turn_busy() {
            self.set_hint("a turn is running: ! commands run between turns");
            self.composer.set(line);
            return Vec::new();
        }
        self.scroll = Scroll::Follow;
        let request_id = rid("shell");
        self.transcript
            .expect_shell(&request_id, command, add_to_context);
        vec![Action::Shell {
            request_id,
            command: command.to_string(),
            add_to_context,
        }]
    }

    /// Ctrl-R: start a history search, or step to an older match.
    pub(super) fn search_older(&mut self) {
        let s = match self.search.take() {
            Some(mut s) => {
                if let Some((i, text)) = self.composer.search_back(&s.query, s.hit) {
                    s.hit = Some(i);
                    let text = text.to_string();
                    self.composer.set(&text);
                }
                s
            }
            None => HistorySearch {
                query: String::new(),
                hit: None,
                draft: self.composer.text().to_string(),
            },
        };
        self.search = Some(s);
    }

    /// A key while searching; `None` hands the key on to the composer after the search
    /// ended with the shown entry taken.
    pub(super) fn search_key(&mut self, key: KeyEvent) -> Option<Vec<Action>> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let s = self.search.as_mut()?;
        match key.code {
            KeyCode::Char('r') if ctrl => {
                self.search_older();
                Some(Vec::new())
            }
            code if code == KeyCode::Esc || (ctrl && code == KeyCode::Char('g')) => {
                let draft = std::mem::take(&mut s.draft);
                self.search = None;
                self.composer.set(&draft);
                Some(Vec::new())
            }
            KeyCode::Char(c) if !ctrl => {
                s.query.push(c);
                self.research();
                Some(Vec::new())
            }
            KeyCode::Backspace => {
                s.query.pop();
                self.research();
                Some(Vec::new())
            }
            KeyCode::Enter => {
                // Take the entry into the composer for editing; a second Enter sends it.
                self.search = None;
                Some(Vec::new())
            }
            _ => {
                self.search = None;
                None
            }
        }
    }

    /// The query changed: show its newest match.
    fn research(&mut self) {
        let Some(s) = self.search.as_mut() else {
            return;
        };
        match self.composer.search_back(&s.query, None) {
            Some((i, text)) => {
                s.hit = Some(i);
                let text = text.to_string();
                self.composer.set(&text);
            }
            None => s.hit = None,
        }
    }
}
