//! `read_file`: numbered lines with paging.

use std::io::{BufRead, BufReader, Read};

use serde::Deserialize;
use serde_json::{json, Value};

use super::{blocking, parse_args, Tool, ToolContext, ToolOutput};

/// Lines returned when `limit` is not given.
pub const READ_DEFAULT_LIMIT: usize = 2000;
/// Bytes scanned for a NUL before a file is called binary.
pub const BINARY_PEEK: usize = 8 * 1024;
/// Characters of one line shown before it is cut.
pub const READ_MAX_LINE_CHARS: usize = 2000;

/// `read_file{path, offset=0, limit=2000}`.
pub struct ReadFileTool;

#[derive(Deserialize)]
struct Args {
    path: String,
    #[serde(default)]
    offset: Option<u64>,
    #[serde(default)]
    limit: Option<u64>,
}

#[async_trait::async_trait]
impl Tool for ReadFileTool {
    fn name(&self) -> &'static str {
        "read_file"
    }

    fn description(&self) -> &'static str {
        "Read a text file. Each line is prefixed with its 1-based number and an arrow \
         (`  42→text`) so later edits can target exact lines. Returns at most `limit` lines \
         (default 2000) starting after `offset` lines; a trailer tells the offset to continue \
         from. Binary files and directories are refused (use `ls` for directories). A Jupyter \
         notebook (.ipynb) is shown as numbered cells (id, type, source, outputs summarised); \
         for it offset and limit count cells; edit it with notebook_edit."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace or absolute"},
                "offset": {"type": "integer", "minimum": 0, "description": "Number of lines to skip before the first line returned (default 0)"},
                "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to return (default 2000)"}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let a: Args = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        let ctx = ctx.clone();
        blocking(move || read(&ctx, &a)).await
    }
}

fn read(ctx: &ToolContext, a: &Args) -> ToolOutput {
    if a.path.trim().is_empty() {
        return ToolOutput::err("path is required");
    }
    let path = ctx.resolve(&a.path);
    let shown = ctx.display(&path);
    if ctx.is_forbidden_read(&path) {
        return ToolOutput::err(format!(
            "read {shown}: refused, the path is in a forbid_read location ([sandbox] forbid_read)"
        ));
    }
    match std::fs::metadata(&path) {
        Ok(m) if m.is_dir() => {
            return ToolOutput::err(format!(
                "{shown} is a directory, not a file — use the ls tool to list it, or read a specific file inside it"
            ))
        }
        Ok(_) => {}
        Err(e) => return ToolOutput::err(format!("read {shown}: {}", io_text(&e))),
    }
    if super::notebook::is_notebook(&path) {
        if let Some(out) = read_notebook(&path, &shown, a) {
            return out;
        }
    }
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) => return ToolOutput::err(format!("read {shown}: {}", io_text(&e))),
    };
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    // Peek for a NUL without consuming: fill_buf may return less than 8 KiB, so read the peek
    // separately and chain it back in front.
    let mut peek = Vec::with_capacity(BINARY_PEEK);
    if let Err(e) = (&mut reader)
        .take(BINARY_PEEK as u64)
        .read_to_end(&mut peek)
    {
        return ToolOutput::err(format!("read {shown}: {}", io_text(&e)));
    }
    if peek.contains(&0) {
        return ToolOutput::err(format!(
            "binary file {shown} (NUL byte detected); use `bash` with xxd or hexdump to inspect it"
        ));
    }
    let mut body = peek
        .strip_prefix(b"\xEF\xBB\xBF")
        .unwrap_or(&peek)
        .chain(reader);
    let offset = a.offset.unwrap_or(0) as usize;
    let limit = a
        .limit
        .map(|l| l.max(1) as usize)
        .unwrap_or(READ_DEFAULT_LIMIT);

    let mut collected: Vec<String> = Vec::new();
    let mut line_no = 0usize;
    let mut has_more = false;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match body.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return ToolOutput::err(format!("read {shown}: {}", io_text(&e))),
        }
        line_no += 1;
        if line_no <= offset {
            continue;
        }
        if collected.len() >= limit {
            has_more = true;
            break;
        }
        let mut line = buf.as_slice();
        line = line.strip_suffix(b"\n").unwrap_or(line);
        line = line.strip_suffix(b"\r").unwrap_or(line);
        let mut text = String::from_utf8_lossy(line).into_owned();
        if text.chars().count() > READ_MAX_LINE_CHARS {
            text =
                text.chars().take(READ_MAX_LINE_CHARS).collect::<String>() + "… [line truncated]";
        }
        collected.push(text);
    }
    if line_no == 0 {
        return ToolOutput::ok("(empty file)");
    }
    if collected.is_empty() {
        return ToolOutput::ok(format!(
            "(offset {offset} is past EOF — file has {line_no} lines)"
        ));
    }
    let width = (offset + collected.len()).to_string().len();
    let mut out = String::new();
    for (i, line) in collected.iter().enumerate() {
        out.push_str(&format!("{:>width$}→{}\n", offset + i + 1, line));
    }
    if has_more {
        out.push_str(&format!(
            "\n[more lines below; pass offset={} to continue]\n",
            offset + collected.len()
        ));
    }
    ToolOutput::ok(out)
}

/// A notebook as cells, or None when the file is not one (it is then read as text).
fn read_notebook(path: &std::path::Path, shown: &str, a: &Args) -> Option<ToolOutput> {
    let text = std::fs::read_to_string(path).ok()?;
    let offset = a.offset.unwrap_or(0) as usize;
    let limit = a
        .limit
        .map(|l| l.max(1) as usize)
        .unwrap_or(READ_DEFAULT_LIMIT);
    super::notebook::render(&text, shown, offset, limit)
        .ok()
        .map(ToolOutput::ok)
}

/// OS error text without the "(os error N)" suffix the model does not need.
pub(crate) fn io_text(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => {
            let s = e.to_string();
            match s.find(" (os error") {
                Some(i) => s[..i].to_string(),
                None => s,
            }
        }
    }
}
