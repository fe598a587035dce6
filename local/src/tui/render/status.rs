//! The status line.

use super::*;

/// The status bar: segments in priority order; on narrow terminals low-priority segments
/// drop out, the connection text gets terse and the workspace is shortened from the left.
pub(super) fn render_status(app: &App, frame: &mut Frame<'_>, area: Rect) {
    let w = area.width as usize;
    let (conn, conn_short, conn_style): (String, String, Style) = match &app.conn {
        ConnView::Connecting => {
            let s = format!("{} connecting", spinner(app));
            (s.clone(), s, theme::warn())
        }
        // A model-request retry (#15) is what the user waits on: it takes the connection's
        // place while the link itself is fine.
        ConnView::Connected if app.retry_status().is_some() => {
            let full = app.retry_status().unwrap_or_default();
            // The terse form keeps the numbers first and the reason last, where a narrow bar
            // cuts it; a bar with room for the full text and a shortened workspace shows the
            // full text rather than token figures.
            let short = if w >= text_width(&full) + 25 {
                full.clone()
            } else {
                app.retry
                    .as_ref()
                    .map(|v| {
                        let left = (v.until_ms - app.mono_ms).max(0) as u64;
                        format!(
                            "model retry {}/{} in {}s: {}",
                            v.retry.attempt,
                            v.retry.max_attempts,
                            left.div_ceil(1000),
                            v.retry.reason
                        )
                    })
                    .unwrap_or_default()
            };
            (full, short, theme::warn())
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
    if let Some(e) = app.effort {
        // Right after the model: the two say what each request is sent with.
        segs.insert(3, (3, format!("effort {e}"), theme::dim()));
    }
    // Plan mode, or the step of an approved plan in progress.
    if app.plan.on {
        segs.insert(2, (1, "plan mode".to_string(), theme::warn()));
    } else if let Some(step) = app.plan.step_in_progress() {
        segs.insert(2, (1, step, theme::text()));
    }
    // The session's goal (#38 §3): it runs on the host with or without this client.
    if let Some(g) = app.goal.bar() {
        segs.insert(2, (1, g, theme::text()));
    }
    if let Some(p) = app.context_pct() {
        let style = if p >= 80.0 {
            theme::warn()
        } else {
            theme::dim()
        };
        segs.push((3, format!("ctx {p:.0}%"), style));
    }
    if let Some(p) = t.cache_pct() {
        segs.push((4, format!("cache {p:.0}%"), theme::dim()));
    }
    if let Some(c) = t.cost {
        segs.push((5, format!("${c:.4}"), theme::dim()));
    }
    if let Some(s) = &app.sandbox {
        let (shown, degraded) = bar_sandbox(s);
        let style = if degraded {
            theme::warn()
        } else {
            theme::dim()
        };
        segs.push((6, format!("sandbox {shown}"), style));
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
pub(super) fn shorten_workspace(label: &str, max: usize) -> String {
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

/// The sandbox state as the status bar shows it: the Landlock fallback by its name only
/// (`/status` shows what it does not cover), and whether to show it as a warning (anything
/// but bubblewrap is weaker than the default).
fn bar_sandbox(s: &str) -> (&str, bool) {
    if s.starts_with("landlock (") {
        ("landlock", true)
    } else {
        (s, s.starts_with("unavailable") || s.starts_with("off"))
    }
}

#[cfg(test)]
mod tests {
    use super::bar_sandbox;

    #[test]
    fn the_landlock_fallback_is_named_short_and_warned() {
        assert_eq!(bar_sandbox("bwrap"), ("bwrap", false));
        assert_eq!(
            bar_sandbox("landlock (ABI 7; bubblewrap unavailable: x; not covered …)"),
            ("landlock", true)
        );
        assert_eq!(bar_sandbox("off"), ("off", true));
        assert_eq!(bar_sandbox("unavailable (x)"), ("unavailable (x)", true));
    }
}
