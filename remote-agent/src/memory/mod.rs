//! Memory on the host (`docs/MEMORY.md`): the workspace's project store, the driving
//! laptop's global facts (held in memory only, never written here), recall before each user
//! turn, pinned facts for the standing instructions, the write policy ([`gate`]) and the
//! tools `remember`, `forget` and `memory`.
//!
//! The pure parts (file format, store, secret check, BM25) live in
//! [`reasonix_forward::memory`], shared with the laptop, which owns the global store.

mod forget;
pub mod gate;
mod lookup;
mod remember;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use reasonix_forward::memory::fact::now_rfc3339;
use reasonix_forward::memory::recall::{self, Index};
use reasonix_forward::memory::store::{load_dir, load_named};
use reasonix_forward::memory::{Fact, Origin, Scope, Store, EXPORT_DIR};
use reasonix_forward::proto::{Attachment, MemorySettings};
use reasonix_forward::sync::LockExt;

pub use forget::ForgetTool;
pub use forget::GLOBAL_FORGET;
pub use lookup::MemoryTool;
pub use remember::{RememberTool, GLOBAL_FILE_CLOSE, GLOBAL_FILE_OPEN};

/// The attachment path that marks recalled facts in a user turn (rendered as a
/// `<recalled-memory>` block by [`crate::agent::user_message`]).
pub const RECALL_PATH: &str = "memory:recall";

/// Adds the memory tools to `registry`.
pub fn register_tools(registry: &mut crate::tools::ToolRegistry) {
    registry.register(Arc::new(RememberTool));
    registry.register(Arc::new(ForgetTool));
    registry.register(Arc::new(MemoryTool));
}

/// Every fact a session can recall, indexed.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Project facts (store, then exported), then global facts.
    pub facts: Vec<Fact>,
    /// BM25 over `facts`.
    pub index: Index,
    /// Files that were skipped, by name and reason.
    pub notices: Vec<String>,
}

type Stamp = (Option<SystemTime>, Option<SystemTime>, u64);

/// One session's view of memory: the workspace's project store and the global facts its
/// driving laptop sent.
pub struct Memory {
    project: Store,
    export_dir: PathBuf,
    global: Mutex<(Vec<Fact>, u64)>,
    global_notices: Vec<String>,
    allow_writes: bool,
    session: Option<String>,
    cache: Mutex<Option<(Stamp, Arc<Snapshot>)>>,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field("project", &self.project.dir())
            .finish_non_exhaustive()
    }
}

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

impl Memory {
    /// Memory of `workspace` whose project store is `project_dir` (see
    /// [`reasonix_forward::memory::project_dir`]); no global facts yet.
    pub fn open(project_dir: PathBuf, workspace: &Path) -> Memory {
        Memory {
            project: Store::new(project_dir, Scope::Project),
            export_dir: workspace.join(EXPORT_DIR),
            global: Mutex::new((Vec::new(), 0)),
            global_notices: Vec::new(),
            allow_writes: false,
            session: None,
            cache: Mutex::new(None),
        }
    }

    /// The same project store for session `session`, with the global facts and write
    /// permission a driving client sent.
    pub fn for_driver(&self, session: &str, settings: &MemorySettings) -> Memory {
        let files: Vec<(String, Vec<u8>)> = settings
            .global
            .iter()
            .map(|f| (f.name.clone(), f.text.clone().into_bytes()))
            .collect();
        let loaded = load_named(&files, Origin::Store(Scope::Global));
        Memory {
            project: self.project.clone(),
            export_dir: self.export_dir.clone(),
            global: Mutex::new((loaded.facts, 0)),
            global_notices: loaded
                .notices
                .into_iter()
                .map(|n| format!("{n} (on the laptop)"))
                .collect(),
            allow_writes: settings.allow_writes,
            session: Some(session.to_string()),
            cache: Mutex::new(None),
        }
    }

    /// The project store.
    pub fn project(&self) -> &Store {
        &self.project
    }

    /// True when a headless run may write without asking (`--allow-memory-writes`).
    pub fn allow_writes(&self) -> bool {
        self.allow_writes
    }

