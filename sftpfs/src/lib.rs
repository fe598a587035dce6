//! `reasonix-sftpfs`: one async filesystem interface over SFTP and the local disk.
//!
//! Paths are strings, interpreted by the side that owns the filesystem: over SFTP a relative
//! path is relative to the login directory (the remote home).
//!
//! - [`Fs`], the trait (stat, read, read_dir, atomic write, streamed write, chmod, mkdir -p,
//!   rename, remove);
//! - [`LocalFs`], on `tokio::fs`;
//! - [`SftpFs`], an SFTP session (russh-sftp) over any byte stream, e.g. an SSH `sftp`
//!   subsystem channel.

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod local;
pub mod mode;
mod sftp;

use async_trait::async_trait;
use tokio::io::AsyncRead;

pub use local::LocalFs;
pub use sftp::SftpFs;

/// What kind of object a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (only from [`Fs::read_dir`]; `stat` follows links).
    Symlink,
    /// Anything else (socket, fifo, device).
    Other,
}

/// File metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metadata {
    /// Kind.
    pub kind: FileKind,
    /// Size in bytes.
    pub len: u64,
    /// Permission bits (`0o7777` part of the mode).
    pub mode: u32,
    /// Modification time, seconds since the epoch, when known.
    pub mtime: Option<u64>,
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// File name (no directory part).
    pub name: String,
    /// Its metadata (not following symlinks).
    pub meta: Metadata,
}

/// A filesystem error, with the operation and path.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The path does not exist.
    #[error("{op} {path}: no such file or directory")]
    NotFound {
        /// Operation.
        op: &'static str,
        /// Path.
        path: String,
    },
    /// Not allowed.
    #[error("{op} {path}: permission denied")]
    PermissionDenied {
        /// Operation.
        op: &'static str,
        /// Path.
        path: String,
    },
    /// Anything else.
    #[error("{op} {path}: {message}")]
    Other {
        /// Operation.
        op: &'static str,
        /// Path.
        path: String,
        /// Description.
        message: String,
    },
}

impl FsError {
    /// True for [`FsError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, FsError::NotFound { .. })
    }

    pub(crate) fn other(op: &'static str, path: &str, message: impl std::fmt::Display) -> Self {
        FsError::Other {
            op,
            path: path.to_string(),
            message: message.to_string(),
        }
    }
}

/// Progress callback for streamed writes: total bytes written so far.
pub type Progress<'a> = &'a (dyn Fn(u64) + Send + Sync);

/// An async filesystem.
#[async_trait]
pub trait Fs: Send + Sync {
    /// Metadata of `path` (following symlinks).
    async fn stat(&self, path: &str) -> Result<Metadata, FsError>;
    /// Whole contents of a file.
    async fn read(&self, path: &str) -> Result<Vec<u8>, FsError>;
    /// Entries of a directory (without `.` and `..`), sorted by name.
    async fn read_dir(&self, path: &str) -> Result<Vec<DirEntry>, FsError>;
    /// Replace `path` with `data` atomically: write a temp file in the same directory, set
    /// `mode`, rename over `path`. Readers see the old or the new contents, never a mix.
    async fn write_atomic(&self, path: &str, data: &[u8], mode: u32) -> Result<(), FsError>;
    /// Create or truncate `path` and stream `data` into it (not atomic); returns the bytes
    /// written. `progress` is called as data is acknowledged.
    async fn write_stream(
        &self,
        path: &str,
        data: &mut (dyn AsyncRead + Send + Unpin),
        mode: u32,
        progress: Progress<'_>,
    ) -> Result<u64, FsError>;
    /// Set permission bits.
    async fn chmod(&self, path: &str, mode: u32) -> Result<(), FsError>;
    /// Create a directory and its missing parents with `mode` (existing ones are kept).
    async fn mkdir_p(&self, path: &str, mode: u32) -> Result<(), FsError>;
    /// Rename, replacing an existing target.
    async fn rename(&self, from: &str, to: &str) -> Result<(), FsError>;
    /// Remove a file, a symlink, or a directory with everything in it.
    async fn remove(&self, path: &str) -> Result<(), FsError>;
}

/// Name for a temporary sibling of `path` (same directory, so rename stays atomic).
pub(crate) fn temp_sibling(path: &str) -> String {
    let (dir, name) = match path.rfind('/') {
        Some(i) => (&path[..=i], &path[i + 1..]),
        None => ("", path),
    };
    format!("{dir}.{name}.tmp-{:016x}", rand::random::<u64>())
}

/// Parent directories of `path`, outermost first (`a/b/c` → `a`, `a/b`, `a/b/c`).
pub(crate) fn prefixes(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let absolute = path.starts_with('/');
    let mut cur = String::new();
    for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
        if !cur.is_empty() || absolute {
            cur.push('/');
        }
        cur.push_str(part);
        out.push(cur.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(prefixes("/a/b/c"), vec!["/a", "/a/b", "/a/b/c"]);
        assert_eq!(prefixes("a//b/"), vec!["a", "a/b"]);
        let t = temp_sibling("/x/y/file");
        assert!(t.starts_with("/x/y/.file.tmp-"), "{t}");
        assert!(temp_sibling("f").starts_with(".f.tmp-"));
    }
}
