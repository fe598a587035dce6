//! A directory of fact files: `<dir>/<id>.md` for the active facts, `<dir>/revisions/` for
//! superseded values of a subject, `<dir>/archive/` for forgotten facts (recoverable).
//!
//! Every write goes to a temporary file in the same directory and is then linked or renamed
//! into place, so a reader sees the old file or the new one, never a torn one; a new fact is
//! linked create-only, so two sessions that write at once both land (or one learns the id is
//! taken). Loading skips, with a notice naming the file, whatever is not a sound fact:
//! symlinks, non-files, huge or binary files, malformed front matter, unsafe or duplicate ids.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::fact::{Fact, Scope, MAX_FILE_BYTES};

/// Where facts read from a directory come from, which decides what they may claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A store of this scope: facts must carry that scope.
    Store(Scope),
    /// Facts exported into a repository (`.reasonix/memory/`): read as project facts only,
    /// never global, never pinned.
    Export,
}

/// Facts read from somewhere, and a notice per file that was skipped.
#[derive(Debug, Default, Clone)]
pub struct Loaded {
    /// The sound facts, sorted by id.
    pub facts: Vec<Fact>,
    /// `skipped <file>: <why>` for every refused file.
    pub notices: Vec<String>,
}

/// Accepts one fact file (`name` is how notices name it) under `origin`'s rules.
pub fn accept(name: &str, bytes: &[u8], origin: Origin) -> Result<Fact, String> {
    let mut f = Fact::parse(bytes).map_err(|e| format!("skipped memory file {name}: {e}"))?;
    let stem = Path::new(name)
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".md"))
        .unwrap_or("");
    if stem != f.id {
        return Err(format!(
            "skipped memory file {name}: its id {:?} does not match the file name (a fact lives in <id>.md)",
            f.id
        ));
    }
    match origin {
        Origin::Store(scope) if f.scope != scope => {
            return Err(format!(
                "skipped memory file {name}: it says scope {} but lies in the {} store",
                f.scope.as_str(),
                scope.as_str()
            ))
        }
        Origin::Store(_) => {}
        Origin::Export => {
            f.scope = Scope::Project;
            f.pinned = false;
        }
    }
    Ok(f)
}

/// Reads named fact files (as sent over the link), skipping bad and duplicate ones.
pub fn load_named(files: &[(String, Vec<u8>)], origin: Origin) -> Loaded {
    let mut out = Loaded::default();
    for (name, bytes) in files {
        match accept(name, bytes, origin) {
            Ok(f) => out.facts.push(f),
            Err(e) => out.notices.push(e),
        }
    }
    dedup(&mut out);
    out
}

fn dedup(out: &mut Loaded) {
    crate::sort::sort_by(&mut out.facts, |a, b| a.id.cmp(&b.id));
    let mut i = 1;
    while i < out.facts.len() {
        if out.facts[i].id == out.facts[i - 1].id {
            let f = out.facts.remove(i);
            out.notices.push(format!(
                "skipped memory fact {}: its id is used twice",
                f.id
            ));
        } else {
            i += 1;
        }
    }
}

/// Reads `dir`'s fact files (a missing directory is an empty store).
pub fn load_dir(dir: &Path, origin: Origin) -> Loaded {
    let mut out = Loaded::default();
    let Ok(rd) = fs::read_dir(dir) else {
        return out;
    };
    let mut names: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    crate::sort::sort(&mut names);
    for path in names {
        let shown = path.display().to_string();
        if path.extension().and_then(|e| e.to_str()) != Some("md") {
            continue;
        }
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            out.notices.push(format!(
                "skipped memory file {shown}: it is a symlink (facts must be plain files; replace it with a copy)"
            ));
            continue;
        }
        if !meta.is_file() {
            out.notices.push(format!(
                "skipped memory file {shown}: it is not a regular file"
            ));
            continue;
        }
        if meta.len() as usize > MAX_FILE_BYTES {
            out.notices.push(format!(
                "skipped memory file {shown}: it is {} bytes; fact files are at most {MAX_FILE_BYTES} bytes",
                meta.len()
            ));
            continue;
        }
        match fs::read(&path) {
            Ok(bytes) => match accept(&shown, &bytes, origin) {
                Ok(f) => out.facts.push(f),
                Err(e) => out.notices.push(e),
            },
            Err(e) => out.notices.push(format!(
                "skipped memory file {shown}: it cannot be read ({e})"
            )),
        }
    }
    dedup(&mut out);
    out
}

