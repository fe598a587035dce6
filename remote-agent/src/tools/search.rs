//! `ls`, `glob` and `grep`: read-only views of the tree. glob and grep walk with the `ignore`
//! crate, so `.gitignore` (also without a `.git` directory), `.ignore` and global excludes apply.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ignore::{WalkBuilder, WalkState};
use reasonix_forward::sync::LockExt;
use serde::Deserialize;
use serde_json::{json, Value};

use super::read::{io_text, BINARY_PEEK};
use super::{blocking, parse_args, ReadFilter, Tool, ToolContext, ToolOutput};

/// Entries `ls` lists before it stops.
pub const LS_MAX_ENTRIES: usize = 5000;
/// Paths `glob` returns before it stops.
pub const GLOB_MAX_RESULTS: usize = 1000;
/// Matching lines `grep` returns.
pub const GREP_MAX_RESULTS: usize = 200;
/// Characters of a matching line shown by `grep`.
pub const GREP_MAX_LINE_CHARS: usize = 300;
/// Matches collected before the walk stops (results are sorted, then cut to 200).
const GREP_COLLECT_LIMIT: usize = 10_000;
/// Directories `ls` never descends into.
pub const LS_SKIP_DIRS: [&str; 12] = [
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    "target",
    "__pycache__",
    ".venv",
    "venv",
    ".mypy_cache",
    ".pytest_cache",
    ".tox",
    ".next",
];

/// What a walker must neither enter nor report: the forbid_read roots (canonical forms) and
/// the paths the session's `Read`-type deny and ask rules name for this tool (a walker
/// cannot ask per file, so an ask rule hides as a deny does).
#[derive(Clone)]
struct Prune {
    forbidden: Vec<PathBuf>,
    rules: Arc<dyn ReadFilter>,
    tool: &'static str,
}

impl Prune {
    fn new(ctx: &ToolContext, tool: &'static str) -> Self {
        Prune {
            forbidden: ctx
                .forbid_read
                .iter()
                .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
                .collect(),
            rules: ctx.read_filter.clone(),
            tool,
        }
    }

    fn hides(&self, path: &Path) -> bool {
        self.forbidden.iter().any(|f| path.starts_with(f)) || self.rules.hides(self.tool, path)
    }
}

// ---------------------------------------------------------------------------------------- ls

/// `ls{path=".", recursive=false}`.
pub struct LsTool;

#[derive(Deserialize)]
struct LsArgs {
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    recursive: bool,
}

#[async_trait::async_trait]
impl Tool for LsTool {
    fn name(&self) -> &'static str {
        "ls"
    }

    fn description(&self) -> &'static str {
        "List a directory (default: the workspace root). Directories end with `/`. With \
         recursive=true the whole subtree is listed, without descending into .git, \
         node_modules, target and similar; at most 5000 entries."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory to list (default \".\")"},
                "recursive": {"type": "boolean", "description": "List the whole subtree (default false)"}
            },
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let a: LsArgs = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        let ctx = ctx.clone();
        blocking(move || ls(&ctx, a.path.as_deref().unwrap_or("."), a.recursive)).await
    }
}

fn ls(ctx: &ToolContext, raw: &str, recursive: bool) -> ToolOutput {
    let root = ctx.resolve(raw);
    let shown = ctx.display(&root);
    if ctx.is_forbidden_read(&root) {
        return ToolOutput::err(format!(
            "ls {shown}: refused, the path is in a forbid_read location"
        ));
    }
    match std::fs::metadata(&root) {
        Ok(m) if !m.is_dir() => {
            return ToolOutput::err(format!(
                "{shown} is a file, not a directory — use read_file to read it"
            ))
        }
        Ok(_) => {}
        Err(e) => return ToolOutput::err(format!("ls {shown}: {}", io_text(&e))),
    }
    let prune = Prune::new(ctx, "ls");
    let mut out: Vec<String> = Vec::new();
    if let Err(e) = list_dir(&root, "", recursive, &prune, &mut out) {
        return ToolOutput::err(format!("ls {shown}: {}", io_text(&e)));
    }
    let truncated = out.len() > LS_MAX_ENTRIES;
    out.truncate(LS_MAX_ENTRIES);
    if out.is_empty() {
        return ToolOutput::ok(format!("(empty directory: {shown})"));
    }
    let mut text = out.join("\n");
    if truncated {
        text.push_str(&format!(
            "\n[truncated at {LS_MAX_ENTRIES} entries; list a subdirectory or use glob]"
        ));
    }
    ToolOutput::ok(text)
}

