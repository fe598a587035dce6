//! The workspace's session catalog on disk, beside the journals: titles set by the user
//! (a small meta file per session) and the trash (deleted sessions, restorable for
//! [`TRASH_KEEP_DAYS`] days, then purged).
//!
//! Layout under the workspace's sessions directory:
//! - `<id>.jsonl` the journal, `archive/<id>.jsonl` what compaction removed,
//! - `<id>.meta.json` `{"title": …}` when the user renamed the session,
//! - `trash/<id>/` a deleted session: the same files plus `trashed.json` with the time.
//!
//! Every change is a rename inside one file system, so a crash leaves a session either where
//! it was or where it went, never half of it in each place (the journal moves last on a
//! delete and first on a restore: a journal in place means the session is listed).

use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use reasonix_forward::proto::TRASH_KEEP_DAYS;
use serde::{Deserialize, Serialize};

/// What can go wrong with the catalog.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The id is not one the host hands out.
    #[error("invalid session id {0:?}")]
    BadId(String),
    /// No such session in this workspace (or not in its trash).
    #[error("{0}")]
    NotFound(String),
    /// Restoring would replace a session of the same id.
    #[error("a session {0} exists already; it was not replaced")]
    Exists(String),
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> CatalogError + '_ {
    move |source| CatalogError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[derive(Serialize, Deserialize)]
struct Meta {
    title: String,
}

#[derive(Serialize, Deserialize)]
struct Trashed {
    /// Seconds since the epoch.
    deleted: u64,
}

/// A trashed session as found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrashEntry {
    /// Session id.
    pub id: String,
    /// Seconds since the epoch of the delete.
    pub deleted: u64,
    /// Its journal inside the trash.
    pub journal: PathBuf,
}

/// Session ids are `[0-9a-zA-Z-]+` (see `new_session_id`); anything else could name a path.
pub fn check_id(id: &str) -> Result<(), CatalogError> {
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(CatalogError::BadId(id.to_string()));
    }
    Ok(())
}

/// Seconds since the epoch now.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// The catalog of one workspace's sessions directory.
#[derive(Debug, Clone)]
pub struct Catalog {
    dir: PathBuf,
}

impl Catalog {
    /// The catalog in `sessions_dir`.
    pub fn new(sessions_dir: &Path) -> Catalog {
        Catalog {
            dir: sessions_dir.to_path_buf(),
        }
    }

    fn journal(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.jsonl"))
    }
    fn meta(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.meta.json"))
    }
    fn archive(&self, id: &str) -> PathBuf {
        self.dir.join("archive").join(format!("{id}.jsonl"))
    }
    fn trash_dir(&self) -> PathBuf {
        self.dir.join("trash")
    }
    fn trashed(&self, id: &str) -> PathBuf {
        self.trash_dir().join(id)
    }

    /// The title the user gave the session, if any.
    pub fn title(&self, id: &str) -> Option<String> {
        Self::title_in(&self.meta(id))
    }

    fn title_in(meta: &Path) -> Option<String> {
        let bytes = std::fs::read(meta).ok()?;
        match serde_json::from_slice::<Meta>(&bytes) {
            Ok(m) => Some(m.title),
            Err(e) => {
                tracing::warn!("{} ignored: {e}", meta.display());
                None
            }
        }
    }

