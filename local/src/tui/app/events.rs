//! How client events (host frames, connection changes) update the state.

use super::*;

impl App {
    /// Apply a client event.
    pub fn handle_event(&mut self, ev: ClientEvent) -> Vec<Action> {
        self.handle(AppEvent::Client(ev))
    }

    /// Apply any non-input event.
    pub fn handle(&mut self, ev: AppEvent) -> Vec<Action> {
        match ev {
            AppEvent::Client(c) => {
                let mut out = self.terminal_client_event(&c);
                out.extend(self.client_event(c));
                out
            }
            AppEvent::Pty(p) => self.pty_event(p),
            AppEvent::SessionOpened(o) => {
                // The workspace's history, fresh at every open (another laptop may have
                // added to it).
                let mut out = vec![Action::HistoryList];
                out.extend(self.session_opened(o));
                out
            }
            AppEvent::History(entries) => {
                self.composer.set_history(entries);
                Vec::new()
            }
            AppEvent::SteerRefused { text } => self.steer_refused(text),
            AppEvent::SessionRenamed { session, title } => {
                self.transcript.notice(
                    format!("session {session} renamed to {:?}", title.trim()),
                    Level::Info,
                );
                Vec::new()
            }
            AppEvent::SessionDeleted(session) => {
                self.transcript.notice(
                    format!(
                        "session {session} moved to the trash; /sessions trash (or `reasonix sessions restore {session}`) brings it back within {} days",
                        reasonix_forward::proto::TRASH_KEEP_DAYS
                    ),
                    Level::Info,
                );
                match self.overlay {
                    Some(Overlay::Sessions { .. }) => vec![Action::ListSessions],
                    _ => Vec::new(),
                }
            }
            AppEvent::Trash(trashed) => {
                if let Some(Overlay::Trash { list, sel, confirm }) = &mut self.overlay {
                    *sel = (*sel).min(trashed.len().saturating_sub(1));
                    *list = Some(trashed);
                    *confirm = false;
                }
                Vec::new()
            }
            AppEvent::SessionRestored(session) => {
                self.transcript.notice(
                    format!("session {session} restored from the trash; /sessions lists it"),
                    Level::Info,
                );
                match self.overlay {
                    Some(Overlay::Trash { .. }) => vec![Action::ListTrash],
                    _ => Vec::new(),
                }
            }
            AppEvent::SessionsPurged(sessions) => {
                self.transcript.notice(
                    if sessions.is_empty() {
                        "nothing was purged (the session was no longer in the trash)".to_string()
                    } else {
                        format!("purged for good: {}", sessions.join(", "))
                    },
                    Level::Info,
                );
                match self.overlay {
                    Some(Overlay::Trash { .. }) => vec![Action::ListTrash],
                    _ => Vec::new(),
                }
            }
            AppEvent::Commands(set) => {
                self.set_commands(set);
                self.refresh_completion()
            }
            AppEvent::CommandsRetry { set, line } => {
                self.set_commands(set);
                let name = line.split_whitespace().next().unwrap_or("");
                if self.custom_commands.get(name).is_some() || SlashCommand::parse(name).is_some() {
                    self.command(&line)
                } else {
                    self.set_hint(format!("unknown command /{name}; /help lists them"));
                    Vec::new()
                }
            }
            AppEvent::Sessions(list) => {
                if let Some(Overlay::Sessions { list: l, sel }) = &mut self.overlay {
                    *l = Some(list);
                    *sel = 0;
                }
                Vec::new()
            }
            AppEvent::McpResources { server, resources } => {
                self.mcp_resources_pending.remove(&server);
                self.mcp_resources.insert(server, resources);
                self.refresh_completion()
            }
            AppEvent::DirEntries { path, entries } => {
                self.dir_pending.remove(&path);
                self.dir_cache.insert(path, entries);
                self.refresh_completion()
            }
            AppEvent::McpServers(servers) => {
                if let Some(Overlay::Mcp { list, error, .. }) = &mut self.overlay {
                    *list = Some(servers);
                    *error = None;
                }
                Vec::new()
            }
            AppEvent::OutputSaved {
                tool,
                path,
                bytes,
                fetched,
            } => {
                self.transcript.notice(
                    format!(
                        "full output of {tool} ({}{}) saved to {}",
                        reasonix_forward::units::bytes(bytes),
                        if fetched {
                            ", fetched from the host, SHA-256 checked"
                        } else {
                            ""
                        },
                        path.display()
                    ),
                    Level::Info,
                );
                Vec::new()
            }
            AppEvent::Status(s) => {
                if !s.sandbox.is_empty() {
                    self.sandbox = Some(s.sandbox.clone());
                }
                self.daemon_status = Some(s);
                Vec::new()
            }
            AppEvent::Rewound {
                summary,
                paths,
                scope,
                dry_run,
            } => {
                let mut text = summary;
                if !paths.is_empty() {
                    let shown: Vec<&str> = paths.iter().take(10).map(String::as_str).collect();
                    text.push_str(&format!("\nfiles: {}", shown.join(", ")));
                    if paths.len() > 10 {
                        text.push_str(&format!(" and {} more", paths.len() - 10));
                    }
                }
                let conversation = matches!(scope, RewindScope::Conversation | RewindScope::Both);
                if !dry_run {
                    self.offer_forget_after_rewind();
                }
                if conversation && !dry_run {
                    // The host cut its journal: reload the transcript from the start.
                    let session = self.session.clone();
                    let mut actions = self.switch_session(session, false);
                    self.set_hint(text.lines().next().unwrap_or("").to_string());
                    self.transcript.notice(text, Level::Info);
                    actions.retain(|a| matches!(a, Action::OpenSession(_)));
                    return actions;
                }
                self.transcript.notice(text, Level::Info);
                Vec::new()
            }
            AppEvent::GoalKeeper(line) => {
                self.transcript.notice(line, Level::Info);
                Vec::new()
            }
            AppEvent::CompactDone(summary) => {
                self.set_hint(summary.clone());
                self.transcript.notice(summary, Level::Info);
                Vec::new()
            }
            AppEvent::Context(report) => {
                self.context_report(report);
                Vec::new()
            }
            AppEvent::TookOver => {
                self.role = Some(ClientRole::Driver);
                self.transcript
                    .notice("you now drive this session", Level::Info);
                Vec::new()
            }
            AppEvent::Permissions { text, error } => {
                let level = if error { Level::Warn } else { Level::Info };
                self.transcript.notice(text, level);
                Vec::new()
            }
            AppEvent::RequestFailed { what, message } => {
                if let Some(server) = what.strip_prefix("mcp_resources:") {
                    // Not an MCP server (or it cannot list): no resource candidates.
                    self.mcp_resources_pending.remove(server);
                    self.mcp_resources.insert(server.to_string(), Vec::new());
                    return self.refresh_completion();
                }
                if let Some(path) = what.strip_prefix("list_dir:") {
                    self.dir_pending.remove(path);
                    self.dir_cache.insert(path.to_string(), Vec::new());
                    return self.refresh_completion();
                }
                if what == "submit" {
                    self.sending = None;
                }
                if what == "context" {
                    if let Some(Overlay::Context { error, .. }) = &mut self.overlay {
                        *error = Some(message);
                        return Vec::new();
                    }
                }
                if what == "mcp" {
                    if let Some(Overlay::Mcp { error, .. }) = &mut self.overlay {
                        *error = Some(message);
                        return Vec::new();
                    }
                }
                self.transcript
                    .notice(format!("{what} failed: {message}"), Level::Error);
                Vec::new()
            }
            AppEvent::Prompt(p) => {
                self.prompts.push_back(match p {
                    PromptRequest::HostKey { question, reply } => PromptModal::HostKey {
                        question,
                        reply: Some(reply),
                    },
                    PromptRequest::Secret { prompt, reply } => PromptModal::Secret {
                        prompt,
                        input: Zeroizing::new(String::new()),
                        reply: Some(reply),
                    },
                    PromptRequest::Keyboard { round, reply } => PromptModal::Keyboard {
                        round,
                        answers: Vec::new(),
                        input: Zeroizing::new(String::new()),
                        reply: Some(reply),
                    },
                    PromptRequest::Upgrade { question, reply } => PromptModal::Upgrade {
                        question,
                        reply: Some(reply),
                    },
                });
                Vec::new()
            }
            AppEvent::HostKeyRefused(q) => {
                self.show_host_key_refusal(q);
                Vec::new()
            }
            AppEvent::Banner(text) => {
                self.progress.banner = Some(text.clone());
                self.transcript
                    .notice(text.trim_end().to_string(), Level::Info);
                Vec::new()
            }
            AppEvent::Progress {
                stage,
                detail,
                amount,
            } => {
                if !self.was_connected {
                    self.progress.active = true;
                }
                self.progress.current = Some(stage);
                self.progress.detail = detail;
                self.progress.amount = amount;
                Vec::new()
            }
        }
    }

