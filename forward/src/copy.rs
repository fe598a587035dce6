//! File copy between laptop and host over one channel (issue #36 §3): `reasonix cp`,
//! `/upload`, `/download`.
//!
//! The laptop opens a copy channel ([`crate::channel::ChannelOpen::Copy`]) naming the host
//! path, the direction and the laptop's policy (the host tightens it with the project file and
//! checks every path against it, as it does for the write tools). Then one side sends and the
//! other receives; both are [`send`] and [`receive`] here, so the two directions are the same
//! code. Control messages are JSON [`ChannelData::Line`]s ([`Ctl`]), file content is
//! [`ChannelData::Bytes`]:
//!
//! 1. the sender lists what it sends: [`Ctl::Root`], then every [`Ctl::Dir`], [`Ctl::File`]
//!    (size, mode) and [`Ctl::Skip`] (symlinks and special files are neither followed nor
//!    copied), then [`Ctl::Listed`];
//! 2. the receiver checks every path (the host: confinement, deny rules, `.git`; refusing
//!    cancels the channel with the reason before a byte of content moves) and answers
//!    [`Ctl::Resume`]: the partial files (`.NAME.reasonix-part`) a previous attempt left,
//!    each with its length and the SHA-256 of that prefix;
//! 3. per file, the sender checks the prefix against its own bytes and starts there when it
//!    matches ([`Ctl::Data`] says where), sends the rest as bytes pieces, runs of zeros as
//!    [`Ctl::Hole`] (written as holes, never sent), and [`Ctl::Done`] with the SHA-256 of the
//!    whole file; the receiver compares it with its own hash of what it wrote, then renames the
//!    partial file into place;
//! 4. [`Ctl::Finished`], answered by [`Ctl::Ok`]: the sender reports success only once the
//!    receiver has checked and placed everything.
//!
//! A link drop in the middle costs nothing: channel data rides the link, which replays what
//! the other side had not received (at most one window is in flight). A copy that ended
//! (interrupted, killed, link expired) leaves its partial file, and running it again resumes
//! from it.

mod recv;

pub use recv::receive;

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use crate::channel::{Channel, ChannelData, ChannelEnd, ChannelReceiver, ChannelSender};
use crate::policy::SessionPolicy;
use crate::proto::PtyBytes;

/// Receive window of a copy channel (either side): bulk data moves at most this much per
/// round trip, like a port channel's.
pub const COPY_WINDOW: u32 = 4 * 1024 * 1024;

/// Bytes per content piece.
pub const COPY_PIECE: usize = 128 * 1024;

/// Runs of zeros at least this long (aligned in the piece) go as holes.
const HOLE_BLOCK: usize = 4096;

/// Suffix of a partial file (`.NAME.reasonix-part` beside the target).
pub const PART_SUFFIX: &str = ".reasonix-part";

/// Which way the bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CopyDir {
    /// Laptop to host: the laptop sends, the daemon receives into `path`.
    Upload,
    /// Host to laptop: the daemon sends `path`, the laptop receives.
    Download,
}

/// What a copy channel opens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyOpen {
    /// Which way.
    pub dir: CopyDir,
    /// The host path: relative to the workspace, or absolute. For an upload, the
    /// destination (an existing directory, or one ending in `/`, receives the source under
    /// its own name); for a download, the source.
    pub path: String,
    /// Copy directories (`-r`).
    #[serde(default)]
    pub recursive: bool,
    /// The laptop's policy; the host tightens it with the workspace's project file, as for a
    /// session, and checks every path against it.
    #[serde(default)]
    pub policy: SessionPolicy,
}

/// The daemon's answer to a [`CopyOpen`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyAccepted {
    /// The host path, absolute (what the user sees in messages).
    pub path: String,
}

crate::proto_serde::tagged_enum! {
    CtlDe, "t";
    /// A control message on a copy channel (a JSON line).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize)]
    #[serde(tag = "t", rename_all = "snake_case")]
    pub enum Ctl {
        /// What is sent: its name and whether it is a directory.
        Root {
            /// The source's own name (what a destination directory receives it as).
            name: String,
            /// True for a directory (`-r`).
            dir: bool,
        },
        /// A directory below the root (`/`-separated, relative).
        Dir {
            /// Path below the root.
            p: String,
            /// Permission bits.
            mode: u32,
        },
        /// A regular file (`p` empty: the root itself is the file).
        File {
            /// Path below the root.
            p: String,
            /// Length in bytes.
            size: u64,
            /// Permission bits.
            mode: u32,
        },
        /// Something not copied, and why (a symlink, a socket).
        Skip {
            /// Path below the root.
            p: String,
            /// Why.
            why: String,
        },
        /// The list is complete.
        Listed,
        /// The receiver's partial files.
        Resume {
            /// One per partial file found.
            files: Vec<Partial>,
        },
        /// Content of file `p` follows, from `offset` (the receiver keeps that much of its
        /// partial file; 0: starts over).
        Data {
            /// Path below the root.
            p: String,
            /// Where the bytes start.
            offset: u64,
        },
        /// `n` zero bytes, not sent.
        Hole {
            /// How many.
            n: u64,
        },
        /// The file is complete; its SHA-256.
        Done {
            /// Lowercase hex.
            sha256: String,
        },
        /// Everything was sent.
        Finished,
        /// The receiver checked and placed everything.
        Ok {
            /// Where it went (the receiver's absolute path).
            dest: String,
        },
    }
}

