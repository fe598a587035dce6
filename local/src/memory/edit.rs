//! Editing one fact in `$VISUAL`/`$EDITOR` on this laptop (#32), shared by
//! `reasonix memory edit ID` and the workbench's `/memory edit ID`: the fact's file is
//! copied into a private temporary folder, the editor runs on it, and the result goes back
//! through the store's `Replace` op (which validates it and keeps the old text as a
//! revision). A malformed result is refused naming the problem, the fact unchanged and the
//! edited text kept where the message says.

use std::path::{Path, PathBuf};

use reasonix_forward::memory::ops::MemoryOp;
use reasonix_forward::proto::MemoryFile;

use super::access::Access;
use super::command::Stores;

/// The editor command: `$VISUAL`, else `$EDITOR`, else `vi`.
pub fn editor() -> String {
    std::env::var("VISUAL")
        .ok()
        .filter(|e| !e.trim().is_empty())
        .or_else(|| {
            std::env::var("EDITOR")
                .ok()
                .filter(|e| !e.trim().is_empty())
        })
        .unwrap_or_else(|| "vi".into())
}

/// One fact ready to be edited: its store, its file as it is, and the copy to edit.
pub struct Draft<'a> {
    access: &'a Access,
    /// The fact's id.
    pub id: String,
    current: MemoryFile,
    /// The copy the editor opens.
    pub path: PathBuf,
    dir: PathBuf,
}

/// Finds fact `id` in either store and writes its file into a fresh private folder.
pub async fn draft<'a>(stores: &'a Stores, id: &str) -> Result<Draft<'a>, String> {
    let (access, _) = stores.holder(id).await?;
    draft_in(access, id).await
}

/// [`draft`] of fact `id` of the store `access`.
pub async fn draft_in<'a>(access: &'a Access, id: &str) -> Result<Draft<'a>, String> {
    let r = access.run(MemoryOp::Show { id: id.into() }).await?;
    let current = r
        .facts
        .first()
        .cloned()
        .ok_or_else(|| format!("no fact with id {id:?}"))?;
    let dir = std::env::temp_dir().join(format!(
        "reasonix-memory-edit-{:016x}",
        rand::random::<u64>()
    ));
    reasonix_forward::private_fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let path = dir.join(&current.name);
    std::fs::write(&path, &current.text)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(Draft {
        access,
        id: id.to_string(),
        current,
        path,
        dir,
    })
}

/// Runs the editor on `path` with the terminal (blocking until it exits).
pub fn run_editor(path: &Path) -> Result<(), String> {
    let editor = editor();
    // Through the shell, so `EDITOR="code --wait"` works; the path is an argument, never
    // part of the command text.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(path)
        .status()
        .map_err(|e| format!("cannot run the editor {editor:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the editor {editor:?} exited with {status}"))
    }
}

impl Draft<'_> {
    /// Writes the edited copy back (validated by the store); the message to show. The
    /// temporary folder is removed unless the edit was refused (then it keeps the text).
    pub async fn save(self) -> Result<String, String> {
        let text = std::fs::read(&self.path)
            .map_err(|e| format!("cannot read {}: {e}", self.path.display()))?;
        let Ok(text) = String::from_utf8(text) else {
            return Err(format!(
                "the edited file is not UTF-8 text; {} is unchanged; your edited text is kept in {}",
                self.id,
                self.path.display()
            ));
        };
        if text == self.current.text {
            let _ = std::fs::remove_dir_all(&self.dir);
            return Ok(format!("no change to {}", self.id));
        }
        let file = MemoryFile {
            name: self.current.name.clone(),
            text,
        };
        match self.access.run(MemoryOp::Replace { file }).await {
            Ok(r) => {
                let _ = std::fs::remove_dir_all(&self.dir);
                Ok(r.message)
            }
            Err(e) => Err(format!(
                "{e}\n{} is unchanged; your edited text is kept in {}",
                self.id,
                self.path.display()
            )),
        }
    }

    /// Drops the copy (the editor failed; nothing was written).
    pub fn discard(self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
