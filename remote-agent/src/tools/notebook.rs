//! Jupyter notebooks: `read_file` shows a `.ipynb` as numbered cells ([`render`]), and
//! `notebook_edit` replaces, inserts or deletes one cell.
//!
//! An edit changes only the bytes of the cells array it must change: every other byte of the
//! file (indentation, key order, number spelling, escapes, the other cells) is copied from the
//! original. The file is located with a small scanner over a document that `serde_json` has
//! already accepted, so no order-preserving JSON map is needed (serde_json's `preserve_order`
//! is not enabled in the host build, and enabling it would change other JSON bytes).

use serde::Deserialize;
use serde_json::{json, Value};

use super::confine::confine_write;
use super::read::io_text;
use super::{blocking, parse_args, Tool, ToolContext, ToolOutput};

/// Characters of one output shown by `read_file` before it is cut.
pub const OUTPUT_PREVIEW_CHARS: usize = 400;
/// Outputs of one cell described by `read_file` before the rest are only counted.
pub const OUTPUTS_LISTED: usize = 5;

/// True when `path` names a notebook (by extension).
pub fn is_notebook(path: &std::path::Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("ipynb"))
}

/// `notebook_edit{path, cell_id | cell_number, new_source, cell_type?, edit_mode}`.
pub struct NotebookEditTool;

#[derive(Deserialize)]
struct Args {
    path: String,
    #[serde(default)]
    cell_id: Option<String>,
    #[serde(default)]
    cell_number: Option<u64>,
    #[serde(default)]
    new_source: Option<String>,
    #[serde(default)]
    cell_type: Option<String>,
    #[serde(default)]
    edit_mode: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Replace,
    Insert,
    Delete,
}

#[async_trait::async_trait]
impl Tool for NotebookEditTool {
    fn name(&self) -> &'static str {
        "notebook_edit"
    }

    fn description(&self) -> &'static str {
        "Edit one cell of a Jupyter notebook (.ipynb). Address the cell by cell_id or by \
         cell_number (1-based, as read_file shows them). edit_mode replace (default) sets the \
         cell's source (and its type when cell_type is given); insert adds a new cell after the \
         addressed one (at the start when no cell is given; cell_type defaults to code); delete \
         removes the cell. The edited cell's outputs and execution count are cleared; the rest \
         of the file keeps its bytes, indentation and key order."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Notebook file (.ipynb)"},
                "cell_id": {"type": "string", "description": "The id of the cell to edit (or to insert after)"},
                "cell_number": {"type": "integer", "minimum": 1, "description": "1-based position of the cell to edit (or to insert after), instead of cell_id"},
                "new_source": {"type": "string", "description": "The cell's new source (required for replace and insert)"},
                "cell_type": {"type": "string", "enum": ["code", "markdown", "raw"], "description": "Type of the new or replaced cell (default: the cell's current type; code for insert)"},
                "edit_mode": {"type": "string", "enum": ["replace", "insert", "delete"], "description": "What to do (default replace)"}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let a: Args = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        let ctx = ctx.clone();
        blocking(move || edit(&ctx, &a)).await
    }
}

fn edit(ctx: &ToolContext, a: &Args) -> ToolOutput {
    let mode = match a.edit_mode.as_deref().unwrap_or("replace") {
        "replace" => Mode::Replace,
        "insert" => Mode::Insert,
        "delete" => Mode::Delete,
        other => {
            return ToolOutput::err(format!(
                "unknown edit_mode `{other}` (expected replace, insert or delete)"
            ))
        }
    };
    if let Some(t) = a.cell_type.as_deref() {
        if !matches!(t, "code" | "markdown" | "raw") {
            return ToolOutput::err(format!(
                "unknown cell_type `{t}` (expected code, markdown or raw)"
            ));
        }
    }
    if a.cell_id.is_some() && a.cell_number.is_some() {
        return ToolOutput::err("give cell_id or cell_number, not both");
    }
    if mode != Mode::Delete && a.new_source.is_none() {
        return ToolOutput::err("new_source is required for replace and insert");
    }
    let target = match confine_write(ctx, &a.path) {
        Ok(t) => t,
        Err(e) => return ToolOutput::err(e.to_string()),
    };
    let shown = ctx.display(target.path());
    if !is_notebook(target.path()) {
        return ToolOutput::err(format!(
            "{shown} is not a notebook (.ipynb); use edit_file for other files"
        ));
    }
    let bytes = match std::fs::read(target.path()) {
        Ok(b) => b,
        Err(e) => return ToolOutput::err(format!("read {shown}: {}", io_text(&e))),
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return ToolOutput::err(format!("{shown} is not valid UTF-8, so not a notebook"));
    };
    let (new_text, summary) = match apply(&text, mode, a) {
        Ok(v) => v,
        Err(msg) => return ToolOutput::err(format!("notebook_edit {shown}: {msg}")),
    };
    if let Err(e) = target.write(ctx, new_text.as_bytes()) {
        return ToolOutput::err(format!("write {shown}: {}", io_text(&e)));
    }
    ToolOutput::ok(format!("{summary} in {shown}"))
}