/// A partial file the receiver has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partial {
    /// Path below the root.
    pub p: String,
    /// Bytes it holds.
    pub offset: u64,
    /// SHA-256 of those bytes.
    pub sha256: String,
}

/// How far a copy is (for a progress bar).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Bytes of content done (sent, skipped as already there, or holes).
    pub done: u64,
    /// Bytes of content in all.
    pub total: u64,
    /// Bytes that crossed the link as content.
    pub sent: u64,
    /// Bytes a resume did not send again.
    pub resumed: u64,
    /// Bytes sent as holes.
    pub holes: u64,
}

/// What a finished copy did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Files copied.
    pub files: u64,
    /// Directories made.
    pub dirs: u64,
    /// The byte counts at the end.
    pub progress: Progress,
    /// What was skipped, with why (`path: why`).
    pub skipped: Vec<String>,
    /// Where it went.
    pub dest: String,
}

/// Where a progress report goes.
pub type ProgressFn<'a> = &'a (dyn Fn(Progress) + Send + Sync);

/// The side that reads: which source paths it may read (the host: `forbid_read`, deny
/// rules). `Err` carries the message for the user.
pub type ReadCheck<'a> = &'a (dyn Fn(&Path) -> Result<(), String> + Send + Sync);

/// The side that writes: where the received tree may go. `place` gets the receiver's
/// destination (as given) and returns the checked absolute path; `check` is called for every
/// path that will be written (after the destination was decided) and returns it checked
/// (symlinks resolved), or why not.
pub trait Place: Send + Sync {
    /// The checked path of `dest` (relative paths as the side sees them).
    fn resolve(&self, dest: &str) -> Result<PathBuf, String>;
    /// The checked path for writing `path` (absolute, below the resolved destination).
    fn check(&self, path: &Path) -> Result<PathBuf, String>;
}

fn line(ctl: &Ctl) -> ChannelData {
    ChannelData::Line {
        line: serde_json::to_string(ctl).unwrap_or_default(),
        more: false,
    }
}

async fn put(tx: &ChannelSender, ctl: &Ctl) -> Result<(), String> {
    tx.send(line(ctl)).await.map_err(|e| e.to_string())
}

/// One piece from the other side: a control message or content.
enum Piece {
    Ctl(Ctl),
    Bytes(Vec<u8>),
}

async fn take(rx: &mut ChannelReceiver) -> Result<Piece, String> {
    match rx.recv().await {
        Some(ChannelData::Line { line, .. }) => {
            serde_json::from_str(&line).map(Piece::Ctl).map_err(|e| {
                format!("the other side sent a copy message this side cannot read ({e}): {line}")
            })
        }
        Some(ChannelData::Bytes { data }) => Ok(Piece::Bytes(data.0)),
        Some(_) => Err("the other side sent something that is not part of a copy".into()),
        None => Err(match rx.end() {
            Some(ChannelEnd::CancelledByPeer(r)) => r.clone(),
            Some(ChannelEnd::Cancelled(r)) => r.clone(),
            Some(end) => format!("the copy stopped early: {end}"),
            None => "the copy stopped early: the link closed".into(),
        }),
    }
}

async fn take_ctl(rx: &mut ChannelReceiver) -> Result<Ctl, String> {
    match take(rx).await? {
        Piece::Ctl(c) => Ok(c),
        Piece::Bytes(_) => {
            Err("the other side sent file bytes where a copy message belongs".into())
        }
    }
}

/// `rel` (`/`-separated, from the other side) as a relative path of plain names only.
pub fn safe_rel(rel: &str) -> Result<PathBuf, String> {
    let p = Path::new(rel);
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => {
                return Err(format!(
                    "the other side named {rel:?}, which is not a plain relative path; the copy was stopped"
                ))
            }
        }
    }
    Ok(out)
}

