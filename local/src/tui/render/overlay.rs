//! Overlays: help, status, sessions, models, MCP.

use super::modal::{kv, show_modal};
use super::*;

pub(super) fn render_overlay(
    app: &App,
    ov: &Overlay,
    frame: &mut Frame<'_>,
    area: Rect,
    max_w: u16,
    iw: usize,
) {
    match ov {
        Overlay::Help { scroll } => {
            let mut lines = vec![Line::from(Span::styled("Commands", theme::heading()))];
            let builtin = SlashCommand::ALL.iter().map(|c| {
                let spec = c.spec();
                (
                    spec.name.to_string(),
                    spec.args.to_string(),
                    spec.description.to_string(),
                )
            });
            // Custom commands follow the built-ins, each with where it came from.
            let custom = app.custom_commands.commands.iter().map(|c| {
                (
                    c.name.clone(),
                    c.argument_hint.clone(),
                    format!("{} ({})", c.description, c.source.label()),
                )
            });
            for (name, arg, desc) in builtin.chain(custom) {
                let (arg, desc) = (arg.as_str(), desc.as_str());
                let cmd = if arg.is_empty() {
                    format!("/{name}")
                } else {
                    format!("/{name} {arg}")
                };
                if text_width(&cmd) >= 16 {
                    // A long synopsis gets its own row.
                    lines.push(Line::from(Span::styled(cmd, theme::key())));
                    lines.extend(wrap_text(
                        desc,
                        iw,
                        theme::text(),
                        &[Span::raw(" ".repeat(16))],
                    ));
                } else {
                    lines.extend(wrap_line(
                        &[Span::raw(desc.to_string())],
                        iw,
                        &[Span::styled(format!("{cmd:<16}"), theme::key())],
                        &[Span::raw(" ".repeat(16))],
                    ));
                }
            }
            lines.push(Line::default());
            lines.push(Line::from(Span::styled("Keys", theme::heading())));
            for (k, desc) in KEYS {
                let kw = 22usize.min(iw / 2);
                let k = if text_width(k) >= kw {
                    vec![Span::styled(k.to_string(), theme::key())]
                } else {
                    vec![Span::styled(format!("{k:<kw$}"), theme::key())]
                };
                if k[0].content.len() > kw {
                    lines.push(Line::from(k));
                    lines.extend(wrap_text(
                        desc,
                        iw,
                        theme::text(),
                        &[Span::raw(" ".repeat(kw))],
                    ));
                } else {
                    lines.extend(wrap_line(
                        &[Span::raw(desc.to_string())],
                        iw,
                        &k,
                        &[Span::raw(" ".repeat(kw))],
                    ));
                }
            }
            let room = (area.height as usize).saturating_sub(3);
            let max_scroll = lines.len().saturating_sub(room);
            let s = (*scroll).min(max_scroll);
            app.overlay_max_scroll.set(max_scroll);
            let mut shown: Vec<Line<'static>> = lines.into_iter().skip(s).take(room).collect();
            if max_scroll > 0 {
                shown.truncate(room.saturating_sub(1));
                shown.push(Line::from(Span::styled(
                    format!("↑/↓ PgUp/PgDn scroll ({}/{}) · Esc close", s, max_scroll),
                    theme::dim(),
                )));
            }
            show_modal(frame, area, "Help", theme::border_active(), shown, max_w);
        }
        Overlay::Status => {
            let kw = 12usize;
            let mut lines = Vec::new();
            let t = &app.totals;
            lines.extend(kv("Workspace", app.settings.workspace.clone(), iw, kw));
            let conn = match &app.conn {
                ConnView::Connecting => "connecting".to_string(),
                ConnView::Connected => "connected".to_string(),
                ConnView::Reconnecting {
                    attempt, reason, ..
                } => format!("reconnecting (attempt {attempt}): {reason}"),
                ConnView::Failed { reason, .. } => format!("disconnected: {reason}"),
            };
            lines.extend(kv("Connection", conn, iw, kw));
            match &app.daemon_status {
                Some(s) => {
                    lines.extend(kv("Host path", s.workspace.clone(), iw, kw));
                    lines.extend(kv(
                        "Daemon",
                        format!(
                            "build {} · pid {} · up {}",
                            s.build_id,
                            s.pid,
                            fmt_dur(s.uptime_secs)
                        ),
                        iw,
                        kw,
                    ));
                    lines.extend(kv("Sandbox", s.sandbox.clone(), iw, kw));
                    lines.extend(kv(
                        "Clients",
                        format!(
                            "{} attached · {}",
                            s.clients,
                            theme::plural(s.sessions as u64, "session", "sessions")
                        ),
                        iw,
                        kw,
                    ));
                    if let Some(u) = &s.unclean_previous_shutdown {
                        lines.extend(kv("Warning", u.clone(), iw, kw));
                    }
                }
                None => lines.extend(kv("Daemon", "asking the host…".into(), iw, kw)),
            }
            lines.extend(kv("Build", app.settings.build.clone(), iw, kw));
            let role = match app.role {
                Some(ClientRole::Driver) => "driver",
                Some(ClientRole::Spectator) => "read-only spectator",
                None => "not attached",
            };
            let state = match app.turn_state {
                TurnState::Idle => "idle",
                TurnState::Running => "running",
                TurnState::WaitingForLaptop => "waiting for laptop",
                TurnState::WaitingForApproval => "waiting for approval",
                TurnState::Paused => "paused",
            };
            lines.extend(kv(
                "Session",
                format!(
                    "{} · {role} · {state}",
                    app.session.clone().unwrap_or_else(|| "(opening)".into()),
                ),
                iw,
                kw,
            ));
            lines.extend(kv(
                "Model",
                format!(
                    "{} · mode {}",
                    app.last_model
                        .clone()
                        .or_else(|| app.model.clone())
                        .unwrap_or_else(|| "default".into()),
                    app.settings.mode
                ),
                iw,
                kw,
            ));
            lines.extend(kv(
                "Tokens",
                format!(
                    "in {} · out {} · {}",
                    theme::thousands(t.prompt),
                    theme::thousands(t.completion),
                    theme::plural(t.requests, "request", "requests")
                ),
                iw,
                kw,
            ));
            lines.extend(kv(
                "Cache",
                match t.cache_pct() {
                    Some(p) => format!(
                        "hit {} · miss {} · {p:.1}% hit",
                        theme::thousands(t.cache_hit),
                        theme::thousands(t.cache_miss)
                    ),
                    None => "no figures yet".into(),
                },
                iw,
                kw,
            ));
            lines.extend(kv(
                "Cost",
                match t.cost {
                    Some(c) => format!("${c:.4} (estimated from configured prices)"),
                    None => "unknown (no prices configured for this model)".into(),
                },
                iw,
                kw,
            ));
            lines.push(Line::default());
            lines.push(Line::from(Span::styled("Esc close", theme::dim())));
            show_modal(frame, area, "Status", theme::border_active(), lines, max_w);
        }
        Overlay::Sessions { list, sel } => {
            let room = (area.height as usize).saturating_sub(5).max(1);
            let mut lines = picker_rows(
                app,
                list.as_deref(),
                *sel,
                room,
                "no sessions yet",
                iw,
                |s| {
                    let current = app.session.as_deref() == Some(s.id.as_str());
                    let when = if s.last_activity.is_empty() {
                        &s.created
                    } else {
                        &s.last_activity
                    };
                    let state = match s.state {
                        TurnState::Idle | TurnState::Paused if !s.driver_attached => String::new(),
                        TurnState::Idle | TurnState::Paused => "attached · ".into(),
                        other => format!("{} · ", turn_state_label(other)),
                    };
                    let meta = format!(
                        "{}{} · {} · {state}",
                        if current { "* " } else { "  " },
                        when.get(..16).unwrap_or(when).replace('T', " "),
                        theme::plural(s.turns, "turn", "turns")
                    );
                    (meta, s.title.as_str())
                },
            );
            lines.push(Line::default());
            lines.push(Line::from(Span::styled(
                "↑/↓ choose · Enter resume · d delete (trash) · r rename open · t trash · Esc close",
                theme::dim(),
            )));
            show_modal(
                frame,
                area,
                "Sessions",
                theme::border_active(),
                lines,
                max_w,
            );
        }
        Overlay::Trash { list, sel, confirm } => {
            let room = (area.height as usize).saturating_sub(6).max(1);
            let mut lines = picker_rows(
                app,
                list.as_deref(),
                *sel,
                room,
                "the trash is empty",
                iw,
                |t| {
                    // Month-day is enough: the trash keeps a session for days.
                    let meta = format!(
                        "  deleted {} · kept until {} · ",
                        t.deleted.get(5..16).unwrap_or(&t.deleted).replace('T', " "),
                        t.purge_after.get(5..10).unwrap_or(&t.purge_after),
                    );
                    (meta, t.info.title.as_str())
                },
            );
            lines.push(Line::default());
            if *confirm {
                let title = list
                    .as_ref()
                    .and_then(|l| l.get(*sel))
                    .map(|t| t.info.title.as_str())
                    .unwrap_or("");
                lines.push(Line::from(Span::styled(
                    truncate(
                        &format!("purge \"{title}\" for good? it cannot be restored · y purge · any other key keeps it"),
                        iw,
                    ),
                    theme::warn(),
                )));
            } else {
                lines.push(Line::from(Span::styled(
                    "↑/↓ choose · Enter restore · p purge · s sessions · Esc close",
                    theme::dim(),
                )));
            }
            show_modal(frame, area, "Trash", theme::border_active(), lines, max_w);
        }
        Overlay::Context { report, error } => super::context::render_context(
            app,
            report.as_ref(),
            error.as_deref(),
            frame,
            area,
            max_w,
            iw,
        ),
        Overlay::Mcp {
            list,
            error,
            scroll,
        } => {
            let lines = mcp_lines(app, list.as_deref(), error.as_deref(), iw);
            let room = (area.height as usize).saturating_sub(4).max(1);
            let max_scroll = lines.len().saturating_sub(room);
            let s = (*scroll).min(max_scroll);
            app.overlay_max_scroll.set(max_scroll);
            let mut shown: Vec<Line<'static>> = lines.into_iter().skip(s).take(room).collect();
            shown.push(Line::default());
            let keys = if max_scroll > 0 {
                format!("↑/↓ scroll ({s}/{max_scroll}) · r refresh · Esc close")
            } else {
                "r refresh · Esc close".to_string()
            };
            shown.push(Line::from(Span::styled(keys, theme::dim())));
            show_modal(
                frame,
                area,
                "MCP servers",
                theme::border_active(),
                shown,
                max_w,
            );
        }
        Overlay::Memory(ask) => render_memory_ask(ask, frame, area, max_w, iw),
        Overlay::Child { id, scroll } => {
            super::children::render_child(app, id, *scroll, frame, area, max_w, iw)
        }
        Overlay::ConfirmSend { tokens, window } => {
            let kw = 16usize;
            let mut lines = Vec::new();
            lines.extend(wrap_text(
                "This prompt takes a large share of the model's context window.",
                iw,
                theme::text(),
                &[],
            ));
            lines.push(Line::default());
            lines.extend(kv("Prompt", format!("about {tokens} tokens"), iw, kw));
            lines.extend(kv(
                "Context window",
                format!(
                    "{window} tokens ({:.0}% of it)",
                    *tokens as f64 * 100.0 / (*window).max(1) as f64
                ),
                iw,
                kw,
            ));
            lines.extend(kv(
                "Asks above",
                format!(
                    "{:.0}% ([agent] prompt_confirm_ratio; 0 never asks)",
                    app.settings.prompt_confirm_ratio * 100.0
                ),
                iw,
                kw,
            ));
            lines.push(Line::default());
            lines.push(Line::from(vec![
                Span::styled("Enter/y", theme::key()),
                Span::raw(" send it · "),
                Span::styled("Esc/n", theme::key()),
                Span::raw(" keep editing"),
            ]));
            show_modal(
                frame,
                area,
                "Send a big prompt?",
                theme::border_active(),
                lines,
                max_w,
            );
        }
        Overlay::Models { sel } => {
            let mut lines = Vec::new();
            if app.settings.models.is_empty() {
                lines.push(Line::from(Span::styled(
                    "no models configured; see [[providers]] in config.toml",
                    theme::dim(),
                )));
            }
            for (i, m) in app.settings.models.iter().enumerate() {
                let base = if i == *sel {
                    theme::selected()
                } else {
                    Style::default()
                };
                let current = app.model.as_deref() == Some(m.as_str());
                let price = app
                    .settings
                    .prices
                    .get(m)
                    .map(|p| format!("  in ${} / out ${} per 1M", p.input, p.output))
                    .unwrap_or_default();
                let text = format!("{}{m}{price}", if current { "* " } else { "  " });
                let pad = iw.saturating_sub(text_width(&text));
                lines.push(Line::from(vec![
                    Span::styled(truncate(&text, iw), base),
                    Span::styled(" ".repeat(pad), base),
                ]));
            }
            lines.push(Line::default());
            lines.push(Line::from(Span::styled(
                "↑/↓ choose · Enter use · Esc close",
                theme::dim(),
            )));
            show_modal(
                frame,
                area,
                "Model",
                theme::border_active(),
                lines,
                max_w.min(72),
            );
        }
    }
}