/// Applies one edit to the notebook text; returns the new text and a summary of the change.
fn apply(text: &str, mode: Mode, a: &Args) -> Result<(String, String), String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON ({e})"))?;
    let major = doc.get("nbformat").and_then(Value::as_u64);
    if major != Some(4) {
        return Err(format!(
            "nbformat {} is not supported (only nbformat 4); convert it with `jupyter nbconvert --to notebook --nbformat 4`",
            major.map_or("(missing)".to_string(), |m| m.to_string())
        ));
    }
    let minor = doc
        .get("nbformat_minor")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let cells_json = doc
        .get("cells")
        .and_then(Value::as_array)
        .ok_or("the notebook has no `cells` array")?;

    let top = object_entries(text, skip_ws(text, 0))?;
    let cells_entry = top
        .iter()
        .rev()
        .find(|e| e.key == "cells")
        .ok_or("the notebook has no `cells` array")?;
    let (arr_start, arr_end) = (cells_entry.val_start, cells_entry.val_end);
    let spans = array_items(text, arr_start)?;
    if spans.len() != cells_json.len() {
        return Err("could not locate the cells in the file".into());
    }

    // Which cell is addressed (index into the array).
    let addressed: Option<usize> = match (&a.cell_id, a.cell_number) {
        (Some(id), _) => Some(
            cells_json
                .iter()
                .position(|c| c.get("id").and_then(Value::as_str) == Some(id.as_str()))
                .ok_or_else(|| {
                    let ids: Vec<&str> = cells_json
                        .iter()
                        .filter_map(|c| c.get("id").and_then(Value::as_str))
                        .take(20)
                        .collect();
                    if ids.is_empty() {
                        format!("no cell has id `{id}` (this notebook's cells have no ids; use cell_number)")
                    } else {
                        format!("no cell has id `{id}` (ids: {})", ids.join(", "))
                    }
                })?,
        ),
        (None, Some(n)) => {
            let n = n as usize;
            if n == 0 || n > cells_json.len() {
                return Err(format!(
                    "cell_number {n} is out of range (the notebook has {} cells, numbered from 1)",
                    cells_json.len()
                ));
            }
            Some(n - 1)
        }
        (None, None) => None,
    };

    let style = Style::of(text, &spans, arr_start);
    let mut pieces: Vec<String> = spans.iter().map(|&(s, e)| text[s..e].to_string()).collect();
    let summary = match mode {
        Mode::Delete => {
            let i = addressed.ok_or("delete needs cell_id or cell_number")?;
            pieces.remove(i);
            format!("deleted cell {} ({})", i + 1, describe(&cells_json[i]))
        }
        Mode::Replace => {
            let i = addressed.ok_or("replace needs cell_id or cell_number")?;
            let (s, _) = spans[i];
            let old_type = cells_json[i]
                .get("cell_type")
                .and_then(Value::as_str)
                .unwrap_or("code");
            let new_type = a.cell_type.as_deref().unwrap_or(old_type);
            let source = a.new_source.as_deref().unwrap_or("");
            pieces[i] = rewrite_cell(text, s, new_type, source, &style)?;
            let mut msg = format!("replaced cell {} ({})", i + 1, describe(&cells_json[i]));
            if new_type != old_type {
                msg.push_str(&format!(", now a {new_type} cell"));
            }
            if new_type == "code" {
                msg.push_str("; its outputs and execution count were cleared");
            }
            msg
        }
        Mode::Insert => {
            let at = addressed.map_or(0, |i| i + 1);
            let cell_type = a.cell_type.as_deref().unwrap_or("code");
            let id = if minor >= 5 {
                Some(fresh_id(cells_json))
            } else {
                None
            };
            let source = a.new_source.as_deref().unwrap_or("");
            pieces.insert(
                at,
                new_cell(cell_type, id.as_deref(), source, &style, &spans, text),
            );
            match id {
                Some(id) => format!("inserted {cell_type} cell {} (id {id})", at + 1),
                None => format!("inserted {cell_type} cell {}", at + 1),
            }
        }
    };

    let array = if pieces.is_empty() {
        "[]".to_string()
    } else {
        format!(
            "[{}{}{}]",
            style.open,
            pieces.join(&style.between),
            style.close
        )
    };
    let out = format!("{}{array}{}", &text[..arr_start], &text[arr_end..]);
    // The result must still be one JSON document with the same cells count we meant.
    let check: Value = serde_json::from_str(&out)
        .map_err(|e| format!("internal error: edit broke the JSON ({e})"))?;
    let n = check
        .get("cells")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if n != pieces.len() {
        return Err("internal error: the edited cells array has the wrong length".into());
    }
    Ok((out, summary))
}

