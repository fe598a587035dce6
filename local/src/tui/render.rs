//! Drawing the [`App`] into a ratatui frame. Pure: reads the state, writes cells.

use ratatui::layout::{Position, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Padding, Paragraph};
use ratatui::Frame;
use reasonix_bootstrap::{HostKeyStatus, SecretPurpose, Stage};
use reasonix_forward::proto::{ClientRole, TurnState};

use super::app::{App, CompKind, ConnView, Overlay, PromptModal, COMMANDS, KEYS};
use super::diff;
use super::theme;
use super::transcript::Scroll;
use super::wrap::{sanitize, truncate, truncate_left, width as text_width, wrap_line, wrap_text};

/// Draw the whole screen.
pub fn render(app: &App, frame: &mut Frame<'_>) {
    let area = frame.area();
    if area.width < 10 || area.height < 5 {
        frame.render_widget(Paragraph::new("terminal too small"), area);
        return;
    }
    let modal = app.modal_open();
    let composer_rows = if modal {
        0
    } else {
        composer_height(app, area.width)
    };
    let status_h = 1u16;
    let activity_h = 1u16;
    let transcript_h = area
        .height
        .saturating_sub(status_h + activity_h + composer_rows)
        .max(1);
    let transcript = Rect::new(area.x, area.y, area.width, transcript_h);
    let activity = Rect::new(area.x, area.y + transcript_h, area.width, activity_h);
    let composer = Rect::new(area.x, activity.y + activity_h, area.width, composer_rows);
    let status = Rect::new(
        area.x,
        area.y + area.height - status_h,
        area.width,
        status_h,
    );

    render_transcript(app, frame, transcript);
    render_activity(app, frame, activity);
    if !modal {
        render_composer(app, frame, composer);
        render_completion(app, frame, transcript, composer);
    }
    render_status(app, frame, status);
    if modal {
        let body = Rect::new(area.x, area.y, area.width, area.height - status_h);
        render_modal(app, frame, body);
    }
}

fn spinner(app: &App) -> &'static str {
    theme::spinner((app.mono_ms.max(0) / 100) as u64)
}

fn secs(ms: i64) -> u64 {
    (ms.max(0) / 1000) as u64
}

fn fmt_dur(secs: u64) -> String {
    if secs < 60 {
        format!("{secs}s")
    } else if secs < 3600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60)
    }
}

fn fmt_tokens(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else if n >= 10_000 {
        format!("{:.0}k", n as f64 / 1e3)
    } else if n >= 1000 {
        format!("{:.1}k", n as f64 / 1e3)
    } else {
        n.to_string()
    }
}

fn render_transcript(app: &App, frame: &mut Frame<'_>, area: Rect) {
    app.view.set((area.width, area.height));
    if app.transcript.is_empty() {
        let w = area.width as usize;
        let mut lines = vec![Line::default()];
        lines.push(Line::from(vec![
            Span::raw("  "),
            Span::styled("Reasonix", theme::heading()),
            Span::styled(format!(" · {}", app.settings.workspace), theme::dim()),
        ]));
        lines.push(Line::default());
        for t in [
            "Type a request and press Enter. Shift+Enter or Alt+Enter adds a line.",
            "/ opens the command list, @ completes a workspace file to attach.",
            "/help lists every key. Ctrl-C cancels a running turn; twice quits.",
        ] {
            lines.extend(wrap_text(t, w, theme::dim(), &[Span::raw("  ")]));
        }
        frame.render_widget(Paragraph::new(lines), area);
        return;
    }
    let ctx = app.layout_ctx(area.width as usize);
    let rows = app
        .transcript
        .window(&ctx, area.height as usize, app.scroll);
    frame.render_widget(Paragraph::new(rows), area);
    if app.scroll != Scroll::Follow && area.height > 1 {
        let label = " scrolled up · End or Esc to follow ";
        let w = text_width(label) as u16;
        let x = area.x + area.width.saturating_sub(w + 1);
        let r = Rect::new(x, area.y + area.height - 1, w.min(area.width), 1);
        frame.render_widget(Clear, r);
        frame.render_widget(
            Paragraph::new(Span::styled(
                label,
                theme::warn().add_modifier(Modifier::REVERSED),
            )),
            r,
        );
    }
}

