//! `edit_file` and `multi_edit`: exact, unique string replacement with CRLF awareness and
//! whitespace-tolerant fallbacks.

use serde::Deserialize;
use serde_json::{json, Value};

use super::confine::{confine_write, WriteTarget};
use super::read::io_text;
use super::{blocking, parse_args, Tool, ToolContext, ToolOutput};

/// Line numbers listed when `old_string` matches more than once.
pub const MAX_LISTED_MATCHES: usize = 8;

/// `edit_file{path, old_string, new_string}`.
pub struct EditFileTool;

#[derive(Deserialize)]
struct EditArgs {
    path: String,
    old_string: String,
    new_string: String,
}

/// `multi_edit{path, edits[{old_string, new_string, replace_all?}]}`.
pub struct MultiEditTool;

#[derive(Deserialize)]
struct MultiArgs {
    path: String,
    edits: Vec<OneEdit>,
}

#[derive(Deserialize)]
struct OneEdit {
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

#[async_trait::async_trait]
impl Tool for EditFileTool {
    fn name(&self) -> &'static str {
        "edit_file"
    }

    fn description(&self) -> &'static str {
        "Replace one exact occurrence of old_string with new_string in a file. old_string must \
         match exactly once (include surrounding lines to make it unique). Line endings (CRLF) \
         are handled for you. If there is no exact match, whitespace-tolerant matches are tried \
         (trailing whitespace, tabs as 4 spaces, indentation) and reported as fuzzy; otherwise \
         the nearest similar text is shown."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to edit"},
                "old_string": {"type": "string", "description": "Exact text to replace; must occur exactly once"},
                "new_string": {"type": "string", "description": "Replacement text"}
            },
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let a: EditArgs = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        let ctx = ctx.clone();
        blocking(move || {
            let edits = [OneEdit {
                old_string: a.old_string,
                new_string: a.new_string,
                replace_all: false,
            }];
            edit_path(&ctx, &a.path, &edits)
        })
        .await
    }
}

