//! Modals: approvals, SSH prompts, connection progress.

use super::*;

/// A centred box of at most `w`×`h` inside `area`, cleared, with a border and title.
pub(super) fn modal_box(
    frame: &mut Frame<'_>,
    area: Rect,
    w: u16,
    h: u16,
    title: &str,
    style: Style,
) -> Rect {
    let w = w.min(area.width).max(10);
    let h = h.min(area.height).max(3);
    let x = area.x + (area.width.saturating_sub(w)) / 2;
    let y = area.y + (area.height.saturating_sub(h)) / 2;
    let r = Rect::new(x, y, w, h);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(style)
        .padding(Padding::horizontal(1))
        .title(Span::styled(
            format!(" {title} "),
            style.add_modifier(Modifier::BOLD),
        ));
    let inner = block.inner(r);
    frame.render_widget(Clear, r);
    frame.render_widget(block, r);
    inner
}

/// Lay out modal content: returns the box inner area after drawing `lines` (cut to fit).
pub(super) fn show_modal(
    frame: &mut Frame<'_>,
    area: Rect,
    title: &str,
    style: Style,
    lines: Vec<Line<'static>>,
    max_w: u16,
) {
    let h = lines.len() as u16 + 2;
    let inner = modal_box(frame, area, max_w, h, title, style);
    let n = inner.height as usize;
    let mut lines = lines;
    if lines.len() > n && n > 0 {
        lines.truncate(n - 1);
        lines.push(Line::from(Span::styled("…", theme::dim())));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// A key with several values, one per row; when a value does not fit beside the key, all
/// values go below it (fingerprints stay on one row, easy to compare).
pub(super) fn kv_rows(
    key: &str,
    values: &[String],
    width: usize,
    key_w: usize,
) -> Vec<Line<'static>> {
    let fits = values.iter().all(|v| key_w + text_width(v) <= width);
    let mut out = Vec::new();
    if fits {
        for (i, v) in values.iter().enumerate() {
            let k = if i == 0 {
                format!("{key:<key_w$}")
            } else {
                " ".repeat(key_w)
            };
            out.push(Line::from(vec![
                Span::styled(k, theme::dim()),
                Span::raw(v.clone()),
            ]));
        }
    } else {
        out.push(Line::from(Span::styled(key.to_string(), theme::dim())));
        for v in values {
            out.extend(wrap_line(
                &[Span::raw(v.clone())],
                width,
                &[Span::raw("  ")],
                &[Span::raw("  ")],
            ));
        }
    }
    out
}

pub(super) fn kv(key: &str, value: String, width: usize, key_w: usize) -> Vec<Line<'static>> {
    let first = [Span::styled(format!("{key:<key_w$}"), theme::dim())];
    let rest = [Span::raw(" ".repeat(key_w))];
    // A value that would wrap (a fingerprint on a narrow screen) goes on its own row whole.
    if key_w + text_width(&value) > width && text_width(&value) <= width.saturating_sub(2) {
        let mut out = vec![Line::from(Span::styled(key.to_string(), theme::dim()))];
        out.extend(wrap_line(
            &[Span::raw(value)],
            width,
            &[Span::raw("  ")],
            &[Span::raw("  ")],
        ));
        return out;
    }
    wrap_line(&[Span::raw(value)], width, &first, &rest)
}

pub(super) fn options(items: &[(&str, &str)], sel: Option<usize>) -> Vec<Line<'static>> {
    items
        .iter()
        .enumerate()
        .map(|(i, (k, label))| {
            let base = if Some(i) == sel {
                theme::selected()
            } else {
                Style::default()
            };
            Line::from(vec![
                Span::styled(format!(" {k} "), base.patch(theme::key())),
                Span::styled(format!(" {label} "), base),
            ])
        })
        .collect()
}

