//! The one walker of custom command folders (`**/*.md`), used by the host for the
//! workspace's `.reasonix/commands/` and by the laptop for `~/.reasonix/commands/`.
//!
//! It only reads: the text of each file, bounded in size, number and nesting, with every
//! file it could not use and why. Parsing (front matter, substitution) is the client's.

use std::path::{Path, PathBuf};

use crate::proto::{CommandFile, CommandFileProblem};

/// Largest command file read.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Most command files read (the rest are reported as skipped).
pub const MAX_FILES: usize = 256;
/// Deepest folder nesting below the commands folder.
pub const MAX_DEPTH: usize = 4;

/// How one folder is walked.
pub struct Walk<'a> {
    /// The commands folder (names are paths below it).
    pub root: &'a Path,
    /// When set (a canonical path), a file or folder whose real path (symlinks resolved)
    /// is outside it is skipped: the host confines the workspace's files to the workspace.
    pub confine_to: Option<&'a Path>,
    /// How a path is named in `CommandFile::path` and in problems.
    pub shown: &'a dyn Fn(&Path) -> String,
}

impl Walk<'_> {
    /// Every `*.md` below the root, sorted by name, and the files that could not be used
    /// with the reason. A missing folder is no commands, not an error.
    pub fn read(&self) -> (Vec<CommandFile>, Vec<CommandFileProblem>) {
        let mut files = Vec::new();
        let mut skipped = Vec::new();
        if self.root.is_dir() {
            self.walk(self.root, 0, &mut files, &mut skipped);
        }
        crate::sort::sort_by(&mut files, |a, b| a.name.cmp(&b.name));
        (files, skipped)
    }

    fn walk(
        &self,
        dir: &Path,
        depth: usize,
        files: &mut Vec<CommandFile>,
        skipped: &mut Vec<CommandFileProblem>,
    ) {
        let shown = self.shown;
        let mut entries: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(rd) => rd.flatten().map(|e| e.path()).collect(),
            Err(e) => {
                skipped.push(CommandFileProblem {
                    path: shown(dir),
                    problem: format!("cannot list the folder: {e}"),
                });
                return;
            }
        };
        crate::sort::sort(&mut entries);
        for path in entries {
            let problem = |p: String| CommandFileProblem {
                path: shown(&path),
                problem: p,
            };
            // Resolve symlinks once and judge the target.
            let real = if let Some(confine) = self.confine_to {
                let real = match path.canonicalize() {
                    Ok(r) => r,
                    Err(e) => {
                        skipped.push(problem(format!("cannot resolve: {e}")));
                        continue;
                    }
                };
                if !real.starts_with(confine) {
                    skipped.push(problem(
                        "it is a link to a file outside the workspace; command files must live in the workspace".into(),
                    ));
                    continue;
                }
                real
            } else {
                path.clone()
            };
            if real.is_dir() {
                if depth + 1 >= MAX_DEPTH {
                    skipped.push(problem(format!(
                        "folders nest deeper than {MAX_DEPTH} levels; move the commands up"
                    )));
                    continue;
                }
                self.walk(&path, depth + 1, files, skipped);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("md") {
                continue;
            }
            if files.len() >= MAX_FILES {
                skipped.push(problem(format!(
                    "more than {MAX_FILES} command files; the rest are not read"
                )));
                continue;
            }
            let Some(name) = command_name(self.root, &path) else {
                skipped.push(problem(
                    "the name may only use letters, digits, `-`, `_` and `.` (folders become `dir:name`)".into(),
                ));
                continue;
            };
            match std::fs::metadata(&real) {
                Ok(m) if m.len() > MAX_FILE_BYTES => {
                    skipped.push(problem(format!(
                        "{} bytes, more than the {MAX_FILE_BYTES} a command file may have",
                        m.len()
                    )));
                    continue;
                }
                Ok(_) => {}
                Err(e) => {
                    skipped.push(problem(format!("cannot read: {e}")));
                    continue;
                }
            }
            match std::fs::read(&real).map(String::from_utf8) {
                Ok(Ok(text)) => files.push(CommandFile {
                    name,
                    path: shown(&path),
                    text,
                }),
                Ok(Err(_)) => skipped.push(problem("not UTF-8 text".into())),
                Err(e) => skipped.push(problem(format!("cannot read: {e}"))),
            }
        }
    }
}

/// `git/commit.md` below `root` is `git:commit`; `None` when a part has other characters
/// than letters, digits, `-`, `_` or `.`.
pub fn command_name(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?.with_extension("");
    let mut parts = Vec::new();
    for c in rel.components() {
        let part = c.as_os_str().to_str()?;
        let ok = !part.is_empty()
            && part
                .chars()
                .all(|ch| ch.is_alphanumeric() || matches!(ch, '-' | '_' | '.'));
        if !ok {
            return None;
        }
        parts.push(part.to_string());
    }
    (!parts.is_empty()).then(|| parts.join(":"))
}

/// The prompt of `body` for `args`: `$ARGUMENTS`, `$1`…`$N` (missing ones are empty) and
/// `$$`; any other `$` stays as it is. Command files on the laptop and skills on the host
/// use it.
pub fn expand_args(body: &str, args: &str) -> String {
    let positional = split_args(args);
    let mut out = String::with_capacity(body.len() + args.len());
    let mut rest = body;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some(r) = after.strip_prefix("ARGUMENTS") {
            out.push_str(args.trim());
            rest = r;
        } else {
            let digits = after.chars().take_while(char::is_ascii_digit).count();
            match after[..digits].parse::<usize>() {
                Ok(n) if n >= 1 => {
                    if let Some(a) = positional.get(n - 1) {
                        out.push_str(a);
                    }
                    rest = &after[digits..];
                }
                _ => {
                    out.push('$');
                    rest = after;
                }
            }
        }
    }
    out.push_str(rest);
    out
}

/// Split arguments on whitespace; `"a b"` and `'a b'` are one argument.
pub fn split_args(args: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for ch in args.chars() {
        match quote {
            Some(q) if ch == q => quote = None,
            Some(_) => cur.push(ch),
            None if ch == '"' || ch == '\'' => {
                quote = Some(ch);
                any = true;
            }
            None if ch.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            None => cur.push(ch),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}
