//! The composer and its completion popup.

use super::*;

pub(super) fn composer_height(app: &App, width: u16) -> u16 {
    let (rows, _) = app.composer.layout((width as usize).saturating_sub(2));
    rows.len().clamp(1, 8) as u16 + 1
}

pub(super) fn render_composer(app: &App, frame: &mut Frame<'_>, area: Rect) {
    if area.height == 0 {
        return;
    }
    let w = area.width as usize;
    let hint = app.composer_hint();
    let hint = hint.as_str();
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

pub(super) fn render_completion(
    app: &App,
    frame: &mut Frame<'_>,
    transcript: Rect,
    composer: Rect,
) {
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
        CompKind::Resource => " MCP resources ".to_string(),
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
            // A label longer than the column keeps one space before its description.
            let own = text_width(&it.label) + usize::from(c.kind == CompKind::Slash);
            let label_w = own.max(col).min(iw);
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
