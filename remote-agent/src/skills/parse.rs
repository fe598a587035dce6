//! `SKILL.md`: an optional front matter block between `---` lines (`key: value` lines; a
//! list is `[a, b]`, `a, b` or `- item` lines below its key), then the body, the skill's
//! instructions. Pure: text in, a [`SkillProfile`] or an error naming the line out.

use reasonix_forward::proto::ReasoningEffort;

use super::{RunAs, SkillProfile, SkillSource};

/// Front matter keys that would loosen what the session allows; a skill cannot set them.
const LOOSENING: &[&str] = &[
    "permission-mode",
    "permissions",
    "mode",
    "sandbox",
    "write-paths",
    "write_paths",
    "allow",
    "yolo",
];

/// A `SKILL.md` that cannot be used: the line (1-based, in the file) and the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Line of the file the problem is on (0: the file as a whole).
    pub line: usize,
    /// What is wrong and what to do.
    pub problem: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            f.write_str(&self.problem)
        } else {
            write!(f, "line {}: {}", self.line, self.problem)
        }
    }
}

fn err(line: usize, problem: impl Into<String>) -> ParseError {
    ParseError {
        line,
        problem: problem.into(),
    }
}

/// Parse the `SKILL.md` of folder `folder` (the default name); `path` names it in notices.
pub fn parse(
    folder: &str,
    path: &str,
    text: &str,
    source: SkillSource,
) -> Result<SkillProfile, ParseError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let mut front: Vec<(usize, &str)> = Vec::new();
    let mut body_at = 0;
    let first = lines.next().unwrap_or("");
    if first.trim_end() == "---" {
        let mut offset = first.len();
        let mut closed = false;
        for (i, line) in lines.enumerate() {
            offset += line.len();
            if line.trim_end() == "---" {
                closed = true;
                break;
            }
            front.push((i + 2, line.trim_end_matches(['\n', '\r'])));
        }
        if !closed {
            return Err(err(
                1,
                "the front matter opened with `---` is never closed by a `---` line",
            ));
        }
        body_at = offset;
    }
    let body = text[body_at..].trim().to_string();
    let mut p = SkillProfile {
        name: folder.to_string(),
        description: String::new(),
        model: None,
        effort: None,
        read_only: false,
        allowed_tools: None,
        run_as: RunAs::Inline,
        body,
        source,
        path: path.to_string(),
        assets: Vec::new(),
        warnings: Vec::new(),
    };
    let mut i = 0;
    while i < front.len() {
        let (n, raw) = front[i];
        i += 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if raw.starts_with([' ', '\t']) || line.starts_with('-') {
            return Err(err(
                n,
                format!("unexpected indented line {line:?}; lists go right below their key"),
            ));
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(err(n, format!("no `key: value` in {line:?}")));
        };
        let key = key.trim();
        let mut value = value.trim().to_string();
        // A block list: `- item` lines below the key.
        let mut items: Option<Vec<String>> = None;
        if value.is_empty() {
            let mut list = Vec::new();
            while i < front.len() {
                let item = front[i].1.trim();
                let Some(it) = item.strip_prefix('-') else {
                    break;
                };
                list.push(unquote(it.trim()));
                i += 1;
            }
            if !list.is_empty() {
                items = Some(list);
            }
        }
        let list = |v: &str| -> Vec<String> {
            let v = v.trim();
            let v = v
                .strip_prefix('[')
                .and_then(|v| v.strip_suffix(']'))
                .unwrap_or(v);
            v.split([',', ' '])
                .map(|s| unquote(s.trim()))
                .filter(|s| !s.is_empty())
                .collect()
        };
        if items.is_none() {
            value = unquote(&value);
        }
        match key {
            "name" => {
                if !reasonix_forward::skills::valid_name(&value) {
                    return Err(err(
                        n,
                        format!(
                            "`name: {value}`: a skill name may only use letters, digits, `-`, `_` and `.`"
                        ),
                    ));
                }
                p.name = value;
            }
            "description" => p.description = value,
            "model" => p.model = (!value.is_empty()).then_some(value),
            "effort" => {
                p.effort = Some(effort(&value).ok_or_else(|| {
                    err(
                        n,
                        format!("`effort: {value}` is not one of low, medium, high, max"),
                    )
                })?)
            }
            "read-only" | "read_only" => {
                p.read_only = boolean(&value)
                    .ok_or_else(|| err(n, format!("`{key}: {value}` is not true or false")))?
            }
            "allowed-tools" | "allowed_tools" | "tools" => {
                let tools = items.clone().unwrap_or_else(|| list(&value));
                p.allowed_tools = Some(tools);
            }
            "run-as" | "run_as" => {
                p.run_as = match value.as_str() {
                    "inline" => RunAs::Inline,
                    "subagent" => RunAs::Subagent,
                    other => {
                        return Err(err(
                            n,
                            format!("`run-as: {other}` is neither `inline` nor `subagent`"),
                        ))
                    }
                }
            }
            k if LOOSENING.contains(&k) => p.warnings.push(format!(
                "line {n}: `{k}` is ignored: a skill can only narrow what the session allows"
            )),
            // Other tools' keys (`license`, `metadata`, `argument-hint`) are not ours.
            _ => {}
        }
    }
    if p.body.is_empty() {
        return Err(err(
            0,
            "the skill has no instructions after its front matter; write them below the closing `---`",
        ));
    }
    if p.description.is_empty() {
        p.description = p
            .body
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(80)
            .collect();
    }
    Ok(p)
}

