//! Terminal tabs: the tab bar and a host PTY's screen (from the tab's `vt100` model) with
//! its colours, attributes and cursor.

use ratatui::buffer::Buffer;
use ratatui::style::Color;

use super::*;
use crate::tui::app::TermTab;

/// True when the tab bar is shown (there is at least one terminal).
pub(super) fn has_tabs(app: &App) -> bool {
    !app.terms.tabs.is_empty()
}

/// The tab bar: the conversation, then each terminal by id; the one shown highlighted.
pub(super) fn render_tab_bar(app: &App, frame: &mut Frame<'_>, area: Rect) {
    let w = area.width as usize;
    let mut spans = Vec::new();
    let tab = |label: String, active: bool, style: Style| {
        Span::styled(
            format!(" {label} "),
            if active { theme::selected() } else { style },
        )
    };
    let waiting = app.active_approval().is_some();
    spans.push(tab(
        if waiting {
            "chat (approval waiting)".into()
        } else {
            "chat".into()
        },
        app.terms.active.is_none(),
        if waiting {
            theme::warn()
        } else {
            theme::text()
        },
    ));
    for (i, t) in app.terms.tabs.iter().enumerate() {
        spans.push(Span::styled("│", theme::dim()));
        spans.push(tab(
            format!("{} {}", t.pty, t.shell),
            app.terms.active == Some(i),
            theme::text(),
        ));
    }
    let used: usize = spans.iter().map(|s| text_width(&s.content)).sum();
    let right = match &app.hint {
        Some((h, _)) => format!(" {h} "),
        None => " Ctrl-T next tab ".into(),
    };
    let room = w.saturating_sub(used);
    if room > 4 {
        let right = truncate(&right, room);
        let pad = room.saturating_sub(text_width(&right));
        spans.push(Span::raw(" ".repeat(pad)));
        spans.push(Span::styled(
            right,
            if app.hint.is_some() {
                theme::warn()
            } else {
                theme::dim()
            },
        ));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// Draw the shown terminal tab with the status line below it; false when the conversation
/// (or a question from the SSH code, which has priority) is shown instead.
pub(super) fn render_active(app: &App, frame: &mut Frame<'_>, area: Rect) -> bool {
    if !app.prompts.is_empty() || app.progress.active {
        return false;
    }
    let Some(tab) = app.terms.active_tab() else {
        return false;
    };
    let status_h = 1u16;
    let body = Rect::new(
        area.x,
        area.y,
        area.width,
        area.height.saturating_sub(status_h),
    );
    let status = Rect::new(area.x, area.y + body.height, area.width, status_h);
    render_screen(tab, frame.buffer_mut(), body);
    let screen = tab.parser.screen();
    if !screen.hide_cursor() {
        let (row, col) = screen.cursor_position();
        if row < body.height && col < body.width {
            frame.set_cursor_position(Position::new(body.x + col, body.y + row));
        }
    }
    render_status(app, frame, status);
    true
}

fn color(c: vt100::Color) -> Color {
    match c {
        vt100::Color::Default => Color::Reset,
        vt100::Color::Idx(i) => Color::Indexed(i),
        vt100::Color::Rgb(r, g, b) => Color::Rgb(r, g, b),
    }
}

/// Copy the model's cells into the buffer (what does not fit is cut, blanks fill the rest).
pub(super) fn render_screen(tab: &TermTab, buf: &mut Buffer, area: Rect) {
    let screen = tab.parser.screen();
    for y in 0..area.height {
        for x in 0..area.width {
            let Some(out) = buf.cell_mut(Position::new(area.x + x, area.y + y)) else {
                continue;
            };
            out.reset();
            let Some(cell) = screen.cell(y, x) else {
                continue;
            };
            if cell.is_wide_continuation() {
                // Covered by the wide character on its left (ratatui skips it when drawing).
                continue;
            }
            let mut style = Style::default()
                .fg(color(cell.fgcolor()))
                .bg(color(cell.bgcolor()));
            let mut m = Modifier::empty();
            if cell.bold() {
                m |= Modifier::BOLD;
            }
            if cell.dim() {
                m |= Modifier::DIM;
            }
            if cell.italic() {
                m |= Modifier::ITALIC;
            }
            if cell.underline() {
                m |= Modifier::UNDERLINED;
            }
            if cell.inverse() {
                m |= Modifier::REVERSED;
            }
            style = style.add_modifier(m);
            let text = cell.contents();
            out.set_symbol(if text.is_empty() { " " } else { text });
            out.set_style(style);
        }
    }
}
