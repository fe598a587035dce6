//! Terminal tabs: host shells (PTYs owned by the workspace daemon) shown beside the
//! conversation, through the TUI's one client link.
//!
//! Each tab keeps a laptop-side `vt100` model of its PTY's screen, fed with the output the
//! host sends (raw bytes by offset, or one screen drawing after a re-attach); the renderer
//! draws that model. In a terminal tab every key goes to the PTY as the bytes a terminal
//! would send ([`crate::tui::key_bytes`]), except Ctrl-T, which switches tabs. Closing the
//! TUI leaves the shells running; the next TUI on the workspace lists them and shows them
//! again from the host's screen state.

use std::num::NonZeroU16;

use reasonix_forward::proto::{PtyInfo, PtyNotification, PtySize};

use super::*;
use crate::tui::keybytes::{key_bytes, paste_bytes};

/// Terminal requests and traffic for the runner, which sends them in order on the link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PtyAction {
    /// List the workspace's terminals (answered with [`PtyEvent::Listed`]).
    List,
    /// Start a new shell of this size (answered with [`PtyEvent::Attached`], `opened`).
    Open {
        /// Initial size.
        size: PtySize,
    },
    /// Follow a running terminal (answered with [`PtyEvent::Attached`]).
    Attach {
        /// Terminal id.
        pty: u64,
        /// Output offset this tab already shows.
        have: Option<u64>,
        /// This tab's size.
        size: PtySize,
    },
    /// Keystrokes or a paste.
    Input {
        /// Terminal id.
        pty: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// The tab changed size.
    Resize {
        /// Terminal id.
        pty: u64,
        /// New size.
        size: PtySize,
    },
    /// End the shell.
    Close {
        /// Terminal id.
        pty: u64,
    },
}

/// What the runner reports back about terminals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PtyEvent {
    /// Answer to [`PtyAction::List`].
    Listed(Vec<PtyInfo>),
    /// Answer to [`PtyAction::Open`] (`opened`) or [`PtyAction::Attach`].
    Attached {
        /// The terminal.
        info: PtyInfo,
        /// True for a shell this client just started.
        opened: bool,
    },
    /// Output, a screen or an exit from the host.
    Notify(PtyNotification),
    /// `List` failed (asked again at the next connection).
    ListFailed(String),
    /// `Open` failed.
    OpenFailed(String),
    /// A request about a terminal failed on the host (it is gone, or refused).
    Failed {
        /// The terminal.
        pty: u64,
        /// What went wrong, as the user should read it.
        message: String,
    },
}

/// One terminal tab.
pub(crate) struct TermTab {
    /// Terminal id on the host.
    pub(crate) pty: u64,
    /// The shell program (tab label).
    pub(crate) shell: String,
    /// The local model of the PTY's screen.
    pub(crate) parser: vt100::Parser,
    /// Output offset of the next byte this tab shows (`None` before the first output).
    have: Option<u64>,
}

impl std::fmt::Debug for TermTab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TermTab")
            .field("pty", &self.pty)
            .field("shell", &self.shell)
            .field("have", &self.have)
            .finish_non_exhaustive()
    }
}

/// Most bytes of output kept for a terminal whose tab does not exist yet (its `Open`
/// answer and its first output travel on different paths to the state machine).
const ORPHAN_MAX: usize = 1024 * 1024;

/// The terminal tabs.
#[derive(Debug)]
pub(crate) struct Terms {
    pub(crate) tabs: Vec<TermTab>,
    /// Index of the tab shown; `None` is the conversation.
    pub(crate) active: Option<usize>,
    /// Size of every tab's PTY (the screen minus the tab bar and the status line).
    pub(crate) size: PtySize,
    /// The workspace's terminals were asked for (once, after the first connection).
    listed: bool,
    /// The link was replaced: re-attach every tab when connected.
    fresh_link: bool,
    /// Shells being opened by this client; the first to arrive is shown.
    opening: u32,
    /// Output for terminals without a tab yet, in arrival order.
    orphans: Vec<PtyNotification>,
}