    /// Show a refused host key (changed or revoked) that the connection stopped on. There is
    /// nothing to accept; the modal only explains.
    pub fn show_host_key_refusal(&mut self, question: HostKeyQuestion) {
        self.prompts.push_back(PromptModal::HostKey {
            question,
            reply: None,
        });
    }

    pub(super) fn client_event(&mut self, ev: ClientEvent) -> Vec<Action> {
        match ev {
            ClientEvent::AgentSign(ask) => {
                self.prompts.push_back(PromptModal::AgentSign { ask });
                Vec::new()
            }
            ClientEvent::Connection(state) => {
                match state {
                    ConnState::Connecting => self.conn = ConnView::Connecting,
                    ConnState::Connected { resumed } => {
                        if matches!(self.conn, ConnView::Reconnecting { .. }) && resumed {
                            self.transcript.notice(
                                "reconnected; the session resumed where it was",
                                Level::Info,
                            );
                        }
                        self.conn = ConnView::Connected;
                        self.was_connected = true;
                        self.progress.active = false;
                    }
                    ConnState::Reconnecting {
                        attempt,
                        next_in,
                        last_contact_secs,
                        reason,
                    } => {
                        if !matches!(self.conn, ConnView::Reconnecting { .. }) && self.was_connected
                        {
                            self.transcript.notice(
                                format!("connection lost ({reason}); reconnecting"),
                                Level::Warn,
                            );
                        }
                        self.conn = ConnView::Reconnecting {
                            attempt,
                            next_at: self.mono_ms + next_in.as_millis() as i64,
                            last_contact_secs,
                            reported_at: self.mono_ms,
                            reason,
                        };
                    }
                    ConnState::Failed { reason, can_create } => {
                        self.transcript
                            .notice(format!("cannot connect: {reason}"), Level::Error);
                        self.conn = ConnView::Failed { reason, can_create };
                        self.progress.active = false;
                    }
                }
                Vec::new()
            }
            ClientEvent::Reattached { reason } => {
                self.transcript.notice(
                    format!(
                        "the link could not be resumed ({reason}); re-attaching and catching up"
                    ),
                    Level::Warn,
                );
                let p = match (&self.session, &self.open_pending) {
                    (Some(s), _) => OpenParams {
                        session: Some(s.clone()),
                        new: false,
                        since: self.last_seq,
                        takeover: false,
                        model: self.model.clone(),
                        effort: self.effort,
                    },
                    (None, Some(p)) => p.clone(),
                    (None, None) => OpenParams {
                        session: None,
                        new: false,
                        since: self.last_seq,
                        takeover: false,
                        model: self.model.clone(),
                        effort: self.effort,
                    },
                };
                vec![Action::OpenSession(p)]
            }
            ClientEvent::State { state, detail } => {
                let was_busy = self.turn_busy();
                self.turn_state = state;
                self.turn_detail = detail;
                if self.turn_busy() && self.turn_started.is_none() {
                    self.turn_started = Some(self.mono_ms);
                }
                if !self.turn_busy() {
                    self.turn_started = None;
                    if was_busy {
                        return self.flush_queue();
                    }
                }
                Vec::new()
            }
            ClientEvent::Role { role, reason } => {
                self.role = Some(role);
                let level = match role {
                    ClientRole::Driver => Level::Info,
                    ClientRole::Spectator => Level::Warn,
                };
                self.transcript.notice(reason, level);
                Vec::new()
            }
            ClientEvent::ToolProgress { call_id, message } => {
                self.transcript.tool_progress(&call_id, &message);
                Vec::new()
            }
            ClientEvent::Event(e) => {
                if e.seq > 0 {
                    if e.seq <= self.last_seq {
                        return Vec::new();
                    }
                    self.last_seq = e.seq;
                }
                let mut actions = Vec::new();
                self.track_retry(&e.kind);
                self.plan.observe(&e.kind);
                self.goal.observe(&e.kind);
                match &e.kind {
                    EventKind::Usage {
                        usage,
                        model,
                        cache_note,
                        ..
                    } => {
                        let t = &mut self.totals;
                        t.prompt += usage.prompt_tokens;
                        t.completion += usage.completion_tokens;
                        t.cache_hit += usage.cache_hit_tokens;
                        t.cache_miss += usage.cache_miss_tokens;
                        t.requests += 1;
                        // A compaction's summary request is not the conversation's size.
                        if cache_note.as_deref() != Some("summary request of a compaction") {
                            t.context = Some(usage.prompt_tokens);
                        }
                        if let Some(p) = self.settings.prices.get(model) {
                            let uncached = if usage.cache_hit_tokens + usage.cache_miss_tokens > 0 {
                                usage.cache_miss_tokens
                            } else {
                                usage.prompt_tokens
                            };
                            let c = (uncached as f64 * p.input
                                + usage.cache_hit_tokens as f64 * p.cached
                                + usage.completion_tokens as f64 * p.output)
                                / 1_000_000.0;
                            t.cost = Some(t.cost.unwrap_or(0.0) + c);
                        }
                        self.last_model = Some(model.clone());
                        if let Some(n) = cache_note {
                            self.transcript
                                .notice(format!("cache miss: {n}"), Level::Warn);
                        }
                    }
                    EventKind::UserTurn { request_id, .. } => {
                        if self.our_requests.remove(request_id) {
                            self.sending = None;
                        }
                        self.turn_started.get_or_insert(self.mono_ms);
                    }
                    EventKind::ApprovalRequested {
                        approval_id,
                        tool,
                        arguments,
                        reason,
                        preview,
                        always_rule,
                        ..
                    } => {
                        if !self.answered.contains(approval_id)
                            && !self.approvals.iter().any(|a| a.approval_id == *approval_id)
                        {
                            self.approvals.push_back(PendingApproval {
                                approval_id: approval_id.clone(),
                                tool: tool.clone(),
                                arguments: arguments.clone(),
                                reason: reason.clone(),
                                preview: preview.clone(),
                                always_rule: always_rule.clone(),
                            });
                            if self.approvals.len() == 1 {
                                self.approval_sel = 0;
                            }
                        }
                    }
                    EventKind::ElicitationRequested {
                        elicitation_id,
                        server,
                        message,
                        schema,
                    } => {
                        let shown = self.prompts.iter().any(|p| {
                            matches!(p, PromptModal::Elicit { elicitation_id: id, .. } if id == elicitation_id)
                        });
                        if !self.answered.contains(elicitation_id) && !shown {
                            match crate::tui::elicit::ElicitForm::parse(schema) {
                                Ok(form) => self.prompts.push_back(PromptModal::Elicit {
                                    elicitation_id: elicitation_id.clone(),
                                    server: server.clone(),
                                    message: message.clone(),
                                    form,
                                    input: Zeroizing::new(String::new()),
                                    error: None,
                                }),
                                Err(e) => self.transcript.notice(
                                    format!("MCP server `{server}` asked for input this client cannot show: {e}"),
                                    Level::Warn,
                                ),
                            }
                        }
                    }
                    EventKind::ElicitationAnswered {
                        elicitation_id,
                        action,
                    } => {
                        self.answered.insert(elicitation_id.clone());
                        self.prompts.retain(|p| {
                            !matches!(p, PromptModal::Elicit { elicitation_id: id, .. } if id == elicitation_id)
                        });
                        self.transcript.notice(
                            format!("MCP input request answered: {}", action.as_str()),
                            Level::Info,
                        );
                    }
                    EventKind::ApprovalAnswered { approval_id, .. } => {
                        self.answered.insert(approval_id.clone());
                        self.approvals.retain(|a| a.approval_id != *approval_id);
                    }
                    EventKind::TurnFinished { .. } => {
                        // Approvals of a finished turn can no longer be answered.
                        for a in self.approvals.drain(..) {
                            self.answered.insert(a.approval_id);
                        }
                        self.turn_started = None;
                        if self.turn_state != TurnState::Idle
                            && self.turn_state != TurnState::Paused
                        {
                            self.turn_state = TurnState::Idle;
                        }
                        actions.extend(self.flush_queue());
                    }
                    EventKind::SessionStarted { .. }
                    | EventKind::TextDelta { .. }
                    | EventKind::ReasoningDelta { .. }
                    | EventKind::AssistantMessage { .. }
                    | EventKind::ToolStarted { .. }
                    | EventKind::ToolFinished { .. }
                    | EventKind::Notice { .. }
                    | EventKind::ProviderRetry(_)
                    | EventKind::Plan(_)
                    | EventKind::Goal(_)
                    | EventKind::Checkpoint { .. }
                    | EventKind::Compacted { .. }
                    | EventKind::Steer { .. }
                    | EventKind::SteerInjected { .. }
                    | EventKind::ShellRan { .. }
                    | EventKind::Planner { .. } => {}
                    EventKind::Subagent {
                        call_id,
                        child,
                        event,
                    } => {
                        let ts = parse_ts(&e.ts).unwrap_or(self.wall_ms);
                        self.children.observe(call_id, child, event, ts);
                    }
                }
                if let EventKind::Compacted { tokens_after, .. } = &e.kind {
                    self.totals.context = Some(*tokens_after);
                }
                self.transcript.apply(&e.kind, parse_ts(&e.ts), e.turn);
                actions
            }
        }
    }

