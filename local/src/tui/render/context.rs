//! The `/context` panel: where the window goes (system prompt, standing instructions, tool
//! schemas, conversation, tool results), the ladder's thresholds, the session's cache-hit
//! ratio and its cost so far.

use super::modal::{kv, show_modal};
use super::*;
use reasonix_forward::proto::ContextReport;

/// Draw the `/context` overlay.
pub(super) fn render_context(
    app: &App,
    report: Option<&ContextReport>,
    error: Option<&str>,
    frame: &mut Frame<'_>,
    area: Rect,
    max_w: u16,
    iw: usize,
) {
    let max_w = max_w.min(78);
    // The panel is narrower than other overlays: its text width follows.
    let iw = iw.min(usize::from(max_w).saturating_sub(4));
    let lines = context_lines(app, report, error, iw);
    show_modal(frame, area, "Context", theme::border_active(), lines, max_w);
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        String::new()
    } else {
        format!(" ({:.1} %)", part as f64 * 100.0 / whole as f64)
    }
}

/// One row: label, tokens, share of the window, and a bar of that share.
fn bar_row(label: &str, tokens: u64, window: u64, iw: usize) -> Line<'static> {
    let text = format!("{label:<22}{:>8}", fmt_tokens(tokens));
    let share = if window > 0 {
        format!("{:>7.1} %", tokens as f64 * 100.0 / window as f64)
    } else {
        String::new()
    };
    let used = text_width(&text) + text_width(&share) + 2;
    let room = iw.saturating_sub(used).min(30);
    let filled = if window > 0 {
        ((tokens as f64 / window as f64) * room as f64).ceil() as usize
    } else {
        0
    }
    .min(room);
    Line::from(vec![
        Span::styled(text, theme::text()),
        Span::styled(share, theme::dim()),
        Span::raw("  "),
        Span::styled("█".repeat(filled), theme::key()),
        Span::styled("·".repeat(room - filled), theme::dim()),
    ])
}

pub(super) fn context_lines(
    app: &App,
    report: Option<&ContextReport>,
    error: Option<&str>,
    iw: usize,
) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    if let Some(e) = error {
        lines.extend(wrap_text(
            &format!("context report failed: {e}"),
            iw,
            theme::error(),
            &[],
        ));
    } else if let Some(r) = report {
        let window = r.settings.window;
        let total = r.total();
        lines.push(Line::from(Span::styled(
            if window > 0 {
                format!(
                    "Next request: about {} of {} tokens{}",
                    fmt_tokens(total),
                    fmt_tokens(window),
                    pct(total, window)
                )
            } else {
                format!(
                    "Next request: about {} tokens (no context window configured: never compacted)",
                    fmt_tokens(total)
                )
            },
            theme::heading(),
        )));
        for (label, tokens) in [
            ("System prompt", r.system_tokens),
            ("Standing instructions", r.instructions_tokens),
            ("Tool schemas", r.tools_tokens),
            ("Conversation", r.conversation_tokens),
            ("Tool results", r.tool_result_tokens),
        ] {
            lines.push(bar_row(label, tokens, window, iw));
        }
        let kw = 14usize;
        if window > 0 {
            let at = |permille: u32| window * u64::from(permille) / 1000;
            lines.push(Line::default());
            lines.extend(kv(
                "Ladder",
                format!(
                    "snip at {} · summary at {} · forced at {} · tail {} kept",
                    fmt_tokens(at(r.settings.snip_permille)),
                    fmt_tokens(at(r.settings.compact_permille)),
                    fmt_tokens(at(r.settings.force_permille)),
                    fmt_tokens(r.settings.tail_tokens.min(window / 4)),
                ),
                iw,
                kw,
            ));
        }
        lines.extend(kv(
            "Compactions",
            format!(
                "{} snip(s), {} summary(ies) · {} messages",
                r.compactions.0, r.compactions.1, r.messages
            ),
            iw,
            kw,
        ));
        lines.extend(kv(
            "Estimate",
            format!("{:.3} tokens per byte (calibrated)", r.tokens_per_byte),
            iw,
            kw,
        ));
        // What memory recall added to the last user message (#32).
        lines.extend(kv(
            "Recall",
            match &r.recall {
                Some(rc) => format!(
                    "last message: {} fact(s), about {} tokens · {}",
                    rc.facts.len(),
                    fmt_tokens(rc.tokens),
                    rc.facts.join(", ")
                ),
                None => "nothing recalled into the last message".to_string(),
            },
            iw,
            kw,
        ));
        // The planner beside the executor (#38 §2): its conversation, and usage per model.
        if let Some(p) = &r.planner {
            lines.extend(kv(
                "Planner",
                format!(
                    "{}: about {} tokens next request · {} messages (the executor's figures are above)",
                    p.model,
                    fmt_tokens(p.tokens),
                    p.messages
                ),
                iw,
                kw,
            ));
        }
        if r.usage_by_model.len() > 1 || r.planner.is_some() {
            let mut sum = reasonix_forward::proto::Usage::default();
            for m in &r.usage_by_model {
                let u = &m.usage;
                let hit = pct(u.cache_hit_tokens, u.prompt_tokens);
                lines.extend(kv(
                    "Usage",
                    format!(
                        "{}: {} requests · {} prompt ({} from cache{hit}) · {} completion",
                        m.model,
                        m.requests,
                        fmt_tokens(u.prompt_tokens),
                        fmt_tokens(u.cache_hit_tokens),
                        fmt_tokens(u.completion_tokens)
                    ),
                    iw,
                    kw,
                ));
                sum.prompt_tokens += u.prompt_tokens;
                sum.cache_hit_tokens += u.cache_hit_tokens;
                sum.completion_tokens += u.completion_tokens;
            }
            lines.extend(kv(
                "Usage (sum)",
                format!(
                    "{} prompt ({} from cache) · {} completion",
                    fmt_tokens(sum.prompt_tokens),
                    fmt_tokens(sum.cache_hit_tokens),
                    fmt_tokens(sum.completion_tokens)
                ),
                iw,
                kw,
            ));
        }
    } else {
        lines.push(Line::from(Span::styled(
            format!("{} asking the host…", spinner(app)),
            theme::dim(),
        )));
    }
    let t = &app.totals;
    let kw = 14usize;
    lines.push(Line::default());
    lines.extend(kv(
        "Cache",
        match t.cache_pct() {
            Some(p) => format!(
                "{p:.1} % of prompt tokens from cache ({} hit, {} miss, {} requests)",
                fmt_tokens(t.cache_hit),
                fmt_tokens(t.cache_miss),
                t.requests
            ),
            None => "no cache figures reported yet".into(),
        },
        iw,
        kw,
    ));
    lines.extend(kv(
        "Cost so far",
        match t.cost {
            Some(c) => format!("${c:.4} at the configured prices"),
            None => "no prices configured for this model".into(),
        },
        iw,
        kw,
    ));
    lines.push(Line::default());
    lines.push(Line::from(Span::styled(
        "/compact [focus] summarises now · r refresh · Esc close",
        theme::dim(),
    )));
    lines
}
