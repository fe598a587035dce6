//! Layout of each entry kind: text, reasoning, tool cards, notices, steers and `!` commands.

use super::*;

/// Lay out one entry. Every entry starts with a blank separator row.
pub(super) fn layout(kind: &EntryKind, ctx: &LayoutCtx) -> Vec<Line<'static>> {
    let w = ctx.width.max(8);
    let mut out = vec![Line::default()];
    match kind {
        EntryKind::User { text, .. } => {
            let first = [Span::styled("> ", theme::user_marker())];
            let rest = [Span::raw("  ")];
            for (n, l) in text.split('\n').enumerate() {
                let spans = [Span::styled(
                    sanitize(l),
                    theme::text().add_modifier(Modifier::BOLD),
                )];
                out.extend(wrap_line(
                    &spans,
                    w,
                    if n == 0 { &first } else { &rest },
                    &rest,
                ));
            }
        }
        EntryKind::Assistant { text, .. } => {
            for l in markdown::render(text, w.saturating_sub(2)) {
                let mut spans = vec![Span::raw("  ")];
                spans.extend(l.spans);
                out.push(Line::from(spans));
            }
            if out.len() == 1 {
                out.push(Line::from(Span::styled("  …", theme::dim())));
            }
        }
        EntryKind::Reasoning { text, streaming } => {
            let style = theme::dim().add_modifier(Modifier::ITALIC);
            let n_lines = text.trim().lines().count();
            let gutter = [Span::styled("  ┊ ", theme::gutter())];
            if *streaming && !ctx.show_reasoning {
                out.push(Line::from(Span::styled("  thinking…", style)));
                let wrapped = wrap_text(text.trim(), w, style, &gutter);
                let start = wrapped.len().saturating_sub(4);
                out.extend(wrapped.into_iter().skip(start));
            } else if ctx.show_reasoning {
                out.push(Line::from(Span::styled(
                    if *streaming {
                        "  thinking…"
                    } else {
                        "  thought"
                    },
                    style,
                )));
                out.extend(wrap_text(text.trim(), w, style, &gutter));
            } else {
                out.push(Line::from(Span::styled(
                    format!(
                        "  thought · {n_lines} line{} (Ctrl-O to show)",
                        if n_lines == 1 { "" } else { "s" }
                    ),
                    style,
                )));
            }
        }
        EntryKind::Tool(card) => out.extend(tool_card(card, ctx, w)),
        EntryKind::Steer {
            text, delivered, ..
        } => out.extend(crate::tui::workbench::steer_lines(text, *delivered, w)),
        EntryKind::Shell {
            command,
            output,
            is_error,
            added_to_context,
            running,
        } => out.extend(crate::tui::workbench::shell_lines(
            command,
            output,
            *is_error,
            *added_to_context,
            *running,
            w,
        )),
        EntryKind::Notice { text, level } => {
            let (mark, style) = match level {
                Level::Info => ("  · ", theme::dim()),
                Level::Warn => ("  ! ", theme::warn()),
                Level::Error => ("  x ", theme::error()),
            };
            let first = [Span::styled(mark, style)];
            let rest = [Span::raw("    ")];
            for (n, l) in text.split('\n').enumerate() {
                out.extend(wrap_line(
                    &[Span::styled(sanitize(l), style)],
                    w,
                    if n == 0 { &first } else { &rest },
                    &rest,
                ));
            }
        }
    }
    out
}

/// The argument worth showing next to a tool's name.
pub(crate) fn key_arg(tool: &str, arguments: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(arguments) else {
        return sanitize(arguments.lines().next().unwrap_or(""));
    };
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let pick = match tool {
        "move_file" => match (s("source_path"), s("destination_path")) {
            (Some(a), Some(b)) => Some(format!("{a} → {b}")),
            (a, b) => a.or(b),
        },
        "grep" => s("pattern").map(|p| match s("path") {
            Some(path) if path != "." => format!("{p}  in {path}"),
            _ => p,
        }),
        _ => None,
    };
    let pick = pick
        .or_else(|| {
            [
                "command",
                "path",
                "file_path",
                "pattern",
                "query",
                "url",
                "job_id",
                "name",
            ]
            .iter()
            .find_map(|k| s(k))
        })
        .or_else(|| {
            v.as_object()
                .and_then(|o| o.values().find_map(|x| x.as_str().map(str::to_string)))
        })
        .unwrap_or_default();
    let first = pick.lines().next().unwrap_or("").to_string();
    let more = pick.lines().count() > 1;
    sanitize(&if more { format!("{first} …") } else { first })
}

fn fmt_elapsed(ms: i64) -> String {
    let s = ms.max(0) as f64 / 1000.0;
    if s < 60.0 {
        format!("{s:.1}s")
    } else {
        format!("{}m{:02}s", (s / 60.0) as u64, (s as u64) % 60)
    }
}