/// Errors of store writes.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The id is taken (create-only write).
    #[error("a fact with id {0} already exists")]
    Exists(String),
    /// No such fact.
    #[error("no fact with id {0} in {1}")]
    Missing(String, String),
    /// The filesystem refused.
    #[error("memory store {path}: {source}")]
    Io {
        /// The path concerned.
        path: String,
        /// The cause.
        source: io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// One store directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    scope: Scope,
}

impl Store {
    /// The store in `dir` holding `scope` facts (created on first write, mode 0700).
    pub fn new(dir: impl Into<PathBuf>, scope: Scope) -> Store {
        Store {
            dir: dir.into(),
            scope,
        }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The scope of the facts it holds.
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// The active facts.
    pub fn load(&self) -> Loaded {
        load_dir(&self.dir, Origin::Store(self.scope))
    }

    /// The forgotten facts (recoverable with [`Store::restore`]).
    pub fn archived(&self) -> Loaded {
        load_dir(&self.dir.join("archive"), Origin::Store(self.scope))
    }

    /// Earlier revisions of `id`, oldest first.
    pub fn revisions(&self, id: &str) -> Vec<Fact> {
        let dir = self.dir.join("revisions");
        let mut out: Vec<Fact> = fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with(&format!("{id}.r")) && n.ends_with(".md"))
            })
            .filter_map(|e| fs::read(e.path()).ok())
            .filter_map(|b| Fact::parse(&b).ok())
            .filter(|f| f.id == id)
            .collect();
        crate::sort::sort_by_key(&mut out, |f| f.revision);
        out
    }

    fn ensure(&self, dir: &Path) -> Result<(), StoreError> {
        crate::private_fs::create_dir_all(dir).map_err(io_err(dir))?;
        Ok(())
    }

    /// Writes `text` to a fresh temporary file in `dir`, synced (mode 0600).
    fn temp(&self, dir: &Path, text: &str) -> Result<PathBuf, StoreError> {
        self.ensure(dir)?;
        let tmp = dir.join(format!(".tmp-{:016x}", rand::random::<u64>()));
        let mut f = crate::private_fs::open_options()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(io_err(&tmp))?;
        f.write_all(text.as_bytes()).map_err(io_err(&tmp))?;
        f.sync_all().map_err(io_err(&tmp))?;
        Ok(tmp)
    }

    fn path_of(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.md"))
    }

    /// Writes a new fact; fails with [`StoreError::Exists`] when its id is taken.
    pub fn create(&self, fact: &Fact) -> Result<PathBuf, StoreError> {
        let tmp = self.temp(&self.dir, &fact.to_markdown())?;
        let dest = self.path_of(&fact.id);
        let linked = fs::hard_link(&tmp, &dest);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => {
                sync_dir(&self.dir);
                Ok(dest)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                Err(StoreError::Exists(fact.id.clone()))
            }
            Err(e) => Err(io_err(&dest)(e)),
        }
    }

    /// Replaces the active fact `fact.id` with `fact` (its next revision); the old file is
    /// kept in `revisions/<id>.r<N>.md`.
    pub fn supersede(&self, fact: &Fact) -> Result<PathBuf, StoreError> {
        let dest = self.path_of(&fact.id);
        let old = fs::read(&dest)
            .map_err(|_| StoreError::Missing(fact.id.clone(), self.dir.display().to_string()))?;
        let old_rev = Fact::parse(&old).map(|f| f.revision).unwrap_or(0);
        let revs = self.dir.join("revisions");
        let tmp_old = self.temp(&revs, &String::from_utf8_lossy(&old))?;
        let rev_path = revs.join(format!("{}.r{old_rev}.md", fact.id));
        fs::rename(&tmp_old, &rev_path).map_err(io_err(&rev_path))?;
        let tmp = self.temp(&self.dir, &fact.to_markdown())?;
        fs::rename(&tmp, &dest).map_err(io_err(&dest))?;
        sync_dir(&self.dir);
        Ok(dest)
    }

    /// Moves fact `id` to the archive; returns the archived file.
    pub fn forget(&self, id: &str) -> Result<PathBuf, StoreError> {
        let src = self.path_of(id);
        if !super::fact::valid_id(id) || fs::symlink_metadata(&src).is_err() {
            return Err(StoreError::Missing(
                id.into(),
                self.dir.display().to_string(),
            ));
        }
        let archive = self.dir.join("archive");
        self.ensure(&archive)?;
        let dest = archive.join(format!("{id}.md"));
        fs::rename(&src, &dest).map_err(io_err(&dest))?;
        sync_dir(&self.dir);
        Ok(dest)
    }

    /// Brings an archived fact back; fails when an active fact has its id.
    pub fn restore(&self, id: &str) -> Result<PathBuf, StoreError> {
        let src = self.dir.join("archive").join(format!("{id}.md"));
        if !super::fact::valid_id(id) || fs::symlink_metadata(&src).is_err() {
            return Err(StoreError::Missing(
                id.into(),
                self.dir.join("archive").display().to_string(),
            ));
        }
        let dest = self.path_of(id);
        fs::hard_link(&src, &dest).map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                StoreError::Exists(id.into())
            } else {
                io_err(&dest)(e)
            }
        })?;
        let _ = fs::remove_file(&src);
        sync_dir(&self.dir);
        Ok(dest)
    }
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::memory::fact::FactType;

    fn fact(id: &str, body: &str) -> Fact {
        Fact {
            id: id.into(),
            revision: 1,
            kind: FactType::Project,
            scope: Scope::Project,
            keywords: vec![],
            subject: None,
            created: "2026-12-05T00:00:00Z".into(),
            updated: "2026-12-05T00:00:00Z".into(),
            session: None,
            pinned: false,
            expires: None,
            body: body.into(),
        }
    }

    #[test]
    fn create_supersede_forget_restore() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::new(dir.path().join("m"), Scope::Project);
        s.create(&fact("a", "one")).unwrap();
        assert!(matches!(
            s.create(&fact("a", "two")),
            Err(StoreError::Exists(_))
        ));
        let mut next = fact("a", "one, revised");
        next.revision = 2;
        s.supersede(&next).unwrap();
        assert_eq!(s.load().facts, vec![next.clone()]);
        assert_eq!(s.revisions("a"), vec![fact("a", "one")]);
        s.forget("a").unwrap();
        assert!(s.load().facts.is_empty());
        assert_eq!(s.archived().facts, vec![next.clone()]);
        s.restore("a").unwrap();
        assert_eq!(s.load().facts, vec![next]);
        assert!(s.forget("../x").is_err());
        // No temporary files are left behind.
        let left: Vec<_> = fs::read_dir(s.dir())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(".tmp"))
            .collect();
        assert!(left.is_empty());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(s.dir().join("a.md"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn hostile_files_are_skipped_by_name_and_the_rest_load() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("good.md"), fact("good", "fine").to_markdown()).unwrap();
        fs::write(d.join("bad.md"), "no front matter").unwrap();
        fs::write(d.join("bin.md"), b"---\x00\x01").unwrap();
        fs::write(d.join("huge.md"), vec![b'x'; MAX_FILE_BYTES + 10]).unwrap();
        fs::write(
            d.join("other.md"),
            fact("good2", "id differs").to_markdown(),
        )
        .unwrap();
        fs::write(d.join("secret.txt"), "ignored, not .md").unwrap();
        fs::write(dir.path().join("outside"), fact("link", "x").to_markdown()).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(d.join("outside"), d.join("link.md")).unwrap();
        let mut global = fact("glob", "claims global");
        global.scope = Scope::Global;
        fs::write(d.join("glob.md"), global.to_markdown()).unwrap();
        let l = load_dir(d, Origin::Store(Scope::Project));
        assert_eq!(
            l.facts.iter().map(|f| f.id.as_str()).collect::<Vec<_>>(),
            ["good"]
        );
        for name in [
            "bad.md", "bin.md", "huge.md", "other.md", "link.md", "glob.md",
        ] {
            assert!(
                l.notices.iter().any(|n| n.contains(name)),
                "{name} not named in {:?}",
                l.notices
            );
        }
        // An exported global, pinned fact is read as an unpinned project fact.
        let mut pinned = global.clone();
        pinned.pinned = true;
        let e = load_named(
            &[
                ("glob.md".into(), pinned.to_markdown().into_bytes()),
                ("glob.md".into(), pinned.to_markdown().into_bytes()),
            ],
            Origin::Export,
        );
        assert_eq!(e.facts.len(), 1);
        assert_eq!(e.facts[0].scope, Scope::Project);
        assert!(!e.facts[0].pinned);
        assert!(e.notices[0].contains("used twice"), "{:?}", e.notices);
    }

    #[test]
    fn concurrent_creates_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::new(dir.path(), Scope::Project);
        std::thread::scope(|sc| {
            for t in 0..8 {
                let s = &s;
                sc.spawn(move || {
                    for i in 0..10 {
                        s.create(&fact(&format!("t{t}-{i}"), "x")).unwrap();
                    }
                });
            }
        });
        assert_eq!(s.load().facts.len(), 80);
    }
}
