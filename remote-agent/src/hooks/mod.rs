//! Hooks (#34): commands the user (or a project the user trusted) attaches to moments of a
//! session: `SessionStart`, `UserPromptSubmit`, `PreToolUse`, `PostToolUse`, `Stop`,
//! `PreCompact`, `Notification`.
//!
//! The pure core is here and in [`parse`] (declarations, matching), [`trust`] (the trust
//! rule) and [`effect`] (what a run's outcome means); [`run`] starts one hook process in the
//! bash sandbox. The session keeps a [`SessionHooks`] and calls [`SessionHooks::fire`] where
//! the events happen (the runner through its host, the daemon for a submitted prompt).
//!
//! Declarations are read again at every event, so an edit to a project file applies at once
//! and makes the file untrusted until the user trusts the new content.

pub mod parse;
pub mod run;
pub mod trust;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use reasonix_forward::hooks::{
    HookEvent, HookFail, HookFileInfo, HookInfo, HookSettings, HooksReport, TrustedHookFile,
    HOOK_FILE_SHOWN,
};
use reasonix_forward::sync::LockExt;
use serde_json::{json, Map, Value};

use crate::tools::ToolContext;
pub use parse::{Hook, Source};
pub use run::Outcome;

/// Bytes of a hook's stdout that join a user turn as context.
pub const CONTEXT_CAP: usize = 10 * 1024;
/// Bytes of a hook's stderr shown in a notice or given to the model.
pub const MESSAGE_CAP: usize = 4 * 1024;

/// The hooks of a workspace as declared now.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Every hook with whether it may run.
    pub hooks: Vec<(Hook, bool)>,
    /// The project hook files found.
    pub files: Vec<HookFileInfo>,
    /// Problems, one line each, naming the file.
    pub problems: Vec<String>,
}

impl Loaded {
    /// The hooks that may run for `event` and `subject`.
    pub fn runnable(&self, event: HookEvent, subject: Option<&str>) -> Vec<Hook> {
        self.hooks
            .iter()
            .filter(|(h, ok)| *ok && !h.on_laptop && h.event == event && h.applies_to(subject))
            .map(|(h, _)| h.clone())
            .collect()
    }

    /// The project files whose hooks were skipped because their content is not trusted.
    pub fn untrusted_files(&self) -> Vec<&HookFileInfo> {
        self.files
            .iter()
            .filter(|f| {
                !f.trusted
                    && self
                        .hooks
                        .iter()
                        .any(|(h, _)| matches!(&h.source, Source::Project(p) if *p == f.path))
            })
            .collect()
    }
}

/// Read the user's hooks and the workspace's project hook files, and decide which may run.
pub fn load(workspace: &Path, settings: &HookSettings) -> Loaded {
    let mut out = Loaded::default();
    let (user, problems) = parse::check_decls(&Source::User, &settings.user);
    out.problems.extend(problems);
    out.hooks.extend(user.into_iter().map(|h| (h, true)));
    let (files, problems) = trust::read_project_files(workspace);
    out.problems.extend(problems);
    for f in files {
        let trusted = trust::is_trusted(&f, &settings.trusted);
        let (hooks, problems) = if f.path.ends_with(".json") {
            parse::parse_claude(&f.path, &f.text)
        } else {
            parse::parse_toml(&f.path, &f.text)
        };
        let shown = cut(&f.text, HOOK_FILE_SHOWN);
        out.files.push(HookFileInfo {
            path: f.path.clone(),
            sha256: f.sha256.clone(),
            trusted,
            content: shown,
            problem: (!problems.is_empty()).then(|| problems.join("; ")),
        });
        out.problems.extend(problems);
        out.hooks.extend(hooks.into_iter().map(|h| (h, trusted)));
    }
    out
}

/// What `/hooks` shows: files, hooks with trust and last run, problems.
pub fn report(loaded: &Loaded, last_runs: &HashMap<String, String>) -> HooksReport {
    HooksReport {
        files: loaded.files.clone(),
        hooks: loaded
            .hooks
            .iter()
            .map(|(h, trusted)| HookInfo {
                source: if h.on_laptop {
                    format!("{} (runs on the laptop)", h.source.label())
                } else {
                    h.source.label().to_string()
                },
                event: h.event,
                matcher: h.matcher_text.clone(),
                command: h.command.clone(),
                timeout_ms: h.timeout.as_millis() as u64,
                fail: h.fail,
                trusted: *trusted,
                last_run: last_runs.get(&h.key()).cloned(),
            })
            .collect(),
        problems: loaded.problems.clone(),
    }
}

/// What one hook run means for the session.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Effect {
    /// Stop what the event announced (the tool call, the prompt), with this text.
    pub block: Option<String>,
    /// Text to add to the user turn (`SessionStart`, `UserPromptSubmit` stdout).
    pub context: Option<String>,
    /// Text for the model after the tool's result (`PostToolUse` exit 2).
    pub model_note: Option<String>,
    /// Text to tell the user (a failure, a non-zero exit).
    pub notice: Option<String>,
}

