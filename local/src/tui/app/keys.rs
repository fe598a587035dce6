//! Input: keys per mode (prompt, approval, overlay, composer), paste and mouse.

use super::*;

/// Key help: key, what it does. Rendered by `/help`.
pub(crate) const KEYS: &[(&str, &str)] = &[
    (
        "Enter",
        "send the message; while a turn runs: steer it (the model reads it before its next step)",
    ),
    ("Tab (turn running)", "queue the message for after the turn"),
    ("Shift+Enter, Alt+Enter, Ctrl-J", "new line"),
    (
        "Up / Down",
        "previous / next line, then prompt history (shared by the workspace)",
    ),
    ("Ctrl-R", "search the prompt history (again: older match)"),
    (
        "!cmd / !!cmd",
        "run cmd on the host (!! keeps the output from the model)",
    ),
    (
        "# note",
        "remember a note (asks project or global, and its type; /memory lists them)",
    ),
    ("Tab", "complete a /command or @path"),
    (
        "Shift+Tab",
        "mode: ask → auto → plan (plan: nothing changes until you approve a plan)",
    ),
    (
        "@path",
        "attach a workspace file (Tab lists one folder level)",
    ),
    ("Esc", "close a popup or overlay; cancel the running turn"),
    (
        "Ctrl-C",
        "cancel the running turn / clear input; twice quits",
    ),
    ("Ctrl-D", "quit (when the input is empty)"),
    ("PgUp / PgDn, wheel", "scroll the transcript"),
    ("Home / End", "top / bottom of the transcript (input empty)"),
    ("Ctrl-Home / Ctrl-End", "top / bottom of the transcript"),
    ("Ctrl-O", "show / hide reasoning"),
    (
        "Ctrl-G",
        "subagents: a child's transcript (Tab next child, x cancel it, Esc close)",
    ),
    ("Ctrl-Y", "copy the last answer to the clipboard (OSC 52)"),
    ("Ctrl-L", "redraw the screen"),
    (
        "Ctrl-T",
        "next tab: conversation, then each host terminal (opens one if none)",
    ),
    (
        "@term:N",
        "attach terminal N's current screen to the message",
    ),
    (
        "@server:uri",
        "attach an MCP server's resource (Tab lists the server's resources)",
    ),
    ("F5", "reconnect now"),
    (
        "Ctrl-X",
        "expand a collapsed paste (over 50 lines or 8 KiB) in the input",
    ),
    ("Ctrl-A / Ctrl-E", "start / end of line"),
    ("Ctrl-U / Ctrl-K", "delete to start / end of line"),
    ("Ctrl-W, Alt-Backspace", "delete the previous word"),
    ("Alt-Left / Alt-Right", "move by word"),
    (
        "Shift+drag",
        "select text with the mouse (the wheel scrolls)",
    ),
    (
        "1 y / 2 s / 3 a / 4 n",
        "approval: once / session / always here / deny / always everywhere",
    ),
];

impl App {
    /// Handle a bracketed paste.
    pub fn handle_paste(&mut self, text: &str) -> Vec<Action> {
        if let Some(p) = self.prompts.front_mut() {
            match p {
                PromptModal::Secret { input, .. }
                | PromptModal::Keyboard { input, .. }
                | PromptModal::Elicit { input, .. } => {
                    input.push_str(text.trim_end_matches(['\r', '\n']));
                }
                PromptModal::HostKey { .. }
                | PromptModal::Upgrade { .. }
                | PromptModal::AgentSign { .. } => {}
            }
            return Vec::new();
        }
        if let Some(actions) = self.terminal_paste(text) {
            return actions;
        }
        if self.modal_open() {
            return Vec::new();
        }
        // A laptop file path pasted (or dropped) into an empty input: offer its upload.
        if self.composer.is_empty() {
            if let Some(path) = crate::copy::pasted_path(text) {
                let line = format!(
                    "/upload {}",
                    crate::copy::quote(&path.display().to_string())
                );
                self.composer.set(&line);
                self.set_hint("a laptop file: Enter uploads it into the workspace; edit the line to send something else");
                return self.refresh_completion();
            }
        }
        self.composer.paste(text);
        if self.composer.has_collapsed() {
            self.set_hint("pasted text collapsed; Ctrl-X expands it (the full text is sent)");
        }
        self.refresh_completion()
    }

