//! Custom slash commands: Markdown files whose text becomes the prompt.
//!
//! Two sources: the workspace's `.reasonix/commands/` (read on the host, where the workspace
//! is, with `ListCommandFiles`) and the user's `<reasonix home>/commands/` (read here, on the
//! laptop). The name is the path below the folder without `.md`, folders joined by `:`
//! (`git/commit.md` is `/git:commit`). An optional front matter block between `---` lines
//! sets `description` and `argument-hint`; the body is the prompt, with `$ARGUMENTS` (every
//! argument), `$1`…`$N` (by position; `"a b"` is one argument) and `$$` (a literal `$`)
//! substituted.
//!
//! Precedence: built-in commands first (a file cannot replace `/help`), then the user's own
//! files, then the workspace's: a repository cannot redefine a command the user wrote. A
//! command only ever produces the text of a user turn; nothing in a file (front matter
//! included) changes the permission policy, the model or the tools — a hostile repository
//! gets exactly what typing its text would get.
//!
//! MCP prompts join the set as [`Source::Mcp`] (`/mcp__<server>__<prompt>`, listed by the
//! host with `McpPrompts`) for `/help` and completion only: their line is sent to the host
//! unchanged and the host expands it (`prompts/get`), the same for every client.

use std::path::Path;

use reasonix_forward::proto::{CommandFile, CommandFileProblem};

/// Largest command file read from the laptop folder (the host applies the same bound).
pub use reasonix_forward::command_files::MAX_FILE_BYTES;

/// Where a command came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `~/.reasonix/commands/` on the laptop.
    User,
    /// `.reasonix/commands/` in the workspace (on the host).
    Workspace,
    /// A prompt of an MCP server; the host expands it.
    Mcp,
    /// A skill (built-in, `~/.reasonix/skills/` or `.reasonix/skills/`); the host expands it.
    Skill,
}

impl Source {
    /// `user` or `workspace`, as listings show it.
    pub fn label(self) -> &'static str {
        match self {
            Source::User => "user",
            Source::Workspace => "workspace",
            Source::Mcp => "MCP",
            Source::Skill => "skill",
        }
    }
}

/// One parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomCommand {
    /// Name typed after `/`.
    pub name: String,
    /// One line for `/help` and completion (front matter `description`, else the body's
    /// first line).
    pub description: String,
    /// Argument synopsis (front matter `argument-hint`).
    pub argument_hint: String,
    /// The prompt template.
    pub body: String,
    /// Where it came from.
    pub source: Source,
    /// The file, as notices name it.
    pub path: String,
}

/// Parse one command file; the error says what is wrong (the caller names the file).
pub fn parse(name: &str, path: &str, text: &str, source: Source) -> Result<CustomCommand, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (front, body) = split_front_matter(text)?;
    let mut description = String::new();
    let mut argument_hint = String::new();
    for (n, line) in front.iter().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(format!(
                "front matter line {} has no `key: value`: {line:?}",
                n + 2
            ));
        };
        let value = unquote(value.trim());
        match key.trim() {
            "description" => description = value,
            "argument-hint" => argument_hint = value,
            // Other keys (e.g. `allowed-tools`, `model` in other tools' files) are ignored on
            // purpose: a command file never changes policy or the model.
            _ => {}
        }
    }
    let body = body.trim().to_string();
    if body.is_empty() {
        return Err("the command has no text after its front matter".into());
    }
    if description.is_empty() {
        description = body.lines().next().unwrap_or("").chars().take(80).collect();
    }
    Ok(CustomCommand {
        name: name.to_string(),
        description,
        argument_hint,
        body,
        source,
        path: path.to_string(),
    })
}

fn split_front_matter(text: &str) -> Result<(Vec<&str>, &str), String> {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Ok((Vec::new(), text));
    };
    let mut front = Vec::new();
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        offset += line.len();
        if line.trim_end() == "---" {
            return Ok((front, &rest[offset..]));
        }
        front.push(line.trim_end_matches(['\n', '\r']));
    }
    Err("the front matter opened with `---` is never closed by a `---` line".into())
}

fn unquote(v: &str) -> String {
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return v[1..v.len() - 1].to_string();
        }
    }
    v.to_string()
}

/// Split arguments on whitespace; `"a b"` and `'a b'` are one argument (shared with the
/// host's MCP prompt arguments).
pub use reasonix_forward::command_files::split_args;

/// The prompt of `body` for `args`: `$ARGUMENTS`, `$1`…`$N` (missing ones are empty) and
/// `$$`; any other `$` stays as it is (shared with skills on the host).
pub use reasonix_forward::command_files::expand_args as expand;

/// The commands a client offers, with the files that were skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandSet {
    /// Commands sorted by name.
    pub commands: Vec<CustomCommand>,
    /// One line per skipped or shadowed file, naming it and the problem.
    pub notices: Vec<String>,
}