/// What `outcome` of `hook` means: exit 0 gives context (prompt events), exit 2 blocks
/// (blocking events) or speaks to the model (`PostToolUse`), anything else is reported and
/// blocks nothing, except a `PreToolUse` hook with `fail = "closed"` that did not answer.
pub fn effect(hook: &Hook, outcome: &Outcome) -> Effect {
    let who = format!(
        "{} hook `{}` ({})",
        hook.event,
        cut(&hook.command, 200),
        hook.source.label()
    );
    let mut e = Effect::default();
    match outcome {
        Outcome::Exited {
            code: 0, stdout, ..
        } => {
            if matches!(
                hook.event,
                HookEvent::SessionStart | HookEvent::UserPromptSubmit
            ) && !stdout.trim().is_empty()
            {
                e.context = Some(cut(stdout.trim_end(), CONTEXT_CAP));
            }
        }
        Outcome::Exited {
            code: 2, stderr, ..
        } => {
            let why = stderr.trim();
            let why = if why.is_empty() {
                format!("blocked by the {who} (exit 2, no message)")
            } else {
                cut(why, MESSAGE_CAP)
            };
            match hook.event {
                HookEvent::PreToolUse | HookEvent::UserPromptSubmit => e.block = Some(why),
                HookEvent::PostToolUse => e.model_note = Some(why),
                HookEvent::SessionStart
                | HookEvent::Stop
                | HookEvent::PreCompact
                | HookEvent::Notification => {
                    e.notice = Some(format!("the {who} exited 2: {why}"));
                }
            }
        }
        Outcome::Exited { code, stderr, .. } => {
            let first = stderr.lines().next().unwrap_or("").trim();
            e.notice = Some(if first.is_empty() {
                format!("the {who} exited {code}")
            } else {
                format!("the {who} exited {code}: {}", cut(first, 300))
            });
        }
        Outcome::TimedOut { .. } | Outcome::Crashed(_) | Outcome::Denied(_) => {
            let what = match outcome {
                Outcome::TimedOut { .. } => {
                    format!(
                        "timed out after {} ms and was killed",
                        hook.timeout.as_millis()
                    )
                }
                other => other.summary(),
            };
            if hook.event == HookEvent::PreToolUse && hook.fail == HookFail::Closed {
                e.block = Some(format!(
                    "not run: the {who} {what}, and it is fail-closed (`fail = \"closed\"`)"
                ));
                e.notice = Some(format!(
                    "the {who} {what}; fail-closed, so the call was refused"
                ));
            } else {
                e.notice = Some(format!("the {who} {what}; nothing was blocked"));
            }
        }
    }
    e
}

/// One event as hooks see it.
#[derive(Debug, Clone)]
pub struct Input {
    /// The event.
    pub event: HookEvent,
    /// What `match` is compared with: the tool name, or the prompt.
    pub subject: Option<String>,
    /// Event fields (`tool_name`, `tool_input`, `tool_response`, `prompt`, ...), added to
    /// `session_id`, `hook_event_name` and `cwd` in the JSON on stdin.
    pub fields: Map<String, Value>,
}

impl Input {
    /// An event without a subject.
    pub fn new(event: HookEvent) -> Input {
        Input {
            event,
            subject: None,
            fields: Map::new(),
        }
    }

    /// With `key` set to `value` on stdin.
    pub fn with(mut self, key: &str, value: Value) -> Input {
        self.fields.insert(key.to_string(), value);
        self
    }

    /// With the subject `match` is compared with.
    pub fn subject(mut self, s: &str) -> Input {
        self.subject = Some(s.to_string());
        self
    }

    /// The JSON a hook reads on stdin (Claude Code's field names, so its hooks work as is).
    pub fn payload(&self, session_id: &str, workspace: &Path) -> Value {
        let mut m = Map::new();
        m.insert("session_id".into(), json!(session_id));
        m.insert("hook_event_name".into(), json!(self.event.as_str()));
        m.insert("cwd".into(), json!(workspace.display().to_string()));
        for (k, v) in &self.fields {
            m.insert(k.clone(), v.clone());
        }
        Value::Object(m)
    }
}

/// What the hooks of one event decided together.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The first block, if any hook blocked.
    pub block: Option<String>,
    /// Context texts, in hook order.
    pub context: Vec<String>,
    /// Notes for the model (`PostToolUse`).
    pub model_notes: Vec<String>,
}

/// The permission policy's answer for `bash` with a command: `Some(reason)` when denied.
pub type DenyCheck = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;
/// Tells the user something (a session notice).
pub type NoticeFn = Arc<dyn Fn(String) + Send + Sync>;

/// What firing needs from the session (owned, so a firing can run on a task of its own).
#[derive(Clone)]
pub struct FireEnv {
    /// Session id (on stdin).
    pub session_id: String,
    /// Sandbox, workspace and deny guard of the session's current policy.
    pub ctx: ToolContext,
    /// Deny rules for `bash` applied to the hook's command.
    pub denied: DenyCheck,
    /// Where notices go.
    pub notice: NoticeFn,
}

