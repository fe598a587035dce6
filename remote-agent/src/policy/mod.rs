//! Permission policy: rules `Tool`, `Tool(glob)`, `Bash(prefix:*)`, `Bash(command)`, with
//! `Edit` naming the writer group and `Read` the reader group; decision order deny > ask >
//! allow > fallback; modes ask/auto/yolo.
//!
//! Rules match what a call *is*, not how it was spelled: path arguments are resolved to their
//! canonical form first ([`paths`]), and a bash command line is read like the shell reads it
//! ([`split_command`]): every simple command that can run, wherever it sits, is decided on its
//! own, and deny/ask rules also see through wrappers (`env`, `sudo`, `xargs`, `find -exec`,
//! `sh -c`, ...). What cannot be seen through is never allowed without asking.
//!
//! The agent calls [`Policy::decide`] before every tool call. What to do with
//! [`Decision::Ask`] (prompt the user, or fail closed when headless) is the agent's business.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod always;
mod bash;
mod bash_rules;
mod file_deny;
mod indirect;
pub mod paths;
mod readonly;
mod rules;
mod shapes;
mod shell;
mod web;
mod wrappers;

pub use bash::{shell_words, split_command, Piece};
pub use file_deny::{ScanBase, WriteDenyRules};
pub use readonly::is_read_only_command;
pub use shapes::{command_shapes, Shape};

use rules::{Rule, Spec};

/// The outcome for one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it.
    Allow,
    /// Ask the user first.
    Ask {
        /// Why approval is needed (shown in the prompt).
        reason: String,
    },
    /// Refuse; the reason goes back to the model.
    Deny {
        /// Which rule refused it.
        reason: String,
    },
}

/// `[permissions] mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Writers without a rule need approval.
    #[default]
    Ask,
    /// Writers without a rule run; explicit ask and deny rules still apply.
    Auto,
    /// Nothing prompts; deny rules still hold.
    Yolo,
}

impl Mode {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Ask => "ask",
            Mode::Auto => "auto",
            Mode::Yolo => "yolo",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ask" => Ok(Mode::Ask),
            "auto" => Ok(Mode::Auto),
            "yolo" => Ok(Mode::Yolo),
            other => Err(PolicyError::BadMode(other.to_string())),
        }
    }
}

/// A rule or mode that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// A rule string does not parse.
    #[error("invalid permission rule `{rule}`: {why} (expected `Tool`, `Tool(glob)` or `Bash(prefix:*)`)")]
    BadRule {
        /// The rule as written.
        rule: String,
        /// What is wrong with it.
        why: String,
    },
    /// An unknown mode name.
    #[error("invalid permissions mode `{0}` (expected ask, auto or yolo)")]
    BadMode(String),
}

/// The path rules a walking reader honours ([`Policy::read_filter`]).
#[derive(Debug, Clone)]
pub struct ReaderRules {
    rules: Vec<Rule>,
    workspace: Option<PathBuf>,
}

impl crate::tools::ReadFilter for ReaderRules {
    fn hides(&self, tool: &str, path: &Path) -> bool {
        let mut relevant = self.rules.iter().filter(|r| r.names_tool(tool)).peekable();
        if relevant.peek().is_none() {
            return false;
        }
        let forms = paths::subject_forms(self.workspace.as_deref(), &path.to_string_lossy());
        relevant.any(|r| forms.iter().any(|f| r.matches_path(f)))
    }
}

/// The compiled policy of a session.
#[derive(Debug, Clone)]
pub struct Policy {
    mode: Mode,
    allow: Vec<Rule>,
    ask: Vec<Rule>,
    deny: Vec<Rule>,
    session: Vec<Rule>,
    workspace: Option<PathBuf>,
}

impl Policy {
    /// Compiles the rule lists; any bad rule is an error naming it.
    pub fn new(
        mode: Mode,
        allow: &[String],
        ask: &[String],
        deny: &[String],
    ) -> Result<Self, PolicyError> {
        let parse = |v: &[String]| {
            v.iter()
                .map(|r| Rule::parse(r))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Policy {
            mode,
            allow: parse(allow)?,
            ask: parse(ask)?,
            deny: parse(deny)?,
            session: Vec::new(),
            workspace: None,
        })
    }

    /// Lets path rules see the workspace: relative paths are placed in it, and paths inside
    /// it (however spelled) are matched by their workspace-relative form.
    pub fn with_workspace(mut self, workspace: &Path) -> Self {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let ws = paths::resolve(&cwd, workspace);
        for r in self
            .allow
            .iter_mut()
            .chain(self.ask.iter_mut())
            .chain(self.deny.iter_mut())
        {
            r.rebase(&ws);
        }
        self.workspace = Some(ws);
        self
    }

    /// What the walking readers must skip: the paths this policy's deny rules, and (outside
    /// yolo) its ask rules, name for them.
    pub fn read_filter(&self) -> ReaderRules {
        let path_rule = |r: &&Rule| matches!(r.spec, Some(Spec::Path { .. }));
        let ask: &[Rule] = if self.mode == Mode::Yolo {
            &[]
        } else {
            &self.ask
        };
        ReaderRules {
            rules: self
                .deny
                .iter()
                .chain(ask.iter())
                .filter(path_rule)
                .cloned()
                .collect(),
            workspace: self.workspace.clone(),
        }
    }