fn tool_card(card: &ToolCard, ctx: &LayoutCtx, w: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let (glyph, glyph_style, status, status_style) = match &card.state {
        ToolState::Queued if card.awaiting_approval => (
            "○",
            theme::warn(),
            "waiting for approval".to_string(),
            theme::warn(),
        ),
        ToolState::Queued => ("○", theme::dim(), "queued".to_string(), theme::dim()),
        ToolState::Running => {
            let spin = theme::spinner(ctx.frame);
            let el = card
                .started_ms
                .map(|s| format!(" {}", fmt_elapsed(ctx.now_ms - s)))
                .unwrap_or_default();
            (spin, theme::warn(), format!("running{el}"), theme::warn())
        }
        ToolState::Done { is_error: false } => {
            let el = match (card.started_ms, card.finished_ms) {
                (Some(a), Some(b)) => fmt_elapsed(b - a),
                _ => "done".into(),
            };
            ("●", theme::ok(), el, theme::dim())
        }
        ToolState::Done { is_error: true } => {
            let label = if card.decision == Some(ApprovalDecision::Deny) {
                "denied"
            } else {
                "failed"
            };
            ("●", theme::error(), label.to_string(), theme::error())
        }
    };
    let decision = match card.decision {
        Some(ApprovalDecision::AllowOnce) => " · allowed once",
        Some(ApprovalDecision::AllowSession) => " · allowed for session",
        Some(ApprovalDecision::AllowAlways) => " · always allowed",
        Some(ApprovalDecision::Deny) | None => "",
    };
    let status = format!("{status}{decision}");
    let arg = key_arg(&card.name, &card.arguments);
    let fixed = 2 + 2 + text_width(&card.name) + 1 + 2 + text_width(&status);
    let arg = truncate(&arg, w.saturating_sub(fixed).max(4));
    out.push(Line::from(vec![
        Span::raw("  "),
        Span::styled(format!("{glyph} "), glyph_style),
        Span::styled(card.name.clone(), theme::tool_name()),
        Span::raw(" "),
        Span::raw(arg),
        Span::raw("  "),
        Span::styled(status, status_style),
    ]));
    let indent = "    ";
    let gutter = [Span::styled("    │ ", theme::gutter())];
    let is_edit = diff::is_edit_tool(&card.name);
    if is_edit {
        if let Some(rows) = diff::rows_from_args(&card.name, &card.arguments) {
            // The file header repeats the path shown on the card; skip it.
            let rows: Vec<_> = rows.into_iter().skip(1).collect();
            out.extend(diff::render(&rows, w, indent, 24));
        }
    }
    match &card.state {
        ToolState::Queued => {}
        ToolState::Running => {
            let tail: Vec<&str> = card.progress.lines().collect();
            let start = tail.len().saturating_sub(3);
            for l in &tail[start..] {
                out.extend(wrap_line(
                    &[Span::styled(sanitize(l), theme::dim())],
                    w,
                    &gutter,
                    &gutter,
                ));
            }
        }
        ToolState::Done { is_error } => {
            let style = if *is_error {
                theme::error()
            } else {
                theme::dim()
            };
            let max = if *is_error {
                8
            } else if is_edit {
                1
            } else {
                5
            };
            let lines: Vec<&str> = card.output.trim_end().lines().collect();
            if lines.is_empty() && !is_error {
                out.push(Line::from(vec![
                    gutter[0].clone(),
                    Span::styled("(no output)", theme::dim()),
                ]));
            }
            for l in lines.iter().take(max) {
                let mut rows = wrap_line(&[Span::styled(sanitize(l), style)], w, &gutter, &gutter);
                rows.truncate(3);
                out.extend(rows);
            }
            if lines.len() > max {
                out.push(Line::from(vec![
                    gutter[0].clone(),
                    Span::styled(format!("… {} more lines", lines.len() - max), theme::dim()),
                ]));
            }
            if let Some(r) = &card.output_ref {
                out.push(Line::from(vec![
                    gutter[0].clone(),
                    Span::styled(
                        format!(
                            "… {} in full on the host; /output saves it to a file",
                            reasonix_forward::units::bytes(r.bytes)
                        ),
                        theme::dim(),
                    ),
                ]));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_args() {
        assert_eq!(
            key_arg("bash", r#"{"command":"cargo test\n-p x"}"#),
            "cargo test …"
        );
        assert_eq!(
            key_arg("read_file", r#"{"path":"a.rs","offset":3}"#),
            "a.rs"
        );
        assert_eq!(
            key_arg("move_file", r#"{"source_path":"a","destination_path":"b"}"#),
            "a → b"
        );
        assert_eq!(key_arg("weird", "not json"), "not json");
    }
}