/// The body of the `/mcp` panel: per server a header row (name, where it runs, state, tool
/// count), then its tools or the reason it failed.
pub(super) fn mcp_lines(
    app: &App,
    list: Option<&[reasonix_forward::proto::McpServerInfo]>,
    error: Option<&str>,
    iw: usize,
) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    if let Some(e) = error {
        lines.extend(wrap_text(
            &format!("could not ask the host: {}", sanitize(e)),
            iw,
            theme::error(),
            &[],
        ));
        return lines;
    }
    let Some(list) = list else {
        lines.push(Line::from(Span::styled(
            format!("{} starting and listing the servers…", spinner(app)),
            theme::dim(),
        )));
        return lines;
    };
    if list.is_empty() {
        lines.extend(wrap_text(
            "no MCP servers: add [[mcp]] to the workspace's reasonix.toml (or a .mcp.json) for host servers, or [[mcp]] with run_on = \"laptop\" to ~/.reasonix/config.toml for laptop servers",
            iw,
            theme::dim(),
            &[],
        ));
        return lines;
    }
    for (i, s) in list.iter().enumerate() {
        if i > 0 {
            lines.push(Line::default());
        }
        let state_style = match s.state.as_str() {
            "ready" => theme::ok(),
            "failed" => theme::error(),
            _ => theme::warn(),
        };
        let mut head = vec![
            Span::styled(sanitize(&s.name), theme::tool_name()),
            Span::styled(format!("  {} · ", sanitize(&s.run_on)), theme::dim()),
            Span::styled(sanitize(&s.state), state_style),
        ];
        if !s.tools.is_empty() {
            head.push(Span::styled(
                format!(
                    " · {}",
                    theme::plural(s.tools.len() as u64, "tool", "tools")
                ),
                theme::dim(),
            ));
        }
        lines.extend(wrap_line(&head, iw, &[], &[Span::raw("  ")]));
        let indent = [Span::raw("  ")];
        if let Some(r) = &s.reason {
            lines.extend(wrap_line(
                &[Span::styled(sanitize(r), theme::error())],
                iw,
                &indent,
                &indent,
            ));
        }
        if !s.tools.is_empty() {
            let names: Vec<String> = s
                .tools
                .iter()
                .map(|t| sanitize(&crate::tui::mcp::short_tool(&s.name, t)))
                .collect();
            lines.extend(wrap_line(
                &[Span::raw(names.join(", "))],
                iw,
                &indent,
                &indent,
            ));
        }
    }
    lines
}

