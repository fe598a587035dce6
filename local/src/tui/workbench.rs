//! How steers and `!` shell commands look in the transcript.

use ratatui::style::Modifier;
use ratatui::text::{Line, Span};

use super::theme;
use super::wrap::{sanitize, wrap_line, wrap_text};

/// Rows of a `!` output shown in the transcript (the tail; the whole is in the journal).
pub(crate) const SHELL_ROWS: usize = 12;

/// A steer: `>> text` and whether the model has it yet.
pub(crate) fn steer_lines(text: &str, delivered: bool, w: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let first = [Span::styled("» ", theme::user_marker())];
    let rest = [Span::raw("  ")];
    for (n, l) in text.split('\n').enumerate() {
        out.extend(wrap_line(
            &[Span::styled(
                sanitize(l),
                theme::text().add_modifier(Modifier::BOLD),
            )],
            w,
            if n == 0 { &first } else { &rest },
            &rest,
        ));
    }
    out.push(Line::from(Span::styled(
        if delivered {
            "  steer · given to the model before its next step"
        } else {
            "  steer · waiting for the next model step"
        },
        theme::dim(),
    )));
    out
}

/// A `!command` and the tail of its output.
pub(crate) fn shell_lines(
    command: &str,
    output: &str,
    is_error: bool,
    added_to_context: bool,
    running: bool,
    w: usize,
) -> Vec<Line<'static>> {
    let mut out = wrap_line(
        &[Span::styled(
            sanitize(command),
            theme::text().add_modifier(Modifier::BOLD),
        )],
        w,
        &[Span::styled("! ", theme::user_marker())],
        &[Span::raw("  ")],
    );
    let gutter = [Span::styled("  │ ", theme::gutter())];
    let style = if is_error {
        theme::error()
    } else {
        theme::dim()
    };
    let body = output.trim_end();
    let lines: Vec<&str> = body.split('\n').collect();
    let skip = lines.len().saturating_sub(SHELL_ROWS);
    if skip > 0 {
        out.push(Line::from(Span::styled(
            format!("  │ … {skip} earlier line(s)"),
            theme::dim(),
        )));
    }
    out.extend(wrap_text(&lines[skip..].join("\n"), w, style, &gutter));
    out.push(Line::from(Span::styled(
        if running {
            "  shell · running…"
        } else if added_to_context {
            "  shell · output goes to the model with your next message"
        } else {
            "  shell · output kept out of the model's context"
        },
        theme::dim(),
    )));
    out
}
