//! Styles of the TUI. Only the 16 ANSI colours (and `Reset`) are used, so the user's terminal
//! theme decides the actual shades and light backgrounds stay readable.

use ratatui::style::{Color, Modifier, Style};

/// Default text.
pub(crate) fn text() -> Style {
    Style::default()
}

/// Secondary text (hints, timestamps, reasoning).
pub(crate) fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

/// The user's own turns.
pub(crate) fn user_marker() -> Style {
    Style::default()
        .fg(Color::Cyan)
        .add_modifier(Modifier::BOLD)
}

/// Headings in rendered Markdown.
pub(crate) fn heading() -> Style {
    Style::default()
        .fg(Color::Cyan)
        .add_modifier(Modifier::BOLD)
}

/// Inline code spans.
pub(crate) fn inline_code() -> Style {
    Style::default().fg(Color::Yellow)
}

/// Gutter of code blocks, quotes and tool output.
pub(crate) fn gutter() -> Style {
    Style::default().fg(Color::DarkGray)
}

/// Syntax: keywords.
pub(crate) fn code_keyword() -> Style {
    Style::default().fg(Color::Magenta)
}

/// Syntax: string literals.
pub(crate) fn code_string() -> Style {
    Style::default().fg(Color::Green)
}

/// Syntax: comments.
pub(crate) fn code_comment() -> Style {
    Style::default().fg(Color::DarkGray)
}

/// Syntax: numbers.
pub(crate) fn code_number() -> Style {
    Style::default().fg(Color::Cyan)
}

/// Added lines of a diff.
pub(crate) fn diff_add() -> Style {
    Style::default().fg(Color::Green)
}

/// Removed lines of a diff.
pub(crate) fn diff_del() -> Style {
    Style::default().fg(Color::Red)
}

/// Hunk headers of a diff.
pub(crate) fn diff_hunk() -> Style {
    Style::default().fg(Color::Cyan)
}

/// Something that is fine (connected, tool succeeded).
pub(crate) fn ok() -> Style {
    Style::default().fg(Color::Green)
}

/// Something that needs attention (reconnecting, cache miss, running).
pub(crate) fn warn() -> Style {
    Style::default().fg(Color::Yellow)
}

/// Something that failed.
pub(crate) fn error() -> Style {
    Style::default().fg(Color::Red)
}

/// Bold red for security warnings.
pub(crate) fn danger() -> Style {
    Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
}

/// Tool names on cards.
pub(crate) fn tool_name() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

/// Borders of modals and the composer.
pub(crate) fn border() -> Style {
    Style::default().fg(Color::DarkGray)
}

/// Border of a modal that needs an answer.
pub(crate) fn border_active() -> Style {
    Style::default().fg(Color::Cyan)
}

/// The selected row of a list.
pub(crate) fn selected() -> Style {
    Style::default().add_modifier(Modifier::REVERSED)
}

/// Key names in help texts and option lists.
pub(crate) fn key() -> Style {
    Style::default()
        .fg(Color::Cyan)
        .add_modifier(Modifier::BOLD)
}

/// Frames of the activity spinner (Braille patterns: plain text, not emoji).
const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// The spinner frame for a frame counter.
pub(crate) fn spinner(frame: u64) -> &'static str {
    SPINNER[(frame % SPINNER.len() as u64) as usize]
}

/// `n thing` / `n things`.
pub(crate) fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// 12345 -> `12,345`.
pub(crate) fn thousands(n: u64) -> String {
    let s = n.to_string();
    // Digits are ASCII, so byte slicing is on char boundaries.
    let lead = match s.len() % 3 {
        0 => 3.min(s.len()),
        r => r,
    };
    let mut out = s[..lead].to_string();
    let mut rest = &s[lead..];
    while rest.len() >= 3 {
        out.push(',');
        out.push_str(&rest[..3]);
        rest = &rest[3..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_formatting() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(123_456_789), "123,456,789");
        assert_eq!(plural(1, "turn", "turns"), "1 turn");
        assert_eq!(plural(2, "turn", "turns"), "2 turns");
    }
}
