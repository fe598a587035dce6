//! The shadow repository: a bare git repository under the host state directory whose work
//! tree is the user's workspace. It snapshots the whole workspace (so changes made by bash are
//! covered too) without ever touching the user's own `.git`.
//!
//! Isolation: every command runs with `GIT_DIR`, `GIT_WORK_TREE` and `GIT_INDEX_FILE` pointing
//! at our files, every inherited `GIT_*` variable removed, system and global config ignored,
//! and `-c` options that switch off hooks, signing, line-ending conversion, filters and
//! fsmonitor. `$GIT_DIR/info/attributes` unsets `text`/`filter`/`ident`/`working-tree-encoding`
//! for every path, so a blob holds the exact bytes of the file whatever `.gitattributes` says.
//!
//! Snapshots are trees, not commits: a tree per checkpoint is kept alive by a ref
//! `refs/reasonix/<id>`, so dropping a checkpoint is dropping its ref (no parent chain keeps old
//! content alive). The persistent shadow index makes `git add -A` incremental: unchanged files
//! are recognised by their cached stat data and not read again.

use std::collections::{BTreeSet, HashSet};
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::CheckpointError;

/// `-c` options given to every shadow git command. They win over any config file.
const CONFIG: &[&str] = &[
    "core.bare=false",
    "core.hooksPath=/dev/null",
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.eol=lf",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.splitIndex=false",
    "core.symlinks=true",
    "core.fileMode=true",
    "core.ignoreCase=false",
    "core.precomposeUnicode=false",
    "core.quotePath=false",
    "core.logAllRefUpdates=false",
    "core.attributesFile=/dev/null",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "advice.addEmbeddedRepo=false",
    "safe.directory=*",
    "user.name=Reasonix checkpoints",
    "user.email=checkpoints@reasonix.invalid",
];

/// Exact bytes in, exact bytes out, whatever the workspace's `.gitattributes` asks for.
const ATTRIBUTES: &str = "* -text -filter -ident -working-tree-encoding -diff -merge\n";

/// Header of `$GIT_DIR/info/exclude`; oversize files are appended below it.
const EXCLUDE_HEADER: &str =
    "# Written by reasonix checkpoints: files over the per-file limit (not snapshotted).\n";

/// One changed path between two trees (`git diff-tree -r`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DiffEntry {
    /// Mode in the `from` tree (`0` when absent).
    pub old_mode: u32,
    /// Mode in the `to` tree (`0` when absent).
    pub new_mode: u32,
    /// Blob id in the `from` tree.
    pub old_sha: String,
    /// Blob id in the `to` tree.
    pub new_sha: String,
    /// Workspace-relative path, raw bytes.
    pub path: Vec<u8>,
}

/// What a snapshot produced.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    /// Tree id of the whole workspace (minus ignored and oversize files).
    pub tree: String,
    /// Files left out because they exceed the per-file limit: (path, size).
    pub oversize: Vec<(String, u64)>,
    /// Files git could not read (reported, not fatal).
    pub unreadable: Vec<String>,
}

/// Handle on the shadow repository of one workspace.
#[derive(Debug, Clone)]
pub(crate) struct Shadow {
    git: PathBuf,
    git_dir: PathBuf,
    index: PathBuf,
    workspace: PathBuf,
    excludes_file: PathBuf,
}

