//! Deny rules on file writers hold for bash by construction.
//!
//! The bash reader (`crate::policy`) refuses a command that *names* a protected path, which
//! gives an early, friendly message; it cannot see what an interpreter, a `cd` chain or
//! `dd of=` writes. Two things make the rule hold whatever the command looks like:
//!
//! 1. **Read-only mounts.** Right before a command starts, the covered paths that exist are
//!    found ([`Scope`], a bounded walk) and the sandbox mounts them read-only for the command
//!    (`--ro-bind-try`, after the writable roots). A directory whose whole subtree is covered
//!    is mounted as one.
//! 2. **The after-call check.** The same walk keeps the state of every covered entry; when
//!    the command ends (a foreground call, a background job, a `!` command, or a call
//!    cancelled mid-way) the walk runs again and every difference is undone: new entries are
//!    moved out to the quarantine directory, changed or deleted ones are rewritten from the
//!    snapshot, changed modes and times are set back. This also catches what a mount cannot:
//!    a new file matching `**/*.env`, or any write when the sandbox is off.
//!
//! The model reads what was undone, naming the rule, in the tool result; the user gets a
//! notice. Without a deny rule on file writers none of this runs (the context holds no
//! guard).

mod restore;
mod scope;
mod snapshot;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reasonix_forward::sync::LockExt;

pub use restore::{Change, Undone};
pub use scope::Scope;
pub use snapshot::{MAX_FILE_BYTES, MAX_TOTAL_BYTES, MAX_WALK_ENTRIES};

use crate::policy::WriteDenyRules;
use crate::sandbox::Sandbox;
use snapshot::{Capture, Snapshot};

use super::{NoticeSink, ToolContext, ToolOutput};

/// Read-only mounts one command gets at most (the after-call check covers the rest).
pub const MAX_READ_ONLY_MOUNTS: usize = 256;
/// Changed paths a report lists by name.
pub const REPORT_LINES: usize = 20;
/// How long a cancelled command's processes get to die before the check runs.
const CANCEL_GRACE: Duration = Duration::from_millis(200);

/// The existing paths `rules` cover that a sandbox must make read-only for a command run in
/// `scope` (see [`Scope`]): one path per covered file, one per directory whose whole subtree
/// is covered, none outside the writable roots. The bubblewrap sandbox binds them read-only;
/// another mechanism (Landlock) can use the same list.
pub fn read_only_paths(rules: &WriteDenyRules, scope: &Scope) -> Vec<PathBuf> {
    Snapshot::take(rules, scope, Capture::MetadataOnly).read_only_paths(
        rules,
        scope,
        MAX_READ_ONLY_MOUNTS,
    )
}

/// The guard of one session: its deny rules on file writers and where undone writes are
/// kept.
#[derive(Debug)]
pub struct DenyGuard {
    rules: WriteDenyRules,
    quarantine: PathBuf,
    excluded: Vec<PathBuf>,
    /// One undo at a time (a background job may end while a foreground call is checked).
    undoing: Mutex<()>,
}

impl DenyGuard {
    /// A guard for `rules`, keeping undone writes under `quarantine` and never walking into
    /// `excluded` (the daemon's own state). `None` when there is no rule to guard.
    pub fn new(
        rules: WriteDenyRules,
        quarantine: PathBuf,
        mut excluded: Vec<PathBuf>,
    ) -> Option<Arc<DenyGuard>> {
        if rules.is_empty() {
            return None;
        }
        excluded.push(quarantine.clone());
        Some(Arc::new(DenyGuard {
            rules,
            quarantine,
            excluded,
            undoing: Mutex::new(()),
        }))
    }

    /// [`DenyGuard::new`] with the host's state directory: undone writes go to
    /// `<state home>/denied/<workspace key>/`, and the state home is never walked.
    pub fn for_workspace(rules: WriteDenyRules, workspace: &Path) -> Option<Arc<DenyGuard>> {
        let home = crate::paths::state_home();
        let key = crate::paths::workspace_key(workspace);
        let quarantine = home.join("denied").join(key);
        Self::new(rules, quarantine, vec![home])
    }

    /// The rules guarded.
    pub fn rules(&self) -> &WriteDenyRules {
        &self.rules
    }

    /// Where undone writes are kept.
    pub fn quarantine_dir(&self) -> &Path {
        &self.quarantine
    }

    /// Where a command run by `sandbox` can change covered paths.
    pub fn scope(&self, sandbox: &Sandbox) -> Scope {
        Scope::new(&self.rules, sandbox, self.excluded.clone())
    }

    /// The state of the covered paths before a command (blocking: walks and reads files).
    pub fn before(&self, scope: Scope) -> Before {
        let snap = Snapshot::take(&self.rules, &scope, Capture::Content);
        let read_only = snap.read_only_paths(&self.rules, &scope, MAX_READ_ONLY_MOUNTS);
        let ro_rules = read_only
            .iter()
            .filter_map(|p| snap.entries.get(p).map(|e| e.rule))
            .collect();
        Before {
            scope,
            snap,
            read_only,
            ro_rules,
        }
    }

