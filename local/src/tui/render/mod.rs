//! Drawing the [`App`] into a ratatui frame. Pure: reads the state, writes cells.

mod always;
mod children;
mod composer;
mod context;
mod modal;
mod overlay;
mod status;
mod terminal;

use ratatui::layout::{Position, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Padding, Paragraph};
use ratatui::Frame;
use reasonix_bootstrap::{HostKeyStatus, SecretPurpose, Stage};
use reasonix_forward::proto::{ClientRole, TurnState};

use super::app::{
    App, CompKind, ConnView, MemoryAsk, Overlay, PromptModal, SlashCommand, KEYS, PLAN_ANSWERS,
};
use super::diff;
use super::theme;
use super::transcript::Scroll;
use super::wrap::{sanitize, truncate, truncate_left, width as text_width, wrap_line, wrap_text};

use composer::{composer_height, render_completion, render_composer};
use modal::render_modal;
use overlay::render_overlay;
use status::render_status;

/// Draw the whole screen.
pub fn render(app: &App, frame: &mut Frame<'_>) {
    let mut area = frame.area();
    if area.width < 10 || area.height < 5 {
        frame.render_widget(Paragraph::new("terminal too small"), area);
        return;
    }
    if terminal::has_tabs(app) {
        terminal::render_tab_bar(app, frame, Rect::new(area.x, area.y, area.width, 1));
        area = Rect::new(area.x, area.y + 1, area.width, area.height - 1);
        if terminal::render_active(app, frame, area) {
            return;
        }
    }
    let modal = app.modal_open();
    let composer_rows = if modal {
        0
    } else {
        composer_height(app, area.width)
    };
    let status_h = 1u16;
    let activity_h = 1u16;
    // The running subagents, beside the conversation (never more than a third of it).
    let children_h = if modal {
        0
    } else {
        children::panel_height(app).min(area.height / 3)
    };
    let transcript_h = area
        .height
        .saturating_sub(status_h + activity_h + composer_rows + children_h)
        .max(1);
    let transcript = Rect::new(area.x, area.y, area.width, transcript_h);
    let panel = Rect::new(area.x, area.y + transcript_h, area.width, children_h);
    let activity = Rect::new(
        area.x,
        area.y + transcript_h + children_h,
        area.width,
        activity_h,
    );
    let composer = Rect::new(area.x, activity.y + activity_h, area.width, composer_rows);
    let status = Rect::new(
        area.x,
        area.y + area.height - status_h,
        area.width,
        status_h,
    );

    render_transcript(app, frame, transcript);
    children::render_panel(app, frame, panel);
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

pub(super) fn spinner(app: &App) -> &'static str {
    theme::spinner((app.mono_ms.max(0) / 100) as u64)
}

pub(super) fn secs(ms: i64) -> u64 {
    (ms.max(0) / 1000) as u64
}

pub(super) fn fmt_dur(secs: u64) -> String {
    if secs < 60 {
        format!("{secs}s")
    } else if secs < 3600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60)
    }
}

pub(super) fn fmt_tokens(n: u64) -> String {
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

pub(super) fn render_transcript(app: &App, frame: &mut Frame<'_>, area: Rect) {
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

pub(super) fn render_activity(app: &App, frame: &mut Frame<'_>, area: Rect) {
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