/// A session's turn state as the sessions overlay shows it.
fn turn_state_label(state: TurnState) -> &'static str {
    match state {
        TurnState::Idle => "idle",
        TurnState::Running => "running",
        TurnState::WaitingForLaptop => "waiting for laptop",
        TurnState::WaitingForApproval => "waiting for approval",
        TurnState::Paused => "paused",
    }
}

/// The rows of a list overlay (sessions, trash): "loading…" until the list came, `empty` for
/// an empty one, else one row per item — its dimmed `meta` then its title, cut to the width —
/// with the selected row highlighted, scrolled so it shows in `room` rows.
fn picker_rows<'a, T>(
    app: &App,
    list: Option<&'a [T]>,
    sel: usize,
    room: usize,
    empty: &str,
    iw: usize,
    row: impl Fn(&'a T) -> (String, &'a str),
) -> Vec<Line<'static>> {
    let l = match list {
        None => {
            return vec![Line::from(Span::styled(
                format!("{} loading…", spinner(app)),
                theme::dim(),
            ))]
        }
        Some([]) => return vec![Line::from(Span::styled(empty.to_string(), theme::dim()))],
        Some(l) => l,
    };
    let first = (sel + 1).saturating_sub(room);
    l.iter()
        .enumerate()
        .skip(first)
        .take(room)
        .map(|(i, item)| {
            let base = if i == sel {
                theme::selected()
            } else {
                Style::default()
            };
            let (meta, title) = row(item);
            let title = truncate(title, iw.saturating_sub(text_width(&meta)));
            let pad = iw.saturating_sub(text_width(&meta) + text_width(&title));
            Line::from(vec![
                Span::styled(meta, base.patch(theme::dim())),
                Span::styled(title, base),
                Span::styled(" ".repeat(pad), base),
            ])
        })
        .collect()
}