    /// The session the facts written through this handle come from.
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// Adds (or replaces, by id) a global fact the laptop is about to store, so this session
    /// recalls it at once.
    pub fn put_global(&self, fact: Fact) {
        let mut g = self.global.lock_or_recover();
        g.0.retain(|f| f.id != fact.id);
        g.0.push(fact);
        g.1 += 1;
    }

    /// Drops a global fact the laptop is about to archive.
    pub fn remove_global(&self, id: &str) {
        let mut g = self.global.lock_or_recover();
        g.0.retain(|f| f.id != id);
        g.1 += 1;
    }

    /// The facts as they are now (re-read when a store directory changed).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        let stamp: Stamp = (
            mtime(self.project.dir()),
            mtime(&self.export_dir),
            self.global.lock_or_recover().1,
        );
        let mut cache = self.cache.lock_or_recover();
        if let Some((s, snap)) = cache.as_ref() {
            if *s == stamp {
                return Arc::clone(snap);
            }
        }
        let mut own = self.project.load();
        let exported = load_dir(&self.export_dir, Origin::Export);
        let mut notices = std::mem::take(&mut own.notices);
        notices.extend(exported.notices);
        notices.extend(self.global_notices.iter().cloned());
        let mut facts = own.facts;
        for f in exported.facts {
            if facts.iter().any(|g| g.id == f.id) {
                notices.push(format!(
                    "skipped exported memory fact {}: the project store has a fact with that id",
                    f.id
                ));
            } else {
                facts.push(f);
            }
        }
        for f in self.global.lock_or_recover().0.iter() {
            if facts.iter().any(|g| g.id == f.id) {
                notices.push(format!(
                    "skipped global memory fact {}: a project fact has that id",
                    f.id
                ));
            } else {
                facts.push(f.clone());
            }
        }
        let index = Index::build(&facts);
        let snap = Arc::new(Snapshot {
            facts,
            index,
            notices,
        });
        *cache = Some((stamp, Arc::clone(&snap)));
        snap
    }

    /// Forgets the cached snapshot (after a write through this handle).
    pub fn invalidate(&self) {
        *self.cache.lock_or_recover() = None;
    }

    /// The recalled-memory attachment for a user turn of `text`, if any fact matches.
    pub fn recall_attachment(&self, text: &str) -> Option<Attachment> {
        let snap = self.snapshot();
        let picked = recall::select(&snap.facts, &snap.index, text, &now_rfc3339(), &[]);
        if picked.is_empty() {
            return None;
        }
        let facts: Vec<&Fact> = picked.iter().map(|i| &snap.facts[*i]).collect();
        Some(Attachment {
            path: RECALL_PATH.to_string(),
            content: recall::render_block(&facts),
            truncated: false,
        })
    }

    /// The pinned facts for the standing instructions (empty when none), and a notice for
    /// those left out for lack of room.
    pub fn pinned(&self) -> (String, Option<String>) {
        let snap = self.snapshot();
        let (text, left_out) = recall::pinned_block(&snap.facts, &now_rfc3339());
        let notice = (!left_out.is_empty()).then(|| {
            format!(
                "pinned memory facts left out of the standing instructions (they exceed {} characters in all): {}; unpin some with `reasonix memory`",
                recall::MAX_PINNED_CHARS,
                left_out.join(", ")
            )
        });
        (text, notice)
    }
}

/// Adds the pinned facts of `mem` to the standing instructions of `prefix` (at session start
/// only: a change takes effect in the next session); returns a notice when some did not fit.
pub fn pin(prefix: &mut crate::agent::Prefix, mem: Option<&Memory>) -> Option<String> {
    let mem = mem?;
    let (text, notice) = mem.pinned();
    if !text.is_empty() {
        prefix.add_instructions("memory:pinned", text.trim_end());
    }
    notice
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_laptop_and_the_host_agree_on_the_workspace_key() {
        let p = std::path::Path::new("/srv/work/project");
        assert_eq!(
            reasonix_forward::memory::workspace_key(p),
            crate::paths::workspace_key(p)
        );
    }
}