pub(super) fn render_modal(app: &App, frame: &mut Frame<'_>, area: Rect) {
    // Narrow terminals get full-width modals: slivers of transcript beside them only confuse.
    let max_w = if area.width <= 90 { area.width } else { 84 };
    let iw = max_w.saturating_sub(4) as usize;
    if let Some(p) = app.prompts.front() {
        render_prompt(p, frame, area, max_w, iw);
        return;
    }
    if let ConnView::Failed { reason, can_create } = &app.conn {
        render_fatal(app, reason, *can_create, frame, area, max_w, iw);
        return;
    }
    if let Some(a) = app.active_approval() {
        let mut lines = Vec::new();
        let arg = crate::tui::transcript::key_arg(&a.tool, &a.arguments);
        lines.extend(wrap_line(
            &[
                Span::styled(a.tool.clone(), theme::tool_name()),
                Span::raw(format!(" {arg}")),
            ],
            iw,
            &[],
            &[Span::raw("  ")],
        ));
        lines.extend(wrap_text(&a.reason, iw, theme::dim(), &[]));
        lines.push(Line::default());
        let scope = super::always::scope_lines(app, a, iw);
        // Room for the preview: the whole screen minus borders, header, options and scope.
        let fixed = lines.len() + 1 + super::always::ANSWERS.len() + scope.len() + 2 + 1;
        let room = (area.height as usize).saturating_sub(fixed).max(3);
        let rows = match &a.preview {
            Some(p) => Some(diff::rows_from_unified(p)),
            None => diff::rows_from_args(&a.tool, &a.arguments),
        };
        match rows {
            Some(rows) => lines.extend(diff::render(&rows, iw, "", room)),
            None => {
                let pretty = serde_json::from_str::<serde_json::Value>(&a.arguments)
                    .ok()
                    .and_then(|v| serde_json::to_string_pretty(&v).ok())
                    .unwrap_or_else(|| a.arguments.clone());
                let mut l = wrap_text(&pretty, iw, theme::text(), &[]);
                if l.len() > room {
                    let more = l.len() - room;
                    l.truncate(room.saturating_sub(1));
                    l.push(Line::from(Span::styled(
                        format!("… {more} more lines"),
                        theme::dim(),
                    )));
                }
                lines.extend(l);
            }
        }
        lines.push(Line::default());
        lines.extend(options(&super::always::ANSWERS, Some(app.approval_sel)));
        lines.extend(scope);
        let more = app.approvals.len().saturating_sub(1);
        let title = if more > 0 {
            format!("Approval needed (+{more} more)")
        } else {
            "Approval needed".to_string()
        };
        show_modal(frame, area, &title, theme::border_active(), lines, max_w);
        return;
    }
    if let Some(p) = app.plan_card() {
        let mut lines = Vec::new();
        let room = (area.height as usize)
            .saturating_sub(2 + 2 + PLAN_ANSWERS.len() + 1)
            .max(3);
        let mut body = crate::tui::markdown::render(&p.plan, iw);
        if body.len() > room {
            let more = body.len() - room;
            body.truncate(room.saturating_sub(1));
            body.push(Line::from(Span::styled(
                format!("… {more} more lines (the whole plan is in the transcript)"),
                theme::dim(),
            )));
        }
        lines.extend(body);
        lines.push(Line::default());
        lines.extend(options(&PLAN_ANSWERS, Some(app.plan.sel)));
        let title = format!("Plan ({} steps): approve?", p.steps.len());
        show_modal(frame, area, &title, theme::border_active(), lines, max_w);
        return;
    }
    if let Some(ov) = &app.overlay {
        render_overlay(app, ov, frame, area, max_w, iw);
        return;
    }
    if app.progress.active {
        render_progress(app, frame, area, max_w, iw);
    }
}

