//! Rule parsing and matching: `Tool`, `Tool(glob)`, `Bash(prefix:*)`, `Bash(exact command)`,
//! `Edit` (the writers) and `Read` (the readers).
//!
//! Path globs are matched against the canonical forms of a path (see [`super::paths`]); the
//! literal directory part of each glob is resolved the same way once the workspace is known,
//! so a rule written through a symlink or with `./` still names the files it meant.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};

use super::bash::{shell_words, Piece};
use super::paths::resolve;
use super::shapes::{could_start_with, glob_prefix};
use super::wrappers::basename;
use super::PolicyError;
use crate::tools::{READER_TOOLS, WRITER_TOOLS};

#[derive(Debug, Clone)]
pub(super) enum ToolPat {
    /// Lowercased tool name (`Bash` matches `bash`).
    Name(String),
    /// `Edit`: the writer group.
    Writers,
    /// `Read`: the reader group.
    Readers,
    /// A glob over tool names (`mcp__github__*`).
    Glob(GlobMatcher),
}

#[derive(Debug, Clone)]
pub(super) enum Spec {
    /// `Bash(prefix:*)`: the words of the command start with these words.
    Prefix(Vec<String>),
    /// `Bash(glob)`: a glob over the command text.
    CommandGlob(GlobMatcher),
    /// `Tool(glob)`: a path glob over the canonical path forms.
    Path {
        /// The glob as written (normalised), to rebase once the workspace is known.
        pattern: String,
        /// The glob and its rebased alternatives.
        globs: Vec<GlobMatcher>,
        /// For a slash-free glob: also matched against the file name anywhere.
        basename_only: Option<GlobMatcher>,
    },
    /// One exact bash command (`Bash(cmd)` without glob characters, or a session approval).
    Exact(String),
    /// `WebFetch(domain:host)`: the host of a `web_fetch` URL.
    Domain(reasonix_forward::web::WebSpec),
}

#[derive(Debug, Clone)]
pub(super) struct Rule {
    pub(super) text: String,
    pub(super) tool: ToolPat,
    pub(super) spec: Option<Spec>,
}

fn bad(rule: &str, why: &str) -> PolicyError {
    PolicyError::BadRule {
        rule: rule.to_string(),
        why: why.to_string(),
    }
}

/// Characters that make a glob more than a literal.
const GLOB_META: [char; 6] = ['*', '?', '[', ']', '{', '}'];

/// Escapes glob characters so the text matches only itself.
pub(super) fn escape_glob(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if GLOB_META.contains(&c) || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The literal text of a glob without unescaped metacharacters, or None.
fn unescape_literal(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?),
            c if GLOB_META.contains(&c) => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

fn path_glob(text: &str, pattern: &str) -> Result<GlobMatcher, PolicyError> {
    Ok(GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| bad(text, &e.to_string()))?
        .compile_matcher())
}

/// `./a//b/` → `a/b`; `~/x` → `$HOME/x`.
fn normalize_pattern(s: &str) -> String {
    let mut p = s.to_string();
    if let Some(rest) = p.strip_prefix("~/") {
        if let Some(home) = std::env::var_os("HOME") {
            p = format!("{}/{rest}", Path::new(&home).display());
        }
    }
    while p.contains("//") {
        p = p.replace("//", "/");
    }
    while let Some(rest) = p.strip_prefix("./") {
        p = rest.to_string();
    }
    while p.contains("/./") {
        p = p.replace("/./", "/");
    }
    if p.len() > 1 {
        if let Some(rest) = p.strip_suffix('/') {
            p = rest.to_string();
        }
    }
    p
}

/// The glob itself, plus `dir` for `dir/**` (the directory is what the glob covers too: moving
/// or deleting it changes everything below).
fn globs_for(text: &str, pattern: &str) -> Result<Vec<GlobMatcher>, PolicyError> {
    let mut v = vec![path_glob(text, pattern)?];
    if let Some(base) = pattern.strip_suffix("/**") {
        if !base.is_empty() {
            v.push(path_glob(text, base)?);
        }
    }
    Ok(v)
}

