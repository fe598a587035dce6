//! Coloured diffs for file-editing tool calls, computed from their arguments
//! (`edit_file`/`multi_edit`: old_string → new_string; `write_file`: the new content), or
//! taken from a unified diff preview the host sent.

use ratatui::text::{Line, Span};
use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use super::theme;
use super::wrap::{sanitize, wrap_line};

/// One row of a diff before wrapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DiffRow {
    /// A file or hunk header.
    Header(String),
    /// Unchanged context.
    Context(String),
    /// Added line.
    Add(String),
    /// Removed line.
    Del(String),
    /// Elision marker.
    Gap(String),
}

/// Tools whose arguments describe a file change.
pub(crate) fn is_edit_tool(name: &str) -> bool {
    matches!(name, "edit_file" | "multi_edit" | "write_file")
}

/// Rows of the change described by an edit tool's JSON arguments; `None` when the tool is not
/// an edit tool or the arguments are not (yet) complete JSON.
pub(crate) fn rows_from_args(tool: &str, arguments: &str) -> Option<Vec<DiffRow>> {
    if !is_edit_tool(tool) {
        return None;
    }
    let v: Value = serde_json::from_str(arguments).ok()?;
    let path = v.get("path").and_then(Value::as_str).unwrap_or("?");
    let mut rows = vec![Diff::header(path)];
    match tool {
        "write_file" => {
            let content = v.get("content").and_then(Value::as_str)?;
            rows.push(DiffRow::Header("@@ new content @@".into()));
            for l in content.lines() {
                rows.push(DiffRow::Add(l.to_string()));
            }
        }
        "edit_file" => {
            let old = v.get("old_string").and_then(Value::as_str)?;
            let new = v.get("new_string").and_then(Value::as_str)?;
            rows.extend(edit_rows(old, new));
        }
        "multi_edit" => {
            let edits = v.get("edits").and_then(Value::as_array)?;
            for (i, e) in edits.iter().enumerate() {
                let old = e.get("old_string").and_then(Value::as_str).unwrap_or("");
                let new = e.get("new_string").and_then(Value::as_str).unwrap_or("");
                let all = e
                    .get("replace_all")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                rows.push(DiffRow::Header(format!(
                    "@@ edit {} of {}{} @@",
                    i + 1,
                    edits.len(),
                    if all { " (all occurrences)" } else { "" }
                )));
                rows.extend(
                    edit_rows(old, new)
                        .into_iter()
                        .filter(|r| !matches!(r, DiffRow::Header(_))),
                );
            }
        }
        _ => return None,
    }
    Some(rows)
}

struct Diff;

impl Diff {
    fn header(path: &str) -> DiffRow {
        DiffRow::Header(format!("--- {path}"))
    }
}

/// Line diff of one replacement, with up to 3 lines of context around changes.
fn edit_rows(old: &str, new: &str) -> Vec<DiffRow> {
    let diff = TextDiff::from_lines(old, new);
    let mut rows = vec![DiffRow::Header("@@ edit @@".into())];
    for change in diff.iter_all_changes() {
        let text = change.value().trim_end_matches(['\n', '\r']).to_string();
        rows.push(match change.tag() {
            ChangeTag::Equal => DiffRow::Context(text),
            ChangeTag::Delete => DiffRow::Del(text),
            ChangeTag::Insert => DiffRow::Add(text),
        });
    }
    collapse_context(rows, 3)
}

/// Replace long runs of unchanged lines by a gap marker.
fn collapse_context(rows: Vec<DiffRow>, keep: usize) -> Vec<DiffRow> {
    let changed: Vec<bool> = rows
        .iter()
        .map(|r| matches!(r, DiffRow::Add(_) | DiffRow::Del(_)))
        .collect();
    let near = |i: usize| {
        let lo = i.saturating_sub(keep);
        let hi = (i + keep).min(rows.len().saturating_sub(1));
        (lo..=hi).any(|j| changed[j])
    };
    let mut out = Vec::new();
    let mut skipped = 0usize;
    for (i, r) in rows.iter().enumerate() {
        if matches!(r, DiffRow::Context(_)) && !near(i) {
            skipped += 1;
            continue;
        }
        if skipped > 0 {
            out.push(DiffRow::Gap(format!("⋯ {skipped} unchanged lines")));
            skipped = 0;
        }
        out.push(r.clone());
    }
    if skipped > 0 {
        out.push(DiffRow::Gap(format!("⋯ {skipped} unchanged lines")));
    }
    out
}

