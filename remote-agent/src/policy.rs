//! Permission policy: rules `Tool`, `Tool(glob)`, `Bash(prefix:*)`, with `Edit` naming the
//! writer group; decision order deny > ask > allow > fallback; modes ask/auto/yolo. Compound
//! bash commands are split on `; & && | || newline` (and subshell parentheses) and each piece is
//! decided on its own.
//!
//! The agent calls [`Policy::decide`] before every tool call. What to do with
//! [`Decision::Ask`] (prompt the user, or fail closed when headless) is the agent's business.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::WRITER_TOOLS;

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
    /// 0 = strictest.
    fn looseness(self) -> u8 {
        match self {
            Mode::Ask => 0,
            Mode::Auto => 1,
            Mode::Yolo => 2,
        }
    }

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

/// The `[permissions]` table of one config file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PolicyConfig {
    /// The mode, when the file sets one.
    pub mode: Option<Mode>,
    /// Rules that allow.
    pub allow: Vec<String>,
    /// Rules that ask.
    pub ask: Vec<String>,
    /// Rules that deny.
    pub deny: Vec<String>,
}

#[derive(Debug, Clone)]
enum ToolPat {
    /// Lowercased tool name (`Bash` matches `bash`).
    Name(String),
    /// `Edit`: the writer group.
    Writers,
    /// A glob over tool names (`mcp__github__*`).
    Glob(GlobMatcher),
}