#[async_trait::async_trait]
impl Tool for MultiEditTool {
    fn name(&self) -> &'static str {
        "multi_edit"
    }

    fn description(&self) -> &'static str {
        "Apply several edits to one file in order, all or nothing: if any edit fails, the file \
         is left unchanged. Each edit works like edit_file; set replace_all to replace every \
         exact occurrence of its old_string."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to edit"},
                "edits": {
                    "type": "array",
                    "minItems": 1,
                    "description": "Edits applied in order; each sees the result of the previous one",
                    "items": {
                        "type": "object",
                        "properties": {
                            "old_string": {"type": "string", "description": "Exact text to replace"},
                            "new_string": {"type": "string", "description": "Replacement text"},
                            "replace_all": {"type": "boolean", "description": "Replace every occurrence instead of requiring a unique one (default false)"}
                        },
                        "required": ["old_string", "new_string"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["path", "edits"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        false
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let a: MultiArgs = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        if a.edits.is_empty() {
            return ToolOutput::err("edits must contain at least one edit");
        }
        let ctx = ctx.clone();
        blocking(move || edit_path(&ctx, &a.path, &a.edits)).await
    }
}

/// Reads, edits in memory, and writes once through the mutation path.
fn edit_path(ctx: &ToolContext, raw: &str, edits: &[OneEdit]) -> ToolOutput {
    let target: WriteTarget = match confine_write(ctx, raw) {
        Ok(t) => t,
        Err(e) => return ToolOutput::err(e.to_string()),
    };
    let shown = ctx.display(target.path());
    let bytes = match std::fs::read(target.path()) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return ToolOutput::err(format!(
                "edit {shown}: no such file (use write_file to create a new file)"
            ))
        }
        Err(e) => return ToolOutput::err(format!("edit {shown}: {}", io_text(&e))),
    };
    if bytes[..bytes.len().min(super::read::BINARY_PEEK)].contains(&0) {
        return ToolOutput::err(format!(
            "binary file {shown} (NUL byte detected); cannot edit it"
        ));
    }
    let Ok(original) = String::from_utf8(bytes) else {
        return ToolOutput::err(format!(
            "{shown} is not valid UTF-8; edit it with bash or rewrite it with write_file"
        ));
    };
    let crlf = original.contains("\r\n");
    let mut content = if crlf {
        original.replace("\r\n", "\n")
    } else {
        original.clone()
    };

    let mut notes: Vec<String> = Vec::new();
    let mut first_line = None;
    let total = edits.len();
    for (i, e) in edits.iter().enumerate() {
        let old = if crlf {
            e.old_string.replace("\r\n", "\n")
        } else {
            e.old_string.clone()
        };
        let new = if crlf {
            e.new_string.replace("\r\n", "\n")
        } else {
            e.new_string.clone()
        };
        match apply_one(&content, &old, &new, e.replace_all, &shown) {
            Ok(applied) => {
                content = applied.content;
                first_line.get_or_insert(applied.line);
                if let Some(kind) = applied.fuzzy {
                    notes.push(if total == 1 {
                        format!("fuzzy match: {}", kind.describe())
                    } else {
                        format!("edit {}: fuzzy match, {}", i + 1, kind.describe())
                    });
                }
                if applied.count > 1 {
                    notes.push(format!(
                        "edit {}: replaced {} occurrences",
                        i + 1,
                        applied.count
                    ));
                }
            }
            Err(msg) => {
                return ToolOutput::err(if total == 1 {
                    msg
                } else {
                    format!(
                        "edit {}/{} failed: {msg}\nNo changes were made to {shown}.",
                        i + 1,
                        total
                    )
                })
            }
        }
    }
    let final_text = if crlf {
        content.replace('\n', "\r\n")
    } else {
        content
    };
    if final_text == original {
        return ToolOutput::ok(format!("no changes made: {shown} already has this content"));
    }
    if let Err(e) = target.write(ctx, final_text.as_bytes()) {
        return ToolOutput::err(format!("write {shown}: {}", io_text(&e)));
    }
    let mut msg = if total == 1 {
        format!("edited {shown} at line {}", first_line.unwrap_or(1))
    } else {
        format!("applied {total} edits to {shown}")
    };
    if crlf {
        msg.push_str(" (CRLF line endings kept)");
    }
    for n in notes {
        msg.push_str(&format!("\n{n}"));
    }
    ToolOutput::ok(msg)
}

/// Which whitespace difference a fuzzy match tolerated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fuzz {
    TrailingWhitespace,
    TabsAsSpaces,
    LeadingWhitespace,
}

impl Fuzz {
    fn describe(self) -> &'static str {
        match self {
            Fuzz::TrailingWhitespace => "trailing whitespace differed",
            Fuzz::TabsAsSpaces => "tabs vs 4 spaces differed",
            Fuzz::LeadingWhitespace => "indentation differed",
        }
    }

    fn normalize(self, line: &str) -> String {
        match self {
            Fuzz::TrailingWhitespace => line.trim_end().to_string(),
            Fuzz::TabsAsSpaces => line.replace('\t', "    ").trim_end().to_string(),
            Fuzz::LeadingWhitespace => line.trim().to_string(),
        }
    }
}

struct Applied {
    content: String,
    line: usize,
    count: usize,
    fuzzy: Option<Fuzz>,
}