pub(super) fn render_prompt(
    p: &PromptModal,
    frame: &mut Frame<'_>,
    area: Rect,
    max_w: u16,
    iw: usize,
) {
    match p {
        PromptModal::HostKey { question: q, reply } => {
            let host = if q.port == 22 {
                q.host.clone()
            } else {
                format!("[{}]:{}", q.host, q.port)
            };
            let mut lines = Vec::new();
            match &q.status {
                HostKeyStatus::Unknown => {
                    lines.extend(wrap_text(
                        &format!("The authenticity of host {host} can't be established. This is the first connection, or the key was never recorded."),
                        iw,
                        theme::text(),
                        &[],
                    ));
                    lines.push(Line::default());
                    lines.extend(kv("Host", format!("{} port {}", q.host, q.port), iw, 13));
                    lines.extend(kv("Key type", q.key_type.clone(), iw, 13));
                    lines.extend(kv("Fingerprint", q.fingerprint_sha256.clone(), iw, 13));
                    lines.push(Line::default());
                    lines.extend(wrap_text(
                        "Compare the fingerprint with one from the host's administrator before accepting.",
                        iw,
                        theme::dim(),
                        &[],
                    ));
                    lines.push(Line::default());
                    if reply.is_some() {
                        lines.extend(options(
                            &[
                                ("1 y", "accept and save to known_hosts"),
                                ("2 o", "accept for this connection only"),
                                ("3 n", "reject (Esc)"),
                            ],
                            None,
                        ));
                    } else {
                        lines.extend(options(&[("Esc", "close")], None));
                    }
                    show_modal(
                        frame,
                        area,
                        "Unknown host key",
                        theme::border_active(),
                        lines,
                        max_w,
                    );
                }
                HostKeyStatus::Changed {
                    old_fingerprint,
                    old_key_type,
                    known_hosts_file,
                    line,
                } => {
                    lines.extend(wrap_text(
                        "WARNING: THE HOST KEY HAS CHANGED",
                        iw,
                        theme::danger(),
                        &[],
                    ));
                    lines.extend(wrap_text(
                        "Someone may be intercepting this connection (man-in-the-middle), or the host's key was replaced. Reasonix will not connect.",
                        iw,
                        theme::error(),
                        &[],
                    ));
                    lines.push(Line::default());
                    lines.extend(kv("Host", format!("{} port {}", q.host, q.port), iw, 15));
                    lines.extend(kv_rows(
                        "Key on record",
                        &[old_key_type.clone(), old_fingerprint.clone()],
                        iw,
                        15,
                    ));
                    lines.extend(kv_rows(
                        "Key presented",
                        &[q.key_type.clone(), q.fingerprint_sha256.clone()],
                        iw,
                        15,
                    ));
                    lines.extend(kv(
                        "Recorded in",
                        format!("{}:{line}", known_hosts_file.display()),
                        iw,
                        15,
                    ));
                    lines.push(Line::default());
                    lines.extend(wrap_text(
                        &format!("If the change is expected, remove line {line} of that file (ssh-keygen -R {host}) and connect again."),
                        iw,
                        theme::dim(),
                        &[],
                    ));
                    lines.push(Line::default());
                    lines.extend(options(
                        &[("Esc", "close — the connection was refused")],
                        None,
                    ));
                    show_modal(
                        frame,
                        area,
                        "Host key changed",
                        theme::danger(),
                        lines,
                        max_w,
                    );
                }
                HostKeyStatus::Revoked {
                    known_hosts_file,
                    line,
                } => {
                    lines.extend(wrap_text(
                        "WARNING: THE HOST KEY IS REVOKED",
                        iw,
                        theme::danger(),
                        &[],
                    ));
                    lines.push(Line::default());
                    lines.extend(kv("Host", format!("{} port {}", q.host, q.port), iw, 13));
                    lines.extend(kv_rows(
                        "Key",
                        &[q.key_type.clone(), q.fingerprint_sha256.clone()],
                        iw,
                        13,
                    ));
                    lines.extend(kv(
                        "Revoked in",
                        format!("{}:{line}", known_hosts_file.display()),
                        iw,
                        13,
                    ));
                    lines.push(Line::default());
                    lines.extend(options(
                        &[("Esc", "close — the connection was refused")],
                        None,
                    ));
                    show_modal(
                        frame,
                        area,
                        "Host key revoked",
                        theme::danger(),
                        lines,
                        max_w,
                    );
                }
            }
        }
        PromptModal::Secret { prompt, input, .. } => {
            let title = match &prompt.purpose {
                SecretPurpose::Passphrase { .. } => "Key passphrase".to_string(),
                SecretPurpose::Password { user, host } => format!("Password for {user}@{host}"),
                SecretPurpose::KeyboardInteractive => "Authentication".to_string(),
            };
            let mut lines = wrap_text(prompt.prompt.trim_end(), iw, theme::text(), &[]);
            lines.push(Line::default());
            let shown = if prompt.echo {
                input.to_string()
            } else {
                "*".repeat(input.chars().count())
            };
            lines.push(Line::from(vec![
                Span::styled("> ", theme::user_marker()),
                Span::raw(truncate_left(&shown, iw.saturating_sub(3))),
                Span::styled("_", theme::dim()),
            ]));
            lines.push(Line::default());
            lines.push(Line::from(Span::styled(
                if prompt.echo {
                    "Enter submit · Esc cancel"
                } else {
                    "input hidden · Enter submit · Esc cancel"
                },
                theme::dim(),
            )));
            show_modal(
                frame,
                area,
                &title,
                theme::border_active(),
                lines,
                max_w.min(72),
            );
        }
        PromptModal::AgentSign { ask } => {
            let mut lines = Vec::new();
            lines.extend(wrap_text(&ask.question(), iw, theme::text(), &[]));
            lines.push(Line::default());
            lines.extend(kv("key", ask.key.clone(), iw, 10));
            let process = match ask.pid {
                Some(pid) => format!("{} (pid {pid})", ask.command),
                None => ask.command.clone(),
            };
            lines.extend(kv("process", process, iw, 10));
            lines.push(Line::default());
            lines.extend(options(
                &[("1 y", "allow this signature"), ("2 n", "refuse (Esc)")],
                None,
            ));
            show_modal(
                frame,
                area,
                "ssh-agent: sign?",
                theme::border_active(),
                lines,
                max_w.min(80),
            );
        }
        PromptModal::Upgrade { question: q, .. } => {
            let mut lines = Vec::new();
            lines.extend(wrap_text(
                &format!(
                    "The workspace daemon at {} runs build {} and is in the middle of a turn. This is build {}.",
                    q.place, q.running_build, q.our_build
                ),
                iw,
                theme::text(),
                &[],
            ));
            lines.push(Line::default());
            for (id, state, title) in &q.sessions {
                lines.extend(kv(id, format!("{state}  {title}"), iw, 14));
            }
            lines.push(Line::default());
            lines.extend(options(
                &[
                    (
                        "1 u",
                        "upgrade now (interrupts the turn; the journal keeps it)",
                    ),
                    ("2 r", "attach read-only to the old build"),
                    ("3 w", "wait for the turn to end, then upgrade"),
                    ("q", "quit (Esc)"),
                ],
                None,
            ));
            show_modal(
                frame,
                area,
                "Another build is running a turn",
                theme::border_active(),
                lines,
                max_w.min(80),
            );
        }
        PromptModal::Elicit {
            server,
            message,
            form,
            input,
            error,
            ..
        } => {
            let mut lines = Vec::new();
            lines.extend(kv("Server", server.clone(), iw, 10));
            if !message.is_empty() {
                lines.extend(wrap_text(message, iw, theme::text(), &[]));
            }
            lines.push(Line::default());
            let now = form.answered();
            for (i, f) in form.fields.iter().enumerate() {
                let value = if i < now {
                    Span::styled("(answered)", theme::dim())
                } else if i == now {
                    Span::raw(format!("{}_", input.as_str()))
                } else {
                    Span::raw("")
                };
                lines.push(Line::from(vec![
                    Span::styled(f.label.clone(), theme::text()),
                    Span::raw(" "),
                    value,
                ]));
            }
            if let Some(e) = error {
                lines.push(Line::from(Span::styled(e.clone(), theme::error())));
            }
            lines.push(Line::default());
            lines.push(Line::from(Span::styled(
                "Enter next (empty = default/skip) · Esc decline",
                theme::dim(),
            )));
            show_modal(
                frame,
                area,
                "An MCP server asks for input",
                theme::border_active(),
                lines,
                max_w.min(80),
            );
        }
        PromptModal::Keyboard {
            round,
            answers,
            input,
            ..
        } => {
            let mut lines = Vec::new();
            lines.extend(kv(
                "Server",
                format!("{}@{}", round.user, round.host),
                iw,
                10,
            ));
            if !round.name.is_empty() {
                lines.extend(wrap_text(&round.name, iw, theme::heading(), &[]));
            }
            if !round.instructions.is_empty() {
                lines.extend(wrap_text(&round.instructions, iw, theme::text(), &[]));
            }
            lines.push(Line::default());
            for (i, (prompt, echo)) in round.prompts.iter().enumerate() {
                let value = if i < answers.len() {
                    Span::styled("(answered)", theme::dim())
                } else if i == answers.len() {
                    let shown = if *echo {
                        input.to_string()
                    } else {
                        "*".repeat(input.chars().count())
                    };
                    Span::raw(format!("{shown}_"))
                } else {
                    Span::raw("")
                };
                lines.push(Line::from(vec![
                    Span::styled(prompt.trim_end().to_string(), theme::text()),
                    Span::raw(" "),
                    value,
                ]));
            }
            lines.push(Line::default());
            lines.push(Line::from(Span::styled(
                "Enter next · Esc cancel",
                theme::dim(),
            )));
            show_modal(
                frame,
                area,
                "Keyboard-interactive authentication",
                theme::border_active(),
                lines,
                max_w.min(72),
            );
        }
    }
}