/// `code cell, id abc` for messages.
fn describe(cell: &Value) -> String {
    let t = cell.get("cell_type").and_then(Value::as_str).unwrap_or("?");
    match cell.get("id").and_then(Value::as_str) {
        Some(id) => format!("{t}, id {id}"),
        None => t.to_string(),
    }
}

/// An id no cell has yet: 8 lowercase hex digits from a randomly keyed hash.
fn fresh_id(cells: &[Value]) -> String {
    use std::hash::{BuildHasher, Hasher};
    let state = std::collections::hash_map::RandomState::new();
    for n in 0u64.. {
        let mut h = state.build_hasher();
        h.write_u64(n);
        let id = format!("{:08x}", h.finish() as u32);
        if !cells
            .iter()
            .any(|c| c.get("id").and_then(Value::as_str) == Some(id.as_str()))
        {
            return id;
        }
    }
    unreachable!("u64 range exhausted")
}

/// The whitespace habits of a file: how cells are separated in the array and how the keys of
/// a cell are laid out. Taken from the file itself; defaults follow nbformat (indent 1).
#[derive(Debug, Clone)]
struct Style {
    /// Between `[` and the first cell.
    open: String,
    /// Between two cells (includes the comma).
    between: String,
    /// Between the last cell and `]`.
    close: String,
    /// One indentation step (empty for compact files).
    unit: String,
    /// Indentation of a cell's `{` line (the cell's own depth).
    cell_indent: String,
    /// Between a key and its value.
    colon: String,
    /// Between two entries of an object or array, after the comma's line break logic.
    comma: &'static str,
    /// True when the file puts entries on their own lines.
    multiline: bool,
    /// The file's line break (`\r\n` files stay CRLF).
    newline: &'static str,
}

impl Style {
    fn of(text: &str, spans: &[(usize, usize)], arr_start: usize) -> Style {
        // Indentation of the top-level object's first key tells the unit.
        let first_key_ws = {
            let open = skip_ws(text, 0) + 1;
            &text[open..skip_ws(text, open)]
        };
        let multiline = first_key_ws.contains('\n');
        let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
        let unit = first_key_ws.rsplit('\n').next().unwrap_or("").to_string();
        let colon = {
            // After the first top-level key: `": "` in nbformat files.
            let k = skip_ws(text, 0) + 1;
            let k = skip_ws(text, k);
            let end = string_end(text, k).unwrap_or(k);
            let v = skip_ws(text, end);
            // `v` is at the ':'; include it and the whitespace after.
            let after = skip_ws(text, v + 1);
            text.get(end..after).unwrap_or(": ").to_string()
        };
        let nl = |depth: usize| {
            if multiline {
                format!("{newline}{}", unit.repeat(depth))
            } else {
                String::new()
            }
        };
        let (open, between, close) = match spans {
            [] => (nl(2), format!(",{}", nl(2)), nl(1)),
            [(s, _)] => {
                let open = text[arr_start + 1..*s].to_string();
                (open.clone(), format!(",{open}"), {
                    let e = spans[0].1;
                    text[e..close_bracket(text, e)].to_string()
                })
            }
            [(s0, e0), (s1, _), ..] => {
                let last_end = spans[spans.len() - 1].1;
                (
                    text[arr_start + 1..*s0].to_string(),
                    text[*e0..*s1].to_string(),
                    text[last_end..close_bracket(text, last_end)].to_string(),
                )
            }
        };
        let cell_indent = open.rsplit('\n').next().unwrap_or("").to_string();
        let comma = if multiline || colon == ":" { "," } else { ", " };
        Style {
            comma,
            open,
            between,
            close,
            unit,
            cell_indent,
            colon,
            multiline,
            newline,
        }
    }