fn line_of(content: &str, byte: usize) -> usize {
    content.as_bytes()[..byte]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

fn list_lines(lines: &[usize]) -> String {
    let shown: Vec<String> = lines
        .iter()
        .take(MAX_LISTED_MATCHES)
        .map(|l| l.to_string())
        .collect();
    let more = if lines.len() > MAX_LISTED_MATCHES {
        format!(" and {} more", lines.len() - MAX_LISTED_MATCHES)
    } else {
        String::new()
    };
    format!("{}{more}", shown.join(", "))
}

fn apply_one(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
    shown: &str,
) -> Result<Applied, String> {
    if old.is_empty() {
        return Err(
            "old_string must not be empty (use write_file to create or overwrite a file)".into(),
        );
    }
    if old == new {
        return Err("old_string and new_string are identical; nothing to change".into());
    }
    let positions: Vec<usize> = content.match_indices(old).map(|(i, _)| i).collect();
    match positions.len() {
        1 => {
            let at = positions[0];
            let mut out = String::with_capacity(content.len() + new.len());
            out.push_str(&content[..at]);
            out.push_str(new);
            out.push_str(&content[at + old.len()..]);
            return Ok(Applied {
                content: out,
                line: line_of(content, at),
                count: 1,
                fuzzy: None,
            });
        }
        n if n > 1 && replace_all => {
            return Ok(Applied {
                content: content.replace(old, new),
                line: line_of(content, positions[0]),
                count: n,
                fuzzy: None,
            });
        }
        n if n > 1 => {
            let lines: Vec<usize> = positions.iter().map(|&p| line_of(content, p)).collect();
            return Err(format!(
                "old_string is not unique in {shown}: {n} matches, at lines {}. Include more surrounding lines to pick one, or use multi_edit with replace_all.",
                list_lines(&lines)
            ));
        }
        _ => {}
    }
    for fuzz in [
        Fuzz::TrailingWhitespace,
        Fuzz::TabsAsSpaces,
        Fuzz::LeadingWhitespace,
    ] {
        match fuzzy_find(content, old, fuzz) {
            FuzzyResult::None => continue,
            FuzzyResult::One(span) => {
                let replacement = reindent(new, old, &content[span.start..span.end], fuzz);
                let mut out = String::with_capacity(content.len() + new.len());
                out.push_str(&content[..span.start]);
                out.push_str(&replacement);
                out.push_str(&content[span.end..]);
                return Ok(Applied {
                    content: out,
                    line: span.line,
                    count: 1,
                    fuzzy: Some(fuzz),
                });
            }
            FuzzyResult::Many(lines) => {
                return Err(format!(
                    "old_string is not unique in {shown} ({}): {} matches, at lines {}. Include more surrounding lines to pick one.",
                    fuzz.describe(),
                    lines.len(),
                    list_lines(&lines)
                ));
            }
        }
    }
    Err(not_found(content, old, shown))
}

struct Span {
    start: usize,
    end: usize,
    line: usize,
}

enum FuzzyResult {
    None,
    One(Span),
    Many(Vec<usize>),
}

/// Byte ranges of each line of `content` (without the newline).
fn line_ranges(content: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, b) in content.bytes().enumerate() {
        if b == b'\n' {
            out.push((start, i));
            start = i + 1;
        }
    }
    if start < content.len() {
        out.push((start, content.len()));
    }
    out
}

/// The lines of `old`, without the empty piece after a final newline.
fn old_lines(old: &str) -> (Vec<&str>, bool) {
    let trailing_nl = old.ends_with('\n');
    let body = if trailing_nl {
        &old[..old.len() - 1]
    } else {
        old
    };
    (body.split('\n').collect(), trailing_nl)
}

fn fuzzy_find(content: &str, old: &str, fuzz: Fuzz) -> FuzzyResult {
    let (olds, trailing_nl) = old_lines(old);
    let want: Vec<String> = olds.iter().map(|l| fuzz.normalize(l)).collect();
    if want.iter().all(|l| l.is_empty()) {
        return FuzzyResult::None;
    }
    let ranges = line_ranges(content);
    if ranges.len() < want.len() {
        return FuzzyResult::None;
    }
    let have: Vec<String> = ranges
        .iter()
        .map(|&(s, e)| fuzz.normalize(&content[s..e]))
        .collect();
    let mut hits = Vec::new();
    for i in 0..=(have.len() - want.len()) {
        if have[i..i + want.len()] == want[..] {
            hits.push(i);
        }
    }
    match hits.len() {
        0 => FuzzyResult::None,
        1 => {
            let first = hits[0];
            let last = first + want.len() - 1;
            let start = ranges[first].0;
            let mut end = ranges[last].1;
            if trailing_nl && end < content.len() {
                end += 1; // include the newline the old_string ended with
            }
            FuzzyResult::One(Span {
                start,
                end,
                line: first + 1,
            })
        }
        _ => FuzzyResult::Many(hits.iter().map(|i| i + 1).collect()),
    }
}