const STAGES: [Stage; 9] = [
    Stage::Connect,
    Stage::Kex,
    Stage::HostKey,
    Stage::Auth,
    Stage::Probe,
    Stage::Upload,
    Stage::Verify,
    Stage::Launch,
    Stage::Attach,
];

pub(super) fn render_progress(app: &App, frame: &mut Frame<'_>, area: Rect, max_w: u16, iw: usize) {
    let p = &app.progress;
    let cur = p
        .current
        .and_then(|c| STAGES.iter().position(|s| *s == c))
        .unwrap_or(0);
    let mut lines = vec![Line::from(Span::styled(
        truncate(&format!("Connecting to {}", app.settings.workspace), iw),
        theme::heading(),
    ))];
    lines.push(Line::default());
    for (i, s) in STAGES.iter().enumerate() {
        let (mark, style) = if i < cur {
            ("+", theme::ok())
        } else if i == cur {
            (spinner(app), theme::warn())
        } else {
            ("·", theme::dim())
        };
        let mut spans = vec![
            Span::styled(format!(" {mark} "), style),
            Span::styled(
                format!("{:<9}", s.name()),
                if i == cur { theme::text() } else { style },
            ),
        ];
        if i == cur {
            if let (Stage::Upload, Some((done, total))) = (s, p.amount) {
                let bar_w = iw.saturating_sub(14 + 28).clamp(10, 30);
                let frac = if total > 0 {
                    done as f64 / total as f64
                } else {
                    0.0
                };
                let filled = ((frac * bar_w as f64).round() as usize).min(bar_w);
                spans.push(Span::styled("#".repeat(filled), theme::ok()));
                spans.push(Span::styled(".".repeat(bar_w - filled), theme::dim()));
                spans.push(Span::raw(format!(
                    " {:>3.0}% {}/{}",
                    frac * 100.0,
                    reasonix_forward::units::bytes(done),
                    reasonix_forward::units::bytes(total)
                )));
            } else if !p.detail.is_empty() {
                spans.push(Span::styled(
                    truncate(&p.detail, iw.saturating_sub(14)),
                    theme::dim(),
                ));
            }
        }
        lines.push(Line::from(spans));
    }
    if let Some(b) = &p.banner {
        lines.push(Line::default());
        let mut b = wrap_text(b.trim_end(), iw, theme::dim(), &[]);
        b.truncate(4);
        lines.extend(b);
    }
    show_modal(
        frame,
        area,
        "Connecting",
        theme::border_active(),
        lines,
        max_w.min(72),
    );
}