/// Appends the entries of `dir` (sorted, each directory followed by its subtree when
/// recursive) to `out`, stopping one past the cap so the caller can tell it was cut.
fn list_dir(
    dir: &Path,
    prefix: &str,
    recursive: bool,
    prune: &Prune,
    out: &mut Vec<String>,
) -> std::io::Result<()> {
    let mut entries: Vec<(String, bool)> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| {
            let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
            (e.file_name().to_string_lossy().into_owned(), is_dir)
        })
        .collect();
    reasonix_forward::sort::sort(&mut entries);
    for (name, is_dir) in entries {
        if out.len() > LS_MAX_ENTRIES {
            return Ok(());
        }
        let rel = format!("{prefix}{name}");
        let full = dir.join(&name);
        if prune.rules.hides(prune.tool, &full) {
            continue;
        }
        if !is_dir {
            out.push(rel);
            continue;
        }
        out.push(format!("{rel}/"));
        if recursive && !LS_SKIP_DIRS.contains(&name.as_str()) && !prune.hides(&full) {
            // An unreadable subdirectory is listed but not entered.
            let _ = list_dir(&full, &format!("{rel}/"), recursive, prune, out);
        }
    }
    Ok(())
}

// -------------------------------------------------------------------------------------- glob

/// `glob{pattern}`.
pub struct GlobTool;

#[derive(Deserialize)]
struct GlobArgs {
    pattern: String,
}

#[async_trait::async_trait]
impl Tool for GlobTool {
    fn name(&self) -> &'static str {
        "glob"
    }

    fn description(&self) -> &'static str {
        "Find files by glob pattern relative to the workspace root, e.g. `**/*.rs` or \
         `src/*/mod.rs` (`*` stays within one directory, `**` crosses directories, `{a,b}` \
         alternates). Files ignored by .gitignore are skipped. Returns sorted paths, at most 1000."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob pattern relative to the workspace root"}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let a: GlobArgs = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        let ctx = ctx.clone();
        blocking(move || glob(&ctx, &a.pattern)).await
    }
}

/// The directory part of a pattern before its first glob metacharacter: walking starts there.
fn literal_base(pattern: &str) -> (String, String) {
    let mut base = Vec::new();
    let parts: Vec<&str> = pattern.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() || part.contains(['*', '?', '[', '{', '\\']) {
            return (base.join("/"), parts[i..].join("/"));
        }
        base.push(*part);
    }
    (base.join("/"), String::new())
}

fn glob(ctx: &ToolContext, pattern: &str) -> ToolOutput {
    let ws_prefix = format!("{}/", ctx.workspace.display());
    let pat = pattern
        .strip_prefix(&ws_prefix)
        .unwrap_or(pattern)
        .trim_start_matches("./");
    if pat.is_empty() {
        return ToolOutput::err("pattern is required");
    }
    if pat.starts_with('/') || pat.split('/').any(|c| c == "..") {
        return ToolOutput::err(format!(
            "glob patterns are relative to the workspace root ({}); use ls or bash `find` for other places",
            ctx.workspace.display()
        ));
    }
    let matcher = match globset::GlobBuilder::new(pat)
        .literal_separator(true)
        .build()
    {
        Ok(g) => g.compile_matcher(),
        Err(e) => return ToolOutput::err(format!("invalid glob pattern {pattern}: {e}")),
    };
    let (base, _) = literal_base(pat);
    let start = if base.is_empty() {
        ctx.workspace.clone()
    } else {
        ctx.workspace.join(&base)
    };
    if !start.exists() {
        return ToolOutput::ok(format!("no files match {pattern}"));
    }
    let found: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let ws = ctx.workspace.clone();
    walker(&start, false, Prune::new(ctx, "glob"))
        .build_parallel()
        .run(|| {
            let (found, ws, matcher) = (&found, &ws, &matcher);
            Box::new(move |entry| {
                let Ok(entry) = entry else {
                    return WalkState::Continue;
                };
                if entry.file_type().is_some_and(|t| t.is_dir()) {
                    return WalkState::Continue;
                }
                if let Ok(rel) = entry.path().strip_prefix(ws) {
                    if matcher.is_match(rel) {
                        found
                            .lock_or_recover()
                            .push(rel.to_string_lossy().into_owned());
                    }
                }
                WalkState::Continue
            })
        });
    let mut found = found.into_inner_or_recover();
    if found.is_empty() {
        return ToolOutput::ok(format!("no files match {pattern}"));
    }
    reasonix_forward::sort::sort(&mut found);
    let total = found.len();
    found.truncate(GLOB_MAX_RESULTS);
    let mut text = found.join("\n");
    if total > GLOB_MAX_RESULTS {
        text.push_str(&format!(
            "\n[showing the first {GLOB_MAX_RESULTS} of {total} matches; use a narrower pattern]"
        ));
    }
    ToolOutput::ok(text)
}