/// Indentation width, tabs counting 4.
fn indent_width(line: &str) -> usize {
    line.chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .map(|c| if c == '\t' { 4 } else { 1 })
        .sum()
}

/// When the match tolerated indentation differences, shift `new` by the same amount so the
/// replacement sits at the file's indentation, in the file's style (tabs or spaces).
fn reindent(new: &str, old: &str, matched: &str, fuzz: Fuzz) -> String {
    if fuzz == Fuzz::TrailingWhitespace {
        return new.to_string();
    }
    let first_old = old.lines().find(|l| !l.trim().is_empty());
    let first_matched = matched.lines().find(|l| !l.trim().is_empty());
    let (Some(fo), Some(fm)) = (first_old, first_matched) else {
        return new.to_string();
    };
    let (w_old, w_m) = (indent_width(fo) as isize, indent_width(fm) as isize);
    let use_tabs = fm.starts_with('\t');
    let same_style = fo.starts_with('\t') == use_tabs;
    if w_old == w_m && same_style {
        return new.to_string();
    }
    let mut out = Vec::new();
    for line in new.split('\n') {
        if line.trim().is_empty() {
            out.push(line.to_string());
            continue;
        }
        let w = (indent_width(line) as isize - w_old + w_m).max(0) as usize;
        let indent = if use_tabs {
            "\t".repeat(w / 4) + &" ".repeat(w % 4)
        } else {
            " ".repeat(w)
        };
        out.push(format!("{indent}{}", line.trim_start_matches([' ', '\t'])));
    }
    out.join("\n")
}

/// Similarity of two trimmed lines in 0..=1 (common prefix and suffix over the longer one).
fn line_similarity(a: &str, b: &str) -> f64 {
    let (a, b) = (a.trim(), b.trim());
    if a == b {
        return 1.0;
    }
    let (ab, bb) = (a.as_bytes(), b.as_bytes());
    let longest = ab.len().max(bb.len());
    if longest == 0 {
        return 1.0;
    }
    let prefix = ab.iter().zip(bb).take_while(|(x, y)| x == y).count();
    let suffix = ab[prefix..]
        .iter()
        .rev()
        .zip(bb[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    (prefix + suffix) as f64 / longest as f64
}

/// The "not found" error: the nearest window of lines with expected and actual text.
fn not_found(content: &str, old: &str, shown: &str) -> String {
    let (olds, _) = old_lines(old);
    let ranges = line_ranges(content);
    let n = olds.len().min(ranges.len().max(1));
    let mut best: Option<(f64, usize)> = None;
    if !ranges.is_empty() {
        for i in 0..=(ranges.len().saturating_sub(n)) {
            let score: f64 = (0..n)
                .map(|j| {
                    let (s, e) = ranges[(i + j).min(ranges.len() - 1)];
                    line_similarity(&content[s..e], olds[j])
                })
                .sum::<f64>()
                / n as f64;
            if best.is_none_or(|(b, _)| score > b) {
                best = Some((score, i));
            }
        }
    }
    match best {
        Some((score, i)) if score >= 0.3 => {
            let last = (i + n).min(ranges.len()) - 1;
            let actual = &content[ranges[i].0..ranges[last].1];
            format!(
                "old_string not found in {shown}. Nearest match at line {} ({}% similar):\n--- expected (old_string)\n{}\n--- actual (lines {}-{})\n{}\n---\nRe-read the file and copy the text exactly, including whitespace.",
                i + 1,
                (score * 100.0).round() as u32,
                old.trim_end_matches('\n'),
                i + 1,
                last + 1,
                actual
            )
        }
        _ => format!(
            "old_string not found in {shown}, and no similar lines exist. Re-read the file (read_file) before editing."
        ),
    }
}