impl Shadow {
    /// Opens (creating when missing) the shadow repository at `git_dir`.
    pub fn open(git: &Path, git_dir: &Path, workspace: &Path) -> Result<Shadow, CheckpointError> {
        // The user's own per-repository excludes are honoured by reading them, never writing.
        let user_exclude = workspace.join(".git").join("info").join("exclude");
        let excludes_file = if workspace.join(".git").is_dir() && user_exclude.is_file() {
            user_exclude
        } else {
            PathBuf::from("/dev/null")
        };
        let shadow = Shadow {
            git: git.to_path_buf(),
            git_dir: git_dir.to_path_buf(),
            index: git_dir.join("index"),
            workspace: workspace.to_path_buf(),
            excludes_file,
        };
        if !git_dir.join("HEAD").is_file() {
            // `--template=` (empty): no sample hooks, no description file.
            let mut cmd = Command::new(&shadow.git);
            scrub_env(&mut cmd);
            cmd.arg("init")
                .arg("--bare")
                .arg("--quiet")
                .arg("--template=")
                .arg(git_dir)
                .current_dir(workspace);
            run_checked(cmd, "git init --bare", None)?;
        }
        let info = git_dir.join("info");
        std::fs::create_dir_all(&info).map_err(|e| CheckpointError::io(&info, e))?;
        write_if_changed(&info.join("attributes"), ATTRIBUTES.as_bytes())?;
        let exclude = info.join("exclude");
        if !exclude.is_file() {
            write_if_changed(&exclude, EXCLUDE_HEADER.as_bytes())?;
        }
        Ok(shadow)
    }

    /// A git command with the isolated environment, run in the workspace.
    fn cmd(&self) -> Command {
        let mut cmd = Command::new(&self.git);
        scrub_env(&mut cmd);
        cmd.env("GIT_DIR", &self.git_dir)
            .env("GIT_WORK_TREE", &self.workspace)
            .env("GIT_INDEX_FILE", &self.index)
            .current_dir(&self.workspace);
        for c in CONFIG {
            cmd.arg("-c").arg(c);
        }
        let mut ex = std::ffi::OsString::from("core.excludesFile=");
        ex.push(self.excludes_file.as_os_str());
        cmd.arg("-c").arg(ex);
        cmd
    }

    fn run(&self, args: &[&str], stdin: Option<&[u8]>) -> Result<Vec<u8>, CheckpointError> {
        let mut cmd = self.cmd();
        cmd.args(args);
        run_checked(cmd, &format!("git {}", args.join(" ")), stdin)
    }