/// The partial file of `target`.
pub fn part_path(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(format!(".{name}{PART_SUFFIX}"))
}

#[cfg(unix)]
fn mode_of(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
fn mode_of(_meta: &std::fs::Metadata) -> u32 {
    0o644
}

/// Walk `root` (not following symlinks below it) into the list the sender announces.
fn list(root: &Path, recursive: bool, check: ReadCheck<'_>) -> Result<(bool, Vec<Ctl>), String> {
    let meta =
        std::fs::metadata(root).map_err(|e| format!("cannot read {}: {e}", root.display()))?;
    check(root)?;
    if meta.is_file() {
        return Ok((
            false,
            vec![Ctl::File {
                p: String::new(),
                size: meta.len(),
                mode: mode_of(&meta),
            }],
        ));
    }
    if !meta.is_dir() {
        return Err(format!(
            "{} is not a regular file or a directory",
            root.display()
        ));
    }
    if !recursive {
        return Err(format!(
            "{} is a directory: copy it with -r",
            root.display()
        ));
    }
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .filter_map(|e| e.ok())
            .collect();
        crate::sort::sort_by_key(&mut names, |e| e.file_name());
        let mut subdirs = Vec::new();
        for e in names {
            let r = rel.join(e.file_name());
            let p = r.to_string_lossy().replace('\\', "/");
            let path = root.join(&r);
            let meta = std::fs::symlink_metadata(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let ft = meta.file_type();
            if ft.is_symlink() {
                out.push(Ctl::Skip {
                    p,
                    why: "a symlink (symlinks are neither followed nor copied)".into(),
                });
                continue;
            }
            if let Err(why) = check(&path) {
                out.push(Ctl::Skip { p, why });
                continue;
            }
            if ft.is_dir() {
                out.push(Ctl::Dir {
                    p,
                    mode: mode_of(&meta),
                });
                subdirs.push(r);
            } else if ft.is_file() {
                out.push(Ctl::File {
                    p,
                    size: meta.len(),
                    mode: mode_of(&meta),
                });
            } else {
                out.push(Ctl::Skip {
                    p,
                    why: "not a regular file or a directory".into(),
                });
            }
        }
        // Depth first, in name order: push in reverse.
        stack.extend(subdirs.into_iter().rev());
    }
    Ok((true, out))
}

/// Send `source` (a file, or a directory with `recursive`) on `chan`, as the side that
/// reads. Returns once the receiver confirmed everything, or why not (the channel is
/// cancelled with that reason).
pub async fn send(
    chan: Channel,
    source: &Path,
    recursive: bool,
    check: ReadCheck<'_>,
    progress: ProgressFn<'_>,
) -> Result<Summary, String> {
    let Channel { tx, mut rx } = chan;
    let handle = tx.handle();
    let r = send_inner(&tx, &mut rx, source, recursive, check, progress).await;
    match r {
        Ok(s) => {
            tx.close(None).await;
            // The receiver closes its side after its confirmation: drain to that.
            while rx.recv().await.is_some() {}
            Ok(s)
        }
        Err(e) => {
            handle.cancel(e.clone());
            Err(e)
        }
    }
}

async fn send_inner(
    tx: &ChannelSender,
    rx: &mut ChannelReceiver,
    source: &Path,
    recursive: bool,
    check: ReadCheck<'_>,
    progress: ProgressFn<'_>,
) -> Result<Summary, String> {
    let (is_dir, entries) = {
        let source = source.to_path_buf();
        // The check borrows; the walk is quick enough to run here for the trees a user copies.
        list(&source, recursive, check)?
    };
    let name = source
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "copy".into());
    put(tx, &Ctl::Root { name, dir: is_dir }).await?;
    let mut summary = Summary::default();
    for e in &entries {
        match e {
            Ctl::File { size, .. } => summary.progress.total += size,
            Ctl::Dir { .. } => summary.dirs += 1,
            Ctl::Skip { p, why } => summary.skipped.push(format!("{p}: {why}")),
            _ => {}
        }
        put(tx, e).await?;
    }
    put(tx, &Ctl::Listed).await?;
    let partials = match take_ctl(rx).await? {
        Ctl::Resume { files } => files,
        other => {
            return Err(format!(
                "expected the receiver's resume list, got {other:?}"
            ))
        }
    };
    let mut prog = summary.progress;
    progress(prog);
    for e in &entries {
        let Ctl::File { p, size, .. } = e else {
            continue;
        };
        let path = if p.is_empty() {
            source.to_path_buf()
        } else {
            source.join(p)
        };
        let mut file = tokio::fs::File::open(&path)
            .await
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut hasher = Sha256::new();
        let mut offset = 0u64;
        if let Some(part) = partials.iter().find(|x| &x.p == p) {
            if part.offset > 0 && part.offset <= *size {
                let mut prefix = Sha256::new();
                let mut left = part.offset;
                let mut buf = vec![0u8; COPY_PIECE];
                while left > 0 {
                    let n = (left as usize).min(buf.len());
                    file.read_exact(&mut buf[..n])
                        .await
                        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                    prefix.update(&buf[..n]);
                    left -= n as u64;
                }
                if hex::encode(prefix.clone().finalize()) == part.sha256 {
                    hasher = prefix;
                    offset = part.offset;
                } else {
                    file.seek(std::io::SeekFrom::Start(0))
                        .await
                        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                }
            }
        }
        put(
            tx,
            &Ctl::Data {
                p: p.clone(),
                offset,
            },
        )
        .await?;
        prog.done += offset;
        prog.resumed += offset;
        let mut buf = vec![0u8; COPY_PIECE];
        let mut hole = 0u64;
        let mut at = offset;
        loop {
            let n = read_full(&mut file, &mut buf)
                .await
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            if n == 0 {
                break;
            }
            let chunk = &buf[..n];
            hasher.update(chunk);
            at += n as u64;
            // Zero blocks become holes; the rest goes as bytes.
            let mut start = 0;
            while start < n {
                let end = (start + HOLE_BLOCK).min(n);
                let block = &chunk[start..end];
                if block.iter().all(|b| *b == 0) {
                    hole += block.len() as u64;
                    start = end;
                    continue;
                }
                if hole > 0 {
                    put(tx, &Ctl::Hole { n: hole }).await?;
                    prog.holes += hole;
                    prog.done += hole;
                    hole = 0;
                }
                // Run of data blocks up to the next zero block.
                let mut stop = end;
                while stop < n {
                    let next = (stop + HOLE_BLOCK).min(n);
                    if chunk[stop..next].iter().all(|b| *b == 0) {
                        break;
                    }
                    stop = next;
                }
                let data = ChannelData::Bytes {
                    data: PtyBytes(chunk[start..stop].to_vec()),
                };
                tx.send(data).await.map_err(|e| e.to_string())?;
                prog.sent += (stop - start) as u64;
                prog.done += (stop - start) as u64;
                start = stop;
            }
            progress(prog);
        }
        if hole > 0 {
            put(tx, &Ctl::Hole { n: hole }).await?;
            prog.holes += hole;
            prog.done += hole;
        }
        if at != *size {
            return Err(format!(
                "{} changed while it was copied ({} bytes listed, {at} read); run the copy again",
                path.display(),
                size
            ));
        }
        put(
            tx,
            &Ctl::Done {
                sha256: hex::encode(hasher.finalize()),
            },
        )
        .await?;
        summary.files += 1;
        progress(prog);
    }
    put(tx, &Ctl::Finished).await?;
    match take_ctl(rx).await? {
        Ctl::Ok { dest } => summary.dest = dest,
        other => {
            return Err(format!(
                "expected the receiver's confirmation, got {other:?}"
            ))
        }
    }
    summary.progress = prog;
    Ok(summary)
}

