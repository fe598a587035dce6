//! The laptop's side of memory (`docs/MEMORY.md`): the user's global store
//! (`<home>/memory/`, `<home>` = `$REASONIX_HOME` or `~/.reasonix`), sent with every session
//! open for recall and written only here: when the host reports that the model remembered
//! (or forgot) a global fact with the user's approval, the driving laptop applies it.

pub mod access;
pub mod command;
pub mod edit;
pub mod rewind;

use std::path::Path;

use reasonix_forward::memory::store::load_dir;
use reasonix_forward::memory::{global_dir, Fact, Origin, Scope, Store, MAX_GLOBAL_BYTES};
use reasonix_forward::proto::{Event, EventKind, MemoryFile, MemorySettings};

/// Marks a global fact in a `remember` result (the host's `memory::GLOBAL_FILE_OPEN`).
const FILE_OPEN: &str = "<memory-file name=\"";
const FILE_CLOSE: &str = "</memory-file>";
/// Marks a global fact to archive in a `forget` result.
const FORGET_OPEN: &str = "<memory-forget id=\"";

/// The global store of `home`.
pub fn global_store(home: &Path) -> Store {
    Store::new(global_dir(home), Scope::Global)
}

/// What a session open carries about memory: the global facts (sound files only, at most
/// [`MAX_GLOBAL_BYTES`] in all) and whether a headless run may write memory.
pub fn session_settings(home: &Path, allow_writes: bool) -> MemorySettings {
    let loaded = load_dir(&global_dir(home), Origin::Store(Scope::Global));
    for n in &loaded.notices {
        tracing::warn!("{n}");
    }
    let mut global = Vec::new();
    let mut bytes = 0;
    for f in loaded.facts {
        let text = f.to_markdown();
        bytes += text.len();
        if bytes > MAX_GLOBAL_BYTES {
            tracing::warn!("global memory exceeds {MAX_GLOBAL_BYTES} bytes; the rest is not sent");
            break;
        }
        global.push(MemoryFile {
            name: format!("{}.md", f.id),
            text,
        });
    }
    MemorySettings {
        global,
        allow_writes,
    }
}

/// Applies a global `remember`/`forget` the host reported in `ev` to the global store of
/// `home`. Idempotent: a replayed event finds the fact written (or archived) already.
pub fn apply_event(home: &Path, ev: &Event) {
    let EventKind::ToolFinished {
        name,
        is_error: false,
        output,
        ..
    } = &ev.kind
    else {
        return;
    };
    let store = global_store(home);
    match name.as_str() {
        "remember" => {
            let Some(start) = output.find(FILE_OPEN) else {
                return;
            };
            let rest = &output[start + FILE_OPEN.len()..];
            let Some(body_at) = rest.find("\">\n") else {
                return;
            };
            let Some(end) = rest.find(FILE_CLOSE) else {
                return;
            };
            if end < body_at + 3 {
                return;
            }
            let text = &rest[body_at + 3..end];
            match Fact::parse(text.as_bytes()) {
                Ok(f) if f.scope == Scope::Global => {
                    if let Err(e) = write_global(&store, &f) {
                        tracing::warn!("global fact {} was not saved: {e}", f.id);
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("a global fact from the host is malformed: {e}"),
            }
        }
        "forget" => {
            let Some(start) = output.find(FORGET_OPEN) else {
                return;
            };
            let rest = &output[start + FORGET_OPEN.len()..];
            let id = rest.split('"').next().unwrap_or("");
            if store.dir().join(format!("{id}.md")).exists() {
                if let Err(e) = store.forget(id) {
                    tracing::warn!("global fact {id} was not archived: {e}");
                }
            }
        }
        _ => {}
    }
}

/// Creates `f`, or supersedes the stored fact when `f` is a later revision of it; a fact
/// already written (or archived since) is left alone.
fn write_global(store: &Store, f: &Fact) -> Result<(), reasonix_forward::memory::StoreError> {
    if store
        .dir()
        .join("archive")
        .join(format!("{}.md", f.id))
        .exists()
    {
        return Ok(());
    }
    let current = store.load().facts.into_iter().find(|g| g.id == f.id);
    match current {
        None => match store.create(f) {
            Ok(_) | Err(reasonix_forward::memory::StoreError::Exists(_)) => Ok(()),
            Err(e) => Err(e),
        },
        Some(c) if c.revision < f.revision => store.supersede(f).map(|_| ()),
        Some(_) => Ok(()),
    }
}