    /// Whitespace before an entry at `depth` steps below the cell's `{`.
    fn entry(&self, depth: usize) -> String {
        if self.multiline {
            format!(
                "{}{}{}",
                self.newline,
                self.cell_indent,
                self.unit.repeat(depth)
            )
        } else {
            String::new()
        }
    }

    /// A JSON array of strings at one step below the cell, in the file's layout.
    fn string_array(&self, items: &[String]) -> String {
        if items.is_empty() {
            return "[]".to_string();
        }
        let quoted: Vec<String> = items.iter().map(|s| json_string(s)).collect();
        let sep = self.comma;
        format!(
            "[{}{}{}]",
            self.entry(2),
            quoted.join(&format!("{sep}{}", self.entry(2))),
            self.entry(1)
        )
    }

    /// An object from already rendered entries, at the cell's depth.
    fn object(&self, entries: &[(String, String)]) -> String {
        let body: Vec<String> = entries
            .iter()
            .map(|(k, v)| format!("{}{}{}", json_string(k), self.colon, v))
            .collect();
        let sep = self.comma;
        format!(
            "{{{}{}{}}}",
            self.entry(1),
            body.join(&format!("{sep}{}", self.entry(1))),
            self.entry(0)
        )
    }
}

fn json_string(s: &str) -> String {
    // Serialising a &str cannot fail.
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

/// nbformat's on-disk source: lines with their newlines kept.
fn source_lines(source: &str) -> Vec<String> {
    source.split_inclusive('\n').map(str::to_string).collect()
}

/// The source value in the file's habit: a list of lines (nbformat's way) or one string when
/// the cell being replaced had one.
fn source_value(style: &Style, source: &str, as_string: bool) -> String {
    if as_string {
        json_string(source)
    } else {
        style.string_array(&source_lines(source))
    }
}

/// Keys a cell of this type may not carry.
fn foreign_keys(cell_type: &str) -> &'static [&'static str] {
    match cell_type {
        "code" => &["attachments"],
        _ => &["outputs", "execution_count"],
    }
}

/// The cell at `start` with a new source (and type): kept keys keep their order and bytes;
/// outputs and execution count are cleared; keys the new type needs are added in sorted
/// position, keys it may not have are dropped.
fn rewrite_cell(
    text: &str,
    start: usize,
    cell_type: &str,
    source: &str,
    style: &Style,
) -> Result<String, String> {
    let entries = object_entries(text, start)?;
    let mut out: Vec<(String, String)> = Vec::new();
    let raw = |e: &Entry| text[e.val_start..e.val_end].to_string();
    for e in &entries {
        if foreign_keys(cell_type).contains(&e.key.as_str()) {
            continue;
        }
        let v = match e.key.as_str() {
            "cell_type" => json_string(cell_type),
            "source" => source_value(style, source, text[e.val_start..].starts_with('"')),
            "outputs" => "[]".to_string(),
            "execution_count" => "null".to_string(),
            _ => raw(e),
        };
        out.push((e.key.clone(), v));
    }
    let mut needed: Vec<(&str, String)> = vec![
        ("cell_type", json_string(cell_type)),
        ("metadata", "{}".to_string()),
        ("source", source_value(style, source, false)),
    ];
    if cell_type == "code" {
        needed.push(("execution_count", "null".to_string()));
        needed.push(("outputs", "[]".to_string()));
    }
    for (k, v) in needed {
        if out.iter().any(|(have, _)| have == k) {
            continue;
        }
        let at = out
            .iter()
            .position(|(have, _)| have.as_str() > k)
            .unwrap_or(out.len());
        out.insert(at, (k.to_string(), v));
    }
    Ok(style.object(&out))
}