fn render_activity(app: &App, frame: &mut Frame<'_>, area: Rect) {
    let w = area.width as usize;
    let line = if let Some((hint, _)) = &app.hint {
        Line::from(Span::styled(
            format!("  {}", truncate(hint, w.saturating_sub(2))),
            theme::warn(),
        ))
    } else {
        let elapsed = app
            .turn_started
            .map(|t| format!(" {}", fmt_dur(secs(app.mono_ms - t))))
            .unwrap_or_default();
        let mut spans: Vec<Span<'static>> = match app.turn_state {
            TurnState::Running => vec![
                Span::styled(format!("  {} ", spinner(app)), theme::warn()),
                Span::styled(format!("working{elapsed}"), theme::warn()),
                Span::styled(
                    if app.role == Some(ClientRole::Spectator) {
                        " · driven by another client"
                    } else {
                        " · Ctrl-C to cancel"
                    },
                    theme::dim(),
                ),
            ],
            TurnState::WaitingForApproval => vec![Span::styled(
                format!(
                    "  waiting for approval{}",
                    if app.role == Some(ClientRole::Spectator) {
                        " by the driver"
                    } else {
                        ""
                    }
                ),
                theme::warn(),
            )],
            TurnState::WaitingForLaptop => vec![Span::styled(
                format!(
                    "  {} {}",
                    spinner(app),
                    app.turn_detail
                        .clone()
                        .unwrap_or_else(|| "waiting for laptop".into())
                ),
                theme::warn(),
            )],
            TurnState::Paused => vec![Span::styled(
                "  paused at the step limit · /continue to go on",
                theme::warn(),
            )],
            TurnState::Idle => Vec::new(),
        };
        if app.sending.is_some() && spans.is_empty() {
            spans.push(Span::styled(
                format!("  {} sending…", spinner(app)),
                theme::dim(),
            ));
        }
        if app.queued.is_some() {
            spans.push(Span::styled("  · 1 message queued", theme::dim()));
        }
        Line::from(spans)
    };
    frame.render_widget(Paragraph::new(line), area);
}

fn composer_height(app: &App, width: u16) -> u16 {
    let (rows, _) = app.composer.layout((width as usize).saturating_sub(2));
    rows.len().clamp(1, 8) as u16 + 1
}

fn render_composer(app: &App, frame: &mut Frame<'_>, area: Rect) {
    if area.height == 0 {
        return;
    }
    let w = area.width as usize;
    let hint = " Enter send · Shift+Enter newline · /help ";
    let mut top = vec![Span::styled(
        "─".repeat(w.saturating_sub(text_width(hint) + 2).min(w)),
        theme::border(),
    )];
    if w > text_width(hint) + 10 {
        top.push(Span::styled(hint, theme::dim()));
        top.push(Span::styled("──", theme::border()));
    } else {
        top = vec![Span::styled("─".repeat(w), theme::border())];
    }
    frame.render_widget(
        Paragraph::new(Line::from(top)),
        Rect::new(area.x, area.y, area.width, 1),
    );
    let body = Rect::new(area.x, area.y + 1, area.width, area.height - 1);
    let inner_w = w.saturating_sub(2);
    let (rows, (cur_row, cur_col)) = app.composer.layout(inner_w);
    let spectator = app.role == Some(ClientRole::Spectator);
    if app.composer.is_empty() {
        let placeholder = if spectator {
            "read-only spectator · /takeover to drive"
        } else {
            "Ask Reasonix… (/ commands, @ files)"
        };
        frame.render_widget(
            Paragraph::new(Line::from(vec![
                Span::styled("> ", theme::user_marker()),
                Span::styled(truncate(placeholder, inner_w), theme::dim()),
            ])),
            body,
        );
        frame.set_cursor_position(Position::new(body.x + 2, body.y));
        return;
    }
    let visible = body.height as usize;
    let first = (cur_row + 1).saturating_sub(visible);
    let lines: Vec<Line<'static>> = rows
        .iter()
        .enumerate()
        .skip(first)
        .take(visible)
        .map(|(i, r)| {
            let p = if i == 0 {
                Span::styled("> ", theme::user_marker())
            } else {
                Span::raw("  ")
            };
            Line::from(vec![p, Span::raw(r.clone())])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), body);
    let y = body.y + (cur_row - first) as u16;
    let x = body.x + 2 + cur_col as u16;
    frame.set_cursor_position(Position::new(
        x.min(body.x + body.width.saturating_sub(1)),
        y,
    ));
}