    /// Set (or, with an empty title, clear) the user's title of session `id`, whose journal
    /// must exist. Written to a temporary file and renamed, so readers never see half of it.
    pub fn set_title(&self, id: &str, title: &str) -> Result<(), CatalogError> {
        check_id(id)?;
        if !self.journal(id).exists() {
            return Err(CatalogError::NotFound(format!(
                "no session {id} in this workspace; `reasonix sessions` lists them"
            )));
        }
        let meta = self.meta(id);
        let title = crate::journal::title_of(title.trim());
        if title.is_empty() {
            return match std::fs::remove_file(&meta) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io_err(&meta)(e)),
            };
        }
        let body = serde_json::to_vec(&Meta { title }).map_err(|e| io_err(&meta)(e.into()))?;
        let tmp = self.dir.join(format!(".{id}.meta.json.tmp"));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io_err(&tmp))?;
        io::Write::write_all(&mut f, &body).map_err(io_err(&tmp))?;
        f.sync_all().map_err(io_err(&tmp))?;
        std::fs::rename(&tmp, &meta).map_err(io_err(&meta))
    }

    /// Move session `id` into the trash. The caller has made sure no turn runs and no client
    /// has it open.
    pub fn trash(&self, id: &str, now: u64) -> Result<(), CatalogError> {
        check_id(id)?;
        let journal = self.journal(id);
        if !journal.exists() {
            return Err(CatalogError::NotFound(format!(
                "no session {id} in this workspace; `reasonix sessions` lists them"
            )));
        }
        let dest = self.trashed(id);
        if dest.exists() {
            // An older trashed session of the same id (deleted, restored, deleted again):
            // the newer delete wins.
            std::fs::remove_dir_all(&dest).map_err(io_err(&dest))?;
        }
        crate::paths::private_dir(&dest).map_err(io_err(&dest))?;
        let stamp = dest.join("trashed.json");
        let body =
            serde_json::to_vec(&Trashed { deleted: now }).map_err(|e| io_err(&stamp)(e.into()))?;
        std::fs::write(&stamp, body).map_err(io_err(&stamp))?;
        for (from, name) in [
            (self.meta(id), "meta.json"),
            (self.archive(id), "archive.jsonl"),
        ] {
            move_if_present(&from, &dest.join(name))?;
        }
        // Last: from here on the session is no longer listed.
        std::fs::rename(&journal, dest.join("journal.jsonl")).map_err(io_err(&journal))
    }

    /// Bring session `id` back from the trash.
    pub fn restore(&self, id: &str) -> Result<(), CatalogError> {
        check_id(id)?;
        let src = self.trashed(id);
        let journal = src.join("journal.jsonl");
        if !journal.exists() {
            return Err(CatalogError::NotFound(format!(
                "no session {id} in this workspace's trash; `reasonix sessions --trash` lists it"
            )));
        }
        if self.journal(id).exists() {
            return Err(CatalogError::Exists(id.to_string()));
        }
        // First: from here on the session is listed again.
        std::fs::rename(&journal, self.journal(id)).map_err(io_err(&journal))?;
        move_if_present(&src.join("meta.json"), &self.meta(id))?;
        let archive = self.archive(id);
        if src.join("archive.jsonl").exists() {
            if let Some(parent) = archive.parent() {
                crate::paths::private_dir(parent).map_err(io_err(parent))?;
            }
            move_if_present(&src.join("archive.jsonl"), &archive)?;
        }
        std::fs::remove_dir_all(&src).map_err(io_err(&src))
    }

    /// Every trashed session, most recently deleted first.
    pub fn list_trash(&self) -> Vec<TrashEntry> {
        let mut out = Vec::new();
        let Ok(rd) = std::fs::read_dir(self.trash_dir()) else {
            return out;
        };
        for e in rd.flatten() {
            let id = e.file_name().to_string_lossy().into_owned();
            if check_id(&id).is_err() {
                continue;
            }
            let dir = e.path();
            let journal = dir.join("journal.jsonl");
            if !journal.exists() {
                continue;
            }
            // A missing or unreadable stamp counts as "deleted now": kept the full period.
            let deleted = std::fs::read(dir.join("trashed.json"))
                .ok()
                .and_then(|b| serde_json::from_slice::<Trashed>(&b).ok())
                .map(|t| t.deleted)
                .unwrap_or_else(now_secs);
            out.push(TrashEntry {
                id,
                deleted,
                journal,
            });
        }
        reasonix_forward::sort::sort_by(&mut out, |a, b| {
            b.deleted.cmp(&a.deleted).then_with(|| b.id.cmp(&a.id))
        });
        out
    }

    /// The user's title of a trashed session, if any.
    pub fn trashed_title(&self, id: &str) -> Option<String> {
        Self::title_in(&self.trashed(id).join("meta.json"))
    }

    /// Remove trashed sessions for good: `id`, or every one. Returns the ids removed.
    pub fn purge(&self, id: Option<&str>) -> Result<Vec<String>, CatalogError> {
        let ids: Vec<String> = match id {
            Some(id) => {
                check_id(id)?;
                if !self.trashed(id).exists() {
                    return Err(CatalogError::NotFound(format!(
                        "no session {id} in this workspace's trash; `reasonix sessions --trash` lists it"
                    )));
                }
                vec![id.to_string()]
            }
            None => self.list_trash().into_iter().map(|e| e.id).collect(),
        };
        for id in &ids {
            let dir = self.trashed(id);
            std::fs::remove_dir_all(&dir).map_err(io_err(&dir))?;
        }
        Ok(ids)
    }

    /// Purge what has been in the trash longer than [`TRASH_KEEP_DAYS`].
    pub fn expire(&self, now: u64) -> Vec<String> {
        let keep = TRASH_KEEP_DAYS * 86_400;
        let mut out = Vec::new();
        for e in self.list_trash() {
            if now.saturating_sub(e.deleted) > keep {
                let dir = self.trashed(&e.id);
                match std::fs::remove_dir_all(&dir) {
                    Ok(()) => out.push(e.id),
                    Err(err) => tracing::warn!("cannot purge {}: {err}", dir.display()),
                }
            }
        }
        out
    }
}

