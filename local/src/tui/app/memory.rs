//! Memory in the workbench (#32): `/memory …`, a `# note` typed in the composer (a modal
//! asks its scope and type before anything is written), and the confirmation before facts
//! are forgotten (`/memory forget ID`, and after a rewind of turns that remembered facts).

use reasonix_forward::memory::secret::find_secret;
use reasonix_forward::memory::{FactType, Scope};

use super::*;

/// What the runner does about memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryAction {
    /// `/memory ARG` (list, search, show, pin, unpin, restore).
    Command(String),
    /// Save a note the user confirmed.
    Note {
        /// The fact.
        text: String,
        /// Where it goes.
        scope: Scope,
        /// What it is.
        kind: FactType,
    },
    /// Archive these facts (the user confirmed).
    Forget(Vec<String>),
}

/// A memory write waiting for the user's answer in a modal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MemoryAsk {
    /// `# note`: Tab switches the scope, `t` the type, Enter saves.
    Note {
        text: String,
        scope: Scope,
        kind: FactType,
    },
    /// Forget these facts? `why` says where they come from.
    Forget { ids: Vec<String>, why: String },
}

const KINDS: [FactType; 4] = [
    FactType::Project,
    FactType::User,
    FactType::Feedback,
    FactType::Reference,
];

impl App {
    /// `/memory ARG`; `forget` asks first.
    pub(super) fn memory_command(&mut self, arg: &str) -> Vec<Action> {
        let words: Vec<&str> = arg.split_whitespace().collect();
        if let ["forget" | "rm", ids @ ..] = words.as_slice() {
            if ids.is_empty() {
                self.set_hint("usage: /memory forget ID [ID…]");
                return Vec::new();
            }
            self.overlay = Some(Overlay::Memory(MemoryAsk::Forget {
                ids: ids.iter().map(|s| s.to_string()).collect(),
                why: "you asked to forget".into(),
            }));
            return Vec::new();
        }
        if let ["edit", rest @ ..] = words.as_slice() {
            return match rest {
                [id] => {
                    self.set_hint("editing in $EDITOR…");
                    vec![Action::MemoryEdit { id: id.to_string() }]
                }
                _ => {
                    self.set_hint("usage: /memory edit ID");
                    Vec::new()
                }
            };
        }
        vec![Action::Memory(MemoryAction::Command(arg.to_string()))]
    }

    /// A composer line `# text`: ask where to remember it. A secret-looking note is refused
    /// here, before it is shown or sent anywhere.
    pub(super) fn note_line(&mut self, text: &str) -> Vec<Action> {
        let body = text.trim_start_matches('#').trim();
        if body.is_empty() {
            self.set_hint("# note: type the fact after `# `");
            return Vec::new();
        }
        self.composer.take();
        self.completion = None;
        if let Some(found) = find_secret(body) {
            self.transcript.notice(
                format!("not remembered: the note contains what looks like {found}; secrets are never stored in memory"),
                Level::Warn,
            );
            return Vec::new();
        }
        self.overlay = Some(Overlay::Memory(MemoryAsk::Note {
            text: body.to_string(),
            scope: Scope::Project,
            kind: FactType::Project,
        }));
        Vec::new()
    }

    /// Keys in the memory modal (Esc/q close it without writing: handled before).
    pub(super) fn memory_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let Some(Overlay::Memory(ask)) = self.overlay.as_mut() else {
            return Vec::new();
        };
        match ask {
            MemoryAsk::Note { text, scope, kind } => match key.code {
                KeyCode::Tab | KeyCode::Left | KeyCode::Right => {
                    *scope = match scope {
                        Scope::Project => Scope::Global,
                        Scope::Global => Scope::Project,
                    };
                    Vec::new()
                }
                KeyCode::Char('p') => {
                    *scope = Scope::Project;
                    Vec::new()
                }
                KeyCode::Char('g') => {
                    *scope = Scope::Global;
                    Vec::new()
                }
                KeyCode::Char('t') | KeyCode::Up | KeyCode::Down => {
                    let i = KINDS.iter().position(|k| k == kind).unwrap_or(0);
                    *kind = KINDS[(i + 1) % KINDS.len()];
                    Vec::new()
                }
                KeyCode::Enter | KeyCode::Char('y') => {
                    let action = MemoryAction::Note {
                        text: text.clone(),
                        scope: *scope,
                        kind: *kind,
                    };
                    self.overlay = None;
                    self.set_hint("remembering…");
                    vec![Action::Memory(action)]
                }
                KeyCode::Char('n') => {
                    self.overlay = None;
                    self.set_hint("not remembered");
                    Vec::new()
                }
                _ => Vec::new(),
            },
            MemoryAsk::Forget { ids, .. } => match key.code {
                KeyCode::Enter | KeyCode::Char('y') => {
                    let ids = std::mem::take(ids);
                    self.overlay = None;
                    vec![Action::Memory(MemoryAction::Forget(ids))]
                }
                KeyCode::Char('n') => {
                    self.overlay = None;
                    self.set_hint("nothing forgotten");
                    Vec::new()
                }
                _ => Vec::new(),
            },
        }
    }

    /// After a rewind: offer to forget the facts the rewound turns remembered.
    pub(super) fn offer_forget_after_rewind(&mut self) {
        let ids = std::mem::take(&mut self.rewind_remembered);
        if ids.is_empty() {
            return;
        }
        self.overlay = Some(Overlay::Memory(MemoryAsk::Forget {
            ids,
            why: "the rewound turns remembered them".into(),
        }));
    }
}