/// A new cell, keys sorted as nbformat writes them. `metadata` follows nbformat's empty object.
fn new_cell(
    cell_type: &str,
    id: Option<&str>,
    source: &str,
    style: &Style,
    spans: &[(usize, usize)],
    text: &str,
) -> String {
    // Follow the notebook's own habit for sources when its first cell shows one.
    let as_string = spans
        .first()
        .and_then(|&(s, _)| object_entries(text, s).ok())
        .and_then(|es| es.into_iter().find(|e| e.key == "source"))
        .is_some_and(|e| text[e.val_start..].starts_with('"'));
    let mut entries: Vec<(String, String)> = vec![("cell_type".into(), json_string(cell_type))];
    if cell_type == "code" {
        entries.push(("execution_count".into(), "null".into()));
    }
    if let Some(id) = id {
        entries.push(("id".into(), json_string(id)));
    }
    entries.push(("metadata".into(), "{}".into()));
    if cell_type == "code" {
        entries.push(("outputs".into(), "[]".into()));
    }
    entries.push(("source".into(), source_value(style, source, as_string)));
    style.object(&entries)
}

// ---- a scanner over text serde_json has already accepted ----

/// One `"key": value` of an object, with byte offsets of the value.
struct Entry {
    key: String,
    val_start: usize,
    val_end: usize,
}

fn skip_ws(text: &str, mut i: usize) -> usize {
    let b = text.as_bytes();
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// End (exclusive) of the string starting at `i` (which is a `"`).
fn string_end(text: &str, i: usize) -> Result<usize, String> {
    let b = text.as_bytes();
    if b.get(i) != Some(&b'"') {
        return Err(format!("expected a string at byte {i}"));
    }
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return Ok(j + 1),
            _ => j += 1,
        }
    }
    Err("unterminated string".into())
}

/// End (exclusive) of the JSON value starting at `i`.
fn value_end(text: &str, i: usize) -> Result<usize, String> {
    let b = text.as_bytes();
    match b.get(i) {
        Some(b'"') => string_end(text, i),
        Some(b'{') | Some(b'[') => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = string_end(text, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Ok(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            Err("unterminated container".into())
        }
        Some(_) => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            {
                j += 1;
            }
            Ok(j)
        }
        None => Err("unexpected end of file".into()),
    }
}

/// The entries of the object starting at `i` (a `{`).
fn object_entries(text: &str, i: usize) -> Result<Vec<Entry>, String> {
    if text.as_bytes().get(i) != Some(&b'{') {
        return Err("expected a JSON object".into());
    }
    let mut out = Vec::new();
    let mut j = skip_ws(text, i + 1);
    if text.as_bytes().get(j) == Some(&b'}') {
        return Ok(out);
    }
    loop {
        let k_end = string_end(text, j)?;
        let key: String =
            serde_json::from_str(&text[j..k_end]).map_err(|e| format!("bad key: {e}"))?;
        let colon = skip_ws(text, k_end);
        let val_start = skip_ws(text, colon + 1);
        let val_end = value_end(text, val_start)?;
        out.push(Entry {
            key,
            val_start,
            val_end,
        });
        let next = skip_ws(text, val_end);
        match text.as_bytes().get(next) {
            Some(b',') => j = skip_ws(text, next + 1),
            Some(b'}') => return Ok(out),
            _ => return Err("malformed object".into()),
        }
    }
}

/// Spans of the items of the array starting at `i` (a `[`).
fn array_items(text: &str, i: usize) -> Result<Vec<(usize, usize)>, String> {
    if text.as_bytes().get(i) != Some(&b'[') {
        return Err("`cells` is not an array".into());
    }
    let mut out = Vec::new();
    let mut j = skip_ws(text, i + 1);
    if text.as_bytes().get(j) == Some(&b']') {
        return Ok(out);
    }
    loop {
        let end = value_end(text, j)?;
        out.push((j, end));
        let next = skip_ws(text, end);
        match text.as_bytes().get(next) {
            Some(b',') => j = skip_ws(text, next + 1),
            Some(b']') => return Ok(out),
            _ => return Err("malformed array".into()),
        }
    }
}