#[derive(Default)]
struct State {
    settings: HookSettings,
    /// Notices already given in this session (problems, skipped untrusted files).
    told: HashSet<String>,
    /// Last run of each hook ([`Hook::key`]).
    last_runs: HashMap<String, String>,
    /// `SessionStart` ran in this session (once per daemon life of the session).
    started: bool,
}

/// A session's hooks: the settings its driver brought, what it has told the user, last runs.
pub struct SessionHooks {
    workspace: PathBuf,
    state: Mutex<State>,
}

impl SessionHooks {
    /// Hooks of a session on `workspace` (none until a driver brings settings, except
    /// project hooks the user trusts, which also need the driver's trust records).
    pub fn new(workspace: &Path) -> SessionHooks {
        SessionHooks {
            workspace: workspace.to_path_buf(),
            state: Mutex::new(State::default()),
        }
    }

    /// The workspace the hooks run in (the `cwd` of their input).
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The driver's hooks and trust records replace the previous ones.
    pub fn set_settings(&self, settings: HookSettings) {
        self.state.lock_or_recover().settings = settings;
    }

    /// The driver's trust records change (`/hooks trust`).
    pub fn set_trusted(&self, trusted: Vec<TrustedHookFile>) {
        self.state.lock_or_recover().settings.trusted = trusted;
    }

    /// The report for `/hooks`.
    pub fn report(&self) -> HooksReport {
        let (settings, last) = {
            let s = self.state.lock_or_recover();
            (s.settings.clone(), s.last_runs.clone())
        };
        report(&load(&self.workspace, &settings), &last)
    }

    /// True the first time it is called (the session's first turn in this daemon).
    pub fn take_start(&self) -> bool {
        let mut s = self.state.lock_or_recover();
        !std::mem::replace(&mut s.started, true)
    }

    /// Run the hooks of `input.event` that apply, one after the other (a block stops the
    /// rest), and tell the user once per session about problems and skipped untrusted files.
    pub async fn fire(&self, input: Input, env: FireEnv) -> Verdict {
        let settings = self.state.lock_or_recover().settings.clone();
        let loaded = load(&self.workspace, &settings);
        self.tell_once(&loaded, &*env.notice);
        let hooks = loaded.runnable(input.event, input.subject.as_deref());
        let mut verdict = Verdict::default();
        if hooks.is_empty() {
            return verdict;
        }
        let payload = input.payload(&env.session_id, &self.workspace);
        let stdin = serde_json::to_vec(&payload).unwrap_or_default();
        let workspace = self.workspace.display().to_string();
        for hook in hooks {
            let (outcome, took) = match (env.denied)(&hook.command) {
                Some(reason) => (Outcome::Denied(reason), std::time::Duration::ZERO),
                None => {
                    let vars = [
                        ("REASONIX_HOOK_EVENT", hook.event.as_str().to_string()),
                        ("REASONIX_SESSION_ID", env.session_id.clone()),
                        ("CLAUDE_PROJECT_DIR", workspace.clone()),
                    ];
                    run::run(&hook.command, stdin.clone(), &vars, hook.timeout, &env.ctx).await
                }
            };
            let when = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
            self.state.lock_or_recover().last_runs.insert(
                hook.key(),
                format!("{when} {} ({} ms)", outcome.summary(), took.as_millis()),
            );
            let e = effect(&hook, &outcome);
            if let Some(n) = e.notice {
                (env.notice)(n);
            }
            verdict.context.extend(e.context);
            verdict.model_notes.extend(e.model_note);
            if let Some(b) = e.block {
                verdict.block = Some(b);
                break;
            }
        }
        verdict
    }

    fn tell_once(&self, loaded: &Loaded, notice: &(dyn Fn(String) + Send + Sync)) {
        let mut fresh = Vec::new();
        {
            let mut s = self.state.lock_or_recover();
            for p in &loaded.problems {
                if s.told.insert(format!("problem:{p}")) {
                    fresh.push(format!("hooks: {p}"));
                }
            }
            for f in loaded.untrusted_files() {
                if s.told.insert(format!("untrusted:{}:{}", f.path, f.sha256)) {
                    fresh.push(format!(
                        "hooks of {} were skipped: this project file is not trusted (its exact content, sha256 {}…, was never trusted, or it changed since). Review it with /hooks and trust it with `/hooks trust` or `reasonix hooks trust`.",
                        f.path,
                        &f.sha256[..12.min(f.sha256.len())]
                    ));
                }
            }
        }
        for n in fresh {
            notice(n);
        }
    }
}

/// `s` cut to at most `max` bytes on a character boundary (with a marker when cut).
fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[… {} more bytes]", &s[..end], s.len() - end)
}

#[cfg(test)]
mod tests;