/// Split a fatal connection message (`[stage] host: path: what (detail). fix`) into its
/// stage, its problem and what to do (when the message has that shape).
pub(super) fn fatal_parts(reason: &str) -> (String, String, Option<String>) {
    let (stage, rest) = match reason.strip_prefix('[').and_then(|r| r.split_once("] ")) {
        Some((stage, rest)) if !stage.contains(' ') => (stage.to_string(), rest),
        _ => ("connect".to_string(), reason),
    };
    match rest.split_once("). ") {
        Some((problem, fix)) => (stage, format!("{problem})"), Some(fix.to_string())),
        None => (stage, rest.to_string(), None),
    }
}

/// The fatal-error modal: a connection that cannot succeed by retrying. It stays until
/// dismissed; for a missing workspace folder it offers to create it.
fn render_fatal(
    app: &App,
    reason: &str,
    can_create: bool,
    frame: &mut Frame<'_>,
    area: Rect,
    max_w: u16,
    iw: usize,
) {
    let kw = 12usize;
    let (stage, problem, fix) = fatal_parts(reason);
    let mut lines = Vec::new();
    lines.extend(kv("Stage", stage, iw, kw));
    lines.extend(kv("Workspace", app.settings.workspace.clone(), iw, kw));
    lines.push(Line::default());
    lines.extend(wrap_text(&problem, iw, theme::text(), &[]));
    if let Some(fix) = fix {
        lines.push(Line::default());
        lines.extend(kv("What to do", fix, iw, kw));
    }
    lines.push(Line::default());
    if can_create {
        lines.extend(wrap_text(
            "Create the folder on the host now (like --mkdir)?",
            iw,
            theme::text(),
            &[],
        ));
        lines.extend(options(
            &[
                ("y", "create it and open the session there"),
                ("n", "quit (exit code 5)"),
            ],
            None,
        ));
    } else {
        lines.extend(wrap_text("Retrying will not help.", iw, theme::dim(), &[]));
        lines.extend(options(&[("Enter", "quit (exit code 5)")], None));
    }
    show_modal(frame, area, "Cannot connect", theme::error(), lines, max_w);
}