fn move_if_present(from: &Path, to: &Path) -> Result<(), CatalogError> {
    match std::fs::rename(from, to) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(from)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(dir: &Path, id: &str) {
        std::fs::write(dir.join(format!("{id}.jsonl")), b"{\"seq\":1}\n").expect("journal");
    }

    #[test]
    fn titles_are_set_cleared_and_bounded() {
        let d = tempfile::tempdir().expect("tempdir");
        let c = Catalog::new(d.path());
        session(d.path(), "a-1");
        assert_eq!(c.title("a-1"), None);
        c.set_title("a-1", "  fix the build\nsecond line")
            .expect("set");
        assert_eq!(c.title("a-1").as_deref(), Some("fix the build"));
        c.set_title("a-1", &"x".repeat(200)).expect("set");
        assert_eq!(c.title("a-1").map(|t| t.chars().count()), Some(80));
        c.set_title("a-1", "").expect("clear");
        assert_eq!(c.title("a-1"), None);
        assert!(matches!(
            c.set_title("nope", "t"),
            Err(CatalogError::NotFound(_))
        ));
        assert!(matches!(
            c.set_title("../x", "t"),
            Err(CatalogError::BadId(_))
        ));
    }

    #[test]
    fn trash_restore_purge_and_expiry() {
        let d = tempfile::tempdir().expect("tempdir");
        let c = Catalog::new(d.path());
        session(d.path(), "a-1");
        session(d.path(), "b-2");
        c.set_title("a-1", "mine").expect("title");
        std::fs::create_dir_all(d.path().join("archive")).expect("archive dir");
        std::fs::write(d.path().join("archive/a-1.jsonl"), b"old\n").expect("archive");
        c.trash("a-1", 1_000).expect("trash");
        assert!(!d.path().join("a-1.jsonl").exists());
        assert!(!d.path().join("a-1.meta.json").exists());
        assert!(!d.path().join("archive/a-1.jsonl").exists());
        let t = c.list_trash();
        assert_eq!(t.len(), 1);
        assert_eq!((t[0].id.as_str(), t[0].deleted), ("a-1", 1_000));
        assert_eq!(c.trashed_title("a-1").as_deref(), Some("mine"));
        c.restore("a-1").expect("restore");
        assert_eq!(c.title("a-1").as_deref(), Some("mine"));
        assert_eq!(
            std::fs::read(d.path().join("archive/a-1.jsonl")).expect("archive back"),
            b"old\n"
        );
        assert!(c.list_trash().is_empty());
        // Restore over an existing id is refused.
        c.trash("a-1", 1_000).expect("trash again");
        session(d.path(), "a-1");
        assert!(matches!(c.restore("a-1"), Err(CatalogError::Exists(_))));
        std::fs::remove_file(d.path().join("a-1.jsonl")).expect("rm");
        // Expiry keeps what is younger than the keep period.
        let day = 86_400;
        c.trash("b-2", 1_000 + 5 * day).expect("trash b");
        assert_eq!(c.expire(1_000 + TRASH_KEEP_DAYS * day + 1), vec!["a-1"]);
        assert_eq!(c.list_trash().len(), 1);
        assert_eq!(c.purge(None).expect("purge"), vec!["b-2"]);
        assert!(matches!(
            c.purge(Some("b-2")),
            Err(CatalogError::NotFound(_))
        ));
        assert!(matches!(c.restore("b-2"), Err(CatalogError::NotFound(_))));
    }
}