async fn read_full(file: &mut tokio::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        let r = file.read(&mut buf[n..]).await?;
        if r == 0 {
            break;
        }
        n += r;
    }
    Ok(n)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_are_taken() {
        assert_eq!(safe_rel("a/b").unwrap(), PathBuf::from("a/b"));
        assert_eq!(safe_rel("./a").unwrap(), PathBuf::from("a"));
        for bad in ["../x", "/etc/passwd", "a/../../b"] {
            assert!(safe_rel(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn control_messages_round_trip() {
        for c in [
            Ctl::Root {
                name: "x".into(),
                dir: true,
            },
            Ctl::File {
                p: "a/b".into(),
                size: 3,
                mode: 0o644,
            },
            Ctl::Hole { n: 9 },
            Ctl::Resume {
                files: vec![Partial {
                    p: "a".into(),
                    offset: 1,
                    sha256: "00".into(),
                }],
            },
        ] {
            let s = serde_json::to_string(&c).unwrap();
            assert_eq!(serde_json::from_str::<Ctl>(&s).unwrap(), c, "{s}");
        }
    }

    #[test]
    fn the_partial_file_sits_beside_the_target() {
        assert_eq!(
            part_path(Path::new("/a/b.png")),
            PathBuf::from("/a/.b.png.reasonix-part")
        );
    }
}
