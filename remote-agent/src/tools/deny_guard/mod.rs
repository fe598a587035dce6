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
//! Commands that overlap (a call made while a background job runs) share one baseline, the
//! state before the first of them, so one check never puts back what another removed.
//!
//! The model reads what was undone, naming the rule, in the tool result; the user gets a
//! notice. Without a deny rule on file writers none of this runs (the context holds no
//! guard).

mod restore;
mod scope;
mod snapshot;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};
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

/// The state every in-flight guarded command is compared with: taken when a command starts
/// while no other guarded command of the same rules and workspace runs, and kept until the
/// last of them has ended. A command started while a background job runs is thus checked
/// against the state before that job too, so what the job writes meanwhile is never taken
/// for the new command's starting point (and never put back by its check).
#[derive(Debug, Default)]
struct Baseline {
    running: usize,
    before: Option<Arc<Before>>,
}

/// The baseline of one (workspace, rules): shared by every guard built for them, so the
/// guards of a policy rebuilt mid-session (a new driving client) and of other sessions on
/// the same rules see one another's commands.
fn shared_baseline(key: String) -> Arc<Mutex<Baseline>> {
    static ALL: OnceLock<Mutex<HashMap<String, Weak<Mutex<Baseline>>>>> = OnceLock::new();
    let mut all = ALL.get_or_init(Mutex::default).lock_or_recover();
    all.retain(|_, w| w.strong_count() > 0);
    if let Some(b) = all.get(&key).and_then(Weak::upgrade) {
        return b;
    }
    let b = Arc::new(Mutex::new(Baseline::default()));
    all.insert(key, Arc::downgrade(&b));
    b
}

/// The guard of one session: its deny rules on file writers, where undone writes are
/// kept, and the baseline of the commands in flight.
#[derive(Debug)]
pub struct DenyGuard {
    rules: WriteDenyRules,
    quarantine: PathBuf,
    excluded: Vec<PathBuf>,
    /// Held while a baseline is taken or a check undoes writes: one at a time.
    baseline: Arc<Mutex<Baseline>>,
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
        let key = format!("{}\0{}", quarantine.display(), rules.texts().join("\0"));
        Some(Arc::new(DenyGuard {
            rules,
            quarantine,
            excluded,
            baseline: shared_baseline(key),
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

    /// A command is about to start: the state it will be checked against (blocking: when no
    /// other guarded command runs, the covered paths are walked and read now).
    pub fn begin(&self, scope: Scope) -> Arc<Before> {
        let mut b = self.baseline.lock_or_recover();
        if b.running > 0 {
            if let Some(before) = b.before.clone() {
                b.running += 1;
                return before;
            }
        }
        let snap = Snapshot::take(&self.rules, &scope, Capture::Content);
        let read_only = snap.read_only_paths(&self.rules, &scope, MAX_READ_ONLY_MOUNTS);
        let ro_rules = read_only
            .iter()
            .filter_map(|p| snap.entries.get(p).map(|e| e.rule))
            .collect();
        let before = Arc::new(Before {
            scope,
            snap,
            read_only,
            ro_rules,
        });
        b.before = Some(Arc::clone(&before));
        b.running = 1;
        before
    }

    /// A command that [`DenyGuard::begin`] was called for has ended: finds and undoes every
    /// change to the covered paths since `before` (blocking).
    pub fn end(&self, before: &Before) -> Report {
        let mut b = self.baseline.lock_or_recover();
        let now = Snapshot::take(&self.rules, &before.scope, Capture::MetadataOnly);
        let mut q = restore::Quarantine::new(&self.quarantine, self.rules.workspace());
        let undone = restore::undo(&before.snap, &now, &mut q);
        Self::leave(&mut b);
        Report {
            undone,
            kept_in: q.batch().map(Path::to_path_buf),
            partial: before.snap.partial || now.partial,
            rules: self.rules.texts().iter().map(|s| s.to_string()).collect(),
            workspace: self.rules.workspace().map(Path::to_path_buf),
        }
    }

    /// A command that [`DenyGuard::begin`] was called for never started.
    pub fn release(&self) {
        Self::leave(&mut self.baseline.lock_or_recover());
    }

    fn leave(b: &mut Baseline) {
        b.running = b.running.saturating_sub(1);
        if b.running == 0 {
            b.before = None;
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
             what this command did there was reverted",
        );
        if self.undone.iter().any(|u| u.failed.is_some()) {
            s.push_str(" except where it says NOT undone");
        }
        s.push_str("]\n");
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

/// A check armed for one command: the state it is compared with, and who to tell.
/// Concluding it (or dropping it unconcluded, when the call is cancelled or a background
/// job's last step never runs) runs the after-call check.
pub(crate) struct Armed {
    guard: Arc<DenyGuard>,
    before: Option<Arc<Before>>,
    notices: Arc<dyn NoticeSink>,
    command: String,
}

impl Armed {
    /// Takes (or joins) the baseline for `command` (off the async threads).
    pub(crate) async fn arm(guard: Arc<DenyGuard>, ctx: &ToolContext, command: &str) -> Armed {
        let scope = guard.scope(&ctx.sandbox);
        let g = Arc::clone(&guard);
        let before = match tokio::task::spawn_blocking(move || g.begin(scope)).await {
            Ok(b) => Some(b),
            Err(e) => {
                // The walk does not panic on I/O errors; if it failed anyway, nothing can be
                // restored for this command and it runs without the mounts.
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
        if self.before.take().is_some() {
            self.guard.release();
        }
    }

    /// Runs the check (blocking) and returns the text to add to a result whose output is
    /// `output`, and whether writes were undone.
    fn conclude(mut self, output: &str) -> (Option<String>, bool) {
        let Some(before) = self.before.take() else {
            return (None, false);
        };
        let report = self.guard.end(&before);
        let mut extra = Vec::new();
        let denied = !report.is_empty();
        if denied {
            self.notices.notice(report.for_user(&self.command));
            extra.push(report.for_model());
        } else if !before.read_only.is_empty() && refused_by_mount(output) {
            let rules: Vec<String> = before
                .ro_rules
                .iter()
                .map(|i| format!("`{}`", self.guard.rules.text(*i)))
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
    pub(crate) async fn finish(self, out: ToolOutput) -> ToolOutput {
        let text = out.text.clone();
        match tokio::task::spawn_blocking(move || self.conclude(&text)).await {
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
    /// text to append to it (blocking). Dropped without being run, it checks all the same.
    pub(crate) fn into_job_hook(self) -> super::jobs::FinishHook {
        Box::new(move |output: &str| self.conclude(output).0)
    }
}

impl Drop for Armed {
    /// Still armed: a foreground call cancelled while its command ran (its process group
    /// has just been killed), or a job's last step that never ran. Give the processes a
    /// moment, then check on a thread of its own (nobody awaits it).
    fn drop(&mut self) {
        let Some(before) = self.before.take() else {
            return;
        };
        let armed = Armed {
            guard: Arc::clone(&self.guard),
            before: Some(before),
            notices: Arc::clone(&self.notices),
            command: std::mem::take(&mut self.command),
        };
        let spawned = std::thread::Builder::new()
            .name("deny-guard".into())
            .spawn(move || {
                std::thread::sleep(CANCEL_GRACE);
                let _ = armed.conclude("");
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the deny-rule check of a cancelled command");
        }
    }
}