/// The memory modal: where to remember a `# note`, or whether to forget facts.
fn render_memory_ask(ask: &MemoryAsk, frame: &mut Frame<'_>, area: Rect, max_w: u16, iw: usize) {
    let kw = 8usize;
    let mut lines = Vec::new();
    let title = match ask {
        MemoryAsk::Note { text, scope, kind } => {
            lines.extend(wrap_text(text, iw, theme::text(), &[]));
            lines.push(Line::default());
            let scope_text = match scope {
                reasonix_forward::memory::Scope::Project => {
                    "project — this workspace, kept on its host"
                }
                reasonix_forward::memory::Scope::Global => {
                    "global — yours, kept on this laptop, recalled on every host"
                }
            };
            lines.extend(kv("Scope", scope_text.to_string(), iw, kw));
            lines.extend(kv("Type", kind.as_str().to_string(), iw, kw));
            lines.push(Line::default());
            lines.push(Line::from(vec![
                Span::styled("Enter/y", theme::key()),
                Span::raw(" remember · "),
                Span::styled("Tab/p/g", theme::key()),
                Span::raw(" scope · "),
                Span::styled("t", theme::key()),
                Span::raw(" type · "),
                Span::styled("Esc/n", theme::key()),
                Span::raw(" cancel"),
            ]));
            "Remember this note?"
        }
        MemoryAsk::Forget { ids, why } => {
            lines.extend(wrap_text(
                &format!("Forget {} fact(s)? ({why})", ids.len()),
                iw,
                theme::text(),
                &[],
            ));
            for id in ids {
                lines.push(Line::from(Span::raw(format!("  {id}"))));
            }
            lines.extend(wrap_text(
                "Forgotten facts move to the archive (`/memory restore ID` brings one back).",
                iw,
                theme::dim(),
                &[],
            ));
            lines.push(Line::default());
            lines.push(Line::from(vec![
                Span::styled("Enter/y", theme::key()),
                Span::raw(" forget · "),
                Span::styled("Esc/n", theme::key()),
                Span::raw(" keep them"),
            ]));
            "Forget remembered facts?"
        }
    };
    show_modal(frame, area, title, theme::border_active(), lines, max_w);
}