    /// Finds and undoes what changed since `before` (blocking).
    pub fn after(&self, before: &Before) -> Report {
        let _one_at_a_time = self.undoing.lock_or_recover();
        let now = Snapshot::take(&self.rules, &before.scope, Capture::MetadataOnly);
        let mut q = restore::Quarantine::new(&self.quarantine, self.rules.workspace());
        let undone = restore::undo(&before.snap, &now, &mut q);
        Report {
            undone,
            kept_in: q.batch().map(Path::to_path_buf),
            partial: before.snap.partial || now.partial,
            rules: self.rules.texts().iter().map(|s| s.to_string()).collect(),
            workspace: self.rules.workspace().map(Path::to_path_buf),
        }
    }
}

/// The covered paths' state before one command.
#[derive(Debug)]
pub struct Before {
    scope: Scope,
    snap: Snapshot,
    read_only: Vec<PathBuf>,
    ro_rules: BTreeSet<usize>,
}

impl Before {
    /// What the sandbox mounts read-only for the command.
    pub fn read_only_paths(&self) -> &[PathBuf] {
        &self.read_only
    }

    /// Covered entries found.
    pub fn covered(&self) -> usize {
        self.snap.entries.len()
    }
}

/// What the after-call check found and did.
#[derive(Debug, Clone)]
pub struct Report {
    /// Every changed covered path, parents first.
    pub undone: Vec<Undone>,
    /// The directory holding the command's versions of what was undone.
    pub kept_in: Option<PathBuf>,
    /// True when a walk stopped at [`MAX_WALK_ENTRIES`] (paths beyond were not checked).
    pub partial: bool,
    rules: Vec<String>,
    workspace: Option<PathBuf>,
}

impl Report {
    /// True when nothing covered changed.
    pub fn is_empty(&self) -> bool {
        self.undone.is_empty()
    }

    fn show(&self, p: &Path) -> String {
        match self
            .workspace
            .as_deref()
            .and_then(|w| p.strip_prefix(w).ok())
        {
            Some(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Some(rel) => rel.display().to_string(),
            None => p.display().to_string(),
        }
    }

    fn rule(&self, i: usize) -> &str {
        self.rules.get(i).map(String::as_str).unwrap_or("?")
    }

    fn outcome(u: &Undone) -> String {
        match (&u.failed, u.change) {
            (Some(why), _) => format!("NOT undone: {why}"),
            (None, Change::Created) => "removed".into(),
            (None, Change::Modified | Change::Deleted) => "restored".into(),
            (None, Change::Metadata) => "set back".into(),
        }
    }

    /// The text appended to the tool result: every change, the rule that denies it, and
    /// what was done.
    pub fn for_model(&self) -> String {
        let mut s = String::from(
            "[denied write undone: bash may not change paths that a deny rule on edits covers; \
             what this command did there was reverted]\n",
        );
        for u in self.undone.iter().take(REPORT_LINES) {
            s.push_str(&format!(
                "- {} `{}` (denied by `{}`): {}\n",
                u.change.verb(),
                self.show(&u.path),
                self.rule(u.rule),
                Self::outcome(u)
            ));
        }
        if self.undone.len() > REPORT_LINES {
            s.push_str(&format!(
                "- and {} more\n",
                self.undone.len() - REPORT_LINES
            ));
        }
        s.push_str(
            "Do not retry this or work around it: the user's deny rules protect these paths. \
             Ask the user if the change is needed.",
        );
        s
    }

    /// The notice the user gets.
    pub fn for_user(&self, command: &str) -> String {
        let mut cmd: String = command.chars().take(80).collect();
        if cmd.len() < command.len() {
            cmd.push('…');
        }
        let mut items: Vec<String> = self
            .undone
            .iter()
            .take(REPORT_LINES)
            .map(|u| {
                format!(
                    "{} `{}` (`{}`): {}",
                    u.change.verb(),
                    self.show(&u.path),
                    self.rule(u.rule),
                    Self::outcome(u)
                )
            })
            .collect();
        if self.undone.len() > REPORT_LINES {
            items.push(format!("and {} more", self.undone.len() - REPORT_LINES));
        }
        let mut s = format!(
            "denied write undone after bash `{}`: {}",
            cmd.replace('\n', " "),
            items.join("; ")
        );
        if let Some(k) = &self.kept_in {
            s.push_str(&format!(
                ". The command's versions are kept in {}",
                k.display()
            ));
        }
        s
    }

    /// The note added when a walk was cut short.
    pub fn partial_note() -> String {
        format!(
            "[deny-rule check: the walk stopped after {MAX_WALK_ENTRIES} entries; covered paths beyond them were not checked]"
        )
    }
}

/// Does the command output show a write that a read-only mount refused? EROFS (a write),
/// EBUSY (moving or removing a mount point), EXDEV (a hard link across the mount's
/// boundary), as C programs (`strerror`) and as Node or Python spell them.
fn refused_by_mount(output: &str) -> bool {
    let lower = output.to_ascii_lowercase();
    [
        "read-only file system",
        "resource busy",
        "cross-device link",
    ]
    .iter()
    .any(|m| lower.contains(m))
        || ["EROFS", "EBUSY", "EXDEV"]
            .iter()
            .any(|m| output.contains(m))
}

/// A check armed for one command: the state before it, and who to tell. Finishing it (or
/// dropping it unfinished, when the call is cancelled) runs the after-call check.
pub(crate) struct Armed {
    guard: Arc<DenyGuard>,
    before: Option<Arc<Before>>,
    notices: Arc<dyn NoticeSink>,
    command: String,
}

impl Armed {
    /// Takes the before-state for `command` (off the async threads).
    pub(crate) async fn arm(guard: Arc<DenyGuard>, ctx: &ToolContext, command: &str) -> Armed {
        let scope = guard.scope(&ctx.sandbox);
        let g = Arc::clone(&guard);
        let before = match tokio::task::spawn_blocking(move || g.before(scope)).await {
            Ok(b) => Some(Arc::new(b)),
            Err(e) => {
                // Without a before-state nothing can be restored; the mounts are lost too, so
                // say so in the log (the walk itself does not panic on I/O errors).
                tracing::error!(error = %e, "deny-rule snapshot failed");
                None
            }
        };
        Armed {
            guard,
            before,
            notices: Arc::clone(&ctx.notices),
            command: command.to_string(),
        }
    }