impl Rule {
    pub(super) fn parse(text: &str) -> Result<Rule, PolicyError> {
        let t = text.trim();
        let (name, spec) = match t.find('(') {
            Some(i) => {
                let Some(inner) = t[i + 1..].strip_suffix(')') else {
                    return Err(bad(text, "missing closing `)`"));
                };
                (t[..i].trim(), Some(inner.trim()))
            }
            None => (t, None),
        };
        if name.is_empty() {
            return Err(bad(text, "empty tool name"));
        }
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*' | '?'))
        {
            return Err(bad(
                text,
                "tool names use letters, digits, `_`, `-` and glob `*`",
            ));
        }
        let tool = if name.eq_ignore_ascii_case("edit") {
            ToolPat::Writers
        } else if name.eq_ignore_ascii_case("read") {
            ToolPat::Readers
        } else if reasonix_forward::web::names_web_fetch(name) {
            ToolPat::Name(reasonix_forward::web::WEB_FETCH_TOOL.to_string())
        } else if name.contains(['*', '?']) {
            let g = GlobBuilder::new(&name.to_ascii_lowercase())
                .build()
                .map_err(|e| bad(text, &e.to_string()))?;
            ToolPat::Glob(g.compile_matcher())
        } else {
            ToolPat::Name(name.to_ascii_lowercase())
        };
        let is_bash = matches!(&tool, ToolPat::Name(n) if n == "bash");
        let is_web =
            matches!(&tool, ToolPat::Name(n) if n == reasonix_forward::web::WEB_FETCH_TOOL);
        let spec = match spec {
            None => None,
            Some("") => return Err(bad(text, "empty specifier inside ()")),
            Some(s) if is_web => Some(Spec::Domain(
                reasonix_forward::web::parse_spec(s).map_err(|why| bad(text, &why))?,
            )),
            Some(s) if is_bash && s.ends_with(":*") => {
                let words = shell_words(s[..s.len() - 2].trim());
                if words.is_empty() {
                    return Err(bad(text, "empty command prefix before `:*`"));
                }
                Some(Spec::Prefix(words))
            }
            Some(s) if is_bash => match unescape_literal(s) {
                Some(exact) => Some(Spec::Exact(exact)),
                // Command globs run over command text, where `*` must cross `/`.
                None => Some(Spec::CommandGlob(
                    GlobBuilder::new(s)
                        .literal_separator(false)
                        .build()
                        .map_err(|e| bad(text, &e.to_string()))?
                        .compile_matcher(),
                )),
            },
            Some(s) => {
                // Path globs keep `*` within one directory; a slash-free glob also matches
                // the file name anywhere (like .gitignore).
                let pattern = normalize_pattern(s);
                let basename_only = if !pattern.contains('/') {
                    Some(path_glob(text, &pattern)?)
                } else {
                    None
                };
                Some(Spec::Path {
                    globs: globs_for(text, &pattern)?,
                    pattern,
                    basename_only,
                })
            }
        };
        Ok(Rule {
            text: t.to_string(),
            tool,
            spec,
        })
    }

    /// Adds the canonical spellings of a path glob's literal directory part (symlinks and
    /// `..` resolved, absolute globs inside the workspace made relative).
    pub(super) fn rebase(&mut self, workspace: &Path) {
        let Some(Spec::Path { pattern, globs, .. }) = &mut self.spec else {
            return;
        };
        let parts: Vec<&str> = pattern.split('/').collect();
        let lit = parts
            .iter()
            .take_while(|p| !p.contains(['*', '?', '[', '{', '\\']))
            .count();
        if lit == 0 {
            return;
        }
        let prefix = parts[..lit].join("/");
        let rest = parts[lit..].join("/");
        let prefix_path = if prefix.is_empty() {
            PathBuf::from("/")
        } else {
            PathBuf::from(&prefix)
        };
        let resolved = resolve(workspace, &prefix_path);
        let join = |base: String| {
            if rest.is_empty() {
                base
            } else if base.is_empty() || base == "." {
                rest.clone()
            } else if base.ends_with('/') {
                format!("{base}{rest}")
            } else {
                format!("{base}/{rest}")
            }
        };
        let mut alts = vec![join(resolved.display().to_string())];
        if let Ok(rel) = resolved.strip_prefix(workspace) {
            alts.push(join(rel.display().to_string()));
        }
        for alt in alts {
            if alt != *pattern && !alt.is_empty() {
                if let Ok(more) = globs_for(&self.text, &alt) {
                    globs.extend(more);
                }
            }
        }
    }