impl Default for Terms {
    fn default() -> Self {
        Terms {
            tabs: Vec::new(),
            active: None,
            size: PtySize { cols: 80, rows: 22 },
            listed: false,
            fresh_link: false,
            opening: 0,
            orphans: Vec::new(),
        }
    }
}

fn nz(n: u16) -> NonZeroU16 {
    NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN)
}

/// Rows the tab bar and the status line take from a terminal tab.
pub(crate) const CHROME_ROWS: u16 = 2;

/// The PTY size for a screen of `cols`x`rows`.
pub(crate) fn pty_size(cols: u16, rows: u16) -> PtySize {
    PtySize {
        cols: cols.max(1),
        rows: rows.saturating_sub(CHROME_ROWS).max(1),
    }
}

impl Terms {
    fn new_tab(&self, pty: u64, shell: String) -> TermTab {
        TermTab {
            pty,
            shell,
            parser: vt100::Parser::new(nz(self.size.rows), nz(self.size.cols), 0),
            have: None,
        }
    }

    fn index(&self, pty: u64) -> Option<usize> {
        self.tabs.iter().position(|t| t.pty == pty)
    }

    /// The tab shown, if a terminal is shown.
    pub(crate) fn active_tab(&self) -> Option<&TermTab> {
        self.active.and_then(|i| self.tabs.get(i))
    }
}

/// The shell's name for the tab label (`/bin/bash` -> `bash`).
fn shell_label(shell: &str) -> String {
    shell.rsplit('/').next().unwrap_or(shell).to_string()
}

impl App {
    /// The screen is `cols`x`rows` now (at start and on every resize): every tab's PTY
    /// follows, so the shell gets SIGWINCH.
    pub fn set_screen_size(&mut self, cols: u16, rows: u16) -> Vec<Action> {
        let size = pty_size(cols, rows);
        if size == self.terms.size {
            return Vec::new();
        }
        self.terms.size = size;
        let mut out = Vec::new();
        for t in &mut self.terms.tabs {
            t.parser.screen_mut().set_size(nz(size.rows), nz(size.cols));
            out.push(Action::Pty(PtyAction::Resize { pty: t.pty, size }));
        }
        out
    }