/// Position of the `]` closing an array whose last item ends at `i`.
fn close_bracket(text: &str, i: usize) -> usize {
    skip_ws(text, i)
}

// ---- read_file's view ----

/// The notebook as numbered cells: header, source verbatim, outputs summarised. `offset` and
/// `limit` count cells. Errors when the text is not an nbformat 4 notebook.
pub fn render(text: &str, shown: &str, offset: usize, limit: usize) -> Result<String, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON ({e})"))?;
    let cells = doc
        .get("cells")
        .and_then(Value::as_array)
        .ok_or("no `cells` array")?;
    let major = doc.get("nbformat").and_then(Value::as_u64).unwrap_or(0);
    let minor = doc
        .get("nbformat_minor")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let kernel = doc
        .pointer("/metadata/kernelspec/name")
        .and_then(Value::as_str)
        .or_else(|| {
            doc.pointer("/metadata/language_info/name")
                .and_then(Value::as_str)
        });
    let mut out = format!(
        "notebook {shown}: nbformat {major}.{minor}, {} cells{}\n",
        cells.len(),
        kernel.map_or(String::new(), |k| format!(", kernel {k}"))
    );
    if offset >= cells.len() && !cells.is_empty() {
        out.push_str(&format!(
            "(offset {offset} is past the last cell — the notebook has {} cells)\n",
            cells.len()
        ));
        return Ok(out);
    }
    let end = (offset + limit).min(cells.len());
    for (i, cell) in cells.iter().enumerate().take(end).skip(offset) {
        let t = cell.get("cell_type").and_then(Value::as_str).unwrap_or("?");
        out.push_str(&format!("\n── cell {} ", i + 1));
        if let Some(id) = cell.get("id").and_then(Value::as_str) {
            out.push_str(&format!("· id {id} "));
        }
        out.push_str(&format!("· {t}"));
        if let Some(n) = cell.get("execution_count").and_then(Value::as_u64) {
            out.push_str(&format!(" · [{n}]"));
        }
        out.push_str(" ──\n");
        let src = joined(cell.get("source"));
        out.push_str(&src);
        if !src.is_empty() && !src.ends_with('\n') {
            out.push('\n');
        }
        if let Some(outputs) = cell.get("outputs").and_then(Value::as_array) {
            for o in outputs.iter().take(OUTPUTS_LISTED) {
                out.push_str(&format!("  ⇒ {}\n", summarise_output(o)));
            }
            if outputs.len() > OUTPUTS_LISTED {
                out.push_str(&format!(
                    "  ⇒ … {} more outputs\n",
                    outputs.len() - OUTPUTS_LISTED
                ));
            }
        }
    }
    if end < cells.len() {
        out.push_str(&format!(
            "\n[more cells below; pass offset={end} to continue]\n"
        ));
    }
    Ok(out)
}