    pub(super) fn names_tool(&self, tool: &str) -> bool {
        let lower = tool.to_ascii_lowercase();
        match &self.tool {
            ToolPat::Name(n) => *n == lower,
            ToolPat::Writers => WRITER_TOOLS.contains(&tool),
            ToolPat::Readers => READER_TOOLS.contains(&tool),
            ToolPat::Glob(g) => g.is_match(&lower),
        }
    }

    /// For a non-bash tool: does the rule cover this canonical path form?
    pub(super) fn matches_path(&self, subject: &str) -> bool {
        match &self.spec {
            None => true,
            Some(Spec::Path {
                globs,
                basename_only,
                ..
            }) => {
                globs.iter().any(|g| g.is_match(subject))
                    || basename_only.as_ref().is_some_and(|g| {
                        Path::new(subject)
                            .file_name()
                            .is_some_and(|n| g.is_match(n))
                    })
            }
            Some(Spec::Prefix(_) | Spec::CommandGlob(_) | Spec::Exact(_) | Spec::Domain(_)) => {
                false
            }
        }
    }

    /// For `web_fetch`: does the rule cover this host?
    pub(super) fn matches_host(&self, host: &str) -> bool {
        match &self.spec {
            None => true,
            Some(Spec::Domain(d)) => d.covers(host),
            Some(_) => false,
        }
    }

    /// For bash: does the rule cover this piece? `strict` (allow rules) matches only what the
    /// command is as written, and never a piece with substitutions, writing redirections or
    /// an unknowable command; deny and ask rules (not strict) also match everything the piece
    /// runs through wrappers, under any spelling of the command name.
    pub(super) fn matches_piece(&self, piece: &Piece, strict: bool) -> bool {
        let plain = !piece.has_ops && piece.opaque.is_none();
        match &self.spec {
            None => !strict || plain,
            Some(Spec::Exact(cmd)) => piece.text == *cmd,
            Some(Spec::Prefix(prefix)) => {
                if strict {
                    // As written: `Bash(make:*)` does not cover `PATH=/tmp make`.
                    return plain && starts_with_words(&piece.words, prefix);
                }
                starts_with_words(piece.command_words(), prefix)
                    || piece.runs.iter().any(|r| {
                        starts_with_words(r, prefix) || starts_with_words(&based(r), prefix)
                    })
            }
            Some(Spec::CommandGlob(glob)) => {
                if strict {
                    return plain && glob.is_match(&piece.text);
                }
                glob.is_match(&piece.text)
                    || piece
                        .runs
                        .iter()
                        .any(|r| glob.is_match(r.join(" ")) || glob.is_match(based(r).join(" ")))
            }
            Some(Spec::Path { .. } | Spec::Domain(_)) => false,
        }
    }
}

impl Rule {
    /// For deny and ask rules on bash: could this piece be what the rule names, for some
    /// value of the parts only known when it runs (`$r -rf x`, `rm "$f"`, `rm {-rf,x}`, or
    /// shell text that cannot be read)? Only pieces with such parts are asked; the rest are
    /// decided by [`Rule::matches_piece`].
    pub(super) fn could_name(&self, piece: &Piece) -> bool {
        let prefix = match &self.spec {
            None => return !piece.could.is_empty(),
            Some(Spec::Prefix(prefix)) => prefix.clone(),
            // Over-approximated by their leading words: a piece that could start like the
            // command could be it.
            Some(Spec::Exact(cmd)) => shell_words(cmd),
            Some(Spec::CommandGlob(glob)) => glob_prefix(glob.glob().glob()),
            Some(Spec::Path { .. } | Spec::Domain(_)) => return false,
        };
        piece
            .could
            .iter()
            .any(|shapes| could_start_with(shapes, &prefix))
    }
}

/// The words with the command name reduced to its basename (`/bin/rm` → `rm`).
fn based(r: &[String]) -> Vec<String> {
    r.iter()
        .enumerate()
        .map(|(i, w)| {
            if i == 0 {
                basename(w).to_string()
            } else {
                w.clone()
            }
        })
        .collect()
}

pub(super) fn starts_with_words(words: &[String], prefix: &[String]) -> bool {
    words.len() >= prefix.len() && words[..prefix.len()] == prefix[..]
}