    /// Directories a deny rule refuses to every reader as a whole (`Read(secrets/**)`,
    /// `Read(/srv/keys/**)`). The session adds them to the sandbox's hidden paths, so bash
    /// cannot read inside them either, even through a command that walks a directory above
    /// them (`grep -r x .`).
    pub fn denied_read_dirs(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for r in &self.deny {
            let readers = match &r.tool {
                rules::ToolPat::Readers => true,
                rules::ToolPat::Name(n) => n == "read_file",
                rules::ToolPat::Writers | rules::ToolPat::Glob(_) => false,
            };
            let Some(Spec::Path { pattern, .. }) = &r.spec else {
                continue;
            };
            let Some(stem) = pattern.strip_suffix("/**") else {
                continue;
            };
            if !readers || stem.is_empty() || stem.contains(['*', '?', '[', '{', '\\']) {
                continue;
            }
            let dir = Path::new(stem);
            let dir = match (&self.workspace, dir.is_absolute()) {
                (_, true) => dir.to_path_buf(),
                (Some(ws), false) => paths::resolve(ws, dir),
                (None, false) => continue,
            };
            if !out.contains(&dir) {
                out.push(dir);
            }
        }
        out
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Changes the mode (e.g. the user switching to auto mid-session).
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    /// Decides one call. `read_only` is the tool's own flag (bash is decided per piece).
    pub fn decide(&self, tool: &str, args: &Value, read_only: bool) -> Decision {
        let (d, binding) = if tool.eq_ignore_ascii_case("bash") {
            let b = self.decide_bash(args.get("command").and_then(Value::as_str).unwrap_or(""));
            (b.decision, b.binding)
        } else {
            (self.decide_tool(tool, args, read_only), false)
        };
        match (d, self.mode) {
            // yolo never prompts, but deny still holds, and so does the ask for a command
            // that cannot be read (nothing proves it is not one a deny rule names).
            (Decision::Ask { .. }, Mode::Yolo) if !binding => Decision::Allow,
            (d, _) => d,
        }
    }

    /// The path arguments of a call, each as (spelling, canonical forms).
    fn subjects(&self, tool: &str, args: &Value) -> Vec<(String, Vec<String>)> {
        let mut raws: Vec<String> = Vec::new();
        for key in ["path", "file_path", "source_path", "destination_path"] {
            if let Some(p) = args.get(key).and_then(Value::as_str) {
                raws.push(p.to_string());
            }
        }
        match tool {
            // The walkers default to the workspace root.
            "ls" | "grep" if raws.is_empty() => raws.push(".".to_string()),
            // glob walks from the literal directory part of its pattern.
            "glob" => {
                let pattern = args.get("pattern").and_then(Value::as_str).unwrap_or("");
                let base: Vec<&str> = pattern
                    .split('/')
                    .take_while(|c| !c.contains(['*', '?', '[', '{', '\\']))
                    .collect();
                let all_literal = base.len() == pattern.split('/').count();
                let base = if all_literal {
                    pattern.to_string()
                } else {
                    base.join("/")
                };
                raws.push(if base.is_empty() {
                    if pattern.starts_with('/') {
                        "/".to_string()
                    } else {
                        ".".to_string()
                    }
                } else {
                    base
                });
            }
            _ => {}
        }
        raws.into_iter()
            .map(|raw| {
                let forms = paths::subject_forms(self.workspace.as_deref(), &raw);
                (raw, forms)
            })
            .collect()
    }

    fn decide_tool(&self, tool: &str, args: &Value, read_only: bool) -> Decision {
        if tool == reasonix_forward::web::WEB_FETCH_TOOL {
            return self.decide_web_fetch(args);
        }
        let subjects = self.subjects(tool, args);
        let any = |r: &Rule| {
            r.names_tool(tool)
                && (r.spec.is_none()
                    || subjects
                        .iter()
                        .any(|(_, forms)| forms.iter().any(|f| r.matches_path(f))))
        };
        let all = |r: &Rule| {
            r.names_tool(tool)
                && (r.spec.is_none()
                    || (!subjects.is_empty()
                        && subjects
                            .iter()
                            .all(|(_, forms)| forms.iter().any(|f| r.matches_path(f)))))
        };
        if let Some(r) = self.deny.iter().find(|r| any(r)) {
            return Decision::Deny {
                reason: format!("denied by rule `{}`", r.text),
            };
        }
        if let Some(r) = self.ask.iter().find(|r| any(r)) {
            return Decision::Ask {
                reason: format!("rule `{}` asks before {tool} runs", r.text),
            };
        }
        if self.allow.iter().chain(self.session.iter()).any(all) {
            return Decision::Allow;
        }
        if read_only {
            return Decision::Allow;
        }
        match self.mode {
            Mode::Ask => {
                let paths: Vec<&str> = subjects.iter().map(|(raw, _)| raw.as_str()).collect();
                Decision::Ask {
                    reason: if paths.is_empty() {
                        format!("{tool} is not read-only and no rule allows it")
                    } else {
                        format!("{tool} wants to change {}", paths.join(" -> "))
                    },
                }
            }
            Mode::Auto | Mode::Yolo => Decision::Allow,
        }
    }
}