    /// Snapshots the workspace into the shadow index and returns its tree. Files over
    /// `max_file` bytes are excluded (and dropped from the index if they were in it);
    /// `prev_oversize` are the paths excluded last time, re-checked because they are invisible
    /// to `ls-files` while excluded.
    pub fn snapshot(
        &self,
        max_file: u64,
        prev_oversize: &BTreeSet<String>,
    ) -> Result<Snapshot, CheckpointError> {
        // Candidates: untracked-not-ignored and modified files (stat-cache cheap), plus the
        // ones we excluded before.
        let listed = self.run(&["ls-files", "-z", "-o", "-m", "--exclude-standard"], None)?;
        let mut candidates: BTreeSet<Vec<u8>> = split_z(&listed).map(<[u8]>::to_vec).collect();
        candidates.extend(prev_oversize.iter().map(|p| p.as_bytes().to_vec()));
        let mut oversize = Vec::new();
        let mut oversize_raw = Vec::new();
        for rel in &candidates {
            let full = self.workspace.join(OsStr::from_bytes(rel));
            if let Ok(meta) = std::fs::symlink_metadata(&full) {
                if meta.is_file() && meta.len() > max_file && !rel.contains(&b'\n') {
                    oversize.push((String::from_utf8_lossy(rel).into_owned(), meta.len()));
                    oversize_raw.push(rel.clone());
                }
            }
        }
        let mut exclude = EXCLUDE_HEADER.as_bytes().to_vec();
        for rel in &oversize_raw {
            exclude.extend_from_slice(&exclude_pattern(rel));
            exclude.push(b'\n');
        }
        write_if_changed(&self.git_dir.join("info").join("exclude"), &exclude)?;
        if !oversize_raw.is_empty() {
            let mut input = Vec::new();
            for rel in &oversize_raw {
                input.extend_from_slice(rel);
                input.push(0);
            }
            self.run(
                &["update-index", "-z", "--force-remove", "--stdin"],
                Some(&input),
            )?;
        }
        // `--ignore-errors`: a file we cannot read must not cost the whole snapshot.
        let mut cmd = self.cmd();
        cmd.args(["add", "-A", "--ignore-errors", "--", "."]);
        let out = run_raw(cmd, "git add -A", None)?;
        let mut unreadable = Vec::new();
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            for line in stderr.lines() {
                // e.g. `error: open("secret.txt"): Permission denied`
                if let Some(rest) = line.strip_prefix("error: open(\"") {
                    if let Some(end) = rest.find("\")") {
                        unreadable.push(rest[..end].to_string());
                        continue;
                    }
                }
            }
            if unreadable.is_empty() {
                return Err(CheckpointError::Git {
                    command: "git add -A".into(),
                    detail: stderr.trim().to_string(),
                });
            }
        }
        let tree = self.run(&["write-tree"], None)?;
        Ok(Snapshot {
            tree: String::from_utf8_lossy(&tree).trim().to_string(),
            oversize,
            unreadable,
        })
    }

    /// Keeps `tree` alive under `refs/reasonix/<id>`.
    pub fn set_ref(&self, id: &str, tree: &str) -> Result<(), CheckpointError> {
        self.run(&["update-ref", &format!("refs/reasonix/{id}"), tree], None)
            .map(|_| ())
    }

    /// Drops the ref of checkpoint `id` (its objects go at the next gc unless shared).
    pub fn delete_ref(&self, id: &str) -> Result<(), CheckpointError> {
        self.run(&["update-ref", "-d", &format!("refs/reasonix/{id}")], None)
            .map(|_| ())
    }

    /// Changes from tree `from` to tree `to`, no rename detection.
    pub fn diff(&self, from: &str, to: &str) -> Result<Vec<DiffEntry>, CheckpointError> {
        let out = self.run(&["diff-tree", "-r", "-z", "--no-renames", from, to], None)?;
        let mut parts = split_z(&out);
        let mut entries = Vec::new();
        while let Some(header) = parts.next() {
            let header = String::from_utf8_lossy(header);
            let header = header.trim_start_matches(':');
            let fields: Vec<&str> = header.split(' ').collect();
            let path = parts.next().ok_or_else(|| CheckpointError::Git {
                command: "git diff-tree".into(),
                detail: "truncated output".into(),
            })?;
            if fields.len() < 5 {
                return Err(CheckpointError::Git {
                    command: "git diff-tree".into(),
                    detail: format!("unexpected line {header:?}"),
                });
            }
            entries.push(DiffEntry {
                old_mode: u32::from_str_radix(fields[0], 8).unwrap_or(0),
                new_mode: u32::from_str_radix(fields[1], 8).unwrap_or(0),
                old_sha: fields[2].to_string(),
                new_sha: fields[3].to_string(),
                path: path.to_vec(),
            });
        }
        Ok(entries)
    }

    /// Every path in `tree`.
    pub fn tree_paths(&self, tree: &str) -> Result<HashSet<Vec<u8>>, CheckpointError> {
        let out = self.run(
            &["ls-tree", "-r", "-z", "--name-only", "--full-tree", tree],
            None,
        )?;
        Ok(split_z(&out).map(<[u8]>::to_vec).collect())
    }

    /// Which of `paths` match an ignore pattern (`.gitignore`, the user's info/exclude).
    pub fn ignored(&self, paths: &[Vec<u8>]) -> Result<HashSet<Vec<u8>>, CheckpointError> {
        if paths.is_empty() {
            return Ok(HashSet::new());
        }
        let mut input = Vec::new();
        for p in paths {
            input.extend_from_slice(p);
            input.push(0);
        }
        let mut cmd = self.cmd();
        cmd.args(["check-ignore", "--no-index", "-z", "--stdin"]);
        let out = run_raw(cmd, "git check-ignore", Some(&input))?;
        // Exit 1 means "none ignored"; anything else non-zero is a real failure.
        match out.status.code() {
            Some(0) | Some(1) => Ok(split_z(&out.stdout).map(<[u8]>::to_vec).collect()),
            _ => Err(CheckpointError::Git {
                command: "git check-ignore".into(),
                detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            }),
        }
    }

    /// Git blob ids of files on disk, hashed as-is (no filters).
    pub fn hash_files(&self, paths: &[PathBuf]) -> Result<Vec<String>, CheckpointError> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let mut input = Vec::new();
        for p in paths {
            input.extend_from_slice(p.as_os_str().as_bytes());
            input.push(b'\n');
        }
        let out = self.run(
            &["hash-object", "--no-filters", "--stdin-paths"],
            Some(&input),
        )?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .map(str::to_string)
            .collect())
    }

    /// Writes each blob of `shas` to `dest(i)` (one `git cat-file --batch`), returning sizes.
    pub fn read_blobs(&self, shas: &[String], dests: &[PathBuf]) -> Result<(), CheckpointError> {
        if shas.is_empty() {
            return Ok(());
        }
        let mut cmd = self.cmd();
        cmd.args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| CheckpointError::io(&self.git, e))?;
        let mut input = Vec::new();
        for s in shas {
            input.extend_from_slice(s.as_bytes());
            input.push(b'\n');
        }
        let stdin = child.stdin.take();
        // A writer thread: the output pipe could fill before all ids are written.
        let writer = std::thread::spawn(move || {
            if let Some(mut w) = stdin {
                let _ = w.write_all(&input);
            }
        });
        let result = (|| {
            let stdout = child.stdout.take().ok_or_else(|| CheckpointError::Git {
                command: "git cat-file --batch".into(),
                detail: "no stdout".into(),
            })?;
            let mut reader = BufReader::new(stdout);
            for (sha, dest) in shas.iter().zip(dests) {
                let mut header = String::new();
                reader
                    .read_line(&mut header)
                    .map_err(|e| CheckpointError::io(dest, e))?;
                let fields: Vec<&str> = header.trim_end().split(' ').collect();
                if fields.len() != 3 || fields[0] != sha.as_str() {
                    return Err(CheckpointError::Git {
                        command: "git cat-file --batch".into(),
                        detail: format!("object {sha} is missing from the shadow repository"),
                    });
                }
                let size: u64 = fields[2].parse().unwrap_or(0);
                let mut file =
                    std::fs::File::create(dest).map_err(|e| CheckpointError::io(dest, e))?;
                let copied = std::io::copy(&mut (&mut reader).take(size), &mut file)
                    .map_err(|e| CheckpointError::io(dest, e))?;
                if copied != size {
                    return Err(CheckpointError::Git {
                        command: "git cat-file --batch".into(),
                        detail: format!("short read of object {sha}"),
                    });
                }
                let mut nl = [0u8; 1];
                reader
                    .read_exact(&mut nl)
                    .map_err(|e| CheckpointError::io(dest, e))?;
            }
            Ok(())
        })();
        let _ = writer.join();
        if result.is_err() {
            let _ = child.kill();
        }
        let _ = child.wait();
        result
    }

    /// Apparent size of the object store in bytes.
    pub fn store_bytes(&self) -> u64 {
        dir_bytes(&self.git_dir.join("objects"))
    }

    /// Number of loose objects and of packs.
    fn object_counts(&self) -> (usize, usize) {
        let objects = self.git_dir.join("objects");
        let mut loose = 0;
        if let Ok(rd) = std::fs::read_dir(&objects) {
            for e in rd.flatten() {
                let name = e.file_name();
                if name.len() == 2 {
                    loose += std::fs::read_dir(e.path()).map(|d| d.count()).unwrap_or(0);
                }
            }
        }
        let packs = std::fs::read_dir(objects.join("pack"))
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().as_bytes().ends_with(b".pack"))
                    .count()
            })
            .unwrap_or(0);
        (loose, packs)
    }

    /// Keeps the store compact: packs loose objects when there are many, merges packs when
    /// there are many. Loose objects cost a filesystem block each.
    pub fn maintain(&self) -> Result<(), CheckpointError> {
        let (loose, packs) = self.object_counts();
        if packs > 16 {
            self.run(&["repack", "-a", "-d", "-q"], None)?;
        } else if loose > 256 {
            self.run(&["repack", "-d", "-q"], None)?;
        }
        Ok(())
    }

    /// Drops every object no ref (or the shadow index) reaches.
    pub fn gc(&self) -> Result<(), CheckpointError> {
        self.run(&["repack", "-a", "-d", "-q"], None)?;
        self.run(&["prune", "--expire=now"], None)?;
        Ok(())
    }

    /// Forgets the shadow index (the next snapshot re-reads every file).
    pub fn reset_index(&self) {
        let _ = std::fs::remove_file(&self.index);
    }
}