/// A walker honouring .gitignore/.ignore even outside a git repository, never entering `.git`
/// or what `prune` hides. `skip_hidden` also skips dotfiles.
fn walker(start: &Path, skip_hidden: bool, prune: Prune) -> WalkBuilder {
    let mut b = WalkBuilder::new(start);
    b.hidden(skip_hidden)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .ignore(true)
        .parents(true)
        .require_git(false)
        .follow_links(false)
        .threads(
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
                .min(8),
        )
        .filter_entry(move |e| e.file_name() != ".git" && !prune.hides(e.path()));
    b
}

// -------------------------------------------------------------------------------------- grep

/// `grep{pattern, path=".", timeout_seconds=30}`.
pub struct GrepTool;

#[derive(Deserialize)]
struct GrepArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    timeout_seconds: Option<u64>,
}

/// Default grep walk budget in seconds.
pub const GREP_DEFAULT_TIMEOUT_SECS: u64 = 30;

#[async_trait::async_trait]
impl Tool for GrepTool {
    fn name(&self) -> &'static str {
        "grep"
    }

    fn description(&self) -> &'static str {
        "Search file contents with a regular expression (Rust regex syntax; prefix `(?i)` for \
         case-insensitive). Searches `path` (a directory or a file, default the workspace), \
         skipping binary, hidden and .gitignore'd files. Prints `path:line:text`, sorted, at \
         most 200 matches; stops after timeout_seconds (default 30)."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression"},
                "path": {"type": "string", "description": "Directory or file to search (default \".\")"},
                "timeout_seconds": {"type": "integer", "minimum": 1, "description": "Give up after this many seconds (default 30)"}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolOutput {
        let a: GrepArgs = match parse_args(self.name(), args) {
            Ok(a) => a,
            Err(e) => return e,
        };
        let ctx = ctx.clone();
        blocking(move || grep(&ctx, &a)).await
    }
}

struct Hit {
    path: String,
    line: usize,
    text: String,
}