/// A multiline string field (a string or a list of strings).
fn joined(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

fn preview(text: &str) -> String {
    let text = text.trim_end_matches('\n');
    let lines = text.lines().count();
    let mut p: String = text.chars().take(OUTPUT_PREVIEW_CHARS).collect();
    if p.len() < text.len() {
        p.push_str(&format!(
            "… [{} chars, {lines} lines]",
            text.chars().count()
        ));
    }
    p.replace('\n', "\n     ")
}

/// One output in a line or a few: streams and text/plain shown (bounded), other data by type
/// and size, errors by name and value.
fn summarise_output(o: &Value) -> String {
    match o.get("output_type").and_then(Value::as_str).unwrap_or("?") {
        "stream" => {
            let name = o.get("name").and_then(Value::as_str).unwrap_or("stream");
            format!("{name}: {}", preview(&joined(o.get("text"))))
        }
        "error" => {
            let ename = o.get("ename").and_then(Value::as_str).unwrap_or("Error");
            let evalue = o.get("evalue").and_then(Value::as_str).unwrap_or("");
            format!("error {ename}: {}", preview(evalue))
        }
        kind @ ("execute_result" | "display_data") => {
            let Some(data) = o.get("data").and_then(Value::as_object) else {
                return kind.to_string();
            };
            let mut types: Vec<String> = Vec::new();
            for (mime, v) in data {
                if mime != "text/plain" {
                    types.push(format!("{mime} ({} bytes)", joined(Some(v)).len()));
                }
            }
            let mut s = kind.to_string();
            if !types.is_empty() {
                s.push_str(&format!(" [{}]", types.join(", ")));
            }
            if let Some(plain) = data.get("text/plain") {
                s.push_str(&format!(": {}", preview(&joined(Some(plain)))));
            }
            s
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const NB: &str = "{\n \"cells\": [\n  {\n   \"cell_type\": \"code\",\n   \"execution_count\": 3,\n   \"id\": \"a1\",\n   \"metadata\": {},\n   \"outputs\": [\n    {\n     \"name\": \"stdout\",\n     \"output_type\": \"stream\",\n     \"text\": [\n      \"hi\\n\"\n     ]\n    }\n   ],\n   \"source\": [\n    \"print('hi')\"\n   ]\n  },\n  {\n   \"cell_type\": \"markdown\",\n   \"id\": \"b2\",\n   \"metadata\": {},\n   \"source\": [\n    \"# T\"\n   ]\n  }\n ],\n \"metadata\": {},\n \"nbformat\": 4,\n \"nbformat_minor\": 5\n}\n";

    fn args(mode: &str) -> Args {
        Args {
            path: "x.ipynb".into(),
            cell_id: None,
            cell_number: None,
            new_source: Some("x = 1\ny = 2".into()),
            cell_type: None,
            edit_mode: Some(mode.into()),
        }
    }

    #[test]
    fn replace_keeps_other_bytes_and_clears_outputs() {
        let mut a = args("replace");
        a.cell_id = Some("a1".into());
        let (out, _) = apply(NB, Mode::Replace, &a).unwrap();
        assert!(out.contains("   \"execution_count\": null,\n"), "{out}");
        assert!(out.contains("   \"outputs\": [],\n"), "{out}");
        assert!(
            out.contains("   \"source\": [\n    \"x = 1\\n\",\n    \"y = 2\"\n   ]\n  },"),
            "{out}"
        );
        // The markdown cell and the tail are byte-identical.
        let tail = &NB[NB.find("  {\n   \"cell_type\": \"markdown\"").unwrap()..];
        assert!(out.ends_with(tail));
    }

    #[test]
    fn insert_delete_round_trip_is_identity() {
        let mut a = args("insert");
        a.cell_number = Some(1);
        a.cell_type = Some("markdown".into());
        let (with, _) = apply(NB, Mode::Insert, &a).unwrap();
        let v: Value = serde_json::from_str(&with).unwrap();
        assert_eq!(v["cells"][1]["cell_type"], "markdown");
        assert_eq!(v["cells"].as_array().unwrap().len(), 3);
        let mut d = args("delete");
        d.cell_number = Some(2);
        let (back, _) = apply(&with, Mode::Delete, &d).unwrap();
        assert_eq!(back, NB);
    }

    #[test]
    fn compact_files_stay_compact() {
        let nb = r#"{"cells":[{"cell_type":"code","execution_count":1,"metadata":{},"outputs":[],"source":"a"}],"metadata":{},"nbformat":4,"nbformat_minor":4}"#;
        let mut a = args("replace");
        a.cell_number = Some(1);
        let (out, _) = apply(nb, Mode::Replace, &a).unwrap();
        assert_eq!(
            out,
            r#"{"cells":[{"cell_type":"code","execution_count":null,"metadata":{},"outputs":[],"source":"x = 1\ny = 2"}],"metadata":{},"nbformat":4,"nbformat_minor":4}"#
        );
    }

    #[test]
    fn crlf_files_stay_crlf() {
        let nb = NB.replace('\n', "\r\n");
        let mut a = args("insert");
        a.cell_number = Some(2);
        let (out, _) = apply(&nb, Mode::Insert, &a).unwrap();
        assert!(!out.replace("\r\n", "").contains('\n'), "{out:?}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["cells"][2]["source"][0], "x = 1\n");
    }

    #[test]
    fn render_shows_cells_and_outputs() {
        let r = render(NB, "x.ipynb", 0, 10).unwrap();
        assert!(r.contains("── cell 1 · id a1 · code · [3] ──\nprint('hi')\n  ⇒ stdout: hi"));
        assert!(r.contains("── cell 2 · id b2 · markdown ──\n# T\n"));
    }
}