/// Version line of `git` (`git version 2.47.3`), or `None` when it cannot run.
pub(crate) fn git_version(git: &Path) -> Option<String> {
    let mut cmd = Command::new(git);
    scrub_env(&mut cmd);
    cmd.arg("--version");
    let out = cmd.stderr(Stdio::null()).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `git` on `$PATH`, as an absolute path (resolved once, so a later PATH change is moot).
pub(crate) fn find_git() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("git"))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .map(|m| {
                    m.is_file()
                        && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
                })
                .unwrap_or(false)
        })
}

/// Removes inherited `GIT_*` variables (a hook or a parent git could have set GIT_DIR,
/// GIT_INDEX_FILE, GIT_OBJECT_DIRECTORY...) and the user's config files.
fn scrub_env(cmd: &mut Command) {
    for (k, _) in std::env::vars_os() {
        if k.as_bytes().starts_with(b"GIT_") {
            cmd.env_remove(&k);
        }
    }
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_ATTR_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .env("LC_ALL", "C");
}

fn run_raw(
    mut cmd: Command,
    what: &str,
    stdin: Option<&[u8]>,
) -> Result<std::process::Output, CheckpointError> {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| CheckpointError::Git {
        command: what.to_string(),
        detail: format!("cannot start git: {e}"),
    })?;
    let writer = match (stdin, child.stdin.take()) {
        (Some(data), Some(mut pipe)) => {
            let data = data.to_vec();
            Some(std::thread::spawn(move || {
                let _ = pipe.write_all(&data);
            }))
        }
        _ => None,
    };
    let out = child.wait_with_output().map_err(|e| CheckpointError::Git {
        command: what.to_string(),
        detail: e.to_string(),
    })?;
    if let Some(w) = writer {
        let _ = w.join();
    }
    Ok(out)
}