/// Rows of a unified diff text (as a host preview may send it).
pub(crate) fn rows_from_unified(text: &str) -> Vec<DiffRow> {
    text.lines()
        .map(|l| {
            if l.starts_with("+++")
                || l.starts_with("---")
                || l.starts_with("@@")
                || l.starts_with("diff ")
            {
                DiffRow::Header(l.to_string())
            } else if let Some(r) = l.strip_prefix('+') {
                DiffRow::Add(r.to_string())
            } else if let Some(r) = l.strip_prefix('-') {
                DiffRow::Del(r.to_string())
            } else {
                DiffRow::Context(l.strip_prefix(' ').unwrap_or(l).to_string())
            }
        })
        .collect()
}

/// Render rows to at most `max_rows` wrapped lines of `width` columns, each prefixed by
/// `indent`. Longer diffs end with a "… N more lines" marker.
pub(crate) fn render(
    rows: &[DiffRow],
    width: usize,
    indent: &str,
    max_rows: usize,
) -> Vec<Line<'static>> {
    let mut out: Vec<Line<'static>> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let (sign, text, style) = match r {
            DiffRow::Header(t) => ("", t.as_str(), theme::diff_hunk()),
            DiffRow::Context(t) => ("  ", t.as_str(), theme::dim()),
            DiffRow::Add(t) => ("+ ", t.as_str(), theme::diff_add()),
            DiffRow::Del(t) => ("- ", t.as_str(), theme::diff_del()),
            DiffRow::Gap(t) => ("", t.as_str(), theme::dim()),
        };
        let first = vec![
            Span::raw(indent.to_string()),
            Span::styled(sign.to_string(), style),
        ];
        let rest = vec![Span::raw(format!("{indent}{}", " ".repeat(sign.len())))];
        let wrapped = wrap_line(&[Span::styled(sanitize(text), style)], width, &first, &rest);
        if out.len() + wrapped.len() > max_rows {
            let left = rows.len() - i;
            out.push(Line::from(Span::styled(
                format!(
                    "{indent}… {}",
                    theme::plural(left as u64, "more diff line", "more diff lines")
                ),
                theme::dim(),
            )));
            break;
        }
        out.extend(wrapped);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_file_args_become_a_diff() {
        let args = serde_json::json!({
            "path": "src/lib.rs",
            "old_string": "a\nb\nc\n",
            "new_string": "a\nB\nc\n",
        })
        .to_string();
        let rows = rows_from_args("edit_file", &args).unwrap_or_default();
        assert_eq!(
            rows,
            vec![
                DiffRow::Header("--- src/lib.rs".into()),
                DiffRow::Header("@@ edit @@".into()),
                DiffRow::Context("a".into()),
                DiffRow::Del("b".into()),
                DiffRow::Add("B".into()),
                DiffRow::Context("c".into()),
            ]
        );
        let lines = render(&rows, 40, "  ", 100);
        assert_eq!(lines[3].spans[1].style.fg, Some(ratatui::style::Color::Red));
        assert_eq!(
            lines[4].spans[1].style.fg,
            Some(ratatui::style::Color::Green)
        );
    }

    #[test]
    fn long_context_is_collapsed_and_output_capped() {
        let old: String = (0..20).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 10\n", "line ten\n");
        let args =
            serde_json::json!({"path": "f", "old_string": old, "new_string": new}).to_string();
        let rows = rows_from_args("edit_file", &args).unwrap_or_default();
        assert!(rows
            .iter()
            .any(|r| matches!(r, DiffRow::Gap(t) if t.contains("7 unchanged"))));
        let lines = render(&rows, 40, "", 5);
        assert_eq!(lines.len(), 6);
        assert!(lines[5].spans[0].content.contains("more diff lines"));
    }

    #[test]
    fn write_file_shows_content_and_non_edit_tools_have_no_diff() {
        let args = serde_json::json!({"path": "n.txt", "content": "x\ny"}).to_string();
        let rows = rows_from_args("write_file", &args).unwrap_or_default();
        assert_eq!(rows.last(), Some(&DiffRow::Add("y".into())));
        assert!(rows_from_args("bash", "{}").is_none());
        assert!(rows_from_args("edit_file", "{\"path\": ").is_none());
    }
}