fn render_completion(app: &App, frame: &mut Frame<'_>, transcript: Rect, composer: Rect) {
    let Some(c) = &app.completion else {
        return;
    };
    let max_rows = 8usize
        .min(transcript.height.saturating_sub(2) as usize)
        .max(1);
    let n = if c.loading {
        1
    } else {
        c.items.len().min(max_rows)
    };
    let w = transcript.width.saturating_sub(2).min(64);
    let h = n as u16 + 2;
    let y = composer.y.saturating_sub(h + 1).max(transcript.y);
    let area = Rect::new(transcript.x + 1, y, w, h);
    let title = match &c.kind {
        CompKind::Slash => " commands ".to_string(),
        CompKind::Path { dir } => {
            let d = if dir.is_empty() {
                "./".to_string()
            } else {
                format!("{dir}/")
            };
            format!(" {} ", truncate_left(&d, (w as usize).saturating_sub(6)))
        }
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme::border_active())
        .title(Span::styled(title, theme::dim()));
    let inner = block.inner(area);
    frame.render_widget(Clear, area);
    frame.render_widget(block, area);
    let iw = inner.width as usize;
    if c.loading {
        frame.render_widget(
            Paragraph::new(Span::styled(
                format!("{} listing…", spinner(app)),
                theme::dim(),
            )),
            inner,
        );
        return;
    }
    let first = (c.sel + 1).saturating_sub(n);
    // Descriptions line up in one column.
    let col = c
        .items
        .iter()
        .map(|it| text_width(&it.label))
        .max()
        .unwrap_or(0)
        + 2;
    let col = if c.kind == CompKind::Slash {
        col.min(iw / 2)
    } else {
        0
    };
    let lines: Vec<Line<'static>> = c
        .items
        .iter()
        .enumerate()
        .skip(first)
        .take(n)
        .map(|(i, it)| {
            let label_w = text_width(&it.label).max(col).min(iw);
            let detail = truncate(&it.detail, iw.saturating_sub(label_w + 2));
            let pad = iw.saturating_sub(label_w + text_width(&detail));
            let base = if i == c.sel {
                theme::selected()
            } else {
                Style::default()
            };
            let label_style = if it.is_dir {
                base.patch(theme::heading())
            } else {
                base
            };
            let label = truncate(&it.label, iw);
            let gap = label_w.saturating_sub(text_width(&label));
            if c.kind == CompKind::Slash {
                let pad = iw.saturating_sub(label_w + text_width(&detail));
                return Line::from(vec![
                    Span::styled(label, label_style),
                    Span::styled(" ".repeat(gap), base),
                    Span::styled(detail, base.patch(theme::dim())),
                    Span::styled(" ".repeat(pad), base),
                ]);
            }
            Line::from(vec![
                Span::styled(label, label_style),
                Span::styled(" ".repeat(pad + gap), base),
                Span::styled(detail, base.patch(theme::dim())),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The status bar: segments in priority order; on narrow terminals low-priority segments
/// drop out, the connection text gets terse and the workspace is shortened from the left.
fn render_status(app: &App, frame: &mut Frame<'_>, area: Rect) {
    let w = area.width as usize;
    let (conn, conn_short, conn_style): (String, String, Style) = match &app.conn {
        ConnView::Connecting => {
            let s = format!("{} connecting", spinner(app));
            (s.clone(), s, theme::warn())
        }
        ConnView::Connected => {
            let s = match (app.role, app.turn_state) {
                (Some(ClientRole::Spectator), _) => "read-only spectator",
                (_, TurnState::WaitingForLaptop) => "waiting for laptop",
                _ => "connected",
            };
            let style = if s == "connected" {
                theme::ok()
            } else {
                theme::warn()
            };
            (s.to_string(), s.to_string(), style)
        }
        ConnView::Reconnecting {
            attempt,
            next_at,
            last_contact_secs,
            reported_at,
            ..
        } => {
            let next = secs(next_at - app.mono_ms + 999);
            let last = last_contact_secs + secs(app.mono_ms - reported_at);
            (
                format!(
                    "reconnecting — attempt {attempt}, next in {next}s, last contact {last}s ago"
                ),
                format!("reconnecting #{attempt} in {next}s, seen {last}s ago"),
                theme::warn(),
            )
        }
        ConnView::Failed { .. } => ("disconnected".into(), "disconnected".into(), theme::error()),
    };
    let model = app
        .last_model
        .clone()
        .or_else(|| app.model.clone())
        .unwrap_or_else(|| "default model".into());
    let t = &app.totals;
    // (priority, text, style); priority 0 never drops.
    let mut segs: Vec<(u8, String, Style)> = vec![
        (0, app.settings.workspace.clone(), theme::text()),
        (0, conn, conn_style),
        (2, model, theme::text()),
        (
            3,
            format!(
                "in {} out {}",
                fmt_tokens(t.prompt),
                fmt_tokens(t.completion)
            ),
            theme::dim(),
        ),
    ];
    if let Some(p) = t.cache_pct() {
        segs.push((4, format!("cache {p:.0}%"), theme::dim()));
    }
    if let Some(c) = t.cost {
        segs.push((5, format!("${c:.4}"), theme::dim()));
    }
    if let Some(s) = &app.sandbox {
        let style = if s.starts_with("unavailable") || s.starts_with("off") {
            theme::warn()
        } else {
            theme::dim()
        };
        segs.push((6, format!("sandbox {s}"), style));
    }
    // Width of the bar with the workspace (segment 0) counted as `ws` columns.
    let total = |segs: &[(u8, String, Style)], ws: usize| -> usize {
        segs.iter().skip(1).map(|s| text_width(&s.1)).sum::<usize>()
            + ws
            + segs.len().saturating_sub(1) * 3
            + 2
    };
    let full = text_width(&segs[0].1);
    let min_ws = full.min(20);
    let drop_while = |segs: &mut Vec<(u8, String, Style)>, min_prio: u8, ws: usize| {
        while total(segs, ws) > w {
            let Some((idx, _)) = segs
                .iter()
                .enumerate()
                .filter(|(_, s)| s.0 >= min_prio)
                .max_by_key(|(_, s)| s.0)
            else {
                break;
            };
            segs.remove(idx);
        }
    };
    // The full connection text (attempt, countdown, last contact) beats token figures.
    drop_while(&mut segs, 3, full);
    if total(&segs, full) > w {
        segs[1].1 = conn_short;
    }
    drop_while(&mut segs, 1, min_ws);
    let room = w.saturating_sub(total(&segs, 0));
    segs[0].1 = shorten_workspace(&segs[0].1, room.max(8));
    if total(&segs, text_width(&segs[0].1)) > w {
        let others = total(&segs, text_width(&segs[0].1)) - text_width(&segs[1].1);
        segs[1].1 = truncate(&segs[1].1, w.saturating_sub(others).max(8));
    }
    let mut spans = vec![Span::raw(" ")];
    for (i, (_, text, style)) in segs.into_iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled(" │ ", theme::border()));
        }
        spans.push(Span::styled(text, style));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// Shorten `host:/path` keeping the host and the end of the path (`me@box:…/project`).
fn shorten_workspace(label: &str, max: usize) -> String {
    if text_width(label) <= max {
        return label.to_string();
    }
    match label.split_once(':') {
        Some((host, path)) if !host.contains('/') && text_width(host) + 6 <= max => {
            let room = max - text_width(host) - 1;
            format!("{host}:{}", truncate_left(path, room))
        }
        _ => truncate_left(label, max),
    }
}

/// A centred box of at most `w`×`h` inside `area`, cleared, with a border and title.
fn modal_box(frame: &mut Frame<'_>, area: Rect, w: u16, h: u16, title: &str, style: Style) -> Rect {
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
fn show_modal(
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
fn kv_rows(key: &str, values: &[String], width: usize, key_w: usize) -> Vec<Line<'static>> {
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

fn kv(key: &str, value: String, width: usize, key_w: usize) -> Vec<Line<'static>> {
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

fn options(items: &[(&str, &str)], sel: Option<usize>) -> Vec<Line<'static>> {
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

fn render_modal(app: &App, frame: &mut Frame<'_>, area: Rect) {
    // Narrow terminals get full-width modals: slivers of transcript beside them only confuse.
    let max_w = if area.width <= 90 { area.width } else { 84 };
    let iw = max_w.saturating_sub(4) as usize;
    if let Some(p) = app.prompts.front() {
        render_prompt(p, frame, area, max_w, iw);
        return;
    }
    if let Some(a) = app.active_approval() {
        let mut lines = Vec::new();
        let arg = super::transcript::key_arg(&a.tool, &a.arguments);
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
        // Room for the preview: the whole screen minus borders, header and options.
        let fixed = lines.len() + 1 + 4 + 2 + 1;
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
        lines.extend(options(
            &[
                ("1 y", "allow once"),
                ("2 s", "allow for this session"),
                ("3 a", "always allow (saved as a rule)"),
                ("4 n", "deny"),
            ],
            Some(app.approval_sel),
        ));
        let more = app.approvals.len().saturating_sub(1);
        let title = if more > 0 {
            format!("Approval needed (+{more} more)")
        } else {
            "Approval needed".to_string()
        };
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

fn render_prompt(p: &PromptModal, frame: &mut Frame<'_>, area: Rect, max_w: u16, iw: usize) {
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

fn fmt_bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.0} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

fn render_progress(app: &App, frame: &mut Frame<'_>, area: Rect, max_w: u16, iw: usize) {
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
                    fmt_bytes(done),
                    fmt_bytes(total)
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

fn render_overlay(
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
            for (name, arg, desc) in COMMANDS {
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
                ConnView::Failed { reason } => format!("disconnected: {reason}"),
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
            let mut lines = Vec::new();
            match list {
                None => lines.push(Line::from(Span::styled(
                    format!("{} loading…", spinner(app)),
                    theme::dim(),
                ))),
                Some(l) if l.is_empty() => {
                    lines.push(Line::from(Span::styled("no sessions yet", theme::dim())))
                }
                Some(l) => {
                    let room = (area.height as usize).saturating_sub(5).max(1);
                    let first = (*sel + 1).saturating_sub(room);
                    for (i, s) in l.iter().enumerate().skip(first).take(room) {
                        let base = if i == *sel {
                            theme::selected()
                        } else {
                            Style::default()
                        };
                        let current = app.session.as_deref() == Some(s.id.as_str());
                        let meta = format!(
                            "{}{} · {} · ",
                            if current { "* " } else { "  " },
                            s.created.get(..16).unwrap_or(&s.created).replace('T', " "),
                            theme::plural(s.turns, "turn", "turns")
                        );
                        let title = truncate(&s.title, iw.saturating_sub(text_width(&meta)));
                        let pad = iw.saturating_sub(text_width(&meta) + text_width(&title));
                        lines.push(Line::from(vec![
                            Span::styled(meta, base.patch(theme::dim())),
                            Span::styled(title, base),
                            Span::styled(" ".repeat(pad), base),
                        ]));
                    }
                }
            }
            lines.push(Line::default());
            lines.push(Line::from(Span::styled(
                "↑/↓ choose · Enter resume · Esc close",
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
fn mcp_lines(
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
                .map(|t| sanitize(&super::mcp::short_tool(&s.name, t)))
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