    /// Link events the tabs care about: list the workspace's terminals after the first
    /// connection, re-attach every tab after the link was replaced.
    pub(super) fn terminal_client_event(&mut self, ev: &ClientEvent) -> Vec<Action> {
        match ev {
            ClientEvent::Connection(ConnState::Connected { .. }) => {
                if !self.terms.listed {
                    self.terms.listed = true;
                    return vec![Action::Pty(PtyAction::List)];
                }
                if std::mem::take(&mut self.terms.fresh_link) {
                    let size = self.terms.size;
                    return self
                        .terms
                        .tabs
                        .iter()
                        .map(|t| {
                            Action::Pty(PtyAction::Attach {
                                pty: t.pty,
                                have: t.have,
                                size,
                            })
                        })
                        .collect();
                }
                Vec::new()
            }
            ClientEvent::Reattached { .. } => {
                self.terms.fresh_link = true;
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// Ctrl-T: the next tab (conversation, then each terminal); opens a shell when there
    /// is none yet.
    pub(super) fn next_tab(&mut self) -> Vec<Action> {
        if self.terms.tabs.is_empty() {
            return self.open_terminal();
        }
        self.terms.active = match self.terms.active {
            None => Some(0),
            Some(i) if i + 1 < self.terms.tabs.len() => Some(i + 1),
            Some(_) => None,
        };
        Vec::new()
    }

    /// Start a new shell; its tab is shown when it arrives.
    pub(super) fn open_terminal(&mut self) -> Vec<Action> {
        self.terms.opening += 1;
        self.set_hint("starting a shell on the host…");
        vec![Action::Pty(PtyAction::Open {
            size: self.terms.size,
        })]
    }

    /// `/shell`, `/shell N`, `/shell close [N]`.
    pub(super) fn shell_command(&mut self, arg: &str) -> Vec<Action> {
        let mut words = arg.split_whitespace();
        match (words.next(), words.next()) {
            (None, _) => self.open_terminal(),
            (Some("close"), n) => {
                let pty = match n {
                    Some(n) => n.parse::<u64>().ok(),
                    None => self.terms.active_tab().map(|t| t.pty),
                };
                match pty {
                    Some(pty) if self.terms.index(pty).is_some() => {
                        self.remove_tab(pty);
                        self.set_hint(format!("terminal {pty} closed"));
                        vec![Action::Pty(PtyAction::Close { pty })]
                    }
                    _ => {
                        self.set_hint(format!(
                            "no such terminal{}; the tab bar shows their numbers (/shell close N)",
                            n.map(|n| format!(" {n}")).unwrap_or_default()
                        ));
                        Vec::new()
                    }
                }
            }
            (Some(n), _) => match n.parse::<u64>().ok().and_then(|p| self.terms.index(p)) {
                Some(i) => {
                    self.terms.active = Some(i);
                    Vec::new()
                }
                None => {
                    self.set_hint(format!(
                        "no terminal {n}: /shell opens one, /shell N shows terminal N, /shell close N ends it"
                    ));
                    Vec::new()
                }
            },
        }
    }

    fn remove_tab(&mut self, pty: u64) {
        let Some(i) = self.terms.index(pty) else {
            return;
        };
        self.terms.tabs.remove(i);
        // The conversation is shown after the tab that was shown goes away.
        self.terms.active = match self.terms.active {
            Some(a) if a == i => None,
            Some(a) if a > i => Some(a - 1),
            other => other,
        };
    }

    /// A key while a terminal tab is shown: Ctrl-T switches, everything else goes to the
    /// PTY. `None` when no terminal is shown (or for Ctrl-T, which works everywhere).
    pub(super) fn terminal_key(&mut self, key: &KeyEvent) -> Option<Vec<Action>> {
        if key.code == KeyCode::Char('t') && key.modifiers == KeyModifiers::CONTROL {
            return Some(self.next_tab());
        }
        let tab = self.terms.active_tab()?;
        let pty = tab.pty;
        let app_cursor = tab.parser.screen().application_cursor();
        Some(match key_bytes(key, app_cursor) {
            Some(data) => vec![Action::Pty(PtyAction::Input { pty, data })],
            None => Vec::new(),
        })
    }

    /// `@term:N` completion candidates for the text after `@`.
    pub(super) fn term_completions(&self, partial: &str) -> Vec<super::completion::CompItem> {
        self.terms
            .tabs
            .iter()
            .map(|t| (format!("term:{}", t.pty), &t.shell))
            .filter(|(label, _)| label.starts_with(partial))
            .map(|(label, shell)| super::completion::CompItem {
                label,
                detail: format!("terminal screen ({shell})"),
                is_dir: false,
            })
            .collect()
    }

    /// A paste while a terminal tab is shown.
    pub(super) fn terminal_paste(&mut self, text: &str) -> Option<Vec<Action>> {
        let tab = self.terms.active_tab()?;
        let data = paste_bytes(text, tab.parser.screen().bracketed_paste());
        Some(vec![Action::Pty(PtyAction::Input { pty: tab.pty, data })])
    }

    /// Answers and traffic about terminals.
    pub(super) fn pty_event(&mut self, ev: PtyEvent) -> Vec<Action> {
        match ev {
            PtyEvent::Listed(ptys) => {
                let size = self.terms.size;
                let mut out = Vec::new();
                for p in ptys.into_iter().filter(|p| p.exited.is_none()) {
                    if self.terms.index(p.id).is_none() {
                        let tab = self.terms.new_tab(p.id, shell_label(&p.shell));
                        self.terms.tabs.push(tab);
                    }
                    // No offset: the host sends its current screen, not a replay.
                    out.push(Action::Pty(PtyAction::Attach {
                        pty: p.id,
                        have: None,
                        size,
                    }));
                }
                if !out.is_empty() {
                    self.set_hint(format!(
                        "{} terminal{} of this workspace still running: Ctrl-T shows {}",
                        out.len(),
                        if out.len() == 1 { "" } else { "s" },
                        if out.len() == 1 { "it" } else { "them" }
                    ));
                }
                self.replay_orphans();
                out
            }
            PtyEvent::Attached { info, opened } => {
                let i = match self.terms.index(info.id) {
                    Some(i) => i,
                    None => {
                        let tab = self.terms.new_tab(info.id, shell_label(&info.shell));
                        self.terms.tabs.push(tab);
                        self.terms.tabs.len() - 1
                    }
                };
                if opened && self.terms.opening > 0 {
                    self.terms.opening -= 1;
                    self.terms.active = Some(i);
                    self.hint = None;
                }
                self.replay_orphans();
                Vec::new()
            }
            PtyEvent::Notify(n) => self.pty_notification(n),
            PtyEvent::ListFailed(message) => {
                self.terms.listed = false;
                tracing::warn!("could not list the workspace's terminals: {message}");
                Vec::new()
            }
            PtyEvent::OpenFailed(message) => {
                self.terms.opening = self.terms.opening.saturating_sub(1);
                self.transcript
                    .notice(format!("cannot open a terminal: {message}"), Level::Error);
                self.set_hint(format!("cannot open a terminal: {message}"));
                Vec::new()
            }
            PtyEvent::Failed { pty, message } => {
                // The host no longer has it (or refuses it): the tab cannot show anything.
                self.remove_tab(pty);
                self.transcript
                    .notice(format!("terminal {pty}: {message}"), Level::Error);
                self.set_hint(format!("terminal {pty}: {message}"));
                Vec::new()
            }
        }
    }

    fn replay_orphans(&mut self) {
        let orphans = std::mem::take(&mut self.terms.orphans);
        for n in orphans {
            // Output of a terminal whose tab is still on its way goes back to the orphans.
            let _ = self.pty_notification(n);
        }
    }

    fn pty_notification(&mut self, n: PtyNotification) -> Vec<Action> {
        let pty = match &n {
            PtyNotification::Output { pty, .. }
            | PtyNotification::Screen { pty, .. }
            | PtyNotification::Exited { pty, .. }
            | PtyNotification::Input { pty, .. }
            | PtyNotification::Resize { pty, .. } => *pty,
        };
        let Some(i) = self.terms.index(pty) else {
            let held: usize = self
                .terms
                .orphans
                .iter()
                .map(|o| match o {
                    PtyNotification::Output { data, .. } => data.0.len(),
                    _ => 0,
                })
                .sum();
            if held < ORPHAN_MAX {
                self.terms.orphans.push(n);
            }
            return Vec::new();
        };
        let size = self.terms.size;
        match n {
            PtyNotification::Output { offset, data, .. } => {
                let tab = &mut self.terms.tabs[i];
                let at = tab.have.unwrap_or(offset);
                if offset > at {
                    // A gap can only follow a replaced link: ask for what is missing.
                    return vec![Action::Pty(PtyAction::Attach {
                        pty,
                        have: Some(at),
                        size,
                    })];
                }
                let end = offset + data.0.len() as u64;
                if end > at {
                    tab.parser.process(&data.0[(at - offset) as usize..]);
                    tab.have = Some(end);
                }
                Vec::new()
            }
            PtyNotification::Screen {
                offset,
                size: drawn,
                data,
                ..
            } => {
                let tab = &mut self.terms.tabs[i];
                tab.parser = vt100::Parser::new(nz(drawn.rows), nz(drawn.cols), 0);
                tab.parser.process(&data.0);
                tab.have = Some(offset);
                if drawn != size {
                    tab.parser
                        .screen_mut()
                        .set_size(nz(size.rows), nz(size.cols));
                    return vec![Action::Pty(PtyAction::Resize { pty, size })];
                }
                Vec::new()
            }
            PtyNotification::Exited { status, .. } => {
                self.remove_tab(pty);
                self.set_hint(format!("terminal {pty} ended ({status})"));
                Vec::new()
            }
            PtyNotification::Input { .. } | PtyNotification::Resize { .. } => Vec::new(),
        }
    }
}