    /// The paths the sandbox must mount read-only.
    pub(crate) fn read_only_paths(&self) -> Vec<PathBuf> {
        self.before
            .as_ref()
            .map(|b| b.read_only_paths().to_vec())
            .unwrap_or_default()
    }

    /// The command never started: nothing to check.
    pub(crate) fn disarm(mut self) {
        self.before = None;
    }

    /// The text to add to a result whose `output` is known (blocking: runs the check).
    fn conclude(
        guard: &DenyGuard,
        before: &Before,
        notices: &dyn NoticeSink,
        command: &str,
        output: &str,
    ) -> (Option<String>, bool) {
        let report = guard.after(before);
        let mut extra = Vec::new();
        let denied = !report.is_empty();
        if denied {
            notices.notice(report.for_user(command));
            extra.push(report.for_model());
        } else if !before.read_only.is_empty() && refused_by_mount(output) {
            let rules: Vec<String> = before
                .ro_rules
                .iter()
                .map(|i| format!("`{}`", guard.rules.text(*i)))
                .collect();
            extra.push(format!(
                "[the sandbox mounts the paths covered by the deny rule{} {} read-only for bash; a \"Read-only file system\" or \"busy\" error above comes from there. Do not work around it: ask the user if the change is needed.]",
                if rules.len() == 1 { "" } else { "s" },
                rules.join(", ")
            ));
        }
        if report.partial {
            extra.push(Report::partial_note());
        }
        let text = (!extra.is_empty()).then(|| extra.join("\n"));
        (text, denied)
    }

    /// Runs the check after a foreground command and adds its findings to `out` (a result
    /// whose covered writes were undone is an error).
    pub(crate) async fn finish(mut self, out: ToolOutput) -> ToolOutput {
        let Some(before) = self.before.take() else {
            return out;
        };
        let guard = Arc::clone(&self.guard);
        let notices = Arc::clone(&self.notices);
        let command = std::mem::take(&mut self.command);
        let text = out.text.clone();
        let concluded = tokio::task::spawn_blocking(move || {
            Self::conclude(&guard, &before, notices.as_ref(), &command, &text)
        })
        .await;
        match concluded {
            Ok((None, _)) => out,
            Ok((Some(extra), denied)) => {
                let sep = if out.text.is_empty() || out.text.ends_with('\n') {
                    ""
                } else {
                    "\n"
                };
                ToolOutput {
                    text: format!("{}{sep}{extra}", out.text),
                    is_error: out.is_error || denied,
                }
            }
            Err(e) => ToolOutput::err(format!(
                "{}\n[internal error: the deny-rule check failed: {e}]",
                out.text
            )),
        }
    }

    /// The check as a background job's last step: given the job's output, it returns the
    /// text to append to it (blocking).
    pub(crate) fn into_job_hook(mut self) -> super::jobs::FinishHook {
        let before = self.before.take();
        let guard = Arc::clone(&self.guard);
        let notices = Arc::clone(&self.notices);
        let command = std::mem::take(&mut self.command);
        Box::new(move |output: &str| {
            let before = before?;
            Self::conclude(&guard, &before, notices.as_ref(), &command, output).0
        })
    }
}

impl Drop for Armed {
    /// A foreground call cancelled while its command ran: the process group has just been
    /// killed; give it a moment, then check on a thread of its own (nobody awaits it).
    fn drop(&mut self) {
        let Some(before) = self.before.take() else {
            return;
        };
        let guard = Arc::clone(&self.guard);
        let notices = Arc::clone(&self.notices);
        let command = std::mem::take(&mut self.command);
        let spawned = std::thread::Builder::new()
            .name("deny-guard".into())
            .spawn(move || {
                std::thread::sleep(CANCEL_GRACE);
                let _ = Self::conclude(&guard, &before, notices.as_ref(), &command, "");
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the deny-rule check of a cancelled command");
        }
    }
}
