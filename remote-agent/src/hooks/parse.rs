//! Hook declarations from their three homes: the user's `[[hooks]]` (sent by the laptop as
//! [`HookDecl`]s), a project's `.reasonix/hooks.toml` (the same `[[hooks]]` entries) and
//! Claude Code's `.claude/settings.json` (`hooks.{Event}[{matcher, hooks[{type, command,
//! timeout}]}]`). A bad entry is a problem naming the file and the entry; the others load.

use std::time::Duration;

use reasonix_forward::hooks::{
    HookDecl, HookEvent, HookFail, HookRunOn, BLOCKING_TIMEOUT_MS, OTHER_TIMEOUT_MS,
};
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

/// Longest timeout a hook may ask for (10 minutes).
pub const MAX_TIMEOUT_MS: u64 = 600_000;

/// Where a hook was declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The user's own config (trusted).
    User,
    /// A project file (workspace-relative path); runs only when that exact content is
    /// trusted.
    Project(String),
}

impl Source {
    /// `user config` or the file's path.
    pub fn label(&self) -> &str {
        match self {
            Source::User => "user config",
            Source::Project(p) => p,
        }
    }
}

/// How a matcher is compared.
#[derive(Debug, Clone)]
pub struct Matcher {
    re: Regex,
    /// Claude Code matchers name Claude's tools (`Bash`, `Edit|Write`): the tool's Claude
    /// name is tried as well.
    claude_names: bool,
}

impl Matcher {
    /// True when `subject` (a tool name, or a prompt) matches the whole pattern.
    pub fn matches(&self, subject: &str) -> bool {
        if self.re.is_match(subject) {
            return true;
        }
        self.claude_names && claude_alias(subject).is_some_and(|a| self.re.is_match(a))
    }
}

/// One hook, checked and ready to run.
#[derive(Debug, Clone)]
pub struct Hook {
    /// Where it came from.
    pub source: Source,
    /// Its position in that source (for "last run" and messages).
    pub index: usize,
    /// When it runs.
    pub event: HookEvent,
    /// `None`: every tool / prompt.
    pub matcher: Option<Matcher>,
    /// The pattern as written.
    pub matcher_text: Option<String>,
    /// Shell command line.
    pub command: String,
    /// Killed after this.
    pub timeout: Duration,
    /// `PreToolUse` failure mode.
    pub fail: HookFail,
    /// `run_on = "laptop"` (a user `Notification` hook): the laptop runs it, the host never.
    pub on_laptop: bool,
}

impl Hook {
    /// A key naming this hook across reloads of the same declarations.
    pub fn key(&self) -> String {
        format!("{}#{}", self.source.label(), self.index)
    }

    /// True when this hook runs for `subject` (tool name or prompt; `None` for events
    /// without one).
    pub fn applies_to(&self, subject: Option<&str>) -> bool {
        match (&self.matcher, subject) {
            (None, _) => true,
            (Some(_), None) => true,
            (Some(m), Some(s)) => m.matches(s),
        }
    }
}

/// Claude Code's name for one of our tools.
pub fn claude_alias(tool: &str) -> Option<&'static str> {
    Some(match tool {
        "bash" => "Bash",
        "read_file" => "Read",
        "write_file" => "Write",
        "edit_file" => "Edit",
        "multi_edit" => "MultiEdit",
        "glob" => "Glob",
        "grep" => "Grep",
        "ls" => "LS",
        "todo_write" => "TodoWrite",
        "notebook_edit" => "NotebookEdit",
        "web_fetch" => "WebFetch",
        _ => return None,
    })
}

/// Check `decls` from `source`: the hooks that are well formed, and one problem line per
/// entry that is not (`<source>: hook N: what is wrong`).
pub fn check_decls(source: &Source, decls: &[HookDecl]) -> (Vec<Hook>, Vec<String>) {
    let mut hooks = Vec::new();
    let mut problems = Vec::new();
    for (i, d) in decls.iter().enumerate() {
        match check_one(source, i, d, false) {
            Ok(h) => hooks.push(h),
            Err(why) => problems.push(format!("{}: hook {}: {why}", source.label(), i + 1)),
        }
    }
    (hooks, problems)
}