    fn session_opened(&mut self, o: SessionOpened) -> Vec<Action> {
        let changed = self.session.as_deref() != Some(o.session.as_str());
        if changed {
            self.children.clear();
            let what = if o.created {
                "new session"
            } else {
                "resumed session"
            };
            self.transcript
                .notice(format!("{what} {}", o.session), Level::Info);
        }
        self.session = Some(o.session);
        self.open_pending = None;
        self.role = Some(o.role);
        self.turn_state = o.state;
        if !o.sandbox.is_empty() {
            self.sandbox = Some(o.sandbox);
        }
        if let Some(n) = o.notice {
            self.transcript.notice(n, Level::Warn);
        }
        // What the host refused from the workspace's project file (it reads the file
        // at every open; each distinct entry is shown once).
        for i in o.ignored {
            let line = format!("host: {i}");
            if !self.reported_ignored.contains(&line) {
                self.transcript.notice(line.clone(), Level::Warn);
                self.reported_ignored.push(line);
            }
        }
        if o.role == ClientRole::Driver {
            self.settings.mode = o.policy.mode.as_str().to_string();
        }
        if o.role == ClientRole::Spectator {
            self.transcript.notice(
                "attached read-only: another client drives this session (/takeover to drive)",
                Level::Warn,
            );
            return Vec::new();
        }
        if self.turn_busy() || self.sending.is_some() {
            return Vec::new();
        }
        self.flush_queue()
    }

    pub(super) fn flush_queue(&mut self) -> Vec<Action> {
        match self.queued.take() {
            Some(text) => self.submit(text),
            None => Vec::new(),
        }
    }

    pub(super) fn submit(&mut self, text: String) -> Vec<Action> {
        let request_id = rid("tui");
        self.our_requests.insert(request_id.clone());
        self.sending = Some(text.clone());
        self.scroll = Scroll::Follow;
        vec![Action::Submit { request_id, text }]
    }
}