fn effort(v: &str) -> Option<ReasoningEffort> {
    Some(match v.to_ascii_lowercase().as_str() {
        "low" => ReasoningEffort::Low,
        "medium" => ReasoningEffort::Medium,
        "high" => ReasoningEffort::High,
        "max" => ReasoningEffort::Max,
        _ => return None,
    })
}

fn boolean(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" => Some(true),
        "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

fn unquote(v: &str) -> String {
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return v[1..v.len() - 1].to_string();
        }
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<SkillProfile, ParseError> {
        parse(
            "fold",
            ".reasonix/skills/fold/SKILL.md",
            text,
            SkillSource::Project,
        )
    }

    #[test]
    fn every_field() {
        let s = p("---\nname: lint\ndescription: \"Lint it\"\nmodel: deepseek/chat\neffort: High\nread-only: yes\nallowed-tools: [read_file, grep]\nrun-as: subagent\nlicense: MIT\n---\n\nDo $ARGUMENTS\n")
            .expect("parse");
        assert_eq!(s.name, "lint");
        assert_eq!(s.description, "Lint it");
        assert_eq!(s.model.as_deref(), Some("deepseek/chat"));
        assert_eq!(s.effort, Some(ReasoningEffort::High));
        assert!(s.read_only);
        assert_eq!(
            s.allowed_tools,
            Some(vec!["read_file".to_string(), "grep".to_string()])
        );
        assert_eq!(s.run_as, RunAs::Subagent);
        assert_eq!(s.body, "Do $ARGUMENTS");
        let s = p("---\nallowed-tools:\n  - read_file\n  - \"bash\"\n---\nx").expect("block");
        assert_eq!(
            s.allowed_tools,
            Some(vec!["read_file".to_string(), "bash".to_string()])
        );
        let s = p("no front matter\nsecond").expect("plain");
        assert_eq!(
            (s.name.as_str(), s.description.as_str()),
            ("fold", "no front matter")
        );
        assert_eq!(s.allowed_tools, None);
        assert_eq!(s.run_as, RunAs::Inline);
    }

    #[test]
    fn malformed_files_name_the_line() {
        let cases = [
            ("---\nname: a\ndescription b\n---\nx", 3, "key: value"),
            ("---\nname: a\n", 1, "never closed"),
            ("---\n\n\neffort: extreme\n---\nx", 4, "effort"),
            ("---\nread-only: maybe\n---\nx", 2, "true or false"),
            ("---\nrun-as: forked\n---\nx", 2, "run-as"),
            ("---\nname: ../../etc\n---\nx", 2, "letters"),
            ("---\ndescription: d\n  - stray\n---\nx", 3, "indented"),
            ("---\nname: a\n---\n   \n", 0, "no instructions"),
        ];
        for (text, line, what) in cases {
            let e = p(text).expect_err(text);
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.problem.contains(what), "{text:?}: {e}");
        }
        // Binary-looking and huge values do not panic.
        let hostile = format!("---\ndescription: {}\u{0}\n---\nbody", "é".repeat(10_000));
        assert!(p(&hostile).is_ok());
    }

    #[test]
    fn loosening_keys_are_ignored_with_a_warning() {
        let s =
            p("---\npermission-mode: yolo\nsandbox: off\nwrite-paths: [/]\n---\nx").expect("parse");
        assert_eq!(s.warnings.len(), 3, "{:?}", s.warnings);
        assert!(s.warnings[0].starts_with("line 2:"));
        assert!(s.warnings[0].contains("only narrow"));
    }
}