impl CommandSet {
    /// Merge both sources: names in `reserved` (built-ins) are skipped, the user's file wins
    /// over the workspace's of the same name. Every skip is a notice.
    pub fn merge(
        user: Vec<CommandFile>,
        user_skipped: Vec<CommandFileProblem>,
        workspace: Vec<CommandFile>,
        workspace_skipped: Vec<CommandFileProblem>,
        reserved: &[&str],
    ) -> CommandSet {
        let mut set = CommandSet::default();
        for p in user_skipped.into_iter().chain(workspace_skipped) {
            set.notices
                .push(format!("command file {} skipped: {}", p.path, p.problem));
        }
        for (files, source) in [(user, Source::User), (workspace, Source::Workspace)] {
            for f in files {
                if reserved.contains(&f.name.as_str()) {
                    set.notices.push(format!(
                        "command file {} skipped: /{} is a built-in command; rename the file",
                        f.path, f.name
                    ));
                    continue;
                }
                if let Some(prev) = set.commands.iter().find(|c| c.name == f.name) {
                    set.notices.push(format!(
                        "command file {} skipped: /{} is defined by {} (the user's commands win over the workspace's)",
                        f.path, f.name, prev.path
                    ));
                    continue;
                }
                match parse(&f.name, &f.path, &f.text, source) {
                    Ok(c) => set.commands.push(c),
                    Err(e) => set
                        .notices
                        .push(format!("command file {} skipped: {e}", f.path)),
                }
            }
        }
        set.commands.sort_by(|a, b| a.name.cmp(&b.name));
        set
    }

    /// The command named `name`.
    pub fn get(&self, name: &str) -> Option<&CustomCommand> {
        self.commands.iter().find(|c| c.name == name)
    }

    /// For a line `/name args` naming one of these commands: its expanded prompt.
    pub fn expand_line(&self, line: &str) -> Option<String> {
        let rest = line.strip_prefix('/')?;
        let (name, args) = match rest.split_once(char::is_whitespace) {
            Some((n, a)) => (n, a),
            None => (rest, ""),
        };
        self.get(name).map(|c| match c.source {
            Source::Mcp | Source::Skill => line.to_string(),
            _ => expand(&c.body, args),
        })
    }