#[derive(Debug, Clone)]
enum Spec {
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
struct Rule {
    text: String,
    tool: ToolPat,
    spec: Option<Spec>,
}

fn bad(rule: &str, why: &str) -> PolicyError {
    PolicyError::BadRule {
        rule: rule.to_string(),
        why: why.to_string(),
    }
}

impl Rule {
    fn parse(text: &str) -> Result<Rule, PolicyError> {
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

    fn names_tool(&self, tool: &str) -> bool {
        let lower = tool.to_ascii_lowercase();
        match &self.tool {
            ToolPat::Name(n) => *n == lower,
            ToolPat::Writers => WRITER_TOOLS.contains(&tool),
            ToolPat::Glob(g) => g.is_match(&lower),
        }
    }

    /// For a non-bash tool: does the rule cover this path subject?
    fn matches_path(&self, subject: &str) -> bool {
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
    fn matches_piece(&self, piece: &Piece, strict: bool) -> bool {
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

fn basename(w: &str) -> &str {
    w.rsplit('/').next().unwrap_or(w)
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

    /// From a merged `[permissions]` table (mode defaults to ask).
    pub fn from_config(cfg: &PolicyConfig) -> Result<Self, PolicyError> {
        Self::new(
            cfg.mode.unwrap_or_default(),
            &cfg.allow,
            &cfg.ask,
            &cfg.deny,
        )
    }

    /// Lets path globs match absolute paths inside the workspace by their relative form.
    pub fn with_workspace(mut self, workspace: &Path) -> Self {
        self.workspace =
            Some(std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf()));
        self
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
        let d = if tool.eq_ignore_ascii_case("bash") {
            self.decide_bash(args.get("command").and_then(Value::as_str).unwrap_or(""))
        } else {
            self.decide_tool(tool, args, read_only)
        };
        match (d, self.mode) {
            // yolo never prompts, but deny still holds.
            (Decision::Ask { .. }, Mode::Yolo) => Decision::Allow,
            (d, _) => d,
        }
    }

    fn subjects(&self, args: &Value) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        for key in ["path", "file_path", "source_path", "destination_path"] {
            if let Some(p) = args.get(key).and_then(Value::as_str) {
                let mut forms = vec![p.to_string()];
                let trimmed = p.trim_start_matches("./");
                if trimmed != p {
                    forms.push(trimmed.to_string());
                }
                if let Some(ws) = &self.workspace {
                    if let Ok(rel) = Path::new(p).strip_prefix(ws) {
                        forms.push(rel.display().to_string());
                    } else if !Path::new(p).is_absolute() {
                        forms.push(ws.join(trimmed).display().to_string());
                    }
                }
                out.push(forms);
            }
        }
        out
    }

    fn decide_tool(&self, tool: &str, args: &Value, read_only: bool) -> Decision {
        let subjects = self.subjects(args);
        let any = |r: &Rule| {
            r.names_tool(tool)
                && (r.spec.is_none()
                    || subjects
                        .iter()
                        .any(|forms| forms.iter().any(|f| r.matches_path(f))))
        };
        let all = |r: &Rule| {
            r.names_tool(tool)
                && (r.spec.is_none()
                    || (!subjects.is_empty()
                        && subjects
                            .iter()
                            .all(|forms| forms.iter().any(|f| r.matches_path(f)))))
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
                let paths: Vec<&str> = subjects
                    .iter()
                    .filter_map(|f| f.first().map(String::as_str))
                    .collect();
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

    fn decide_bash(&self, command: &str) -> Decision {
        let pieces = split_command(command);
        let whole = Piece::whole(command);
        let bash_rules = |rules: &'_ [Rule]| -> Vec<Rule> {
            rules
                .iter()
                .filter(|r| r.names_tool("bash"))
                .cloned()
                .collect()
        };
        for r in &bash_rules(&self.deny) {
            if let Some(p) = pieces
                .iter()
                .chain(std::iter::once(&whole))
                .find(|p| r.matches_piece(p, false))
            {
                return Decision::Deny {
                    reason: format!("denied by rule `{}` (matched `{}`)", r.text, p.text),
                };
            }
        }
        for r in &bash_rules(&self.ask) {
            if let Some(p) = pieces
                .iter()
                .chain(std::iter::once(&whole))
                .find(|p| r.matches_piece(p, false))
            {
                return Decision::Ask {
                    reason: format!("rule `{}` asks before running `{}`", r.text, p.text),
                };
            }
        }
        let allow: Vec<Rule> = bash_rules(&self.allow)
            .into_iter()
            .chain(bash_rules(&self.session))
            .collect();
        if allow
            .iter()
            .any(|r| r.matches_piece(&whole, true) && matches!(r.spec, Some(Spec::Exact(_))))
        {
            return Decision::Allow;
        }
        let uncovered: Vec<&Piece> = pieces
            .iter()
            .filter(|p| {
                !(allow.iter().any(|r| r.matches_piece(p, true)) || is_read_only_command(p))
            })
            .collect();
        if uncovered.is_empty() {
            return Decision::Allow;
        }
        match self.mode {
            Mode::Ask => Decision::Ask {
                reason: format!(
                    "bash: no rule allows `{}`",
                    uncovered
                        .iter()
                        .map(|p| p.text.as_str())
                        .collect::<Vec<_>>()
                        .join("`, `")
                ),
            },
            Mode::Auto | Mode::Yolo => Decision::Allow,
        }
    }

    /// Remembers an approval for the rest of the session: the "always" rule when there is
    /// one, else (dangerous or compound bash) exactly this command.
    pub fn allow_for_session(&mut self, tool: &str, args: &Value) {
        if let Some(rule) = Self::always_rule(tool, args).and_then(|r| Rule::parse(&r).ok()) {
            self.session.push(rule);
            return;
        }
        if tool.eq_ignore_ascii_case("bash") {
            if let Some(cmd) = args.get("command").and_then(Value::as_str) {
                let text = Piece::whole(cmd).text;
                self.session.push(Rule {
                    text: format!("Bash({text})"),
                    tool: ToolPat::Name("bash".into()),
                    spec: Some(Spec::Exact(text)),
                });
            }
        }
    }

    /// The rule an "always allow" answer persists: `Bash(<prefix>:*)` for a simple command,
    /// `Edit` for writers, the tool name otherwise. None for dangerous commands (`rm -rf`,
    /// `git push --force`, `sudo`, ...) and for compound or redirecting commands.
    pub fn always_rule(tool: &str, args: &Value) -> Option<String> {
        if WRITER_TOOLS.contains(&tool) {
            return Some("Edit".to_string());
        }
        if !tool.eq_ignore_ascii_case("bash") {
            return Some(tool.to_string());
        }
        let cmd = args.get("command").and_then(Value::as_str)?;
        let pieces = split_command(cmd);
        let [piece] = pieces.as_slice() else {
            return None;
        };
        if piece.has_ops || is_dangerous(&piece.words) {
            return None;
        }
        let words = &piece.words;
        if words.is_empty() || words[0].contains('=') {
            return None;
        }
        let mut prefix = vec![words[0].clone()];
        if SUBCOMMAND_TOOLS.contains(&words[0].as_str()) {
            if let Some(sub) = words.get(1).filter(|w| !w.starts_with('-')) {
                prefix.push(sub.clone());
            }
        }
        Some(format!("Bash({}:*)", prefix.join(" ")))
    }

    /// Merges user and project `[permissions]`: the project may add ask and deny rules and
    /// pick a stricter mode; its allow rules and looser modes are dropped, each with a warning.
    pub fn tighten_only(
        user: &PolicyConfig,
        project: &PolicyConfig,
    ) -> (PolicyConfig, Vec<String>) {
        let mut warnings = Vec::new();
        let user_mode = user.mode.unwrap_or_default();
        let mode = match project.mode {
            Some(m) if m.looseness() < user_mode.looseness() => Some(m),
            Some(m) if m == user_mode => user.mode.or(Some(m)),
            Some(m) => {
                warnings.push(format!(
                    "ignored project permissions.mode = \"{}\": a project file may only tighten (yours is \"{}\")",
                    m.as_str(),
                    user_mode.as_str()
                ));
                user.mode
            }
            None => user.mode,
        };
        for r in &project.allow {
            warnings.push(format!(
                "ignored project permissions.allow rule `{r}`: a project file may only tighten; add it to your own config to use it"
            ));
        }
        let union = |a: &[String], b: &[String]| {
            let mut v = a.to_vec();
            for r in b {
                if !v.contains(r) {
                    v.push(r.clone());
                }
            }
            v
        };
        let merged = PolicyConfig {
            mode,
            allow: user.allow.clone(),
            ask: union(&user.ask, &project.ask),
            deny: union(&user.deny, &project.deny),
        };
        (merged, warnings)
    }
}

/// Tools whose first argument is a subcommand worth keeping in an "always" prefix.
const SUBCOMMAND_TOOLS: [&str; 14] = [
    "git", "cargo", "npm", "pnpm", "yarn", "go", "docker", "kubectl", "pip", "uv", "make", "bun",
    "npx", "rustup",
];

/// Commands an "always allow" must never cover.
fn is_dangerous(words: &[String]) -> bool {
    let words = strip_assignments(words);
    let Some(first) = words.first().map(|w| basename(w)) else {
        return false;
    };
    match first {
        "sudo" | "su" | "doas" | "dd" | "shred" | "mkfs" => true,
        f if f.starts_with("mkfs.") => true,
        "rm" => words[1..].iter().any(|w| {
            w == "--recursive"
                || w == "--force"
                || (w.starts_with('-') && !w.starts_with("--") && w.contains(['r', 'R', 'f']))
        }),
        "git" => {
            words.get(1).is_some_and(|w| w == "push")
                && words[2..].iter().any(|w| {
                    w == "-f"
                        || w.starts_with("--force")
                        || w.starts_with('+')
                        || (w.starts_with('-') && !w.starts_with("--") && w.contains('f'))
                })
        }
        "chmod" | "chown" => words[1..].iter().any(|w| w == "-R" || w == "--recursive"),
        _ => strip_one_wrapper(words).is_some_and(is_dangerous),
    }
}

// ------------------------------------------------------------------------ command splitting

/// One simple command of a compound command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// The text, trimmed.
    pub text: String,
    /// Its words with quotes removed.
    pub words: Vec<String>,
    /// True when it has command substitution, process substitution or a redirection that
    /// writes somewhere other than /dev/null or another descriptor.
    pub has_ops: bool,
}

impl Piece {
    fn new(text: &str, has_ops: bool) -> Piece {
        let text = text.trim().to_string();
        Piece {
            words: shell_words(&text),
            text,
            has_ops,
        }
    }

    fn whole(command: &str) -> Piece {
        let text = command.trim();
        Piece::new(
            text,
            split_command(text).len() > 1 || split_command(text).iter().any(|p| p.has_ops),
        )
    }
}

/// Splits a command line on `;`, `&`, `&&`, `|`, `||`, `|&`, newlines and subshell
/// parentheses, outside quotes and substitutions. Empty pieces are dropped.
pub fn split_command(cmd: &str) -> Vec<Piece> {
    let chars: Vec<char> = cmd.chars().collect();
    let mut pieces = Vec::new();
    let mut cur = String::new();
    let mut has_ops = false;
    let (mut single, mut double, mut backtick) = (false, false, false);
    let mut depth = 0usize; // inside $( ... )
    let mut i = 0;
    let flush = |cur: &mut String, has_ops: &mut bool, pieces: &mut Vec<Piece>| {
        if !cur.trim().is_empty() {
            pieces.push(Piece::new(cur, *has_ops));
        }
        cur.clear();
        *has_ops = false;
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let in_subst = depth > 0;
        if single {
            cur.push(c);
            if c == '\'' {
                single = false;
            }
            i += 1;
            continue;
        }
        if c == '\\' {
            cur.push(c);
            if let Some(n) = next {
                cur.push(n);
            }
            i += 2;
            continue;
        }
        match c {
            '\'' if !double => single = true,
            '"' => double = !double,
            '`' => {
                backtick = !backtick;
                has_ops = true;
            }
            '$' if next == Some('(') => {
                depth += 1;
                has_ops = true;
                cur.push_str("$(");
                i += 2;
                continue;
            }
            '(' if depth > 0 => depth += 1,
            ')' if depth > 0 => depth -= 1,
            _ => {}
        }
        let top =
            !(double || backtick || in_subst || depth != 0 || c == '\'' || c == '"' || c == '`');
        if !top {
            cur.push(c);
            i += 1;
            continue;
        }
        match c {
            ';' | '\n' | '(' | ')' => {
                flush(&mut cur, &mut has_ops, &mut pieces);
                i += 1;
            }
            '|' => {
                flush(&mut cur, &mut has_ops, &mut pieces);
                i += if matches!(next, Some('|') | Some('&')) {
                    2
                } else {
                    1
                };
            }
            '&' if next == Some('&') => {
                flush(&mut cur, &mut has_ops, &mut pieces);
                i += 2;
            }
            '&' if next == Some('>') => {
                // `&>file`: redirect both streams.
                let (consumed, harmless) = redirect_target(&chars, i + 2);
                has_ops |= !harmless;
                cur.extend(&chars[i..i + 2 + consumed]);
                i += 2 + consumed;
            }
            '&' => {
                flush(&mut cur, &mut has_ops, &mut pieces);
                i += 1;
            }
            '>' => {
                let mut j = i + 1;
                if matches!(chars.get(j), Some('>') | Some('|')) {
                    j += 1;
                }
                if chars.get(j) == Some(&'(') {
                    has_ops = true; // process substitution
                    cur.push(c);
                    i += 1;
                    continue;
                }
                let (consumed, harmless) = if chars.get(j) == Some(&'&') {
                    let (n, _) = redirect_target(&chars, j + 1);
                    let target: String = chars[j + 1..j + 1 + n].iter().collect();
                    (
                        n + 1,
                        target
                            .trim()
                            .chars()
                            .all(|d| d.is_ascii_digit() || d == '-'),
                    )
                } else {
                    redirect_target(&chars, j)
                };
                has_ops |= !harmless;
                cur.extend(&chars[i..j + consumed]);
                i = j + consumed;
            }
            '<' if next == Some('(') => {
                has_ops = true;
                cur.push(c);
                i += 1;
            }
            _ => {
                cur.push(c);
                i += 1;
            }
        }
    }
    flush(&mut cur, &mut has_ops, &mut pieces);
    pieces
}

/// Reads a redirection target starting at `start` (skipping blanks). Returns the characters
/// consumed and whether the target is harmless (`/dev/null`).
fn redirect_target(chars: &[char], start: usize) -> (usize, bool) {
    let mut j = start;
    while j < chars.len() && (chars[j] == ' ' || chars[j] == '\t') {
        j += 1;
    }
    let word_start = j;
    while j < chars.len()
        && !chars[j].is_whitespace()
        && !matches!(chars[j], ';' | '&' | '|' | '(' | ')' | '<' | '>')
    {
        j += 1;
    }
    let word: String = chars[word_start..j].iter().collect();
    let word = word.trim_matches(['"', '\'']);
    (j - start, word == "/dev/null")
}

/// Splits a simple command into words, removing quotes and backslashes.
pub fn shell_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let (mut single, mut double) = (false, false);
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' if !double => {
                single = !single;
                in_word = true;
            }
            '"' if !single => {
                double = !double;
                in_word = true;
            }
            '\\' if !single => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
                in_word = true;
            }
            c if c.is_whitespace() && !single && !double => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

/// Drops leading `VAR=value` words.
fn strip_assignments(words: &[String]) -> &[String] {
    let n = words
        .iter()
        .take_while(|w| {
            w.split_once('=').is_some_and(|(k, _)| {
                !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        })
        .count();
    &words[n..]
}

/// Drops wrapper commands (`sudo -u x`, `env A=b`, `nice -n 5`, `timeout 10`, `xargs -0`,
/// `command`, `exec`, `nohup`, `time`) to find the command that really runs.
fn strip_wrappers(words: &[String]) -> &[String] {
    let mut w = strip_assignments(words);
    while let Some(next) = strip_one_wrapper(w) {
        w = next;
    }
    w
}

/// The command under the first wrapper, or None when `words` does not start with one.
fn strip_one_wrapper(words: &[String]) -> Option<&[String]> {
    let w = strip_assignments(words);
    let first = w.first()?;
    let name = basename(first);
    let rest = &w[1..];
    let skip_flags =
        |r: &[String]| -> usize { r.iter().take_while(|x| x.starts_with('-')).count() };
    let next = match name {
        "sudo" | "doas" | "nohup" | "command" | "exec" | "time" | "xargs" | "stdbuf" | "nice"
        | "ionice" => {
            let mut n = skip_flags(rest);
            // `sudo -u user cmd`, `nice -n 5 cmd`: a short flag's value looks like a word.
            if matches!(name, "sudo" | "nice" | "ionice")
                && n > 0
                && rest.get(n - 1).is_some_and(|f| f.len() == 2)
                && rest.get(n + 1).is_some()
            {
                n += 1;
            }
            &rest[n.min(rest.len())..]
        }
        "env" => strip_assignments(&rest[skip_flags(rest)..]),
        "timeout" => {
            let n = skip_flags(rest);
            &rest[(n + 1).min(rest.len())..]
        }
        _ => return None,
    };
    Some(strip_assignments(next))
}

/// Commands that only read: they pass without a rule.
const READ_ONLY_COMMANDS: [&str; 52] = [
    "cat",
    "ls",
    "ll",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "head",
    "tail",
    "wc",
    "pwd",
    "echo",
    "printf",
    "which",
    "whereis",
    "type",
    "file",
    "stat",
    "du",
    "df",
    "tree",
    "sort",
    "uniq",
    "diff",
    "cmp",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "date",
    "whoami",
    "id",
    "hostname",
    "uname",
    "true",
    "false",
    "test",
    "[",
    "nl",
    "cut",
    "tr",
    "column",
    "jq",
    "sha256sum",
    "sha1sum",
    "md5sum",
    "cksum",
    "hexdump",
    "od",
    "strings",
    "cd",
    "find",
];

const READ_ONLY_GIT: [&str; 10] = [
    "status",
    "log",
    "diff",
    "show",
    "blame",
    "ls-files",
    "rev-parse",
    "describe",
    "shortlog",
    "grep",
];

/// True when `piece` is a command that cannot change anything.
pub fn is_read_only_command(piece: &Piece) -> bool {
    if piece.has_ops {
        return false;
    }
    let words = &piece.words;
    // `FOO=bar cat` could set LD_PRELOAD or similar.
    let Some(first) = words.first() else {
        return true;
    };
    if strip_assignments(words).len() != words.len() {
        return false;
    }
    let args = &words[1..];
    match first.as_str() {
        "find" => !args.iter().any(|a| {
            matches!(
                a.as_str(),
                "-exec"
                    | "-execdir"
                    | "-ok"
                    | "-okdir"
                    | "-delete"
                    | "-fprint"
                    | "-fprint0"
                    | "-fprintf"
                    | "-fls"
            )
        }),
        "sort" => !args.iter().any(|a| {
            a == "-o" || a.starts_with("--output") || (a.starts_with("-o") && !a.starts_with("--"))
        }),
        "uniq" => args.iter().filter(|a| !a.starts_with('-')).count() <= 1,
        "git" => {
            let Some(sub) = args.first() else {
                return false;
            };
            if args
                .iter()
                .any(|a| a.starts_with("--output") || a == "--ext-diff")
            {
                return false;
            }
            let rest = &args[1..];
            match sub.as_str() {
                s if READ_ONLY_GIT.contains(&s) => true,
                "branch" => rest.iter().all(|a| {
                    matches!(
                        a.as_str(),
                        "-a" | "-r"
                            | "-v"
                            | "-vv"
                            | "--list"
                            | "--all"
                            | "--show-current"
                            | "--remotes"
                    )
                }),
                "remote" => rest.is_empty() || rest.iter().all(|a| a == "-v" || a == "--verbose"),
                "tag" => rest.is_empty() || rest.iter().all(|a| a == "-l" || a == "--list"),
                _ => false,
            }
        }
        f => READ_ONLY_COMMANDS.contains(&f),
    }
}