    /// Handle the mouse (wheel scrolling).
    pub fn handle_mouse(&mut self, ev: MouseEvent) -> Vec<Action> {
        if self.terms.active_tab().is_some() {
            // Mouse reporting to the PTY is not built; the hidden transcript stays put.
            return Vec::new();
        }
        match ev.kind {
            MouseEventKind::ScrollUp => self.scroll_by(-3),
            MouseEventKind::ScrollDown => self.scroll_by(3),
            _ => {}
        }
        Vec::new()
    }

    pub(super) fn scroll_by(&mut self, rows: isize) {
        let (w, h) = self.view.get();
        let ctx = self.layout_ctx(w as usize);
        self.scroll = if rows < 0 {
            self.transcript
                .scroll_up(&ctx, h as usize, self.scroll, rows.unsigned_abs())
        } else {
            self.transcript
                .scroll_down(&ctx, h as usize, self.scroll, rows as usize)
        };
    }

    /// Handle a key press.
    pub fn handle_key(&mut self, key: KeyEvent) -> Vec<Action> {
        if key.kind == KeyEventKind::Release {
            return Vec::new();
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if !self.prompts.is_empty() {
            return self.prompt_key(key);
        }
        if let ConnView::Failed { can_create, .. } = &self.conn {
            return self.fatal_key(key, *can_create);
        }
        if let Some(actions) = self.terminal_key(&key) {
            return actions;
        }
        if ctrl && key.code == KeyCode::Char('c') {
            return self.ctrl_c();
        }
        let max_scroll = self.overlay_max_scroll.get();
        if let Some(Overlay::Help { scroll } | Overlay::Mcp { scroll, .. }) = self.overlay.as_mut()
        {
            match key.code {
                KeyCode::PageUp => {
                    *scroll = (*scroll).min(max_scroll).saturating_sub(10);
                    return Vec::new();
                }
                KeyCode::PageDown => {
                    *scroll = (*scroll + 10).min(max_scroll);
                    return Vec::new();
                }
                _ => {}
            }
        }
        // Transcript and global keys that work under overlays too.
        let (_, h) = self.view.get();
        let page = (h as isize - 2).max(1);
        match key.code {
            KeyCode::PageUp => {
                self.scroll_by(-page);
                return Vec::new();
            }
            KeyCode::PageDown => {
                self.scroll_by(page);
                return Vec::new();
            }
            KeyCode::Home if ctrl || (self.composer.is_empty() && !self.modal_open()) => {
                self.scroll = Scroll::Anchor { entry: 0, line: 0 };
                return Vec::new();
            }
            KeyCode::End if ctrl || (self.composer.is_empty() && !self.modal_open()) => {
                self.scroll = Scroll::Follow;
                return Vec::new();
            }
            KeyCode::F(5) => {
                self.set_hint("reconnecting now");
                return vec![Action::RetryNow];
            }
            KeyCode::Char('o') if ctrl => {
                self.show_reasoning = !self.show_reasoning;
                return Vec::new();
            }
            KeyCode::Char('g') if ctrl => return self.open_child_view(),
            KeyCode::Char('y') if ctrl => return self.copy(false),
            _ => {}
        }
        if self.active_approval().is_some() {
            return self.approval_key(key);
        }
        if self.plan_card().is_some() {
            return self.plan_card_key(key);
        }
        if self.overlay.is_some() {
            return self.overlay_key(key);
        }
        if self.progress.active {
            return Vec::new();
        }
        if key.code == KeyCode::BackTab && self.completion.is_none() {
            return self.cycle_mode();
        }
        self.composer_key(key)
    }

    /// A Ctrl-C (or Ctrl-Break) the laptop's console delivered as a console event instead of
    /// a key ([`crate::platform::signals::ConsoleInterrupts`]: wine's console on a Unix
    /// terminal, Ctrl-Break on any Windows console): handled exactly as the Ctrl-C key, so a
    /// terminal tab sends `0x03` to the host's shell and everywhere else it is the workbench's
    /// Ctrl-C (cancel the turn, clear the input; twice quits).
    pub fn console_interrupt(&mut self) -> Vec<Action> {
        self.handle_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL))
    }

    pub(super) fn ctrl_c(&mut self) -> Vec<Action> {
        let now = self.mono_ms;
        let double = self.last_ctrl_c.map(|t| now - t <= 2000).unwrap_or(false);
        self.last_ctrl_c = Some(now);
        if double {
            self.quit = true;
            return vec![Action::Quit];
        }
        if self.completion.is_some() {
            self.dismiss_completion();
            self.set_hint("Ctrl-C again to quit");
            return Vec::new();
        }
        if self.overlay.is_some() {
            self.overlay = None;
            self.set_hint("Ctrl-C again to quit");
            return Vec::new();
        }
        if self.turn_busy() && self.role != Some(ClientRole::Spectator) {
            self.set_hint("cancelling the turn… (Ctrl-C again to quit)");
            return vec![Action::Cancel {
                request_id: rid("cancel"),
            }];
        }
        if !self.composer.is_empty() {
            self.composer.clear();
            self.set_hint("input cleared (Ctrl-C again to quit)");
            return Vec::new();
        }
        self.set_hint("press Ctrl-C again to quit");
        Vec::new()
    }

    /// The fatal-error modal: nothing else takes keys. A missing workspace: y creates it and
    /// connects again, n (or Esc) quits; otherwise Enter, Esc, q or Ctrl-C dismiss it and quit.
    fn fatal_key(&mut self, key: KeyEvent, can_create: bool) -> Vec<Action> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('y') | KeyCode::Char('Y') if can_create && !ctrl => {
                self.conn = ConnView::Connecting;
                self.transcript.notice(
                    "creating the workspace folder and connecting again",
                    Level::Info,
                );
                vec![Action::CreateWorkspace]
            }
            KeyCode::Char('n') | KeyCode::Char('N') if can_create && !ctrl => vec![Action::Quit],
            KeyCode::Enter | KeyCode::Esc | KeyCode::Char('q') if !can_create && !ctrl => {
                vec![Action::Quit]
            }
            KeyCode::Esc => vec![Action::Quit],
            KeyCode::Char('c') | KeyCode::Char('d') if ctrl => vec![Action::Quit],
            _ => Vec::new(),
        }
    }

    pub(super) fn prompt_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        // Esc or Ctrl-C answers a text prompt with "no answer".
        let cancel = key.code == KeyCode::Esc || (ctrl && key.code == KeyCode::Char('c'));
        let Some(p) = self.prompts.front_mut() else {
            return Vec::new();
        };
        let mut done = false;
        let mut actions = Vec::new();
        match p {
            PromptModal::Elicit {
                elicitation_id,
                form,
                input,
                error,
                ..
            } => {
                let answer = |action, content| Action::AnswerElicitation {
                    request_id: rid("elicit"),
                    elicitation_id: elicitation_id.clone(),
                    action,
                    content,
                };
                if cancel {
                    actions.push(answer(reasonix_forward::proto::ElicitAction::Decline, None));
                    done = true;
                } else if key.code == KeyCode::Enter {
                    match form.answer(&std::mem::take(&mut **input)) {
                        Ok(()) => *error = None,
                        Err(why) => *error = Some(why),
                    }
                    if form.current().is_none() {
                        let content = form.take();
                        actions.push(answer(
                            reasonix_forward::proto::ElicitAction::Accept,
                            Some(content),
                        ));
                        done = true;
                    }
                } else {
                    edit_line(input, key.code, ctrl);
                }
            }
            PromptModal::HostKey { question, reply } => {
                let can_accept = question.status == HostKeyStatus::Unknown && reply.is_some();
                let answer = match key.code {
                    KeyCode::Char('y') | KeyCode::Char('1') if can_accept => {
                        Some(HostKeyAnswer::AcceptAndSave)
                    }
                    KeyCode::Char('o') | KeyCode::Char('2') if can_accept => {
                        Some(HostKeyAnswer::AcceptOnce)
                    }
                    KeyCode::Char('n') | KeyCode::Char('3') | KeyCode::Esc => {
                        Some(HostKeyAnswer::Reject)
                    }
                    KeyCode::Char('c') if ctrl => Some(HostKeyAnswer::Reject),
                    KeyCode::Enter if !can_accept => Some(HostKeyAnswer::Reject),
                    _ => None,
                };
                if let Some(a) = answer {
                    if let Some(r) = reply.take() {
                        let _ = r.send(a);
                    }
                    done = true;
                }
            }
            PromptModal::Secret { input, reply, .. } => {
                if cancel {
                    answer_none(reply);
                    done = true;
                } else if key.code == KeyCode::Enter {
                    if let Some(r) = reply.take() {
                        let _ = r.send(Some(Zeroizing::new(std::mem::take(&mut **input))));
                    }
                    done = true;
                } else {
                    edit_line(input, key.code, ctrl);
                }
            }
            PromptModal::Keyboard {
                round,
                answers,
                input,
                reply,
            } => {
                if cancel {
                    answer_none(reply);
                    done = true;
                } else if key.code == KeyCode::Enter {
                    answers.push(Zeroizing::new(std::mem::take(&mut **input)));
                    if answers.len() >= round.prompts.len() {
                        if let Some(r) = reply.take() {
                            let _ = r.send(Some(std::mem::take(answers)));
                        }
                        done = true;
                    }
                } else {
                    edit_line(input, key.code, ctrl);
                }
            }
            PromptModal::AgentSign { ask } => {
                let answer = match key.code {
                    KeyCode::Char('1') | KeyCode::Char('y') => Some(true),
                    KeyCode::Char('2') | KeyCode::Char('n') | KeyCode::Esc => Some(false),
                    KeyCode::Char('c') if ctrl => Some(false),
                    _ => None,
                };
                if let Some(allow) = answer {
                    ask.answer.answer(allow);
                    done = true;
                }
            }
            PromptModal::Upgrade { reply, .. } => {
                let answer = match key.code {
                    KeyCode::Char('1') | KeyCode::Char('u') => Some(UpgradeAnswer::UpgradeNow),
                    KeyCode::Char('2') | KeyCode::Char('r') => Some(UpgradeAnswer::AttachReadOnly),
                    KeyCode::Char('3') | KeyCode::Char('w') => Some(UpgradeAnswer::Wait),
                    KeyCode::Char('q') | KeyCode::Esc => Some(UpgradeAnswer::Refuse),
                    KeyCode::Char('c') if ctrl => Some(UpgradeAnswer::Refuse),
                    _ => None,
                };
                if let Some(a) = answer {
                    if let Some(r) = reply.take() {
                        let _ = r.send(a);
                    }
                    done = true;
                }
            }
        }
        if done {
            self.prompts.pop_front();
        }
        actions
    }

    pub(super) fn approval_key(&mut self, key: KeyEvent) -> Vec<Action> {
        // The last row, "always allow everywhere", is the global scope: a separate, explicit
        // choice after the workspace-scoped "always" (#15).
        const ORDER: [(ApprovalDecision, bool); 5] = [
            (ApprovalDecision::AllowOnce, false),
            (ApprovalDecision::AllowSession, false),
            (ApprovalDecision::AllowAlways, false),
            (ApprovalDecision::Deny, false),
            (ApprovalDecision::AllowAlways, true),
        ];
        let decision = match key.code {
            KeyCode::Char('1') | KeyCode::Char('y') => Some(ORDER[0]),
            KeyCode::Char('2') | KeyCode::Char('s') => Some(ORDER[1]),
            KeyCode::Char('3') | KeyCode::Char('a') => Some(ORDER[2]),
            KeyCode::Char('4') | KeyCode::Char('n') => Some(ORDER[3]),
            KeyCode::Char('5') | KeyCode::Char('g') => Some(ORDER[4]),
            KeyCode::Up => {
                self.approval_sel = self.approval_sel.saturating_sub(1);
                None
            }
            KeyCode::Down | KeyCode::Tab => {
                self.approval_sel = (self.approval_sel + 1).min(ORDER.len() - 1);
                None
            }
            KeyCode::Enter => ORDER.get(self.approval_sel).copied(),
            _ => None,
        };
        let Some((decision, everywhere)) = decision else {
            return Vec::new();
        };
        let Some(a) = self.approvals.pop_front() else {
            return Vec::new();
        };
        self.answered.insert(a.approval_id.clone());
        self.approval_sel = 0;
        vec![Action::Approve {
            request_id: rid("approve"),
            approval_id: a.approval_id,
            decision,
            everywhere,
        }]
    }

    pub(super) fn overlay_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let max_scroll = self.overlay_max_scroll.get();
        let Some(ov) = self.overlay.as_mut() else {
            return Vec::new();
        };
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => {
                self.overlay = None;
                return Vec::new();
            }
            _ => {}
        }
        match ov {
            Overlay::Memory(_) => self.memory_key(key),
            Overlay::Child { .. } => self.child_key(key),
            Overlay::Help { scroll } => {
                match key.code {
                    KeyCode::Up | KeyCode::Char('k') => {
                        *scroll = (*scroll).min(max_scroll).saturating_sub(1)
                    }
                    KeyCode::Down | KeyCode::Char('j') => *scroll = (*scroll + 1).min(max_scroll),
                    KeyCode::Enter => self.overlay = None,
                    _ => {}
                }
                Vec::new()
            }
            Overlay::Context { .. } => {
                match key.code {
                    KeyCode::Enter => self.overlay = None,
                    KeyCode::Char('r') => return self.context_command(),
                    _ => {}
                }
                Vec::new()
            }
            Overlay::ConfirmSend { .. } => {
                if matches!(key.code, KeyCode::Enter | KeyCode::Char('y')) {
                    self.overlay = None;
                    self.big_confirmed = true;
                    return self.send();
                }
                if key.code == KeyCode::Char('n') {
                    self.overlay = None;
                }
                Vec::new()
            }
            Overlay::Status => {
                if key.code == KeyCode::Enter {
                    self.overlay = None;
                }
                Vec::new()
            }
            Overlay::Mcp { scroll, .. } => {
                match key.code {
                    KeyCode::Up | KeyCode::Char('k') => {
                        *scroll = (*scroll).min(max_scroll).saturating_sub(1)
                    }
                    KeyCode::Down | KeyCode::Char('j') => *scroll = (*scroll + 1).min(max_scroll),
                    KeyCode::Enter => self.overlay = None,
                    KeyCode::Char('r') => {
                        self.overlay_max_scroll.set(usize::MAX);
                        self.overlay = Some(Overlay::Mcp {
                            list: None,
                            error: None,
                            scroll: 0,
                        });
                        return vec![Action::McpStatus];
                    }
                    _ => {}
                }
                Vec::new()
            }
            Overlay::Sessions { list, sel } => {
                let n = list.as_ref().map(Vec::len).unwrap_or(0);
                match key.code {
                    KeyCode::Up => *sel = sel.saturating_sub(1),
                    KeyCode::Down => *sel = (*sel + 1).min(n.saturating_sub(1)),
                    KeyCode::Enter => {
                        let id = list
                            .as_ref()
                            .and_then(|l| l.get(*sel))
                            .map(|s| s.id.clone());
                        self.overlay = None;
                        if let Some(id) = id {
                            return self.switch_session(Some(id), false);
                        }
                    }
                    // Delete (to the host's trash). The open session is refused here: the
                    // host would refuse it too (a client has it open).
                    KeyCode::Delete | KeyCode::Char('d') => {
                        let id = list
                            .as_ref()
                            .and_then(|l| l.get(*sel))
                            .map(|s| s.id.clone());
                        if let Some(id) = id {
                            if self.session.as_deref() == Some(id.as_str()) {
                                self.set_hint(
                                    "this is the open session: switch to another one first, then delete it",
                                );
                            } else {
                                return vec![Action::DeleteSession { session: id }];
                            }
                        }
                    }
                    KeyCode::Char('r') => {
                        self.overlay = None;
                        self.composer.take();
                        self.composer.replace_range(0..0, "/rename ");
                        self.set_hint("/rename TITLE renames the open session");
                    }
                    KeyCode::Char('t') => return self.open_trash(),
                    _ => {}
                }
                Vec::new()
            }
            Overlay::Trash { list, sel, confirm } => {
                let n = list.as_ref().map(Vec::len).unwrap_or(0);
                let id = list
                    .as_ref()
                    .and_then(|l| l.get(*sel))
                    .map(|t| t.info.id.clone());
                if *confirm {
                    // Purge asks first: `y` purges, any other key keeps the session.
                    *confirm = false;
                    if let (KeyCode::Char('y'), Some(session)) = (key.code, id) {
                        return vec![Action::PurgeSession { session }];
                    }
                    self.set_hint("purge cancelled");
                    return Vec::new();
                }
                match key.code {
                    KeyCode::Up => *sel = sel.saturating_sub(1),
                    KeyCode::Down => *sel = (*sel + 1).min(n.saturating_sub(1)),
                    KeyCode::Enter | KeyCode::Char('u') => {
                        if let Some(session) = id {
                            return vec![Action::RestoreSession { session }];
                        }
                    }
                    KeyCode::Delete | KeyCode::Char('p') if id.is_some() => *confirm = true,
                    KeyCode::Char('s') => {
                        self.overlay = Some(Overlay::Sessions { list: None, sel: 0 });
                        return vec![Action::ListSessions];
                    }
                    _ => {}
                }
                Vec::new()
            }
            Overlay::Models { sel } => {
                let n = self.settings.models.len();
                match key.code {
                    KeyCode::Up => *sel = sel.saturating_sub(1),
                    KeyCode::Down => *sel = (*sel + 1).min(n.saturating_sub(1)),
                    KeyCode::Enter => {
                        let m = self.settings.models.get(*sel).cloned();
                        self.overlay = None;
                        if let Some(m) = m {
                            return self.set_model(m);
                        }
                    }
                    _ => {}
                }
                Vec::new()
            }
        }
    }

    pub(super) fn composer_key(&mut self, key: KeyEvent) -> Vec<Action> {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let shift = key.modifiers.contains(KeyModifiers::SHIFT);
        if let Some(actions) = self.search_key(key) {
            return actions;
        }
        // Keys the completion popup takes.
        if self.completion.is_some() {
            match key.code {
                KeyCode::Up => {
                    if let Some(c) = self.completion.as_mut() {
                        c.sel = c.sel.saturating_sub(1);
                    }
                    return Vec::new();
                }
                KeyCode::Down => {
                    if let Some(c) = self.completion.as_mut() {
                        c.sel = (c.sel + 1).min(c.items.len().saturating_sub(1));
                    }
                    return Vec::new();
                }
                KeyCode::Tab => return self.accept_completion(false),
                KeyCode::Enter if !shift && !alt => return self.accept_completion(true),
                KeyCode::Esc => {
                    self.dismiss_completion();
                    return Vec::new();
                }
                _ => {}
            }
        }
        match key.code {
            KeyCode::Enter if shift || alt => self.composer.insert("\n"),
            KeyCode::Char('j') if ctrl => self.composer.insert("\n"),
            KeyCode::Enter => return self.send(),
            KeyCode::Char('d') if ctrl => {
                if self.composer.is_empty() {
                    self.quit = true;
                    return vec![Action::Quit];
                }
                self.composer.delete();
            }
            KeyCode::Char('x') if ctrl => self.composer.expand_pastes(),
            KeyCode::Char('a') if ctrl => self.composer.home(),
            KeyCode::Char('e') if ctrl => self.composer.end(),
            KeyCode::Char('u') if ctrl => self.composer.kill_to_start(),
            KeyCode::Char('k') if ctrl => self.composer.kill_to_end(),
            KeyCode::Char('w') if ctrl => self.composer.delete_word(),
            KeyCode::Char('l') if ctrl => return Vec::new(),
            KeyCode::Char('r') if ctrl => {
                self.search_older();
                return Vec::new();
            }
            KeyCode::Char('b') if alt => self.composer.word_left(),
            KeyCode::Char('f') if alt => self.composer.word_right(),
            KeyCode::Backspace if alt || ctrl => self.composer.delete_word(),
            KeyCode::Left if alt || ctrl => self.composer.word_left(),
            KeyCode::Right if alt || ctrl => self.composer.word_right(),
            KeyCode::Char(c) if !ctrl => {
                let mut buf = [0u8; 4];
                self.composer.insert(c.encode_utf8(&mut buf));
            }
            KeyCode::Backspace => self.composer.backspace(),
            KeyCode::Delete => self.composer.delete(),
            KeyCode::Left => self.composer.left(),
            KeyCode::Right => self.composer.right(),
            KeyCode::Home => self.composer.home(),
            KeyCode::End => self.composer.end(),
            KeyCode::Up => self.composer.up(),
            KeyCode::Down => self.composer.down(),
            KeyCode::Tab if self.turn_busy() => return self.queue_composer(),
            KeyCode::Tab => {}
            KeyCode::Esc if self.turn_busy() && self.role != Some(ClientRole::Spectator) => {
                self.scroll = Scroll::Follow;
                self.set_hint("cancelling the turn…");
                return vec![Action::Cancel {
                    request_id: rid("cancel"),
                }];
            }
            KeyCode::Esc => self.scroll = Scroll::Follow,
            _ => {}
        }
        self.refresh_completion()
    }

    pub(super) fn send(&mut self) -> Vec<Action> {
        let mut text = self.composer.expanded().trim_end().to_string();
        if text.trim().is_empty() {
            return Vec::new();
        }
        if let Some(cmd) = text.strip_prefix('/') {
            let name = cmd.split_whitespace().next().unwrap_or("");
            // `//text` sends `/text`; a first word like `/usr/bin/env` is a path, not a
            // command.
            if let Some(rest) = cmd.strip_prefix('/') {
                text = format!("/{rest}");
            } else if !name.contains('/') {
                self.composer.take();
                self.completion = None;
                return self.command(cmd.trim());
            }
        }
        if text
            .strip_prefix('#')
            .is_some_and(|rest| rest.starts_with(' ') && !rest.trim().is_empty())
        {
            // `# note`: remember it (a modal asks where) instead of sending it.
            return self.note_line(&text);
        }
        if self.role == Some(ClientRole::Spectator) {
            self.set_hint("read-only spectator: /takeover to drive this session");
            return Vec::new();
        }
        if !std::mem::take(&mut self.big_confirmed) && !text.starts_with('!') {
            if let Some(window) = self.context_window() {
                let ratio = self.settings.prompt_confirm_ratio;
                let tokens = crate::config::estimate_tokens(&text);
                if ratio > 0.0 && tokens as f64 > window as f64 * ratio {
                    self.overlay = Some(Overlay::ConfirmSend { tokens, window });
                    return Vec::new();
                }
            }
        }
        self.composer.take();
        self.completion = None;
        // Every line sent from the composer joins the workspace's history on the host.
        let mut out = vec![Action::HistoryAppend { text: text.clone() }];
        let no_session = self.session.is_none() || self.open_pending.is_some();
        if text.starts_with('!') && !no_session {
            out.extend(self.shell_line(&text));
            return out;
        }
        if !no_session && self.turn_busy() && self.sending.is_none() {
            out.extend(self.steer(text));
            return out;
        }
        if no_session || self.turn_busy() || self.sending.is_some() {
            let q = match self.queued.take() {
                Some(prev) => format!("{prev}\n\n{text}"),
                None => text,
            };
            self.queued = Some(q);
            self.set_hint(if no_session {
                "queued: sent as soon as the session is open"
            } else {
                "queued: sent when the current turn finishes"
            });
            return out;
        }
        out.extend(self.submit(text));
        out
    }
}

/// Line editing in a text prompt (a password, a keyboard-interactive answer): Ctrl-U clears,
/// Backspace deletes, other characters without Ctrl are typed.
fn edit_line(input: &mut String, code: KeyCode, ctrl: bool) {
    match code {
        KeyCode::Char('u') if ctrl => input.clear(),
        KeyCode::Backspace => {
            input.pop();
        }
        KeyCode::Char(c) if !ctrl => input.push(c),
        _ => {}
    }
}

/// Answer a text prompt with "no answer" (the user cancelled it).
fn answer_none<T>(reply: &mut Option<tokio::sync::oneshot::Sender<Option<T>>>) {
    if let Some(r) = reply.take() {
        let _ = r.send(None);
    }
}