fn run_checked(cmd: Command, what: &str, stdin: Option<&[u8]>) -> Result<Vec<u8>, CheckpointError> {
    let out = run_raw(cmd, what, stdin)?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(CheckpointError::Git {
            command: what.to_string(),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// NUL-separated fields, the empty tail dropped.
pub(crate) fn split_z(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    data.split(|b| *b == 0).filter(|s| !s.is_empty())
}

/// An anchored gitignore pattern matching exactly `rel`.
fn exclude_pattern(rel: &[u8]) -> Vec<u8> {
    let mut out = vec![b'/'];
    for (i, &b) in rel.iter().enumerate() {
        let trailing_space = b == b' ' && rel[i + 1..].iter().all(|c| *c == b' ');
        if matches!(b, b'\\' | b'*' | b'?' | b'[' | b']' | b'!' | b'#') || trailing_space {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

fn write_if_changed(path: &Path, data: &[u8]) -> Result<(), CheckpointError> {
    if std::fs::read(path).map(|d| d == data).unwrap_or(false) {
        return Ok(());
    }
    std::fs::write(path, data).map_err(|e| CheckpointError::io(path, e))
}

/// Apparent size of every file under `dir`.
pub(crate) fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(_) => total += e.metadata().map(|m| m.len()).unwrap_or(0),
                Err(_) => {}
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclude_patterns_are_literal_and_anchored() {
        assert_eq!(exclude_pattern(b"a/b.bin"), b"/a/b.bin".to_vec());
        assert_eq!(
            exclude_pattern(b"x[1]*?.log"),
            b"/x\\[1\\]\\*\\?.log".to_vec()
        );
        assert_eq!(exclude_pattern(b"#n !x "), b"/\\#n \\!x\\ ".to_vec());
    }
}
