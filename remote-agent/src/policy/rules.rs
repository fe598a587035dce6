//! Rule parsing and matching: `Tool`, `Tool(glob)`, `Bash(prefix:*)`, `Edit` (writers).

use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};

use super::bash::{shell_words, strip_assignments, strip_wrappers, Piece};
use super::PolicyError;
use crate::tools::WRITER_TOOLS;

#[derive(Debug, Clone)]
pub(super) enum ToolPat {
    /// Lowercased tool name (`Bash` matches `bash`).
    Name(String),
    /// `Edit`: the writer group.
    Writers,
    /// A glob over tool names (`mcp__github__*`).
    Glob(GlobMatcher),
}

#[derive(Debug, Clone)]
pub(super) enum Spec {
    /// `Bash(prefix:*)`: the words of the command start with these words.
    Prefix(Vec<String>),
    /// `Tool(glob)`: a path glob, or a glob over a bash command.
    Glob {
        glob: GlobMatcher,
        basename_only: Option<GlobMatcher>,
    },
    /// Session approval of one exact bash command.
    Exact(String),
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
        } else if name.contains(['*', '?']) {
            let g = GlobBuilder::new(&name.to_ascii_lowercase())
                .build()
                .map_err(|e| bad(text, &e.to_string()))?;
            ToolPat::Glob(g.compile_matcher())
        } else {
            ToolPat::Name(name.to_ascii_lowercase())
        };
        let is_bash = matches!(&tool, ToolPat::Name(n) if n == "bash");
        let spec = match spec {
            None => None,
            Some("") => return Err(bad(text, "empty specifier inside ()")),
            Some(s) if is_bash && s.ends_with(":*") => {
                let words = shell_words(s[..s.len() - 2].trim());
                if words.is_empty() {
                    return Err(bad(text, "empty command prefix before `:*`"));
                }
                Some(Spec::Prefix(words))
            }
            Some(s) => {
                // Bash globs run over command text, where `*` must cross `/`; path globs keep
                // `*` within one directory, and a slash-free glob also matches the file name
                // anywhere (like .gitignore).
                let glob = GlobBuilder::new(s)
                    .literal_separator(!is_bash)
                    .build()
                    .map_err(|e| bad(text, &e.to_string()))?
                    .compile_matcher();
                let basename_only = if !is_bash && !s.contains('/') {
                    Some(glob.clone())
                } else {
                    None
                };
                Some(Spec::Glob {
                    glob,
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

    pub(super) fn names_tool(&self, tool: &str) -> bool {
        let lower = tool.to_ascii_lowercase();
        match &self.tool {
            ToolPat::Name(n) => *n == lower,
            ToolPat::Writers => WRITER_TOOLS.contains(&tool),
            ToolPat::Glob(g) => g.is_match(&lower),
        }
    }

    /// For a non-bash tool: does the rule cover this path subject?
    pub(super) fn matches_path(&self, subject: &str) -> bool {
        match &self.spec {
            None => true,
            Some(Spec::Glob {
                glob,
                basename_only,
            }) => {
                glob.is_match(subject)
                    || basename_only.as_ref().is_some_and(|g| {
                        Path::new(subject)
                            .file_name()
                            .is_some_and(|n| g.is_match(n))
                    })
            }
            Some(Spec::Prefix(_)) | Some(Spec::Exact(_)) => false,
        }
    }

    /// For bash: does the rule cover this piece? `strict` (allow rules) never matches a piece
    /// with substitutions or writing redirections.
    pub(super) fn matches_piece(&self, piece: &Piece, strict: bool) -> bool {
        match &self.spec {
            None => true,
            Some(Spec::Exact(cmd)) => piece.text == *cmd,
            Some(Spec::Prefix(prefix)) => {
                if strict && piece.has_ops {
                    return false;
                }
                let words = strip_assignments(&piece.words);
                if starts_with_words(words, prefix) {
                    return true;
                }
                // deny/ask also see through `sudo`, `env`, `/bin/rm`, ... .
                !strict && {
                    let inner = strip_wrappers(words);
                    starts_with_words(inner, prefix) || {
                        let based: Vec<String> = inner
                            .iter()
                            .enumerate()
                            .map(|(i, w)| {
                                if i == 0 {
                                    basename(w).to_string()
                                } else {
                                    w.clone()
                                }
                            })
                            .collect();
                        starts_with_words(&based, prefix)
                    }
                }
            }
            Some(Spec::Glob { glob, .. }) => {
                if strict && piece.has_ops {
                    return false;
                }
                glob.is_match(&piece.text)
            }
        }
    }
}

fn starts_with_words(words: &[String], prefix: &[String]) -> bool {
    words.len() >= prefix.len() && words[..prefix.len()] == prefix[..]
}

pub(super) fn basename(w: &str) -> &str {
    w.rsplit('/').next().unwrap_or(w)
}