fn grep(ctx: &ToolContext, a: &GrepArgs) -> ToolOutput {
    if a.pattern.is_empty() {
        return ToolOutput::err("pattern is required");
    }
    if let Some(msg) = unsupported_class(&a.pattern) {
        return ToolOutput::err(format!("invalid regex {}: {msg}", a.pattern));
    }
    let re = match regex::bytes::RegexBuilder::new(&a.pattern)
        .multi_line(true)
        .build()
    {
        Ok(r) => r,
        Err(e) => return ToolOutput::err(format!("invalid regex {}: {e}", a.pattern)),
    };
    let raw = a.path.as_deref().unwrap_or(".");
    let root = ctx.resolve(raw);
    let shown = ctx.display(&root);
    if ctx.is_forbidden_read(&root) {
        return ToolOutput::err(format!(
            "grep {shown}: refused, the path is in a forbid_read location"
        ));
    }
    if let Err(e) = std::fs::metadata(&root) {
        return ToolOutput::err(format!("grep {shown}: {}", io_text(&e)));
    }
    let timeout = Duration::from_secs(
        a.timeout_seconds
            .unwrap_or(GREP_DEFAULT_TIMEOUT_SECS)
            .max(1),
    );
    let deadline = Instant::now() + timeout;
    let timed_out = AtomicBool::new(false);
    let count = AtomicUsize::new(0);
    let hits: Mutex<Vec<Hit>> = Mutex::new(Vec::new());
    walker(&root, true, Prune::new(ctx, "grep"))
        .build_parallel()
        .run(|| {
            let (re, hits, count, timed_out) = (&re, &hits, &count, &timed_out);
            Box::new(move |entry| {
                if Instant::now() > deadline {
                    timed_out.store(true, Ordering::Relaxed);
                    return WalkState::Quit;
                }
                if count.load(Ordering::Relaxed) >= GREP_COLLECT_LIMIT {
                    return WalkState::Quit;
                }
                let Ok(entry) = entry else {
                    return WalkState::Continue;
                };
                if !entry.file_type().is_some_and(|t| t.is_file()) {
                    return WalkState::Continue;
                }
                let found = search_file(entry.path(), re, ctx);
                if !found.is_empty() {
                    count.fetch_add(found.len(), Ordering::Relaxed);
                    hits.lock_or_recover().extend(found);
                }
                WalkState::Continue
            })
        });
    let mut hits = hits.into_inner_or_recover();
    let timed_out = timed_out.load(Ordering::Relaxed);
    if hits.is_empty() {
        let mut text = format!("no matches for {} in {shown}", a.pattern);
        if timed_out {
            text.push_str(&format!(
                " (search stopped after {} s; results are incomplete)",
                timeout.as_secs()
            ));
        }
        return ToolOutput::ok(text);
    }
    reasonix_forward::sort::sort_by(&mut hits, |x, y| {
        x.path.cmp(&y.path).then(x.line.cmp(&y.line))
    });
    let total = hits.len();
    let mut text = String::new();
    for h in hits.iter().take(GREP_MAX_RESULTS) {
        text.push_str(&format!("{}:{}:{}\n", h.path, h.line, h.text));
    }
    if total > GREP_MAX_RESULTS {
        let at_least = if total >= GREP_COLLECT_LIMIT {
            "at least "
        } else {
            ""
        };
        text.push_str(&format!(
            "[showing the first {GREP_MAX_RESULTS} of {at_least}{total} matches; narrow the pattern or path]\n"
        ));
    }
    if timed_out {
        text.push_str(&format!(
            "[search stopped after {} s; results are incomplete]\n",
            timeout.as_secs()
        ));
    }
    ToolOutput::ok(text)
}

/// Matching lines of one file; binary files (NUL in the first 8 KiB) give none.
/// A `\p{…}`/`\P{…}` Unicode property class in `pattern`, which the host's regex engine does
/// not carry (its general category, script and property tables are left out of the host
/// binary to keep the upload small; `\w`, `\d`, `\s`, `\b` and `(?i)` stay Unicode-aware).
/// Refused before compiling, naming what to write instead.
pub fn unsupported_class(pattern: &str) -> Option<String> {
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            continue;
        }
        match chars.next() {
            Some(p @ ('p' | 'P')) => {
                return Some(format!(
                    "Unicode property classes (\\{p}{{…}}) are not supported on the host; \
                     use a character class instead (e.g. [A-Za-z], \\w, \\d or \\s)"
                ));
            }
            _ => continue,
        }
    }
    None
}

fn search_file(path: &Path, re: &regex::bytes::Regex, ctx: &ToolContext) -> Vec<Hit> {
    let Ok(buf) = std::fs::read(path) else {
        return Vec::new();
    };
    if buf[..buf.len().min(BINARY_PEEK)].contains(&0) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut pos = 0;
    let mut line_no = 1;
    let mut counted_to = 0;
    while pos <= buf.len() {
        let Some(m) = re.find_at(&buf, pos) else {
            break;
        };
        let line_start = buf[..m.start()]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let line_end = buf[m.start()..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(buf.len(), |i| m.start() + i);
        line_no += buf[counted_to..line_start]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        counted_to = line_start;
        let mut line = &buf[line_start..line_end];
        line = line.strip_suffix(b"\r").unwrap_or(line);
        let mut text = String::from_utf8_lossy(line).into_owned();
        if text.chars().count() > GREP_MAX_LINE_CHARS {
            text = text.chars().take(GREP_MAX_LINE_CHARS).collect::<String>() + "…";
        }
        out.push(Hit {
            path: ctx.display(path),
            line: line_no,
            text,
        });
        if out.len() >= GREP_MAX_RESULTS {
            break; // one file cannot contribute more than the visible cap
        }
        pos = line_end + 1;
    }
    out
}