    /// Adds the skills the host listed (after the command files: a command file of the same
    /// name wins, with a notice).
    pub fn add_skills(&mut self, skills: Vec<reasonix_forward::skills::SkillInfo>) {
        for s in skills {
            if let Some(prev) = self.get(&s.name) {
                self.notices.push(format!(
                    "skill /{} ({}) is hidden by the command file {} (command files win over skills; rename one)",
                    s.name, s.path, prev.path
                ));
                continue;
            }
            self.commands.push(CustomCommand {
                description: s.description.clone(),
                argument_hint: String::new(),
                body: String::new(),
                source: Source::Skill,
                path: s.path.clone(),
                name: s.name,
            });
        }
        self.commands.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// Adds the MCP prompts the host listed (after the files; a name already taken is
    /// skipped with a notice).
    pub fn add_mcp_prompts(&mut self, prompts: Vec<reasonix_forward::proto::McpPromptEntry>) {
        for p in prompts {
            if self.get(&p.command).is_some() {
                self.notices.push(format!(
                    "MCP prompt {} of server `{}` skipped: /{} is taken",
                    p.name, p.server, p.command
                ));
                continue;
            }
            let argument_hint = p
                .arguments
                .iter()
                .map(|a| {
                    if a.required {
                        format!("<{}>", a.name)
                    } else {
                        format!("[{}]", a.name)
                    }
                })
                .collect::<Vec<_>>()
                .join(" ");
            self.commands.push(CustomCommand {
                name: p.command,
                description: if p.description.is_empty() {
                    format!("prompt {} of MCP server {}", p.name, p.server)
                } else {
                    p.description
                },
                argument_hint,
                body: String::new(),
                source: Source::Mcp,
                path: format!("mcp:{}", p.server),
            });
        }
        self.commands.sort_by(|a, b| a.name.cmp(&b.name));
    }
}

/// The user's command files in `<home>/commands/`, read by the same walker as the host
/// reads the workspace's (same bounds; symlinks are followed, the folder is the user's own).
pub fn read_user_files(home: &Path) -> (Vec<CommandFile>, Vec<CommandFileProblem>) {
    let root = home.join("commands");
    let shown = |p: &Path| p.display().to_string();
    reasonix_forward::command_files::Walk {
        root: &root,
        confine_to: None,
        shown: &shown,
    }
    .read()
}

/// The full set for a client: the user's files (read here) merged with the workspace's
/// (asked from the host through `client`). A host that cannot answer leaves the workspace
/// part empty, with a notice.
pub async fn load(client: &crate::client::Client, home: &Path, reserved: &[&str]) -> CommandSet {
    let (user, user_skipped) = read_user_files(home);
    let (ws, mut ws_skipped) = match client
        .request(reasonix_forward::proto::Request::ListCommandFiles)
        .await
    {
        Ok(reasonix_forward::proto::Response::CommandFiles { files, skipped }) => (files, skipped),
        Ok(other) => (
            Vec::new(),
            vec![CommandFileProblem {
                path: ".reasonix/commands".into(),
                problem: format!("unexpected answer from the host: {other:?}"),
            }],
        ),
        Err(e) => (
            Vec::new(),
            vec![CommandFileProblem {
                path: ".reasonix/commands".into(),
                problem: format!("the host did not list them: {e}"),
            }],
        ),
    };
    ws_skipped.sort_by(|a, b| a.path.cmp(&b.path));
    let mut set = CommandSet::merge(user, user_skipped, ws, ws_skipped, reserved);
    // Skills: the host merges the built-in ones, these user skills and the workspace's.
    let skills = crate::skills::settings(home, Vec::new());
    match client
        .request(reasonix_forward::proto::Request::ListSkills { skills })
        .await
    {
        Ok(reasonix_forward::proto::Response::Skills { skills, notices }) => {
            set.notices.extend(notices);
            let skills = skills
                .into_iter()
                .filter(|s| {
                    let builtin = reserved.contains(&s.name.as_str());
                    if builtin {
                        set.notices.push(format!(
                            "skill {} skipped: /{} is a built-in command",
                            s.path, s.name
                        ));
                    }
                    !builtin
                })
                .collect();
            set.add_skills(skills);
        }
        Ok(other) => set.notices.push(format!(
            "skills: unexpected answer from the host: {other:?}"
        )),
        Err(e) => set
            .notices
            .push(format!("skills: the host did not list them: {e}")),
    }
    // An older host without MCP prompts answers something else: none to offer.
    if let Ok(reasonix_forward::proto::Response::McpPrompts { prompts, problems }) = client
        .request(reasonix_forward::proto::Request::McpPrompts)
        .await
    {
        set.notices
            .extend(problems.into_iter().map(|p| format!("MCP prompts: {p}")));
        set.add_mcp_prompts(prompts);
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> CommandFile {
        CommandFile {
            name: name.into(),
            path: format!("{name}.md"),
            text: text.into(),
        }
    }

    #[test]
    fn substitution() {
        assert_eq!(
            expand(
                "Fix $1 in $2 ($ARGUMENTS) costs $$5, $3 $x $0",
                "bug \"src/a b.rs\""
            ),
            "Fix bug in src/a b.rs (bug \"src/a b.rs\") costs $5,  $x $0"
        );
        assert_eq!(expand("$10|$1", "a b c d e f g h i j"), "j|a");
        assert_eq!(expand("tail $", ""), "tail $");
        assert_eq!(split_args("  a 'b c'  \"\" d"), ["a", "b c", "", "d"]);
    }

    #[test]
    fn front_matter_and_errors() {
        let c = parse(
            "review",
            "review.md",
            "---\ndescription: \"Review a file\"\nargument-hint: FILE\nallowed-tools: Bash(*)\n---\nReview $1\n",
            Source::Workspace,
        )
        .expect("parse");
        assert_eq!(
            (
                c.description.as_str(),
                c.argument_hint.as_str(),
                c.body.as_str()
            ),
            ("Review a file", "FILE", "Review $1")
        );
        let c = parse("x", "x.md", "Just the body\nmore", Source::User).expect("plain");
        assert_eq!(c.description, "Just the body");
        assert!(
            parse("x", "x.md", "---\ndescription: a\nbody", Source::User)
                .expect_err("malformed")
                .contains("never closed")
        );
        assert!(
            parse("x", "x.md", "---\nnot a pair\n---\nbody", Source::User)
                .expect_err("malformed")
                .contains("line 2")
        );
        assert!(parse("x", "x.md", "---\n---\n  \n", Source::User)
            .expect_err("malformed")
            .contains("no text"));
    }

    #[test]
    fn precedence_builtins_then_user_then_workspace() {
        let set = CommandSet::merge(
            vec![file("deploy", "user deploy"), file("help", "nope")],
            Vec::new(),
            vec![
                file("deploy", "workspace deploy"),
                file("lint", "lint $ARGUMENTS"),
                file("bad", "---\nx"),
            ],
            vec![CommandFileProblem {
                path: "big.md".into(),
                problem: "too big".into(),
            }],
            &["help"],
        );
        let names: Vec<&str> = set.commands.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["deploy", "lint"]);
        assert_eq!(set.get("deploy").map(|c| c.source), Some(Source::User));
        assert_eq!(
            set.expand_line("/lint src  tests").as_deref(),
            Some("lint src  tests")
        );
        assert_eq!(set.expand_line("/nope"), None);
        assert_eq!(set.notices.len(), 4, "{:?}", set.notices);
        assert!(set
            .notices
            .iter()
            .any(|n| n.contains("bad.md") && n.contains("never closed")));
        assert!(set
            .notices
            .iter()
            .any(|n| n.contains("help.md") && n.contains("built-in")));
        assert!(set
            .notices
            .iter()
            .any(|n| n.contains("big.md") && n.contains("too big")));
    }
}
