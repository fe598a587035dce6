//! The subagent panel beside the conversation (one row per running child: id, task, step,
//! tokens, the tool it runs, elapsed) and the child transcript overlay (`Ctrl-G`).

use super::modal::show_modal;
use super::*;
use crate::tui::app::ChildView;

/// Rows of the panel shown: one per running child, at most [`MAX_ROWS`] (a last row says
/// how many more), none when no child runs.
pub(super) const MAX_ROWS: usize = 4;

/// Height of the panel for `app`.
pub(super) fn panel_height(app: &App) -> u16 {
    let n = app.children.running().len();
    if n == 0 {
        0
    } else if n > MAX_ROWS {
        MAX_ROWS as u16 + 1
    } else {
        n as u16
    }
}

/// One row of the panel for child `c`.
fn row(app: &App, c: &ChildView, w: usize) -> Line<'static> {
    let task = c.task.lines().next().unwrap_or_default();
    let elapsed = fmt_dur(secs(app.wall_ms - c.started_ms));
    let doing = match &c.tool {
        Some(t) => format!(" · {t}"),
        None => String::new(),
    };
    let tail = format!(
        " · step {} · {} tok{doing} · {elapsed}",
        c.steps + 1,
        fmt_tokens(c.tokens)
    );
    let head = format!("  {} {} ", spinner(app), c.id);
    let room = w.saturating_sub(text_width(&head) + text_width(&tail));
    Line::from(vec![
        Span::styled(head, theme::warn()),
        Span::styled(truncate(&sanitize(task), room), theme::text()),
        Span::styled(tail, theme::dim()),
    ])
}

/// Draw the panel into `area` (its height from [`panel_height`]).
pub(super) fn render_panel(app: &App, frame: &mut Frame<'_>, area: Rect) {
    if area.height == 0 {
        return;
    }
    let running = app.children.running();
    let w = area.width as usize;
    let mut lines: Vec<Line<'static>> = running
        .iter()
        .take(MAX_ROWS)
        .map(|c| row(app, c, w))
        .collect();
    if running.len() > MAX_ROWS {
        lines.push(Line::from(Span::styled(
            format!(
                "  … {} more subagents · Ctrl-G to see them",
                running.len() - MAX_ROWS
            ),
            theme::dim(),
        )));
    } else if let Some(first) = lines.first_mut() {
        // The key that opens them, on the first row when there is room.
        let used: usize = first.spans.iter().map(|s| text_width(&s.content)).sum();
        let hint = "  Ctrl-G view";
        if used + text_width(hint) <= w {
            first.spans.push(Span::styled(hint, theme::dim()));
        }
    }
    frame.render_widget(Paragraph::new(lines), area);
}

/// The child overlay: its state and what it did, scrollable.
pub(super) fn render_child(
    app: &App,
    id: &str,
    scroll: usize,
    frame: &mut Frame<'_>,
    area: Rect,
    max_w: u16,
    iw: usize,
) {
    let mut lines: Vec<Line<'static>> = Vec::new();
    let Some(c) = app.children.get(id) else {
        app.overlay_max_scroll.set(0);
        show_modal(
            frame,
            area,
            "Subagent",
            theme::border_active(),
            vec![Line::from(format!("no subagent {id}"))],
            max_w,
        );
        return;
    };
    let state = match &c.ended {
        Some(how) => how.clone(),
        None => format!(
            "running{} · {}",
            c.tool.as_ref().map(|t| format!(" {t}")).unwrap_or_default(),
            fmt_dur(secs(app.wall_ms - c.started_ms))
        ),
    };
    lines.push(Line::from(vec![
        Span::styled(format!("{} ", c.id), theme::heading()),
        Span::styled(
            format!(
                "{state} · {} steps · {} tokens · parent call {}",
                c.steps,
                fmt_tokens(c.tokens),
                c.call_id
            ),
            theme::dim(),
        ),
    ]));
    lines.push(Line::default());
    let mut body: Vec<Line<'static>> = Vec::new();
    for entry in &c.log {
        for (i, l) in sanitize(entry).lines().enumerate() {
            let indent = if i == 0 { "" } else { "  " };
            body.extend(wrap_text(&format!("{indent}{l}"), iw, theme::text(), &[]));
        }
    }
    if !c.streaming.is_empty() {
        body.extend(wrap_text(
            &format!("◆ {}", sanitize(&c.streaming)),
            iw,
            theme::dim(),
            &[],
        ));
    }
    let room = (area.height as usize).saturating_sub(8).max(1);
    let max_scroll = body.len().saturating_sub(room);
    let s = scroll.min(max_scroll);
    app.overlay_max_scroll.set(max_scroll);
    lines.extend(body.into_iter().skip(s).take(room));
    lines.push(Line::default());
    let n = app.children.all().len();
    let keys = format!(
        "{}Tab next of {n}{} · Esc close",
        if max_scroll > 0 {
            format!("↑/↓ scroll ({s}/{max_scroll}) · ")
        } else {
            String::new()
        },
        if c.ended.is_none() {
            " · x cancel it"
        } else {
            ""
        }
    );
    lines.push(Line::from(Span::styled(keys, theme::dim())));
    show_modal(
        frame,
        area,
        &format!("Subagent {}", c.id),
        theme::border_active(),
        lines,
        max_w,
    );
}