fn check_one(source: &Source, index: usize, d: &HookDecl, claude: bool) -> Result<Hook, String> {
    let event = HookEvent::parse(d.event.trim()).ok_or_else(|| {
        format!(
            "unknown event `{}`; use one of {}",
            d.event,
            HookEvent::ALL.map(|e| e.as_str()).join(", ")
        )
    })?;
    if d.command.trim().is_empty() {
        return Err("`command` is empty".into());
    }
    let matcher_text = d
        .matcher
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty() && *m != "*")
        .map(str::to_string);
    let matcher = match &matcher_text {
        None => None,
        Some(m) => {
            if !matches!(
                event,
                HookEvent::PreToolUse | HookEvent::PostToolUse | HookEvent::UserPromptSubmit
            ) && !claude
            {
                return Err(format!(
                    "`match` only applies to PreToolUse, PostToolUse and UserPromptSubmit, not {event}"
                ));
            }
            let re = Regex::new(&format!("^(?:{m})$"))
                .map_err(|e| format!("`match` is not a valid regular expression: {e}"))?;
            Some(Matcher {
                re,
                claude_names: claude,
            })
        }
    };
    let fail = match (d.fail, event) {
        (None, _) => HookFail::Open,
        (Some(f), HookEvent::PreToolUse) => f,
        (Some(_), other) => {
            return Err(format!(
                "`fail` only applies to PreToolUse hooks, not {other}"
            ))
        }
    };
    let on_laptop = match d.run_on.unwrap_or_default() {
        HookRunOn::Host => false,
        HookRunOn::Laptop if event != HookEvent::Notification => {
            return Err(format!(
                "`run_on = \"laptop\"` is only for Notification hooks, not {event}; remove it to run the hook on the host"
            ))
        }
        HookRunOn::Laptop if *source != Source::User => {
            return Err(
                "a project hook cannot run on the laptop: only the user's own config may say `run_on = \"laptop\"`"
                    .into(),
            )
        }
        HookRunOn::Laptop => true,
    };
    let default_ms = if event.is_blocking() {
        BLOCKING_TIMEOUT_MS
    } else {
        OTHER_TIMEOUT_MS
    };
    let ms = d.timeout_ms.unwrap_or(default_ms);
    if ms == 0 || ms > MAX_TIMEOUT_MS {
        return Err(format!(
            "`timeout_ms` = {ms} is out of range; use 1 to {MAX_TIMEOUT_MS}"
        ));
    }
    Ok(Hook {
        source: source.clone(),
        index,
        event,
        matcher,
        matcher_text,
        command: d.command.clone(),
        timeout: Duration::from_millis(ms),
        fail,
        on_laptop,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HooksToml {
    #[serde(default)]
    hooks: Vec<toml::Value>,
}

/// A `.reasonix/hooks.toml`: its hooks and problems. A file that is not TOML at all is one
/// problem and no hooks.
pub fn parse_toml(path: &str, text: &str) -> (Vec<Hook>, Vec<String>) {
    let source = Source::Project(path.to_string());
    let file: HooksToml = match toml::from_str(text) {
        Ok(f) => f,
        Err(e) => {
            return (
                Vec::new(),
                vec![format!(
                    "{path}: not a valid hooks file ({}); it should hold only [[hooks]] entries with event, command and optionally match, timeout_ms, fail",
                    e.to_string().trim().replace('\n', " ")
                )],
            )
        }
    };
    let mut hooks = Vec::new();
    let mut problems = Vec::new();
    for (i, v) in file.hooks.into_iter().enumerate() {
        let decl: Result<HookDecl, _> = v.try_into();
        match decl {
            Ok(d) => match check_one(&source, i, &d, false) {
                Ok(h) => hooks.push(h),
                Err(why) => problems.push(format!("{path}: hook {}: {why}", i + 1)),
            },
            Err(e) => problems.push(format!(
                "{path}: hook {}: {}",
                i + 1,
                e.to_string().trim().replace('\n', " ")
            )),
        }
    }
    (hooks, problems)
}

/// Claude Code's `.claude/settings.json`: the `hooks` object only (other settings are not
/// ours). Timeouts there are in seconds.
pub fn parse_claude(path: &str, text: &str) -> (Vec<Hook>, Vec<String>) {
    let source = Source::Project(path.to_string());
    let root: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return (Vec::new(), vec![format!("{path}: not valid JSON ({e})")]),
    };
    let Some(events) = root.get("hooks") else {
        return (Vec::new(), Vec::new());
    };
    let Some(events) = events.as_object() else {
        return (
            Vec::new(),
            vec![format!("{path}: `hooks` must be an object of event names")],
        );
    };
    let mut hooks = Vec::new();
    let mut problems = Vec::new();
    let mut index = 0usize;
    for (event, groups) in events {
        let Some(groups) = groups.as_array() else {
            problems.push(format!("{path}: hooks.{event} must be an array"));
            continue;
        };
        for group in groups {
            let matcher = group
                .get("matcher")
                .and_then(Value::as_str)
                .map(str::to_string);
            let Some(list) = group.get("hooks").and_then(Value::as_array) else {
                problems.push(format!(
                    "{path}: hooks.{event}: each entry needs a `hooks` array"
                ));
                continue;
            };
            for h in list {
                let i = index;
                index += 1;
                let kind = h.get("type").and_then(Value::as_str).unwrap_or("command");
                if kind != "command" {
                    problems.push(format!(
                        "{path}: hooks.{event}: type `{kind}` is not supported (only `command`); skipped"
                    ));
                    continue;
                }
                let Some(command) = h.get("command").and_then(Value::as_str) else {
                    problems.push(format!("{path}: hooks.{event}: a hook has no `command`"));
                    continue;
                };
                let timeout_ms = match h.get("timeout") {
                    None => None,
                    Some(t) => match t.as_f64() {
                        Some(s) if s > 0.0 => Some((s * 1000.0) as u64),
                        _ => {
                            problems.push(format!(
                                "{path}: hooks.{event}: `timeout` must be a positive number of seconds"
                            ));
                            continue;
                        }
                    },
                };
                let decl = HookDecl {
                    event: event.clone(),
                    matcher: matcher.clone(),
                    command: command.to_string(),
                    timeout_ms,
                    fail: None,
                    run_on: None,
                };
                match check_one(&source, i, &decl, true) {
                    Ok(mut hook) => {
                        // Claude's matcher only filters tool events; elsewhere it is ignored.
                        if !matches!(hook.event, HookEvent::PreToolUse | HookEvent::PostToolUse) {
                            hook.matcher = None;
                            hook.matcher_text = None;
                        }
                        hooks.push(hook)
                    }
                    Err(why) => problems.push(format!("{path}: hooks.{event}: {why}")),
                }
            }
        }
    }
    (hooks, problems)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn decl(event: &str, matcher: Option<&str>) -> HookDecl {
        HookDecl {
            event: event.into(),
            matcher: matcher.map(str::to_string),
            command: "true".into(),
            timeout_ms: None,
            fail: None,
            run_on: None,
        }
    }

    #[test]
    fn only_user_notification_hooks_may_run_on_the_laptop() {
        let laptop = |event: &str| HookDecl {
            run_on: Some(HookRunOn::Laptop),
            ..decl(event, None)
        };
        let (hooks, problems) = check_decls(&Source::User, &[laptop("Notification")]);
        assert!(problems.is_empty(), "{problems:?}");
        assert!(hooks[0].on_laptop);
        let (hooks, problems) = check_decls(&Source::User, &[laptop("Stop")]);
        assert!(hooks.is_empty());
        assert!(
            problems[0].contains("only for Notification hooks"),
            "{problems:?}"
        );
        let (hooks, problems) = check_decls(
            &Source::Project(".reasonix/hooks.toml".into()),
            &[laptop("Notification")],
        );
        assert!(hooks.is_empty());
        assert!(
            problems[0].contains("a project hook cannot run on the laptop"),
            "{problems:?}"
        );
        let (hooks, _) = check_decls(&Source::User, &[decl("Notification", None)]);
        assert!(!hooks[0].on_laptop);
    }

    #[test]
    fn matcher_is_anchored() {
        let (hooks, problems) = check_decls(&Source::User, &[decl("PreToolUse", Some("bash"))]);
        assert!(problems.is_empty());
        let h = &hooks[0];
        assert!(h.applies_to(Some("bash")));
        assert!(!h.applies_to(Some("bash_output")));
        assert!(!h.applies_to(Some("xbash")));
        let (hooks, _) = check_decls(
            &Source::User,
            &[decl("PreToolUse", Some("write_file|edit_file"))],
        );
        assert!(hooks[0].applies_to(Some("edit_file")));
        assert!(!hooks[0].applies_to(Some("read_file")));
    }

    #[test]
    fn default_timeouts_depend_on_the_event() {
        let (hooks, _) = check_decls(
            &Source::User,
            &[decl("PreToolUse", None), decl("PostToolUse", None)],
        );
        assert_eq!(hooks[0].timeout, Duration::from_millis(5_000));
        assert_eq!(hooks[1].timeout, Duration::from_millis(30_000));
    }

    #[test]
    fn bad_entries_are_named_and_the_rest_load() {
        let mut bad_fail = decl("PostToolUse", None);
        bad_fail.fail = Some(HookFail::Closed);
        let (hooks, problems) = check_decls(
            &Source::User,
            &[
                decl("PreTool", None),
                decl("PreToolUse", Some("(")),
                bad_fail,
                decl("Stop", None),
            ],
        );
        assert_eq!(hooks.len(), 1);
        assert_eq!(hooks[0].event, HookEvent::Stop);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].starts_with("user config: hook 1: unknown event `PreTool`"));
        assert!(problems[1].contains("hook 2: `match` is not a valid regular expression"));
        assert!(problems[2].contains("`fail` only applies to PreToolUse"));
    }

    #[test]
    fn hooks_toml_with_one_bad_entry() {
        let text = r#"
[[hooks]]
event = "PostToolUse"
match = "write_file"
command = "cargo fmt"

[[hooks]]
event = "PreToolUse"
command = "x"
colour = "red"
"#;
        let (hooks, problems) = parse_toml(".reasonix/hooks.toml", text);
        assert_eq!(hooks.len(), 1);
        assert_eq!(hooks[0].command, "cargo fmt");
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].contains(".reasonix/hooks.toml: hook 2"),
            "{problems:?}"
        );
        assert!(problems[0].contains("colour"), "{problems:?}");
        let (hooks, problems) = parse_toml(".reasonix/hooks.toml", "[[hooks]\n");
        assert!(hooks.is_empty());
        assert!(problems[0].starts_with(".reasonix/hooks.toml: not a valid hooks file"));
    }

    #[test]
    fn claude_settings_shape() {
        let text = r#"{
          "permissions": {"allow": ["Bash(ls)"]},
          "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "touch pre", "timeout": 2}]}],
            "PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "fmt"}]}],
            "SessionStart": [{"hooks": [{"type": "command", "command": "echo hi"}]}],
            "SubagentStop": [{"hooks": [{"type": "command", "command": "x"}]}],
            "Stop": [{"hooks": [{"type": "prompt", "prompt": "x"}]}]
          }
        }"#;
        let (hooks, problems) = parse_claude(".claude/settings.json", text);
        assert_eq!(hooks.len(), 3, "{hooks:?}");
        assert_eq!(problems.len(), 2, "{problems:?}");
        let pre = hooks
            .iter()
            .find(|h| h.event == HookEvent::PreToolUse)
            .unwrap();
        assert_eq!(pre.timeout, Duration::from_secs(2));
        assert!(
            pre.applies_to(Some("bash")),
            "Claude's `Bash` names our bash"
        );
        assert!(!pre.applies_to(Some("read_file")));
        let post = hooks
            .iter()
            .find(|h| h.event == HookEvent::PostToolUse)
            .unwrap();
        assert!(post.applies_to(Some("write_file")));
        assert!(post.applies_to(Some("edit_file")));
        assert!(!post.applies_to(Some("bash")));
        let (_, problems) = parse_claude(".claude/settings.json", "{not json");
        assert!(problems[0].starts_with(".claude/settings.json: not valid JSON"));
    }
}
